"""Luma-bias analyses and fits in the session store: records to table rows and back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import native
from backend import __version__
from backend.errors import InputError, StoreError
from backend.luma.fit import (
    COEFFS_FORMAT,
    COEFFS_VERSION,
    CorrectionModel,
    FitConfig,
    FitResult,
    apply_correction,
    fit_and_evaluate,
    model_from_json,
    save_model,
)
from backend.luma.geometry import GopGeometry, LumaGeometry, geometry_from_dict
from backend.luma.measure import MeasureConfig, analyze_videos, video_keyframes
from backend.luma.records import FrameLuma
from backend.luma.report import LumaAnalysis, LumaReport, summarize
from backend.runs import content_sha256
from backend.store import SessionStore

SOURCES: tuple[str, ...] = ("analyze", "fast-reader", "corrected")
"""How a stored analysis came about: a plain analysis, cvp's fast-reader pair, a corrected video."""


@dataclass(frozen=True)
class StoredAnalysis:
    """A reopened analysis with the inputs and settings it was measured with."""

    analysis_id: str
    analysis: LumaAnalysis
    source: str
    test_path: str
    reference_path: str
    official_path: str | None
    config: MeasureConfig
    fit_id: str | None
    """The fit whose correction produced the test video (``source`` = corrected)."""
    created_at: datetime | None

    @property
    def geometry(self) -> LumaGeometry:
        return geometry_from_dict(self.analysis.geometry)


# --------------------------------------------------------------------------- analyses


def _hash(path: str) -> str | None:
    p = Path(path)
    return content_sha256(p) if p.is_file() else None


def frame_rows(report: LumaReport) -> pd.DataFrame:
    """``luma_frames`` rows of one report: per-frame figures, slot layout and cell arrays.

    Returns
    -------
    DataFrame with one row per paired frame; ``test_cells`` / ``diff_cells`` hold the
    (rows, cols, 3) float32 cell means as bytes.
    """
    f, layout = report.frames, report.layout
    n = len(f)
    return pd.DataFrame(
        {
            "reference_label": [f.reference_label] * n,
            "frame_index": f.frame_index.astype(np.int32),
            "reference_index": f.reference_index.astype(np.int32),
            "bias": f.bias,
            "psnr_db": f.psnr_db,
            "y_mse": f.y_mse,
            "test_mean_rgb": list(f.test_mean_rgb),
            "reference_mean_rgb": list(f.reference_mean_rgb),
            "slot": layout.slot.astype(np.int32),
            "position": layout.position.astype(np.int32),
            "latent": layout.latent.astype(np.int32),
            "chunk": layout.chunk.astype(np.int32),
            "in_chunk": layout.in_chunk.astype(np.int32),
            "is_boundary": layout.is_boundary,
            "is_steady": layout.is_steady,
            "test_cells": [np.ascontiguousarray(c, np.float32).tobytes() for c in f.test_cells],
            "diff_cells": [np.ascontiguousarray(c, np.float32).tobytes() for c in f.diff_cells],
        }
    )


def slot_rows(report: LumaReport) -> pd.DataFrame:
    """``luma_slots`` rows: the by-slot table (position −1) then the by-(slot, position) table."""
    parts = []
    for table in (report.slots, report.slot_positions):
        parts.append(
            pd.DataFrame(
                {
                    "reference_label": [report.frames.reference_label] * table.slot.shape[0],
                    "slot": table.slot.astype(np.int32),
                    "position": table.position.astype(np.int32),
                    "count": table.count.astype(np.int64),
                    "mean": table.mean,
                    "std": table.std,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def gain_rows(report: LumaReport) -> pd.DataFrame:
    """``luma_gains`` rows: per-slot d ≈ a + b·x over cell luma."""
    g = report.gain
    return pd.DataFrame(
        {
            "reference_label": [report.frames.reference_label] * g.slot.shape[0],
            "slot": g.slot.astype(np.int32),
            "a": g.a,
            "b": g.b,
            "cells": g.cells.astype(np.int64),
            "rms_residual": g.rms_residual,
        }
    )


def store_analysis(
    store: SessionStore,
    analysis: LumaAnalysis,
    *,
    config: MeasureConfig | None = None,
    source: str = "analyze",
    fit_id: str | None = None,
) -> str:
    """Store an analysis (inputs with content hashes, geometry, settings, summaries, rows).

    Parameters
    ----------
    store : the session store.
    analysis : from ``analyze_videos`` (or ``analyze_frames`` with file names).
    config : the measure settings (default: offset and cell from the frames, truncate off).
    source : one of ``SOURCES``.
    fit_id : the fit that produced the test video, for corrected videos.

    Returns
    -------
    The new analysis id.
    """
    if source not in SOURCES:
        choices = ", ".join(map(repr, SOURCES))
        raise ValueError(f"Invalid source ({source!r}). Supported values are {choices}.")
    first = analysis.report.frames
    config = config or MeasureConfig(offset=first.offset, cell=first.cell)
    by_label = {r.frames.reference_label: r for r in analysis.reports}
    official = by_label.get("official")
    summary = analysis.report.summary()
    row: dict[str, Any] = {
        "source": source,
        "test_path": analysis.test_name,
        "test_sha256": _hash(analysis.test_name),
        "reference_path": first.reference_name,
        "reference_sha256": _hash(first.reference_name),
        "official_path": None if official is None else official.frames.reference_name,
        "official_sha256": None if official is None else _hash(official.frames.reference_name),
        "geometry_json": analysis.geometry,
        "keyframes_json": list(analysis.keyframes),
        "config_json": {"offset": config.offset, "truncate": config.truncate, "cell": config.cell},
        "width": first.width,
        "height": first.height,
        "cell": first.cell,
        "offset": first.offset,
        "truncated": first.truncated,
        "frames": len(first),
        **{k: summary[k] for k in ("p95_all", "p95_steady", "jump_0_1", "mean_bias", "mean_abs_bias")},
        "y_psnr_db": summary["y_psnr_db"],
        "summaries_json": [
            {"label": r.frames.reference_label, "reference": r.frames.reference_name, **r.summary()}
            for r in analysis.reports
        ],
        "versions_json": {"codec_lens": __version__, **native.versions()},
        "fit_id": fit_id,
    }
    tables = {
        "luma_frames": pd.concat([frame_rows(r) for r in analysis.reports], ignore_index=True),
        "luma_slots": pd.concat([slot_rows(r) for r in analysis.reports], ignore_index=True),
        "luma_gains": pd.concat([gain_rows(r) for r in analysis.reports], ignore_index=True),
    }
    return store.insert_luma_analysis(row, tables)


def open_analysis(store: SessionStore, analysis_id: str) -> StoredAnalysis:
    """Rebuild a stored analysis: per-frame measurements from the rows, summaries recomputed.

    Raises
    ------
    StoreError : no such analysis, or its rows are missing.
    """
    row = store.luma_analysis(analysis_id)
    frames = store.luma_table("luma_frames", analysis_id)
    geometry = geometry_from_dict(row["geometry"])
    keyframes = tuple(int(k) for k in row["keyframes"] or ())
    labels = [s["label"] for s in row["summaries"]]
    names = {s["label"]: s["reference"] for s in row["summaries"]}
    reports = []
    layout = None
    for label in labels:
        part = frames[frames["reference_label"] == label]
        if part.empty:
            message = f"analysis {analysis_id} has no frame rows against its {label}"
            raise StoreError(message, path=store.path, stage="store")
        grid = (len(part), row["height"] // row["cell"], row["width"] // row["cell"], 3)
        measured = FrameLuma(
            test_name=row["test_path"],
            reference_name=names[label],
            reference_label=label,
            height=int(row["height"]),
            width=int(row["width"]),
            cell=int(row["cell"]),
            offset=int(row["offset"]),
            truncated=bool(row["truncated"]),
            frame_index=part["frame_index"].to_numpy(np.int64),
            reference_index=part["reference_index"].to_numpy(np.int64),
            test_mean_rgb=_rgb(part["test_mean_rgb"]),
            reference_mean_rgb=_rgb(part["reference_mean_rgb"]),
            y_mse=part["y_mse"].to_numpy(np.float64),
            test_cells=_cells(part["test_cells"], grid),
            diff_cells=_cells(part["diff_cells"], grid),
        )
        if layout is None:
            uses_keys = isinstance(geometry, GopGeometry) and geometry.every == 0
            layout = geometry.assign(measured.frame_index, keyframes=keyframes if uses_keys else None)
        reports.append(summarize(measured, layout))
    config = row["config"] or {}
    return StoredAnalysis(
        analysis_id=analysis_id,
        analysis=LumaAnalysis(
            test_name=row["test_path"],
            geometry=dict(row["geometry"]),
            keyframes=keyframes,
            reports=tuple(reports),
        ),
        source=row["source"],
        test_path=row["test_path"],
        reference_path=row["reference_path"],
        official_path=row["official_path"],
        config=MeasureConfig(
            offset=int(config.get("offset", row["offset"])),
            truncate=bool(config.get("truncate", False)),
            cell=int(config.get("cell", row["cell"])),
        ),
        fit_id=row["fit_id"],
        created_at=row["created_at"],
    )


def _rgb(column: pd.Series) -> np.ndarray:
    return np.stack(column.to_numpy()).astype(np.float64).reshape(-1, 3)


def _cells(column: pd.Series, grid: tuple[int, int, int, int]) -> np.ndarray:
    if grid[0] == 0 or grid[1] * grid[2] == 0:
        return np.zeros(grid, np.float32)
    return np.frombuffer(b"".join(bytes(b) for b in column), dtype=np.float32).reshape(grid).copy()


def list_analyses(store: SessionStore) -> list[dict[str, Any]]:
    """Stored analyses, newest first (``luma_analyses`` rows as dicts)."""
    return store.list_luma_analyses()


# --------------------------------------------------------------------------- fits


def _common_geometry(analyses: Sequence[StoredAnalysis]) -> LumaGeometry:
    kinds = {json.dumps(a.analysis.geometry, sort_keys=True) for a in analyses}
    if len(kinds) != 1:
        ids = ", ".join(f"{a.analysis_id} ({a.analysis.geometry['name']})" for a in analyses)
        raise InputError(f"analyses were measured with different geometries: {ids}")
    return analyses[0].geometry


def fit_stored(
    store: SessionStore,
    train_ids: Sequence[str],
    test_ids: Sequence[str],
    *,
    coeffs_path: str | Path,
    config: FitConfig | None = None,
) -> tuple[str, FitResult]:
    """Fit the correction on stored analyses, save the coefficients file and store the fit.

    Parameters
    ----------
    train_ids, test_ids : stored analyses (split by clip: the same test video may not be in both).
    coeffs_path : where the versioned coefficients JSON is written.

    Returns
    -------
    (fit id, FitResult with the held-out evaluation when test_ids is not empty).

    Raises
    ------
    InputError : no training analysis, an id in both sets, or analyses of different geometries.
    """
    if not train_ids:
        raise InputError("choose at least one analysis to train on")
    both = sorted(set(train_ids) & set(test_ids))
    if both:
        raise InputError(f"analyses are in both the training and the test set: {', '.join(both)}")
    train = [open_analysis(store, i) for i in train_ids]
    test = [open_analysis(store, i) for i in test_ids]
    geometry = _common_geometry([*train, *test])
    train_reports = [a.analysis.report for a in train]
    test_reports = [a.analysis.report for a in test]
    result = fit_and_evaluate(train_reports, test_reports, geometry=geometry, config=config)
    path = save_model(result.model, coeffs_path)
    fit_id = store_fit(store, result, coeffs_path=path, train_ids=train_ids, test_ids=test_ids)
    return fit_id, result


def store_fit(
    store: SessionStore,
    result: FitResult,
    *,
    coeffs_path: str | Path | None,
    train_ids: Sequence[str] = (),
    test_ids: Sequence[str] = (),
) -> str:
    """Store a fit: its coefficients (the JSON file's content and path), analyses and evaluation."""
    model = result.model
    return store.insert_luma_fit(
        {
            "coeffs_format": COEFFS_FORMAT,
            "coeffs_version": COEFFS_VERSION,
            "coeffs_path": None if coeffs_path is None else str(coeffs_path),
            "coeffs_json": model.to_json(),
            "coefficient_count": model.coefficient_count,
            "geometry_json": model.geometry.to_dict(),
            "cell": model.cell,
            "train_json": list(train_ids),
            "test_json": list(test_ids),
            "evaluation_json": None if result.evaluation is None else result.evaluation.rows(),
            "versions_json": {"codec_lens": __version__},
        }
    )


def open_fit(store: SessionStore, fit_id: str) -> CorrectionModel:
    """The stored fit's model, checked like a coefficients file (format, version, shapes)."""
    row = store.luma_fit(fit_id)
    return model_from_json(row["coeffs"], source=f"stored fit {fit_id}")


@dataclass(frozen=True)
class AppliedFit:
    """A corrected video and the analyses before and after correction."""

    corrected: Path
    before: LumaAnalysis
    after: LumaAnalysis
    after_id: str


def apply_stored(
    store: SessionStore,
    fit_id: str,
    analysis_id: str,
    *,
    test: str | Path,
    reference: str | Path,
    official: str | Path | None,
    out: str | Path,
    lossless: bool = False,
) -> AppliedFit:
    """Correct the test video of a stored analysis with a stored fit and re-measure it.

    ``before`` is the stored analysis re-summarised with the fit's geometry (no decode);
    ``after`` measures the corrected video against the same references, settings and (GOP)
    keyframes of the original test, and is stored with source ``corrected``.

    Parameters
    ----------
    test, reference, official : the stored analysis's inputs, as resolved by the caller.
    out : the corrected video to write.
    """
    model = open_fit(store, fit_id)
    stored = open_analysis(store, analysis_id)
    keyframes: tuple[int, ...] | None = None
    if isinstance(model.geometry, GopGeometry) and model.geometry.every == 0:
        keyframes = stored.analysis.keyframes or video_keyframes(test)
    reports = []
    for report in stored.analysis.reports:
        layout = model.geometry.assign(report.frames.frame_index, keyframes=keyframes)
        reports.append(summarize(report.frames, layout))
    before = LumaAnalysis(
        test_name=stored.analysis.test_name,
        geometry=model.geometry.to_dict(),
        keyframes=keyframes or (),
        reports=tuple(reports),
    )
    corrected = apply_correction(model, test, out, lossless=lossless)
    after = analyze_videos(
        corrected,
        reference,
        official=official,
        geometry=model.geometry,
        config=stored.config,
        keyframes=keyframes,
    )
    after_id = store_analysis(store, after, config=stored.config, source="corrected", fit_id=fit_id)
    return AppliedFit(corrected=Path(corrected), before=before, after=after, after_id=after_id)
