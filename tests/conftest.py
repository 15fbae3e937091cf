"""Shared fixtures and hooks: encoded test clips, bad inputs, the real clips, one sample run, marker skips."""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from helpers.clips import encode_clip, make_bad_inputs
from helpers.paths import REAL_CLIP_NAMES, REAL_CLIPS, SAMPLE_VIDEO

if TYPE_CHECKING:
    from backend.pipeline import RunResult

# Set before anything imports gradio or huggingface_hub, here and in every CLI subprocess.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

# The platforms pyproject.toml installs codec-video-prep on. There a broken install must fail
# the tests that need it, not skip them; elsewhere they are skipped.
CVP_PLATFORM = sys.platform == "linux" and platform.machine() == "x86_64" and sys.version_info[:2] == (3, 11)
if CVP_PLATFORM:
    importlib.import_module("codec_video_prep")  # an ImportError here stops the run with its cause

CVP_SKIP_REASON = "needs_cvp: codec-video-prep's wheel exists for Linux x86-64 with CPython 3.11 only"
FFPROBE_SKIP_REASON = "needs_ffprobe: ffprobe binary not installed; run scripts/setup.sh as root"

# The markers are the requirements (``@pytest.mark.needs_cvp``, ``@pytest.mark.needs_ffprobe``):
# pytest_runtest_setup skips a test that carries one whose need is unmet, with the reason above,
# so `-m "not needs_cvp"` and the skip always select the same tests.


def _seed_list(text: str) -> list[int]:
    """``1``, ``1,4`` or ``2-5`` as a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds += range(int(first), int(last or first) + 1)
    return seeds


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--damage-seeds",
        type=_seed_list,
        default=[1],
        help="seeds of the damaged-stream tests (e.g. 1-5; default 1: 30 damaged files)",
    )


def _timeout_secs(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getoption("timeout", None) or item.config.getini("timeout") or 0)


_BROWSER_PROCESS = re.compile(rb"chromium|playwright/driver")


def _kill_browsers() -> list[int]:
    """SIGKILL the Chromium and Playwright-driver processes descended from this one."""
    children: dict[int, list[int]] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    killed, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if _BROWSER_PROCESS.search(commands.get(pid, b"")):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    return killed


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Make sure pytest-timeout's deadline ends a test that hangs.

    pytest-timeout raises from a SIGALRM handler. Raised inside Playwright's event loop
    (a call waiting on a Chromium whose renderer spins), that exception was absorbed and the
    call went on waiting, so one stalled page held the whole run past CI's limit. Five
    seconds after the deadline this sends SIGALRM once more, to the main thread itself (a
    process-wide signal may also land on one of the app's server threads); half a minute
    later it kills the test's Chromium and Playwright driver, which turns a pending browser
    call into an error. A browser left behind by a test that timed out is killed too: it
    would spin on a CPU through every later test. (trylast: this wrapper sits inside
    pytest-timeout's, so it stops before pytest-timeout restores the default SIGALRM action.)
    """
    secs = _timeout_secs(item)
    if secs <= 0 or not hasattr(signal, "pthread_kill"):
        yield
        return
    lock, done = threading.Lock(), threading.Event()
    main = threading.main_thread().ident

    def watch() -> None:
        if done.wait(secs + 5):
            return
        with lock:
            if not done.is_set() and main is not None:
                signal.pthread_kill(main, signal.SIGALRM)
        if done.wait(30):
            return
        with lock:
            if not done.is_set():
                killed = _kill_browsers()
                print(
                    f"\n{item.nodeid}: still running {secs + 35:.0f} s in; killed {killed}", file=sys.stderr
                )

    watcher = threading.Thread(target=watch, name="timeout-watch", daemon=True)
    started = time.monotonic()
    watcher.start()
    try:
        yield
    finally:
        with lock:
            done.set()
        if time.monotonic() - started > secs:
            # Timed out: a browser it left behind may spin on a CPU and slow every later test.
            _kill_browsers()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a needs_cvp / needs_ffprobe test, before its fixtures run, where the need is unmet."""
    if item.get_closest_marker("needs_cvp") is not None and not CVP_PLATFORM:
        pytest.skip(CVP_SKIP_REASON)
    if item.get_closest_marker("needs_ffprobe") is not None and shutil.which("ffprobe") is None:
        pytest.skip(FFPROBE_SKIP_REASON)


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
