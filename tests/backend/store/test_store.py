"""The DuckDB session store, the decode cache and re-selection, on real files."""

from __future__ import annotations

import subprocess
import sys
import threading

import duckdb
import numpy as np
import pandas as pd
import pytest
from helpers.cli import run_cli
from helpers.paths import REPO_ROOT

from backend.errors import StoreError
from backend.pipeline import SelectionOptions, run
from backend.runs import reselect, select_and_store
from backend.store import SCHEMA_VERSION, SessionStore, run_columns

pytestmark = pytest.mark.needs_cvp

OPTS = SelectionOptions(num_sampled_frames=48)


@pytest.fixture(scope="module")
def stored(h264_clip, tmp_path_factory):
    db = tmp_path_factory.mktemp("store") / "s.duckdb"
    with SessionStore(db) as store:
        run_id, result = select_and_store(h264_clip, store, options=OPTS)
    return db, run_id, result


def test_every_table_round_trips(stored):
    db, run_id, result = stored
    expected = {name: pd.DataFrame(cols) for name, cols in run_columns(result).items()}
    with SessionStore(db, read_only=True) as store:
        for name, frame in expected.items():
            got = store.table(name, run_id)
            assert list(got.columns) == list(frame.columns), name
            assert len(got) == len(frame), name
        tokens = store.table("tokens", run_id).to_numpy()
        assert np.array_equal(tokens[:, :7].astype(np.int32), result.canvases.tokens[:, :7])
        assert np.array_equal(tokens[:, 7].astype(bool), result.canvases.tokens[:, 7].astype(bool))
        frames = store.table("frames", run_id)
        assert len(frames) == result.info.total_frames
        assert frames["candidate"].sum() == len(set(result.candidates.frame_indices.tolist()))
        assert frames["is_anchor"].sum() == len(result.selection.groups)
        assert int(frames["kept_blocks"].sum()) == sum(s.kept.shape[0] for s in result.selection.groups)
        steps = store.table("readiness_steps", run_id)
        assert len(steps) == len(result.groups.trace)
        assert steps["topk_sum"].tolist() == [s.topk_sum for s in result.groups.trace]
        groups = store.table("groups", run_id)
        assert groups["end"].tolist() == [s.end for s in result.groups.specs]
        for row in (0, len(result.scores.grids) - 1):
            assert np.array_equal(store.score_grid(run_id, row), result.scores.grids[row])
        run_row = store.get_run(run_id)
        assert run_row.status == "done" and run_row.config["num_sampled_frames"] == 48
        assert {"codec_lens", "pyav", "pyav_libavcodec", "codec_video_prep"} <= set(run_row.versions)
        assert run_row.threshold == pytest.approx(result.groups.threshold)
        assert [w["code"] for w in run_row.warnings] == [w.code for w in result.warnings]


def test_reopens_in_a_new_process(stored):
    db, run_id, _ = stored
    code = (
        "import sys; from backend.store import SessionStore; "
        f"s = SessionStore({str(db)!r}, read_only=True); print(s.get_run({run_id!r}).status)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "done"


def test_score_grid_returns_every_candidates_grid_and_refuses_a_missing_row(stored):
    db, run_id, result = stored
    grids = result.scores.grids
    with SessionStore(db, read_only=True) as store:
        for row, expected in enumerate(grids):
            got = store.score_grid(run_id, row)
            assert got.dtype == np.float32 and got.shape == expected.shape, row
            assert np.array_equal(got, expected), row
        with pytest.raises(StoreError, match=f"has no score grid for candidate {len(grids)}"):
            store.score_grid(run_id, len(grids))


def test_concurrent_reads_while_a_thread_writes(h264_clip, tmp_path):
    with SessionStore(tmp_path / "c.duckdb") as store:
        first, _ = select_and_store(h264_clip, store, options=OPTS)
        errors: list[BaseException] = []
        counts: list[int] = []
        stop = threading.Event()

        def reader() -> None:
            try:
                while not stop.is_set():
                    counts.append(len(store.table("tokens", first)))
                    store.list_runs(status="done")
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        second, _, _ = reselect(store, first, {"images_per_group": 3})
        stop.set()
        for t in threads:
            t.join()
        assert not errors, errors
        assert counts and all(c == counts[0] for c in counts)
        assert {r.run_id for r in store.list_runs(status="done")} == {first, second}


def test_failed_run_leaves_no_finished_rows(real_clips, tmp_path):
    # A real mid-pipeline failure: cvp's parity path cannot score HEVC in MPEG-TS (it
    # probes fine, samples and geometry run, then the decode stage finds no usable map).
    from backend.errors import BitcostUnavailableError

    video = real_clips / "real_hevc_bbb_1080p.ts"
    with SessionStore(tmp_path / "f.duckdb") as store:
        with pytest.raises(BitcostUnavailableError):
            select_and_store(video, store, options=SelectionOptions(profile="parity"))
        (row,) = store.list_runs()
        assert row.status == "failed" and "missing bitcost data" in row.error
        assert store.list_runs(status="done") == []
        for name in ("frames", "tokens", "groups", "readiness_steps", "score_grids"):
            assert len(store.table(name, row.run_id, done_only=False)) == 0
        assert store.cache_lookup(row.cache_key or "none") is None


_BEGIN_AND_DIE = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from backend.store import SessionStore
store = SessionStore({db!r})
session = store.query("SELECT session_id FROM sessions").iloc[0, 0]
print(store.begin_run(session, profile="clean", config={{}}, versions={{}}), flush=True)
store.close()
os.kill(os.getpid(), signal.SIGKILL)  # as a crash in a decoder or `kill -9` would end it
"""


def test_a_run_whose_process_died_is_marked_failed_on_the_next_open(stored, tmp_path):
    import shutil

    db = tmp_path / "s.duckdb"
    shutil.copyfile(stored[0], db)
    code = _BEGIN_AND_DIE.format(repo=str(REPO_ROOT), db=str(db))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    dead_run = proc.stdout.strip()
    with SessionStore(db, read_only=True) as store:
        assert store.get_run(dead_run).status == "running"  # a reader changes nothing
    with SessionStore(db) as store:
        row = store.get_run(dead_run)
        assert row.status == "failed" and "ended before the run finished" in row.error, row
        # A running run of a live process (this one) is left alone.
        mine = store.begin_run(row.session_id, profile="clean", config={}, versions={})
    with SessionStore(db) as store:
        assert store.get_run(mine).status == "running"
        assert store.get_run(stored[1]).status == "done"


def test_migrates_from_schema_1(h264_clip, tmp_path):
    db = tmp_path / "old.duckdb"
    SessionStore.create_version(db, 1)
    con = duckdb.connect(str(db))
    assert "bad_reason" not in [r[0] for r in con.execute("DESCRIBE frames").fetchall()]
    con.close()
    with SessionStore(db) as store:
        assert store.schema_version() == SCHEMA_VERSION
        run_id, _ = select_and_store(h264_clip, store, options=OPTS)
        assert "bad_reason" in store.table("frames", run_id).columns


def test_newer_schema_is_refused(tmp_path):
    db = tmp_path / "new.duckdb"
    SessionStore.create_version(db, SCHEMA_VERSION)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version VALUES (?)", [SCHEMA_VERSION + 1])
    con.close()
    with pytest.raises(StoreError, match="newer Codec Lens"):
        SessionStore(db)


@pytest.mark.parametrize("content", [b"not a database at all\n" * 10, b"SQLite format 3\x00" + b"\x00" * 100])
def test_foreign_files_are_never_touched(tmp_path, content):
    db = tmp_path / "foreign.duckdb"
    db.write_bytes(content)
    with pytest.raises(StoreError, match="not a DuckDB database"):
        SessionStore(db)
    assert db.read_bytes() == content
    res = run_cli("sessions", "list", "--session-db", db)
    assert res.returncode == 2 and "not a DuckDB database" in res.stderr and "Traceback" not in res.stderr
    assert db.read_bytes() == content


def test_other_duckdb_files_are_refused(tmp_path):
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE mine (x INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="not a Codec Lens session store"):
        SessionStore(db)


def test_reselect_decodes_nothing_and_matches_a_full_run(stored, h264_clip):
    db, run_id, _ = stored
    changes = {
        "readiness_sum_threshold_mode": "fixed",
        "readiness_sum_threshold": 150000.0,
        "images_per_group": 3,
    }
    with SessionStore(db) as store:
        new_id, result, how = reselect(store, run_id, changes)
        assert how == "cache+scores"
        assert "decode" not in result.timings_secs and "probe" not in result.timings_secs
        assert "score" not in result.timings_secs
        assert store.get_run(new_id).parent_run_id == run_id
        _, result2, how2 = reselect(store, run_id, {"iframe_score_clip_mode": "non_i_percentile"})
        assert how2 == "cache" and "score" in result2.timings_secs and "decode" not in result2.timings_secs
    fresh = run(h264_clip, options=OPTS.replace(**changes))
    assert np.array_equal(fresh.canvases.tokens, result.canvases.tokens)
    assert np.array_equal(fresh.canvases.images, result.canvases.images)
    assert [(s.start, s.end) for s in fresh.groups.specs] == [(s.start, s.end) for s in result.groups.specs]


def test_reselect_with_new_sampling_decodes_again(stored):
    db, run_id, _ = stored
    with SessionStore(db) as store:
        _, result, how = reselect(store, run_id, {"num_sampled_frames": 40})
    assert how == "full" and "decode" in result.timings_secs


@pytest.mark.slow  # a whole-clip CLI select, then reselect
def test_cli_select_store_list_reselect_delete(h264_clip, tmp_path):
    import json

    db = tmp_path / "cli.duckdb"
    res = run_cli("select", h264_clip, "--session-db", db, "--num_sampled_frames", "32", "--json")
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run_id"]
    listed = run_cli("sessions", "list", "--session-db", db)
    assert run_id in listed.stdout and "done" in listed.stdout
    again = run_cli("reselect", run_id, "--images_per_group", "2", "--session-db", db, "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["reused"] == "cache+scores" and summary["canvases"] == summary["groups"] * 2
    shown = run_cli("sessions", "show", summary["run_id"], "--session-db", db, "--json")
    assert json.loads(shown.stdout)["parent_run_id"] == run_id
    assert run_cli("sessions", "delete", run_id, "--session-db", db).returncode == 0
    missing = run_cli("sessions", "show", run_id, "--session-db", db)
    assert missing.returncode == 2 and "no run with id" in missing.stderr


def test_open_run_rebuilds_the_stored_run_from_the_cache(h264_clip, tmp_path):
    from backend.runs import open_run

    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, result = select_and_store(h264_clip, store, options=SelectionOptions())
        reopened = open_run(store, run_id)
        assert np.array_equal(reopened.canvases.tokens, result.canvases.tokens)
        assert all(
            np.array_equal(a, b)
            for a, b in zip(reopened.canvases.images, result.canvases.images, strict=True)
        )
        assert [s.start for s in reopened.groups.specs] == [s.start for s in result.groups.specs]
        stored = store.table("tokens", run_id)
        assert len(stored) == len(result.canvases.tokens)
