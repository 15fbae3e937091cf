"""Store domain of codec comparisons: the comparisons table and its per-variant and per-pair tables."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from backend.errors import StoreError
from backend.store.base import StoreBase, utc_now

_COMPARISON_TABLES = (
    "comparison_variants",
    "comparison_metrics",
    "comparison_pairs",
    "comparison_pair_frames",
    "comparison_luma",
    "comparison_coverage",
)


def _decode_json_columns(row: dict[str, Any]) -> dict[str, Any]:
    """``x_json`` text columns → ``x`` Python values; NaN/NaT → None."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, float) and np.isnan(value):
            value = None
        elif value is pd.NaT:
            value = None
        if key.endswith("_json"):
            out[key[: -len("_json")]] = json.loads(value) if isinstance(value, str) else value
        else:
            out[key] = value
    return out


class ComparisonsMixin(StoreBase):
    """Codec comparisons (issue 6) and selector comparisons (issue 16, ``kind`` selectors): one
    comparisons row and its tables per comparison."""

    def insert_comparison(
        self, comparison_id: str, *, row: dict[str, Any], tables: dict[str, pd.DataFrame]
    ) -> None:
        """Insert a finished comparison (status ``done``) and its tables in one transaction.

        Parameters
        ----------
        row : the ``comparisons`` columns other than id, status, error and created_at.
        tables : table name → DataFrame whose columns are that table's columns minus comparison_id.
        """
        cols = ["comparison_id", "status", *row, "created_at"]
        with self._transaction() as tx:
            tx.execute(
                f"INSERT INTO comparisons ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [comparison_id, "done", *row.values(), utc_now()],
            )
            for name, frame in tables.items():
                if name not in _COMPARISON_TABLES:
                    choices = ", ".join(_COMPARISON_TABLES)
                    raise ValueError(f"Invalid table ({name!r}). Supported values are {choices}.")
                tx.register("incoming", frame)
                names = ", ".join(f'"{c}"' for c in frame.columns)
                tx.execute(
                    f"INSERT INTO {name} (comparison_id, {names}) SELECT ?, {names} FROM incoming",
                    [comparison_id],
                )
                tx.unregister("incoming")

    def fail_comparison(
        self, comparison_id: str, *, source_path: str, config: dict[str, Any], error: str
    ) -> None:
        """Record a comparison that failed (no metric rows)."""
        with self._transaction() as tx:
            tx.execute(
                """INSERT INTO comparisons (comparison_id, status, error, source_path, config_json,
                   created_at) VALUES (?, 'failed', ?, ?, ?, ?)""",
                [comparison_id, error, source_path, json.dumps(config), utc_now()],
            )

    def get_comparison(self, comparison_id: str) -> dict[str, Any]:
        """One ``comparisons`` row as a dict (JSON columns decoded, without the ``_json`` suffix)."""
        df = (
            self._cursor()
            .execute("SELECT * FROM comparisons WHERE comparison_id = ?", [comparison_id])
            .fetchdf()
        )
        if df.empty:
            raise StoreError(f"no comparison with id {comparison_id!r}", path=self.path, stage="store")
        return _decode_json_columns(df.iloc[0].to_dict())

    def list_comparisons(self) -> list[dict[str, Any]]:
        """Comparisons newest first, each with its variant labels (``labels``)."""
        sql = """SELECT c.*, (SELECT list(v.label ORDER BY v.variant_index) FROM comparison_variants v
                   WHERE v.comparison_id = c.comparison_id) AS labels
                 FROM comparisons c ORDER BY c.created_at DESC"""
        df = self._cursor().execute(sql).fetchdf()
        return [_decode_json_columns(r) for r in df.to_dict(orient="records")]

    def comparison_table(self, name: str, comparison_id: str) -> pd.DataFrame:
        """One comparison table's rows for a comparison (without comparison_id), in a stable order."""
        if name not in _COMPARISON_TABLES:
            choices = ", ".join(_COMPARISON_TABLES)
            raise ValueError(f"Invalid table ({name!r}). Supported values are {choices}.")
        order = {
            "comparison_variants": "variant_index",
            "comparison_metrics": "variant_index",
            "comparison_pairs": "variant_a, variant_b",
            "comparison_pair_frames": "variant_a, variant_b, frame_index",
            "comparison_luma": "variant_index, decoder, frame_index",
            "comparison_coverage": "variant_index",
        }[name]
        sql = f"SELECT * EXCLUDE (comparison_id) FROM {name} WHERE comparison_id = ? ORDER BY {order}"
        return self._cursor().execute(sql, [comparison_id]).fetchdf()

    def delete_comparison(self, comparison_id: str) -> None:
        """Remove a comparison and its rows (its runs stay; delete them with ``delete_run``)."""
        self.get_comparison(comparison_id)
        with self._transaction() as tx:
            for name in _COMPARISON_TABLES:
                tx.execute(f"DELETE FROM {name} WHERE comparison_id = ?", [comparison_id])
            tx.execute("DELETE FROM comparisons WHERE comparison_id = ?", [comparison_id])
