"""No oversubscription: a batch worker runs every selector's video on one thread of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.clips import encode_clip

from backend.batch import run_local
from backend.batch.unit import UnitTask, resolve_options
from backend.selectors import SELECTORS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # B-frames: FFmpeg's own choice would decode it on frame threads.
    return encode_clip(tmp_path_factory.mktemp("threads") / "c.mp4", codec="h264", frames=48, bframes=2)


@pytest.fixture(scope="module")
def idle_threads() -> int:
    """Threads of a fresh interpreter that imported numpy: its own and OpenBLAS's pool (made
    at import on any machine; parked in a worker, where it stays)."""
    code = "import os, numpy; print(len(os.listdir('/proc/self/task')))"
    return int(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def _children() -> set[int]:
    pids: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            pids |= {int(p) for p in Path(f"/proc/self/task/{tid}/children").read_text().split()}
        except OSError:
            continue
    return pids


@pytest.mark.parametrize("selector", SELECTORS.names)
def test_a_batch_worker_decodes_every_selector_on_its_own_thread(
    selector, clip, idle_threads, tmp_path
) -> None:
    peaks: dict[int, int] = {}
    done = threading.Event()

    def watch() -> None:  # the worker's threads (/proc/<pid>/task), every 2 ms while it runs
        while not done.is_set():
            for pid in _children():
                try:
                    peaks[pid] = max(peaks.get(pid, 0), len(os.listdir(f"/proc/{pid}/task")))
                except OSError:
                    continue
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rows: list[dict] = []
    task = UnitTask(
        path=str(clip), rel_path="c.mp4", out_dir=str(tmp_path / "c"), unit=resolve_options(selector)
    )
    try:
        run_local([task], workers=1, on_row=rows.append)
    finally:
        done.set()
        watcher.join()
    assert [r["status"] for r in rows] == ["done"], rows
    assert peaks, "the worker was never seen"
    # Its own thread, the parked BLAS pool, and at most one executor thread it waits on (the
    # output writer's). FFmpeg's choice added 8 (uniform), 11 (llava-ov2) and ~97 (onevision:
    # a swscale context per frame held) on 2 cores.
    assert max(peaks.values()) <= idle_threads + 1, (selector, peaks, idle_threads)
