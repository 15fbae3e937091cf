"""A fork server for CLI tests: imports Codec Lens once, then runs each command in a fresh fork.

A ``codec-lens`` process spends about a second importing numpy, OpenCV, PyAV, DuckDB and the
pipeline before it does anything; the size sweep and the damaged-stream tests run hundreds
of short commands, so that start-up was most of their time. This server pays it once: for
each request (one JSON line on stdin: ``{"argv": [...], "cwd": ..., "timeout": secs}``) it
forks, the child runs ``app.cli.entry()`` exactly as the console script does (the native
commands fork once more there, for crash isolation) with its stdout and stderr in files,
and the server answers with one JSON line: the exit code as ``subprocess`` reports it
(-N for a death by signal N, None when the timeout killed it), stdout and stderr.

The server stays single-threaded so that forking it is safe.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time

# As the console script's environment and entry(): before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

_PRELOAD = (
    "app.cli",
    "app.cli.luma",
    "app.cli.compare",
    "app.cli.export",
    "app.cli.importer",
    "backend.pipeline",
    "backend.runs",
    "backend.store",
)


def _preload() -> None:
    import importlib

    for name in _PRELOAD:
        importlib.import_module(name)


def _child(argv: list[str], cwd: str, out_fd: int, err_fd: int) -> None:
    """In the fork: become the ``codec-lens ARGV`` process."""
    os.setpgid(0, 0)  # the server ends the whole group (reader children too) on a timeout
    os.chdir(cwd)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    sys.argv = ["codec-lens", *argv]
    from app.cli import entry

    try:
        entry()  # ends with os._exit
    finally:
        os._exit(1)


def _wait(pid: int, timeout_secs: float) -> int | None:
    deadline = time.monotonic() + timeout_secs
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def serve() -> None:
    _preload()
    answer = sys.stdout
    print(json.dumps({"ready": os.getpid()}), file=answer, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        env = request.get("env") or {}
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            answer.flush()
            pid = os.fork()
            if pid == 0:
                os.environ.update(env)
                _child(request["argv"], request["cwd"], out.fileno(), err.fileno())
            code = _wait(pid, float(request["timeout"]))
            reply = {"returncode": code, "stdout": _read(out.fileno()), "stderr": _read(err.fileno())}
        print(json.dumps(reply), file=answer, flush=True)


if __name__ == "__main__":
    serve()
