"""Per-frame luma bias of a decoder output against one or two references (spec: luma-bias.md)."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from backend.config import param, validate_fields
from backend.errors import CodecLensError, DecodeError, InputError
from backend.luma.geometry import GopGeometry, LumaGeometry
from backend.luma.records import FrameLuma
from backend.luma.report import LumaAnalysis, summarize
from backend.stages.probe import ProbeConfig, check_input_file, probe
from native import COMPILED_KERNEL, FFmpegError, Yuv420Frame, iter_luma_frames, measure_yuv420_pair

# 1000·Y = 299 R + 587 G + 114 B is an integer below 2**24, so float32 holds every luma
# difference exactly and the squared sum (in float64) is exact: no weight rounding.
_W1000_ROW = np.asarray([[299.0, 587.0, 114.0]], dtype=np.float32)
# Rows per slice of the float luma difference: at 1344 px wide a slice's float copy (258 KB) stays
# in the CPU cache between the conversion, the transform and the norm, and its squared sum stays
# below 2**53 (exact) for frames up to ~6000 px wide.
_SLICE_ROWS = 16
MEASURE_WORKERS = 2
"""Threads converting and measuring frame pairs while the decoders run (see docs/luma-bias.md, Speed)."""
PREFETCH_FRAMES = 4
"""Decoded frames each input may hold ahead of the measuring threads."""


@dataclass(frozen=True, kw_only=True)
class MeasureConfig:
    """How test and reference frames are paired and cut into cells."""

    offset: int = param(
        0,
        label="Offset",
        help="test frame t is paired with reference frame t + offset",
        min=-1_000_000,
        max=1_000_000,
    )
    truncate: bool = param(
        False, label="Truncate", help="compare the first min(test, reference) pairs when the counts differ"
    )
    cell: int = param(
        64, label="Cell", help="side of the square cells of the gain analysis and fit", min=4, max=4096
    )

    def __post_init__(self) -> None:
        validate_fields(self)


# --------------------------------------------------------------------------- per-frame kernel


class _PairKernel:
    """One pass over a test frame and its references: channel sums, cell sums and Y SSE.

    The frame is walked in bands of ``cell`` rows so that each band of every input is read
    from memory once and then worked on in the CPU cache; a :class:`Yuv420Frame` is converted
    to RGB band by band into a scratch buffer, so its RGB never leaves the cache. Per band:
    the test band widened to
    int16 in a scratch buffer and its column sums; per reference, its band widened the same
    way, the difference test − reference computed in place, the difference's column sums,
    and the squared luma of the difference in float32 slices of ``_SLICE_ROWS`` rows.
    Reference sums are test sums minus difference sums. Every numpy operation runs on one
    dtype with a preallocated output: numpy's mixed-type loops (``subtract(uint8, uint8,
    dtype=int16)``, uint8 → uint16 reductions) cast through small buffers and cost 2–4× more.
    Scratch buffers are per thread, so one kernel serves several measuring threads.
    """

    def __init__(self, height: int, width: int, cell: int) -> None:
        self.height, self.width, self.cell = height, width, cell
        self.rows, self.cols = height // cell, width // cell
        self.bands = -(-height // cell)
        # Column sums over `cell` rows of values in [-255, 255] fit int16 up to 128 rows; an
        # explicit dtype keeps numpy from widening the reduction to int64 (7× slower here).
        self.acc = np.int16 if cell * 255 <= np.iinfo(np.int16).max else np.int32
        # Cell sums as one small matrix product: each cell's c·3 interleaved column sums times a
        # selection matrix that adds up every third value (numpy's strided sum is far slower).
        self.select = np.tile(np.eye(3), (cell, 1))
        self._scratch = threading.local()

    def _buffers(self) -> Any:
        s = self._scratch
        if not hasattr(s, "test"):
            w, rows = self.width, min(self.cell, self.height)
            s.test = np.empty((rows, w * 3), np.int16)
            s.diff = np.empty((rows, w * 3), np.int16)
            s.part = np.empty((_SLICE_ROWS, w, 3), np.float32)
            s.luma = np.empty((_SLICE_ROWS, w), np.float32)
            s.test_rgb = np.empty((rows, w, 3), np.uint8)
            s.ref_rgb = np.empty((rows, w, 3), np.uint8)
            s.i420 = np.empty((rows * 3 // 2, w), np.uint8)
        return s

    def _rows(
        self, frame: np.ndarray | Yuv420Frame, y0: int, y1: int, out: np.ndarray, i420: np.ndarray
    ) -> np.ndarray:
        """(y1 − y0, W·3) uint8 RGB rows of an array (a view) or a yuv420p frame (converted into ``out``)."""
        if isinstance(frame, np.ndarray):
            return frame[y0:y1].reshape(y1 - y0, self.width * 3)
        return frame.rgb_rows(y0, y1, out=out, scratch=i420).reshape(y1 - y0, self.width * 3)

    def _finish(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(3,) int64 channel sums and (rows, cols, 3) int64 cell sums from band column sums."""
        c, w = self.cell, self.width
        channels = columns.sum(axis=0, dtype=np.int64).reshape(w, 3).sum(axis=0)
        full = columns[: self.rows, : self.cols * c * 3].astype(np.float64)
        cells = full.reshape(self.rows * self.cols, c * 3) @ self.select
        # Exact: every cell sum is an integer far below 2**53.
        return channels, np.rint(cells).astype(np.int64).reshape(self.rows, self.cols, 3)

    def _luma_sse(self, diff: np.ndarray, part: np.ndarray, luma: np.ndarray) -> float:
        """Σ (1000·ΔY)² of an int16 (rows, W·3) difference band, exact in float64."""
        w3 = self.width * 3
        total = 0.0
        for ys in range(0, diff.shape[0], _SLICE_ROWS):
            rows = min(_SLICE_ROWS, diff.shape[0] - ys)
            np.copyto(part[:rows].reshape(rows, w3), diff[ys : ys + rows])
            cv2.transform(part[:rows], _W1000_ROW, dst=luma[:rows])
            total += cv2.norm(luma[:rows], cv2.NORM_L2SQR)
        return total

    def __call__(
        self, test: np.ndarray | Yuv420Frame, refs: Sequence[np.ndarray | Yuv420Frame]
    ) -> tuple[tuple[np.ndarray, np.ndarray], list[tuple[np.ndarray, np.ndarray, float]]]:
        """Test (channel sums, cell sums) and, per reference, (channel sums, cell sums, Y SSE)."""
        if (
            COMPILED_KERNEL
            and self.cell % 2 == 0
            and isinstance(test, Yuv420Frame)
            and all(isinstance(r, Yuv420Frame) for r in refs)
        ):
            return self._compiled(test, refs)
        if self.cell % 2:  # yuv420p bands must start on even rows: convert such frames whole
            test = test.to_rgb() if isinstance(test, Yuv420Frame) else test
            refs = [r.to_rgb() if isinstance(r, Yuv420Frame) else r for r in refs]
        w3 = self.width * 3
        s = self._buffers()
        cols_t = np.empty((self.bands, w3), self.acc)
        cols_d = [np.empty((self.bands, w3), self.acc) for _ in refs]
        sse = [0.0] * len(refs)
        for band in range(self.bands):
            y0 = band * self.cell
            y1 = min(self.height, y0 + self.cell)
            t, d = s.test[: y1 - y0], s.diff[: y1 - y0]
            np.copyto(t, self._rows(test, y0, y1, s.test_rgb, s.i420))
            np.add.reduce(t, axis=0, dtype=self.acc, out=cols_t[band])
            for i, ref in enumerate(refs):
                np.copyto(d, self._rows(ref, y0, y1, s.ref_rgb, s.i420))
                np.subtract(t, d, out=d)
                np.add.reduce(d, axis=0, dtype=self.acc, out=cols_d[i][band])
                sse[i] += self._luma_sse(d, s.part, s.luma)
        t_chan, t_cells = self._finish(cols_t)
        out = []
        for cols, e in zip(cols_d, sse, strict=True):
            d_chan, d_cells = self._finish(cols)
            out.append((t_chan - d_chan, t_cells - d_cells, e / 1e6))
        return (t_chan, t_cells), out

    def _compiled(
        self, test: Yuv420Frame, refs: Sequence[Yuv420Frame]
    ) -> tuple[tuple[np.ndarray, np.ndarray], list[tuple[np.ndarray, np.ndarray, float]]]:
        """The same figures from the C kernel (one pass per reference, no RGB in memory)."""
        out = []
        t_cells = np.zeros(0)
        for ref in refs:
            t_cells, d_cells, sse = measure_yuv420_pair(test, ref, self.cell)
            r_cells = t_cells - d_cells
            out.append((r_cells.sum(axis=(0, 1)), r_cells[: self.rows, : self.cols], sse / 1e6))
        return (t_cells.sum(axis=(0, 1)), t_cells[: self.rows, : self.cols]), out


def _check_frame(frame: Any, name: str, index: int) -> np.ndarray | Yuv420Frame:
    if isinstance(frame, Yuv420Frame):
        return frame
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        shape = getattr(frame, "shape", None)
        raise InputError(f"frame {index} is not (H, W, 3) uint8 RGB (got {shape})", path=name)
    return frame


def _size(frame: np.ndarray) -> str:
    return f"{frame.shape[1]}x{frame.shape[0]}"


def _count_rest(it: Iterator[Any]) -> int:
    return sum(1 for _ in it)


def _skip(it: Iterator[Any], count: int) -> int:
    """Drop up to ``count`` items; return how many were dropped."""
    dropped = 0
    for _ in range(count):
        if next(it, None) is None:
            break
        dropped += 1
    return dropped


@dataclass(frozen=True)
class _Inputs:
    """The inputs of one measuring pass once the offset's leading frames are dropped."""

    test_name: str
    names: list[str]
    """Name of each reference in error messages."""
    labels: list[str]
    """``reference`` / ``official`` per reference."""
    test_it: Iterator[Any]
    ref_its: list[Iterator[Any]]
    skipped_test: int
    """Test frames dropped for a negative offset."""
    skipped_ref: list[int]
    """Reference frames dropped for a positive offset, per reference."""
    start: int
    """Test frame index of the first pair."""


def _open_inputs(
    test_frames: Iterable[np.ndarray],
    reference_frames: Sequence[Iterable[np.ndarray]],
    config: MeasureConfig,
    test_name: str,
    reference_names: Sequence[str] | None,
    reference_labels: Sequence[str] | None,
) -> _Inputs:
    """Iterators over every input, with the frames the offset leaves unpaired already dropped."""
    m = len(reference_frames)
    if m < 1:
        raise ValueError("at least one reference is needed")
    names = list(reference_names or [f"reference {i + 1}" for i in range(m)])
    labels = list(reference_labels or ["reference", "official", *[f"reference {i + 1}" for i in range(2, m)]])
    test_it = iter(test_frames)
    ref_its = [iter(r) for r in reference_frames]
    skipped_test = _skip(test_it, -config.offset) if config.offset < 0 else 0
    skipped_ref = [_skip(it, config.offset) if config.offset > 0 else 0 for it in ref_its]
    return _Inputs(
        test_name=test_name,
        names=names,
        labels=labels,
        test_it=test_it,
        ref_its=ref_its,
        skipped_test=skipped_test,
        skipped_ref=skipped_ref,
        start=max(0, -config.offset),
    )


def _check_first_sizes(test: np.ndarray | Yuv420Frame, refs: list[Any], inputs: _Inputs) -> None:
    """Raise if a reference's first frame is not the size of the test's."""
    for i, r in enumerate(refs):
        if r.shape != test.shape:
            raise InputError(
                f"frame sizes differ: test {inputs.test_name} is {_size(test)} but reference "
                f"{inputs.names[i]} is {_size(r)}"
            )


def _check_same_sizes(frames: list[Any], shapes: list[tuple[int, ...]], inputs: _Inputs, index: int) -> None:
    """Raise if a later frame of any input (test first) changes size; ``index`` is its test frame index."""
    for name, frame, first in zip([inputs.test_name, *inputs.names], frames, shapes, strict=True):
        if frame.shape != first:
            raise InputError(
                f"frame size changes from {first[1]}x{first[0]} to {_size(frame)} at test frame {index}",
                path=name,
            )


def measure_frames(
    test_frames: Iterable[np.ndarray],
    reference_frames: Sequence[Iterable[np.ndarray]],
    *,
    config: MeasureConfig | None = None,
    test_name: str = "test",
    reference_names: Sequence[str] | None = None,
    reference_labels: Sequence[str] | None = None,
    workers: int = 1,
) -> tuple[FrameLuma, ...]:
    """Stream test frames against one or more references and measure every pair.

    Frames are paired by decoded presentation index: test frame t with reference frame
    t + offset. Only per-frame sums are kept, so memory does not grow with the clip.

    Parameters
    ----------
    test_frames : iterable of (H, W, 3) uint8 RGB frames (or ``Yuv420Frame``, converted to
        RGB band by band), the decoder output under study.
    reference_frames : one iterable per reference, frames of the same size.
    config : offset, truncation and cell size.
    test_name, reference_names : names used in error messages (file paths for videos).
    reference_labels : ``reference`` / ``official`` per reference (default: reference, official).
    workers : threads measuring frames while the caller's thread keeps pulling new ones. With
        one, that thread gets a fair share of the CPU next to the decoders' threads and
        becomes the critical path; two let the measuring use whatever core the decoders leave.

    Returns
    -------
    One FrameLuma per reference, all with the same n paired frames.

    Raises
    ------
    InputError : frame counts differ (and ``truncate`` is off), frame sizes differ, no
        pairs, or a frame is not (H, W, 3) uint8.
    """
    config = config or MeasureConfig()
    inputs = _open_inputs(test_frames, reference_frames, config, test_name, reference_names, reference_labels)
    start = inputs.start
    kernel: _PairKernel | None = None
    shapes: list[tuple[int, ...]] = []
    results: list[Any] = []
    pending: deque[Future[Any]] = deque()
    n = 0
    truncated = False
    # Frames are measured in a small thread pool, in order, while this thread keeps pulling
    # decoded frames, so the decoders never wait for the arithmetic (numpy and OpenCV release
    # the GIL); at most 2 × workers frames are in flight.
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="luma-measure") as pool:
        while True:
            test = next(inputs.test_it, None)
            refs = [next(it, None) for it in inputs.ref_its]
            if test is None or any(r is None for r in refs):
                if test is None and all(r is None for r in refs):
                    break
                if config.truncate:
                    truncated = True
                    break
                _raise_count_mismatch(test, refs, inputs, n, config.offset)
            test = _check_frame(test, test_name, start + n)
            refs = [_check_frame(r, inputs.names[i], start + n + config.offset) for i, r in enumerate(refs)]
            if kernel is None:
                shapes = [test.shape, *[r.shape for r in refs]]
                _check_first_sizes(test, refs, inputs)
                kernel = _PairKernel(test.shape[0], test.shape[1], config.cell)
            else:
                _check_same_sizes([test, *refs], shapes, inputs, start + n)
            pending.append(pool.submit(kernel, test, refs))
            while len(pending) > 2 * max(1, workers):
                results.append(pending.popleft().result())
            n += 1
        results.extend(f.result() for f in pending)
    if n == 0:
        raise InputError(
            f"no frame pairs: test {test_name} and reference {inputs.names[0]} share no frames "
            f"at offset {config.offset}"
        )
    assert kernel is not None
    return _frame_lumas(results, kernel, inputs, config, n, truncated)


def _frame_lumas(
    results: list[Any], kernel: _PairKernel, inputs: _Inputs, config: MeasureConfig, n: int, truncated: bool
) -> tuple[FrameLuma, ...]:
    """One FrameLuma per reference from the kernel's per-frame sums of the ``n`` pairs."""
    pixels = float(kernel.height * kernel.width)
    cell_area = float(config.cell * config.cell)
    t_chan = np.stack([r[0][0] for r in results])
    t_cells = np.stack([r[0][1] for r in results])
    frame_index = np.arange(inputs.start, inputs.start + n, dtype=np.int64)
    out = []
    for i in range(len(inputs.ref_its)):
        r_chan = np.stack([r[1][i][0] for r in results])
        r_cells = np.stack([r[1][i][1] for r in results])
        out.append(
            FrameLuma(
                test_name=inputs.test_name,
                reference_name=inputs.names[i],
                reference_label=inputs.labels[i],
                height=kernel.height,
                width=kernel.width,
                cell=config.cell,
                offset=config.offset,
                truncated=truncated,
                frame_index=frame_index,
                reference_index=frame_index + config.offset,
                test_mean_rgb=t_chan / pixels,
                reference_mean_rgb=r_chan / pixels,
                y_mse=np.asarray([r[1][i][2] for r in results], dtype=np.float64) / pixels,
                test_cells=(t_cells / cell_area).astype(np.float32),
                diff_cells=((t_cells - r_cells) / cell_area).astype(np.float32),
            )
        )
    return tuple(out)


def _raise_count_mismatch(test: Any, refs: list[Any], inputs: _Inputs, paired: int, offset: int) -> None:
    """Count what is left of every input and raise an error naming both files.

    ``test`` and ``refs`` are the items pulled after ``paired`` pairs (``None`` for an input
    that ended); ``offset`` is the configured pairing offset.
    """
    skipped_test, skipped_ref, names = inputs.skipped_test, inputs.skipped_ref, inputs.names
    test_total = skipped_test + paired + (0 if test is None else 1 + _count_rest(inputs.test_it))
    ref_totals = [
        skipped_ref[i] + paired + (0 if r is None else 1 + _count_rest(inputs.ref_its[i]))
        for i, r in enumerate(refs)
    ]
    if test_total == 0:
        raise InputError("the test video yields no frames", path=inputs.test_name)
    for i, total in enumerate(ref_totals):
        if total == 0:
            raise InputError("the reference video yields no frames", path=names[i])
    avail_test = test_total - skipped_test
    i = next(i for i, total in enumerate(ref_totals) if total - skipped_ref[i] != avail_test)
    pairs = min(avail_test, *[t - s for t, s in zip(ref_totals, skipped_ref, strict=True)])
    shift = "" if offset == 0 else f" at offset {offset} (test t ↔ reference t{offset:+d})"
    raise InputError(
        f"frame counts differ: test {inputs.test_name} has {test_total} frames but reference {names[i]} has "
        f"{ref_totals[i]}{shift}; pass truncate (--truncate) to compare the first {max(pairs, 0)} pairs"
    )


def analyze_frames(
    test_frames: Iterable[np.ndarray],
    reference_frames: Iterable[np.ndarray] | Sequence[Iterable[np.ndarray]],
    *,
    geometry: LumaGeometry,
    keyframes: Sequence[int] | None = None,
    config: MeasureConfig | None = None,
    test_name: str = "test",
    reference_names: Sequence[str] | None = None,
) -> LumaAnalysis:
    """Measure and summarise in-memory or streamed frames.

    Parameters
    ----------
    test_frames : iterable of (H, W, 3) uint8 RGB frames.
    reference_frames : an iterable of frames, or a list of such iterables (reference, official).
    geometry : LatentWindowGeometry or GopGeometry.
    keyframes : test keyframes for the GOP model with ``every`` = 0.

    Returns
    -------
    LumaAnalysis with one report per reference.
    """
    refs = _as_reference_list(reference_frames)
    measured = measure_frames(
        test_frames, refs, config=config, test_name=test_name, reference_names=reference_names
    )
    keys = tuple(int(k) for k in keyframes) if keyframes is not None else ()
    return _analysis(measured, geometry, keys, test_name)


def _as_reference_list(
    reference_frames: Iterable[np.ndarray] | Sequence[Iterable[np.ndarray]],
) -> list[Iterable[np.ndarray]]:
    if isinstance(reference_frames, (list, tuple)) and reference_frames:
        first = reference_frames[0]
        if not isinstance(first, np.ndarray):
            return list(reference_frames)
    return [reference_frames]  # type: ignore[list-item]


def _analysis(
    measured: Sequence[FrameLuma], geometry: LumaGeometry, keyframes: tuple[int, ...], test_name: str
) -> LumaAnalysis:
    layout = geometry.assign(measured[0].frame_index, keyframes=keyframes if keyframes else None)
    uses_keys = isinstance(geometry, GopGeometry) and geometry.every == 0
    return LumaAnalysis(
        test_name=test_name,
        geometry=geometry.to_dict(),
        keyframes=keyframes if uses_keys else (),
        reports=tuple(summarize(m, layout) for m in measured),
    )


# --------------------------------------------------------------------------- videos


class Prefetch(Iterator[np.ndarray]):
    """Run an iterator (a decoder) in a background thread, ``depth`` items ahead.

    PyAV and OpenCV release the GIL, so the decoders of test and reference overlap with
    each other and with the per-frame arithmetic. Exceptions re-raise in the consumer;
    :meth:`close` stops the thread and closes the source iterator, whether or not anything
    was consumed.
    """

    _DONE = object()

    def __init__(self, frames: Iterable[np.ndarray], *, depth: int = 4) -> None:
        self._items: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._finished = False
        self._worker = threading.Thread(target=self._work, args=(frames,), name="luma-prefetch", daemon=True)
        self._worker.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._items.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, frames: Iterable[np.ndarray]) -> None:
        source = iter(frames)
        try:
            for item in source:
                if not self._put(item):
                    return
            self._put(self._DONE)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(_Failure(exc))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    def __next__(self) -> np.ndarray:
        if self._finished:
            raise StopIteration
        item = self._items.get()
        if item is self._DONE:
            self._finished = True
            raise StopIteration
        if isinstance(item, _Failure):
            self._finished = True
            raise item.exc
        return item

    def close(self) -> None:
        """Stop the worker and wait for it (it closes the source)."""
        self._finished = True
        self._stop.set()
        while True:  # unblock a producer waiting on a full queue
            try:
                self._items.get_nowait()
            except queue.Empty:
                break
        self._worker.join(timeout=10)

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class _Failure:
    exc: BaseException


def video_keyframes(path: str | Path) -> tuple[int, ...]:
    """Presentation-order keyframe indices of a video (packet keyframe flags sorted by pts)."""
    return probe(path, config=ProbeConfig()).keyframe_indices


def _decoded(path: str | Path, reader: Callable[[str | Path], Iterable[np.ndarray]]) -> Iterator[np.ndarray]:
    """Frames of ``reader(path)``, with decoder failures turned into DecodeError naming the file."""
    index = 0
    try:
        for frame in reader(path):
            yield frame
            index += 1
    except CodecLensError:
        raise
    except FFmpegError as exc:
        raise DecodeError(f"decoding failed ({exc.strerror or exc})", path=path, frame_index=index) from exc
    except (RuntimeError, OSError) as exc:  # e.g. cvp's reader refusing a stream
        raise DecodeError(f"decoding failed ({exc})", path=path, frame_index=index) from exc


@dataclass(frozen=True, kw_only=True)
class StreamConfig:
    """How :func:`analyze_videos` decodes and streams its inputs: frame sources, threads, read-ahead."""

    test_reader: Callable[[str | Path], Iterable[np.ndarray]] | None = None
    """Frame source of the test video (default ``iter_luma_frames``: the frames of
    ``native.iter_rgb``, yuv420p ones converted band by band in the kernel); the decoder
    pairs use cvp's fast reader here."""
    reference_reader: Callable[[str | Path], Iterable[np.ndarray]] | None = None
    """Frame source of the references (default ``iter_luma_frames``)."""
    workers: int = MEASURE_WORKERS
    """Threads converting and measuring frame pairs (``measure_frames``)."""
    prefetch: int = PREFETCH_FRAMES
    """Frames each decoder thread may run ahead of the measuring."""


def analyze_videos(
    test: str | Path,
    reference: str | Path,
    *,
    official: str | Path | None = None,
    geometry: LumaGeometry,
    config: MeasureConfig | None = None,
    keyframes: Sequence[int] | None = None,
    streams: StreamConfig | None = None,
) -> LumaAnalysis:
    """Analyse a test video against a reference (and optionally an official decode).

    Every input is decoded (a normal FFmpeg decode) in its own thread and streamed; RGB
    conversion happens band by band in the measuring threads; per-frame sums are all that is
    kept.

    Parameters
    ----------
    test, reference, official : video files.
    geometry : LatentWindowGeometry or GopGeometry (GOP keyframes come from the test video).
    config : offset, truncation and cell size.
    keyframes : override the test video's keyframes for the GOP model.
    streams : frame sources, measuring threads and read-ahead (default :class:`StreamConfig`).

    Returns
    -------
    LumaAnalysis with a report against ``reference`` and, if given, ``official``.

    Raises
    ------
    InputError : missing or unreadable files, different frame counts or sizes.
    DecodeError : a decoder failed part-way.
    """
    paths = [test, reference] + ([official] if official is not None else [])
    for p in paths:
        check_input_file(p)
    infos = [probe(p, config=ProbeConfig()) for p in paths]  # raises ProbeError naming the file
    keys: tuple[int, ...] = ()
    if isinstance(geometry, GopGeometry) and geometry.every == 0:
        keys = tuple(int(k) for k in keyframes) if keyframes is not None else infos[0].keyframe_indices
    streams = streams or StreamConfig()
    test_src = _decoded(test, streams.test_reader or iter_luma_frames)
    ref_srcs = [_decoded(p, streams.reference_reader or iter_luma_frames) for p in paths[1:]]
    prefetched = [Prefetch(s, depth=streams.prefetch) for s in (test_src, *ref_srcs)]
    try:
        measured = measure_frames(
            prefetched[0],
            prefetched[1:],
            config=config,
            test_name=str(test),
            reference_names=[str(p) for p in paths[1:]],
            workers=streams.workers,
        )
    finally:
        for s in prefetched:
            s.close()
    return _analysis(measured, geometry, keys, str(test))


__all__ = [
    "MeasureConfig",
    "Prefetch",
    "StreamConfig",
    "analyze_frames",
    "analyze_videos",
    "measure_frames",
    "video_keyframes",
]
