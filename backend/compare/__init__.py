"""Codec comparison: encode one source in several codecs, select on each, measure agreement."""

from backend.compare.config import CODECS, FALLBACK_SCORES, SPEEDS, CompareConfig, parse_crf
from backend.compare.encode import default_output_dir
from backend.compare.metrics import (
    HEATMAP_SCALES,
    cell_area_px,
    heatmap_normaliser,
    kept_mask_at,
    signal_family,
)
from backend.compare.run import CodecComparison, compare
from backend.compare.stored import StoredComparison, load_comparison

__all__ = [
    "CODECS",
    "FALLBACK_SCORES",
    "HEATMAP_SCALES",
    "SPEEDS",
    "CodecComparison",
    "CompareConfig",
    "StoredComparison",
    "cell_area_px",
    "compare",
    "default_output_dir",
    "heatmap_normaliser",
    "kept_mask_at",
    "load_comparison",
    "parse_crf",
    "signal_family",
]
