"""Shared fixtures: encoded test clips, bad inputs, the real clips, one sample run and a CLI runner."""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from clips import encode_clip, make_bad_inputs

if TYPE_CHECKING:
    from backend.pipeline import RunResult

# Set before anything imports gradio or huggingface_hub, here and in every CLI subprocess.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

REPO_ROOT = Path(__file__).resolve().parents[1]
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


# The platforms pyproject.toml installs codec-video-prep on. There a broken install must fail
# the tests that need it, not skip them; elsewhere they are skipped.
CVP_PLATFORM = sys.platform == "linux" and platform.machine() == "x86_64" and sys.version_info[:2] == (3, 11)
if CVP_PLATFORM:
    importlib.import_module("codec_video_prep")  # an ImportError here stops the run with its cause

CVP_SKIP_REASON = "codec-video-prep's wheel exists for Linux x86-64 with CPython 3.11 only"
FFPROBE_SKIP_REASON = "ffprobe binary not installed; run scripts/setup.sh as root"

# The markers are the requirements: pytest_runtest_setup skips a test that carries one whose
# need is unmet, so `-m "not needs_cvp"` and the skip always select the same tests.
requires_cvp = pytest.mark.needs_cvp
requires_ffprobe = pytest.mark.needs_ffprobe


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a needs_cvp / needs_ffprobe test, before its fixtures run, where the need is unmet."""
    if item.get_closest_marker("needs_cvp") is not None and not CVP_PLATFORM:
        pytest.skip(CVP_SKIP_REASON)
    if item.get_closest_marker("needs_ffprobe") is not None and shutil.which("ffprobe") is None:
        pytest.skip(FFPROBE_SKIP_REASON)


def run_cli(*args: str | os.PathLike[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``python -m app.cli ARGS`` from the repo root and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def clips_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide folder for encoded clips."""
    return tmp_path_factory.mktemp("clips")


# 640×360 matches the clips of the cvp spec's observed runs; 96 frames at gop 48 puts keyframes
# at 0 and 48 so keyframe avoidance has something to move.
_CLIP_SHAPE = {"width": 640, "height": 360, "frames": 96, "fps": 24, "gop": 48}


@pytest.fixture(scope="session")
def h264_clip(clips_dir: Path) -> Path:
    """H.264 with B-frames, 640×360, 96 frames, 24 fps, keyframes at 0 and 48."""
    return encode_clip(clips_dir / "h264", codec="h264", bframes=2, **_CLIP_SHAPE)


@pytest.fixture(scope="session")
def hevc_clip(clips_dir: Path) -> Path:
    """HEVC with B-frames, 640×360, 96 frames, 24 fps, keyframes at 0 and 48."""
    return encode_clip(clips_dir / "hevc", codec="hevc", bframes=2, **_CLIP_SHAPE)


@pytest.fixture(scope="session")
def vp9_clip(clips_dir: Path) -> Path:
    """VP9 in WebM, 640×360, 96 frames, 24 fps, keyframes at 0 and 48."""
    return encode_clip(clips_dir / "vp9", codec="vp9", **_CLIP_SHAPE)


@pytest.fixture(scope="session")
def real_clips() -> Path:
    """The folder of real clips, ``tests/data`` (see its README for provenance); fails if one is missing."""
    missing = [name for name in REAL_CLIP_NAMES if not (REAL_CLIPS / name).is_file()]
    assert not missing, f"{REAL_CLIPS} lacks {', '.join(missing)}: the suite ships these clips"
    return REAL_CLIPS


def _freeze(value: object) -> None:
    """Make every array reachable through dataclass fields, sequences and dicts read-only."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _freeze(getattr(value, field.name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _freeze(item)
    elif isinstance(value, dict):
        for item in value.values():
            _freeze(item)


@pytest.fixture(scope="session")
def sample_run() -> RunResult:
    """One run of the bundled sample with 48 sampled frames, shared by the view tests.

    Its arrays are read-only, so a test that writes into the shared run fails where it writes
    instead of changing what later tests see; a test wanting other values changes a copy.
    """
    # Imported here, so that loading conftest (every test module does) loads no pipeline.
    from backend.pipeline import SelectionOptions, run

    result = run(SAMPLE_VIDEO, options=SelectionOptions(num_sampled_frames=48))
    _freeze(result)
    return result


@pytest.fixture(scope="session")
def bad_inputs(clips_dir: Path) -> dict[str, Path]:
    """Files the CLI must reject; see clips.make_bad_inputs."""
    return make_bad_inputs(clips_dir / "bad")
