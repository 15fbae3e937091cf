"""The app's server-side state: the session store, allowed folders and opened runs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.paths import resolve_within
from backend.runs import open_run
from backend.store import SessionStore


@dataclass
class Workspace:
    """Shared by every tab: one store, the folders user paths may touch, a small run cache.

    ``input_roots``: folders typed paths and uploads may be read from.
    ``output_root``: the one folder exports and imports may write into.
    Results are kept per run id (few at a time: each holds decoded pixels).
    """

    store_path: Path
    input_roots: tuple[Path, ...]
    output_root: Path
    max_open_runs: int = 3
    _store: SessionStore | None = field(default=None, repr=False)
    _results: OrderedDict[str, Any] = field(default_factory=OrderedDict, repr=False)
    _memory: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def store(self) -> SessionStore:
        with self._lock:
            if self._store is None:
                self._store = SessionStore(self.store_path)
            return self._store

    @property
    def memory(self) -> dict[str, Any]:
        """Decoded fronts by cache key, shared with ``sessions.reselect``."""
        return self._memory

    def input_path(self, path: str | Path) -> Path:
        """A readable path inside ``input_roots`` (InputError otherwise)."""
        return resolve_within(path, self.input_roots, kind="input")

    def output_path(self, path: str | Path) -> Path:
        """A writable path inside ``output_root`` (OutputError otherwise)."""
        return resolve_within(path, (self.output_root,), kind="output")

    def remember(self, run_id: str, result: Any) -> None:
        """Keep a result the app just produced, so opening it costs nothing."""
        with self._lock:
            self._results[run_id] = result
            self._results.move_to_end(run_id)
            while len(self._results) > self.max_open_runs:
                self._results.popitem(last=False)

    def result(self, run_id: str) -> Any:
        """The RunResult of a stored run (cached; rebuilt from the decode cache on a miss)."""
        with self._lock:
            if run_id in self._results:
                self._results.move_to_end(run_id)
                return self._results[run_id]
            result = open_run(self.store, run_id, memory=self._memory)
            self.remember(run_id, result)
            return result

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
