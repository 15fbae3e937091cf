"""The budget sweep (backend.audit.sweep) on a synthetic run: nested rows, the own row, refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

from backend.audit import AuditConfig, audit_coverage, audit_source_of_run
from backend.audit.sweep import SweepConfig, SweepRow, budgeted_result, coverage_shrinks, sweep_budgets
from backend.records import TOKEN_COLUMNS
from views.sweep import PANELS, prepare_sweep_figure

AUDIT = AuditConfig()
VALID = TOKEN_COLUMNS.index("valid")
BUDGETS = (64, 128, 192, 400, 1000, 4000, 20_000)


@pytest.fixture(scope="module")
def run():
    return synthetic_run(frames=150, groups=3)


@pytest.fixture(scope="module")
def sweep(run):
    return sweep_budgets(run, config=SweepConfig(budgets=BUDGETS), audit=AUDIT)


def test_rows_follow_the_budgets_and_never_lose_coverage(sweep) -> None:
    assert [r.budget for r in sweep.rows] == list(BUDGETS)
    assert all(r.tokens <= r.budget for r in sweep.rows)
    observed = [r.observed_frames for r in sweep.rows]
    assert observed == sorted(observed) and observed[0] == 1
    assert [r.tokens for r in sweep.rows][:3] == [64, 128, 192]  # one, two, three anchors
    gaps = [r.longest_never_observed_secs for r in sweep.rows]
    assert gaps == sorted(gaps, reverse=True)
    assert sweep.shrinks == ()
    # 3 groups of 4 canvases hold 3 anchors and 144 blocks: 768 tokens; past them the run ends.
    assert [r.stop_reason for r in sweep.rows[:4]] == ["budget"] * 4
    assert {r.stop_reason for r in sweep.rows[4:]} <= {"video_end", "content"}
    assert len({r.tokens for r in sweep.rows[4:]}) == 1 and sweep.rows[-1].tokens <= 768


def test_each_row_is_the_audit_of_that_budgets_selection(run, sweep) -> None:
    for row in sweep.rows:
        budgeted = budgeted_result(run, row.budget, SweepConfig().stop_gain)
        audit = audit_coverage(audit_source_of_run(budgeted), config=AUDIT)
        tokens = budgeted.canvases.tokens
        assert row.tokens == int(tokens[:, VALID].sum()) == budgeted.selection.budget.tokens_used
        assert row.observed_frames == audit.observed_frames
        assert row.canvases == len(budgeted.selection.groups) * run.options.images_per_group
        assert row.kept_score_fraction == pytest.approx(audit.kept_score_fraction, abs=1e-6)
        # The input run is left as it was.
        assert run.selection.budget is None and run.options.token_budget == 0


def test_the_own_row_is_the_runs_own_audit(run, sweep) -> None:
    audit = audit_coverage(audit_source_of_run(run), config=AUDIT)
    assert sweep.own.budget == 0 and sweep.own.stop_reason == "own"
    assert sweep.own.tokens == int(run.canvases.tokens[:, VALID].sum())
    assert sweep.own.observed_frames == audit.observed_frames


def test_a_budgeted_run_is_not_budgeted_again(run) -> None:
    budgeted = budgeted_result(run, 500, 0.1)
    with pytest.raises(ValueError, match=r"^Invalid run to re-budget \(it kept 500 tokens at most\)"):
        budgeted_result(budgeted, 1000, 0.1)


def test_a_budget_below_one_anchor_names_the_grid(run) -> None:
    with pytest.raises(ValueError, match=r"at least 64, one anchor frame of this run's 8x8 grid"):
        sweep_budgets(run, config=SweepConfig(budgets=(10, 100)), audit=AUDIT)


@pytest.mark.parametrize("budgets", [(), (0,), (-5, 10), (200, 100), (100, 100), (1.5,), (True,), (10**9,)])
def test_budgets_must_be_distinct_ascending_positive_integers(budgets) -> None:
    with pytest.raises(ValueError, match=r"^Invalid budgets \(.*\)\. Supported values are distinct positive"):
        SweepConfig(budgets=budgets)


def test_coverage_shrinks_names_the_budgets_that_see_less() -> None:
    def row(budget: int, observed: int) -> SweepRow:
        return SweepRow(budget, budget, 1, "own", observed, 0.0, 0.0, None)

    assert coverage_shrinks([row(1, 3), row(2, 5), row(3, 4), row(4, 5), row(5, 2)]) == (3, 5)
    assert coverage_shrinks([row(1, 3), row(2, 3)]) == ()


def test_the_figure_has_four_panels_and_marks_the_own_run(sweep) -> None:
    fig = prepare_sweep_figure(sweep, title="t")
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    owns = [t for t in fig.data if t.mode == "markers"]
    assert len(lines) == len(PANELS) and len(owns) == len(PANELS)
    assert list(lines[0].x) == [r.tokens for r in sweep.rows]
    assert list(lines[0].y) == [r.observed_frames for r in sweep.rows]
    assert list(owns[0].x) == [sweep.own.tokens]
    # Without score maps there is no kept score mass to mark.
    blind = dataclasses.replace(sweep, own=dataclasses.replace(sweep.own, kept_score_fraction=None))
    assert sum(t.mode == "markers" for t in prepare_sweep_figure(blind).data) == len(PANELS) - 1
    assert np.isfinite(lines[1].y).all()


def test_a_runs_shared_audit_is_kept_with_it_and_not_with_a_re_budgeted_copy(run) -> None:
    from backend.audit import cached_run_audit

    fresh = dataclasses.replace(run)  # its own derived figures, empty
    first = cached_run_audit(fresh)
    assert cached_run_audit(fresh) is first and fresh.derived == {"run_audit": first}
    assert (
        first.coverage.observed_frames
        == audit_coverage(audit_source_of_run(run), config=AUDIT).observed_frames
    )
    smaller = budgeted_result(fresh, 200, 0.0)
    assert smaller.derived == {}
    assert cached_run_audit(smaller).coverage.observed_frames < first.coverage.observed_frames
