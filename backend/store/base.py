"""What every store domain shares: the DuckDB connection, its write lock and transactions."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from backend.errors import StoreError

DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of every DuckDB database file


def utc_now() -> datetime:
    """The current UTC time without a zone, as the TIMESTAMP columns hold it."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def check_file(path: Path) -> None:
    """Refuse anything that is not a DuckDB file before DuckDB can overwrite it."""
    if path.is_dir():
        raise StoreError("is a directory, not a session database", path=path, stage="store")
    if not path.exists() or path.stat().st_size == 0:
        if path.exists():
            raise StoreError("is an empty file, not a session database", path=path, stage="store")
        return
    with path.open("rb") as fh:
        head = fh.read(16)
    if head[8:12] != DUCKDB_MAGIC:
        raise StoreError("is not a DuckDB database (refusing to touch it)", path=path, stage="store")


# How several processes share one file: DuckDB lets one process hold a file read-write (or
# several hold it read-only), so no process keeps it open longer than one call needs. Each
# public store call leases the connection: it opens the file, retrying every few
# milliseconds while another process holds it, and closes it when the outermost call of
# this process ends. Opening costs ~20 ms; frame stepping never touches the store. A
# longer hold (kept open between calls) was tried and starves other processes of the lock
# while the holder is busy, so there is none.
DEFAULT_LOCK_WAIT_SECS = 30.0
# Short, jittered retries: a holder's gaps between calls can be a few milliseconds.
_RETRY_SLEEP_SECS = (0.002, 0.008)


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether DuckDB refused the file because another process holds its lock."""
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


class StoreBase:
    """The state the domain mixins of :class:`~backend.store.SessionStore` work on.

    ``SessionStore.__init__`` sets these attributes; each domain mixin reads with its own
    cursor and writes through :meth:`_transaction`, always inside a lease (see above), which
    every public method of the store takes through :func:`leased`.
    """

    path: Path
    cache_dir: Path
    read_only: bool
    lock_wait_secs: float
    _con: duckdb.DuckDBPyConnection | None
    _write_lock: threading.Lock
    _lease_lock: threading.Lock
    _lease_users: int

    def _connect(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_wait_secs
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=self.read_only)
            except duckdb.Error as exc:
                if not is_lock_conflict(exc) or time.monotonic() >= deadline:
                    why = (
                        f"is busy: another process held it for over {self.lock_wait_secs:g} s ({exc})"
                        if is_lock_conflict(exc)
                        else f"cannot open session database ({exc})"
                    )
                    raise StoreError(why, path=self.path, stage="store") from exc
                time.sleep(random.uniform(*_RETRY_SLEEP_SECS))

    @contextmanager
    def _lease(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The open connection for the duration of one call (nested calls share it)."""
        with self._lease_lock:
            if self._con is None:
                self._con = self._connect()
            self._lease_users += 1
            con = self._con
        try:
            yield con
        finally:
            with self._lease_lock:
                self._lease_users -= 1
                if self._lease_users == 0:
                    self._release_locked()

    @contextmanager
    def held(self) -> Iterator[StoreBase]:
        """Keep the file open across the calls made inside the block: one open for a handler's
        burst of calls instead of one per call (~20 ms each). Other processes wait meanwhile:
        hold it for such a burst only."""
        with self._lease():
            yield self

    def _release_locked(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        assert self._con is not None, "store calls run inside a lease"
        cur = self._con.cursor()
        with self._write_lock:
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def query(self, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
        """Read-only SQL for researchers (``codec-lens sessions sql``)."""
        cur = self._con.cursor()
        return cur.execute(sql, params or []).fetchdf()

    def size_bytes(self) -> dict[str, int]:
        """Bytes on disk: the database file (+WAL) and the cache folder."""
        db = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}.wal")) if p.exists())
        cache = (
            sum(f.stat().st_size for f in self.cache_dir.rglob("*") if f.is_file())
            if self.cache_dir.exists()
            else 0
        )
        return {"database": db, "cache": cache}


def leased(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a store method inside a connection lease (see :meth:`StoreBase._lease`)."""

    @functools.wraps(fn)
    def call(self: StoreBase, *args: Any, **kwargs: Any) -> Any:
        with self._lease():
            return fn(self, *args, **kwargs)

    return call
