"""Luma bias of streaming decoders: measure, report, fit, decoder pairs, stored analyses."""

from backend.luma.fit import (
    COEFFS_VERSION,
    FitConfig,
    FitResult,
    apply_correction,
    correct_frames,
    fit_and_evaluate,
    load_model,
    save_model,
)
from backend.luma.geometry import GopGeometry, LatentWindowGeometry, make_geometry
from backend.luma.measure import (
    MEASURE_WORKERS,
    MeasureConfig,
    Prefetch,
    StreamConfig,
    analyze_frames,
    analyze_videos,
    measure_frames,
    video_keyframes,
)
from backend.luma.pairs import (
    BATCH_COLUMNS,
    analyze_batch,
    analyze_pairs,
    fast_reader_pair,
    pair_by_name,
    roundtrip_pair,
)
from backend.luma.report import LumaAnalysis, LumaReport
from backend.luma.stored import apply_stored, fit_stored, open_analysis, open_fit, store_analysis

__all__ = [
    "BATCH_COLUMNS",
    "COEFFS_VERSION",
    "MEASURE_WORKERS",
    "FitConfig",
    "FitResult",
    "GopGeometry",
    "LatentWindowGeometry",
    "LumaAnalysis",
    "LumaReport",
    "MeasureConfig",
    "Prefetch",
    "StreamConfig",
    "analyze_batch",
    "analyze_frames",
    "analyze_pairs",
    "analyze_videos",
    "apply_correction",
    "apply_stored",
    "correct_frames",
    "fast_reader_pair",
    "fit_and_evaluate",
    "fit_stored",
    "load_model",
    "make_geometry",
    "measure_frames",
    "open_analysis",
    "open_fit",
    "pair_by_name",
    "roundtrip_pair",
    "save_model",
    "store_analysis",
    "video_keyframes",
]
