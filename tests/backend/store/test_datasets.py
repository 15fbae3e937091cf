"""Datasets in the store: batch.parquet written and read by DuckDB, SQL filters, the datasets tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from backend.errors import InputError, StoreError
from backend.store import (
    SCHEMA_VERSION,
    SUMMARY_NAMES,
    SessionStore,
    filter_summary,
    read_summary_parquet,
    write_summary_parquet,
)

ROWS = [
    {
        "path": "/d/a.mp4",
        "rel_path": "a.mp4",
        "status": "done",
        "tokens": 2240,
        "valid_tokens": 2000,
        "temporal_coverage": 0.25,
        "seconds": 1.5,
        "warning_codes": "upscaled",
        "run_id": None,
    },
    {
        "path": "/d/b.mp4",
        "rel_path": "b.mp4",
        "status": "skipped",
        "tokens": 560,
        "valid_tokens": 500,
        "temporal_coverage": 0.9,
        "seconds": 0.4,
        "warning_codes": "",
    },
    {
        "path": "/d/c.mp4",
        "rel_path": "c.mp4",
        "status": "failed",
        "error": "/d/c.mp4: no video stream in file",
    },
]


def test_parquet_round_trip_keeps_types_and_nulls(tmp_path: Path) -> None:
    path = write_summary_parquet(ROWS, tmp_path / "batch.parquet")
    assert not list(tmp_path.glob(".batch.parquet.partial-*"))
    back = read_summary_parquet(path)
    assert list(back.columns) == list(SUMMARY_NAMES)
    assert back["tokens"].tolist()[:2] == [2240, 560] and pd.isna(back["tokens"].iloc[2])
    assert back["error"].iloc[2] == "/d/c.mp4: no video stream in file"
    # Any Parquet reader sees the same table (DuckDB here, as a researcher's SQL would).
    con = duckdb.connect()
    assert con.execute(f"SELECT count(*) FROM read_parquet('{path}') WHERE status = 'failed'").fetchone() == (
        1,
    )


def test_reading_something_else_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "x.parquet").write_text("no")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_summary_parquet(tmp_path / "x.parquet")
    with pytest.raises(InputError, match="does not exist"):
        read_summary_parquet(tmp_path / "missing.parquet")


def test_filters_select_and_sort() -> None:
    rows = pd.DataFrame(ROWS).reindex(columns=list(SUMMARY_NAMES))
    got = filter_summary(rows, where="status <> 'failed' AND temporal_coverage < 0.5")
    assert got["rel_path"].tolist() == ["a.mp4"]
    got = filter_summary(rows, where="tokens > (SELECT avg(tokens) FROM videos)")
    assert got["rel_path"].tolist() == ["a.mp4"]
    got = filter_summary(rows, order_by="seconds", descending=True)
    assert got["rel_path"].tolist() == ["a.mp4", "b.mp4", "c.mp4"]  # NULLS LAST


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("1=1; DROP TABLE videos", "statement separator"),
        ("1=1 -- trailing", "comment"),
        ("path IN (SELECT path FROM read_csv('/etc/passwd'))", "table functions"),
        ("tokens > (SELECT count(*) FROM runs)", "only the summary table"),
        ("tokens > (SELECT count(*) FROM main.videos)", "only the summary table"),
        ("tokens >", "syntax error"),
        ("no_such_column = 1", "no_such_column"),
    ],
)
def test_filters_reading_anything_else_or_writing_are_refused(where: str, message: str) -> None:
    rows = pd.DataFrame(ROWS).reindex(columns=list(SUMMARY_NAMES))
    with pytest.raises(ValueError, match=message) as err:
        filter_summary(rows, where=where)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="Invalid sort column"):
        filter_summary(rows, order_by="path; DROP")


def test_datasets_are_upserted_by_output_folder(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.duckdb") as store:
        first = store.save_dataset(
            {"out_dir": "/o", "selector": "cvp", "options": {"x": 1}, "engine": "local"}, ROWS
        )
        again = store.save_dataset({"out_dir": "/o", "selector": "cvp", "engine": "ray"}, ROWS[:2])
        other = store.save_dataset({"out_dir": "/p", "selector": "cvp"}, ROWS[2:])
        assert first == again != other
        listed = store.list_datasets().set_index("dataset_id")
        assert listed.loc[first, ["videos", "done", "skipped", "failed", "engine"]].tolist() == [
            2,
            1,
            1,
            0,
            "ray",
        ]
        assert store.dataset_rows(first)["rel_path"].tolist() == ["a.mp4", "b.mp4"]
        with pytest.raises(StoreError, match="has no dataset"):
            store.dataset_rows("nope")
        assert store.done_runs(["nope", ""]) == set()


def test_schema_6_datasets_gain_the_audit_columns_empty(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "v6.duckdb"
    SessionStore.create_version(db, 6)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO dataset_videos (dataset_id, path, status) VALUES ('d', 'a.mp4', 'done')")
    con.close()
    with SessionStore(db) as store:
        assert store.schema_version() == SCHEMA_VERSION == 7
        row = store.query("SELECT * FROM dataset_videos").iloc[0]
    assert {"longest_never_observed_secs", "kept_score_fraction", "observed_frames"} <= set(row.index)
    assert pd.isna(row["longest_never_observed_secs"]) and row["path"] == "a.mp4"


def test_schema_4_stores_gain_the_dataset_tables(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    SessionStore.create_version(db, 4)
    with SessionStore(db) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.list_datasets().empty
