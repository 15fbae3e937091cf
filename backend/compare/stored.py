"""Stored comparisons: the rows a comparison is stored as, and StoredComparison read back."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from backend.errors import StoreError
from backend.store import SessionStore

if TYPE_CHECKING:  # annotations only: the records are built by run.py and selectors.py
    from backend.compare.metrics import PairMetrics
    from backend.compare.records import CodecComparison


def _record_rows(records: Sequence[Any], *, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    rows = []
    for rec in records:
        row = {}
        for f in dataclasses.fields(rec):
            if f.name in drop:
                continue
            value = getattr(rec, f.name)
            if isinstance(value, (dict, tuple, list)):
                value = json.dumps(value)
            row[f.name] = value
        rows.append(row)
    return pd.DataFrame(rows)


def comparison_row(comparison: CodecComparison, source_sha256: str) -> dict[str, Any]:
    """The ``comparisons`` row of a finished comparison."""
    return {
        "source_path": comparison.source_path,
        "source_sha256": source_sha256,
        "reference_path": comparison.reference_path,
        "width": comparison.width,
        "height": comparison.height,
        "fps": comparison.fps,
        "frame_count": comparison.frame_count,
        "config_json": json.dumps(comparison.config.as_dict()),
        "options_json": json.dumps(comparison.options.as_dict()),
        "settings_json": json.dumps(comparison.settings, default=str),
        "timings_json": json.dumps(comparison.timings_secs),
    }


PAIR_FRAME_COLUMNS = (
    "variant_a",
    "variant_b",
    "frame_index",
    "jaccard",
    "spearman",
    "kept_a",
    "kept_b",
    "kept_both",
)


def pair_frame_rows(pairs: Sequence[PairMetrics]) -> pd.DataFrame:
    """One row per (pair, frame) of ``pairs``: the comparison_pair_frames table of both comparison kinds."""
    return pd.concat(
        [pd.DataFrame({c: getattr(p, c) for c in PAIR_FRAME_COLUMNS}) for p in pairs],
        ignore_index=True,
    )


def comparison_tables(comparison: CodecComparison) -> dict[str, pd.DataFrame]:
    """Rows of the comparison tables: variants, metrics, pairs, per-frame pair and luma series."""
    variants = _record_rows(comparison.variants)
    variants = variants.rename(
        columns={"encoder_options": "encoder_options_json", "keyframe_indices": "keyframe_indices_json"}
    )
    pairs = pd.DataFrame([p.summary() for p in comparison.pairs]) if comparison.pairs else None
    pair_frames = pair_frame_rows(comparison.pairs) if comparison.pairs else None
    luma = pd.concat(
        [
            pd.DataFrame(
                {
                    "variant_index": s.variant_index,
                    "decoder": s.decoder,
                    "frame_index": s.frame_index,
                    "luma_bias": s.luma_bias,
                    "psnr_y_db": s.psnr_y_db,
                    "y_mse": s.y_mse,
                }
            )
            for s in comparison.luma
        ],
        ignore_index=True,
    )
    out = {
        "comparison_variants": variants,
        "comparison_metrics": _record_rows(comparison.metrics),
        "comparison_luma": luma,
    }
    if pairs is not None and pair_frames is not None:
        out["comparison_pairs"] = pairs
        out["comparison_pair_frames"] = pair_frames
    return out


@dataclass(frozen=True)
class StoredComparison:
    """A comparison read back from the store, as tables (column names = record fields)."""

    comparison_id: str
    row: dict[str, Any]
    variants: pd.DataFrame
    metrics: pd.DataFrame
    pairs: pd.DataFrame
    pair_frames: pd.DataFrame
    luma: pd.DataFrame
    coverage: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """Per run (selector comparisons): tokens, canvases, temporal and spatial coverage."""

    @property
    def kind(self) -> str:
        """``codecs`` (variants are encodes of one source) or ``selectors`` (runs of several selectors)."""
        return str(self.row.get("kind") or "codecs")

    @property
    def run_ids(self) -> list[str]:
        return [str(r) for r in self.metrics.sort_values("variant_index")["run_id"]]

    @property
    def labels(self) -> list[str]:
        return [str(r) for r in self.variants.sort_values("variant_index")["label"]]


def load_comparison(store: SessionStore, comparison_id: str) -> StoredComparison:
    """A stored, finished comparison and all its tables.

    Raises
    ------
    StoreError : unknown id, or the comparison failed.
    """
    row = store.get_comparison(comparison_id)
    if row["status"] != "done":
        raise StoreError(
            f"comparison {comparison_id} is {row['status']}: {row.get('error') or 'no error recorded'}",
            path=store.path,
            stage="compare",
        )
    tables = {name: store.comparison_table(name, comparison_id) for name in COMPARISON_TABLES}
    return StoredComparison(
        comparison_id=comparison_id,
        row=row,
        variants=tables["comparison_variants"],
        metrics=tables["comparison_metrics"],
        pairs=tables["comparison_pairs"],
        pair_frames=tables["comparison_pair_frames"],
        luma=tables["comparison_luma"],
        coverage=tables["comparison_coverage"],
    )


COMPARISON_TABLES: tuple[str, ...] = (
    "comparison_variants",
    "comparison_metrics",
    "comparison_pairs",
    "comparison_pair_frames",
    "comparison_luma",
    "comparison_coverage",
)
