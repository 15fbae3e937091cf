"""The app's worker processes: handlers' native decodes and encodes run here; a crash ends one worker."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import queue
import shutil
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing import connection, get_context
from pathlib import Path
from typing import Any

from backend.errors import CodecLensError

DEFAULT_WORKERS = 2
DEFAULT_MAX_PENDING = 8
"""Jobs running or queued across every session; one more is refused."""
DEFAULT_PER_SESSION = 2
"""Jobs running or queued per browser session; one more is refused."""
DEFAULT_PRELOAD = ("app.jobs", "backend.runs")
"""Imported by each worker when it starts, so that a job does not wait for them."""
ABORT_STAGE_ENV = "CODEC_LENS_TEST_ABORT_STAGE"
"""Test only: a worker (or the CLI's child) aborts on purpose when a job reaches this stage.
``app.main`` and ``app.cli`` read it at start-up; nothing else does. In the app's workers,
``STAGE@PATH`` holds the job at the stage until ``PATH`` exists, then aborts."""
_START_TIMEOUT_SECS = 120.0  # a spawned worker imports numpy, PyAV and the pipeline first
_STOP_TIMEOUT_SECS = 5.0

# Where a crash happened, from the Python frames of faulthandler's dump: the innermost frame
# in a stage module names the stage; these other modules do the heavy native work.
_WORK_MODULES = {
    ("cvp_format", "write"): "output",
    ("cvp_format", "read"): "import",
    ("compare", "encode"): "encode",
    ("luma", "measure"): "measure",
    ("luma", "fit"): "correct",
    ("export", "clip"): "clip",
}
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE}


class WorkerError(CodecLensError, RuntimeError):
    """A job that did not run to its end in a worker (the worker died, or the pool refused it)."""


class WorkerCrashed(WorkerError):
    """The worker running a job died (``exit_code`` -N: by signal N); ``stage`` when known."""

    def __init__(self, subject: str, *, exit_code: int, stage: str | None) -> None:
        self.exit_code = exit_code
        self.signal_name = signal_name(exit_code)
        during = f" during {stage}" if stage else ""
        if self.signal_name is None:
            what = f"the worker ended unexpectedly (exit code {exit_code}){during}"
        elif -exit_code in _CRASH_SIGNALS:
            what = f"the decoder crashed ({self.signal_name}){during}"
        else:
            what = f"the worker was killed ({self.signal_name}){during}"
        super().__init__(f"{what}; the app keeps running", path=subject or None, stage=stage)


class PoolBusy(WorkerError):
    """The pool refused a job: the session or the whole app has too much pending work."""


def signal_name(exit_code: int) -> str | None:
    """``SIGSEGV`` for a process that died by signal 11 (exit code -11), None for a normal exit."""
    if exit_code >= 0:
        return None
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"


def stage_from_dump(text: str) -> str | None:
    """The stage a faulthandler dump crashed in: the innermost frame of the crashing thread that
    lies in ``backend/stages/`` (its module name) or in another module of native work."""
    lines = text.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if line.startswith(("Current thread", "Stack (most recent"))), None
    )
    if start is None:
        return None
    for line in lines[start + 1 :]:
        if not line.startswith('  File "'):
            break  # the end of the crashing thread's frames
        parts = Path(line[len('  File "') :].split('"', 1)[0]).parts
        if "backend" not in parts:
            continue
        last = len(parts) - 1 - parts[::-1].index("backend")
        rel = parts[last + 1 :]
        if len(rel) != 2:
            continue
        package, stem = rel[0], Path(rel[1]).stem
        if package == "stages":
            return stem
        if (package, stem) in _WORK_MODULES:
            return _WORK_MODULES[(package, stem)]
    return None


def remove_written(paths: Iterable[Path], since_epoch_secs: float) -> None:
    """Remove each file or folder of ``paths`` that was written at or after ``since_epoch_secs``
    (a crashed job's output; an older one was there before the job and is kept)."""
    for path in paths:
        try:
            written = path.lstat().st_mtime >= since_epoch_secs - 1.0  # coarse file-system clocks
        except OSError:
            continue
        if written:
            remove_path(path)


def remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


@dataclass(frozen=True)
class Cleanup:
    """What the app undoes when a job's worker dies: its half-written outputs and stored runs.

    ``written``: outputs the job writes in place, and ``written_globs`` (folder, glob) of them,
    removed when written after the job started; ``partials``: (folder, glob) of the temporary
    names it writes before renaming, removed; ``store``: a SessionStore whose runs begun by
    the dead worker are marked failed; ``then``: anything else, called last with the one-line
    reason (e.g. to store a comparison as failed).
    """

    written: tuple[Path, ...] = ()
    written_globs: tuple[tuple[Path, str], ...] = ()
    partials: tuple[tuple[Path, str], ...] = ()
    store: Any = None
    then: Callable[[str], None] | None = None

    def apply(self, started_epoch_secs: float, reason: str) -> None:
        matched = [p for folder, pattern in self.written_globs for p in _glob(folder, pattern)]
        remove_written([*self.written, *matched], started_epoch_secs)
        for folder, pattern in self.partials:
            for path in _glob(folder, pattern):
                remove_path(path)
        if self.store is not None:
            self.store.fail_orphaned_runs()
        if self.then is not None:
            self.then(reason)


def _glob(folder: Path, pattern: str) -> list[Path]:
    try:
        return list(folder.glob(pattern))
    except OSError:
        return []


# -- the worker side ---------------------------------------------------------------------------


class JobProgress:
    """A job's progress in a worker: ``progress(stage, fraction)`` goes to the waiting handler;
    ``progress.enter(stage)`` only names the stage a crash would be reported in."""

    def __init__(self, conn: Any, abort_stage: str | None) -> None:
        self._conn = conn
        self._abort_stage = abort_stage

    def __call__(self, stage: str, fraction: float) -> None:
        self._conn.send(("progress", stage, float(fraction)))
        self._maybe_abort(stage)

    def enter(self, stage: str) -> None:
        self._conn.send(("stage", stage))
        self._maybe_abort(stage)

    def _maybe_abort(self, stage: str) -> None:
        if self._abort_stage is None:
            return
        wanted, _, gate = self._abort_stage.partition("@")
        if stage != wanted:
            return
        # "stage@path": hold at the stage until the test creates ``path``, so a test can do its
        # work while the job is certainly in flight instead of racing a fast abort.
        while gate and not os.path.exists(gate):
            time.sleep(0.02)
        _abort_on_purpose()


def _abort_on_purpose() -> None:
    """Test switch (ABORT_STAGE_ENV): die as a decoder's heap-corruption abort would, without a core file."""
    import resource

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.abort()


class LocalProgress:
    """``JobProgress`` for a job run in the calling process (no pool): progress goes straight on."""

    def __init__(self, on_progress: Callable[[str, float], None] | None) -> None:
        self._on_progress = on_progress

    def __call__(self, stage: str, fraction: float) -> None:
        if self._on_progress is not None:
            self._on_progress(stage, fraction)

    def enter(self, stage: str) -> None:
        pass


def _worker_main(conn: Any, dump: Any, abort_stage: str | None, preload: tuple[str, ...]) -> None:
    """A worker process: run the jobs that arrive on ``conn`` one at a time, until told to stop.

    A fatal signal makes faulthandler write the Python frames to ``dump`` (a pipe the app
    reads), from which the app names the stage of the crash.
    """
    import importlib

    # Ctrl-C in the server's terminal reaches the whole process group: the pool stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable(file=dump.fileno(), all_threads=True)  # ``dump`` stays open while we live
    for name in preload:
        importlib.import_module(name)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            break  # the app has gone
        if not payload:
            break
        progress = JobProgress(conn, abort_stage)
        try:
            fn, args, kwargs = pickle.loads(payload)
            reply: tuple[Any, ...] = ("done", fn(*args, progress=progress, **kwargs))
        except BaseException as exc:  # whatever a job raises is its handler's to report
            reply = ("error", exc, traceback.format_exc())
        try:
            try:
                conn.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:  # an unpicklable result
                conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}"), traceback.format_exc()))
        except OSError:
            break  # the app has gone while the job ran


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
        self.process: Any = None
        self.conn: Any = None
        self.dump: Any = None  # the read end of the worker's faulthandler pipe
        self.thread = threading.Thread(target=self.loop, name=f"codec-lens-worker-{index}", daemon=True)

    def start_process(self) -> bool:
        ctx = self.pool.context
        parent, child = ctx.Pipe(duplex=True)
        dump, dump_child = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=_worker_main,
            args=(child, dump_child, self.pool.abort_stage, self.pool.preload),
            name=f"codec-lens-worker-{self.index}",
            daemon=False,  # a worker forks the decode stage's reader processes
        )
        try:
            process.start()
        except (OSError, RuntimeError) as exc:  # no memory or process slots; an unguarded __main__
            print(f"codec-lens: worker {self.index} could not start ({exc})", file=sys.stderr)
            parent.close()
            dump.close()
            return False
        finally:
            child.close()
            dump_child.close()
        os.set_blocking(dump.fileno(), False)
        self.process, self.conn, self.dump = process, parent, dump
        if parent.poll(_START_TIMEOUT_SECS):
            try:
                if parent.recv()[0] == "ready":
                    return True
            except (EOFError, OSError):
                pass
        self.end_process()
        return False

    def end_process(self) -> None:
        for end in (self.conn, self.dump):
            if end is not None:
                end.close()
        self.conn = self.dump = None
        if self.process is not None:
            self.process.join(_STOP_TIMEOUT_SECS)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
            self.process = None

    def loop(self) -> None:
        failures = 0
        while not self.pool.closed:
            if self.process is None and not self.start_process():
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
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.conn.send_bytes(b"")  # the stop request
            self.end_process()

    def run(self, job: Job) -> None:
        job.started_epoch_secs = time.time()
        final: tuple[Any, ...] | None = None
        try:
            try:
                self.conn.send_bytes(job.payload)
                watched = [self.conn, self.process.sentinel, self.dump]
                while final is None:
                    ready = connection.wait(watched)
                    if self.dump in ready and not self.read_dump(job):
                        watched.remove(self.dump)  # closed: the worker (and its readers) ended
                    if self.conn in ready or self.conn.poll():
                        final = self.message(job)
                    elif self.process.sentinel in ready:
                        break
            except (EOFError, OSError):
                pass
            if final is None:
                final = ("error", self.crashed(job))
        finally:  # whatever happened here, the waiting handler gets an answer
            self.pool.finished(job)
            job._events.put(final or ("error", WorkerError("the worker pool failed while running the job")))

    def read_dump(self, job: Job) -> bool:
        """Add what faulthandler wrote to ``job``'s dump (read as it comes, so that it never
        blocks on a full pipe); False once the pipe is closed."""
        while True:
            try:
                chunk = os.read(self.dump.fileno(), 1 << 16)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            job.dump += chunk

    def message(self, job: Job) -> tuple[Any, ...] | None:
        """The job's final event, or None after a progress message (EOFError: the worker died)."""
        try:
            msg = self.conn.recv()
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
        process = self.process
        process.join(_STOP_TIMEOUT_SECS)
        if process.is_alive():  # its pipe broke, yet it runs: it cannot be trusted with a job
            process.kill()
            process.join()
        code = process.exitcode if process.exitcode is not None else -signal.SIGKILL
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
    ``abort_stage`` is the test switch of :data:`ABORT_STAGE_ENV`.
    """

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        per_session: int = DEFAULT_PER_SESSION,
        abort_stage: str | None = None,
        preload: tuple[str, ...] = DEFAULT_PRELOAD,
    ) -> None:
        self.context = get_context("spawn")
        self.max_pending = max_pending
        self.per_session = per_session
        self.abort_stage = abort_stage or None
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
