"""Process isolation: native work runs in a child process, whose death by a signal becomes one line.

Three callers share this mechanism: the CLI forks a child per native command
(:func:`run_forked`), the app keeps a pool of spawned worker processes, and the batch's local
engine runs one video per spawned worker (both through :class:`Worker` and :func:`serve`).
Each turns a child's death into a crash record naming the signal (:func:`describe_death`) and
the stage it reached (:func:`stage_from_dump`, or the last stage the child reported), then
undoes what the child left (:class:`Cleanup`).

Only the standard library is imported here, and what only workers or clean-up need (pickle,
shutil, traceback) when they need it: the CLI imports this module at every start.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE})
"""The signals a decoder's own fault raises; any other death is a kill from outside."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Ctrl-C and a termination request: a forked command stops and cleans up (exit 130)."""

# Where a crash happened, from the Python frames of faulthandler's dump: the innermost frame
# in a stage module names the stage; these other modules do the heavy native work.
_WORK_MODULES = {
    ("cvp_format", "write"): "output",
    ("cvp_format", "read"): "import",
    ("cvp_format", "check"): "import",
    ("cvp_format", "import_run"): "import",
    ("compare", "encode"): "encode",
    ("luma", "measure"): "measure",
    ("luma", "fit"): "correct",
    ("export", "clip"): "clip",
}


# -- the crash record -------------------------------------------------------------------------------


def signal_name(exit_code: int) -> str | None:
    """``SIGSEGV`` for a process that died by signal 11 (exit code -11), None for a normal exit."""
    if exit_code >= 0:
        return None
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"


def describe_death(exit_code: int | None, stage: str | None, *, killed: str = "the worker was killed") -> str:
    """One line for a child that died with ``exit_code`` (-N: by signal N) in ``stage``.

    Parameters
    ----------
    exit_code : int or None
        The child's exit code as ``multiprocessing`` reports it (None: it had not ended).
    stage : str or None
        The stage it was in, when known.
    killed : str
        What a death by a signal other than :data:`CRASH_SIGNALS` is called.

    Returns
    -------
    str
        ``the decoder crashed (SIGABRT) during decode``, ``<killed> (SIGKILL)`` or
        ``the worker ended unexpectedly (exit code 1)``.
    """
    during = f" during {stage}" if stage else ""
    name = signal_name(exit_code) if exit_code is not None else None
    if exit_code is None or name is None:
        return f"the worker ended unexpectedly (exit code {exit_code}){during}"
    what = "the decoder crashed" if -exit_code in CRASH_SIGNALS else killed
    return f"{what} ({name}){during}"


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


# -- clean-up after a death -------------------------------------------------------------------------


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
    """Remove a file or a folder tree; one that is already gone is no error."""
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


@dataclass(frozen=True)
class Cleanup:
    """What is undone when a child running a job dies: its half-written outputs and stored runs.

    ``written``: outputs the job writes in place, and ``written_globs`` (folder, glob) of them,
    removed when written after the job started; ``partials``: (folder, glob) of the temporary
    names it writes before renaming, removed; ``store``: a SessionStore whose runs begun by
    the dead child are marked failed; ``then``: anything else, called last with the one-line
    reason (e.g. to store a comparison as failed).
    """

    written: tuple[Path, ...] = ()
    written_globs: tuple[tuple[Path, str], ...] = ()
    partials: tuple[tuple[Path, str], ...] = ()
    store: Any = None
    then: Callable[[str], None] | None = None

    def apply(self, started_epoch_secs: float, reason: str) -> None:
        """Undo what a job begun at ``started_epoch_secs`` left; ``reason`` goes to ``then``."""
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


# -- fork and wait (the CLI) ------------------------------------------------------------------------


def scratch_fd(name: str) -> int:
    """An anonymous file that a child writes and its parent reads back after the child's death."""
    try:
        return os.memfd_create(name)
    except (AttributeError, OSError):  # no memfd: an unlinked temporary file does the same
        import tempfile

        handle, path = tempfile.mkstemp(prefix=f"{name}-")
        os.unlink(path)
        return handle


class ChildDeath(NamedTuple):
    """A forked child that died by a signal nobody sent it on purpose.

    (Tuples, not dataclasses, for this and :class:`ForkResult`: a dataclass takes ~1 ms to
    create at import, and the CLI imports this module for every native command.)
    """

    signal: signal.Signals
    """The signal that ended it."""
    record: bytes
    """What the child wrote to its record before it died (b"" when nothing)."""
    stage: str | None
    """The stage its faulthandler dump names (:func:`stage_from_dump`), when one does."""
    started_epoch_secs: float
    """When the child was forked (``time.time()``): outputs written since are its."""


class ForkResult(NamedTuple):
    """How a forked child ended: its exit code, or an interruption, or its death."""

    exit_code: int
    """As ``os.waitstatus_to_exitcode`` gives it: -N for a death by signal N."""
    interrupted: bool = False
    """A Ctrl-C or SIGTERM of the parent, passed on to the child, ended it."""
    death: ChildDeath | None = None
    """Set when it died by any other signal (a decoder's SIGSEGV, the OOM killer's SIGKILL)."""


def run_forked(child: Callable[[Callable[[bytes], None]], int]) -> ForkResult:
    """Run ``child(record)`` in a forked process and wait for it.

    Parameters
    ----------
    child : callable
        Runs in the fork; returns its exit code. ``record(data)`` keeps ``data`` (the latest
        call wins, up to 64 KiB) where the parent can read it should the child die.

    Returns
    -------
    ForkResult
        The child's exit code; ``interrupted`` when a Ctrl-C or SIGTERM sent to this process
        (and passed on to the child, which stops as always) ended it by that signal; ``death``
        when another signal killed it, with its record and the stage faulthandler's dump of
        its Python frames names.

    Notes
    -----
    Fork single-threaded, before heavy imports. The child acts on the first Ctrl-C only
    (:func:`arm_interrupts`), so that one the terminal sends to both processes counts once.
    This process keeps passing the stop signals on (to nobody, once the child is gone).
    """
    dump_fd, record_fd = scratch_fd("codec-lens-dump"), scratch_fd("codec-lens-record")
    started = time.time()
    stops = set(STOP_SIGNALS)
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # held until each process has its handlers
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            arm_interrupts()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
            faulthandler.enable(file=dump_fd, all_threads=True)
            code = child(lambda data: _keep(record_fd, data))
        finally:
            os._exit(code)  # never return into the parent's code
    forwarded: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        forwarded.append(signum)
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in stops:
        signal.signal(signum, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    _, status = os.waitpid(pid, 0)  # retried after the forwarder ran (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    try:
        if code >= 0:
            return ForkResult(code)
        if forwarded and -code in stops:
            return ForkResult(code, interrupted=True)
        dump = os.pread(dump_fd, 1 << 20, 0).decode(errors="replace")
        record = os.pread(record_fd, 1 << 16, 0).rstrip(b"\0")
        death = ChildDeath(signal.Signals(-code), record, stage_from_dump(dump), started)
        return ForkResult(code, death=death)
    finally:
        os.close(dump_fd)
        os.close(record_fd)


def _keep(fd: int, data: bytes) -> None:
    os.pwrite(fd, data, 0)


def arm_interrupts() -> None:
    """Make Ctrl-C and SIGTERM stop this process once (:func:`_interrupt_once`), and never be lost.

    Python discards an exception raised where nothing can catch it (an at-fork callback, a
    ``__del__``, a weakref callback) and reports it to ``sys.unraisablehook``. A Ctrl-C whose
    handler ran there would vanish: the command would go on to the end and exit 0, having
    ignored the later copies. The hook sends the signal again, so it lands in ordinary code.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, _interrupt_once)
    sys.unraisablehook = _redeliver_lost_interrupt


def _redeliver_lost_interrupt(unraisable: Any) -> None:
    """``sys.unraisablehook``: send a discarded interrupt again; anything else as Python reports it."""
    exc = unraisable.exc_value
    if not isinstance(exc, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    name = str(exc.args[0]) if exc.args else ""
    for stop in STOP_SIGNALS:
        signal.signal(stop, _interrupt_once)
    _send_again(signal.Signals[name] if name in signal.Signals.__members__ else signal.SIGINT)


def _send_again(signum: int) -> None:
    """Signal this process again from another thread, so the handler runs after the caller returns
    (a signal sent from the calling thread is handled before ``os.kill`` even returns)."""
    import threading

    def later() -> None:
        time.sleep(0.01)
        os.kill(os.getpid(), signum)

    threading.Thread(target=later, name="codec-lens-interrupt", daemon=True).start()


def _interrupt_once(signum: int, frame: Any) -> None:
    """The child's Ctrl-C and SIGTERM: the first stops the command (KeyboardInterrupt, as ever);
    later ones, such as the parent's copy of the terminal's Ctrl-C, leave its clean-up alone."""
    hook = _redeliver_lost_interrupt.__code__
    while frame is not None:
        if frame.f_code is hook:  # raised here, it would be lost for good
            _send_again(signum)
            return
        frame = frame.f_back
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


# -- spawned workers (the app's pool, the batch's local engine) -------------------------------------


class CallProgress:
    """The ``progress`` a call in a worker gets: ``progress(stage, fraction)`` goes to the waiting
    parent; ``progress.enter(stage)`` only names the stage a crash would be reported in."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __call__(self, stage: str, fraction: float) -> None:
        self._conn.send(("progress", stage, float(fraction)))

    def enter(self, stage: str) -> None:
        self._conn.send(("stage", stage))


def serve(conn: Any, dump: Any, preload: Sequence[str], setup: Callable[[], None] | None = None) -> None:
    """A worker process's main: run the calls that arrive on ``conn`` one at a time, until told to stop.

    Each request is ``pickle.dumps((fn, args, kwargs))`` (b"": stop); the call is
    ``fn(*args, progress=CallProgress(conn), **kwargs)`` and its reply ``("done", value)`` or
    ``("error", exception, traceback text)``. Before the first, ``setup()`` runs, ``preload``
    is imported and ``("ready", pid)`` sent. With a ``dump`` pipe, a fatal signal makes
    faulthandler write the Python frames there, from which the parent names the stage.
    """
    import pickle
    import traceback

    # Ctrl-C in the terminal reaches the whole process group: the parent stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if setup is not None:
        setup()
    if dump is not None:
        faulthandler.enable(file=dump.fileno(), all_threads=True)  # ``dump`` stays open while we live
    for name in preload:  # now, so that the first call's seconds are its own
        importlib.import_module(name)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            break  # the parent has gone
        if not payload:
            break
        progress = CallProgress(conn)
        try:
            fn, args, kwargs = pickle.loads(payload)
            reply: tuple[Any, ...] = ("done", fn(*args, progress=progress, **kwargs))
        except BaseException as exc:  # whatever a call raises is its caller's to report
            reply = ("error", exc, traceback.format_exc())
        try:
            try:
                conn.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:  # an unpicklable result
                conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}"), traceback.format_exc()))
        except OSError:
            break  # the parent has gone while the call ran


class Worker:
    """One spawned worker process running :func:`serve`, seen from its parent.

    ``conn`` carries requests and replies; ``dump`` (when asked for) is the non-blocking read
    end of the worker's faulthandler pipe; ``process`` is the ``multiprocessing`` process.
    """

    def __init__(
        self,
        context: BaseContext,
        *,
        name: str | None = None,
        daemon: bool,
        preload: Sequence[str] = (),
        setup: Callable[[], None] | None = None,
        with_dump: bool = False,
    ) -> None:
        """Start the worker (it then imports ``preload``); raises OSError or RuntimeError when
        it cannot (no memory or process slots, an unguarded ``__main__``)."""
        parent, child = context.Pipe(duplex=True)
        dump, dump_child = context.Pipe(duplex=False) if with_dump else (None, None)
        process = context.Process(  # type: ignore[attr-defined]
            target=serve, args=(child, dump_child, tuple(preload), setup), name=name, daemon=daemon
        )
        try:
            process.start()
        except (OSError, RuntimeError):
            parent.close()
            if dump is not None:
                dump.close()
            raise
        finally:
            child.close()
            if dump_child is not None:
                dump_child.close()
        if dump is not None:
            os.set_blocking(dump.fileno(), False)
        self.process: Any = process
        self.conn: Any = parent
        self.dump: Any = dump

    def wait_ready(self, timeout_secs: float) -> bool:
        """Wait for the worker's ``ready`` message (it has imported its preload); False when it
        did not come in ``timeout_secs`` or the worker died."""
        if self.conn.poll(timeout_secs):
            try:
                return bool(self.conn.recv()[0] == "ready")
            except (EOFError, OSError):
                pass
        return False

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Send ``fn(*args, progress=…, **kwargs)`` (a module-level function, picklable arguments)."""
        import pickle

        self.send(pickle.dumps((fn, args, kwargs)))

    def send(self, payload: bytes) -> None:
        """Send a pickled request, as :meth:`call` makes it."""
        self.conn.send_bytes(payload)

    def read_dump(self) -> bytes | None:
        """What faulthandler wrote since the last read (read as it comes, so that it never blocks
        on a full pipe); None once the pipe is closed (the worker and its readers ended)."""
        chunks = []
        while True:
            try:
                chunk = os.read(self.dump.fileno(), 1 << 16)
            except BlockingIOError:
                return b"".join(chunks)
            if not chunk:
                return None if not chunks else b"".join(chunks)
            chunks.append(chunk)

    def reap(self, timeout_secs: float) -> int:
        """Wait for a worker that is dying; kill it if it lingers (its pipe broke, yet it runs:
        it cannot be trusted with a call): its exit code (-N: by signal N)."""
        self.process.join(timeout_secs)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        return self.process.exitcode if self.process.exitcode is not None else -signal.SIGKILL

    def close(self, timeout_secs: float) -> None:
        """Close the pipes (an idle worker then ends), wait, kill it if it does not end."""
        for end in (self.conn, self.dump):
            if end is not None:
                end.close()
        self.process.join(timeout_secs)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()

    def stop(self, timeout_secs: float, *, now: bool) -> None:
        """End the worker: asked to stop and waited for (``now``: not), then terminated, then
        killed, each after ``timeout_secs``; its pipes closed."""
        if not now:
            with contextlib.suppress(OSError):
                self.conn.send_bytes(b"")
            self.process.join(timeout_secs)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout_secs)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        for end in (self.conn, self.dump):
            if end is not None:
                end.close()
