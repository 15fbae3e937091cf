"""Per-frame signal plots synced to the viewer: bits, kept blocks, coverage and luma mean per frame."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from backend.pipeline import RunResult
from backend.render import anchor_rows, kept_blocks_by_row
from views.figure_style import FigureDicts
from views.inspector.timeline import CURSOR_NAME, cursor_shapes

__all__ = ["CURSOR_NAME", "per_candidate_series", "prepare_signal_plots", "signal_plot_dicts"]


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
    return {
        "frame_index": result.candidates.frame_indices.astype(np.int64),
        "kept_blocks": kept,
        "coverage": coverage,
        "luma_mean": result.decoded.luma_means if n else np.zeros(0),
    }


ROW_TITLES: tuple[str, ...] = (
    "bits per<br>frame (kbit)",
    "kept<br>blocks",
    "coverage<br>(share)",
    "luma mean<br>(Y, 0–255)",
)
"""Each row's y title, two short lines: a rotated title has only its row's height to fit in."""
PLOT_HEIGHT_PX = 560
_MARGIN = {"l": 70, "r": 20, "t": 10, "b": 45}
_GAP = 0.04
"""Space between rows, as a share of the plot area's height."""


def _padded_range(values: np.ndarray, *, from_zero: bool) -> list[float]:
    """A y range holding every value with 8 % headroom (from 0 for counts and sizes), so a lone
    spike such as an I-frame's size is drawn whole, not on the plot's edge."""
    finite = values[np.isfinite(values)] if values.size else values
    if finite.size == 0:
        return [0.0, 1.0]
    lo, hi = (0.0 if from_zero else float(finite.min())), float(finite.max())
    pad = 0.08 * max(hi - lo, abs(hi) * 0.05, 1e-9)
    return [lo if from_zero else lo - pad, hi + pad]


def prepare_signal_plots(result: RunResult, *, cursor_frame_index: int | None = None) -> go.Figure:
    """:func:`signal_plot_dicts` as a plotly Figure (exports, tests)."""
    return signal_plot_dicts(result, cursor_frame_index=cursor_frame_index).figure()


def signal_plot_dicts(result: RunResult, *, cursor_frame_index: int | None = None) -> FigureDicts:
    """Four stacked per-frame plots sharing x = frame_index.

    Rows (top to bottom, y axes ``y`` … ``y4``, each over its own x axis ``x`` … ``x4``, all
    matching ``x``): ``bits per frame`` (packet size × 8, every frame, kbit), ``kept blocks`` and
    ``coverage`` (share of the frame's patches in a canvas, 0–1) per candidate frame, ``luma
    mean`` (Y, 0–255) per candidate frame. Every row has vertical grid lines and its y range
    holds its largest value; tick labels and the ``frame_index`` title sit under the bottom row
    only. A vertical line named ``cursor`` spans all four at ``cursor_frame_index``. Built as one
    figure with four y domains (plotly's make_subplots costs ~0.3 s here).
    """
    series = per_candidate_series(result)
    fids = series["frame_index"]
    order = np.argsort(fids, kind="stable")
    x = fids[order]
    sizes = result.info.packet_size_bytes.astype(np.float64) * 8 / 1000
    rows = (
        (np.arange(sizes.size), sizes, "bits per frame (kbit)", "%{y:.1f} kbit"),
        (x, series["kept_blocks"][order].astype(np.float64), "kept blocks", "%{y} blocks"),
        (x, series["coverage"][order], "coverage (share)", "%{y:.3f} of the patches"),
        (x, series["luma_mean"][order], "luma mean (Y)", "Y %{y:.1f}"),
    )
    traces: list[dict[str, Any]] = []
    layout: dict[str, Any] = {}
    height = (1.0 - _GAP * 3) / 4
    last = len(rows)
    for i, (xs, ys, name, fmt) in enumerate(rows):
        suffix = "" if i == 0 else str(i + 1)
        traces.append(
            {
                "type": "scatter",
                "x": xs,
                "y": ys,
                "mode": "lines",
                "line": {"width": 1.5, "shape": "hv" if i == 0 else "linear"},
                "name": name,
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "hovertemplate": "frame %{x}<br>" + fmt + "<extra></extra>",
            }
        )
        top = 1.0 - i * (height + _GAP)
        layout[f"yaxis{suffix}"] = {
            "anchor": f"x{suffix}",
            "domain": [max(0.0, round(top - height, 6)), round(top, 6)],
            "title": {"text": ROW_TITLES[i], "font": {"size": 11}},
            "range": [0.0, 1.04] if i == 2 else _padded_range(np.asarray(ys, np.float64), from_zero=i < 3),
        }
        bottom = i + 1 == last
        layout[f"xaxis{suffix}"] = {
            "anchor": f"y{suffix}",
            "range": [-0.5, max(int(sizes.size), 1) - 0.5],
            "showticklabels": bottom,
        } | ({"title": {"text": "frame_index"}} if bottom else {"matches": "x"} if i else {})
    layout["xaxis4"]["matches"] = "x"
    layout |= {
        "shapes": cursor_shapes(cursor_frame_index),
        "height": PLOT_HEIGHT_PX,
        "showlegend": False,
        "hovermode": "x",
        "margin": dict(_MARGIN),
    }
    # Plain dicts, unvalidated (FigureDicts): the app redraws these plots on every re-selection.
    return FigureDicts(traces, layout)
