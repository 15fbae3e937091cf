"""Export orchestration: rows to export, then clip, tables, YUView and figures, then the JSON sidecar."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import native
from backend import __version__
from backend.cvp_format import jsonable
from backend.errors import OutputError
from backend.export.clip import clip_fps, clip_pane_sizes, write_clip
from backend.export.config import CLIP_FORMATS, ExportConfig, ExportRun
from backend.export.figures import write_figures
from backend.export.tables import (
    BLOCKS_CSV_COLUMNS,
    BLOCKS_CSV_SCHEMA_VERSION,
    FRAMES_CSV_COLUMNS,
    FRAMES_CSV_SCHEMA_VERSION,
    blocks_table,
    frames_table,
)
from backend.export.yuview import YUVIEW_SCORE_SCALE, YUVIEW_SELECTION, YUVIEW_TYPES, yuview_text
from backend.paths import resolve_within
from backend.pipeline import RunResult
from backend.render import crop_slices
from backend.runs import content_sha256

SIDECAR_SCHEMA_VERSION = 2
"""2: ``view`` (the viewer's settings the clip was drawn with) and the clip's ``pane_crops``."""


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote."""

    files: tuple[Path, ...]
    """Every file written, the sidecar last."""
    sidecar: Path
    frame_indices: tuple[int, ...]
    """frame_index of each exported frame of the first run, in clip order."""
    frame_size: tuple[int, int] | None
    """(height, width) of the clip's frames (None without a clip)."""
    timings_secs: dict[str, float]


# -- rows --------------------------------------------------------------------------------------


def export_rows(result: RunResult, frames: tuple[int, int | None] | None) -> np.ndarray:
    """Candidate rows whose frame_index lies in ``frames``, in pipeline order.

    Returns
    -------
    (k,) int64 rows; repeated candidates appear once per row.

    Raises
    ------
    ValueError : no candidate lies in the range.
    """
    fids = result.candidates.frame_indices.astype(np.int64)
    if frames is None:
        return np.arange(fids.size)
    start, stop = frames
    mask = fids >= start
    if stop is not None:
        mask &= fids < stop
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        span = f"{int(fids.min())} to {int(fids.max())}" if fids.size else "none"
        raise ValueError(
            f"Invalid frames ({start}:{'' if stop is None else stop}). Supported values cover the "
            f"run's candidate frame_index {span}."
        )
    return rows


def export_groups(result: RunResult, frames: tuple[int, int | None] | None) -> list[int]:
    """group_index of every group with a candidate frame in ``frames`` (all groups for None), in order."""
    fids = result.candidates.frame_indices.astype(np.int64)
    out = []
    for spec in result.groups.specs:
        inside = fids[spec.start : spec.end]
        if frames is not None:
            start, stop = frames
            mask = inside >= start
            if stop is not None:
                mask &= inside < stop
            inside = inside[mask]
        if inside.size:
            out.append(int(spec.group_index))
    return out


def align_rows(primary: RunResult, rows: np.ndarray, other: RunResult) -> list[int | None]:
    """For each primary row, the row of ``other`` showing the same frame_index (None when absent).

    A frame sampled twice pairs with the other run's occurrences in order.
    """
    queues: dict[int, list[int]] = {}
    for row, fid in enumerate(other.candidates.frame_indices.tolist()):
        queues.setdefault(int(fid), []).append(row)
    out: list[int | None] = []
    for fid in primary.candidates.frame_indices[rows].tolist():
        q = queues.get(int(fid))
        out.append(q.pop(0) if q else None)
    return out


# -- the export --------------------------------------------------------------------------------


def export_versions() -> dict[str, Any]:
    """Versions of codec-lens, cvp, PyAV and FFmpeg (libavcodec) at export time."""
    v = native.versions()
    return {
        "codec_lens": __version__,
        "codec_video_prep": v.get("codec_video_prep"),
        "cvp_ffmpeg": v.get("cvp_ffmpeg"),
        "pyav": v.get("pyav"),
        "ffmpeg_libavcodec": v.get("pyav_libavcodec"),
    }


def _run_entry(run: ExportRun, rows: np.ndarray) -> dict[str, Any]:
    result = run.result
    video = Path(run.video_path)
    info = result.info
    return {
        "run_id": run.run_id,
        "video_path": run.video_path,
        "video_sha256": content_sha256(video) if video.is_file() else None,
        "video_size_bytes": video.stat().st_size if video.is_file() else None,
        "codec_name": info.codec_name,
        "width": info.width,
        "height": info.height,
        "fps": info.fps,
        "total_frames": info.total_frames,
        "processed_hw": list(result.geometry.processed_hw),
        "patch": result.geometry.patch,
        "block_size": result.geometry.block_size,
        "config": run.config,
        "versions_at_run": run.versions,
        "cache_key": run.cache_key,
        "candidate_rows": rows.tolist(),
        "frame_indices": result.candidates.frame_indices[rows].tolist(),
    }


def _resolve_out(path: str | Path, config: ExportConfig) -> Path:
    """An output path, absolute: inside ``config.allowed_roots`` (OutputError otherwise), or, with
    no sandbox (the CLI), wherever it points (relative to the current directory)."""
    if config.allowed_roots is not None:
        return resolve_within(path, config.allowed_roots, kind="output")
    text = str(path).strip()
    if not text or "\x00" in text:
        raise OutputError("is not a usable path", path=repr(text), stage="paths")
    return Path(text).expanduser().resolve()


def _out_paths(config: ExportConfig) -> tuple[Path, Path, Path]:
    """(clip path, companion stem, sidecar) — each refused outside ``allowed_roots`` when given."""
    out = _resolve_out(config.out_path, config)
    fmt = config.format
    suffix = out.suffix.lower().lstrip(".")
    if fmt in ("mp4", "webm", "gif"):
        if suffix in CLIP_FORMATS and suffix != fmt:
            raise ValueError(
                f"Invalid out path ({str(config.out_path)!r}) for format {fmt}. "
                f"Supported values end in .{fmt}."
            )
        clip = out if suffix == fmt else out.with_name(out.name + f".{fmt}")
    else:
        clip = out
    stem = clip.with_suffix("") if clip.suffix.lower().lstrip(".") in CLIP_FORMATS else clip
    sidecar = _resolve_out(str(clip) + ".json", config)
    return clip, stem, sidecar


def write_export(
    runs: Sequence[ExportRun],
    *,
    config: ExportConfig,
    figures: Mapping[str, Any] | None = None,
    on_progress: Callable[[float], None] | None = None,
) -> ExportResult:
    """Export a run (and runs to compare with it, side by side) as files plus a JSON sidecar.

    Parameters
    ----------
    runs : the run first, then up to three runs to put beside it (aligned by frame_index).
    config : what to write and where (inside ``config.allowed_roots`` when given).
    figures : name → plotly figure, written in ``config.plot_formats``.
    on_progress : called with the fraction of clip frames written.

    Returns
    -------
    ExportResult with every file written; the sidecar ``<clip>.json`` records the export
    config, frame range and frame indices, each run's stored config and versions, the
    versions now, the sha256 of each input video and of each file written.

    Raises
    ------
    ValueError : bad frame range (no candidate in it), too many runs, a mismatched suffix.
    OutputError : a path outside the allowed folder, or a file that cannot be written (a full
        disk: what the export had written is removed again, as it is when interrupted).
    """
    made: list[Path] = []  # what this export writes, in order: removed again if it fails
    try:
        return _write_export(runs, config, figures, on_progress, made)
    except BaseException:
        _remove_made(made)
        raise


def _remove_made(made: Sequence[Path]) -> None:
    """Remove the files (and the emptied folders) a failed export made, newest first."""
    for path in reversed(made):
        try:
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        except OSError:
            pass  # a folder that holds other files stays


def _write_export(
    runs: Sequence[ExportRun],
    config: ExportConfig,
    figures: Mapping[str, Any] | None,
    on_progress: Callable[[float], None] | None,
    made: list[Path],
) -> ExportResult:
    if not 1 <= len(runs) <= 4:
        raise ValueError(f"Invalid run count ({len(runs)}). Supported values are 1 to 4.")
    t_start = time.perf_counter()
    clip_path, stem, sidecar = _out_paths(config)
    primary = runs[0].result
    rows = export_rows(primary, config.frames)
    aligned = [rows.tolist()] + [align_rows(primary, rows, r.result) for r in runs[1:]]
    if config.format == "png" and clip_path.suffix.lower() == ".png" and rows.size != 1:
        raise ValueError(
            f"Invalid out path ({str(config.out_path)!r}) for {rows.size} png frames. Supported values are "
            "a folder (no .png suffix), or a .png file for a one-frame range."
        )
    clip_path.parent.mkdir(parents=True, exist_ok=True)
    if config.format == "png" and clip_path.suffix.lower() != ".png" and not clip_path.exists():
        made.append(clip_path)  # the png folder, removed when the export fails and leaves it empty
    written = _Written()
    try:
        if config.format != "none":
            t0 = time.perf_counter()
            written.frame_size, clip_files = write_clip(runs, aligned, clip_path, config, on_progress)
            made += clip_files
            written.files += [(p, "clip") for p in clip_files]
            written.timings_secs["clip"] = time.perf_counter() - t0
        if config.tables:
            _write_tables(runs, aligned, stem, config, made, written)
        if config.yuview:
            _write_yuview(runs, aligned, stem, config, made, written)
        if figures:
            _write_figure_files(figures, stem, config, made, written)
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(
            f"cannot write the export ({exc.strerror or exc})", path=exc.filename or clip_path
        ) from exc
    written.timings_secs["total"] = time.perf_counter() - t_start
    sidecar_data = _sidecar_data(runs, aligned, rows, config, written, sidecar)
    made.append(sidecar)
    try:
        sidecar.write_text(json.dumps(jsonable(sidecar_data), indent=2))
    except OSError as exc:
        raise OutputError(f"cannot write the sidecar ({exc.strerror or exc})", path=sidecar) from exc
    return ExportResult(
        files=(*(p for p, _ in written.files), sidecar),
        sidecar=sidecar,
        frame_indices=tuple(primary.candidates.frame_indices[rows].tolist()),
        frame_size=written.frame_size,
        timings_secs=written.timings_secs,
    )


@dataclass
class _Written:
    """What an export has written so far; each part appends to it as it goes."""

    files: list[tuple[Path, str]] = field(default_factory=list)
    """(path, sidecar role) of every file, in the order written."""
    frame_size: tuple[int, int] | None = None
    """(height, width) of the clip's frames (None without a clip)."""
    timings_secs: dict[str, float] = field(default_factory=dict)
    """Seconds per part (``clip``, ``tables``, ``yuview``, ``figures``), then ``total``."""


def _write_tables(
    runs: Sequence[ExportRun],
    aligned: Sequence[Sequence[int | None]],
    stem: Path,
    config: ExportConfig,
    made: list[Path],
    written: _Written,
) -> None:
    """``<stem>.frames.csv`` and ``<stem>.blocks.csv``: every run's rows, one table each."""
    t0 = time.perf_counter()
    frames_csv = _resolve_out(f"{stem}.frames.csv", config)
    blocks_csv = _resolve_out(f"{stem}.blocks.csv", config)
    made += [frames_csv, blocks_csv]
    per_run = [_run_rows(a) for a in aligned]
    pd.concat([frames_table(r, rr) for r, rr in zip(runs, per_run, strict=True)]).to_csv(
        frames_csv, index=False
    )
    pd.concat([blocks_table(r, rr) for r, rr in zip(runs, per_run, strict=True)]).to_csv(
        blocks_csv, index=False
    )
    written.files += [(frames_csv, "frames_csv"), (blocks_csv, "blocks_csv")]
    written.timings_secs["tables"] = time.perf_counter() - t0


def _write_yuview(
    runs: Sequence[ExportRun],
    aligned: Sequence[Sequence[int | None]],
    stem: Path,
    config: ExportConfig,
    made: list[Path],
    written: _Written,
) -> None:
    """One YUView statistics file per run: ``<stem>.yuview.csv``, then ``<stem>.<run_id>.yuview.csv``."""
    t0 = time.perf_counter()
    for k, (run, a) in enumerate(zip(runs, aligned, strict=True)):
        name = f"{stem}.yuview.csv" if k == 0 else f"{stem}.{run.run_id}.yuview.csv"
        path = _resolve_out(name, config)
        made.append(path)
        path.write_text(yuview_text(run, _run_rows(a), coordinates=config.yuview_coordinates))
        written.files.append((path, "yuview_csv"))
    written.timings_secs["yuview"] = time.perf_counter() - t0


def _write_figure_files(
    figures: Mapping[str, Any], stem: Path, config: ExportConfig, made: list[Path], written: _Written
) -> None:
    """``<stem>.<name>.<format>`` for each figure and each of ``config.plot_formats``."""
    t0 = time.perf_counter()
    # write_figures' names: a failure part-way leaves some of them written.
    made += [stem.parent / f"{stem.name}.{n}.{f}" for n in figures for f in config.plot_formats]
    paths = write_figures(
        figures,
        stem,
        formats=config.plot_formats,
        chromium_path=config.chromium_path,
        width_px=config.figure_width_px,
        height_px=config.figure_height_px,
        png_scale=config.figure_png_scale,
    )
    written.files += [(p, "figure") for p in paths]
    written.timings_secs["figures"] = time.perf_counter() - t0


def _sidecar_data(
    runs: Sequence[ExportRun],
    aligned: Sequence[Sequence[int | None]],
    rows: np.ndarray,
    config: ExportConfig,
    written: _Written,
    sidecar: Path,
) -> dict[str, Any]:
    """The sidecar: config, frames, clip, runs, versions, schemas, timings, input and file hashes."""
    frames = config.frames
    sidecar_data = {
        "schema": "codec-lens/export",
        "schema_version": SIDECAR_SCHEMA_VERSION,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "export_config": dataclasses.asdict(config),
        # The viewer's settings, as the Inspect tab names them: the same values draw the same pixels.
        "view": config.view(),
        "frames": {
            "start": None if frames is None else frames[0],
            "stop": None if frames is None else frames[1],
            "count": int(rows.size),
            "frame_indices": runs[0].result.candidates.frame_indices[rows].tolist(),
        },
        "clip": _clip_entry(runs, config, written.frame_size),
        "runs": [_run_entry(r, _run_rows(a)) for r, a in zip(runs, aligned, strict=True)],
        "versions": export_versions(),
        "csv_schemas": {
            "frames": {"version": FRAMES_CSV_SCHEMA_VERSION, "columns": list(FRAMES_CSV_COLUMNS)},
            "blocks": {"version": BLOCKS_CSV_SCHEMA_VERSION, "columns": list(BLOCKS_CSV_COLUMNS)},
        },
        "yuview": {
            "types": YUVIEW_TYPES,
            "selection_values": YUVIEW_SELECTION,
            "score_scale": YUVIEW_SCORE_SCALE,
            "coordinates": config.yuview_coordinates,
        },
        "timings_secs": written.timings_secs,
    }
    runs_blob = json.dumps(
        [[e["run_id"], e["video_sha256"], e["config"]] for e in sidecar_data["runs"]], sort_keys=True
    )
    sidecar_data["inputs_sha256"] = hashlib.sha256(runs_blob.encode()).hexdigest()
    sidecar_data["files"] = [
        {
            "name": os.path.relpath(p, sidecar.parent),
            "role": role,
            "size_bytes": p.stat().st_size,
            "sha256": content_sha256(p),
        }
        for p, role in written.files
    ]
    return sidecar_data


def _clip_entry(
    runs: Sequence[ExportRun], config: ExportConfig, frame_size: tuple[int, int] | None
) -> dict[str, Any] | None:
    """The sidecar's ``clip``: its size and frame rate, and what the pictures under the overlays are."""
    if frame_size is None:
        return None
    sizes = clip_pane_sizes(runs, config)
    first_hw = runs[0].result.geometry.processed_hw
    return {
        "height": frame_size[0],
        "width": frame_size[1],
        "fps": float(clip_fps(runs[0].result, config.fps)),
        # Each run's video decoded again at its pane size (PyAV, deblocked), or the run's
        # processed frames (scaled when the pane differs).
        "pixels": "source_decode" if config.size == "source" else "processed_frames",
        "pane_sizes": [list(hw) for hw in sizes],
        # [x, y, width, height] of each drawn frame that its pane shows (the zoom crop).
        "pane_crops": [
            [cols.start, rows.start, cols.stop - cols.start, rows.stop - rows.start]
            for rows, cols in (crop_slices(config.crop, first_hw, hw) for hw in sizes)
        ],
    }


def _run_rows(aligned: Sequence[int | None]) -> np.ndarray:
    """The exported rows of one run (the aligned rows of a compared run, gaps dropped)."""
    return np.asarray([r for r in aligned if r is not None], np.int64)
