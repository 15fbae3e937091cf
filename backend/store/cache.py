"""Store domain of the decode cache: the signal_cache rows that register cached decodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backend.store.base import StoreBase, utc_now


class CacheMixin(StoreBase):
    """Bookkeeping of the decode cache; the folders themselves are written by ``backend.runs``."""

    def cache_lookup(self, cache_key: str) -> Path | None:
        """The folder holding a cached decode, or None."""
        row = (
            self._cursor()
            .execute("SELECT folder FROM signal_cache WHERE cache_key = ?", [cache_key])
            .fetchone()
        )
        if row is None:
            return None
        folder = Path(row[0])
        return folder if folder.is_dir() else None

    def cache_entries(self) -> list[tuple[str, Path, int]]:
        """Every registered cached decode: (cache key, folder, size in bytes)."""
        rows = self._cursor().execute("SELECT cache_key, folder, size_bytes FROM signal_cache").fetchall()
        return [(key, Path(folder), int(size or 0)) for key, folder, size in rows]

    def cache_forget(self, cache_key: str) -> None:
        """Unregister a cached decode (the caller removes its folder)."""
        with self._transaction() as tx:
            tx.execute("DELETE FROM signal_cache WHERE cache_key = ?", [cache_key])

    def cache_register(self, cache_key: str, folder: Path, meta: dict[str, Any]) -> None:
        """Record a finished cache folder (written by the caller) under its key."""
        size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
        with self._transaction() as tx:
            tx.execute("DELETE FROM signal_cache WHERE cache_key = ?", [cache_key])
            tx.execute(
                "INSERT INTO signal_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    cache_key,
                    meta["content_sha256"],
                    meta["decoder"],
                    meta["decoder_version"],
                    json.dumps(meta["geometry"]),
                    meta["signal_kind"],
                    str(folder),
                    size,
                    utc_now(),
                ],
            )
