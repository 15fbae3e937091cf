"""cvp's patched FFmpeg reader (``cv_reader_fast``): per-frame bitcost grids and pixels, as records."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from native.bitcost_frame import BitcostFrame, frame_from_reader
from native.decoder_log import capture_decoder_log
from native.probe import probe_container, stream_size
from native.pyav_decode import decode_unfiltered_bgr

try:  # The wheel exists for Linux x86-64 only; everything else degrades gracefully.
    from codec_video_prep import cv_reader_fast as _cvr
except ImportError:  # pragma: no cover - exercised only off Linux x86-64
    _cvr = None

# cv_reader reads this variable with getenv() on every call; we set it per call
# under a lock so one caller's choice never leaks into another's (cvp leaks it).
_TARGET_ONLY_ENV = "CVR_DISABLE_TARGET_ONLY"
_ENV_LOCK = threading.Lock()


def _fresh_lock() -> None:
    # A fork copies the lock as it is; if another thread held it at that moment, the
    # single-threaded child would wait on it for ever.
    global _ENV_LOCK
    _ENV_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock)

BITCOST_CODECS = ("h264", "hevc", "vp9")
"""The codecs cvp's reader exports bitcost grids for."""


def bitcost_reader_available() -> bool:
    """True when cvp's patched reader (``cv_reader_fast``) imported."""
    return _cvr is not None


@dataclass(frozen=True, kw_only=True)
class ReaderExport:
    """What one read of cvp's reader exports: bitcost grids, pixels, and the pixels' size.

    Shared by :func:`read_bitcost`, :func:`read_segment` and ``SegmentReads``.
    """

    pixels: bool
    """Also return ``pixels_bgr``, (out_height, out_width, 3) uint8 **BGR**, scaled with
    SWS_AREA from a decode that skips the loop filter. Without pixels the reader also skips
    the IDCT (about 2.5× faster)."""
    bitcost: bool = True
    """False returns pixels only (``grids`` None)."""
    out_width: int = 0
    """Width of the exported pixels (0: the decoder's)."""
    out_height: int = 0
    """Height of the exported pixels (0: the decoder's)."""


def read_bitcost(
    path: str | Path,
    frame_indices: Sequence[int],
    *,
    export: ReaderExport,
    thread_type: str = "slice",
    thread_count: int = 1,
    target_only: bool = True,
    decoder_log: list[str] | None = None,
) -> list[BitcostFrame]:
    """Per-frame bitcost grids (and BGR pixels) from cvp's patched decoder, read from the start.

    Parameters
    ----------
    path : video file.
    frame_indices : 0-based presentation-order indices; any order, repeats allowed.
    export : what to return (grids, pixels and their size), see :class:`ReaderExport`.
    thread_type, thread_count : decoder threading ("slice" / "frame").
    target_only : let the decoder skip bitcost for pictures far from the wanted
        frames (cvp's default; it drops maps of reordered P frames, spec §14.5).
    decoder_log : receives the decoder's log lines (damaged streams), instead of stderr.

    Returns
    -------
    list[BitcostFrame]
        One record per reached request, sorted by ``frame_index`` with repeats; ``grids``
        holds the 2-D bitcost grids (None where the reader returned no map), ``pixels_bgr``
        the (out_height, out_width, 3) uint8 BGR frame when ``export.pixels``.
    """
    if _cvr is None:
        raise RuntimeError("codec-video-prep's cv_reader_fast is not installed")
    ids = [int(i) for i in frame_indices]
    if export.pixels and _reader_pixels_unsafe(path, export.out_width, export.out_height):
        items = read_bitcost(
            path,
            ids,
            export=_without_pixels(export),
            thread_type=thread_type,
            thread_count=thread_count,
            target_only=target_only,
            decoder_log=decoder_log,
        )
        return _with_unfiltered_pixels(path, items)
    with _ENV_LOCK:
        previous = os.environ.get(_TARGET_ONLY_ENV)
        os.environ[_TARGET_ONLY_ENV] = "0" if target_only else "1"
        try:
            with capture_decoder_log(decoder_log):
                items = _cvr.read_video_fast_selected(
                    str(path),
                    ids,
                    int(thread_count),
                    1 if export.bitcost else 0,
                    thread_type,
                    None,
                    1 if export.pixels else 0,
                    int(export.out_width),
                    int(export.out_height),
                )
        finally:
            if previous is None:
                os.environ.pop(_TARGET_ONLY_ENV, None)
            else:
                os.environ[_TARGET_ONLY_ENV] = previous
    return [frame_from_reader(item) for item in items]


# The reader's pixel export at the stream's own size skips scaling, and that path is broken
# for widths that are not a multiple of 16: measured on H.264, HEVC and VP9 at 20 frames, widths
# 16k+2 … 16k+6 return shifted pixels (22–34 dB against a normal decode) and 16k+8 … 16k+12 abort
# the process (heap corruption: "malloc_consolidate(): invalid chunk size"), while every scaled
# size, and every multiple of 16, is right. Rows are unaffected (any height works).
READER_NATIVE_WIDTH_ALIGN = 16


def _reader_pixels_unsafe(path: str | Path, out_width: int, out_height: int) -> bool:
    """Whether the reader would export pixels through its broken unscaled path (see above)."""
    st = os.stat(path)
    width, height = stream_size(str(path), st.st_mtime_ns, st.st_size)
    native = int(out_width) in (0, width) and int(out_height) in (0, height)
    return native and width % READER_NATIVE_WIDTH_ALIGN != 0


def _without_pixels(export: ReaderExport) -> ReaderExport:
    """The maps-only read a pixel read falls back to (its pixels then come from PyAV)."""
    return replace(export, pixels=False, out_width=0, out_height=0)


def _with_unfiltered_pixels(path: str | Path, items: list[BitcostFrame]) -> list[BitcostFrame]:
    """The reader's records with the BGR pixels its unscaled path should have returned.

    PyAV's FFmpeg decodes with the loop filter skipped, as cvp's reader does, and converts
    with swscale's default matrix: at every width the reader handles, these pixels equal the
    reader's bit for bit (tests/native/test_frame_sizes.py checks it).
    """
    wanted = {item.frame_index for item in items}
    frames = decode_unfiltered_bgr(path, wanted)
    return [item.replace(pixels_bgr=frames[item.frame_index]) for item in items]


def read_segment(
    path: str | Path,
    frame_indices: Sequence[int],
    *,
    export: ReaderExport,
    decoder_log: list[str] | None = None,
) -> list[BitcostFrame]:
    """One part of a split read: seek to the keyframe before the first index, decode on.

    Single-threaded slice decoding and never pruned, so maps and pixels equal a serial,
    unpruned read (tested on MP4 inputs). Returns the reader's records, sorted by frame
    (see :func:`read_bitcost`); ``export`` and ``decoder_log`` as in :func:`read_bitcost`.
    """
    if _cvr is None:
        raise RuntimeError("codec-video-prep's cv_reader_fast is not installed")
    ids = sorted(int(i) for i in frame_indices)
    if export.pixels and _reader_pixels_unsafe(path, export.out_width, export.out_height):
        items = read_segment(path, ids, export=_without_pixels(export), decoder_log=decoder_log)
        return _with_unfiltered_pixels(path, items)
    with capture_decoder_log(decoder_log):
        items = _cvr.read_video_fast_selected_segment(
            str(path),
            ids,
            ids[0],
            ids[-1],
            1,
            1 if export.bitcost else 0,
            "slice",
            1 if export.pixels else 0,
            int(export.out_width),
            int(export.out_height),
        )
    return [frame_from_reader(item) for item in items]


def iter_reader_rgb(
    path: str | Path, *, step: int = 64, decoder_log: list[str] | None = None
) -> Iterator[np.ndarray]:
    """Yield (H, W, 3) uint8 RGB frames of cvp's fast reader (loop filter skipped).

    The reader returns BGR at the native size; only the channel order is swapped, so
    the pixels match a PyAV decode with ``skip_loop_filter=all`` converted by
    :func:`native.pyav_decode.iter_rgb` (same swscale conversion). ``decoder_log`` receives the decoder's
    log lines of every read, as in :func:`read_bitcost` (count them with
    :func:`native.decoder_log.decoder_log_count`).
    """
    if _cvr is None:
        raise RuntimeError("codec-video-prep's cv_reader_fast is not installed")
    # An upper bound is enough: indices past the end are simply not returned.
    total = int(probe_container(path).packet_size_bytes.size)
    # Seeking chunks keep the work linear; the reader's seek is trusted on MP4-family
    # files only (on MPEG-TS it lands on the wrong frames), so others decode from 0.
    can_seek = Path(path).suffix.lower() in (".mp4", ".m4v", ".mov", ".3gp", ".3g2")
    pixels_only = ReaderExport(pixels=True, bitcost=False)  # at the decoder's size
    for lo in range(0, total, max(1, int(step))):
        # Bounded memory: the reader returns every requested frame of a call at once.
        ids = list(range(lo, min(total, lo + step)))
        if can_seek and lo > 0:
            items = read_segment(path, ids, export=pixels_only, decoder_log=decoder_log)
        else:
            items = read_bitcost(path, ids, export=pixels_only, decoder_log=decoder_log)
        for item in items:
            yield np.ascontiguousarray(item.pixels_bgr[:, :, ::-1])
