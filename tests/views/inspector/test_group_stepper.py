"""The group stepper's table and readiness plot on synthetic runs (no cvp, no decode)."""

from __future__ import annotations

import itertools

import plotly.graph_objects as go
import pytest
from helpers.synthetic import synthetic_run

from backend.pipeline import RunResult
from views.inspector import group_stepper


@pytest.fixture(scope="module")
def result() -> RunResult:
    """50 candidates (every third frame, keyframe 0 moved to 1) in three readiness groups."""
    return synthetic_run(frames=150, sampled=range(0, 150, 3), moved=[(0, 1)], groups=3)


@pytest.fixture(scope="module")
def fixed_result() -> RunResult:
    """The same candidates grouped in fixed runs: no readiness trace."""
    return synthetic_run(frames=150, sampled=range(0, 150, 3), moved=[(0, 1)], groups=3, grouping="fixed")


def test_table_rows_match_the_groups(result):
    table = group_stepper.prepare_group_table(result)
    assert [r["group_index"] for r in table] == [s.group_index for s in result.groups.specs]
    dropped = result.groups.dropped_tail
    dropped_count = dropped[1] - dropped[0] if dropped else 0
    assert sum(r["length"] for r in table) + dropped_count == result.candidates.frame_indices.size
    for row, sel in zip(table, result.selection.groups, strict=True):
        assert row["length"] == row["candidate_end"] - row["candidate_start"]
        assert row["anchor_frame_index"] == sel.frame_indices[0]
        assert row["kept_blocks"] == sel.kept.shape[0] and row["skipped"] is False
        assert row["first_frame_index"] <= row["last_frame_index"]
        assert row["threshold"] == pytest.approx(result.groups.threshold)
    assert {r["stop_reason"] for r in table} == {s.stop_reason for s in result.groups.specs}


def test_readiness_plot_marks_the_stop_at_the_right_end(result):
    assert result.options.grouping_mode == "readiness" and result.groups.trace
    decisions = set()
    for spec in result.groups.specs:
        fig = group_stepper.prepare_readiness_plot(result, spec.group_index)
        names = [t.name for t in fig.data]
        for name in (
            "top-K sum",
            "threshold",
            "covered bins",
            "marginal gain",
            group_stepper.STOP_MARKER_NAME,
        ):
            assert name in names
        steps = [s for s in result.groups.trace if s.group_index == spec.group_index]
        topk = next(t for t in fig.data if t.name == "top-K sum")
        assert list(topk.x) == [s.end for s in steps] and list(topk.y) == [s.topk_sum for s in steps]
        (stop,) = [t for t in fig.data if t.name == group_stepper.STOP_MARKER_NAME]
        # A readiness group ends where its scan ended: the window end of the group.
        assert stop.x[0] == max(topk.x) == spec.end
        assert stop.y[0] == steps[-1].topk_sum
        bins = next(t for t in fig.data if t.name == "covered bins")
        assert bins.yaxis == "y2"
        decisions.add(stop.meta["decision"])
        if spec.stop_reason.startswith("readiness"):
            assert stop.meta["decision"] == "stop" and steps[-1].passed
        fig.to_json()
        go.Figure(fig.to_plotly_json())  # built unvalidated (figure_style.plain_figure): plotly's names only
    assert "stop" in decisions


def test_fixed_grouping_says_there_is_no_trace(fixed_result):
    assert not fixed_result.groups.trace
    table = group_stepper.prepare_group_table(fixed_result)
    assert sum(r["length"] for r in table) <= fixed_result.candidates.frame_indices.size
    fig = group_stepper.prepare_readiness_plot(fixed_result, 0)
    assert len(fig.data) == 0
    assert "No readiness trace" in fig.layout.annotations[0].text


def test_unknown_groups_are_refused(result):
    with pytest.raises(ValueError, match=r"Invalid group_index \(99\)\. Supported values are 0"):
        group_stepper.prepare_readiness_plot(result, 99)


# Issue 27 item 10: the dashed threshold and the dotted needed-bins line lay exactly under the
# covered-bins line (same colour, secondary axis over the score axis) and the viewed candidate
# was not marked.


def _trace(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def test_each_reference_line_has_its_own_row_look_and_is_drawn_over_its_value(result):
    spec = result.groups.specs[1]
    fig = group_stepper.prepare_readiness_plot(result, spec.group_index)
    names = [t.name for t in fig.data]
    topk, threshold = _trace(fig, "top-K sum"), _trace(fig, "threshold")
    covered, needed = _trace(fig, "covered bins"), _trace(fig, "needed bins")
    # Reference after value: where they are equal, the dashed / dotted line shows on top.
    assert names.index("threshold") > names.index("top-K sum")
    assert names.index("needed bins") > names.index("covered bins")
    assert topk.yaxis == threshold.yaxis == "y" and covered.yaxis == needed.yaxis == "y2"
    assert (covered.line.color, covered.line.dash) != (needed.line.color, needed.line.dash)
    assert covered.line.color != needed.line.color and needed.line.dash == "dot"
    assert threshold.line.color != topk.line.color and threshold.line.dash == "dash"
    assert covered.line.width > needed.line.width  # the dotted line sits inside the wider solid one
    # Scores and bin counts are read on separate rows, not two scales over one plot.
    layout = fig.layout
    assert layout.yaxis2.overlaying is None
    rows = sorted([tuple(layout.yaxis.domain), tuple(layout.yaxis2.domain), tuple(layout.yaxis3.domain)])
    assert all(a[1] < b[0] for a, b in itertools.pairwise(rows))  # three disjoint rows
    assert _trace(fig, "marginal gain").yaxis == "y3"
    # The synthetic trace needs 3 bins at every step: equal to the covered count at the last ones.
    steps = [s for s in result.groups.trace if s.group_index == spec.group_index]
    assert steps[-1].covered_bins == steps[-1].needed_bins == 3


def test_the_viewed_candidate_is_marked_on_the_trace(result):
    spec = result.groups.specs[1]
    row = spec.start + 5
    fig = group_stepper.prepare_readiness_plot(result, spec.group_index, viewed_row=row)
    (viewed,) = [s for s in fig.layout.shapes if s.name == group_stepper.VIEWED_NAME]
    assert viewed.x0 == viewed.x1 == group_stepper.viewed_x(row) == row + 1
    assert viewed.xref == "x" and viewed.yref == "paper" and (viewed.y0, viewed.y1) == (0, 1)
    frame = int(result.candidates.frame_indices[row])
    assert viewed.label.text == f"viewed: candidate {row} (frame {frame})"
    assert fig.layout.meta["viewed_row"] == row
    lo, hi = fig.layout.xaxis.range
    assert lo < viewed.x0 < hi
    # The step that added the viewed candidate sits at that x.
    topk = _trace(fig, "top-K sum")
    added = dict(zip(topk.x, topk.customdata, strict=True))
    assert added.get(viewed.x0, frame) == frame
    go.Figure(fig.to_plotly_json())
    # A row of another group, or none, marks nothing.
    for other in (None, result.groups.specs[0].start):
        plain = group_stepper.prepare_readiness_plot(result, spec.group_index, viewed_row=other)
        assert not [s for s in plain.layout.shapes if s.name == group_stepper.VIEWED_NAME]
