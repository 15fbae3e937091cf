"""Process facts the tests read from Linux's /proc: a process's children and whether it lives."""

from __future__ import annotations

import contextlib
from pathlib import Path


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s direct children, over all its threads."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (an exited child nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
