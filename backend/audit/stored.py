"""Audit a stored run (by id) or a cvp output folder on disk."""

from __future__ import annotations

from pathlib import Path

from backend.audit.coverage import AuditConfig, CoverageAudit, audit_coverage
from backend.audit.sources import audit_source_of_output, audit_source_of_run
from backend.store import SessionStore


def audit_stored_run(store: SessionStore, run_id: str, *, config: AuditConfig) -> CoverageAudit:
    """The coverage audit of a finished stored run; an imported cvp run is audited on cvp's tokens.

    Raises
    ------
    StoreError when the run is unknown or not done; the pipeline's errors when its video changed.
    """
    from backend.cvp_format import imported_view
    from backend.runs import open_run

    row = store.get_run(run_id)
    result = imported_view(store, run_id, open_run(store, run_id, row=row))
    return audit_coverage(audit_source_of_run(result), config=config)


def audit_output_dir(directory: str | Path, *, config: AuditConfig) -> CoverageAudit:
    """The coverage audit of a codec-video-prep (or ``select --out``) output folder.

    Raises
    ------
    InputError when the folder is not a readable output (its one line names the file at fault).
    """
    from backend.cvp_format import read_cvp_dir

    return audit_coverage(audit_source_of_output(read_cvp_dir(directory)), config=config)
