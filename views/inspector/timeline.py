"""Timeline view: packet sizes by type, candidates, moved keyframes, groups, unseen spans, kept blocks."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from backend.pipeline import RunResult
from backend.render import anchor_rows, kept_blocks_by_row
from views.figure_style import (
    COLOURS,
    GROUP_FILLS,
    PAPER_HEIGHT_PX,
    PAPER_WIDTH_PX,
    FigureDicts,
    axis_style,
    integer_axis_props,
    integer_axis_range,
    merged,
    style_layout,
)
from views.inspector.keyframe_notes import avoidance_notes, moved_off
from views.wording import plural

PICT_COLOURS: dict[str, str] = {k: COLOURS[k] for k in ("I", "P", "B", "?")}
PICT_NAMES: dict[str, str] = {"I": "I", "P": "P", "B": "B", "?": "type unknown"}
"""Legend names of the packet bars: short, so the legend of a column-wide figure fits two rows."""
CURSOR_NAME = "cursor"
GROUPS_NAME = "groups"
NEVER_OBSERVED_NAME = "never observed"
NEVER_OBSERVED_FILL = "rgba(0, 0, 0, 0.12)"
"""The never-observed bands: a light grey shade, under the packet bars and the group spans' tints."""
RUG_HEIGHT = 0.95
RUG_TICK = 0.02
"""Half a candidate tick's height, as a share of the byte axis (the rug spans RUG_HEIGHT ± it)."""
KEPT_MARKERS_UP_TO = 150
"""The kept-blocks line marks each frame up to this many frames; beyond, the dots would crowd into
a band and cost the page's redraw ~0.1 ms each."""
"""The candidates rug sits at this fraction of the packet-size axis, above every bar."""


def frame_pict_types(result: RunResult) -> np.ndarray:
    """Picture type of every frame of the video.

    Types are decoded only for candidates; other frames are ``I`` when the bitstream flags
    them as keyframes and ``?`` otherwise.

    Returns
    -------
    (P,) str array, one entry per packet (presentation order, index = frame_index).
    """
    is_key = result.info.packet_is_keyframe
    types = np.where(is_key, "I", "?").astype("<U1")
    for fid, pict in zip(result.decoded.frame_indices.tolist(), result.decoded.pict_types, strict=True):
        if 0 <= fid < types.size and pict in PICT_COLOURS:
            types[fid] = pict
    return types


def kept_blocks_per_frame(result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """Kept-block count per candidate frame (summed over repeated candidates).

    Returns
    -------
    frame_indices : (u,) int, unique candidate frame indices, ascending.
    kept_blocks : (u,) int, kept blocks of each (0 for anchors, which are kept whole).
    """
    fids = result.candidates.frame_indices.astype(np.int64)
    per_row = np.zeros(fids.size, np.int64)
    for row, blocks in kept_blocks_by_row(result).items():
        per_row[row] = len(blocks)
    unique, inverse = np.unique(fids, return_inverse=True)
    return unique, np.bincount(inverse, weights=per_row, minlength=unique.size).astype(np.int64)


def prepare_timeline(
    result: RunResult,
    *,
    cursor_frame_index: int | None = None,
    frame_range: tuple[int, int | None] | None = None,
    paper: bool = False,
) -> go.Figure:
    """:func:`timeline_dicts` as a plotly Figure (exports, tests)."""
    return timeline_dicts(
        result, cursor_frame_index=cursor_frame_index, frame_range=frame_range, paper=paper
    ).figure()


def timeline_dicts(
    result: RunResult,
    *,
    cursor_frame_index: int | None = None,
    frame_range: tuple[int, int | None] | None = None,
    paper: bool = False,
) -> FigureDicts:
    """Per-frame timeline of a run.

    Parameters
    ----------
    result : a finished run.
    cursor_frame_index : frame the viewer shows; drawn as a vertical line named ``cursor``.
    frame_range : (start, stop) frame_index, stop exclusive or None for the end: only frames
        in it are drawn and the x axis spans it (an export's ``--frames``); None = every frame.
    paper : the paper style (larger fonts, :data:`views.figure_style.PAPER_WIDTH_PX` wide).

    Returns
    -------
    Figure with x = frame_index, in this trace order: one filled span per group (named
    ``groups``, ``meta.group_index`` its group; the legend shows the first); when the run left
    frames without a token, one bar trace named ``never observed`` with a full-height light band
    per never-observed span (``meta.spans`` the spans, clipped to the range; hover: its frames and
    seconds; see :mod:`backend.audit`); one bar trace per
    picture type (named by :data:`PICT_NAMES`) holding packet sizes, one frame wide with no gaps; a
    ``candidates`` rug of thin ticks along the top (every unique candidate frame); ``moved
    keyframes`` (from → to segments, one per keyframe avoidance moved off the candidates, see
    :func:`views.inspector.keyframe_notes.moved_off`) when there are any; ``kept blocks`` (line, secondary
    y) and ``anchors`` (stars at 0, secondary y). Both y axes start at 0 at the same height;
    kept blocks use whole-number ticks. Every trace has ``customdata`` = frame_index.
    """
    sizes = result.info.packet_size_bytes.astype(np.int64)
    lo, hi = _span(frame_range, sizes.size)
    shown = np.arange(lo, hi)
    top_bytes = float(sizes[lo:hi].max()) if hi > lo else 1.0
    # The rug sits above the tallest bar: the byte axis reaches past it by 1 / RUG_HEIGHT + a bit.
    needed_bytes = top_bytes / (RUG_HEIGHT - 0.04)
    byte_top, _, _ = integer_axis_range(needed_bytes)
    cand = result.candidates.frame_indices.astype(np.int64)
    # Plain dicts (views.figure_style.FigureDicts): the app redraws this on every re-selection.
    # Traces on the secondary axis name it: y2 overlays y on the right, as make_subplots lays out.
    traces = _group_spans(result, cand, lo, hi, top=float(byte_top))  # first: the bars draw over them
    traces += _never_observed(result, lo, hi, top=float(byte_top))
    traces += _packet_bars(sizes, frame_pict_types(result), shown, _bar_notes(result, lo, hi))
    traces += _candidates(result, cand, sizes, lo, hi, rug_y=RUG_HEIGHT * byte_top)
    kept_traces, kept_top = _kept_and_anchors(result, cand, lo, hi)
    traces += kept_traces
    shapes = cursor_shapes(cursor_frame_index)
    x_style, y_style = axis_style(paper=paper, x=True), axis_style(paper=paper)
    layout = style_layout(paper=paper) | {
        "shapes": shapes,
        "barmode": "overlay",
        "bargap": 0,
        "clickmode": "event",
        "hovermode": "closest",
        "margin": {"l": 80, "r": 80, "t": 20, "b": 20} if paper else {"l": 60, "r": 60, "t": 20, "b": 10},
        "xaxis": merged(
            x_style,
            {
                "anchor": "y",
                "domain": [0.0, 0.94],
                "title": {"text": "frame_index"},
                "range": [lo - 0.5, hi - 0.5],
            },
        ),
        "yaxis": merged(
            y_style,
            {"anchor": "x", "domain": [0.0, 1.0], "title": {"text": "packet size (bytes)"}}
            | integer_axis_props(needed_bytes, tickformat="~s"),
        ),
        "yaxis2": merged(
            y_style,
            {"anchor": "x", "overlaying": "y", "side": "right", "title": {"text": "kept blocks"}}
            | {"showgrid": False}
            | integer_axis_props(kept_top),
        ),
    }
    if paper:
        layout |= {"width": PAPER_WIDTH_PX, "height": PAPER_HEIGHT_PX}
    return FigureDicts(traces, layout)


def cursor_shapes(frame_index: int | None) -> list[dict[str, Any]]:
    """The playhead: a vertical line named ``cursor`` at ``frame_index`` over the whole plot
    (none for None). The browser moves it on frame steps (app/static/page.js, L.cursor)."""
    if frame_index is None:
        return []
    line = {"type": "line", "x0": frame_index, "x1": frame_index, "y0": 0, "y1": 1}
    return [
        line | {"xref": "x", "yref": "paper", "line": {"color": "black", "width": 2}, "name": CURSOR_NAME}
    ]


def _span(frame_range: tuple[int, int | None] | None, total: int) -> tuple[int, int]:
    """[lo, hi) frame_index span drawn: the range clipped to the video (every frame without one)."""
    if frame_range is None:
        return 0, total
    start, stop = frame_range
    hi = total if stop is None else min(int(stop), total)
    return min(max(int(start), 0), hi), hi


def _group_spans(
    result: RunResult, cand: np.ndarray, lo: int, hi: int, *, top: float
) -> list[dict[str, Any]]:
    """One filled span per group with a candidate in [lo, hi), from its first to its last frame."""
    traces: list[dict[str, Any]] = []
    for k, spec in enumerate(result.groups.specs):
        frames = cand[spec.start : spec.end]
        inside = frames[(frames >= lo) & (frames < hi)]
        if inside.size == 0:
            continue
        first, last = int(inside.min()), int(inside.max())
        x0, x1 = first - 0.5, last + 0.5
        traces.append(
            {
                "type": "scatter",
                "x": [x0, x1, x1, x0, x0],
                "y": [0, 0, top, top, 0],
                "fill": "toself",
                "fillcolor": GROUP_FILLS[k % len(GROUP_FILLS)],
                "line": {"width": 0},
                "mode": "lines",
                "name": GROUPS_NAME,
                "legendgroup": GROUPS_NAME,
                "showlegend": not traces,
                "hovertemplate": f"group {spec.group_index}: frames {first}–{last}<extra></extra>",
                "customdata": [first, last, last, first, first],
                "meta": {"kind": "group_span", "group_index": spec.group_index},
            }
        )
    return traces


def _never_observed(result: RunResult, lo: int, hi: int, *, top: float) -> list[dict[str, Any]]:
    """One bar trace holding a full-height band per never-observed span that reaches into [lo, hi),
    clipped to it (none when every frame there was observed).

    One trace for all spans, one bar each: the page redraws the timeline on every re-selection and
    every SVG element costs that redraw (see :func:`_candidates`); a bar, unlike a filled path,
    hovers with its own span's frames and seconds wherever the cursor is on it.
    """
    from backend.audit.cached import cached_run_audit

    audit = cached_run_audit(result).coverage
    spans, secs = audit.never_observed_spans, audit.span_secs
    inside = (spans[:, 1] >= lo) & (spans[:, 0] < hi)
    if not inside.any():
        return []
    spans, secs = spans[inside], secs[inside]
    first, last = np.maximum(spans[:, 0], lo), np.minimum(spans[:, 1], hi - 1)
    texts = [
        f"never observed: {_frames_text(int(a), int(b))} ({plural(int(b - a + 1), 'frame')}, {s:.3f} s)"
        for (a, b), s in zip(spans.tolist(), secs.tolist(), strict=True)
    ]
    return [
        {
            "type": "bar",
            "x": (first + last) / 2.0,
            "y": np.full(first.size, top),
            "base": 0,
            "width": (last - first + 1).astype(np.float64),
            "marker": {"color": NEVER_OBSERVED_FILL, "line": {"width": 0}},
            "name": NEVER_OBSERVED_NAME,
            "customdata": spans,
            "hovertext": texts,
            "hovertemplate": "%{hovertext}<extra></extra>",
            "meta": {"kind": "never_observed", "spans": np.stack([first, last], axis=1).tolist()},
        }
    ]


def _frames_text(first: int, last: int) -> str:
    return f"frame {first}" if first == last else f"frames {first}–{last}"


def _bar_notes(result: RunResult, lo: int, hi: int) -> dict[int, str]:
    """frame_index → its keyframe-avoidance note, for the keyframes and move targets in [lo, hi)."""
    frames = {int(k) for k in result.info.keyframe_indices}
    frames |= {int(k) for k in result.candidates.keyframe_indices}
    frames |= {int(b) for _, b in result.candidates.moved}
    shown = [f for f in sorted(frames) if lo <= f < hi]
    return {f: n for f, n in zip(shown, avoidance_notes(result, shown), strict=True) if n}


def _packet_bars(
    sizes: np.ndarray, types: np.ndarray, shown: np.ndarray, notes: dict[int, str]
) -> list[dict[str, Any]]:
    """One bar trace of packet sizes per picture type present among the ``shown`` frames; a bar's
    hover adds its frame's keyframe-avoidance note (``notes``)."""
    traces = []
    for pict, colour in PICT_COLOURS.items():
        frame_index = shown[types[shown] == pict]
        if frame_index.size == 0:
            continue
        traces.append(
            {
                "type": "bar",
                "x": frame_index,
                "y": sizes[frame_index],
                "name": PICT_NAMES[pict],
                # No outline: the template's thin white bar outline covers bars narrower than a
                # pixel or two, which is every bar of a long clip.
                "marker": {"color": colour, "line": {"width": 0}},
                # One frame wide: plotly otherwise widens a trace's bars to the gap between its
                # own points, so two I-frames far apart would cover the whole plot.
                "width": 1.0,
                "customdata": frame_index,
                "hovertext": [f"<br>{notes[f]}" if f in notes else "" for f in frame_index.tolist()],
                "hovertemplate": "frame %{customdata}<br>%{y} bytes%{hovertext}<extra>"
                + pict
                + " frame</extra>",
                "meta": {"kind": "packet_size"},
            }
        )
    return traces


def _candidates(
    result: RunResult,
    cand: np.ndarray,
    sizes: np.ndarray,
    lo: int,
    hi: int,
    *,
    rug_y: float,
) -> list[dict[str, Any]]:
    """The ``candidates`` rug and, when avoidance moved keyframes off the candidates, the ``moved
    keyframes`` segments: one per keyframe moved off, however often it was sampled; a keyframe the
    refill put back is a candidate and is not marked. Hover texts say what the info line says."""
    n_frames = sizes.size
    unique_cand = np.unique(cand[(cand >= lo) & (cand < hi)])
    notes = avoidance_notes(result, unique_cand.tolist())
    # One tick per candidate, all in one path: (x, below), (x, above), gap. A marker per candidate
    # is an SVG element each, and the page redraws the timeline on every re-selection (712 ticks
    # cost ~90 ms of a redraw; as one path a few).
    ticks = np.full((unique_cand.size, 3), None, dtype=object)
    ticks[:, 0] = ticks[:, 1] = unique_cand.tolist()
    texts = np.full((unique_cand.size, 3), "", dtype=object)
    texts[:, 0] = texts[:, 1] = [f" · {n}" if n else "" for n in notes]
    half = RUG_TICK * rug_y / RUG_HEIGHT
    rug = {
        "type": "scatter",
        "x": ticks.ravel(),
        "y": np.tile(np.asarray([rug_y - half, rug_y + half, None], dtype=object), unique_cand.size),
        "mode": "lines",
        # Thin translucent ticks: where every frame is a candidate they read as a grey band
        # with the bars still visible under it, not a solid black one.
        "line": {"width": 1, "color": "rgba(0, 0, 0, 0.6)"},
        "name": "candidates",
        "customdata": ticks.ravel(),
        "hovertext": texts.ravel(),
        "hovertemplate": "candidate frame %{customdata}%{hovertext}<extra></extra>",
        "meta": {"kind": "candidates"},
    }
    moved = [(a, b) for a, b in moved_off(result.candidates) if lo <= a < hi or lo <= b < hi]
    if not moved:
        return [rug]
    xs: list[int | None] = []
    texts: list[str] = []
    for (a, b), note in zip(moved, avoidance_notes(result, [b for _, b in moved]), strict=True):
        xs += [a, b, None]
        texts += [f"keyframe {a}: moved to frame {b}", f"frame {b}: {note}", ""]
    ys = [None if x is None else (int(sizes[x]) if 0 <= x < n_frames else None) for x in xs]
    segments = {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines+markers",
        "marker": {
            "symbol": ["x", "arrow-bar-right", "x"] * len(moved),
            "size": 10,
            "color": COLOURS["moved"],
        },
        "line": {"color": COLOURS["moved"], "dash": "dot"},
        "name": "moved keyframes",
        "customdata": xs,
        "hovertext": texts,
        "hovertemplate": "%{hovertext}<extra>keyframe avoidance</extra>",
        "meta": {"kind": "moved_keyframes", "moved": [list(m) for m in moved]},
    }
    return [rug, segments]


def _kept_and_anchors(
    result: RunResult, cand: np.ndarray, lo: int, hi: int
) -> tuple[list[dict[str, Any]], int]:
    """``kept blocks`` per frame and the ``anchors`` markers, on the secondary y axis; the largest count."""
    kept_x, kept_y = kept_blocks_per_frame(result)
    sel = (kept_x >= lo) & (kept_x < hi)
    kept_x, kept_y = kept_x[sel], kept_y[sel]
    kept = {
        "type": "scatter",
        "x": kept_x,
        "y": kept_y,
        "yaxis": "y2",
        "mode": "lines+markers" if kept_x.size <= KEPT_MARKERS_UP_TO else "lines",
        "line": {"color": COLOURS["kept"], "width": 1.5},
        "marker": {"size": 4, "color": COLOURS["kept"]},
        "name": "kept blocks",
        "customdata": kept_x,
        "hovertemplate": "frame %{customdata}<br>%{y} kept blocks<extra></extra>",
        "meta": {"kind": "kept_blocks"},
    }
    anchors = np.unique(cand[sorted(anchor_rows(result))]) if result.selection.groups else np.zeros(0, int)
    anchors = anchors[(anchors >= lo) & (anchors < hi)]
    stars = {
        "type": "scatter",
        "x": anchors,
        "y": np.zeros(anchors.size),
        "yaxis": "y2",
        "mode": "markers",
        "marker": {
            "symbol": "star",
            "size": 11,
            "color": COLOURS["anchor"],
            "line": {"width": 0.5, "color": "black"},
        },
        "cliponaxis": False,  # drawn whole on the zero line
        "name": "anchors",
        "customdata": anchors,
        "hovertemplate": "anchor frame %{customdata}<extra></extra>",
        "meta": {"kind": "anchors"},
    }
    return [kept, stars], int(kept_y.max()) if kept_y.size else 1
