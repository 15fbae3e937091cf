"""SVT-AV1 raises its caller to real-time scheduling; the product's encoders put it back."""

from __future__ import annotations

import os
from pathlib import Path

import av
import numpy as np
import pytest
from helpers.clips import encode_clip

import native
from native.encode import EncodeTarget, transcode

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getscheduler") or os.geteuid() != 0,
    reason="SVT-AV1 can raise a thread to SCHED_FIFO only as root (CAP_SYS_NICE); nothing to undo otherwise",
)
REALTIME = {os.SCHED_FIFO, os.SCHED_RR} if hasattr(os, "SCHED_FIFO") else set()


def _realtime_threads() -> list[int]:
    tids = [int(e.name) for e in os.scandir("/proc/self/task")]
    return [t for t in tids if os.sched_getscheduler(t) in REALTIME]


def test_a_bare_svt_av1_encode_makes_the_caller_realtime_and_the_guard_undoes_it(tmp_path: Path) -> None:
    # The premise, on the PyAV wheel we ship against: without the guard the caller turns real-time.
    with av.open(str(tmp_path / "bare.mp4"), "w") as container:
        stream = container.add_stream("libsvtav1", rate=24, options={"preset": "12"})
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.zeros((64, 64, 3), np.uint8), format="rgb24")
        for packet in stream.encode(frame):
            container.mux(packet)
        assert os.sched_getscheduler(0) == os.SCHED_FIFO
        assert native.drop_realtime_scheduling() >= 1
        assert _realtime_threads() == []
        for packet in stream.encode(None):
            container.mux(packet)
    assert _realtime_threads() == []


def test_the_products_av1_encoders_leave_no_realtime_thread(tmp_path: Path) -> None:
    writer = native.VideoWriter(tmp_path / "writer.mp4", codec="libsvtav1", width=64, height=64, fps=24)
    with writer:
        for i in range(3):
            writer.write(np.full((64, 64, 3), 40 * i, np.uint8))
            assert _realtime_threads() == []
    source = encode_clip(tmp_path / "src", codec="h264", width=64, height=64, frames=6)
    transcode(source, [EncodeTarget(tmp_path / "t.mp4", "libsvtav1", {"preset": "12"})], width=64, height=64)
    assert _realtime_threads() == []
    encode_clip(tmp_path / "clip", codec="av1", width=64, height=64, frames=4)
    assert _realtime_threads() == []
