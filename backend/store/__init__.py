"""The session store: every SQL statement of Codec Lens, over one DuckDB file."""

from backend.store.session_store import SCHEMA_VERSION, SessionStore

__all__ = ["SCHEMA_VERSION", "SessionStore"]
