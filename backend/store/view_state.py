"""Store domain of the viewer state: the view_states row saved for each run."""

from __future__ import annotations

import json
from typing import Any

from backend.store.base import StoreBase, utc_now


class ViewStateMixin(StoreBase):
    """Where the viewer was left on each run, so reopening it restores that view."""

    def save_view(self, run_id: str, view: dict[str, Any]) -> None:
        """Remember the viewer state of a run (row, layers, …) for the next time it opens."""
        with self._transaction() as cur:
            cur.execute("DELETE FROM view_states WHERE run_id = ?", [run_id])
            cur.execute(
                "INSERT INTO view_states VALUES (?, ?, ?)", [run_id, json.dumps(view, default=str), utc_now()]
            )

    def load_view(self, run_id: str) -> dict[str, Any] | None:
        """The viewer state saved for ``run_id``, or None."""
        row = (
            self._cursor().execute("SELECT view_json FROM view_states WHERE run_id = ?", [run_id]).fetchone()
        )
        return None if row is None else json.loads(row[0])
