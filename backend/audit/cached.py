"""The audit of an open run, worked out once per run and shared by the staleness layer, timeline, summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.audit.coverage import AuditConfig, AuditSource, CoverageAudit, audit_coverage
from backend.audit.sources import audit_source_of_run


@dataclass(frozen=True, repr=False)
class RunAudit:
    """A run's audit source (its tokens' table) and the coverage audit made from it, without the
    score masses: its kept score shares are None (``backend.audit.audit_stored_run`` has them)."""

    source: AuditSource
    coverage: CoverageAudit

    def __repr__(self) -> str:
        return f"RunAudit(frames={self.coverage.frames}, patch_grid={self.coverage.patch_grid})"


def cached_run_audit(result: Any) -> RunAudit:
    """:func:`backend.audit.audit_source_of_run` and :func:`backend.audit.audit_coverage` of a
    run, worked out once and kept in the run's own ``derived`` figures, so a frame step of the
    staleness layer, a timeline redraw and the summary read one table. ``result`` is a
    :class:`backend.pipeline.RunResult`; a run made from it with ``dataclasses.replace`` starts
    without (its tokens may differ). Two threads asking at once may both compute it: the same
    figures, the last one kept.
    """
    hit = result.derived.get("run_audit")
    if hit is None:
        source = audit_source_of_run(result, scores=False)  # the views show no score share
        hit = RunAudit(source=source, coverage=audit_coverage(source, config=AuditConfig()))
        result.derived["run_audit"] = hit
    return hit
