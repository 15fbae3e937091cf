"""Per-frame signal plots synced to the viewer: bits, kept blocks, coverage and luma mean per frame."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import plotly.graph_objects as go

from backend.pipeline import RunResult
from backend.render import anchor_rows, kept_blocks_by_row
from views.figure_style import plain_figure
from views.inspector.timeline import CURSOR_NAME, cursor_shapes

__all__ = ["CURSOR_NAME", "LUMA_WEIGHTS", "per_candidate_series", "prepare_signal_plots"]

LUMA_WEIGHTS = np.asarray([0.299, 0.587, 0.114], np.float32)
"""BT.601 luma of RGB."""


_LUMA: dict[int, tuple[Any, np.ndarray]] = {}


def _luma_means(pixels: np.ndarray) -> np.ndarray:
    """BT.601 luma mean of each frame, remembered per pixel array (re-selections share it)."""
    hit = _LUMA.get(id(pixels))
    if hit is not None and hit[0]() is pixels:
        return hit[1]
    # Means over a strided view: a 4×4 subsample changes the mean by far less than a level.
    luma = np.asarray(pixels[:, ::4, ::4].mean(axis=(1, 2)) @ LUMA_WEIGHTS, np.float64)
    _LUMA.clear()  # one run's frames at a time
    _LUMA[id(pixels)] = (weakref.ref(pixels), luma)
    return luma


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
        "luma_mean": _luma_means(result.decoded.pixels) if n else np.zeros(0),
    }


def prepare_signal_plots(result: RunResult, *, cursor_frame_index: int | None = None) -> go.Figure:
    """Four stacked per-frame plots sharing x = frame_index.

    Rows (top to bottom, y axes ``y`` … ``y4``): ``bits per frame`` (packet size × 8, every frame,
    kbit), ``kept blocks`` and ``coverage`` (%) per candidate frame, ``luma mean`` (Y, 0–255) per
    candidate frame; a vertical line named ``cursor`` spans all four at ``cursor_frame_index``.
    Built as one figure with four y domains (plotly's make_subplots costs ~0.3 s here).
    """
    series = per_candidate_series(result)
    fids = series["frame_index"]
    order = np.argsort(fids, kind="stable")
    x = fids[order]
    sizes = result.info.packet_size_bytes.astype(np.float64) * 8 / 1000
    rows = (
        (np.arange(sizes.size), sizes, "bits per frame (kbit)", "%{y:.1f} kbit"),
        (x, series["kept_blocks"][order], "kept blocks", "%{y} blocks"),
        (x, series["coverage"][order] * 100, "coverage (%)", "%{y:.1f} %"),
        (x, series["luma_mean"][order], "luma mean (Y)", "Y %{y:.1f}"),
    )
    traces: list[dict[str, Any]] = []
    layout: dict[str, Any] = {}
    gap, height = 0.04, (1.0 - 0.04 * 3) / 4
    for i, (xs, ys, name, fmt) in enumerate(rows):
        axis = "y" if i == 0 else f"y{i + 1}"
        traces.append(
            {
                "type": "scatter",
                "x": xs,
                "y": ys,
                "mode": "lines",
                "line": {"width": 1.5, "shape": "hv" if i == 0 else "linear"},
                "name": name,
                "yaxis": axis,
                "hovertemplate": "frame %{x}<br>" + fmt + "<extra></extra>",
            }
        )
        top = 1.0 - i * (height + gap)
        layout["yaxis" if i == 0 else f"yaxis{i + 1}"] = {
            "domain": [max(0.0, round(top - height, 6)), round(top, 6)],
            "title": {"text": name, "font": {"size": 11}},
            "rangemode": "tozero" if i < 3 else "normal",
        }
    layout |= {
        "shapes": cursor_shapes(cursor_frame_index),
        "height": 420,
        "showlegend": False,
        "hovermode": "x",
        "margin": {"l": 70, "r": 20, "t": 10, "b": 30},
        "xaxis": {"title": {"text": "frame_index"}},
    }
    # Plain dicts, unvalidated: the app redraws these plots on every re-selection.
    return plain_figure(traces, layout)
