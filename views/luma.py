"""Luma-bias views: bias(t) by slot, stacked chunks, per-slot table, cell gains, fit and apply figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from backend.luma import FitResult, LumaAnalysis, LumaReport
from views.figure_style import (
    COLOURS,
    SCREEN_FULL_WIDTH_PX,
    SCREEN_HALF_WIDTH_PX,
    SERIES,
    apply_style,
    fitted_title,
    ordinal,
    title_margin_px,
)

PALETTE: tuple[str, ...] = SERIES
REFERENCE_DASH = {"reference": "solid", "official": "dot"}
BOUNDARY_COLOUR = "rgba(120, 120, 120, 0.35)"
FIRST_WINDOW_FILL = "rgba(255, 165, 0, 0.10)"
MAX_GAIN_POINTS = 6_000
"""Cells drawn by the gain scatter (a deterministic stride keeps every slot's share). SVG markers, not
WebGL: headless and GPU-less browsers draw no WebGL points."""

# One look for every luma figure (the tab shows them stacked), the shared style besides.
_MARGIN: dict[str, int] = {"l": 60, "r": 20, "t": 60, "b": 10}


def _titled(text: str, *, half: bool = True) -> dict[str, Any]:
    """Layout title and margins of a luma figure: the title wrapped to fit the figure at its
    narrowest on screen (``half``: one of two side by side, else the page's width), the top margin
    grown by the extra lines."""
    width = SCREEN_HALF_WIDTH_PX if half else SCREEN_FULL_WIDTH_PX
    title = fitted_title(text, figure_width_px=width)
    return {"title": title, "margin": _MARGIN | {"t": title_margin_px(title, base_px=_MARGIN["t"])}}


def slot_colour(slot: int) -> str:
    """The colour of a slot in every luma figure."""
    return PALETTE[int(slot) % len(PALETTE)]


def _fmt(value: Any, spec: str = "+.3f") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return format(value, spec)


def _boundary_name(geometry: str) -> str:
    return "token boundary" if geometry == "h3" else "GOP boundary"


def _vertical_lines(xs: np.ndarray, lo: float, hi: float) -> tuple[list[Any], list[Any]]:
    """x, y of one line trace drawing a vertical segment at every x (None breaks the line)."""
    px: list[Any] = []
    py: list[Any] = []
    for x in xs.tolist():
        px += [x, x, None]
        py += [lo, hi, None]
    return px, py


def prepare_bias_plot(analysis: LumaAnalysis) -> go.Figure:
    """bias(t) against every reference, frames coloured by slot, token boundaries marked.

    Returns
    -------
    Figure with x = frame_index: one line trace ``bias vs <label>`` per reference (y = bias in
    levels), one marker trace ``slot s`` per slot of the first reference's frames (customdata
    = position, chunk, latent), a ``token boundary`` (or ``GOP boundary``) trace of vertical
    segments at t − 0.5 for every boundary frame, and a shaded ``first window`` rectangle
    (latent model) over the frames before steady state.
    """
    report = analysis.report
    layout = report.layout
    t = report.frames.frame_index
    fig = go.Figure()
    for rep in analysis.reports:
        label = rep.frames.reference_label
        fig.add_trace(
            go.Scatter(
                x=t,
                y=rep.bias,
                mode="lines",
                name=f"bias vs {label}",
                line={
                    "color": "#333" if label == "reference" else "#888",
                    "width": 1,
                    "dash": REFERENCE_DASH.get(label, "dash"),
                },
                hovertemplate=f"frame %{{x}}<br>bias vs {label} %{{y:.3f}}<extra></extra>",
            )
        )
    for slot in np.unique(layout.slot):
        sel = layout.slot == slot
        fig.add_trace(
            go.Scatter(
                x=t[sel],
                y=report.bias[sel],
                mode="markers",
                name=f"slot {int(slot)}",
                marker={"color": slot_colour(int(slot)), "size": 6},
                customdata=np.stack([layout.position[sel], layout.chunk[sel], layout.latent[sel]], axis=1),
                hovertemplate=(
                    "frame %{x}<br>bias %{y:.3f}<br>position %{customdata[0]}, chunk %{customdata[1]}, "
                    "latent %{customdata[2]}<extra>slot " + str(int(slot)) + "</extra>"
                ),
            )
        )
    finite = np.concatenate([r.bias[np.isfinite(r.bias)] for r in analysis.reports])
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
    if hi - lo < 1e-6:
        lo, hi = lo - 0.5, hi + 0.5
    bounds = t[layout.is_boundary]
    if bounds.size:
        px, py = _vertical_lines(bounds - 0.5, lo, hi)
        fig.add_trace(
            go.Scatter(
                x=px,
                y=py,
                mode="lines",
                name=_boundary_name(layout.geometry),
                line={"color": BOUNDARY_COLOUR, "width": 1},
                hoverinfo="skip",
            )
        )
    head = t[~layout.is_steady]
    if head.size:
        fig.add_shape(
            type="rect",
            name="first window",
            xref="x",
            yref="paper",
            x0=float(head.min()) - 0.5,
            x1=float(head.max()) + 0.5,
            y0=0,
            y1=1,
            fillcolor=FIRST_WINDOW_FILL,
            line={"width": 0},
            layer="below",
        )
    s = report.summary()
    apply_style(fig)
    fig.update_layout(
        **_titled(
            f"bias(t) = meanY(test) − meanY({report.frames.reference_label}): "
            f"p95 all {_fmt(s['p95_all'], '.3f')}, steady {_fmt(s['p95_steady'], '.3f')}, "
            f"jump 0→1 {_fmt(s['jump_0_1'])}",
            half=False,
        ),
        xaxis_title="frame index",
        yaxis_title="bias (levels)",
        height=420,
    )
    return fig


def prepare_stacked_plot(report: LumaReport) -> go.Figure:
    """The stacked chunk view: bias by in-chunk position r, one line per chunk, and their mean.

    Returns
    -------
    Figure with x = r (0..chunk length − 1): one ``chunk c`` line per stacked chunk (y = that
    chunk's bias row, NaN where a chunk has no frame at r) and a ``mean`` trace whose markers
    are coloured by the slot of each position; tick labels read ``r`` over ``s<slot>``.
    """
    stacked = report.stacked
    positions = np.arange(stacked.bias.shape[1])
    fig = go.Figure()
    for row, chunk in zip(stacked.bias, stacked.chunk, strict=True):
        fig.add_trace(
            go.Scatter(
                x=positions,
                y=row,
                mode="lines+markers",
                name=f"chunk {int(chunk)}",
                line={"width": 1},
                marker={"size": 4},
                opacity=0.55,
            )
        )
    if stacked.chunk.size:
        with np.errstate(all="ignore"):
            mean = np.nanmean(stacked.bias, axis=0)
        colours = [slot_colour(s) if s >= 0 else "#999" for s in stacked.slot_by_position.tolist()]
        fig.add_trace(
            go.Scatter(
                x=positions,
                y=mean,
                mode="lines+markers",
                name="mean",
                line={"color": "black", "width": 3},
                marker={"color": colours, "size": 10, "line": {"color": "black", "width": 1}},
                customdata=stacked.slot_by_position,
                hovertemplate="r %{x} (slot %{customdata})<br>mean bias %{y:.3f}<extra></extra>",
            )
        )
    labels = [f"{r}<br>s{s}" if s >= 0 else str(r) for r, s in enumerate(stacked.slot_by_position.tolist())]
    first = "third" if report.layout.stack_from_chunk == 2 else "first"
    unit = "chunk" if report.layout.geometry == "h3" else "GOP"
    apply_style(fig)
    fig.update_layout(
        **_titled(f"stacked {unit}s from the {first} on: bias by position r (and slot)"),
        xaxis={
            "title": f"in-{unit} position r / slot",
            "tickmode": "array",
            "tickvals": positions,
            "ticktext": labels,
        },
        yaxis_title="bias (levels)",
        height=400,
    )
    return fig


SLOT_COLUMNS: tuple[str, ...] = ("vs", "slot", "frames", "mean bias", "std", "gain a", "gain b")
SLOT_POSITION_COLUMNS: tuple[str, ...] = ("vs", "slot", "position", "frames", "mean bias", "std")


def prepare_slot_table(analysis: LumaAnalysis, *, by_position: bool = False, digits: int = 4) -> pd.DataFrame:
    """Per-slot steady-state bias against every reference, with the slot's cell gain fit.

    Returns
    -------
    DataFrame with columns ``SLOT_COLUMNS`` (or ``SLOT_POSITION_COLUMNS`` with ``by_position``):
    one row per (reference, slot[, position]); ``frames`` counts the steady-state frames;
    ``gain a``/``gain b`` are the slot's d ≈ a + b·x fit over cell luma (NaN if none).
    """
    rows: list[dict[str, Any]] = []
    for rep in analysis.reports:
        table = rep.slot_positions if by_position else rep.slots
        gains = {int(s): (a, b) for s, a, b in zip(rep.gain.slot, rep.gain.a, rep.gain.b, strict=True)}
        for i in range(table.slot.shape[0]):
            slot = int(table.slot[i])
            row: dict[str, Any] = {"vs": rep.frames.reference_label, "slot": slot}
            if by_position:
                row["position"] = int(table.position[i])
            row |= {
                "frames": int(table.count[i]),
                "mean bias": round(float(table.mean[i]), digits),
                "std": round(float(table.std[i]), digits),
            }
            if not by_position:
                a, b = gains.get(slot, (math.nan, math.nan))
                row |= {"gain a": round(float(a), digits), "gain b": round(float(b), digits + 2)}
            rows.append(row)
    columns = SLOT_POSITION_COLUMNS if by_position else SLOT_COLUMNS
    return pd.DataFrame(rows, columns=list(columns))


def gain_points(report: LumaReport, slot: int, *, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Cell luma of the test (x) and the difference d of a steady-state slot, every ``stride``-th cell.

    Returns
    -------
    (x, d): two (m,) float64 arrays in frame, row, column order.
    """
    x_all, d_all = report.frames.cell_luma()
    sel = report.layout.is_steady & (report.layout.slot == slot)
    return x_all[sel].reshape(-1)[::stride], d_all[sel].reshape(-1)[::stride]


def prepare_gain_scatter(report: LumaReport, *, max_points: int = MAX_GAIN_POINTS) -> go.Figure:
    """The cell gain analysis: per steady-state slot, cell luma x against d = test − reference.

    Returns
    -------
    Figure with, per slot of ``report.gain``, a ``slot s cells`` marker trace (x = test cell luma,
    y = d, levels; at most ``max_points`` cells in all, every k-th cell) and a ``slot s fit``
    line a + b·x over the slot's x range. A constant offset shows as a flat line (b ≈ 0), a
    gain error as a sloped one.
    """
    x_all, _ = report.frames.cell_luma()
    steady = report.layout.is_steady
    total = int(x_all[steady].size)
    stride = max(1, math.ceil(total / max(1, max_points)))
    fig = go.Figure()
    for i, slot in enumerate(report.gain.slot.tolist()):
        x, d = gain_points(report, slot, stride=stride)
        colour = slot_colour(slot)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=d,
                mode="markers",
                name=f"slot {slot} cells",
                legendgroup=f"slot {slot}",
                marker={"color": colour, "size": 3, "opacity": 0.35},
                hovertemplate="x %{x:.1f}<br>d %{y:.3f}<extra>slot " + str(slot) + "</extra>",
            )
        )
        if x.size:
            a, b = float(report.gain.a[i]), float(report.gain.b[i])
            xs = np.asarray([float(x.min()), float(x.max())])
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=a + b * xs,
                    mode="lines",
                    name=f"slot {slot} fit",
                    legendgroup=f"slot {slot}",
                    line={"color": colour, "width": 3},
                    hovertemplate=f"d = {a:+.3f} {b:+.5f}·x<extra>slot {slot}</extra>",
                )
            )
    cell = report.frames.cell
    shown = "" if stride == 1 else f" (every {ordinal(stride)} of {total} cells shown)"
    apply_style(fig)
    fig.update_layout(
        **_titled(f"gain per slot: {cell}×{cell} cells, d = test − ref vs x, fit d ≈ a + b·x{shown}"),
        xaxis_title="test cell luma x (levels)",
        yaxis_title="d (levels)",
        height=420,
    )
    return fig


def prepare_summary(analysis: LumaAnalysis, *, analysis_id: str | None = None) -> str:
    """Markdown: inputs, geometry and the headline figures against every reference."""
    g = analysis.geometry
    params = ", ".join(f"{k} {v}" for k, v in g.items() if k != "name")
    head = f"Analysis **{analysis_id}** · " if analysis_id else ""
    lines = [
        f"{head}test `{analysis.test_name}` · geometry **{g['name']}**" + (f" ({params})" if params else "")
    ]
    for rep in analysis.reports:
        s = rep.summary()
        f = rep.frames
        lines.append(
            f"- vs {f.reference_label} `{f.reference_name}`: {s['frames']} frames {f.width}×{f.height}"
            f"{' (truncated)' if f.truncated else ''}, mean bias {_fmt(s['mean_bias'])}, "
            f"p95 all {_fmt(s['p95_all'], '.3f')}, p95 steady {_fmt(s['p95_steady'], '.3f')}, "
            f"jump 0→1 {_fmt(s['jump_0_1'])}, Y-PSNR "
            f"{'inf' if s['y_psnr_db'] is None else format(s['y_psnr_db'], '.2f')} dB"
        )
    return "\n".join(lines)


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if isinstance(value, datetime) else ""


def _name(path: Any) -> str:
    return str(path).replace("\\", "/").rsplit("/", 1)[-1] if path else "–"


def prepare_analysis_choices(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(label, analysis_id) pairs for a list of stored analyses (``store.list_luma_analyses()``)."""
    out = []
    for r in rows:
        source = "" if r.get("source") in (None, "analyze") else f" [{r['source']}]"
        out.append(
            (
                f"{r['analysis_id']} · {_name(r['test_path'])} vs {_name(r['reference_path'])} · "
                f"{(r.get('geometry') or {}).get('name', '?')} · {r.get('frames')} frames · "
                f"p95 {_fmt(r.get('p95_all'), '.3f')}{source} · {_when(r.get('created_at'))}",
                str(r["analysis_id"]),
            )
        )
    return out


def prepare_fit_choices(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(label, fit_id) pairs for stored fits (``store.list_luma_fits()``)."""
    return [
        (
            f"{r['fit_id']} · {(r.get('geometry') or {}).get('name', '?')} · {r.get('coefficient_count')} "
            f"coefficients · train {len(r.get('train') or [])}, test {len(r.get('test') or [])} · "
            f"{_when(r.get('created_at'))}",
            str(r["fit_id"]),
        )
        for r in rows
    ]


FIT_COLUMNS: tuple[str, ...] = (
    "group",
    "frames",
    "cells",
    "rms before",
    "rms after",
    "rms constant-only",
    "cut",
    "bias before",
    "bias after",
)


def prepare_fit_table(result: FitResult, *, digits: int = 4) -> pd.DataFrame:
    """Held-out residuals per slot group: RMS before, after the fit and after constant-only.

    Returns
    -------
    DataFrame with columns ``FIT_COLUMNS`` (empty when the fit had no held-out analyses);
    ``cut`` = 1 − rms after / rms before.
    """
    if result.evaluation is None:
        return pd.DataFrame(columns=list(FIT_COLUMNS))
    ev = result.evaluation
    rows = [
        {
            "group": ev.group[i],
            "frames": int(ev.frames[i]),
            "cells": int(ev.cells[i]),
            "rms before": round(float(ev.rms_before[i]), digits),
            "rms after": round(float(ev.rms_after[i]), digits),
            "rms constant-only": round(float(ev.rms_constant[i]), digits),
            "cut": round(float(ev.reduction[i]), digits),
            "bias before": round(float(ev.bias_before[i]), digits),
            "bias after": round(float(ev.bias_after[i]), digits),
        }
        for i in range(len(ev.group))
    ]
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))


def prepare_fit_plot(result: FitResult) -> go.Figure:
    """Before/after of a fit on the held-out analyses: RMS residual per slot group.

    Returns
    -------
    Figure with three bar traces over the groups (``frame 0``, ``first window``, ``slot s`` …):
    ``before``, ``after fit`` and ``constant-only`` (y = RMS over cells of the luma
    difference, levels). Empty, with a title saying so, when there were no held-out analyses.
    """
    fig = go.Figure()
    ev = result.evaluation
    if ev is None:
        fig.update_layout(**_titled("no held-out analyses: choose some as the test set to see before/after"))
        return fig
    groups = list(ev.group)
    for name, values, colour in (
        ("before", ev.rms_before, COLOURS["before"]),
        ("after fit", ev.rms_after, COLOURS["after"]),
        ("constant-only", ev.rms_constant, COLOURS["neutral"]),
    ):
        fig.add_trace(go.Bar(x=groups, y=values, name=name, marker_color=colour))
    apply_style(fig)
    fig.update_layout(
        barmode="group",
        **_titled(
            f"held-out RMS per group: {result.model.coefficient_count} coefficients, "
            f"train {len(result.train)} / test {len(result.test)} clips"
        ),
        yaxis_title="RMS of cell luma difference (levels)",
        height=380,
    )
    return fig


def prepare_before_after_plot(before: LumaAnalysis, after: LumaAnalysis) -> go.Figure:
    """bias(t) of a test video before and after the correction, against the first reference.

    Returns
    -------
    Figure with x = frame_index and two line traces, ``before`` and ``after`` (y = bias in
    levels), plus a ``zero`` reference line.
    """
    fig = go.Figure()
    for name, analysis, colour in (("before", before, COLOURS["before"]), ("after", after, COLOURS["after"])):
        rep = analysis.report
        fig.add_trace(
            go.Scatter(
                x=rep.frames.frame_index,
                y=rep.bias,
                mode="lines+markers",
                name=name,
                line={"color": colour, "width": 1.5},
                marker={"size": 4},
            )
        )
    t = before.report.frames.frame_index
    if t.size:
        fig.add_trace(
            go.Scatter(
                x=[int(t.min()), int(t.max())],
                y=[0.0, 0.0],
                mode="lines",
                name="zero",
                line={"color": "#999", "width": 1, "dash": "dot"},
                hoverinfo="skip",
            )
        )
    b, a = before.report.summary(), after.report.summary()
    apply_style(fig)
    fig.update_layout(
        **_titled(
            f"bias(t) before → after correction: "
            f"p95 all {_fmt(b['p95_all'], '.3f')} → {_fmt(a['p95_all'], '.3f')}, "
            f"mean |bias| {_fmt(b['mean_abs_bias'], '.3f')} → {_fmt(a['mean_abs_bias'], '.3f')}"
        ),
        xaxis_title="frame index",
        yaxis_title="bias (levels)",
        height=380,
    )
    return fig


def prepare_before_after_slots(before: LumaAnalysis, after: LumaAnalysis) -> go.Figure:
    """Per-slot steady-state mean bias before and after the correction (first reference).

    Returns
    -------
    Figure with two bar traces, ``before`` and ``after``, x = ``slot s`` labels, y = mean bias.
    """
    fig = go.Figure()
    for name, analysis, colour in (("before", before, COLOURS["before"]), ("after", after, COLOURS["after"])):
        slots = analysis.report.slots
        fig.add_trace(
            go.Bar(
                x=[f"slot {int(s)}" for s in slots.slot],
                y=slots.mean,
                name=name,
                marker_color=colour,
                error_y={"type": "data", "array": slots.std, "visible": True},
            )
        )
    apply_style(fig)
    fig.update_layout(
        barmode="group",
        **_titled("steady-state mean bias per slot before → after (error bars: std over frames)"),
        yaxis_title="mean bias (levels)",
        height=360,
    )
    return fig
