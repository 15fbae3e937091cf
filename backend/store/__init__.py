"""The session store: every SQL statement of Codec Lens, over one DuckDB file."""

from backend.store.run_rows import run_columns, run_summary
from backend.store.schema import SCHEMA_VERSION
from backend.store.session_store import SessionStore

__all__ = ["SCHEMA_VERSION", "SessionStore", "run_columns", "run_summary"]
