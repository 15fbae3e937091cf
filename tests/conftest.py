"""Shared fixtures: encoded test clips, bad inputs, the shared real clips and a CLI runner."""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clips import encode_clip, make_bad_inputs

# Set before anything imports gradio or huggingface_hub, here and in every CLI subprocess.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

REPO_ROOT = Path(__file__).resolve().parents[1]
# The real clips live in the repository, so a bare clone runs every test.
REAL_CLIPS = REPO_ROOT / "tests" / "data"


# The platforms pyproject.toml installs codec-video-prep on. There a broken install must fail
# the tests that need it, not skip them; elsewhere they are skipped.
CVP_PLATFORM = sys.platform == "linux" and platform.machine() == "x86_64" and sys.version_info[:2] == (3, 11)
if CVP_PLATFORM:
    importlib.import_module("codec_video_prep")  # an ImportError here stops the run with its cause

requires_cvp = pytest.mark.skipif(
    not CVP_PLATFORM,
    reason="codec-video-prep's wheel exists for Linux x86-64 with CPython 3.11 only",
)
requires_ffprobe = pytest.mark.skipif(
    shutil.which("ffprobe") is None,
    reason="ffprobe binary not installed; run scripts/setup.sh as root",
)


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
    """The folder of real clips, ``tests/data`` (see its README for provenance)."""
    return REAL_CLIPS


@pytest.fixture(scope="session")
def bad_inputs(clips_dir: Path) -> dict[str, Path]:
    """Files the CLI must reject; see clips.make_bad_inputs."""
    return make_bad_inputs(clips_dir / "bad")
