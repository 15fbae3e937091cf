"""The coverage audit as a figure: per-frame coverage and never-observed spans, staleness, its map."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from views.figure_style import COLOURS, apply_style, integer_axis_props

if TYPE_CHECKING:
    from backend.audit import CoverageAudit
    from backend.pipeline import RunResult

COVERAGE_NAME = "coverage"
SPANS_NAME = "never observed"
MEAN_NAME = "mean staleness"
MAX_NAME = "max staleness"
MAP_NAME = "staleness map"
"""Trace names, in drawing order (the spans' shading goes under the coverage line)."""
SPAN_FILL = "rgba(153, 153, 153, 0.40)"
"""The never-observed spans' shade: :data:`views.figure_style.GREY`, translucent."""
COVERAGE_TOP = 1.05
"""Top of the coverage axis (shares 0–1): a fully covered frame's line stays clear of the edge, and
the spans are shaded over the axis' whole height."""
ROWS: dict[str, tuple[float, float]] = {
    "coverage": (0.74, 1.0),
    "staleness": (0.43, 0.67),
    "map": (0.0, 0.31),
}
"""Each panel's share of the plot's height (plotly's paper coordinates), top to bottom."""
PANEL_TITLES: dict[str, str] = {
    "coverage": "(a) share of each frame's patch positions covered",
    "staleness": "(b) frames since each position was last covered",
    "map": "(c) each position's worst staleness over the video",
}
"""Each panel's label, above its top left corner."""
MAP_COLOURSCALE = "Cividis"
"""The map's colours: sequential and readable with colour-vision deficiencies, as Okabe–Ito."""
SCREEN_HEIGHT_PX = 760
PAPER_HEIGHT_PX = 940
"""Three panels and a legend under them (the paper figure is 700 px wide, as every export)."""


def frame_times(
    audit: CoverageAudit, frame_secs: np.ndarray | None = None, frame_secs_step: float | None = None
) -> tuple[np.ndarray, float]:
    """(F,) seconds of each frame from the first and one frame's duration.

    Parameters
    ----------
    audit : CoverageAudit
        The audit the times are for (its ``frames`` and ``duration_secs``).
    frame_secs : numpy.ndarray, optional
        (F,) the audit source's ``frame_secs``; None: ``frame_index · step``.
    frame_secs_step : float, optional
        The source's ``frame_secs_step``; None: ``duration_secs / F``, which is 1 / fps exactly
        when the frame rate is known (the audit's duration is then F / fps).

    Returns
    -------
    tuple of (numpy.ndarray, float)
        float64 (F,) seconds and the step.
    """
    frames = int(audit.frames)
    step = float(frame_secs_step) if frame_secs_step is not None else audit.duration_secs / max(frames, 1)
    if frame_secs is None:
        return np.arange(frames, dtype=np.float64) * step, step
    secs = np.asarray(frame_secs, np.float64)
    if secs.shape != (frames,):
        raise ValueError(
            f"Invalid frame_secs ({secs.shape = }). Supported values are one time per frame, ({frames},)."
        )
    return secs, step


def span_edges_secs(audit: CoverageAudit, secs: np.ndarray, step: float) -> np.ndarray:
    """(s, 2) seconds each never-observed span is shaded over: from its first frame's time to its
    last frame's time plus one frame (so each is ``audit.span_secs`` wide)."""
    spans = audit.never_observed_spans
    if not spans.size:
        return np.zeros((0, 2), np.float64)
    return np.stack([secs[spans[:, 0]], secs[spans[:, 1]] + step], axis=1)


def _window(
    frames: int, secs: np.ndarray, step: float, window: tuple[int, int | None] | None
) -> tuple[int, int, list[float]]:
    """(first, stop) frame rows of ``window`` and the seconds range the time axes span."""
    start, stop = (
        (0, frames) if window is None else (int(window[0]), frames if window[1] is None else int(window[1]))
    )
    start, stop = max(0, start), min(frames, stop)
    if start >= stop:
        raise ValueError(
            f"Invalid frames ({window}). Supported values are frame_index ranges that meet 0 to {frames - 1}."
        )
    return start, stop, [float(secs[start]), float(secs[stop - 1] + step)]


def _span_trace(audit: CoverageAudit, edges: np.ndarray) -> dict[str, Any]:
    """One filled trace of a rectangle per span (None between them): thousands of spans stay one
    trace, and the shade has a legend entry."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    texts: list[str | None] = []
    for (first, last), (x0, x1), secs in zip(
        audit.never_observed_spans.tolist(), edges.tolist(), audit.span_secs, strict=True
    ):
        xs += [x0, x0, x1, x1, x0, None]
        ys += [0.0, COVERAGE_TOP, COVERAGE_TOP, 0.0, 0.0, None]
        frames = f"frame {first}" if first == last else f"frames {first}–{last}"
        texts += [f"{frames} ({secs:.3f} s)"] * 5 + [None]
    return {
        "type": "scatter",
        "name": SPANS_NAME,
        "x": xs,
        "y": ys,
        "mode": "lines",
        "fill": "toself",
        "fillcolor": SPAN_FILL,
        "line": {"width": 0, "color": SPAN_FILL},
        "text": texts,
        "hovertemplate": "never observed: %{text}<extra></extra>",
        "xaxis": "x",
        "yaxis": "y",
    }


def _series_traces(audit: CoverageAudit, secs: np.ndarray) -> list[dict[str, Any]]:
    """The per-frame coverage, mean and max staleness lines, each frame's value held until the next."""
    frame_index = np.arange(audit.frames)
    series = (
        (COVERAGE_NAME, audit.frame_coverage, "y", 3, "coverage %{y:.3f}"),
        (MEAN_NAME, audit.mean_staleness_frames, "y2", 2, "mean staleness %{y:.1f} frames"),
        (MAX_NAME, audit.max_staleness_frames, "y2", 2, "max staleness %{y} frames"),
    )
    return [
        {
            "type": "scatter",
            "name": name,
            "x": secs,
            "y": np.asarray(values),
            "customdata": frame_index,
            "mode": "lines",
            "line": {"shape": "hv", "color": COLOURS[name.replace(" ", "_")], "width": width},
            "hovertemplate": f"frame %{{customdata}} · %{{x:.3f}} s<br>{hover}<extra></extra>",
            "xaxis": "x" if yaxis == "y" else "x2",
            "yaxis": yaxis,
        }
        for name, values, yaxis, width, hover in series
    ]


def map_rectangles(audit: CoverageAudit) -> list[tuple[int, int, int, int, int]]:
    """``(r0, r1, c0, c1, value)`` rectangles (ends exclusive) tiling the picture's positions of the
    staleness map, each of one value: runs of equal cells along a row, stacked while the rows
    below repeat them (a 2×2 block is one rectangle). Positions off the picture are in none."""
    values = audit.staleness_map
    done: list[tuple[int, int, int, int, int]] = []
    open_rows: dict[tuple[int, int, int], int] = {}  # (c0, c1, value) → first row
    for r, row in enumerate(values.tolist()):
        cuts = [0, *(np.flatnonzero(np.diff(values[r])) + 1).tolist(), len(row)]
        runs = {(c0, c1, row[c0]) for c0, c1 in itertools.pairwise(cuts) if row[c0] >= 0}
        done += [(r0, r, *key) for key, r0 in open_rows.items() if key not in runs]
        open_rows = {key: open_rows.get(key, r) for key in runs}
    done += [(r0, values.shape[0], *key) for key, r0 in open_rows.items()]
    return sorted(done)


def map_colour(value: float, top: float) -> str:
    """The colour of ``value`` on the map's scale, 0 … ``top`` (:data:`MAP_COLOURSCALE`)."""
    return sample_colorscale(MAP_COLOURSCALE, [min(max(value / top, 0.0), 1.0) if top > 0 else 0.0])[0]


def _map_traces(audit: CoverageAudit) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The map as vector rectangles (svg and pdf stay free of bitmaps; a heatmap trace is an
    embedded image there), and an invisible marker per picture position carrying the hover and
    the colour bar."""
    low, high = ROWS["map"]
    top = float(max(audit.staleness_map.max(), 1))
    shapes = [
        {
            "type": "rect",
            "xref": "x3",
            "yref": "y3",
            "x0": c0 - 0.5,
            "x1": c1 - 0.5,
            "y0": r0 - 0.5,
            "y1": r1 - 0.5,
            "fillcolor": colour,
            # An outline of the fill's own colour closes the anti-aliased seams between neighbours.
            "line": {"width": 0.5, "color": colour},
            "layer": "below",
        }
        for r0, r1, c0, c1, value in map_rectangles(audit)
        for colour in [map_colour(value, top)]
    ]
    rows, cols = np.nonzero(audit.staleness_map >= 0)
    trace = {
        "type": "scatter",
        "name": MAP_NAME,
        "x": cols,
        "y": rows,
        "mode": "markers",
        "showlegend": False,
        "marker": {
            "symbol": "square",
            "opacity": 0,
            "color": audit.staleness_map[rows, cols],
            "colorscale": MAP_COLOURSCALE,
            "cmin": 0,
            "cmax": top,
            "showscale": True,
            "colorbar": {
                "title": {"text": "frames", "side": "top"},
                "len": high - low,
                "y": low,
                "yanchor": "bottom",
                "thickness": 14,
            },
        },
        "hovertemplate": "patch row %{y}, column %{x}<br>worst staleness %{marker.color} frames"
        "<extra></extra>",
        "xaxis": "x3",
        "yaxis": "y3",
    }
    return trace, shapes


def _layout(audit: CoverageAudit, x_range: list[float], staleness_top: float, title: str) -> dict[str, Any]:
    """Three panels: coverage over staleness sharing the seconds axis, the map under them."""
    hp, wp = audit.patch_grid
    time_axis = {"domain": [0.0, 1.0], "range": x_range}
    labels = [
        {
            "text": PANEL_TITLES[row],
            "xref": "paper",
            "yref": "paper",
            "x": 0.0,
            "y": ROWS[row][1],
            "xanchor": "left",
            "yanchor": "bottom",
            "yshift": 6,  # clear of the top tick label
            "showarrow": False,
        }
        for row in ROWS
    ]
    return {
        "title": {"text": title} if title else None,
        "annotations": labels,
        "xaxis": time_axis | {"anchor": "y", "showticklabels": False},
        "xaxis2": time_axis | {"anchor": "y2", "matches": "x", "title": {"text": "seconds"}},
        "xaxis3": {
            "anchor": "y3",
            "domain": [0.0, 1.0],
            "range": [-0.5, wp - 0.5],
            "constrain": "domain",
            "title": {"text": "patch column"},
            "showgrid": False,
            "zeroline": False,
        },
        "yaxis": {
            "anchor": "x",
            "domain": list(ROWS["coverage"]),
            "range": [0.0, COVERAGE_TOP],
            "title": {"text": "coverage"},
        },
        "yaxis2": {"anchor": "x2", "domain": list(ROWS["staleness"]), "title": {"text": "frames"}}
        | integer_axis_props(staleness_top),
        "yaxis3": {
            "anchor": "x3",
            "domain": list(ROWS["map"]),
            "range": [hp - 0.5, -0.5],  # row 0 at the top, as in the frame
            "scaleanchor": "x3",  # square cells
            "constrain": "domain",
            "title": {"text": "patch row"},
            "showgrid": False,
            "zeroline": False,
        },
    }


def prepare_coverage_figure(
    audit: CoverageAudit,
    *,
    frame_secs: np.ndarray | None = None,
    frame_secs_step: float | None = None,
    frames: tuple[int, int | None] | None = None,
    title: str = "",
    paper: bool = False,
) -> go.Figure:
    """What a run showed the model, in three panels (definitions: ``docs/audit.md``).

    Parameters
    ----------
    audit : CoverageAudit
        ``backend.audit.audit_coverage`` of the run.
    frame_secs : numpy.ndarray, optional
        (F,) seconds of each frame (the audit source's ``frame_secs``); None: see :func:`frame_times`.
    frame_secs_step : float, optional
        One frame's duration (the source's ``frame_secs_step``).
    frames : tuple of (int, int or None), optional
        (start, stop) frame_index range an export is limited to (stop exclusive, None: the end):
        the time axes span it and the staleness axis fits it. None: the whole video.
    title : str
        The figure's title ("" for none).
    paper : bool
        The paper style of :func:`views.figure_style.apply_style` (700 px wide, 20/18 px text).

    Returns
    -------
    go.Figure
        (a) on ``x``/``y``: ``coverage`` per frame against seconds (share 0–1, a step line) over
        the ``never observed`` trace, one grey rectangle per span from its first frame's time to
        its last frame's end; (b) on ``x2``/``y2`` (whole-number ticks from 0): ``mean staleness``
        and ``max staleness`` per frame; (c) on ``x3``/``y3``: the staleness map as a heatmap of
        vector rectangles (layout ``shapes``, :func:`map_rectangles`) coloured by
        :func:`map_colour` from 0 to the map's maximum, row 0 at the top, square cells, positions
        off the picture blank; the ``staleness map`` trace puts an invisible marker on each picture
        position for the hover and the colour bar. Every series trace has ``customdata`` =
        frame_index.
    """
    secs, step = frame_times(audit, frame_secs, frame_secs_step)
    start, stop, x_range = _window(audit.frames, secs, step, frames)
    edges = span_edges_secs(audit, secs, step)
    map_trace, map_shapes = _map_traces(audit)
    data = [_span_trace(audit, edges), *_series_traces(audit, secs), map_trace]
    top = float(audit.max_staleness_frames[start:stop].max())
    fig = go.Figure(data=data, layout=_layout(audit, x_range, top, title) | {"shapes": map_shapes})
    fig.update_layout(height=PAPER_HEIGHT_PX if paper else SCREEN_HEIGHT_PX)
    apply_style(fig, paper=paper)
    fig.update_annotations(font={"size": fig.layout.font.size})
    # Room above the top panel's label (and the title's line, when there is one).
    return fig.update_layout(margin={"t": (90 if title else 50) if paper else (80 if title else 40)})


def prepare_run_coverage_figure(
    result: RunResult, *, frames: tuple[int, int | None] | None = None, title: str = "", paper: bool = False
) -> go.Figure:
    """:func:`prepare_coverage_figure` of a run's coverage audit, on the run's own frame times.

    Parameters
    ----------
    result : RunResult
        A finished run of any selector (or an imported cvp folder).
    frames, title, paper
        As :func:`prepare_coverage_figure`.

    Returns
    -------
    go.Figure
        The three panels of :func:`prepare_coverage_figure`.
    """
    from backend.audit import AuditConfig, audit_coverage, audit_source_of_run

    source = audit_source_of_run(result)
    audit = audit_coverage(source, config=AuditConfig())
    return prepare_coverage_figure(
        audit,
        frame_secs=source.frame_secs,
        frame_secs_step=source.frame_secs_step,
        frames=frames,
        title=title,
        paper=paper,
    )
