"""Comparisons: one source in several codecs (``run``), or one video under several selectors."""

from backend.compare.config import CODECS, FALLBACK_SCORES, SPEEDS, CompareConfig, parse_crf
from backend.compare.encode import default_output_dir
from backend.compare.metrics import (
    HEATMAP_SCALES,
    cell_area_px,
    heatmap_normaliser,
    kept_mask_at,
    signal_family,
)
from backend.compare.records import CodecComparison
from backend.compare.run import compare
from backend.compare.selectors import (
    SelectorComparison,
    SelectorEntry,
    compare_selectors,
    kept_mask_into,
    kept_mask_on,
    parse_entries,
)
from backend.compare.stored import StoredComparison, load_comparison

__all__ = [
    "CODECS",
    "FALLBACK_SCORES",
    "HEATMAP_SCALES",
    "SPEEDS",
    "CodecComparison",
    "CompareConfig",
    "SelectorComparison",
    "SelectorEntry",
    "StoredComparison",
    "cell_area_px",
    "compare",
    "compare_selectors",
    "default_output_dir",
    "heatmap_normaliser",
    "kept_mask_at",
    "kept_mask_into",
    "kept_mask_on",
    "load_comparison",
    "parse_crf",
    "parse_entries",
    "signal_family",
]
