"""Codec comparison: encode one source in several codecs, select on each, measure agreement."""

from backend.compare.run import (
    CODECS,
    FALLBACK_SCORES,
    HEATMAP_SCALES,
    SPEEDS,
    CodecComparison,
    CompareConfig,
    StoredComparison,
    cell_area_px,
    compare,
    heatmap_normaliser,
    kept_mask_at,
    load_comparison,
    parse_crf,
    signal_family,
)

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
    "heatmap_normaliser",
    "kept_mask_at",
    "load_comparison",
    "parse_crf",
    "signal_family",
]
