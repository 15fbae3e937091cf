"""A small stored four-codec comparison of a real clip, shared by the comparison tests."""

from __future__ import annotations

from pathlib import Path

from backend.compare import CodecComparison, CompareConfig, compare
from backend.pipeline import SelectionOptions
from backend.store import SessionStore

# Cut and downscaled so the four encodes, four selections and the luma passes take a few seconds:
# 24 frames of the flower time-lapse at 320×180, a keyframe every 12 frames, every frame a candidate.
SMALL_CONFIG = CompareConfig(max_frames=24, max_side=320, gop=12)
SMALL_OPTIONS = SelectionOptions(frame_sampling_mode="all_frames")


def make_comparison(db: Path, source: Path, *, config: CompareConfig = SMALL_CONFIG) -> CodecComparison:
    """Encode, select, measure and store a comparison of ``source`` in the DuckDB file ``db``."""
    with SessionStore(db) as store:
        return compare(source, store, config=config, options=SMALL_OPTIONS, out_dir=db.parent / "encodes")
