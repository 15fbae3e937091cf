"""Timeline view: packet sizes by picture type, candidates, moved keyframes, groups, kept blocks."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from backend.pipeline import RunResult
from backend.render import anchor_rows, kept_blocks_by_row

PICT_COLOURS: dict[str, str] = {"I": "#d62728", "P": "#1f77b4", "B": "#2ca02c", "?": "#9a9a9a"}
GROUP_FILLS = ("rgba(255, 165, 0, 0.12)", "rgba(128, 0, 128, 0.10)")
CURSOR_NAME = "cursor"


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


def prepare_timeline(result: RunResult, *, cursor_frame_index: int | None = None) -> go.Figure:
    """Per-frame timeline of a run.

    Parameters
    ----------
    result : a finished run.
    cursor_frame_index : frame the viewer shows; drawn as a vertical line named ``cursor``.

    Returns
    -------
    Figure with x = frame_index: one bar trace per picture type (I/P/B/?) holding the packet
    sizes of all P frames between them, a ``candidates`` marker trace (unique candidate
    frames), a ``moved keyframes`` trace (from → to segments), one filled ``group g`` trace per
    group spanning its first to last frame, ``kept blocks`` (line, secondary y) and
    ``anchors``. Every trace has a name and ``customdata`` = frame_index for click mapping.
    """
    sizes = result.info.packet_size_bytes.astype(np.int64)
    cand = result.candidates.frame_indices.astype(np.int64)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    # Group spans go first so the bars draw over them.
    _add_group_spans(fig, result, cand, top=float(sizes.max()) if sizes.size else 1.0)
    _add_packet_bars(fig, sizes, frame_pict_types(result))
    _add_candidates(fig, result, cand, sizes)
    _add_kept_and_anchors(fig, result, cand)
    if cursor_frame_index is not None:
        fig.add_shape(
            type="line",
            x0=cursor_frame_index,
            x1=cursor_frame_index,
            y0=0,
            y1=1,
            xref="x",
            yref="paper",
            line={"color": "black", "width": 2},
            name=CURSOR_NAME,
        )
    fig.update_layout(
        barmode="overlay",
        bargap=0,
        clickmode="event",
        hovermode="closest",
        margin={"l": 50, "r": 50, "t": 30, "b": 40},
        legend={"orientation": "h", "y": 1.12},
    )
    fig.update_xaxes(title_text="frame_index")
    fig.update_yaxes(title_text="packet size (bytes)", secondary_y=False)
    fig.update_yaxes(title_text="kept blocks", secondary_y=True, rangemode="tozero")
    return fig


def _add_group_spans(fig: go.Figure, result: RunResult, cand: np.ndarray, *, top: float) -> None:
    """One filled ``group g`` trace per group, from its first to its last candidate frame."""
    for k, spec in enumerate(result.groups.specs):
        first, last = int(cand[spec.start]), int(cand[spec.end - 1])
        x0, x1 = first - 0.5, last + 0.5
        fig.add_trace(
            go.Scatter(
                x=[x0, x1, x1, x0, x0],
                y=[0, 0, top, top, 0],
                fill="toself",
                fillcolor=GROUP_FILLS[k % len(GROUP_FILLS)],
                line={"width": 0},
                mode="lines",
                name=f"group {spec.group_index}",
                legendgroup="groups",
                showlegend=k == 0,
                hoverinfo="name",
                customdata=[first, last, last, first, first],
                meta={"kind": "group_span", "group_index": spec.group_index},
            ),
            secondary_y=False,
        )


def _add_packet_bars(fig: go.Figure, sizes: np.ndarray, types: np.ndarray) -> None:
    """One bar trace of packet sizes per picture type present."""
    frame_index = np.arange(sizes.size)
    for pict, colour in PICT_COLOURS.items():
        sel = types == pict
        if not sel.any():
            continue
        fig.add_trace(
            go.Bar(
                x=frame_index[sel],
                y=sizes[sel],
                name=f"{pict} frames",
                marker_color=colour,
                # One frame wide: plotly otherwise widens a trace's bars to the gap between
                # its own points, so two I-frames far apart would cover the whole plot.
                width=0.9,
                customdata=frame_index[sel],
                hovertemplate="frame %{customdata}<br>%{y} bytes<extra>" + pict + "</extra>",
                meta={"kind": "packet_size"},
            ),
            secondary_y=False,
        )


def _add_candidates(fig: go.Figure, result: RunResult, cand: np.ndarray, sizes: np.ndarray) -> None:
    """The ``candidates`` markers and, when keyframes moved, the ``moved keyframes`` segments."""
    n_frames = sizes.size
    unique_cand = np.unique(cand[(cand >= 0) & (cand < n_frames)])
    fig.add_trace(
        go.Scatter(
            x=unique_cand,
            y=sizes[unique_cand],
            mode="markers",
            marker={"symbol": "triangle-down", "size": 8, "color": "black"},
            name="candidates",
            customdata=unique_cand,
            hovertemplate="candidate frame %{customdata}<extra></extra>",
            meta={"kind": "candidates"},
        ),
        secondary_y=False,
    )
    if not result.candidates.moved:
        return
    xs: list[int | None] = []
    for a, b in result.candidates.moved:
        xs += [int(a), int(b), None]
    ys = [None if x is None else (int(sizes[x]) if 0 <= x < n_frames else None) for x in xs]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines+markers",
            marker={"symbol": ["x", "arrow-bar-right", "x"] * len(result.candidates.moved), "size": 10},
            line={"color": "#d62728", "dash": "dot"},
            name="moved keyframes",
            customdata=xs,
            hovertemplate="frame %{customdata}<extra>moved keyframe</extra>",
            meta={"kind": "moved_keyframes", "moved": [list(m) for m in result.candidates.moved]},
        ),
        secondary_y=False,
    )


def _add_kept_and_anchors(fig: go.Figure, result: RunResult, cand: np.ndarray) -> None:
    """``kept blocks`` per frame and the ``anchors`` markers, on the secondary y axis."""
    kept_x, kept_y = kept_blocks_per_frame(result)
    fig.add_trace(
        go.Scatter(
            x=kept_x,
            y=kept_y,
            mode="lines+markers",
            line={"color": "#ff4020"},
            marker={"size": 4},
            name="kept blocks",
            customdata=kept_x,
            hovertemplate="frame %{customdata}<br>%{y} kept blocks<extra></extra>",
            meta={"kind": "kept_blocks"},
        ),
        secondary_y=True,
    )
    anchors = np.unique(cand[sorted(anchor_rows(result))]) if result.selection.groups else np.zeros(0, int)
    fig.add_trace(
        go.Scatter(
            x=anchors,
            y=np.zeros(anchors.size),
            mode="markers",
            marker={"symbol": "star", "size": 11, "color": "#20c8ff"},
            name="anchors",
            customdata=anchors,
            hovertemplate="anchor frame %{customdata}<extra></extra>",
            meta={"kind": "anchors"},
        ),
        secondary_y=True,
    )
