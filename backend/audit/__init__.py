"""Selection audit: coverage of the video by a run's tokens (what the model never saw)."""

from backend.audit.cached import RunAudit, cached_run_audit
from backend.audit.coverage import AuditConfig, AuditSource, CoverageAudit, GroupCoverage, audit_coverage
from backend.audit.frame_staleness import staleness_at_frame
from backend.audit.sources import audit_source_of_output, audit_source_of_run
from backend.audit.stored import audit_output_dir, audit_stored_run

__all__ = [
    "AuditConfig",
    "AuditSource",
    "CoverageAudit",
    "GroupCoverage",
    "RunAudit",
    "audit_coverage",
    "audit_output_dir",
    "audit_source_of_output",
    "audit_source_of_run",
    "audit_stored_run",
    "cached_run_audit",
    "staleness_at_frame",
]
