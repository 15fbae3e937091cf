"""The one gateway to compiled decoders: cvp's patched FFmpeg reader and PyAV.

Everything returned here is plain numpy arrays, tuples and dicts; records are built
in ``backend/``. Thread counts and pruning switches are arguments, never read from
the environment by callers.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

try:  # The wheel exists for Linux x86-64 only; everything else degrades gracefully.
    from codec_video_prep import cv_reader_fast as _cvr
except ImportError:  # pragma: no cover - exercised only off Linux x86-64
    _cvr = None

# cv_reader reads this variable with getenv() on every call; we set it per call
# under a lock so one caller's choice never leaks into another's (cvp leaks it).
_TARGET_ONLY_ENV = "CVR_DISABLE_TARGET_ONLY"
_ENV_LOCK = threading.Lock()
_LOG_LOCK = threading.Lock()  # one redirected fd 2 at a time (see _decoder_log)


def _fresh_locks() -> None:
    # A fork copies the locks as they are; if another thread held one at that moment, the
    # single-threaded child would wait on it for ever.
    global _ENV_LOCK, _LOG_LOCK
    _ENV_LOCK = threading.Lock()
    _LOG_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks)

BITCOST_CODECS = ("h264", "hevc", "vp9")

DECODER_LOG_KEEP = 20  # lines of a read's decoder log kept (the rest are counted)
_LOG_PREFIX = re.compile(r"^\[[^\]]* @ 0x[0-9a-f]+\]\s*")  # "[h264 @ 0x55d0…] "


@contextmanager
def _decoder_log(into: list[str] | None) -> Iterator[None]:
    """Collect what cvp's FFmpeg prints on stderr (fd 2) during a read.

    Its log level cannot be set, and a damaged file makes it print a line per broken
    macroblock; the caller reports them as one warning or error instead. The first
    ``DECODER_LOG_KEEP`` lines (prefix "[h264 @ 0x…]" removed) go to ``into``, then
    one "… n more" line; None drops them.
    """
    with _LOG_LOCK, tempfile.TemporaryFile() as captured:
        # fd 2 is process-wide: two threads redirecting it at once could leave it pointing
        # at a deleted file. The reader holds the GIL while it runs, so nothing is lost.
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if into is not None:
                captured.seek(0)
                text = captured.read().decode("utf-8", errors="replace")
                lines = [_LOG_PREFIX.sub("", ln).strip() for ln in text.splitlines() if ln.strip()]
                into.extend(lines[:DECODER_LOG_KEEP])
                if len(lines) > DECODER_LOG_KEEP:
                    into.append(f"… {len(lines) - DECODER_LOG_KEEP} more lines")


_MORE_LINES = re.compile(r"^… (\d+) more lines$")


def decoder_log_count(lines: Sequence[str]) -> int:
    """How many lines the decoder printed, from what :func:`_decoder_log` kept of its reads."""
    return sum(int(m.group(1)) if (m := _MORE_LINES.match(line)) else 1 for line in lines)


def bitcost_reader_available() -> bool:
    """True when cvp's patched reader (``cv_reader_fast``) imported."""
    return _cvr is not None


def _dist_version(package: str) -> str | None:
    """An installed package's version from its ``*.dist-info`` folder name.

    Cheaper than importlib.metadata (~90 ms to import), which every CLI run would pay.
    """
    module = sys.modules.get(package)
    if module is None or module.__file__ is None:
        return None
    site = Path(module.__file__).resolve().parent.parent
    for info in site.glob(f"{package}-*.dist-info"):
        return info.name[len(package) + 1 : -len(".dist-info")]
    return None


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """Versions of the decoders behind this gateway."""
    cvp_version = _dist_version("codec_video_prep") if _cvr is not None else None
    libav = av.library_versions.get("libavcodec")
    return {
        "pyav": av.__version__,
        "pyav_libavcodec": ".".join(map(str, libav)) if libav else None,
        "codec_video_prep": cvp_version,
        "cvp_ffmpeg": "5.1 (patched, bundled in codec-video-prep)" if _cvr is not None else None,
    }


def read_bitcost(
    path: str | Path,
    frame_indices: Sequence[int],
    *,
    export_pixels: bool,
    out_width: int = 0,
    out_height: int = 0,
    thread_type: str = "slice",
    thread_count: int = 1,
    target_only: bool = True,
    export_bitcost: bool = True,
    decoder_log: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Per-frame bitcost grids (and BGR pixels) from cvp's patched decoder, read from the start.

    Parameters
    ----------
    path : video file.
    frame_indices : 0-based presentation-order indices; any order, repeats allowed.
    export_pixels : also return ``pixels``, (out_height, out_width, 3) uint8 **BGR**,
        scaled with SWS_AREA from a decode that skips the loop filter. Without
        pixels the reader also skips the IDCT (about 2.5× faster).
    thread_type, thread_count : decoder threading ("slice" / "frame").
    target_only : let the decoder skip bitcost for pictures far from the wanted
        frames (cvp's default; it drops maps of reordered P frames, spec §14.5).
    export_bitcost : False returns pixels only (``bitcost`` None).
    decoder_log : receives the decoder's log lines (damaged streams), instead of stderr.

    Returns
    -------
    One dict per reached request, sorted by ``frame_idx`` with repeats, with keys
    ``frame_idx``, ``pict_type``, ``width``, ``height``, ``codec_name``, ``bitcost``
    (dict of arrays or None) and optionally ``pixels``.
    """
    if _cvr is None:
        raise RuntimeError("codec-video-prep's cv_reader_fast is not installed")
    ids = [int(i) for i in frame_indices]
    if export_pixels and _reader_pixels_unsafe(path, out_width, out_height):
        items = read_bitcost(
            path,
            ids,
            export_pixels=False,
            thread_type=thread_type,
            thread_count=thread_count,
            target_only=target_only,
            export_bitcost=export_bitcost,
            decoder_log=decoder_log,
        )
        return _with_unfiltered_pixels(path, items)
    with _ENV_LOCK:
        previous = os.environ.get(_TARGET_ONLY_ENV)
        os.environ[_TARGET_ONLY_ENV] = "0" if target_only else "1"
        try:
            with _decoder_log(decoder_log):
                return _cvr.read_video_fast_selected(
                    str(path),
                    ids,
                    int(thread_count),
                    1 if export_bitcost else 0,
                    thread_type,
                    None,
                    1 if export_pixels else 0,
                    int(out_width),
                    int(out_height),
                )
        finally:
            if previous is None:
                os.environ.pop(_TARGET_ONLY_ENV, None)
            else:
                os.environ[_TARGET_ONLY_ENV] = previous


# The reader's pixel export at the stream's own size skips scaling, and that path is broken
# for widths that are not a multiple of 16: measured on H.264, HEVC and VP9 at 20 frames, widths
# 16k+2 … 16k+6 return shifted pixels (22–34 dB against a normal decode) and 16k+8 … 16k+12 abort
# the process (heap corruption: "malloc_consolidate(): invalid chunk size"), while every scaled
# size, and every multiple of 16, is right. Rows are unaffected (any height works).
READER_NATIVE_WIDTH_ALIGN = 16


@functools.lru_cache(maxsize=64)
def _stream_size(path: str, mtime_ns: int, size_bytes: int) -> tuple[int, int]:
    """(width, height) of the first video stream, from the header only (cached per file version)."""
    with av.open(path, metadata_errors="ignore") as container:
        ctx = container.streams.video[0].codec_context
        return int(ctx.width or 0), int(ctx.height or 0)


def _reader_pixels_unsafe(path: str | Path, out_width: int, out_height: int) -> bool:
    """Whether the reader would export pixels through its broken unscaled path (see above)."""
    st = os.stat(path)
    width, height = _stream_size(str(path), st.st_mtime_ns, st.st_size)
    native = int(out_width) in (0, width) and int(out_height) in (0, height)
    return native and width % READER_NATIVE_WIDTH_ALIGN != 0


def _with_unfiltered_pixels(path: str | Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attach to the reader's dicts the BGR pixels its unscaled path should have returned.

    PyAV's FFmpeg decodes with the loop filter skipped, as cvp's reader does, and converts
    with swscale's default matrix: at every width the reader handles, these pixels equal the
    reader's bit for bit (tests/native/test_frame_sizes.py checks it).
    """
    wanted = {int(item["frame_idx"]) for item in items}
    frames = decode_unfiltered_bgr(path, wanted)
    for item in items:
        item["pixels"] = frames[int(item["frame_idx"])]
    return items


def decode_unfiltered_bgr(path: str | Path, frame_indices: set[int] | Sequence[int]) -> dict[int, np.ndarray]:
    """Decode frames at their own size with the loop filter skipped, as cvp's fast reader does.

    Returns
    -------
    dict frame_index -> (height, width, 3) uint8 **BGR** (the reader's channel order), for
    every wanted index the stream reaches (presentation order, counted from 0).
    """
    wanted = {int(i) for i in frame_indices}
    result: dict[int, np.ndarray] = {}
    if not wanted:
        return result
    last = max(wanted)
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        stream.codec_context.options = {"skip_loop_filter": "all"}
        stream.thread_type = "AUTO"
        for frame_index, frame in enumerate(container.decode(stream)):
            if frame_index in wanted:
                result[frame_index] = frame.to_ndarray(format="bgr24")
            if frame_index >= last:
                break
    return result


def read_segment(
    path: str | Path,
    frame_indices: Sequence[int],
    *,
    export_bitcost: bool,
    export_pixels: bool,
    out_width: int,
    out_height: int,
    decoder_log: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One part of a split read: seek to the keyframe before the first index, decode on.

    Single-threaded slice decoding and never pruned, so maps and pixels equal a serial,
    unpruned read (tested on MP4 inputs). Returns the reader's dicts, sorted by frame;
    ``decoder_log`` as in :func:`read_bitcost`.
    """
    if _cvr is None:
        raise RuntimeError("codec-video-prep's cv_reader_fast is not installed")
    ids = sorted(int(i) for i in frame_indices)
    if export_pixels and _reader_pixels_unsafe(path, out_width, out_height):
        items = read_segment(
            path,
            ids,
            export_bitcost=export_bitcost,
            export_pixels=False,
            out_width=0,
            out_height=0,
            decoder_log=decoder_log,
        )
        return _with_unfiltered_pixels(path, items)
    with _decoder_log(decoder_log):
        return _cvr.read_video_fast_selected_segment(
            str(path),
            ids,
            ids[0],
            ids[-1],
            1,
            1 if export_bitcost else 0,
            "slice",
            1 if export_pixels else 0,
            int(out_width),
            int(out_height),
        )


FrameHook = Callable[[dict[str, Any], "np.ndarray | None", "np.ndarray | None"], Any]
"""``hook(item, bgr, slot) -> result``: runs where a frame lands (a worker or this process).

``item`` is the reader's dict (``pixels`` removed, ``bitcost`` already cut to the kept
keys), ``bgr`` its pixels as read (or None without pixels) and ``slot`` the frame's row
of the shared output (None without pixels), which the hook must fill. The (small,
picklable) result comes back as ``item["frame_result"]``."""


def _read_into(
    path: str,
    part: list[int],
    pixels: np.ndarray | None,
    offset: int,
    export_bitcost: bool,
    keep_keys: tuple[str, ...] | None,
    size: tuple[int, int],
    hook: FrameHook | None = None,
    seek: bool = True,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Read one part; fill its rows of ``pixels[offset:]`` and keep only wanted maps.

    ``seek`` False decodes from the file's start, exporting only the part's frames (for
    containers where the reader's seek is not trusted); unpruned, like a segment read.
    Returns the reader's dicts and the decoder's log lines.
    """
    log: list[str] = []
    if seek:
        items = read_segment(
            path,
            part,
            export_bitcost=export_bitcost,
            export_pixels=pixels is not None,
            out_width=size[1],
            out_height=size[0],
            decoder_log=log,
        )
    else:
        items = read_bitcost(
            path,
            part,
            export_pixels=pixels is not None,
            export_bitcost=export_bitcost,
            target_only=False,
            out_width=size[1],
            out_height=size[0],
            decoder_log=log,
        )
    out = []
    for row, item in enumerate(items):
        bitcost = item.get("bitcost")
        if bitcost is not None and keep_keys is not None:
            kept = {k: v for k, v in bitcost.items() if k in keep_keys}
            # None of the wanted grids: pass the names of those present (not their
            # arrays) so the caller's error can list them.
            item["bitcost"] = kept or dict.fromkeys(bitcost)
        bgr = item.pop("pixels", None)
        slot = pixels[offset + row] if pixels is not None and row < len(part) else None
        if hook is not None:
            item["frame_result"] = hook(item, bgr, slot)
        elif slot is not None:
            slot[...] = bgr
        out.append(item)
    return out, log


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _segment_child(conn: Any, inherited: tuple[Any, ...], *args: Any) -> None:
    """Body of a forked reader: its result, or its failure as one line, goes to the parent."""
    # Ended by the parent (SegmentReads.stop) or with it: no handler of the parent's may
    # turn the signal into an exception here, and a child whose parent has gone must not
    # wait on a pipe nobody reads; its copies of the read ends would keep that pipe open.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which ends us
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # held since the fork
    # What the parent left for its garbage collector is not ours to free: a PyAV container's
    # scaler waits, when freed, for slice threads that do not exist after the fork, so a
    # collection here blocked the child (and its parent, waiting on the pipe) for ever.
    gc.freeze()
    for end in inherited:
        end.close()
    _die_with_parent()
    try:
        result: tuple[bool, Any] = (True, _read_into(*args))
    except BaseException as exc:  # whatever stops a child is the parent's to report
        result = (False, f"{type(exc).__name__}: {exc}")
    try:
        conn.send(result)
    finally:
        conn.close()
    if not result[0]:
        os._exit(1)  # skip multiprocessing's traceback print; the parent says what happened


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    import multiprocessing

    known = multiprocessing.parent_process()  # recorded at the fork, unlike getppid()
    parent = known.pid if known is not None else os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the closed pipe ends still stop a late send
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


class SegmentReads:
    """Reads of several frame ranges at once: the first here, the rest in forked children.

    Children write pixels straight into an anonymous shared mapping made before the
    fork, so nothing large is pickled; only the (small) bitcost maps and hook results
    come back through a pipe. Pixels land in concatenated part order: ``pixels[i]`` is
    frame ``sum(parts, [])[i]``. Without a hook a row holds the reader's BGR frame;
    with one (``frame_shape`` sets the row shape) the hook fills it, so per-frame work
    such as colour conversion and statistics runs in parallel with the other parts.
    Parts seek to their keyframe (``seek``), or decode from the start where the reader's
    seek cannot be trusted.
    """

    def __init__(
        self,
        path: str | Path,
        parts: Sequence[Sequence[int]],
        *,
        export_bitcost: bool,
        export_pixels: bool,
        out_width: int,
        out_height: int,
        keep_keys: tuple[str, ...] | None = None,
        read_first_here: bool = True,
        hook: FrameHook | None = None,
        frame_shape: tuple[int, ...] | None = None,
        seek: bool = True,
    ) -> None:
        import mmap
        import multiprocessing

        self._path = str(path)
        self._parts = [sorted(int(i) for i in p) for p in parts]
        total = sum(len(p) for p in self._parts)
        self._offsets = np.concatenate([[0], np.cumsum([len(p) for p in self._parts])]).astype(int).tolist()
        self._size = (int(out_height), int(out_width))
        self._export_bitcost = export_bitcost
        self._keep = keep_keys
        self._first_here = read_first_here
        self._hook = hook
        self._seek = seek
        self.decoder_log: list[str] = []
        """The decoder's log lines of every part (filled by :meth:`wait`)."""
        self.pixels: np.ndarray | None = None
        if export_pixels and (int(out_width) <= 0 or int(out_height) <= 0):
            # The reader's 0 means "decoder size", which the shared rows cannot know.
            raise ValueError(
                f"Invalid output size ({out_width}x{out_height}). Supported values are positive sizes."
            )
        if export_pixels:
            shape = tuple(frame_shape) if frame_shape is not None else (int(out_height), int(out_width), 3)
            frame_bytes = int(np.prod(shape))
            self._map = mmap.mmap(-1, max(1, total * frame_bytes))
            self.pixels = np.frombuffer(self._map, dtype=np.uint8, count=total * frame_bytes).reshape(
                total, *shape
            )
        ctx = multiprocessing.get_context("fork")
        self._children: list[tuple[int, Any, Any]] = []
        for k, part in enumerate(self._parts):
            if k == 0 and read_first_here:
                continue
            recv, send = ctx.Pipe(duplex=False)
            args = (
                self._path,
                part,
                self.pixels,
                self._offsets[k],
                export_bitcost,
                keep_keys,
                self._size,
                hook,
                seek,
            )
            inherited = (recv, *(r for _, _, r in self._children))
            child = ctx.Process(target=_segment_child, args=(send, inherited, *args), daemon=True)
            # The child starts with Ctrl-C and SIGTERM held until it has its own handlers: one
            # that arrived earlier (a stop() as the parent is interrupted) met the parent's
            # KeyboardInterrupt handler in multiprocessing's start-up and printed a traceback.
            held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                child.start()
            except OSError as exc:  # e.g. no memory or process slots for the fork
                recv.close()
                self.stop()
                raise RuntimeError(f"segment read failed: cannot start a reader ({exc})") from exc
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
                send.close()
            self._children.append((k, child, recv))

    def stop(self) -> None:
        """End every child still running and release its pipe (after a failure here)."""
        for _, child, recv in self._children:
            recv.close()
            if child.is_alive():
                child.terminate()
            child.join()
        self._children = []

    def wait(self) -> list[dict[str, Any]]:
        """Every part's reader dicts (without pixels), in part order.

        Raises
        ------
        RuntimeError : a child failed or a part came back with other frames than asked.
        """
        results: dict[int, list[dict[str, Any]]] = {}
        errors = []
        try:
            if self._first_here:
                results[0], log = _read_into(
                    self._path,
                    self._parts[0],
                    self.pixels,
                    0,
                    self._export_bitcost,
                    self._keep,
                    self._size,
                    self._hook,
                    self._seek,
                )
                self.decoder_log += log
            for k, child, recv in self._children:
                try:
                    ok, payload = recv.recv()
                except EOFError:  # died without a word (killed, or crashed in C)
                    ok, payload = False, None
                child.join()  # before reading exitcode, which is None until then
                if ok:
                    results[k], log = payload
                    self.decoder_log += log
                else:
                    errors.append(payload or f"reader exited with code {child.exitcode}")
        finally:
            # Whatever failed here, no child is left blocked on a full pipe or running on.
            self.stop()
        if errors:
            raise RuntimeError("segment read failed: " + "; ".join(errors))
        out: list[dict[str, Any]] = []
        for k, part in enumerate(self._parts):
            if [int(it["frame_idx"]) for it in results[k]] != part:
                raise RuntimeError("segment read returned other frames than requested")
            out += results[k]
        return out


def can_fork() -> bool:
    """Split reads need fork (children inherit the shared pixel mapping)."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


@dataclass(frozen=True)
class ContainerProbe:
    """Plain facts read from a container with PyAV (no ffprobe binary involved)."""

    format_name: str
    codec_name: str
    width: int
    height: int
    avg_frame_rate: Fraction | None
    nb_frames: int
    duration_secs: float
    stream_bit_rate: int
    format_bit_rate: int
    time_base: Fraction
    start_pts: int | None
    packet_pts: np.ndarray
    packet_dts: np.ndarray
    packet_size_bytes: np.ndarray
    packet_is_keyframe: np.ndarray
    sample_aspect_ratio: tuple[int, int] = (1, 1)
    """(num, den) of the stream's SAR; (1, 1) when square or unset."""


def probe_container(path: str | Path) -> ContainerProbe:
    """Demux the first video stream and read its header facts and every packet.

    Raises
    ------
    av.FFmpegError, ValueError : the backend turns these into ``ProbeError``.
    """
    with av.open(str(path), metadata_errors="ignore") as container:
        if not container.streams.video:
            raise ValueError("no video stream")
        stream = container.streams.video[0]
        ctx = stream.codec_context
        if ctx is None:  # a damaged header can name a codec that no decoder knows
            raise ValueError("no decoder for the video stream's codec")
        pts: list[int] = []
        dts: list[int] = []
        sizes: list[int] = []
        keys: list[bool] = []
        missing = -(2**62)
        for packet in container.demux(stream):
            if packet.size <= 0:
                continue  # flush packets carry no frame
            pts.append(missing if packet.pts is None else int(packet.pts))
            dts.append(missing if packet.dts is None else int(packet.dts))
            sizes.append(int(packet.size))
            keys.append(bool(packet.is_keyframe))
        return ContainerProbe(
            format_name=str(container.format.name),
            codec_name=str(ctx.name or "").lower(),
            width=int(ctx.width or 0),
            height=int(ctx.height or 0),
            avg_frame_rate=None if stream.average_rate is None else Fraction(stream.average_rate),
            nb_frames=int(stream.frames or 0),
            duration_secs=(container.duration or 0) / 1_000_000,
            stream_bit_rate=int(stream.bit_rate or 0),
            format_bit_rate=int(container.bit_rate or 0),
            time_base=Fraction(stream.time_base or Fraction(1, 90000)),
            start_pts=None if stream.start_time is None else int(stream.start_time),
            packet_pts=np.asarray(pts, dtype=np.int64),
            packet_dts=np.asarray(dts, dtype=np.int64),
            packet_size_bytes=np.asarray(sizes, dtype=np.int64),
            packet_is_keyframe=np.asarray(keys, dtype=bool),
            sample_aspect_ratio=_sar(stream),
        )


def _sar(stream: Any) -> tuple[int, int]:
    """The stream's sample aspect ratio as (num, den), (1, 1) when unset or nonsense."""
    sar = stream.sample_aspect_ratio or getattr(stream.codec_context, "sample_aspect_ratio", None)
    if not sar or sar.numerator <= 0 or sar.denominator <= 0:
        return (1, 1)
    return (int(sar.numerator), int(sar.denominator))


def decode_frames_rgb(
    path: str | Path,
    frame_indices: Sequence[int],
    *,
    out_width: int,
    out_height: int,
    thread_count: int = 0,
) -> dict[int, np.ndarray]:
    """Decode the wanted frames with PyAV's FFmpeg and scale them (area filter).

    Returns
    -------
    dict frame_index -> (out_height, out_width, 3) uint8 RGB, for every wanted index
    the stream reaches (presentation order, counted from 0).
    """
    wanted = sorted({int(i) for i in frame_indices})
    result: dict[int, np.ndarray] = {}
    if not wanted:
        return result
    last = wanted[-1]
    wanted_set = set(wanted)
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = int(thread_count)
        for frame_index, frame in enumerate(container.decode(stream)):
            if frame_index in wanted_set:
                result[frame_index] = frame.to_ndarray(
                    format="rgb24",
                    width=out_width,
                    height=out_height,
                    interpolation="AREA",
                    threads=thread_count,  # swscale's threads follow the decoder's
                )
            if frame_index >= last:
                break
    return result


def decode_frame_native(
    path: str | Path,
    frame_index: int,
    *,
    pts_secs: float | None = None,
    seek_secs: float | None = None,
    thread_count: int = 0,
) -> np.ndarray:
    """One frame at the size the stream stores it, (H, W, 3) uint8 RGB.

    With ``pts_secs`` (the frame's presentation time, stream clock) and ``seek_secs`` (a keyframe
    at or before it), the decoder seeks to the keyframe and stops at the frame whose time matches
    within half a frame; otherwise, or when no frame matched, it decodes from the start and counts
    frames in presentation order.

    Raises
    ------
    av.FFmpegError, ValueError : unreadable file, or the stream ends before ``frame_index``.
    """
    if pts_secs is not None and seek_secs is not None:
        with av.open(str(path), metadata_errors="ignore") as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            stream.codec_context.thread_count = int(thread_count)
            rate = float(stream.average_rate or 25)
            tolerance = 0.5 / max(rate, 1e-3)
            container.seek(round(seek_secs / float(stream.time_base)), stream=stream, backward=True)
            for frame in container.decode(stream):
                if frame.time is None:
                    break
                if abs(frame.time - pts_secs) <= tolerance:
                    return frame.to_ndarray(format="rgb24")
                if frame.time > pts_secs + tolerance:
                    break
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = int(thread_count)
        for index, frame in enumerate(container.decode(stream)):
            if index == frame_index:
                return frame.to_ndarray(format="rgb24")
    raise ValueError(f"the stream ends before frame {frame_index}")


def count_decoded_frames(path: str | Path) -> int:
    """Number of frames the decoder outputs (slow: a full decode, used for checks)."""
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        return sum(1 for _ in container.decode(stream))


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


def iter_rgb(path: str | Path, *, thread_count: int = 0, conversion: str = "bt601") -> Iterator[np.ndarray]:
    """Yield each decoded frame as (H, W, 3) uint8 RGB, in presentation order.

    A normal (deblocked) FFmpeg decode through PyAV. ``conversion``:

    * ``bt601`` (default): limited-range yuv420p frames of even size are converted by
      OpenCV (BT.601, rounded); swscale's fast yuv420p→RGB path that PyAV uses truncates
      and comes out about 1 level darker on colour content (an RGB→yuv420p→RGB round trip
      loses ~1.2 levels of luma), and OpenCV's is also faster. Other formats (yuvj, 4:4:4,
      10-bit, RGB) go through swscale.
    * ``swscale``: always PyAV's ``to_ndarray(format="rgb24")``, the conversion cvp's
      reader uses (:func:`iter_reader_rgb`).
    """
    if conversion not in ("bt601", "swscale"):
        raise ValueError(f"Invalid conversion ({conversion!r}). Supported values are 'bt601', 'swscale'.")
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = int(thread_count)
        for frame in container.decode(stream):
            yield _frame_rgb(frame, conversion)


def _frame_rgb(frame: Any, conversion: str) -> np.ndarray:
    """(H, W, 3) uint8 RGB of a decoded frame (see :func:`iter_rgb` for ``conversion``)."""
    import cv2

    if (
        conversion == "bt601"
        and frame.format.name == "yuv420p"
        and frame.color_range != 2  # 2 = JPEG (full range)
        and frame.width % 2 == 0
        and frame.height % 2 == 0
    ):
        return cv2.cvtColor(frame.to_ndarray(), cv2.COLOR_YUV2RGB_I420)
    return frame.to_ndarray(format="rgb24")


def iter_frames_rgb(
    path: str | Path, frame_indices: Sequence[int], *, thread_count: int = 0
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (frame_index, (H, W, 3) uint8 RGB) of the wanted frames at the stream's own size.

    A normal (deblocked) decode as :func:`iter_rgb` (``bt601`` conversion), frames counted
    from 0 in presentation order; only the wanted ones are converted, in ascending order, and
    decoding stops after the last. Indices the stream does not reach are not yielded.
    """
    wanted = sorted({int(i) for i in frame_indices})
    if not wanted:
        return
    wanted_set, last = set(wanted), wanted[-1]
    with av.open(str(path), metadata_errors="ignore") as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = int(thread_count)
        for frame_index, frame in enumerate(container.decode(stream)):
            if frame_index in wanted_set:
                yield frame_index, _frame_rgb(frame, "bt601")
            if frame_index >= last:
                break


def iter_reader_rgb(
    path: str | Path, *, step: int = 64, decoder_log: list[str] | None = None
) -> Iterator[np.ndarray]:
    """Yield (H, W, 3) uint8 RGB frames of cvp's fast reader (loop filter skipped).

    The reader returns BGR at the native size; only the channel order is swapped, so
    the pixels match a PyAV decode with ``skip_loop_filter=all`` converted by
    :func:`iter_rgb` (same swscale conversion). ``decoder_log`` receives the decoder's
    log lines of every read, as in :func:`read_bitcost` (count them with
    :func:`decoder_log_count`).
    """
    if _cvr is None:
        raise RuntimeError("codec-video-prep's cv_reader_fast is not installed")
    # An upper bound is enough: indices past the end are simply not returned.
    total = int(probe_container(path).packet_size_bytes.size)
    # Seeking chunks keep the work linear; the reader's seek is trusted on MP4-family
    # files only (on MPEG-TS it lands on the wrong frames), so others decode from 0.
    can_seek = Path(path).suffix.lower() in (".mp4", ".m4v", ".mov", ".3gp", ".3g2")
    for lo in range(0, total, max(1, int(step))):
        # Bounded memory: the reader returns every requested frame of a call at once.
        ids = list(range(lo, min(total, lo + step)))
        if can_seek and lo > 0:
            items = read_segment(
                path,
                ids,
                export_bitcost=False,
                export_pixels=True,
                out_width=0,
                out_height=0,
                decoder_log=decoder_log,
            )
        else:
            items = read_bitcost(path, ids, export_pixels=True, export_bitcost=False, decoder_log=decoder_log)
        for item in items:
            yield np.ascontiguousarray(item["pixels"][:, :, ::-1])


# SVT-AV1's encoder open (svt_av1_enc_init_handle) raises the calling thread to SCHED_FIFO 99
# whenever it may (as root); its worker threads, and every thread or process started afterwards
# (app workers, Chromium under the tests), inherit that. Real-time threads at one priority never
# yield to each other, so on 2 cores a spinning renderer starved the rest for minutes.
_REALTIME_POLICIES = frozenset({os.SCHED_FIFO, os.SCHED_RR}) if hasattr(os, "SCHED_FIFO") else frozenset()


def drop_realtime_scheduling() -> int:
    """Put every thread of this process that runs under a real-time policy back on SCHED_OTHER.

    Call it after each SVT-AV1 encode call (the encoder opens lazily, on the first frame).

    Returns
    -------
    int
        How many threads were moved (0 where the platform has no per-thread scheduling).
    """
    if not _REALTIME_POLICIES or not os.path.isdir("/proc/self/task"):
        return 0
    moved = 0
    for entry in os.scandir("/proc/self/task"):
        tid = int(entry.name)
        try:
            if os.sched_getscheduler(tid) in _REALTIME_POLICIES:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                moved += 1
        except (ProcessLookupError, PermissionError):  # the thread ended meanwhile, or is not ours
            continue
    return moved


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
