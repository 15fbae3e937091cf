"""The session store: every SQL statement of Codec Lens, over one DuckDB file."""

from backend.store.datasets import (
    SUMMARY_COLUMNS,
    SUMMARY_NAMES,
    check_where,
    filter_summary,
    read_summary_parquet,
    write_summary_parquet,
)
from backend.store.run_rows import run_columns, run_summary
from backend.store.schema import SCHEMA_VERSION
from backend.store.session_store import SessionStore

__all__ = [
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
