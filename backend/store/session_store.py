"""Session store: one DuckDB file, its schema and every domain's rows, behind one class."""

from __future__ import annotations

import threading
from pathlib import Path

from backend.store.base import DEFAULT_LOCK_WAIT_SECS, check_file, leased
from backend.store.cache import CacheMixin
from backend.store.comparisons import ComparisonsMixin
from backend.store.datasets import DatasetsMixin
from backend.store.luma import LumaMixin
from backend.store.runs import RunsMixin
from backend.store.schema import SchemaMixin
from backend.store.view_state import ViewStateMixin


class SessionStore(
    RunsMixin, CacheMixin, ViewStateMixin, ComparisonsMixin, LumaMixin, DatasetsMixin, SchemaMixin
):
    """All persistent state: sessions, runs and their per-frame/group/token rows.

    One DuckDB connection per store; every call takes its own cursor, so handlers on
    several threads can read while one writes (DuckDB's MVCC isolates them).
    Large arrays (decoded pixels for re-selection) live in files next to the
    database under ``<name>.cache/``; the tables hold their paths. Each table domain's
    statements sit in its own mixin module of ``backend.store``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        lock_wait_secs: float = DEFAULT_LOCK_WAIT_SECS,
    ) -> None:
        """Open (or create) the store at ``path``.

        The file is open only during a call (see ``backend.store.base``), so other processes
        can use it in between; ``lock_wait_secs`` is how long a call waits while another
        process holds it before it fails with a StoreError.
        """
        self.path = Path(path).expanduser()
        check_file(self.path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.read_only = read_only
        self.lock_wait_secs = float(lock_wait_secs)
        self._con = None
        self._write_lock = threading.Lock()
        self._lease_lock = threading.Lock()
        self._lease_users = 0
        self._cursors = []
        self.cache_dir = self.path.parent / f"{self.path.name}.cache"
        with self._lease():
            self._prepare_schema(read_only)
            if not read_only:
                self._fail_orphaned_runs()

    def close(self) -> None:
        """Close the file now (calls after this reopen it)."""
        with self._lease_lock:
            self._shutdown_locked()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Every public method of the domain mixins takes a lease; close() and the context-manager
# methods stay as they are.
for _name, _member in list(vars(SessionStore).items()) + [
    (n, m) for base in SessionStore.__mro__[1:] for n, m in vars(base).items()
]:
    if (
        not _name.startswith("_")
        and _name != "close"
        and callable(_member)
        and not isinstance(_member, (classmethod, staticmethod, type))
        and not hasattr(getattr(SessionStore, _name), "__wrapped__")
    ):
        setattr(SessionStore, _name, leased(_member))
