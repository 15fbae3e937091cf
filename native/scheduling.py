"""Real-time scheduling undone: SVT-AV1's encoder open leaves this process's threads on SCHED_FIFO."""

from __future__ import annotations

import os

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
