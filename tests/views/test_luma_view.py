"""Luma-bias view functions on real analyses of a real encoded clip pair (known per-slot pattern)."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from helpers.luma_clip_pairs import STEADY_OFFSETS, expected_bias, make_pair

import native
from backend.luma import (
    GopGeometry,
    LatentWindowGeometry,
    MeasureConfig,
    analyze_frames,
    analyze_videos,
    correct_frames,
    fit_and_evaluate,
)
from views import figure_style as fs
from views import luma as luma_view

H3 = LatentWindowGeometry()
LUMA = np.asarray([0.299, 0.587, 0.114])
GAIN = 0.004


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("luma_view_pairs")
    return {
        "a": make_pair(folder, "a", pattern="moving", gain=GAIN, seed=1),
        "b": make_pair(folder, "b", pattern="square", gain=GAIN, seed=2),
    }


@pytest.fixture(scope="module")
def analysis(pairs):
    """Clip a against its reference and, as the "official" decode, clip a's test itself."""
    reference, test = pairs["a"]
    return analyze_videos(test, reference, official=test, geometry=H3)


@pytest.fixture(scope="module")
def fit(pairs):
    reports = [analyze_videos(t, r, geometry=H3).report for r, t in (pairs["b"], pairs["a"])]
    return fit_and_evaluate(reports[:1], reports[1:], geometry=H3)


def _trace(fig: go.Figure, name: str):
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, f"{name!r} in {[t.name for t in fig.data]}"
    return found[0]


def test_bias_plot_has_a_line_per_reference_slots_coloured_and_token_boundaries(analysis) -> None:
    fig = luma_view.prepare_bias_plot(analysis)
    report = analysis.report
    t = report.frames.frame_index
    ref_line = _trace(fig, "bias vs reference")
    assert np.array_equal(np.asarray(ref_line.x), t) and np.array_equal(np.asarray(ref_line.y), report.bias)
    official = _trace(fig, "bias vs official")
    assert np.allclose(np.asarray(official.y), 0.0)  # the test against itself
    # Slot markers partition the frames; each point is the frame's bias, coloured by its slot.
    seen = []
    for slot in np.unique(report.layout.slot):
        tr = _trace(fig, f"slot {slot}")
        x = np.asarray(tr.x)
        assert np.all(report.layout.slot[x] == slot)
        assert np.array_equal(np.asarray(tr.y), report.bias[x])
        assert tr.marker.color == luma_view.slot_colour(int(slot))
        assert np.array_equal(np.asarray(tr.customdata)[:, 0], report.layout.position[x])
        seen.append(x)
    assert np.array_equal(np.sort(np.concatenate(seen)), t)
    # Token boundaries: r ∈ {0, 1, 5, 9, 13} of each 17-frame chunk, drawn half a frame before.
    bounds = _trace(fig, "token boundary")
    xs = sorted({x for x in bounds.x if x is not None})
    expected = [f - 0.5 for f in range(72) if f % 17 in (0, 1, 5, 9, 13)]
    assert xs == expected
    # The first window (latents 0..6, frames 0..21) is shaded.
    (shape,) = [s for s in fig.layout.shapes if s.name == "first window"]
    assert (shape.x0, shape.x1) == (-0.5, 21.5)
    assert "p95 all" in fig.layout.title.text


def test_bias_plot_of_the_gop_model_marks_gop_boundaries(pairs) -> None:
    reference, test = pairs["b"]
    analysis = analyze_videos(test, reference, geometry=GopGeometry(every=24))
    fig = luma_view.prepare_bias_plot(analysis)
    bounds = _trace(fig, "GOP boundary")
    assert sorted({x for x in bounds.x if x is not None}) == [-0.5, 23.5, 47.5]
    assert not [s for s in fig.layout.shapes if s.name == "first window"]  # every GOP frame is steady
    assert {t.name for t in fig.data if t.name.startswith("slot ")} == {f"slot {s}" for s in range(24)}


def test_stacked_plot_rows_are_the_chunks_from_the_third_on(analysis) -> None:
    report = analysis.report
    fig = luma_view.prepare_stacked_plot(report)
    stacked = report.stacked
    # 72 frames: chunks 2 (frames 34..50) and 3 (51..67) are full, chunk 4 has frames 68..71.
    assert stacked.chunk.tolist() == [2, 3, 4]
    for chunk in (2, 3, 4):
        y = np.asarray(_trace(fig, f"chunk {chunk}").y, float)
        first = 17 * chunk
        present = report.bias[first : first + 17]
        assert np.array_equal(y[: present.size], present)
        assert np.all(np.isnan(y[present.size :]))
    mean = _trace(fig, "mean")
    assert np.allclose(np.asarray(mean.y, float), np.nanmean(stacked.bias, axis=0))
    assert list(mean.customdata) == stacked.slot_by_position.tolist()
    # Position r = 0 starts a chunk (slot 5); r = 1..4 are slot 6, then 2, 3, 4.
    assert stacked.slot_by_position.tolist() == [5] + [6] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    assert list(fig.layout.xaxis.ticktext[:2]) == ["0<br>s5", "1<br>s6"]


def test_stacked_plot_of_a_short_clip_is_empty_but_valid(pairs) -> None:
    reference, test = pairs["a"]
    frames_ref = list(native.iter_rgb(reference))[:30]
    frames_test = list(native.iter_rgb(test))[:30]
    short = analyze_frames(frames_test, frames_ref, geometry=H3)
    fig = luma_view.prepare_stacked_plot(short.report)
    assert [t.name for t in fig.data] == []


def test_slot_table_recovers_the_synthetic_decoders_per_slot_pattern(analysis) -> None:
    report = analysis.report
    table = luma_view.prepare_slot_table(analysis)
    assert list(table.columns) == list(luma_view.SLOT_COLUMNS)
    mine = table[table["vs"] == "reference"]
    assert mine["slot"].tolist() == sorted(STEADY_OFFSETS)
    expected = expected_bias(report.frames.reference_mean_rgb @ LUMA, GAIN)
    for _, row in mine.iterrows():
        sel = report.layout.is_steady & (report.layout.slot == row["slot"])
        assert row["frames"] == int(sel.sum())
        assert row["mean bias"] == pytest.approx(expected[sel].mean(), abs=0.05)
        # The gain of slot s is GAIN·(s − 4) relative, i.e. d ≈ a + b·x with b ≈ GAIN·(s − 4).
        assert row["gain b"] == pytest.approx(GAIN * (row["slot"] - 4), abs=1e-3)
    official = table[table["vs"] == "official"]
    assert np.allclose(official["mean bias"], 0.0) and len(official) == len(mine)
    by_pos = luma_view.prepare_slot_table(analysis, by_position=True)
    assert list(by_pos.columns) == list(luma_view.SLOT_POSITION_COLUMNS)
    mine = by_pos[by_pos["vs"] == "reference"]
    rows = report.slot_positions
    assert mine[["slot", "position"]].to_numpy().tolist() == np.stack([rows.slot, rows.position], 1).tolist()
    assert np.allclose(mine["mean bias"], np.round(rows.mean, 4))


def test_gain_scatter_plots_every_steady_cell_and_the_fitted_line(analysis) -> None:
    report = analysis.report
    fig = luma_view.prepare_gain_scatter(report)
    x_all, d_all = report.frames.cell_luma()
    total = 0
    for i, slot in enumerate(report.gain.slot.tolist()):
        cells = _trace(fig, f"slot {slot} cells")
        sel = report.layout.is_steady & (report.layout.slot == slot)
        assert np.allclose(np.asarray(cells.x), x_all[sel].reshape(-1))
        assert np.allclose(np.asarray(cells.y), d_all[sel].reshape(-1))
        total += len(cells.x)
        line = _trace(fig, f"slot {slot} fit")
        a, b = report.gain.a[i], report.gain.b[i]
        xs = np.asarray(line.x)
        assert xs.tolist() == [x_all[sel].min(), x_all[sel].max()]
        assert np.allclose(np.asarray(line.y), a + b * xs)
    assert total == int(report.gain.cells.sum()) == int(report.layout.is_steady.sum()) * 12
    # With a cap, every k-th cell is drawn and the title says so.
    capped = luma_view.prepare_gain_scatter(report, max_points=100)
    shown = sum(len(t.x) for t in capped.data if t.name.endswith(" cells"))
    assert 0 < shown <= 100 + len(report.gain.slot)
    assert "every" in capped.layout.title.text
    # Ordinals are English ("every 2th" was printed before).
    half = luma_view.prepare_gain_scatter(report, max_points=(total + 1) // 2)
    title = half.layout.title
    assert f"(every 2nd of {total} cells shown)" in title.text.replace("<br>", " ")
    # Issue 27 item 19: the title ran off the half-width figure ("…(every 2nd of 1"). Wrapped, every
    # line fits the figure at its narrowest on screen, right of where the title starts.
    room = fs.SCREEN_HALF_WIDTH_PX * (1 - title.x) - 10
    lines = title.text.split("<br>")
    assert len(lines) >= 2 and all(fs.text_width_px(line, size_px=title.font.size) <= room for line in lines)
    assert fs.text_width_px(title.text.replace("<br>", " "), size_px=title.font.size) > room
    assert half.layout.margin.t >= 60 + 1.3 * title.font.size * (len(lines) - 1)


def test_summary_and_stored_choices_name_the_inputs(analysis) -> None:
    text = luma_view.prepare_summary(analysis, analysis_id="abc123")
    s = analysis.report.summary()
    assert "abc123" in text and "geometry **h3**" in text
    assert f"p95 all {s['p95_all']:.3f}" in text and "vs official" in text
    rows = [
        {
            "analysis_id": "abc123",
            "test_path": "/x/a.test.mp4",
            "reference_path": "/x/a.reference.mp4",
            "geometry": {"name": "gop", "every": 0},
            "frames": 72,
            "p95_all": None,
            "source": "corrected",
            "created_at": datetime(2026, 1, 2, 3, 4),
        }
    ]
    ((label, value),) = luma_view.prepare_analysis_choices(rows)
    assert value == "abc123"
    assert (
        label
        == "abc123 · a.test.mp4 vs a.reference.mp4 · gop · 72 frames · p95 n/a [corrected] · 2026-01-02 03:04"
    )
    ((label, value),) = luma_view.prepare_fit_choices(
        [{"fit_id": "f1", "geometry": {"name": "h3"}, "coefficient_count": 231, "train": ["a"], "test": []}]
    )
    assert value == "f1" and "231 coefficients" in label and "train 1, test 0" in label


def test_fit_table_and_plot_show_held_out_residuals_before_and_after(fit) -> None:
    table = luma_view.prepare_fit_table(fit)
    ev = fit.evaluation
    assert list(table.columns) == list(luma_view.FIT_COLUMNS)
    assert table["group"].tolist() == list(ev.group)
    assert np.allclose(table["rms before"], np.round(ev.rms_before, 4))
    assert np.allclose(table["cut"], np.round(ev.reduction, 4))
    fig = luma_view.prepare_fit_plot(fit)
    for name, values in (
        ("before", ev.rms_before),
        ("after fit", ev.rms_after),
        ("constant-only", ev.rms_constant),
    ):
        bar = _trace(fig, name)
        assert list(bar.x) == list(ev.group) and np.allclose(np.asarray(bar.y), values)
    assert np.all(np.asarray(_trace(fig, "after fit").y) < 0.2 * np.asarray(_trace(fig, "before").y))
    assert "231 coefficients" in fig.layout.title.text


def test_fit_views_without_held_out_analyses(pairs) -> None:
    reference, test = pairs["a"]
    result = fit_and_evaluate([analyze_videos(test, reference, geometry=H3).report], geometry=H3)
    assert luma_view.prepare_fit_table(result).empty
    fig = luma_view.prepare_fit_plot(result)
    assert len(fig.data) == 0 and "no held-out" in fig.layout.title.text


def test_before_after_figures_of_a_correction(pairs, fit) -> None:
    reference, test = pairs["a"]
    ref_frames = list(native.iter_rgb(reference))
    test_frames = list(native.iter_rgb(test))
    before = analyze_frames(test_frames, ref_frames, geometry=H3)
    after = analyze_frames(list(correct_frames(fit.model, test_frames)), ref_frames, geometry=H3)
    fig = luma_view.prepare_before_after_plot(before, after)
    assert np.array_equal(np.asarray(_trace(fig, "before").y), before.report.bias)
    assert np.array_equal(np.asarray(_trace(fig, "after").y), after.report.bias)
    assert np.mean(np.abs(np.asarray(_trace(fig, "after").y))) < 0.1 * np.mean(np.abs(before.report.bias))
    assert list(_trace(fig, "zero").y) == [0.0, 0.0]
    bars = luma_view.prepare_before_after_slots(before, after)
    b, a = _trace(bars, "before"), _trace(bars, "after")
    assert list(b.x) == [f"slot {s}" for s in sorted(STEADY_OFFSETS)] == list(a.x)
    assert np.allclose(np.asarray(b.y), before.report.slots.mean)
    assert np.allclose(np.asarray(a.y), after.report.slots.mean)
    assert np.all(np.abs(np.asarray(a.y)) < 0.05)


def test_tables_are_plain_dataframes(analysis, fit) -> None:
    for table in (luma_view.prepare_slot_table(analysis), luma_view.prepare_fit_table(fit)):
        assert isinstance(table, pd.DataFrame)
        assert all(math.isfinite(v) for v in table.select_dtypes("number").to_numpy().ravel())


def test_measure_config_offset_is_reflected_in_frame_indices(pairs) -> None:
    reference, test = pairs["a"]
    shifted = analyze_videos(test, reference, geometry=H3, config=MeasureConfig(offset=-3, truncate=True))
    fig = luma_view.prepare_bias_plot(shifted)
    assert np.asarray(_trace(fig, "bias vs reference").x)[0] == 3
