"""The budget sweep's figure: what each token budget buys, beside the selector's own run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from views.figure_style import COLOURS, SERIES, apply_style

if TYPE_CHECKING:
    from backend.audit.sweep import BudgetSweep

PANELS = (
    ("observed_frames", "Observed frames"),
    ("longest_never_observed_secs", "Longest never-observed span (s)"),
    ("mean_staleness_frames", "Mean staleness (frames)"),
    ("kept_score_fraction", "Kept score mass"),
)
"""Each panel's row field and title, against the valid tokens kept."""


def prepare_sweep_figure(sweep: BudgetSweep, *, title: str = "", paper: bool = False) -> go.Figure:
    """Four panels against the valid tokens each budget kept: observed frames, the longest
    never-observed span, mean staleness and kept score mass; the selector's own run is a diamond
    (its own budget rule, not the controller). A panel without values (no score maps) says so."""
    fig = make_subplots(rows=2, cols=2, subplot_titles=[t for _, t in PANELS], horizontal_spacing=0.12)
    tokens = [r.tokens for r in sweep.rows]
    for i, (field, label) in enumerate(PANELS):
        row, col = divmod(i, 2)
        values = [getattr(r, field) for r in sweep.rows]
        own = getattr(sweep.own, field)
        hover = [f"budget {r.budget}: {r.tokens} tokens, stop {r.stop_reason}" for r in sweep.rows]
        fig.add_trace(
            go.Scatter(
                x=tokens,
                y=values,
                mode="lines+markers",
                name="hard budget",
                legendgroup="budget",
                showlegend=i == 0,
                line={"color": SERIES[0]},
                hovertext=hover,
                hovertemplate="%{hovertext}<br>" + label + " %{y}<extra></extra>",
            ),
            row=row + 1,
            col=col + 1,
        )
        if own is not None:
            fig.add_trace(
                go.Scatter(
                    x=[sweep.own.tokens],
                    y=[own],
                    mode="markers",
                    name="selector's own budget",
                    legendgroup="own",
                    showlegend=i == 0,
                    marker={"symbol": "diamond", "size": 11, "color": COLOURS["kept"]},
                    hovertemplate=f"own budget: {sweep.own.tokens} tokens<br>{label} %{{y}}<extra></extra>",
                ),
                row=row + 1,
                col=col + 1,
            )
        fig.update_xaxes(title_text="valid tokens", row=row + 1, col=col + 1)
    fig.update_layout(height=620, title={"text": title} if title else None)
    apply_style(fig, paper=paper)
    # Room above the panel titles for the figure's own (the paper style leaves 40 px).
    return fig.update_layout(margin={"t": 100 if title else 60})
