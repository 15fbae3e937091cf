"""Decoded frames for the luma-bias analyzer: yuv420p planes turned into RGB a band of rows at a time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import av
import cv2
import numpy as np

from native.compiled import kernels as _kernels


class Yuv420Frame:
    """A decoded limited-range yuv420p frame of even size, converted to RGB on demand.

    The conversion is ``native.iter_rgb``'s (OpenCV ``COLOR_YUV2RGB_I420``, BT.601, rounded),
    applied to a band of rows: OpenCV's 4:2:0 conversion reads each chroma sample for its own
    2×2 luma block only, so a band starting on an even row gives the same pixels as the whole
    frame. Converting band by band keeps the RGB in the CPU cache for whoever measures it,
    instead of writing a full RGB frame to memory and reading it back. The planes are views of
    the decoder's buffers, kept alive by the frame object.
    """

    __slots__ = ("_frame", "shape", "u", "v", "y")

    def __init__(self, frame: av.VideoFrame) -> None:
        h, w = frame.height, frame.width
        if frame.format.name != "yuv420p" or h % 2 or w % 2:
            raise ValueError(
                f"Invalid frame ({frame.format.name} {w}x{h}). Supported values are even yuv420p."
            )
        self._frame = frame
        self.y, self.u, self.v = (
            np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width] for p in frame.planes[:3]
        )
        self.shape = (h, w, 3)

    def rgb_rows(
        self, y0: int, y1: int, *, out: np.ndarray | None = None, scratch: np.ndarray | None = None
    ) -> np.ndarray:
        """RGB of rows y0..y1−1 (y0 and y1 even, or y1 = height).

        Parameters
        ----------
        out : (≥ y1 − y0, W, 3) uint8 to write into (allocated when None).
        scratch : (≥ (y1 − y0)·3/2, W) uint8 for the band's I420 planes (allocated when None).

        Returns
        -------
        (y1 − y0, W, 3) uint8 view of ``out``.
        """
        h, w, _ = self.shape
        if y0 % 2 or y1 % 2 or not 0 <= y0 < y1 <= h:
            raise ValueError(f"Invalid rows ({y0}, {y1}). Supported values are even rows within 0..{h}.")
        rows = y1 - y0
        if scratch is None:
            scratch = np.empty((rows * 3 // 2, w), np.uint8)
        if out is None:
            out = np.empty((rows, w, 3), np.uint8)
        i420 = scratch[: rows * 3 // 2]
        flat = i420.reshape(-1)
        quarter = rows * w // 4
        np.copyto(i420[:rows], self.y[y0:y1])
        np.copyto(flat[rows * w : rows * w + quarter].reshape(rows // 2, w // 2), self.u[y0 // 2 : y1 // 2])
        np.copyto(flat[rows * w + quarter :].reshape(rows // 2, w // 2), self.v[y0 // 2 : y1 // 2])
        return cv2.cvtColor(i420, cv2.COLOR_YUV2RGB_I420, dst=out[:rows])

    def to_rgb(self) -> np.ndarray:
        """The whole frame, (H, W, 3) uint8 RGB."""
        return self.rgb_rows(0, self.shape[0])


def measure_yuv420_pair(
    test: Yuv420Frame, reference: Yuv420Frame, cell: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-cell RGB sums of a test frame and of its difference to a reference, in one compiled pass.

    The RGB of both frames is that of :meth:`Yuv420Frame.rgb_rows` (OpenCV's fixed-point BT.601,
    reproduced bit for bit) but is never stored: each pixel pair is converted, summed and
    forgotten.

    Parameters
    ----------
    test, reference : yuv420p frames of the same even size (H, W).
    cell : even side of the square cells.

    Returns
    -------
    test_cells : (ceil(H/cell), ceil(W/cell), 3) int64, RGB sums of the test frame per cell
        (edge cells partial).
    diff_cells : same shape, sums of test − reference RGB per cell.
    luma_sse : Σ (1000·ΔY)² over all pixels, ΔY the BT.601 luma difference (exact).

    Raises
    ------
    RuntimeError : the extension was not built (see ``COMPILED_KERNEL``).
    ValueError : sizes differ, odd sizes or an odd cell.
    """
    if _kernels is None:
        raise RuntimeError("native._kernels was not built (no C compiler at install)")
    h, w, _ = test.shape
    shape = (-(-h // cell), -(-w // cell), 3)
    test_cells = np.zeros(shape, np.int64)
    diff_cells = np.zeros(shape, np.int64)
    sse = _kernels.measure_yuv420(
        test.y, test.u, test.v, reference.y, reference.u, reference.v, cell, test_cells, diff_cells
    )
    return test_cells, diff_cells, sse


def iter_luma_frames(path: str | Path, *, thread_count: int = 0) -> Iterator[np.ndarray | Yuv420Frame]:
    """Decode a video for the luma-bias analyzer, in presentation order.

    Yields the frames ``native.iter_rgb(path)`` would convert with OpenCV as
    :class:`Yuv420Frame` (their RGB rows converted on demand, pixel for pixel the same), and
    every other frame (full range, 4:4:4, 10-bit, RGB, odd size) as an (H, W, 3) uint8 RGB
    array converted by swscale, as ``iter_rgb`` does.
    """
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = int(thread_count)
        for frame in container.decode(stream):
            if (
                frame.format.name == "yuv420p"
                and frame.color_range != 2  # 2 = JPEG (full range)
                and frame.width % 2 == 0
                and frame.height % 2 == 0
            ):
                yield Yuv420Frame(frame)
            else:
                yield frame.to_ndarray(format="rgb24")
