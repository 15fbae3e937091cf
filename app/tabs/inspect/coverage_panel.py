"""The Inspect tab's Coverage panel: the open run's coverage figure and its budget sweep."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import ui_error
from app.tabs.inspect.handlers import result_of

if TYPE_CHECKING:
    from app.workspace import Workspace

DEFAULT_BUDGETS = "2000,4000,8000,16000"
SWEEP_COLUMNS = (
    "budget",
    "tokens",
    "canvases",
    "stop_reason",
    "observed_frames",
    "longest_never_observed_secs",
    "mean_staleness_frames",
    "kept_score_fraction",
)


def parse_budgets(text: str) -> tuple[int, ...]:
    """``"2000, 4000"`` → (2000, 4000), sorted and distinct; ``gr.Error`` for anything else."""
    try:
        values = sorted({int(v) for v in str(text or "").split(",") if v.strip()})
    except ValueError:
        values = []
    if not values or values[0] <= 0:
        raise gr.Error(f"Invalid budgets ({text}). Supported values are comma-separated positive integers.")
    return tuple(values)


def coverage_figure(ws: Workspace, run_id: str) -> Any:
    """The open run's coverage figure (screen style): coverage, spans, staleness and its map."""
    from views.coverage_figure import prepare_run_coverage_figure

    return prepare_run_coverage_figure(result_of(ws, run_id))


def sweep(ws: Workspace, run_id: str, budgets_text: str) -> tuple[Any, list[list[Any]], str]:
    """The open run re-selected and audited at each budget (no decode): its figure, the rows
    (:data:`SWEEP_COLUMNS`, the run's own last) and a one-line status."""
    from backend.audit import AuditConfig
    from backend.audit.sweep import SweepConfig, sweep_budgets
    from views.sweep import prepare_sweep_figure

    budgets = parse_budgets(budgets_text)
    result = result_of(ws, run_id)
    if result.selection.budget is not None:
        raise gr.Error(
            f"Run {run_id} ran under a token budget of {result.selection.budget.token_budget}: set the live "
            "token budget to 0 and sweep that run (its selector's own selection)."
        )
    try:
        done = sweep_budgets(result, config=SweepConfig(budgets=budgets), audit=AuditConfig())
    except ValueError as exc:  # a budget below one anchor frame
        raise ui_error(exc, single_line=True) from exc
    rows = [[getattr(r, c) for c in SWEEP_COLUMNS] for r in (*done.rows, done.own)]
    rows[-1][0] = "own"
    shrinks = f"; coverage shrinks at {', '.join(map(str, done.shrinks))}" if done.shrinks else ""
    status = f"Swept run {run_id} at {len(budgets)} budgets{shrinks}."
    return prepare_sweep_figure(done), rows, status


def build_coverage_panel(ws: Workspace, run_id: gr.Textbox) -> None:
    """A Coverage accordion in the caller's Blocks: the open run's coverage figure on demand, and a
    budget sweep (budgets, a Sweep button, its figure and table)."""
    with gr.Accordion("Coverage and budget sweep", open=False, elem_id="coverage_panel"):
        gr.Markdown(
            "What the open run showed of the video (docs/audit.md), and what other token budgets would "
            "have kept: each budget re-selects the run from its scores, no decode."
        )
        show = gr.Button("Show coverage", elem_id="coverage_btn")
        cover_plot = gr.Plot(label="Coverage", elem_id="coverage_plot")
        with gr.Row():
            budgets = gr.Textbox(DEFAULT_BUDGETS, label="Token budgets", elem_id="sweep_budgets", scale=3)
            go = gr.Button("Sweep", variant="primary", elem_id="sweep_btn", scale=1)
        status = gr.Markdown("", elem_id="sweep_status")
        sweep_plot = gr.Plot(label="Budget sweep", elem_id="sweep_plot")
        table = gr.Dataframe(headers=list(SWEEP_COLUMNS), interactive=False, wrap=True, elem_id="sweep_table")
    show.click(lambda rid: coverage_figure(ws, rid), run_id, cover_plot, api_name=False)
    go.click(
        lambda rid, text: sweep(ws, rid, text), [run_id, budgets], [sweep_plot, table, status], api_name=False
    )
