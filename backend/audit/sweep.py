"""Budget sweep: one selection re-selected under several hard token budgets, each audited."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.audit.coverage import AuditConfig, CoverageAudit, audit_coverage
from backend.audit.sources import audit_source_of_run
from backend.config import option_of, validate_fields
from backend.pipeline.recipe import RunResult, budget_config
from backend.selectors import spec_of
from backend.stages.budget import MAX_TOKEN_BUDGET, BudgetConfig, budget_selection
from backend.stages.pack import pack

DEFAULT_BUDGETS = (2000, 4000, 8000, 16000)


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """The budgets a sweep re-selects at (ascending, distinct) and the content floor of each."""

    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    stop_gain: float = option_of(BudgetConfig, "stop_gain")

    def __post_init__(self) -> None:
        validate_fields(self)
        ok = all(
            isinstance(b, int) and not isinstance(b, bool) and 0 < b <= MAX_TOKEN_BUDGET for b in self.budgets
        )
        if not self.budgets or not ok or list(self.budgets) != sorted(set(self.budgets)):
            raise ValueError(
                f"Invalid budgets ({','.join(map(str, self.budgets))}). Supported values are distinct "
                f"positive integers up to {MAX_TOKEN_BUDGET}, in ascending order."
            )


@dataclass(frozen=True)
class SweepRow:
    """One budget's selection, in the figures of ``codec-lens sweep --json`` (docs/audit.md)."""

    budget: int
    """The hard token budget (0: the selector's own budget rule)."""
    tokens: int
    """Valid tokens the selection kept."""
    canvases: int
    """Canvases the payload holds (padded as the selector packs)."""
    stop_reason: str
    """``budget``, ``content`` or ``video_end``; ``own`` for the selector's own rule."""
    observed_frames: int
    longest_never_observed_secs: float
    mean_staleness_frames: float
    kept_score_fraction: float | None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BudgetSweep:
    """A sweep's rows in budget order, the selector's own run beside them, and where coverage shrank."""

    rows: tuple[SweepRow, ...]
    own: SweepRow
    shrinks: tuple[int, ...]
    """Budgets that observe fewer frames than a smaller budget did (none under the controller,
    whose selections are nested)."""


def _row(budget: int, result: RunResult, audit: CoverageAudit) -> SweepRow:
    figures = audit.summary()
    outcome = result.selection.budget
    valid = result.canvases.tokens[:, -1] != 0
    return SweepRow(
        budget=budget,
        tokens=int(valid.sum()),
        canvases=int(result.canvases.canvas_group_index.size),
        stop_reason=outcome.stop_reason if outcome is not None else "own",
        observed_frames=figures["observed_frames"],
        longest_never_observed_secs=figures["longest_never_observed_secs"],
        mean_staleness_frames=figures["mean_staleness_frames"],
        kept_score_fraction=figures["kept_score_fraction"],
    )


def budgeted_result(result: RunResult, token_budget: int, stop_gain: float) -> RunResult:
    """``result`` re-selected under a hard budget of ``token_budget`` tokens and re-packed (the
    canvases' pixels are packed only when read): no decode, no scoring.

    Raises
    ------
    ValueError : ``result`` already ran under a hard budget (its other blocks are gone), or the
        budget is below one anchor frame.
    """
    if result.selection.budget is not None:
        raise ValueError(
            f"Invalid run to re-budget (it kept {result.selection.budget.token_budget} tokens at most). "
            "Supported values are runs with the selector's own budget (token_budget 0)."
        )
    options = result.options.replace(token_budget=token_budget, stop_gain=stop_gain)
    recipe = spec_of(options).recipe
    assert recipe is not None, "every selector names its recipe"
    config = budget_config(recipe, options, result.geometry)
    selection = budget_selection(result.selection, result.scores, result.geometry, result.info, config=config)
    canvases = pack(selection, result.decoded, result.geometry, config=options.stage_configs()["pack"])
    return dataclasses.replace(result, options=options, selection=selection, canvases=canvases)


def sweep_budgets(result: RunResult, *, config: SweepConfig, audit: AuditConfig) -> BudgetSweep:
    """Re-select one run at every budget of ``config`` and audit each selection.

    Parameters
    ----------
    result : a run with its selector's own budget (its scores and decoded candidates at hand).
    config : the budgets and the content floor.
    audit : how the audits work through their staleness tables.

    Returns
    -------
    BudgetSweep with one row per budget, ascending, and the run's own row.

    Raises
    ------
    ValueError : as :func:`budgeted_result` (a budget below one anchor frame names the grid).
    """
    own = _row(0, result, audit_coverage(audit_source_of_run(result), config=audit))
    rows = []
    for budget in config.budgets:
        budgeted = budgeted_result(result, budget, config.stop_gain)
        rows.append(_row(budget, budgeted, audit_coverage(audit_source_of_run(budgeted), config=audit)))
    return BudgetSweep(rows=tuple(rows), own=own, shrinks=coverage_shrinks(rows))


def coverage_shrinks(rows: Sequence[SweepRow]) -> tuple[int, ...]:
    """The budgets of ``rows`` (ascending) that observe fewer frames than a smaller budget did."""
    best, shrinks = 0, []
    for row in rows:
        if row.observed_frames < best:
            shrinks.append(row.budget)
        best = max(best, row.observed_frames)
    return tuple(shrinks)
