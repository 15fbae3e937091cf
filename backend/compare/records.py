"""Comparison records shared by running and storing: CodecComparison, a finished codec comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.compare.config import CompareConfig
from backend.compare.encode import Variant
from backend.compare.metrics import LumaSeries, PairMetrics, VariantMetrics
from backend.pipeline import SelectionOptions
from backend.records import _ShapeRepr


@dataclass(frozen=True, repr=False)
class CodecComparison(_ShapeRepr):
    """A finished comparison: the variants, their runs and every metric."""

    comparison_id: str
    source_path: str
    reference_path: str
    width: int
    height: int
    fps: float
    frame_count: int
    config: CompareConfig
    options: SelectionOptions
    variants: tuple[Variant, ...]
    metrics: tuple[VariantMetrics, ...]
    pairs: tuple[PairMetrics, ...]
    luma: tuple[LumaSeries, ...]
    settings: dict[str, Any]
    """Source facts, encode and reference settings, versions."""
    timings_secs: dict[str, float]


__all__ = ["CodecComparison"]
