"""One streaming PyAV decode pass that keeps only what a sampled selection needs.

Selectors that sample a subset of frames (llava-ov2, uniform) decode the stream once, in
order, and convert only the wanted frames to RGB; every other frame is decoded (the codec
needs it as a reference) and dropped at once, so memory holds one frame at a time, not the
video. The same pass reports, per decoded frame, what lmms-video-utils' metadata pass derives:
the picture type, the presentation time, and the packet size as that reader attributes it
(the first frame a packet's decode call returns gets the packet's size, the others 0).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from av.sidedata.sidedata import Type as _SideDataType

from native.side_data import MV_COLUMNS, SideDataError, frame_side_data

_PICT = {1: "I", 2: "P", 3: "B", 4: "S", 5: "SI", 6: "SP", 7: "BI"}


@dataclass(frozen=True)
class StreamFacts:
    """Header facts of a file's first video stream (no frame decoded)."""

    width: int
    height: int
    average_rate: Fraction | None
    base_rate: Fraction | None
    time_base: Fraction | None
    sample_aspect_ratio: Fraction | None
    """The stream's (else the codec's) sample aspect ratio; None when unset (square pixels)."""


def stream_facts(path: str | Path) -> StreamFacts:
    """Width, height, rates, time base and sample aspect ratio of the first video stream.

    Raises
    ------
    SideDataError : the file cannot be opened or has no video stream.
    """
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.video:
                raise SideDataError(f"{path}: no video stream")
            stream = container.streams.video[0]
            ctx = stream.codec_context
            sar = stream.sample_aspect_ratio or (ctx.sample_aspect_ratio if ctx is not None else None)
            return StreamFacts(
                width=int(ctx.width or 0) if ctx is not None else 0,
                height=int(ctx.height or 0) if ctx is not None else 0,
                average_rate=None if stream.average_rate is None else Fraction(stream.average_rate),
                base_rate=None if stream.base_rate is None else Fraction(stream.base_rate),
                time_base=None if stream.time_base is None else Fraction(stream.time_base),
                sample_aspect_ratio=Fraction(sar) if sar else None,
            )
    except av.FFmpegError as exc:
        raise SideDataError(f"{path}: cannot open ({exc.strerror or exc})") from exc


def _vectors(frame: av.VideoFrame) -> np.ndarray:
    side = frame_side_data(frame).get(_SideDataType.MOTION_VECTORS)
    if side is None or len(side) == 0:
        return np.zeros((0, len(MV_COLUMNS)), dtype=np.int32)
    raw = side.to_ndarray()
    return np.stack([raw[name].astype(np.int32) for name in MV_COLUMNS], axis=1)


def _presentation_index(path: str | Path) -> dict[int, int] | None:
    """pts → frame index (presentation order) of every video packet; None when pts are missing or repeat."""
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        pts = [p.pts for p in container.demux(stream) if p.size]
    if not pts or any(p is None for p in pts) or len(set(pts)) != len(pts):
        return None
    return {int(p): i for i, p in enumerate(sorted(pts))}


def _add_pixels(
    item: dict[str, Any], frame: av.VideoFrame, rgb_later: bool, thread_count: int, motion_vectors: bool
) -> None:
    """Put a wanted frame's RGB (or its converter, see :func:`iter_stream`) and vectors in ``item``."""
    if rgb_later:
        item["to_rgb"] = functools.partial(frame.to_ndarray, format="rgb24", threads=thread_count)
        item["height"], item["width"] = frame.height, frame.width
    else:
        item["rgb"] = frame.to_ndarray(format="rgb24", threads=thread_count)
    if motion_vectors:
        item["mvs"] = _vectors(frame)


def iter_stream(
    path: str | Path,
    wanted: frozenset[int] | set[int],
    *,
    motion_vectors: bool = False,
    frame_threads: bool = True,
    thread_count: int = 0,
    skip_unwanted: bool = False,
    rgb_later: bool = False,
) -> Iterator[dict[str, Any]]:
    """Decode the first video stream once, in output order, until the last wanted frame.

    Parameters
    ----------
    path : video file.
    wanted : frame indices (0-based, output order) to convert to RGB.
    motion_vectors : export motion vectors (``flags2=+export_mvs``) and return them for the
        wanted frames.
    frame_threads : ``thread_type`` AUTO (frame and slice threads, as lmms-video-utils decodes);
        False uses slice threads only (exported side data then matches a single-threaded decode).
    thread_count : decoder threads, and swscale's for the RGB conversion (0: FFmpeg's choice, as
        lmms-video-utils leaves it; 1: no thread of their own).
    skip_unwanted : let the decoder skip the non-reference frames that are not wanted
        (``skip_frame`` NONREF for their packets): nothing depends on them, so the wanted frames
        come out the same, and frames are indexed by their presentation timestamp instead of
        counted. Skipped frames are not yielded, and ``attributed_size`` then no longer follows
        the unskipped decoder's calls. Ignored for streams whose timestamps are missing or repeat.
    rgb_later : a wanted frame's item holds ``to_rgb`` (a function returning its RGB array) and
        ``height``/``width`` instead of ``rgb``, so that another thread can convert it (the
        conversion releases the GIL) while this one decodes on.

    Yields
    ------
    dict per decoded frame: ``frame_index``, ``pts_secs`` (None without a pts), ``pict_type``
    ('I', 'P', 'B', …, '?'), ``attributed_size`` (bytes: the packet's size for the first frame
    its decode call returned, else 0), and for wanted frames ``rgb`` ((H, W, 3) uint8 at the
    stored size, PyAV's rgb24 conversion) and, with ``motion_vectors``, ``mvs`` ((N, 8) int32
    in ``MV_COLUMNS`` order).

    Raises
    ------
    SideDataError : the file cannot be opened or decoding fails part-way.
    """
    last = max(wanted) if wanted else -1
    if last < 0:
        return
    try:
        by_pts = _presentation_index(path) if skip_unwanted else None
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.video:
                raise SideDataError(f"{path}: no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO" if frame_threads else "SLICE"
            stream.codec_context.thread_count = int(thread_count)
            if motion_vectors:  # before the first packet opens the decoder
                stream.codec_context.options = {"flags2": "+export_mvs"}
            time_base = float(stream.time_base) if stream.time_base else None
            index = 0
            done: set[int] = set()
            for packet in container.demux(stream):
                size = int(packet.size or 0)
                first = True
                if by_pts is not None:
                    # The frame thread takes the skip setting with the packet it is given.
                    mine = by_pts.get(int(packet.pts)) if packet.pts is not None else None
                    stream.codec_context.skip_frame = (
                        "NONREF" if mine is not None and mine not in wanted else "DEFAULT"
                    )
                for frame in packet.decode():
                    if by_pts is not None:
                        index = by_pts.get(int(frame.pts), -1) if frame.pts is not None else -1
                        if index < 0:
                            raise SideDataError(f"{path}: a frame's timestamp is not among the packets'")
                    item: dict[str, Any] = {
                        "frame_index": index,
                        "pts_secs": (
                            None if frame.pts is None or time_base is None else float(frame.pts * time_base)
                        ),
                        "pict_type": _PICT.get(int(frame.pict_type), "?"),
                        "attributed_size": size if first else 0,
                    }
                    first = False
                    if index in wanted:
                        _add_pixels(item, frame, rgb_later, thread_count, motion_vectors)
                    yield item
                    if by_pts is None:
                        if index >= last:
                            return
                        index += 1
                    else:
                        done.add(index)
                        if wanted <= done:
                            return
    except av.FFmpegError as exc:
        raise SideDataError(f"{path}: decoding failed ({exc.strerror or exc})") from exc


def attributed_sizes(path: str | Path, last_index: int, *, thread_count: int = 0) -> np.ndarray:
    """The packet size lmms-video-utils' metadata pass gives frames 0…``last_index``, decoded as it decodes.

    That pass decodes with ``thread_type`` AUTO (frame threads; which decode call returns a frame
    follows the thread count) and gives a packet's size to the first frame its decode call
    returns, 0 to any other. This pass decodes the same way but exports nothing and converts
    nothing, so a run can take its vectors from a race-free slice-threaded pass and still give
    each frame the size the reference gives it.

    Parameters
    ----------
    path : video file.
    last_index : the last frame (0-based, output order) whose size is needed.
    thread_count : decoder threads (0: FFmpeg's choice, as lmms-video-utils leaves it).

    Returns
    -------
    (last_index + 1,) int64 bytes; 0 past the last frame the stream outputs.

    Raises
    ------
    SideDataError : the file cannot be opened or decoding fails part-way.
    """
    sizes = np.zeros(max(int(last_index) + 1, 0), np.int64)
    if sizes.size == 0:
        return sizes
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.video:
                raise SideDataError(f"{path}: no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            stream.codec_context.thread_count = int(thread_count)
            index = 0
            for packet in container.demux(stream):
                size = int(packet.size or 0)
                for frame_number, _ in enumerate(packet.decode()):
                    sizes[index] = size if frame_number == 0 else 0
                    index += 1
                    if index >= sizes.size:
                        return sizes
    except av.FFmpegError as exc:
        raise SideDataError(f"{path}: decoding failed ({exc.strerror or exc})") from exc
    return sizes
