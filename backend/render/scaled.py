"""Overlays at any output size: crisp lines and text over a frame of another size than the processed one."""

from __future__ import annotations

import functools

import cv2
import numpy as np

from backend.codecs import canonical_codec
from backend.pipeline import RunResult
from backend.render.colors import (
    ANCHOR_RGB,
    BAD_TINT_ALPHA,
    BAD_TINT_RGB,
    BLOCK_GRID_RGB,
    CODEC_GRID_RGB,
    KEPT_RGB,
    LOST_RGB,
    PATCH_GRID_RGB,
)
from backend.render.facts import check_row, lost_blocks
from backend.render.heatmap import heatmap_rgb, score_grid
from backend.render.overlays import ANCHOR_BORDER_PX, CODEC_CELL_PX, KEPT_BORDER_PX, OverlayPlan
from backend.render.text import draw_anchor_label, draw_bad_label

REFERENCE_ROWS = 720
"""Frames up to this height get the viewer's line widths and label sizes; taller ones scale them."""


def size_factor(out_h: int) -> float:
    """How much thicker lines and larger labels are at ``out_h`` rows: 1 up to 720 rows, then out_h / 720."""
    return max(1.0, out_h / REFERENCE_ROWS)


def scaled_px(px: int, out_h: int) -> int:
    """A line width or border of ``px`` at 720 rows, at ``out_h`` rows (never thinner than ``px``)."""
    return max(int(px), round(px * size_factor(out_h)))


@functools.lru_cache(maxsize=64)
def _edges(cells: int, cell_px: float, out_px: int, processed_px: int) -> np.ndarray:
    """Output pixel of each processed-frame edge k · cell_px, k = 0 … cells (read-only)."""
    edges = np.round(np.arange(cells + 1) * cell_px * out_px / processed_px).astype(np.int64)
    edges.setflags(write=False)
    return edges


def _grid_lines(result: RunResult, plan: OverlayPlan, out_hw: tuple[int, int]) -> list:
    """(ys, xs, rgb) of every grid layer that is on, at the output size (as the plan's order)."""
    geo, opts = result.geometry, plan.options
    (ph, pw), (h, w) = geo.processed_hw, out_hw
    lines = []
    for on, step, rgb in (
        (opts.patch_grid, geo.patch, PATCH_GRID_RGB),
        (opts.block_grid, plan.block_px, BLOCK_GRID_RGB),
    ):
        if on:
            # The viewer draws rows 0, step, 2·step … < H (a strided slice): the same edges, scaled.
            ys = _edges(-(-ph // step) - 1, step, h, ph)
            xs = _edges(-(-pw // step) - 1, step, w, pw)
            lines.append((ys, xs, rgb))
    if opts.codec_grid:
        cell = CODEC_CELL_PX.get(canonical_codec(result.info.codec_name), 16)
        (oh, ow) = geo.orig_hw
        # Lines k · cell (k ≥ 1) of the original frame, straight from original to output pixels.
        ys = np.round(np.arange(1, int(h / (cell * h / oh)) + 1) * cell * h / oh).astype(int)
        xs = np.round(np.arange(1, int(w / (cell * w / ow)) + 1) * cell * w / ow).astype(int)
        lines.append((ys[ys < h], xs[xs < w], CODEC_GRID_RGB))
    return lines


def _outline_rects(
    image: np.ndarray,
    ys: np.ndarray,
    xs: np.ndarray,
    blocks: np.ndarray,
    border: int,
    rgb: tuple[int, int, int],
) -> None:
    """Outline each block [block_row, block_col] whose edges are ys/xs, ``border`` px inside, in place."""
    colour = np.asarray(rgb, np.uint8)
    for br, bc in blocks.tolist():
        y0, y1, x0, x1 = ys[br], ys[br + 1], xs[bc], xs[bc + 1]
        image[y0 : y0 + border, x0:x1] = colour
        image[max(y0, y1 - border) : y1, x0:x1] = colour
        image[y0:y1, x0 : x0 + border] = colour
        image[y0:y1, max(x0, x1 - border) : x1] = colour


def draw_overlays_scaled(result: RunResult, row: int, plan: OverlayPlan, frame: np.ndarray) -> np.ndarray:
    """Draw the planned layers over ``frame``, a picture of candidate ``row`` at any size.

    Everything is drawn at the frame's own size, so lines stay one colour and sharp: block and
    grid edges are the processed frame's edges scaled to it (rounded), the heatmap is the score
    grid stretched by nearest neighbour, and widths and labels keep the viewer's sizes up to 720
    rows and grow in proportion above (:func:`scaled_px`). At the processed size the result is
    :func:`backend.render.draw_overlays`' pixels exactly.

    Parameters
    ----------
    result : the run the plan was made for.
    row : candidate row.
    plan : from :func:`backend.render.plan_overlays`.
    frame : (H, W, 3) uint8 RGB, the row's picture at the output size (not modified).

    Returns
    -------
    (H, W, 3) uint8 RGB.
    """
    check_row(result, row)
    opts = plan.options
    h, w = frame.shape[:2]
    if opts.heatmap:
        grid = score_grid(result, row, scale=opts.scale, log_max=plan.log_max)
        colour = heatmap_rgb(grid, (h, w), opts.colormap)
        image = cv2.addWeighted(colour, float(opts.opacity), frame, 1.0 - float(opts.opacity), 0.0)
    else:
        image = np.array(frame, copy=True)
    bad = not bool(result.quality.good[row])
    if opts.bad_frames and bad:
        tint = np.empty_like(image)
        tint[:] = BAD_TINT_RGB
        image = cv2.addWeighted(tint, BAD_TINT_ALPHA, image, 1.0 - BAD_TINT_ALPHA, 0.0)
    line = scaled_px(1, h)
    columns = image.transpose(1, 0, 2)
    for ys, xs, rgb in _grid_lines(result, plan, (h, w)):
        for k in range(line):  # a wider line is `line` neighbouring rows and columns
            image[ys[ys + k < h] + k], columns[xs[xs + k < w] + k] = rgb, rgb
    f = plan.block_px
    ph, pw = result.geometry.processed_hw
    ys, xs = _edges(ph // f, f, h, ph), _edges(pw // f, f, w, pw)
    border = scaled_px(KEPT_BORDER_PX, h)
    if opts.lost:
        _outline_rects(image, ys, xs, np.argwhere(lost_blocks(result, row)), border, LOST_RGB)
    kept = plan.kept.get(row)
    if opts.kept and kept is not None and kept.size:
        _outline_rects(image, ys, xs, kept, border, KEPT_RGB)
    scale = size_factor(h)
    if opts.anchor_badge and row in plan.anchors:
        b = scaled_px(ANCHOR_BORDER_PX, h)
        image[:b], image[-b:], image[:, :b], image[:, -b:] = ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB
        draw_anchor_label(image, b, b, ANCHOR_RGB, scale=scale)
    if opts.bad_frames and bad:
        draw_bad_label(image, f"BAD: {result.quality.reasons[row] or 'bad'}", scale=scale)
    return image
