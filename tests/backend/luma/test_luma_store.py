"""Luma-bias analyses and fits in a real DuckDB session store: round trip, reopening, fit, apply, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run_cli
from helpers.luma_clip_pairs import STEADY_OFFSETS, expected_bias, make_pair

from backend.errors import InputError, StoreError
from backend.luma import (
    GopGeometry,
    LatentWindowGeometry,
    MeasureConfig,
    analyze_videos,
    apply_stored,
    fit_stored,
    load_model,
    open_analysis,
    open_fit,
    store_analysis,
)
from backend.runs import content_sha256
from backend.store import SessionStore

# Whole analyses through the CLI and the store: the end-to-end tier, not the unit tier (--fast).
pytestmark = pytest.mark.slow

H3 = LatentWindowGeometry()
LUMA = np.asarray([0.299, 0.587, 0.114])
GAIN = 0.004


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Two clips (different content) from the same synthetic decoder: known per-slot offsets and gains."""
    folder = tmp_path_factory.mktemp("luma_store_pairs")
    return {
        "a": make_pair(folder, "a", pattern="moving", gain=GAIN, seed=1),
        "b": make_pair(folder, "b", pattern="square", gain=GAIN, seed=2),
    }


@pytest.fixture(scope="module")
def analysis_a(pairs):
    reference, test = pairs["a"]
    return analyze_videos(
        test, reference, official=pairs["b"][0], geometry=H3, config=MeasureConfig(truncate=True)
    )


def _assert_same_analysis(got, expected) -> None:
    assert got.test_name == expected.test_name
    assert got.geometry == expected.geometry
    assert got.keyframes == expected.keyframes
    assert len(got.reports) == len(expected.reports)
    for g, e in zip(got.reports, expected.reports, strict=True):
        for name in (
            "frame_index",
            "reference_index",
            "test_mean_rgb",
            "reference_mean_rgb",
            "y_mse",
            "test_cells",
            "diff_cells",
        ):
            a, b = getattr(g.frames, name), getattr(e.frames, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert (g.frames.reference_name, g.frames.reference_label) == (
            e.frames.reference_name,
            e.frames.reference_label,
        )
        assert g.frames.truncated == e.frames.truncated
        assert g.summary() == e.summary()
        assert np.array_equal(g.layout.slot, e.layout.slot)
    assert got.to_json() == expected.to_json()


def test_an_analysis_round_trips_through_a_duckdb_file(tmp_path, pairs, analysis_a) -> None:
    db = tmp_path / "luma.duckdb"
    with SessionStore(db) as store:
        analysis_id = store_analysis(store, analysis_a, config=MeasureConfig(truncate=True))
    # A fresh, read-only connection: nothing comes from memory.
    with SessionStore(db, read_only=True) as store:
        stored = open_analysis(store, analysis_id)
        row = store.luma_analysis(analysis_id)
        slots = store.luma_table("luma_slots", analysis_id)
        gains = store.luma_table("luma_gains", analysis_id)
        frames = store.luma_table("luma_frames", analysis_id)
    _assert_same_analysis(stored.analysis, analysis_a)
    reference, test = pairs["a"]
    assert (stored.test_path, stored.reference_path, stored.official_path) == (
        str(test),
        str(reference),
        str(pairs["b"][0]),
    )
    assert stored.config == MeasureConfig(truncate=True) and stored.source == "analyze"
    assert row["test_sha256"] == content_sha256(test)
    assert row["reference_sha256"] == content_sha256(reference)
    assert row["official_sha256"] == content_sha256(pairs["b"][0])
    assert row["geometry"] == H3.to_dict() and row["frames"] == 72 and row["cell"] == 64
    assert row["p95_all"] == pytest.approx(analysis_a.report.p95_all, abs=1e-6)
    assert "codec_lens" in row["versions"] and row["created_at"] is not None
    assert [s["label"] for s in row["summaries"]] == ["reference", "official"]
    # Per-frame rows: both references, every frame, the bias of the record.
    assert len(frames) == 2 * 72
    mine = frames[frames["reference_label"] == "reference"]
    assert np.array_equal(mine["frame_index"].to_numpy(), np.arange(72))
    assert np.allclose(mine["bias"].to_numpy(), analysis_a.report.bias, rtol=0, atol=1e-12)
    assert mine["slot"].tolist() == analysis_a.report.layout.slot.tolist()
    # Per-slot rows: the by-slot table (position −1) holds the synthetic decoder's known pattern.
    report = analysis_a.report
    expected = expected_bias(report.frames.reference_mean_rgb @ LUMA, GAIN)
    by_slot = slots[(slots["reference_label"] == "reference") & (slots["position"] == -1)]
    assert by_slot["slot"].tolist() == sorted(STEADY_OFFSETS)
    for slot, mean in zip(by_slot["slot"], by_slot["mean"], strict=True):
        sel = report.layout.is_steady & (report.layout.slot == slot)
        assert mean == pytest.approx(expected[sel].mean(), abs=0.05)
    by_position = slots[(slots["reference_label"] == "reference") & (slots["position"] >= 0)]
    assert len(by_position) == len(analysis_a.report.slot_positions.slot)
    assert gains[gains["reference_label"] == "reference"]["b"].tolist() == pytest.approx(
        analysis_a.report.gain.b.tolist()
    )


def test_analyses_are_listed_newest_first_reopened_and_deleted(tmp_path, pairs) -> None:
    db = tmp_path / "list.duckdb"
    ids = []
    with SessionStore(db) as store:
        for name in ("a", "b"):
            reference, test = pairs[name]
            analysis = analyze_videos(test, reference, geometry=GopGeometry())
            ids.append(store_analysis(store, analysis))
    with SessionStore(db) as store:
        rows = store.list_luma_analyses()
        assert [r["analysis_id"] for r in rows] == ids[::-1]
        reopened = open_analysis(store, ids[1])
        # GOP: keyframes of the test video are kept, so the layout comes back the same.
        assert reopened.analysis.geometry["name"] == "gop" and reopened.analysis.keyframes == (0,)
        assert reopened.analysis.report.layout.slot.tolist() == list(range(72))
        store.delete_luma_analysis(ids[0])
        assert [r["analysis_id"] for r in store.list_luma_analyses()] == [ids[1]]
        assert store.luma_table("luma_frames", ids[0]).empty
        with pytest.raises(StoreError, match="no luma-bias analysis"):
            open_analysis(store, ids[0])
        with pytest.raises(StoreError, match="no luma-bias fit"):
            open_fit(store, "nope")
        with pytest.raises(ValueError, match="Invalid table"):
            store.luma_table("frames", ids[1])


def test_a_fit_on_stored_analyses_is_stored_reopened_and_applied(tmp_path, pairs) -> None:
    db = tmp_path / "fit.duckdb"
    with SessionStore(db) as store:
        ids = {}
        for name in ("a", "b"):
            reference, test = pairs[name]
            ids[name] = store_analysis(store, analyze_videos(test, reference, geometry=H3))
        with pytest.raises(InputError, match="both the training and the test set"):
            fit_stored(store, [ids["a"]], [ids["a"]], coeffs_path=tmp_path / "x.json")
        coeffs = tmp_path / "coeffs.json"
        fit_id, result = fit_stored(store, [ids["b"]], [ids["a"]], coeffs_path=coeffs)
    assert result.model.coefficient_count == 231
    with SessionStore(db, read_only=True) as store:
        row = store.luma_fit(fit_id)
        model = open_fit(store, fit_id)
    assert (row["train"], row["test"]) == ([ids["b"]], [ids["a"]])
    assert (
        row["coeffs_version"] == 1 and row["coeffs_path"] == str(coeffs) and row["coefficient_count"] == 231
    )
    assert [r["group"] for r in row["evaluation"]] == list(result.evaluation.group)
    assert np.array_equal(model.linear, result.model.linear)
    assert np.array_equal(model.quadratic, result.model.quadratic)
    assert np.array_equal(load_model(coeffs).linear, model.linear)
    # Held out: both clips share the decoder's per-slot offsets and gains, so the fit removes them.
    steady = [i for i, g in enumerate(result.evaluation.group) if g.startswith("slot")]
    assert steady and all(result.evaluation.reduction[i] > 0.8 for i in steady)

    with SessionStore(db) as store:
        reference, test = pairs["a"]
        out = tmp_path / "a.corrected.mp4"
        applied = apply_stored(
            store, fit_id, ids["a"], test=test, reference=reference, official=None, out=out, lossless=True
        )
        after_row = store.luma_analysis(applied.after_id)
        stored_bias = open_analysis(store, ids["a"]).analysis.report.bias
    assert out.is_file() and applied.corrected == out
    before, after = applied.before.report, applied.after.report
    assert np.array_equal(before.bias, stored_bias)
    assert np.mean(np.abs(after.bias[after.layout.is_steady])) < 0.2 * np.mean(
        np.abs(before.bias[before.layout.is_steady])
    )
    assert after_row["source"] == "corrected" and after_row["fit_id"] == fit_id
    assert after_row["test_path"] == str(out)


def test_fits_need_one_geometry(tmp_path, pairs) -> None:
    with SessionStore(tmp_path / "geo.duckdb") as store:
        reference, test = pairs["a"]
        h3 = store_analysis(store, analyze_videos(test, reference, geometry=H3))
        reference, test = pairs["b"]
        gop = store_analysis(store, analyze_videos(test, reference, geometry=GopGeometry()))
        with pytest.raises(InputError, match="different geometries"):
            fit_stored(store, [h3], [gop], coeffs_path=tmp_path / "c.json")
        with pytest.raises(InputError, match="at least one analysis"):
            fit_stored(store, [], [gop], coeffs_path=tmp_path / "c.json")


@pytest.mark.slow  # the luma-bias CLI end to end
def test_cli_stores_the_analysis_and_prints_its_id(tmp_path, pairs) -> None:
    reference, test = pairs["a"]
    db = tmp_path / "cli.duckdb"
    out = tmp_path / "out.json"
    proc = run_cli(
        "luma-bias", "analyze", "--reference", reference, "--test", test, "--session-db", db, "--json", out
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("analysis id: "))
    analysis_id = line.split()[2]
    with SessionStore(db, read_only=True) as store:
        stored = open_analysis(store, analysis_id)
    assert stored.analysis.to_json() == json.loads(out.read_text())
    # A foreign file as the database is refused with one line, exit 2.
    bad = tmp_path / "not_a_db.duckdb"
    bad.write_bytes(b"x" * 64)
    proc = run_cli("luma-bias", "--reference", reference, "--test", test, "--session-db", bad)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("codec-lens: error: ") and "not a DuckDB database" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
