"""Run the ``codec-lens`` CLI from tests: a fresh process (``run_cli``) or a fork of a warm server."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys

from helpers.paths import REPO_ROOT

# The fork server script stays at tests/ top level (it is run as a file, not imported).
_FORK_SERVER_SCRIPT = REPO_ROOT / "tests" / "cli_forkserver.py"


def run_cli(*args: str | os.PathLike[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``python -m app.cli ARGS`` from the repo root and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class _ForkServer:
    """Client of tests/cli_forkserver.py: one process that imported Codec Lens, forked per command."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None

    def _server(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, str(_FORK_SERVER_SCRIPT)],
                cwd=REPO_ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
            assert self._proc.stdout is not None
            ready = json.loads(self._proc.stdout.readline() or "{}")
            assert "ready" in ready, "the CLI fork server did not start"
        return self._proc

    def run(
        self, args: tuple[str | os.PathLike[str], ...], timeout: float, env: dict[str, str] | None
    ) -> subprocess.CompletedProcess[str]:
        proc = self._server()
        assert proc.stdin is not None and proc.stdout is not None
        argv = [str(a) for a in args]
        request = {"argv": argv, "cwd": str(REPO_ROOT), "timeout": timeout, "env": env or {}}
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        if reply["returncode"] is None:
            raise subprocess.TimeoutExpired(argv, timeout, reply["stdout"], reply["stderr"])
        return subprocess.CompletedProcess(argv, reply["returncode"], reply["stdout"], reply["stderr"])

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
        self._proc = None


_FORK_SERVER = _ForkServer()
atexit.register(_FORK_SERVER.close)


def run_cli_forked(
    *args: str | os.PathLike[str], timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``run_cli`` for tests that run hundreds of short commands: the same ``codec-lens`` entry,
    exit code and output, but forked from a server that imported Codec Lens once
    (tests/cli_forkserver.py), so a command costs its work, not a second of start-up.
    Start-up itself (import order, the fork before numpy) is left to the tests that use
    :func:`run_cli`.
    """
    return _FORK_SERVER.run(args, timeout, env)
