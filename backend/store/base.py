"""What every store domain shares: the DuckDB connection, its write lock and transactions."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import random
import threading
import time
import weakref
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
# this process ends. Frame stepping never touches the store. A longer hold (kept open
# between calls) was tried and starves other processes of the lock while the holder is busy,
# so there is none.
#
# Opening is an ATTACH of the file to an in-memory DuckDB that the store keeps until close():
# creating a DuckDB (what duckdb.connect(path) does every time) costs ~13 ms even for an
# empty database, attaching the file ~1.2 ms and detaching it ~0.4 ms. Every cursor a lease
# hands out is closed when it ends: a cursor with a result still pending keeps the file attached (and
# locked) after the DETACH.
#
# The lease also holds an flock on ``<file>.lock`` from before the open until after the close.
# With DuckDB's own lock alone, processes taking turns lost committed writes: in 4 of 6 runs of
# 6 processes × 20 inserts and updates (DuckDB 2.0.1), a row or an update was missing
# although every commit had returned; 0 of 18 runs with the side lock (0 of 5 more since the
# ATTACH). Evidently the next process got in while the previous one was still closing the file.
DEFAULT_LOCK_WAIT_SECS = 30.0
_ALIAS = "lens_session"  # the attached file's name in the store's DuckDB
# Short, jittered retries: a holder's gaps between calls can be a few milliseconds.
_RETRY_SLEEP_SECS = (0.002, 0.008)


def _open_lock_file(path: str) -> int | None:
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(path, flags | os.O_CLOEXEC, 0o644)
        except OSError:
            continue
    return None


# Stores holding their lock file now. A forked child (the decoder's reader processes) shares
# the parent's flock through the inherited descriptor and would keep the file locked for as
# long as it lives: the child closes its copies at once.
_LOCKED: weakref.WeakSet[StoreBase] = weakref.WeakSet()


def _forget_locks_in_child() -> None:
    for store in list(_LOCKED):
        if store._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(store._lock_fd)
            store._lock_fd = None
    _LOCKED.clear()


os.register_at_fork(after_in_child=_forget_locks_in_child)


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
    _lock_fd: int | None = None
    _engine: duckdb.DuckDBPyConnection | None = None
    """The in-memory DuckDB the file is attached to during a lease (see above)."""
    _cursors: list[duckdb.DuckDBPyConnection]

    def _connect(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_wait_secs
        while True:
            if not self._take_file_lock():
                if time.monotonic() >= deadline:
                    raise self._busy()
                time.sleep(random.uniform(*_RETRY_SLEEP_SECS))
                continue
            try:
                return self._attach()
            except duckdb.Error as exc:
                self._drop_file_lock()
                if not is_lock_conflict(exc):
                    why = f"cannot open session database ({exc})"
                    raise StoreError(why, path=self.path, stage="store") from exc
                if time.monotonic() >= deadline:
                    raise self._busy(exc) from exc
                time.sleep(random.uniform(*_RETRY_SLEEP_SECS))

    def _busy(self, cause: duckdb.Error | None = None) -> StoreError:
        """The error of a file another process held past ``lock_wait_secs`` (``cause``: DuckDB's own)."""
        why = f"is busy: another process held it for over {self.lock_wait_secs:g} s"
        return StoreError(why if cause is None else f"{why} ({cause})", path=self.path, stage="store")

    def _attach(self) -> duckdb.DuckDBPyConnection:
        if self._engine is None:
            self._engine = duckdb.connect(":memory:")
        path = str(self.path).replace("'", "''")
        mode = " (READ_ONLY)" if self.read_only else ""
        self._engine.execute(f"ATTACH '{path}' AS {_ALIAS}{mode}")
        self._engine.execute(f"USE {_ALIAS}")
        return self._engine

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor on the leased file, closed when the lease ends."""
        assert self._con is not None, "store calls run inside a lease"
        cur = self._con.cursor()
        cur.execute(f"USE {_ALIAS}")  # a cursor starts on the in-memory database
        self._cursors.append(cur)
        return cur

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
            cursors, self._cursors = self._cursors, []
            for cur in cursors:
                cur.close()
            try:
                self._con.execute("USE memory")
                self._con.execute(f"DETACH {_ALIAS}")
            except duckdb.Error:
                self._close_engine()  # whatever went wrong, closing the whole DuckDB lets go of the file
            self._con = None
        self._drop_file_lock()

    def _close_engine(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    def _shutdown_locked(self) -> None:
        """Let go of the file and of the in-memory DuckDB (``close()``)."""
        self._release_locked()
        self._close_engine()

    def _take_file_lock(self) -> bool:
        """Lock ``<file>.lock`` (shared when read-only) for this lease; False while another
        process holds it (see the note above :data:`DEFAULT_LOCK_WAIT_SECS`)."""
        fd = _open_lock_file(f"{self.path}.lock")
        if fd is None:
            return True  # a folder we can neither write nor read: DuckDB's own lock is all there is
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.read_only else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        _LOCKED.add(self)
        return True

    def _drop_file_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        _LOCKED.discard(self)
        if fd is not None:
            os.close(fd)  # the last descriptor of the lock file closed releases its lock

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        cur = self._cursor()
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
        return self._cursor().execute(sql, params or []).fetchdf()

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
