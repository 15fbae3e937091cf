"""The session store: every SQL statement of Codec Lens, over one DuckDB file.

The names below load on first use (PEP 562): the session store loads pandas, which a batch
that only writes its summary (``backend.store.summary``) does without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend import lazy_exports

if TYPE_CHECKING:
    from backend.store.datasets import check_where, filter_summary, read_summary_parquet
    from backend.store.run_rows import run_columns, run_summary
    from backend.store.schema import SCHEMA_VERSION
    from backend.store.session_store import SessionStore
    from backend.store.summary import (
        AUDIT_SUMMARY_COLUMNS,
        FALLBACK_SUMMARY_COLUMNS,
        SUMMARY_COLUMNS,
        SUMMARY_NAMES,
        write_summary_parquet,
    )

_HOMES = {
    "SCHEMA_VERSION": "schema",
    "AUDIT_SUMMARY_COLUMNS": "summary",
    "FALLBACK_SUMMARY_COLUMNS": "summary",
    "SUMMARY_COLUMNS": "summary",
    "SUMMARY_NAMES": "summary",
    "SessionStore": "session_store",
    "check_where": "datasets",
    "filter_summary": "datasets",
    "read_summary_parquet": "datasets",
    "run_columns": "run_rows",
    "run_summary": "run_rows",
    "write_summary_parquet": "summary",
}

__all__ = [
    "AUDIT_SUMMARY_COLUMNS",
    "FALLBACK_SUMMARY_COLUMNS",
    "SCHEMA_VERSION",
    "SUMMARY_COLUMNS",
    "SUMMARY_NAMES",
    "SessionStore",
    "check_where",
    "filter_summary",
    "read_summary_parquet",
    "run_columns",
    "run_summary",
    "write_summary_parquet",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())
