"""Group stepper view: a table of groups and the readiness trace of one group with its stop decision."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from backend.pipeline import RunResult
from backend.records import ReadinessStep
from views.figure_style import (
    COLOURS,
    FigureDicts,
    axis_style,
    integer_axis_props,
    merged,
    series_colour,
    style_layout,
)

STOP_MARKER_NAME = "stop decision"


def _steps(result: RunResult, group_index: int) -> list[ReadinessStep]:
    return [s for s in result.groups.trace if s.group_index == group_index]


def prepare_group_table(result: RunResult) -> list[dict[str, Any]]:
    """One dict per group for the stepper's table.

    Returns
    -------
    list of dicts with ``group_index``, ``candidate_start`` (first candidate row),
    ``candidate_end`` (exclusive), ``first_frame_index``, ``last_frame_index``, ``length``
    (candidates in the group), ``anchor_frame_index`` (None when skipped), ``stop_reason``,
    ``threshold`` (the readiness threshold its trace used, else the run's), ``kept_blocks`` and
    ``skipped`` (True for groups the parity profile did not select from).
    """
    sel_by_group = {s.group_index: s for s in result.selection.groups}
    skipped = set(result.selection.skipped_group_indices)
    fids = result.candidates.frame_indices
    rows: list[dict[str, Any]] = []
    for spec in result.groups.specs:
        sel = sel_by_group.get(spec.group_index)
        steps = _steps(result, spec.group_index)
        rows.append(
            {
                "group_index": spec.group_index,
                "candidate_start": spec.start,
                "candidate_end": spec.end,
                "first_frame_index": int(fids[spec.start]),
                "last_frame_index": int(fids[spec.end - 1]),
                "length": spec.frame_count,
                "anchor_frame_index": sel.frame_indices[0] if sel else None,
                "stop_reason": spec.stop_reason,
                "threshold": float(steps[-1].threshold if steps else result.groups.threshold),
                "kept_blocks": int(sel.kept.shape[0]) if sel else 0,
                "skipped": spec.group_index in skipped or sel is None,
            }
        )
    return rows


def stop_step(result: RunResult, group_index: int) -> ReadinessStep | None:
    """The step that ended the group: the one decided ``stop``, else the last one tried.

    Groups end without a ``stop`` step when the candidates ran out (``tail_flush``) or the
    window hit its maximum length; their last step is where the scan ended.
    """
    steps = _steps(result, group_index)
    return next((s for s in steps if s.decision == "stop"), steps[-1] if steps else None)


VIEWED_NAME = "viewed"
"""The shape marking the viewed candidate on a readiness trace."""
READINESS_HEIGHT_PX = 560
_ROWS = {"score": [0.62, 1.0], "bins": [0.31, 0.55], "gain": [0.0, 0.24]}
"""y domains of the three rows: top-K sum against the threshold, bins, marginal gain."""


def viewed_x(row: int) -> int:
    """Where candidate ``row`` sits on a readiness trace: the window end once it was added
    (window ends are exclusive candidate indices)."""
    return int(row) + 1


def prepare_readiness_plot(
    result: RunResult, group_index: int, *, viewed_row: int | None = None
) -> go.Figure:
    """:func:`readiness_dicts` as a plotly Figure (exports, tests)."""
    return readiness_dicts(result, group_index, viewed_row=viewed_row).figure()


def readiness_dicts(result: RunResult, group_index: int, *, viewed_row: int | None = None) -> FigureDicts:
    """The readiness trace of one group.

    Parameters
    ----------
    result : a finished run.
    group_index : a group of ``result.groups.specs``.
    viewed_row : the candidate row the viewer shows; marked when it is in this group.

    Returns
    -------
    Figure with x = window end (exclusive candidate index), three rows sharing it, each with one
    meaning and its own y axis. Row 1 (``y``): ``top-K sum`` (line with markers) against the
    ``threshold`` (dashed black, drawn over it). Row 2 (``y2``, whole-number ticks from 0):
    ``covered bins`` (solid step line) against ``needed bins`` (dotted, another colour, drawn
    over it). Row 3 (``y3``): ``marginal gain`` per step. The ``stop decision`` star sits on
    the top-K sum. The viewed candidate is a vertical line named :data:`VIEWED_NAME` at
    :func:`viewed_x` over every row (``layout.meta.viewed_row``). Without a trace (fixed or
    adaptive_gop grouping) the figure holds one annotation saying so and no traces.
    """
    indices = [s.group_index for s in result.groups.specs]
    if group_index not in indices:
        raise ValueError(
            f"Invalid group_index ({group_index}). Supported values are {', '.join(map(str, indices))}."
        )
    steps = _steps(result, group_index)
    spec = result.groups.specs[indices.index(group_index)]
    if not steps:
        return FigureDicts.of(_no_trace_figure(result, group_index, spec.stop_reason))
    ends = [s.end for s in steps]
    frames = [s.frame_index_added for s in steps]
    hover = "end %{x} · frame %{customdata}<br>%{y:.4g}<extra>%{fullData.name}</extra>"
    # (field, name, mode, line style, axes). The references (threshold, needed bins) come after
    # the values they are read against, so where the two are equal the reference is drawn on top.
    lines = (
        ("topk_sum", "top-K sum", "lines+markers", {"color": series_colour(0), "width": 2}, "y"),
        ("threshold", "threshold", "lines", {"dash": "dash", "color": COLOURS["threshold"], "width": 2}, "y"),
        (
            "covered_bins",
            "covered bins",
            "lines+markers",
            {"shape": "hv", "color": COLOURS["P"], "width": 3},
            "y2",
        ),
        (
            "needed_bins",
            "needed bins",
            "lines",
            {"shape": "hv", "color": COLOURS["threshold"], "dash": "dot", "width": 2},
            "y2",
        ),
    )
    # Plain dicts (views.figure_style.FigureDicts): the app redraws this on every re-selection.
    traces: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "x": ends,
            "y": [getattr(s, field) for s in steps],
            "mode": mode,
            "line": line,
            "name": name,
            "customdata": frames,
            "hovertemplate": hover,
            "xaxis": "x" if yaxis == "y" else "x2",
            "yaxis": yaxis,
        }
        for field, name, mode, line, yaxis in lines
    ]
    traces.append(
        {
            "type": "bar",
            "x": ends,
            "y": [s.marginal_gain for s in steps],
            "name": "marginal gain",
            "marker": {"color": [COLOURS["passed"] if s.passed else COLOURS["failed"] for s in steps]},
            "customdata": frames,
            "hovertemplate": hover,
            "xaxis": "x3",
            "yaxis": "y3",
        }
    )
    stop = stop_step(result, group_index)
    assert stop is not None
    marker, note = _stop_marker(stop, spec.stop_reason)
    traces.append(marker)
    # Bins are counts: whole-number ticks from 0 (exports showed 0.136 … 3.191 here).
    bins_top = max(max(s.covered_bins, s.needed_bins) for s in steps)
    x_range = [spec.start + 0.5, max(spec.end, max(ends)) + 0.5]
    layout = _readiness_layout(group_index, note, bins_top, x_range)
    if viewed_row is not None and spec.start <= int(viewed_row) < spec.end:
        layout["shapes"] = [_viewed_shape(result, int(viewed_row), x_range)]
        # The page moves the mark as the viewer steps within the group (page.js L.cursor).
        layout["meta"] = {"viewed_row": int(viewed_row), "group_rows": [int(spec.start), int(spec.end)]}
    return FigureDicts(traces, layout)


def _viewed_shape(result: RunResult, row: int, x_range: list[float]) -> dict[str, Any]:
    """The vertical line at the viewed candidate, over all three rows, labelled with its frame;
    the label runs into the plot from the line (rightwards in the left half of ``x_range``)."""
    frame_index = int(result.candidates.frame_indices[row])
    left_half = viewed_x(row) <= (x_range[0] + x_range[1]) / 2
    return {
        "type": "line",
        "name": VIEWED_NAME,
        "xref": "x",
        "yref": "paper",
        "x0": viewed_x(row),
        "x1": viewed_x(row),
        "y0": 0,
        "y1": 1,
        "line": {"color": COLOURS["anchor"], "width": 3},
        "layer": "below",
        # Level text just above the line's top end, in the top margin clear of the stop decision's
        # note (plotly turns a vertical line's label along it by default: it ran out of the figure).
        "label": {
            "text": f"viewed: candidate {row} (frame {frame_index})",
            "textposition": "end",
            "textangle": 0,
            "font": {"size": 11, "color": "#333333"},
            "xanchor": "left" if left_half else "right",
            "yanchor": "bottom",
        },
    }


def _readiness_layout(
    group_index: int, note: dict[str, Any], bins_top: int, x_range: list[float]
) -> dict[str, Any]:
    """The readiness plot's layout: three rows sharing x (``x_range``), the bins' axis with
    whole-number ticks from 0 up to ``bins_top``, ``note`` the stop decision's annotation."""
    x_style, y_style = axis_style(x=True), axis_style()
    x_shared = x_style | {"domain": [0.0, 1.0], "range": x_range, "showticklabels": False}
    return merged(
        style_layout(),
        {
            "title": {"text": f"group {group_index}: readiness trace"},
            "height": READINESS_HEIGHT_PX,
            "hovermode": "x unified",
            "margin": {"l": 70, "r": 20, "t": 50, "b": 10},
            "annotations": [note],
            "xaxis": x_shared | {"anchor": "y"},
            "xaxis2": x_shared | {"anchor": "y2", "matches": "x"},
            "xaxis3": merged(
                x_style,
                {
                    "anchor": "y3",
                    "domain": [0.0, 1.0],
                    "range": x_range,
                    "matches": "x",
                    "title": {"text": "window end (candidate index, exclusive)"},
                },
            ),
            "yaxis": merged(
                y_style,
                {"anchor": "x", "domain": _ROWS["score"], "title": {"text": "top-K block<br>score sum"}},
            ),
            "yaxis2": merged(
                y_style,
                {"anchor": "x2", "domain": _ROWS["bins"], "title": {"text": "time bins"}}
                | integer_axis_props(bins_top),
            ),
            "yaxis3": merged(
                y_style, {"anchor": "x3", "domain": _ROWS["gain"], "title": {"text": "marginal<br>gain"}}
            ),
        },
    )


def _no_trace_figure(result: RunResult, group_index: int, stop_reason: str) -> go.Figure:
    """An empty figure whose one annotation says why the group has no readiness trace."""
    fig = go.Figure()
    # Other selectors group otherwise (llava-ov2: GOP modes; uniform: fixed runs of frames).
    mode = getattr(result.options, "grouping_mode", None) or getattr(result.options, "gop_mode", "fixed")
    fig.add_annotation(
        text=f"No readiness trace for group {group_index}: grouping mode "
        f"'{mode}' (stop reason: {stop_reason}).",
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        name="no_trace",
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _stop_marker(stop: ReadinessStep, stop_reason: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``stop decision`` star on the top-K sum, and its annotation naming the group's stop reason."""
    marker = {
        "type": "scatter",
        "x": [stop.end],
        "y": [stop.topk_sum],
        "mode": "markers",
        "marker": {
            "symbol": "star",
            "size": 16,
            "color": COLOURS["moved"],
            "line": {"width": 1, "color": "black"},
        },
        "name": STOP_MARKER_NAME,
        "customdata": [stop.frame_index_added],
        "text": [stop.reason],
        "hovertemplate": "%{text}<extra>" + stop.decision + "</extra>",
        "meta": {"decision": stop.decision},
        "xaxis": "x",
        "yaxis": "y",
    }
    note = {
        "x": stop.end,
        "y": stop.topk_sum,
        "xref": "x",
        "yref": "y",
        "text": f"{stop.decision}: {stop_reason}",
        "showarrow": True,
        "arrowhead": 2,
        # The stop is often the trace's last point, at the right edge: the text ends left of it
        # (centred on the arrow's tail it ran off the figure).
        "ax": -20,
        "ay": -30,
        "xanchor": "right",
    }
    return marker, note
