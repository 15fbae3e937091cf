"""Figures an export writes: each run's timeline, readiness traces and coverage, paper style, in its range."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from backend.export import export_groups
from backend.pipeline import RunResult
from views.coverage_figure import prepare_run_coverage_figure
from views.figure_style import apply_style
from views.inspector.group_stepper import prepare_readiness_plot
from views.inspector.timeline import prepare_timeline

PLOTS: tuple[str, ...] = ("timeline", "readiness", "coverage")
"""Figure names an export accepts (``--plots``, the Export panel's figure choice)."""


def prepare_export_figures(
    results: Sequence[tuple[str, RunResult]],
    plots: Sequence[str],
    *,
    groups: Sequence[int] | None = None,
    frames: tuple[int, int | None] | None = None,
) -> dict[str, go.Figure]:
    """Name → figure for each run (the first unsuffixed, the others ``_<run_id>``), paper style.

    Parameters
    ----------
    results : (run_id, run) pairs, the exported run first.
    plots : names from :data:`PLOTS`.
    groups : readiness figures of these groups only; None = every group with a candidate frame in
        ``frames``.
    frames : (start, stop) frame_index range of the export (stop exclusive or None); None = all.
        The timeline and the coverage figure's time axes span it and readiness figures are made
        only for the groups it touches.

    Returns
    -------
    ``timeline[_<run_id>]``, ``readiness_g<G>[_<run_id>]`` and ``coverage[_<run_id>]`` figures
    (the coverage audit of :mod:`views.coverage_figure`).
    """
    unknown = [p for p in plots if p not in PLOTS]
    if unknown:
        raise ValueError(f"Invalid plot ({unknown[0]!r}). Supported values are {', '.join(PLOTS)}.")
    figures: dict[str, go.Figure] = {}
    for k, (run_id, result) in enumerate(results):
        suffix = "" if k == 0 else f"_{run_id}"
        if "timeline" in plots:
            figures[f"timeline{suffix}"] = prepare_timeline(result, frame_range=frames, paper=True)
        if "readiness" in plots:
            for g in export_groups(result, frames) if groups is None else groups:
                fig = prepare_readiness_plot(result, g)
                apply_style(fig, paper=True)
                fig.update_layout(height=640)  # three rows of plot and a legend under them
                figures[f"readiness_g{g}{suffix}"] = fig
        if "coverage" in plots:
            figures[f"coverage{suffix}"] = prepare_run_coverage_figure(result, frames=frames, paper=True)
    return figures
