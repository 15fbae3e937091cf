"""The one frame renderer: a run's layers over a candidate frame at any size (viewer, native view, export)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

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
from backend.render.heatmap import block_heat_grid, heatmap_rgb, score_grid
from backend.render.overlays import (
    ANCHOR_BORDER_PX,
    CODEC_CELL_PX,
    KEPT_BORDER_PX,
    OverlayPlan,
    outline_blocks,
)
from backend.render.staleness import blend_staleness
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


def _grid_lines(
    result: RunResult, plan: OverlayPlan, out_hw: tuple[int, int]
) -> list[tuple[np.ndarray, np.ndarray, tuple[int, int, int]]]:
    """(ys, xs, rgb) of every grid layer that is on, at the output size, in the drawing order."""
    geo, opts = result.geometry, plan.options
    (ph, pw), (h, w) = geo.processed_hw, out_hw
    lines = []
    for on, step, rgb in (
        (opts.patch_grid, geo.patch, PATCH_GRID_RGB),
        (opts.block_grid, plan.block_px, BLOCK_GRID_RGB),
    ):
        if on:
            # Rows 0, step, 2·step … < H of the processed frame, scaled to the output.
            ys = _edges(-(-ph // step) - 1, step, h, ph)
            lines.append((ys, _edges(-(-pw // step) - 1, step, w, pw), rgb))
    if opts.codec_grid:
        cell = CODEC_CELL_PX.get(canonical_codec(result.info.codec_name), 16)
        oh, ow = geo.orig_hw
        # Lines k · cell (k ≥ 1) of the original frame, straight from original to output pixels
        # (as codec_grid_lines computes them at the processed size).
        cell_h, cell_w = cell * h / oh, cell * w / ow
        ys = np.round(np.arange(1, int(h / cell_h) + 1) * cell_h).astype(int)
        xs = np.round(np.arange(1, int(w / cell_w) + 1) * cell_w).astype(int)
        lines.append((ys[ys < h], xs[xs < w], CODEC_GRID_RGB))
    return lines


def _outline_rects(
    image: np.ndarray,
    edges: tuple[np.ndarray, np.ndarray],
    blocks: np.ndarray,
    border: int,
    rgb: tuple[int, int, int],
) -> None:
    """Outline each block [block_row, block_col] between its edges (ys, xs), ``border`` px inside."""
    ys, xs = edges
    colour = np.asarray(rgb, np.uint8)
    for br, bc in blocks.tolist():
        y0, y1, x0, x1 = ys[br], ys[br + 1], xs[bc], xs[bc + 1]
        image[y0 : y0 + border, x0:x1] = colour
        image[max(y0, y1 - border) : y1, x0:x1] = colour
        image[y0:y1, x0 : x0 + border] = colour
        image[y0:y1, max(x0, x1 - border) : x1] = colour


def _outline(
    image: np.ndarray,
    result: RunResult,
    plan: OverlayPlan,
    blocks: np.ndarray,
    rgb: tuple[int, int, int],
    *,
    fast: bool,
) -> None:
    """Outline ``blocks`` at the image's size: with ``fast`` (the processed size, the viewer's hot
    path) the strided one-pass outline, else along the scaled edges; both give the same pixels."""
    h, w = image.shape[:2]
    border = scaled_px(KEPT_BORDER_PX, h)
    if fast:
        outline_blocks(image, blocks, plan.block_px, border, rgb)
        return
    f = plan.block_px
    ph, pw = result.geometry.processed_hw
    _outline_rects(image, (_edges(ph // f, f, h, ph), _edges(pw // f, f, w, pw)), blocks, border, rgb)


def draw_frame(
    result: RunResult, row: int, plan: OverlayPlan, picture: np.ndarray | None = None
) -> np.ndarray:
    """Draw the planned layers over candidate ``row``: the renderer of the viewer, its native view
    and every export.

    Everything is drawn at the picture's own size, so lines stay one colour and sharp: grid and
    block edges are the processed frame's edges scaled to it (rounded), the heatmap is the block
    or cell grid (``plan.options.heat``) stretched by nearest neighbour, and widths and labels
    keep the viewer's sizes up to 720 rows and grow in proportion above (:func:`scaled_px`). The
    staleness layer is one tile per patch position over the picture, on the plan's fixed scale
    (:func:`backend.render.staleness.blend_staleness`).

    Parameters
    ----------
    result : the run the plan was made for.
    row : candidate row.
    plan : from :func:`backend.render.plan_overlays`.
    picture : (H, W, 3) uint8 RGB, the row's picture at the output size (not modified); None:
        the run's processed frame (the viewer's frame).

    Returns
    -------
    (H, W, 3) uint8 RGB, a new array.
    """
    check_row(result, row)
    frame = result.decoded.pixels[row] if picture is None else picture
    # At the processed size with the viewer's 1 px lines the plan's precomputed grid lines and
    # the strided outline apply: the same pixels as the general path, at a fraction of the work.
    fast = frame.shape[0] <= REFERENCE_ROWS and (
        picture is None or frame.shape[:2] == tuple(result.geometry.processed_hw)
    )
    return _draw(result, row, plan, frame, fast=fast)


def _draw(result: RunResult, row: int, plan: OverlayPlan, frame: np.ndarray, *, fast: bool) -> np.ndarray:
    """:func:`draw_frame` over ``frame``; ``fast``: it is the processed size, at most 720 rows."""
    opts = plan.options
    h, w = frame.shape[:2]
    if opts.heatmap:
        if opts.heat == "block":
            grid = block_heat_grid(result, row, scale=opts.scale, video_max=plan.log_max)
        else:
            grid = score_grid(result, row, scale=opts.scale, log_max=plan.log_max)
        colour = heatmap_rgb(grid, (h, w), opts.colormap)
        image = cv2.addWeighted(colour, float(opts.opacity), frame, 1.0 - float(opts.opacity), 0.0)
        if plan.picture_blocks is not None:  # the bars a selector added keep their black
            ys, xs = _picture_px(result, plan.picture_blocks, (h, w))
            outside = np.ones((h, w), bool)
            outside[ys, xs] = False
            image[outside] = frame[outside]
    else:
        image = np.array(frame, copy=True)
    if opts.staleness and plan.staleness_top is not None:
        blend_staleness(
            image, result, row, top=plan.staleness_top, colormap=opts.colormap, opacity=float(opts.opacity)
        )
    bad = not bool(result.quality.good[row])
    if opts.bad_frames and bad:
        tint = np.empty_like(image)
        tint[:] = BAD_TINT_RGB
        image = cv2.addWeighted(tint, BAD_TINT_ALPHA, image, 1.0 - BAD_TINT_ALPHA, 0.0)
    line = scaled_px(1, h)
    # Row and column writes: no per-pixel loop. Columns go through the transposed view, where
    # each index picks a whole column (3x faster than image[:, xs]).
    columns = image.transpose(1, 0, 2)
    if fast:
        for ys, xs, rgb in plan.grid_lines:
            image[ys], columns[xs] = rgb, rgb
    else:
        for ys, xs, rgb in _grid_lines(result, plan, (h, w)):
            for k in range(line):  # a wider line is `line` neighbouring rows and columns
                image[ys[ys + k < h] + k], columns[xs[xs + k < w] + k] = rgb, rgb
    if opts.lost:
        _outline(image, result, plan, np.argwhere(lost_blocks(result, row)), LOST_RGB, fast=fast)
    kept = plan.kept.get(row)
    if opts.kept and kept is not None and kept.size:
        _outline(image, result, plan, kept, KEPT_RGB, fast=fast)
    scale = size_factor(h)
    if opts.anchor_badge and row in plan.anchors:
        b = scaled_px(ANCHOR_BORDER_PX, h)
        image[:b], image[-b:], image[:, :b], image[:, -b:] = ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB
        draw_anchor_label(image, b, b, ANCHOR_RGB, scale=scale)
    if opts.bad_frames and bad:
        draw_bad_label(image, f"BAD: {result.quality.reasons[row] or 'bad'}", scale=scale)
    return image


def _picture_px(
    result: RunResult, blocks: tuple[int, int, int, int], out_hw: tuple[int, int]
) -> tuple[slice, slice]:
    """(rows, cols) slices of the picture's blocks ``(r0, r1, c0, c1)`` in an ``out_hw`` image."""
    f = result.geometry.patch * result.geometry.block_size
    ph, pw = result.geometry.processed_hw
    (h, w), (r0, r1, c0, c1) = out_hw, blocks
    return (
        slice(round(r0 * f * h / ph), round(min(r1 * f, ph) * h / ph)),
        slice(round(c0 * f * w / pw), round(min(c1 * f, pw) * w / pw)),
    )


# -- the zoom crop -----------------------------------------------------------------------------


def check_crop(crop: Sequence[float] | None) -> tuple[float, float, float, float] | None:
    """A zoom crop as ``(x, y, width, height)`` floats in processed-frame pixels (None: the whole frame).

    Raises
    ------
    ValueError : not four finite numbers with x, y ≥ 0 and width, height > 0.
    """
    if crop is None:
        return None
    bad = ValueError(
        f"Invalid crop ({crop!r}). Supported values are x, y, width, height in processed-frame "
        "pixels, x and y at least 0, width and height above 0."
    )
    try:
        values = tuple(float(v) for v in crop)
    except (TypeError, ValueError):
        raise bad from None
    if len(values) != 4 or not all(np.isfinite(values)) or min(values[:2]) < 0 or min(values[2:]) <= 0:
        raise bad
    return values  # type: ignore[return-value]


def crop_slices(
    crop: Sequence[float] | None, processed_hw: tuple[int, int], out_hw: tuple[int, int]
) -> tuple[slice, slice]:
    """(rows, cols) slices of ``crop`` (processed pixels, see :func:`check_crop`) in a picture of
    ``out_hw``: the same fractions of the frame, rounded, clipped to it and at least 2 px each way.

    Raises
    ------
    ValueError : the crop lies outside the processed frame.
    """
    h, w = out_hw
    if crop is None:
        return slice(0, h), slice(0, w)
    x, y, cw, ch = check_crop(crop)  # type: ignore[misc]
    ph, pw = processed_hw
    if x >= pw or y >= ph:
        raise ValueError(
            f"Invalid crop ({x:g}, {y:g}, {cw:g}, {ch:g}). Supported values start inside the "
            f"processed frame ({pw}x{ph})."
        )

    def span(start: float, length: float, processed: int, out: int) -> slice:
        a = min(max(0, round(start * out / processed)), out - 2)
        b = max(a + 2, min(out, round((start + length) * out / processed)))
        return slice(a, b)

    return span(y, ch, ph, h), span(x, cw, pw, w)
