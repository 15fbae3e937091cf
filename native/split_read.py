"""Split reads: several frame ranges of cvp's reader at once, the first here, the rest in forked children."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from native.bitcost_frame import BitcostFrame
from native.bitcost_reader import ReaderExport, read_bitcost, read_segment

FrameHook = Callable[[BitcostFrame, "np.ndarray | None", "np.ndarray | None"], Any]
"""``hook(item, bgr, slot) -> result``: runs where a frame lands (a worker or this process).

``item`` is the reader's record (``pixels_bgr`` None, ``grids`` already cut to the kept
names), ``bgr`` its pixels as read (or None without pixels) and ``slot`` the frame's row
of the shared output (None without pixels), which the hook must fill. The (small,
picklable) result comes back as ``item.frame_result``."""


@dataclass(frozen=True)
class _ReadSpec:
    """What every part of one split read shares."""

    path: str
    export: ReaderExport
    """What every part exports (grids, pixels and their size)."""
    keep_keys: tuple[str, ...] | None
    """Grid names kept in each record (None keeps all); the rest never cross the pipe."""
    hook: FrameHook | None = None
    seek: bool = True
    """False decodes from the file's start (containers where the reader's seek is not trusted)."""


def _read_into(
    spec: _ReadSpec, part: list[int], pixels: np.ndarray | None, offset: int
) -> tuple[list[BitcostFrame], list[str]]:
    """Read one part; fill its rows of ``pixels[offset:]`` and keep only wanted maps.

    Without ``spec.seek`` the part decodes from the file's start, exporting only its frames;
    unpruned, like a segment read. Returns the reader's records (without pixels) and the
    decoder's log lines.
    """
    log: list[str] = []
    if spec.seek:
        items = read_segment(spec.path, part, export=spec.export, decoder_log=log)
    else:
        items = read_bitcost(spec.path, part, export=spec.export, target_only=False, decoder_log=log)
    out = []
    for row, item in enumerate(items):
        if item.grids is not None and spec.keep_keys is not None:
            # None of the wanted grids leaves ``grids`` empty; ``grid_names`` still lists
            # those present so the caller's error can name them.
            item = item.replace(grids={k: v for k, v in item.grids.items() if k in spec.keep_keys})
        bgr = item.pixels_bgr
        item = item.replace(pixels_bgr=None)  # the pixels travel in the shared rows, not the pipe
        slot = pixels[offset + row] if pixels is not None and row < len(part) else None
        if spec.hook is not None:
            item = item.replace(frame_result=spec.hook(item, bgr, slot))
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
    seek cannot be trusted. ``export`` says what every part exports; pixels need a positive
    output size (the shared rows are made before any decoder runs).
    """

    def __init__(
        self,
        path: str | Path,
        parts: Sequence[Sequence[int]],
        *,
        export: ReaderExport,
        keep_keys: tuple[str, ...] | None = None,
        read_first_here: bool = True,
        hook: FrameHook | None = None,
        frame_shape: tuple[int, ...] | None = None,
        seek: bool = True,
    ) -> None:
        import mmap
        import multiprocessing

        self._parts = [sorted(int(i) for i in p) for p in parts]
        total = sum(len(p) for p in self._parts)
        self._offsets = np.concatenate([[0], np.cumsum([len(p) for p in self._parts])]).astype(int).tolist()
        out_width, out_height = int(export.out_width), int(export.out_height)
        self._spec = _ReadSpec(
            str(path), replace(export, out_width=out_width, out_height=out_height), keep_keys, hook, seek
        )
        self._first_here = read_first_here
        self.decoder_log: list[str] = []
        """The decoder's log lines of every part (filled by :meth:`wait`)."""
        self.pixels: np.ndarray | None = None
        if export.pixels and (out_width <= 0 or out_height <= 0):
            # The reader's 0 means "decoder size", which the shared rows cannot know.
            raise ValueError(
                f"Invalid output size ({export.out_width}x{export.out_height}). "
                "Supported values are positive sizes."
            )
        if export.pixels:
            shape = tuple(frame_shape) if frame_shape is not None else (out_height, out_width, 3)
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
            args = (self._spec, part, self.pixels, self._offsets[k])
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

    def wait(self) -> list[BitcostFrame]:
        """Every part's reader records (without pixels), in part order.

        Raises
        ------
        RuntimeError : a child failed or a part came back with other frames than asked.
        """
        results: dict[int, list[BitcostFrame]] = {}
        errors = []
        try:
            if self._first_here:
                results[0], log = _read_into(self._spec, self._parts[0], self.pixels, 0)
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
        out: list[BitcostFrame] = []
        for k, part in enumerate(self._parts):
            if [it.frame_index for it in results[k]] != part:
                raise RuntimeError("segment read returned other frames than requested")
            out += results[k]
        return out


def can_fork() -> bool:
    """Split reads need fork (children inherit the shared pixel mapping)."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()
