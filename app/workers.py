"""The app's worker processes: handlers' native decodes and encodes run here; a crash ends one worker.

The mechanism (spawned workers, crash records, clean-up) is :mod:`backend.isolation`'s; this
module adds the app's pool: a bounded queue, per-page limits and a replaced worker per death.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import connection, get_context
from typing import Any

from backend.errors import CodecLensError
from backend.isolation import Cleanup, Worker, describe_death, signal_name, stage_from_dump

__all__ = [
    "Job",
    "LocalProgress",
    "PoolBusy",
    "WorkerCrashed",
    "WorkerError",
    "WorkerPool",
    "job_store",
    "run_job",
    "session_of",
]

DEFAULT_WORKERS = 2
DEFAULT_MAX_PENDING = 8
"""Jobs running or queued across every session; one more is refused."""
DEFAULT_PER_SESSION = 2
"""Jobs running or queued per browser session; one more is refused."""
DEFAULT_PRELOAD = ("app.jobs", "backend.runs")
"""Imported by each worker when it starts, so that a job does not wait for them."""
_START_TIMEOUT_SECS = 120.0  # a spawned worker imports numpy, PyAV and the pipeline first
_STOP_TIMEOUT_SECS = 5.0


class WorkerError(CodecLensError, RuntimeError):
    """A job that did not run to its end in a worker (the worker died, or the pool refused it)."""


class WorkerCrashed(WorkerError):
    """The worker running a job died (``exit_code`` -N: by signal N); ``stage`` when known."""

    def __init__(self, subject: str, *, exit_code: int, stage: str | None) -> None:
        self.exit_code = exit_code
        self.signal_name = signal_name(exit_code)
        what = describe_death(exit_code, stage)
        super().__init__(f"{what}; the app keeps running", path=subject or None, stage=stage)


class PoolBusy(WorkerError):
    """The pool refused a job: the session or the whole app has too much pending work."""


class LocalProgress:
    """The ``progress`` of a job run in the calling process (no pool): progress goes straight on."""

    def __init__(self, on_progress: Callable[[str, float], None] | None) -> None:
        self._on_progress = on_progress

    def __call__(self, stage: str, fraction: float) -> None:
        if self._on_progress is not None:
            self._on_progress(stage, fraction)

    def enter(self, stage: str) -> None:
        pass


# -- the app side ------------------------------------------------------------------------------


@dataclass(eq=False)
class Job:
    """One call submitted to the pool; :meth:`wait` follows it in the caller's thread."""

    payload: bytes
    session: str
    subject: str
    cleanup: Cleanup | None
    started_epoch_secs: float = 0.0
    stage: str | None = None
    dump: bytearray = field(default_factory=bytearray, repr=False)
    _events: queue.Queue[tuple[Any, ...]] = field(default_factory=queue.Queue, repr=False)

    def wait(self, on_progress: Callable[[str, float], None] | None = None) -> Any:
        """The job's return value; its progress goes to ``on_progress(stage, fraction)`` here.

        Raises what the job raised, or WorkerCrashed when its worker died.
        """
        while True:
            kind, *rest = self._events.get()
            if kind == "progress":
                if on_progress is not None:
                    on_progress(*rest)
            elif kind == "done":
                return rest[0]
            else:
                raise rest[0]


class _Slot:
    """One worker process and the thread that feeds it jobs and watches it."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.worker: Worker | None = None
        self.thread = threading.Thread(target=self.loop, name=f"codec-lens-worker-{index}", daemon=True)

    @property
    def process(self) -> Any:
        """The current worker's process (None while it is being replaced)."""
        return self.worker.process if self.worker is not None else None

    def start_process(self) -> bool:
        try:
            worker = Worker(
                self.pool.context,
                name=f"codec-lens-worker-{self.index}",
                daemon=False,  # a worker forks the decode stage's reader processes
                preload=self.pool.preload,
                with_dump=True,
            )
        except (OSError, RuntimeError) as exc:  # no memory or process slots; an unguarded __main__
            print(f"codec-lens: worker {self.index} could not start ({exc})", file=sys.stderr)
            return False
        self.worker = worker
        if worker.wait_ready(_START_TIMEOUT_SECS):
            return True
        self.end_process()
        return False

    def end_process(self) -> None:
        if self.worker is not None:
            self.worker.close(_STOP_TIMEOUT_SECS)
            self.worker = None

    def loop(self) -> None:
        failures = 0
        while not self.pool.closed:
            if self.worker is None and not self.start_process():
                failures += 1
                print(
                    f"codec-lens: worker {self.index} could not start (attempt {failures})", file=sys.stderr
                )
                time.sleep(min(30.0, 2.0**failures))
                continue
            failures = 0
            job = self.pool.queue.get()
            if job is None:
                break
            if not self.process.is_alive():  # died while idle (e.g. the OOM killer): not the job's fault
                self.end_process()
                if not self.start_process():
                    self.pool.finished(job)
                    job._events.put(("error", WorkerError("no worker process could start for the job")))
                    continue
            self.run(job)
        if self.worker is not None:
            with contextlib.suppress(OSError):
                self.worker.send(b"")  # the stop request
            self.end_process()

    def run(self, job: Job) -> None:
        job.started_epoch_secs = time.time()
        final: tuple[Any, ...] | None = None
        worker = self.worker
        assert worker is not None  # loop() started one
        try:
            try:
                worker.send(job.payload)
                watched = [worker.conn, worker.process.sentinel, worker.dump]
                while final is None:
                    ready = connection.wait(watched)
                    if worker.dump in ready and not self.read_dump(job):
                        watched.remove(worker.dump)  # closed: the worker (and its readers) ended
                    if worker.conn in ready or worker.conn.poll():
                        final = self.message(job)
                    elif worker.process.sentinel in ready:
                        break
            except (EOFError, OSError):
                pass
            if final is None:
                final = ("error", self.crashed(job))
        finally:  # whatever happened here, the waiting handler gets an answer
            self.pool.finished(job)
            job._events.put(final or ("error", WorkerError("the worker pool failed while running the job")))

    def read_dump(self, job: Job) -> bool:
        """Add what faulthandler wrote to ``job``'s dump; False once the pipe is closed."""
        assert self.worker is not None
        chunk = self.worker.read_dump()
        if chunk:
            job.dump += chunk
        return chunk is not None

    def message(self, job: Job) -> tuple[Any, ...] | None:
        """The job's final event, or None after a progress message (EOFError: the worker died)."""
        assert self.worker is not None
        try:
            msg = self.worker.conn.recv()
        except (pickle.UnpicklingError, AttributeError, ImportError, TypeError) as exc:
            return ("error", RuntimeError(f"the worker's reply could not be read ({exc})"))
        kind = msg[0]
        if kind == "progress":
            job.stage = msg[1]
            job._events.put(msg)
            return None
        if kind == "stage":
            job.stage = msg[1]
            return None
        if kind == "error":
            exc, remote = msg[1], msg[2]
            if not isinstance(exc, CodecLensError):  # a bug: keep where it happened
                exc.add_note(f"in worker {self.index}:\n{remote}")
            return ("error", exc)
        return ("done", msg[1])

    def crashed(self, job: Job) -> WorkerError:
        """The worker died during ``job``: reap it, undo what the job left, report it in one line."""
        assert self.worker is not None
        code = self.worker.reap(_STOP_TIMEOUT_SECS)
        with contextlib.suppress(OSError):
            self.read_dump(job)
        dump = job.dump.decode(errors="replace")
        self.end_process()
        crash: WorkerError = (
            PoolBusy("the app is stopping; the job was not finished")
            if self.pool.closed
            else WorkerCrashed(job.subject, exit_code=code, stage=stage_from_dump(dump) or job.stage)
        )
        print(f"codec-lens: worker {self.index}: {crash.one_line()}", file=sys.stderr)
        if job.cleanup is not None:
            try:
                job.cleanup.apply(job.started_epoch_secs, crash.one_line())
            except (OSError, ValueError, RuntimeError) as exc:  # StoreError is a ValueError
                print(f"codec-lens: cleaning up after a worker's death failed: {exc}", file=sys.stderr)
        return crash


class WorkerPool:
    """A few worker processes (``spawn``ed: never a fork of the threaded server) and a bounded queue.

    ``submit`` refuses a job beyond ``per_session`` pending ones of its session or
    ``max_pending`` in all (PoolBusy). A worker that dies fails only its own job (WorkerCrashed,
    after the job's Cleanup) and is replaced; the other workers and the queue never notice.
    """

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        per_session: int = DEFAULT_PER_SESSION,
        preload: tuple[str, ...] = DEFAULT_PRELOAD,
    ) -> None:
        self.context = get_context("spawn")
        self.max_pending = max_pending
        self.per_session = per_session
        self.preload = preload
        self.closed = False
        self.queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._pending: Counter[str] = Counter()
        self._slots = [_Slot(self, i) for i in range(max(1, workers))]
        for slot in self._slots:
            slot.thread.start()

    def submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        session: str = "",
        subject: str = "",
        cleanup: Cleanup | None = None,
        **kwargs: Any,
    ) -> Job:
        """Queue ``fn(*args, progress=…, **kwargs)`` (a module-level function, picklable arguments).

        Raises
        ------
        PoolBusy : the session already has ``per_session`` jobs pending, or the pool ``max_pending``.
        """
        job = Job(pickle.dumps((fn, args, kwargs)), session, subject, cleanup)
        with self._lock:
            if self.closed:
                raise PoolBusy("the app is stopping; try again after it restarts")
            if self._pending[session] >= self.per_session:
                raise PoolBusy(
                    f"this page already has {self._pending[session]} jobs running or waiting; "
                    "wait for one to finish"
                )
            if self._pending.total() >= self.max_pending:
                raise PoolBusy(
                    f"the app is busy ({self.max_pending} jobs running or waiting); try again shortly"
                )
            self._pending[session] += 1
        self.queue.put(job)
        return job

    def run(
        self,
        fn: Callable[..., Any],
        *args: Any,
        on_progress: Callable[[str, float], None] | None = None,
        **kwargs: Any,
    ) -> Any:
        """:meth:`submit` and wait: the job's return value (its progress to ``on_progress``)."""
        return self.submit(fn, *args, **kwargs).wait(on_progress)

    def pending(self, session: str | None = None) -> int:
        """Jobs running or queued: of ``session``, or of every session."""
        with self._lock:
            return self._pending.total() if session is None else self._pending[session]

    def worker_pids(self) -> list[int | None]:
        """The pid of each slot's current worker (None while it is being replaced)."""
        return [slot.process.pid if slot.process is not None else None for slot in self._slots]

    def finished(self, job: Job) -> None:
        with self._lock:
            self._pending[job.session] -= 1
            if self._pending[job.session] <= 0:
                del self._pending[job.session]

    def stop(self) -> None:
        """Refuse new jobs, fail the queued ones, end the workers (a running job's is terminated)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        while True:
            try:
                job = self.queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                self.finished(job)
                job._events.put(("error", PoolBusy("the app is stopping; the job was not started")))
        for _ in self._slots:
            self.queue.put(None)
        for slot in self._slots:
            slot.thread.join(_STOP_TIMEOUT_SECS)
            if slot.thread.is_alive() and slot.process is not None:
                slot.process.terminate()  # busy with a job: its crash report becomes "stopping"
                slot.thread.join(_STOP_TIMEOUT_SECS)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_job(
    pool: WorkerPool | None,
    fn: Callable[..., Any],
    *args: Any,
    session: str = "",
    subject: str = "",
    cleanup: Cleanup | None = None,
    on_progress: Callable[[str, float], None] | None = None,
    **kwargs: Any,
) -> Any:
    """``fn`` in a worker of ``pool``, or here when there is no pool (handlers called by tests or
    scripts without the app)."""
    if pool is None:
        return fn(*args, progress=LocalProgress(on_progress), **kwargs)
    return pool.submit(fn, *args, session=session, subject=subject, cleanup=cleanup, **kwargs).wait(
        on_progress
    )


def job_store(ws: Any) -> Any:
    """The ``store`` argument of a job for workspace ``ws``: the session file's path when a worker
    runs it, the open store when it runs here."""
    return ws.store.path if ws.pool is not None else ws.store


def session_of(request: Any) -> str:
    """The browser session a handler serves (Gradio's session hash; '' without a request)."""
    return str(getattr(request, "session_hash", None) or "")
