"""Decoder-side signals through PyAV's FFmpeg: motion vectors, per-block QP and luma planes."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
from av.sidedata.sidedata import SideDataContainer as _SideDataContainer
from av.sidedata.sidedata import Type as _SideDataType

MV_COLUMNS: tuple[str, ...] = (
    "dst_x",
    "dst_y",
    "w",
    "h",
    "motion_x",
    "motion_y",
    "motion_scale",
    "source",
)
"""Column order of the (N, 8) int32 motion-vector arrays.

``dst_x, dst_y`` is the **centre** of the w×h block in the current frame (FFmpeg's
convention); the reference block is centred at ``dst + motion / motion_scale``;
``source`` is -1 for list 0 (past reference) and +1 for list 1 (future reference).
"""

MOTION_VECTOR_CODECS: tuple[str, ...] = ("h264", "mpeg4", "mpeg2video", "mpeg1video", "h263")
"""FFmpeg decoders that honour ``flags2=+export_mvs`` (h264 and mpeg4 verified by tests)."""

BLOCK_QP_CODECS: tuple[str, ...] = ("h264", "vp9", "mpeg2video", "mpeg4")
"""FFmpeg decoders that honour ``export_side_data=venc_params`` (h264 and vp9 verified)."""

QP_UNIT: dict[str, int] = {"H264": 16, "MPEG2": 16, "VP9": 8}
"""Grid cell side (luma pixels) of ``read_block_qp`` grids per AVVideoEncParams type.

H.264 and the MPEG family carry one QP per 16×16 macroblock; VP9 blocks range from 8×8
to 64×64, so its grids are painted at the smallest block size.
"""

_PICT = {1: "I", 2: "P", 3: "B", 4: "S", 5: "SI", 6: "SP", 7: "BI"}
_PLANAR_8BIT = ("yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "gray", "nv12")

# AVVideoBlockParams (libavutil/video_enc_params.h): int src_x, src_y, w, h; int32_t delta_qp.
# The array stride is AVVideoEncParams.block_size, which may exceed this struct's size.
_BLOCK_FIELDS = (("src_x", 0), ("src_y", 4), ("w", 8), ("h", 12), ("delta_qp", 16))


class SideDataError(RuntimeError):
    """FFmpeg could not open or decode the file (the backend turns this into DecodeError)."""


@dataclass(frozen=True, kw_only=True)
class RgbFrames:
    """Which frames :func:`iter_side_data` also converts to RGB, and at what size."""

    width: int
    """Width of the RGB frames (pixels)."""
    height: int
    """Height of the RGB frames (pixels)."""
    frames: Collection[int] | None = None
    """Presentation-order indices to convert (None: every frame)."""


def exports_motion_vectors(codec_name: str) -> bool:
    """True when FFmpeg's decoder for ``codec_name`` exports motion vectors."""
    return codec_name.lower() in MOTION_VECTOR_CODECS


def exports_block_qp(codec_name: str) -> bool:
    """True when FFmpeg's decoder for ``codec_name`` exports per-block QP (venc_params)."""
    return codec_name.lower() in BLOCK_QP_CODECS


def frame_side_data(frame: av.VideoFrame) -> Mapping[Any, Any]:
    """The frame's side data by type, without tying the frame into a reference cycle.

    PyAV's ``frame.side_data`` caches its container on the frame and the container refers back
    to the frame: such a frame outlives its last reference until the garbage collector runs, the
    decoder's buffer pool runs dry meanwhile and FFmpeg allocates (and zeroes) fresh frame buffers.
    On a 720p H.264 decode with vector export that was ~180 page faults and +0.5 ms per frame
    (2.03 against 1.57 ms). A container of our own refers to the frame, not the frame to it.
    """
    return _SideDataContainer(frame)


def _luma(frame: av.VideoFrame, *, copy: bool = True, threads: int = 0) -> np.ndarray:
    """The frame's Y plane as stored, (H, W) uint8; other formats are converted to gray.

    ``copy=False`` returns a read-only view of the decoder's buffer (rows ``line_size`` apart),
    which keeps the frame alive while the array lives: the decoder reuses a buffer only once no
    frame refers to it.
    """
    if frame.format.name in _PLANAR_8BIT:
        plane = frame.planes[0]
        rows = np.frombuffer(plane, dtype=np.uint8).reshape(plane.height, plane.line_size)
        if copy:
            return rows[:, : plane.width].copy()
        view = rows[:, : plane.width]
        view.flags.writeable = False
        return view
    return frame.to_ndarray(format="gray", threads=threads)


def _vectors(frame: av.VideoFrame) -> np.ndarray:
    """Exported motion vectors of a frame as (N, 8) int32 in ``MV_COLUMNS`` order."""
    side = frame_side_data(frame).get(_SideDataType.MOTION_VECTORS)
    if side is None or len(side) == 0:
        return np.zeros((0, len(MV_COLUMNS)), dtype=np.int32)
    raw = side.to_ndarray()  # a view into the frame's buffer; copied by the stack below
    return np.stack([raw[name].astype(np.int32) for name in MV_COLUMNS], axis=1)


def _block_qp(frame: av.VideoFrame) -> tuple[np.ndarray, str] | None:
    """Per-block QP (base + block delta) painted on the QP_UNIT grid, plus the params type."""
    params = frame_side_data(frame).get(_SideDataType.VIDEO_ENC_PARAMS)
    if params is None:
        return None
    kind = params.codec_type.name
    unit = QP_UNIT.get(kind, 16)
    rows, cols = math.ceil(frame.height / unit), math.ceil(frame.width / unit)
    grid = np.full((rows, cols), int(params.qp), dtype=np.int32)
    count = int(params.nb_blocks)
    if count == 0:  # no per-block data (e.g. VP9 without segmentation): one QP for the frame
        return grid, kind
    # Read the block array straight from the buffer: PyAV builds one Python object per block,
    # and its qp_map() only handles the fixed 16×16 layouts (H.264, MPEG-2), not VP9's blocks.
    dtype = np.dtype(
        {
            "names": [name for name, _ in _BLOCK_FIELDS],
            "formats": ["<i4"] * len(_BLOCK_FIELDS),
            "offsets": [offset for _, offset in _BLOCK_FIELDS],
            "itemsize": int(params.block_size),
        }
    )
    buf = np.frombuffer(params, dtype=np.uint8)
    blocks = np.ndarray((count,), dtype=dtype, buffer=buf, offset=int(params.blocks_offset))
    values = int(params.qp) + blocks["delta_qp"].astype(np.int32)
    x0 = blocks["src_x"] // unit
    y0 = blocks["src_y"] // unit
    wu = np.maximum(blocks["w"] // unit, 1)
    hu = np.maximum(blocks["h"] // unit, 1)
    paint_blocks(grid, x0, y0, wu, hu, values)
    return grid, kind


def paint_blocks(
    grid: np.ndarray,
    x0: np.ndarray,
    y0: np.ndarray,
    w: np.ndarray,
    h: np.ndarray,
    values: np.ndarray,
) -> None:
    """Fill rectangles ``grid[y0:y0+h, x0:x0+w] = value`` in place, clipped to the grid.

    All arguments are in grid cells; one vectorised assignment per distinct block size.
    Later rectangles overwrite earlier ones where they overlap.
    """
    rows, cols = grid.shape
    for bw, bh in sorted(set(zip(w.tolist(), h.tolist(), strict=True))):
        sel = np.flatnonzero((w == bw) & (h == bh))
        ys = y0[sel, None, None] + np.arange(bh)[None, :, None]
        xs = x0[sel, None, None] + np.arange(bw)[None, None, :]
        ys, xs = np.broadcast_arrays(ys, xs)
        vals = np.broadcast_to(values[sel, None, None], ys.shape)
        inside = (ys >= 0) & (ys < rows) & (xs >= 0) & (xs < cols)
        grid[ys[inside], xs[inside]] = vals[inside]


def iter_side_data(
    path: str | Path,
    *,
    luma: bool = True,
    motion_vectors: bool = False,
    block_qp: bool = False,
    last_index: int | None = None,
    thread_count: int = 0,
    rgb: RgbFrames | None = None,
    luma_copy: bool = True,
) -> Iterator[dict[str, Any]]:
    """Decode the first video stream in presentation order and yield per-frame side data.

    Parameters
    ----------
    path : video file.
    luma : include ``luma``, the Y plane (H, W) uint8 (deblocked, as the decoder outputs it).
    motion_vectors : decode with ``flags2=+export_mvs`` and include ``mvs``, (N, 8) int32 in
        ``MV_COLUMNS`` order; (0, 8) for frames without vectors (I frames, or codecs that
        export none).
    block_qp : decode with ``export_side_data=venc_params`` and include ``qp`` (rows, cols)
        int32 on the ``QP_UNIT`` grid and ``qp_type`` ('H264', 'VP9', 'MPEG2'), both None
        for frames (or codecs) without the side data.
    last_index : stop after this presentation-order frame index (None: decode to the end).
    thread_count : decoder threads, and swscale's for the conversions (0: FFmpeg's choice).
        Each frame converts with its own swscale context, whose threads live as long as the
        frame: at FFmpeg's choice a decode holding a window of frames ran ~75 threads on 2 cores.
    rgb : include ``rgb``, the frame scaled to ``rgb.width`` × ``rgb.height`` as (height, width, 3)
        uint8 RGB with the area filter (as ``native.decode_frames_rgb`` makes it), for the frames
        in ``rgb.frames`` (every frame when None); None: no RGB.
    luma_copy : False gives ``luma`` as a read-only view of the decoded frame (no copy, strided rows).

    Yields
    ------
    dict with ``frame_index`` (0-based, presentation order), ``pict_type`` ('I', 'P', 'B',
    …, '?'), ``width``, ``height`` and the requested keys.

    Raises
    ------
    SideDataError : the file cannot be opened or decoding fails part-way.
    """
    options: dict[str, str] = {}
    if motion_vectors:
        options["flags2"] = "+export_mvs"
    if block_qp:
        options["export_side_data"] = "venc_params"
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.video:
                raise SideDataError(f"{path}: no video stream")
            stream = container.streams.video[0]
            # Frame threading races the side-data export: on H.264 a few frames per run came
            # back with another frame's vectors and QP table (or all-zero QP), differently each
            # run. Slice threading matched a single-threaded decode on every frame.
            stream.thread_type = "SLICE" if (motion_vectors or block_qp) else "AUTO"
            stream.codec_context.thread_count = int(thread_count)
            # Options must be in place before the first packet opens the decoder.
            stream.codec_context.options = options
            for index, frame in enumerate(container.decode(stream)):
                item: dict[str, Any] = {
                    "frame_index": index,
                    "pict_type": _PICT.get(int(frame.pict_type), "?"),
                    "width": int(frame.width),
                    "height": int(frame.height),
                }
                if luma:
                    item["luma"] = _luma(frame, copy=luma_copy, threads=thread_count)
                if motion_vectors:
                    item["mvs"] = _vectors(frame)
                if block_qp:
                    qp = _block_qp(frame)
                    item["qp"], item["qp_type"] = (None, None) if qp is None else qp
                if rgb is not None and (rgb.frames is None or index in rgb.frames):
                    item["rgb"] = frame.to_ndarray(
                        format="rgb24",
                        width=rgb.width,
                        height=rgb.height,
                        interpolation="AREA",
                        threads=thread_count,
                    )
                yield item
                if last_index is not None and index >= last_index:
                    break
    except av.FFmpegError as exc:
        raise SideDataError(f"{path}: decoding failed ({exc.strerror or exc})") from exc


def _wanted(frame_indices: Sequence[int]) -> tuple[set[int], int | None]:
    wanted = {int(i) for i in frame_indices}
    return wanted, (max(wanted) if wanted else None)


def read_motion_vectors(path: str | Path, frame_indices: Sequence[int]) -> dict[int, np.ndarray]:
    """Exported motion vectors of the wanted frames.

    Returns
    -------
    dict frame_index -> (N, 8) int32 in ``MV_COLUMNS`` order, for every wanted index the
    stream reaches; N = 0 for I frames and for codecs without exported vectors (see
    ``exports_motion_vectors``).
    """
    wanted, last = _wanted(frame_indices)
    if last is None:
        return {}
    return {
        item["frame_index"]: item["mvs"]
        for item in iter_side_data(path, luma=False, motion_vectors=True, last_index=last)
        if item["frame_index"] in wanted
    }


def read_block_qp(path: str | Path, frame_indices: Sequence[int]) -> dict[int, np.ndarray | None]:
    """Per-block QP grids (base QP + block delta) of the wanted frames.

    Returns
    -------
    dict frame_index -> (ceil(H/u), ceil(W/u)) int32 with u = ``QP_UNIT`` (16 for H.264,
    8 for VP9), or None where the decoder exported no ``venc_params``. Values are in the
    codec's own scale: H.264 QP 0–51, VP9 quantiser index 0–255.
    """
    wanted, last = _wanted(frame_indices)
    if last is None:
        return {}
    return {
        item["frame_index"]: item["qp"]
        for item in iter_side_data(path, luma=False, block_qp=True, last_index=last)
        if item["frame_index"] in wanted
    }


def decode_luma_frames(path: str | Path, frame_indices: Sequence[int]) -> dict[int, np.ndarray]:
    """Full-resolution Y planes, (H, W) uint8, of the wanted frames only (memory ∝ wanted)."""
    wanted, last = _wanted(frame_indices)
    if last is None:
        return {}
    return {
        item["frame_index"]: item["luma"]
        for item in iter_side_data(path, luma=True, last_index=last)
        if item["frame_index"] in wanted
    }


def side_data_support(path: str | Path, *, max_frames: int = 48) -> dict[str, Any]:
    """Check on the file itself which side data the decoder exports.

    Decodes up to ``max_frames`` frames (stopping early once both are seen) and reports
    ``codec_name`` plus ``motion_vectors`` / ``block_qp``: True when at least one frame
    carried that side data.
    """
    seen_mv = seen_qp = False
    codec_name = ""
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.video:
                raise SideDataError(f"{path}: no video stream")
            stream = container.streams.video[0]
            stream.codec_context.options = {"flags2": "+export_mvs", "export_side_data": "venc_params"}
            codec_name = str(stream.codec_context.name or "").lower()
            for index, frame in enumerate(container.decode(stream)):
                side = frame_side_data(frame)
                mvs = side.get(_SideDataType.MOTION_VECTORS)
                seen_mv = seen_mv or (mvs is not None and len(mvs) > 0)
                seen_qp = seen_qp or _SideDataType.VIDEO_ENC_PARAMS in side
                if (seen_mv and seen_qp) or index + 1 >= max_frames:
                    break
    except av.FFmpegError as exc:
        raise SideDataError(f"{path}: decoding failed ({exc.strerror or exc})") from exc
    return {"codec_name": codec_name, "motion_vectors": seen_mv, "block_qp": seen_qp}
