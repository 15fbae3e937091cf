"""The batch summary (``batch.parquet``): its columns, and writing it from Python rows with DuckDB alone.

Kept apart from the rest of the store, which loads pandas: a batch re-run that skips every
video writes its summary without importing pandas (docs/batch.md, "Resuming").
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from backend.errors import OutputError

AUDIT_SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("observed_frames", "INTEGER"),
    ("never_observed_spans", "INTEGER"),
    ("longest_never_observed_secs", "DOUBLE"),
    ("never_observed_fraction", "DOUBLE"),
    ("mean_staleness_frames", "DOUBLE"),
    ("video_max_staleness_frames", "INTEGER"),
    ("kept_score_fraction", "DOUBLE"),
)
"""The coverage audit's figures of each video (backend.audit, docs/audit.md); schema version 7
added them to ``dataset_videos``."""
FALLBACK_SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("selector_requested", "VARCHAR"),
    ("selector_used", "VARCHAR"),
    ("fallback_reason", "VARCHAR"),
)
"""The declared fallback of each video (backend.selectors.fallback): the selector asked for, the
one that ran (with the options the fallback changed) and why; schema version 7."""
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("path", "VARCHAR"),
    ("rel_path", "VARCHAR"),
    ("content_sha256", "VARCHAR"),
    ("status", "VARCHAR"),
    ("error", "VARCHAR"),
    ("selector", "VARCHAR"),
    *FALLBACK_SUMMARY_COLUMNS,
    ("codec_name", "VARCHAR"),
    ("width", "INTEGER"),
    ("height", "INTEGER"),
    ("duration_secs", "DOUBLE"),
    ("total_frames", "INTEGER"),
    ("frames", "INTEGER"),
    ("groups", "INTEGER"),
    ("canvases", "INTEGER"),
    ("tokens", "INTEGER"),
    ("valid_tokens", "INTEGER"),
    ("temporal_coverage", "DOUBLE"),
    *AUDIT_SUMMARY_COLUMNS,
    ("warnings", "INTEGER"),
    ("warning_codes", "VARCHAR"),
    ("seconds", "DOUBLE"),
    ("output_dir", "VARCHAR"),
    ("options_key", "VARCHAR"),
    ("run_id", "VARCHAR"),
)
"""One row per video of a batch (``batch.parquet`` and ``dataset_videos``), name → DuckDB type."""
SUMMARY_NAMES = tuple(name for name, _ in SUMMARY_COLUMNS)
SUMMARY_TABLE = "videos"
"""The one table a dataset filter (``backend.store.datasets.filter_summary``) may read."""


def quoted(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _json_value(value: Any) -> Any:
    """A JSON-ready cell: numpy scalars as Python numbers, NaN as null (as a DataFrame's NaN is)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_summary_parquet(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write the summary rows as a Parquet file, atomically (a hidden sibling renamed into place).

    DuckDB writes the file itself, so no Parquet library is needed; the rows reach it as
    newline-delimited JSON read with the columns' own types (no pandas, and as fast as a
    DataFrame for 10⁴ rows; the file is byte-identical to one written from a DataFrame).

    Raises
    ------
    OutputError : the file cannot be written.
    """
    import duckdb

    path = Path(path)
    try:
        handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.partial-", dir=path.parent)
        os.close(handle)
        rows_handle, rows_name = tempfile.mkstemp(
            prefix=f".{path.name}.rows-", suffix=".jsonl", dir=path.parent
        )
    except OSError as exc:
        raise OutputError(f"cannot write the summary ({exc.strerror or exc})", path=path) from exc
    tmp, rows_file = Path(tmp_name), Path(rows_name)
    con = None
    try:
        with os.fdopen(rows_handle, "w", encoding="utf-8") as out:
            for row in rows:
                cells = {name: _json_value(row.get(name)) for name in SUMMARY_NAMES}
                out.write(json.dumps(cells, default=str) + "\n")
        con = duckdb.connect(":memory:")
        columns = ", ".join(f"{quoted(n)} {t}" for n, t in SUMMARY_COLUMNS)
        con.execute(f"CREATE TABLE {SUMMARY_TABLE} ({columns})")
        types = ", ".join(f"'{n}': '{t}'" for n, t in SUMMARY_COLUMNS)
        con.execute(
            f"INSERT INTO {SUMMARY_TABLE} SELECT * FROM read_json({_literal(rows_file)}, "
            f"format = 'newline_delimited', columns = {{{types}}})"
        )
        con.execute(f"COPY {SUMMARY_TABLE} TO {_literal(tmp)} (FORMAT parquet, OVERWRITE_OR_IGNORE true)")
        os.replace(tmp, path)
    except (duckdb.Error, OSError) as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write the summary ({exc})", path=path) from exc
    finally:
        rows_file.unlink(missing_ok=True)
        if con is not None:
            con.close()
    return path
