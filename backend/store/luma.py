"""Store domain of luma-bias analyses and fits: the luma_analyses, luma_* and luma_fits tables."""

from __future__ import annotations

import json
import uuid
from typing import Any

import numpy as np
import pandas as pd

from backend.errors import StoreError
from backend.store.base import StoreBase, utc_now

_LUMA_TABLES = ("luma_frames", "luma_slots", "luma_gains")


def _check_luma_table(name: str) -> None:
    if name not in _LUMA_TABLES:
        raise ValueError(f"Invalid table ({name!r}). Supported values are {', '.join(_LUMA_TABLES)}.")


def _quoted(columns: Any) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _luma_row(row: dict[str, Any]) -> dict[str, Any]:
    """A fetched luma row: ``x_json`` text → ``x``; NaN/NaT → None; timestamps as datetime."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, float) and np.isnan(value):
            value = None
        elif value is pd.NaT or value is None:
            value = None
        elif isinstance(value, pd.Timestamp):
            value = value.to_pydatetime()
        if key.endswith("_json"):
            out[key[: -len("_json")]] = json.loads(value) if isinstance(value, str) else value
        else:
            out[key] = value
    return out


class LumaMixin(StoreBase):
    """Luma-bias analyses and fitted corrections (issue 5)."""

    def insert_luma_analysis(self, row: dict[str, Any], tables: dict[str, pd.DataFrame]) -> str:
        """Insert a luma-bias analysis and its rows in one transaction; return its id.

        Parameters
        ----------
        row : ``luma_analyses`` columns other than analysis_id and created_at; values of
            ``*_json`` columns are Python objects (dumped here).
        tables : ``luma_frames`` / ``luma_slots`` / ``luma_gains`` → DataFrame whose columns are
            that table's columns minus analysis_id.
        """
        analysis_id = uuid.uuid4().hex[:12]
        values = {k: json.dumps(v) if k.endswith("_json") else v for k, v in row.items()}
        cols = ["analysis_id", *values, "created_at"]
        with self._transaction() as tx:
            tx.execute(
                f"INSERT INTO luma_analyses ({_quoted(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [analysis_id, *values.values(), utc_now()],
            )
            for name, frame in tables.items():
                _check_luma_table(name)
                tx.register("incoming_luma", frame)
                names = _quoted(frame.columns)
                tx.execute(
                    f"INSERT INTO {name} (analysis_id, {names}) SELECT ?, {names} FROM incoming_luma",
                    [analysis_id],
                )
                tx.unregister("incoming_luma")
        return analysis_id

    def luma_analysis(self, analysis_id: str) -> dict[str, Any]:
        """One ``luma_analyses`` row as a dict; ``x_json`` columns come back decoded as ``x``."""
        df = (
            self._cursor()
            .execute("SELECT * FROM luma_analyses WHERE analysis_id = ?", [analysis_id])
            .fetchdf()
        )
        if df.empty:
            raise StoreError(f"no luma-bias analysis with id {analysis_id!r}", path=self.path, stage="store")
        return _luma_row(df.iloc[0].to_dict())

    def list_luma_analyses(self) -> list[dict[str, Any]]:
        """Every luma-bias analysis, newest first (rows as :meth:`luma_analysis` returns them)."""
        df = self._cursor().execute("SELECT * FROM luma_analyses ORDER BY created_at DESC").fetchdf()
        return [_luma_row(r) for r in df.to_dict(orient="records")]

    def luma_table(self, name: str, analysis_id: str) -> pd.DataFrame:
        """One analysis's rows of a luma table (without analysis_id), ordered by reference and key."""
        _check_luma_table(name)
        order = {
            "luma_frames": "reference_label, frame_index",
            "luma_slots": "reference_label, slot, position",
            "luma_gains": "reference_label, slot",
        }[name]
        sql = f"SELECT * EXCLUDE (analysis_id) FROM {name} WHERE analysis_id = ? ORDER BY {order}"
        return self._cursor().execute(sql, [analysis_id]).fetchdf()

    def delete_luma_analysis(self, analysis_id: str) -> None:
        """Remove an analysis and its rows (fits that used it keep their coefficients)."""
        self.luma_analysis(analysis_id)
        with self._transaction() as tx:
            for name in _LUMA_TABLES:
                tx.execute(f"DELETE FROM {name} WHERE analysis_id = ?", [analysis_id])
            tx.execute("DELETE FROM luma_analyses WHERE analysis_id = ?", [analysis_id])

    def insert_luma_fit(self, row: dict[str, Any]) -> str:
        """Insert a fitted correction (``luma_fits`` columns but fit_id and created_at); return its id."""
        fit_id = uuid.uuid4().hex[:12]
        values = {k: json.dumps(v) if k.endswith("_json") else v for k, v in row.items()}
        cols = ["fit_id", *values, "created_at"]
        with self._transaction() as tx:
            tx.execute(
                f"INSERT INTO luma_fits ({_quoted(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [fit_id, *values.values(), utc_now()],
            )
        return fit_id

    def luma_fit(self, fit_id: str) -> dict[str, Any]:
        """One ``luma_fits`` row as a dict (``x_json`` decoded as ``x``)."""
        df = self._cursor().execute("SELECT * FROM luma_fits WHERE fit_id = ?", [fit_id]).fetchdf()
        if df.empty:
            raise StoreError(f"no luma-bias fit with id {fit_id!r}", path=self.path, stage="store")
        return _luma_row(df.iloc[0].to_dict())

    def list_luma_fits(self) -> list[dict[str, Any]]:
        """Every stored fit, newest first."""
        df = self._cursor().execute("SELECT * FROM luma_fits ORDER BY created_at DESC").fetchdf()
        return [_luma_row(r) for r in df.to_dict(orient="records")]
