"""The local engine: batch units in a pool of worker processes on this machine; a crash costs one video."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing import connection, get_context
from typing import Any

from backend.batch.unit import UNIT_RECORD, UnitTask, failed_row, read_record, remove_partials
from backend.errors import PipelineError
from backend.isolation import Worker, describe_death

RowCallback = Callable[[dict[str, Any]], None]
_STOP_TIMEOUT_SECS = 5.0
_PRELOAD = ("backend.pipeline.runner", "backend.cvp_format", "backend.runs", "backend.store")
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def crash_message(task: UnitTask, exit_code: int | None, stage: str | None) -> str:
    """One line for a video whose worker died: which signal, and in which stage."""
    return f"{task.path}: {describe_death(exit_code, stage)}"


def _openblas_setters() -> list[Callable[[int], None]]:
    """The thread-count setters of the OpenBLAS libraries loaded in this process (numpy's)."""
    import ctypes

    setters = []
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1].lower()}
    except OSError:  # not Linux
        return setters
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(lib, name, None)
            if setter is not None:
                setters.append(setter)
                break
    return setters


def limit_threads() -> None:
    """Worker initializer of both engines: the math libraries' thread pools to one thread.

    A worker runs one video on one core (each selector decodes on one FFmpeg thread, as its
    ``workers`` = 1 says), so pools sized to the machine would oversubscribe the cores the
    other workers use: OpenCV's (one thread per core, made at its first parallel call) and
    numpy's OpenBLAS (made at import, parked from now on). Neither changes a result.
    """
    import cv2

    cv2.setNumThreads(1)
    for setter in _openblas_setters():
        setter(1)


def _die_with(parent_pid: int) -> None:
    """Linux: be killed when the batch process dies, however it dies (SIGKILL, the OOM killer),
    rather than finish a video nobody collects and race the next run over its folder."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # it died before the request took effect
        os._exit(1)


def _setup(parent_pid: int) -> None:
    """A worker's set-up before its preload: die with the batch process, math libraries on one thread."""
    _die_with(parent_pid)
    limit_threads()


def _unit_job(task: UnitTask, *, progress: Any) -> dict[str, Any]:
    """A worker's call: one video's row (its stages named through ``progress.enter``)."""
    from backend.batch.unit import run_unit

    try:
        return run_unit(task, on_stage=progress.enter)
    except BaseException as exc:  # a bug: this video's row says so, the batch goes on
        import traceback

        traceback.print_exc()
        return failed_row(task, f"{task.path}: internal error ({type(exc).__name__}: {exc})")


class _Worker:
    """A spawned worker (:class:`backend.isolation.Worker`) and the video it runs."""

    def __init__(self, context: Any) -> None:
        self.worker = Worker(
            context, daemon=True, preload=_PRELOAD, setup=functools.partial(_setup, os.getpid())
        )
        self.conn, self.process = self.worker.conn, self.worker.process
        self.task: UnitTask | None = None
        self.assigned_at = 0.0
        self.stage: str | None = None
        self.ready = False

    def assign(self, task: UnitTask) -> None:
        self.task, self.stage = task, None
        self.assigned_at = time.time()
        self.worker.call(_unit_job, task)

    def stop(self, *, now: bool) -> None:
        self.worker.stop(_STOP_TIMEOUT_SECS, now=now)


def run_local(
    tasks: Sequence[UnitTask],
    *,
    workers: int,
    on_row: RowCallback,
) -> None:
    """Run every task in ``workers`` processes (spawned: fresh interpreters), ``on_row`` per video.

    A worker that dies (a decoder's SIGSEGV, the OOM killer, a kill) fails its one video with a
    line naming the signal and stage; its partial output is removed and a new worker takes its
    place. Ctrl-C (KeyboardInterrupt here) ends the workers, removes the partial outputs of
    the videos in flight and propagates: the rows already reported are all that was done.
    """
    if workers < 1:
        raise ValueError(f"Invalid workers ({workers}). Supported values are ≥ 1.")
    context = get_context("spawn")
    todo = list(reversed(tasks))
    pool: list[_Worker] = []
    try:
        for _ in range(min(workers, len(todo))):
            pool.append(_Worker(context))
        while todo or any(w.task is not None for w in pool):
            for worker in pool:
                if worker.ready and worker.task is None and todo:
                    worker.assign(todo.pop())
            waits = {w.conn: w for w in pool} | {w.process.sentinel: w for w in pool}
            for ready in connection.wait(list(waits)):
                worker = waits[ready]
                if worker not in pool:
                    continue  # replaced in this round already
                if ready is worker.conn or worker.conn.poll():
                    if _receive(worker, on_row):
                        continue
                if not worker.process.is_alive():
                    pool[pool.index(worker)] = _replace(worker, context, on_row)
    except BaseException:
        for worker in pool:
            worker.stop(now=True)
        for worker in pool:
            if worker.task is None:
                continue
            # A worker can finish its video, record and all, a moment before its row arrives
            # (measured: ~2.5 ms later on an idle machine): that video is done, not in flight.
            row = _finished_row(worker.task, since=worker.assigned_at)
            if row is not None:
                on_row(row)
            else:
                remove_partials(worker.task)
        pool = []
        raise
    finally:
        for worker in pool:
            worker.stop(now=False)


def _finished_row(task: UnitTask, *, since: float) -> dict[str, Any] | None:
    """The row of ``task``'s output when a worker of this batch completed it (its unit record
    written at or after ``since``, a ``time.time()``), else None."""
    record = read_record(task.out_dir)
    try:
        written = os.stat(os.path.join(task.out_dir, UNIT_RECORD)).st_mtime
    except OSError:
        return None
    return dict(record["row"]) if record is not None and written >= since else None


def _receive(worker: _Worker, on_row: RowCallback) -> bool:
    """Read one message of ``worker``; False when its pipe is closed (it died)."""
    try:
        kind, value, *_rest = worker.conn.recv()  # ("progress", stage, fraction) has three
    except (EOFError, OSError):
        return False
    if kind == "ready":
        worker.ready = True
    elif kind == "stage":
        worker.stage = value
    elif kind == "done":
        worker.task = None
        on_row(value)
    elif kind == "error" and worker.task is not None:  # the request itself failed (no row was made)
        task, worker.task = worker.task, None
        on_row(failed_row(task, f"{task.path}: internal error ({type(value).__name__}: {value})"))
    return True


def _replace(worker: _Worker, context: Any, on_row: RowCallback) -> _Worker:
    """A dead worker's video becomes a failed row; a new worker takes its place."""
    worker.process.join(_STOP_TIMEOUT_SECS)
    task, stage, code = worker.task, worker.stage, worker.process.exitcode
    worker.stop(now=True)
    if task is not None:
        remove_partials(task)
        on_row(failed_row(task, crash_message(task, code, stage)))
    elif not worker.ready:
        raise PipelineError(f"a batch worker could not start (exit code {code})", stage="batch")
    return _Worker(context)
