"""Re-selection back to options already run reopens that run; every run is labelled by its change."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from backend.pipeline import SelectionOptions
from backend.runs import reselect, select_and_store
from backend.runs.labels import change_label, change_labels, option_changes
from backend.store import SessionStore

pytestmark = pytest.mark.needs_cvp


def test_going_back_to_options_already_run_adds_no_run(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        first, result = select_and_store(h264_clip, store, options=SelectionOptions(num_sampled_frames=32))
        eight, _, how8 = reselect(store, first, {"images_per_group": 8})
        assert how8 in ("cache", "cache+scores")
        # 8 → 4 is the first run's options: reopened, not stored again.
        back, reopened, how_back = reselect(store, eight, {"images_per_group": 4})
        assert (back, how_back) == (first, "reused")
        assert np.array_equal(reopened.canvases.tokens, result.canvases.tokens)
        # 4 → 8 again is the second run.
        again, _, how_again = reselect(store, back, {"images_per_group": 8})
        assert (again, how_again) == (eight, "reused")
        # A new value is a new run.
        three, _, how3 = reselect(store, eight, {"images_per_group": 3})
        assert how3 != "reused" and three not in (first, eight)
        assert len(store.list_runs()) == 3
        labels = change_labels(store.list_runs())
    assert labels == {first: "", eight: "images_per_group 4→8", three: "images_per_group 8→3"}


def test_another_version_of_the_code_is_not_reused(h264_clip, tmp_path):
    db = tmp_path / "s.duckdb"
    with SessionStore(db) as store:
        first, _ = select_and_store(h264_clip, store, options=SelectionOptions(num_sampled_frames=32))
        eight, _, _ = reselect(store, first, {"images_per_group": 8})
    # A run stored by another release is not taken for this one's.
    with duckdb.connect(str(db)) as con:
        con.execute('UPDATE runs SET versions_json = \'{"codec_lens": "0.0.0"}\' WHERE run_id = ?', [first])
    with SessionStore(db) as store:
        back, _, how = reselect(store, eight, {"images_per_group": 4})
    assert how != "reused" and back != first


def test_labels_name_each_changed_option():
    assert option_changes({"a": 1, "b": 0.5, "c": "x"}, {"a": 1, "b": 0.25, "c": "y"}) == [
        "b 0.5→0.25",
        "c x→y",
    ]
    assert option_changes({"a": 1, "gone": True}, {"a": 1}) == ["gone True→–"]
    assert option_changes({"a": 1}, {"a": 1}) == []


def test_a_run_of_another_selector_is_labelled_by_it(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        first, _ = select_and_store(h264_clip, store, options=SelectionOptions(num_sampled_frames=32))
        other, _, _ = reselect(store, first, {}, selector="uniform")
        rows = {r.run_id: r for r in store.list_runs()}
    assert change_label(rows[other], rows[first]) == "uniform (from cvp)"
    assert change_label(rows[first], None) == ""


@pytest.mark.slow  # three CLI processes
def test_the_cli_reopens_a_run_and_lists_what_each_changed(h264_clip, tmp_path):
    import json

    from helpers.cli import run_cli

    db = tmp_path / "cli.duckdb"
    first = json.loads(
        run_cli("select", h264_clip, "--session-db", db, "--num_sampled_frames", "32", "--json").stdout
    )
    two = run_cli("reselect", first["run_id"], "--images_per_group", "2", "--session-db", db, "--json")
    two_id = json.loads(two.stdout)["run_id"]
    back = run_cli("reselect", two_id, "--images_per_group", "4", "--session-db", db, "--json")
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["run_id"] == first["run_id"] and "reopened it" in back.stderr
    listed = run_cli("sessions", "list", "--session-db", db).stdout
    assert f"from {first['run_id']}: images_per_group 4→2" in listed
    assert len(listed.strip().splitlines()) == 2
