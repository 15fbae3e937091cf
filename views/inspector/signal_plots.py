"""Per-frame signal plots synced to the viewer: bits, kept blocks, coverage and luma mean per frame."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from backend.pipeline import RunResult
from backend.render import anchor_rows, kept_blocks_by_row

CURSOR_NAME = "cursor"
LUMA_WEIGHTS = np.asarray([0.299, 0.587, 0.114], np.float32)
"""BT.601 luma of RGB."""


def per_candidate_series(result: RunResult) -> dict[str, np.ndarray]:
    """Per candidate row: ``frame_index``, ``kept_blocks``, ``coverage`` (share of the frame's
    patches that reach a canvas, 1 for an anchor) and ``luma_mean`` (BT.601 Y of the processed
    pixels, 0–255), each (n,)."""
    n = int(result.candidates.frame_indices.size)
    bh_n, bw_n = result.geometry.block_grid_hw
    kept = np.zeros(n, np.int64)
    for row, blocks in kept_blocks_by_row(result).items():
        kept[row] = len(blocks)
    coverage = kept / max(1, bh_n * bw_n)
    for row in anchor_rows(result):
        coverage[row] = 1.0
    pixels = result.decoded.pixels
    # Means over a strided view: a 4×4 subsample changes the mean by far less than a level.
    luma = np.asarray(pixels[:, ::4, ::4].mean(axis=(1, 2)) @ LUMA_WEIGHTS, np.float64) if n else np.zeros(0)
    return {
        "frame_index": result.candidates.frame_indices.astype(np.int64),
        "kept_blocks": kept,
        "coverage": coverage,
        "luma_mean": luma,
    }


def prepare_signal_plots(result: RunResult, *, cursor_frame_index: int | None = None) -> go.Figure:
    """Four stacked per-frame plots sharing x = frame_index.

    Rows: ``bits per frame`` (packet size × 8, every frame, kbit), ``kept blocks`` and
    ``coverage`` (%) per candidate frame, ``luma mean`` (Y, 0–255) per candidate frame; a
    vertical line named ``cursor`` spans all four at ``cursor_frame_index``.
    """
    series = per_candidate_series(result)
    fids = series["frame_index"]
    order = np.argsort(fids, kind="stable")
    x = fids[order]
    sizes = result.info.packet_size_bytes.astype(np.float64) * 8 / 1000
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.04)
    rows = (
        (np.arange(sizes.size), sizes, "bits per frame (kbit)", "%{y:.1f} kbit"),
        (x, series["kept_blocks"][order], "kept blocks", "%{y} blocks"),
        (x, series["coverage"][order] * 100, "coverage (%)", "%{y:.1f} %"),
        (x, series["luma_mean"][order], "luma mean (Y)", "Y %{y:.1f}"),
    )
    for i, (xs, ys, name, fmt) in enumerate(rows, start=1):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"width": 1.5, "shape": "hv" if i == 1 else "linear"},
                name=name,
                hovertemplate="frame %{x}<br>" + fmt + "<extra></extra>",
            ),
            row=i,
            col=1,
        )
        fig.update_yaxes(title_text=name, title_font={"size": 11}, row=i, col=1)
        if i < 4:
            fig.update_yaxes(rangemode="tozero", row=i, col=1)
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
        height=420,
        showlegend=False,
        hovermode="x",
        margin={"l": 70, "r": 20, "t": 10, "b": 30},
    )
    fig.update_xaxes(title_text="frame_index", row=4, col=1)
    return fig
