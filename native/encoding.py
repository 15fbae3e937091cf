"""Encoding one frame through PyAV, and the frame sizes on which SVT-AV1 would stall."""

from __future__ import annotations

from typing import Any

from native.scheduling import drop_realtime_scheduling


def encode_frame(container: Any, stream: Any, frame: Any) -> None:
    """Encode ``frame`` (a PyAV VideoFrame; None flushes) on ``stream`` and mux the packets into
    ``container``; after an SVT-AV1 encode, this process's threads are taken off real-time
    scheduling (:func:`drop_realtime_scheduling`). The app's encoders and the tests' clip makers
    encode through here, so none can forget it."""
    for packet in stream.encode(frame):
        container.mux(packet)
    if stream.codec_context.name == "libsvtav1":
        drop_realtime_scheduling()


# SVT-AV1 (PyAV's only AV1 encoder) never returns from its first encode call on a frame that is
# under 26 pixels on one side and over 64 on the other: no error, no CPU, and SIGTERM cannot end
# the process. Measured with presets 10 and 6 on 20-frame clips: 66x18, 128x24, 24x128 and
# 4094x24 stall; 64x24, 4094x26, 26x128 and 18x18 encode.
SVT_AV1_MIN_SIDE = 26
SVT_AV1_SMALL_FRAME = 64


def svt_av1_stalls(width: int, height: int) -> bool:
    """Whether libsvtav1 would stall on frames of this size (see above); callers refuse those."""
    return min(width, height) < SVT_AV1_MIN_SIDE and max(width, height) > SVT_AV1_SMALL_FRAME
