"""The audit of an open run, worked out once per run and shared by the staleness layer, timeline, summary."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from backend.audit.coverage import AuditConfig, AuditSource, CoverageAudit, audit_coverage
from backend.audit.sources import audit_source_of_run

RUNS_KEPT = 8
"""Runs whose audit is kept (the app's open runs, an A/B pair, the last live re-selections)."""


@dataclass(frozen=True, repr=False)
class RunAudit:
    """A run's audit source (its tokens' table) and the coverage audit made from it, without the
    score masses: its kept score shares are None (``backend.audit.audit_stored_run`` has them)."""

    source: AuditSource
    coverage: CoverageAudit

    def __repr__(self) -> str:
        return f"RunAudit(frames={self.coverage.frames}, patch_grid={self.coverage.patch_grid})"


_AUDITS: OrderedDict[int, tuple[weakref.ref[Any], RunAudit]] = OrderedDict()
_AUDITS_LOCK = threading.Lock()


def cached_run_audit(result: Any) -> RunAudit:
    """:func:`backend.audit.audit_source_of_run` and :func:`backend.audit.audit_coverage` of a
    run, remembered for the last :data:`RUNS_KEPT` runs, so a frame step of the staleness layer,
    a timeline redraw and the summary read one table.

    Runs are keyed by identity (records hold arrays, so they are not hashable); a weak reference
    makes sure a recycled id never returns another run's audit. ``result`` is a
    :class:`backend.pipeline.RunResult`.
    """
    key = id(result)
    with _AUDITS_LOCK:
        hit = _AUDITS.get(key)
        if hit is not None and hit[0]() is result:
            _AUDITS.move_to_end(key)
            return hit[1]
    source = audit_source_of_run(result, scores=False)  # the views show no score share
    audit = RunAudit(source=source, coverage=audit_coverage(source, config=AuditConfig()))
    with _AUDITS_LOCK:
        _AUDITS[key] = (weakref.ref(result), audit)
        while len(_AUDITS) > RUNS_KEPT:
            _AUDITS.popitem(last=False)
    return audit
