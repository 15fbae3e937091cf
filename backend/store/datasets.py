"""Store domain of datasets: batch summaries in the session file, in batch.parquet, and filtered by SQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from backend.errors import InputError, StoreError
from backend.store.base import StoreBase, utc_now
from backend.store.summary import SUMMARY_COLUMNS, SUMMARY_NAMES, SUMMARY_TABLE
from backend.store.summary import quoted as _quoted

_DATASET_COLUMNS = (
    "dataset_id",
    "out_dir",
    "input_path",
    "selector",
    "preset",
    "options_json",
    "engine",
    "videos",
    "done",
    "failed",
    "skipped",
    "created_at",
    "updated_at",
)


def _summary_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The rows as a DataFrame with exactly the summary columns (missing values as None)."""
    return pd.DataFrame([[row.get(name) for name in SUMMARY_NAMES] for row in rows], columns=SUMMARY_NAMES)


def _memory_table(rows: Iterable[Mapping[str, Any]] | pd.DataFrame) -> duckdb.DuckDBPyConnection:
    """A private in-memory database holding the rows as the typed table ``videos``."""
    frame = rows if isinstance(rows, pd.DataFrame) else _summary_frame(rows)
    frame = frame.reindex(columns=list(SUMMARY_NAMES))
    con = duckdb.connect(":memory:")
    columns = ", ".join(f"{_quoted(n)} {t}" for n, t in SUMMARY_COLUMNS)
    con.execute(f"CREATE TABLE {SUMMARY_TABLE} ({columns})")
    incoming_summary_rows = frame.astype(object).where(frame.notna(), None)  # noqa: F841 (read by name)
    names = ", ".join(_quoted(n) for n in SUMMARY_NAMES)
    con.execute(f"INSERT INTO {SUMMARY_TABLE} SELECT {names} FROM incoming_summary_rows")
    return con


def read_summary_parquet(path: str | Path) -> pd.DataFrame:
    """A batch.parquet as a DataFrame with the summary columns (older files: missing ones empty).

    Raises
    ------
    InputError : missing, not Parquet, or without the ``path`` and ``status`` columns.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("does not exist or is not a file", path=path, stage="dataset")
    con = duckdb.connect(":memory:")
    try:
        literal = "'" + str(path).replace("'", "''") + "'"
        frame = con.execute(f"SELECT * FROM read_parquet({literal})").fetchdf()
    except duckdb.Error as exc:
        raise InputError(f"is not a readable Parquet file ({exc})".split("\n")[0], path=path) from exc
    finally:
        con.close()
    missing = {"path", "status"} - set(frame.columns)
    if missing:
        raise InputError(
            f"is not a batch summary (no {', '.join(sorted(missing))} column)", path=path, stage="dataset"
        )
    return frame.reindex(columns=list(SUMMARY_NAMES))


def _walk(node: Any) -> Iterable[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def check_where(where: str) -> str:
    """``where`` if it is a filter over the summary table alone, else ValueError (one line).

    It must be one boolean expression: no statement separator, no comment, and, as DuckDB
    parses ``SELECT * FROM videos WHERE (<where>)``, one plain SELECT whose only table is
    ``videos`` (subqueries over it are fine; table functions, other tables and set
    operations are not).
    """
    text = where.strip()
    if not text:
        return ""
    for token, what in ((";", "a statement separator (;)"), ("--", "a comment (--)"), ("/*", "a comment")):
        if token in text:
            raise ValueError(
                f"Invalid filter ({text!r}): it holds {what}. Give one condition over the columns."
            )
    con = duckdb.connect(":memory:")
    try:
        parsed = json.loads(
            con.execute(
                "SELECT json_serialize_sql(?)", [f"SELECT * FROM {SUMMARY_TABLE} WHERE ({text})"]
            ).fetchone()[0]
        )
    finally:
        con.close()
    if parsed.get("error"):
        message = str(parsed.get("error_message", "cannot parse")).split("\n")[0]
        raise ValueError(f"Invalid filter ({text!r}): {message}")
    statements = parsed.get("statements", [])
    if len(statements) != 1 or statements[0]["node"].get("type") != "SELECT_NODE":
        raise ValueError(f"Invalid filter ({text!r}): it must be one condition, not a query of its own.")
    for node in _walk(statements[0]):
        kind = node.get("type")
        if kind == "TABLE_FUNCTION":
            raise ValueError(f"Invalid filter ({text!r}): table functions are not allowed.")
        if kind == "BASE_TABLE" and (
            node.get("table_name", "").lower() != SUMMARY_TABLE
            or node.get("schema_name")
            or node.get("catalog_name")
        ):
            raise ValueError(
                f"Invalid filter ({text!r}): it may read only the summary table '{SUMMARY_TABLE}', "
                f"not {node.get('table_name')!r}."
            )
        if kind == "SET_OPERATION_NODE":
            raise ValueError(f"Invalid filter ({text!r}): set operations are not allowed.")
    return text


def filter_summary(
    rows: pd.DataFrame,
    *,
    where: str = "",
    order_by: str | None = None,
    descending: bool = False,
) -> pd.DataFrame:
    """The summary rows matching ``where`` (see :func:`check_where`), sorted by ``order_by``.

    The filter runs in a private in-memory database that holds only these rows, with file
    access switched off, so it can read nothing else and change nothing.

    Raises
    ------
    ValueError : an invalid filter or sort column (one line).
    """
    condition = check_where(where)
    if order_by and order_by not in SUMMARY_NAMES:
        raise ValueError(
            f"Invalid sort column ({order_by!r}). Supported values are {', '.join(SUMMARY_NAMES)}."
        )
    con = _memory_table(rows)
    try:
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        sql = f"SELECT * FROM {SUMMARY_TABLE}"
        if condition:
            sql += f" WHERE ({condition})"
        if order_by:
            sql += f" ORDER BY {_quoted(order_by)} {'DESC' if descending else 'ASC'} NULLS LAST"
        try:
            return con.execute(sql).fetchdf()
        except duckdb.Error as exc:
            message = str(exc).split("\n")[0]
            raise ValueError(f"Invalid filter ({condition!r}): {message}") from exc
    finally:
        con.close()


class DatasetsMixin(StoreBase):
    """Batch outputs stored as datasets: one ``datasets`` row each and its ``dataset_videos`` rows."""

    def save_dataset(self, dataset: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
        """Store a batch (keyed by its output folder) and replace its video rows; returns its id.

        Parameters
        ----------
        dataset : out_dir, input_path, selector, preset, options (dict) and engine.
        rows : the summary rows (:data:`SUMMARY_COLUMNS`).
        """
        out_dir = str(dataset["out_dir"])
        counts = {s: sum(1 for r in rows if r.get("status") == s) for s in ("done", "failed", "skipped")}
        now = utc_now()
        with self._transaction() as tx:
            found = tx.execute("SELECT dataset_id FROM datasets WHERE out_dir = ?", [out_dir]).fetchone()
            dataset_id = str(found[0]) if found else uuid.uuid4().hex[:12]
            values = [
                dataset.get("input_path"),
                dataset.get("selector"),
                dataset.get("preset"),
                json.dumps(dataset.get("options", {}), default=str),
                dataset.get("engine"),
                len(rows),
                counts["done"],
                counts["failed"],
                counts["skipped"],
            ]
            if found:
                tx.execute(
                    """UPDATE datasets SET input_path = ?, selector = ?, preset = ?, options_json = ?,
                       engine = ?, videos = ?, done = ?, failed = ?, skipped = ?, updated_at = ?
                       WHERE dataset_id = ?""",
                    [*values, now, dataset_id],
                )
                tx.execute("DELETE FROM dataset_videos WHERE dataset_id = ?", [dataset_id])
            else:
                tx.execute(
                    f"INSERT INTO datasets ({', '.join(_DATASET_COLUMNS)}) VALUES "
                    f"({', '.join('?' * len(_DATASET_COLUMNS))})",
                    [dataset_id, out_dir, *values, now, now],
                )
            incoming_dataset_rows = _summary_frame(rows)  # noqa: F841 (read by name)
            names = ", ".join(_quoted(n) for n in SUMMARY_NAMES)
            tx.execute(
                f"INSERT INTO dataset_videos (dataset_id, {names}) "
                f"SELECT ?, {names} FROM incoming_dataset_rows",
                [dataset_id],
            )
        return dataset_id

    def list_datasets(self) -> pd.DataFrame:
        """Every stored dataset, newest first (columns of the ``datasets`` table)."""
        return (
            self._cursor()
            .execute(f"SELECT {', '.join(_DATASET_COLUMNS)} FROM datasets ORDER BY updated_at DESC")
            .fetchdf()
        )

    def dataset_rows(self, dataset_id: str) -> pd.DataFrame:
        """The summary rows of dataset ``dataset_id`` (StoreError if there is no such dataset)."""
        cur = self._cursor()
        if cur.execute("SELECT 1 FROM datasets WHERE dataset_id = ?", [dataset_id]).fetchone() is None:
            raise StoreError(f"has no dataset {dataset_id}", path=self.path, stage="dataset")
        names = ", ".join(_quoted(n) for n in SUMMARY_NAMES)
        return cur.execute(
            f"SELECT {names} FROM dataset_videos WHERE dataset_id = ? ORDER BY rel_path", [dataset_id]
        ).fetchdf()

    def done_runs(self, run_ids: Iterable[str]) -> set[str]:
        """Which of ``run_ids`` are finished runs of this store."""
        wanted = sorted({r for r in run_ids if r})
        if not wanted:
            return set()
        rows = (
            self._cursor()
            .execute(
                "SELECT run_id FROM runs WHERE status = 'done' AND run_id IN (SELECT unnest(?))", [wanted]
            )
            .fetchall()
        )
        return {str(r[0]) for r in rows}
