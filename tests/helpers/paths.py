"""Where the repository, its real clips and the bundled sample video are."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The real clips live in the repository, so a bare clone runs every test.
REAL_CLIPS = REPO_ROOT / "tests" / "data"
# What tests/data ships (its README gives provenance and checksums); a missing one fails the tests.
REAL_CLIP_NAMES = (
    "real_h264_film_friday.mp4",
    "real_h264_flower_timelapse.mp4",
    "real_h264_static_parkinglot.mp4",
    "real_hevc_bbb_1080p.ts",
)
# The bundled sample the view tests run (the same file as tests/data/real_h264_flower_timelapse.mp4).
SAMPLE_VIDEO = REPO_ROOT / "sample_videos" / "flower_timelapse_cc0.mp4"
