"""A video file written frame by frame with one of PyAV's bundled encoders."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from native.encoding import encode_frame


class VideoWriter:
    """Encode RGB uint8 frames to a file with one of PyAV's bundled encoders.

    ``codec``: libx264, libx265, libvpx-vp9 or libsvtav1 (any PyAV encoder name).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        codec: str,
        width: int,
        height: int,
        fps: Fraction | int,
        options: dict[str, str] | None = None,
        pix_fmt: str = "yuv420p",
    ) -> None:
        container_options = {"movflags": "+faststart"} if str(path).endswith((".mp4", ".mov")) else {}
        self._container = av.open(str(path), "w", options=container_options)
        self._stream = self._container.add_stream(codec, rate=fps, options=options or {})
        self._stream.width = width
        self._stream.height = height
        self._stream.pix_fmt = pix_fmt

    def write(self, rgb: np.ndarray) -> None:
        """Encode one (H, W, 3) uint8 RGB frame."""
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        encode_frame(self._container, self._stream, frame)

    def write_luma(self, luma: np.ndarray) -> None:
        """Encode a (H, W) uint8 luma plane as a grey frame (chroma 128)."""
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(luma), format="gray")
        encode_frame(self._container, self._stream, frame.reformat(format=self._stream.pix_fmt))

    def close(self) -> None:
        encode_frame(self._container, self._stream, None)
        self._container.close()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
