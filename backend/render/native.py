"""Overlays over a source frame at its own size: the viewer's native-resolution view."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np

from backend.pipeline import RunResult
from backend.render.colors import BAD_TINT_ALPHA, BAD_TINT_RGB
from backend.render.facts import check_row
from backend.render.heatmap import block_heat_grid, heatmap_rgb, score_grid
from backend.render.overlays import OverlayPlan, cached_plan, draw_overlays
from backend.render.text import draw_bad_label


def draw_native(result: RunResult, row: int, plan: OverlayPlan, source: np.ndarray) -> np.ndarray:
    """Draw the planned layers over candidate ``row``'s source frame at its own size.

    The heatmap is coloured at the source size; outlines, grids and badges are drawn on the
    processed frame as usual and their pixels carried over by nearest-neighbour scaling (so a
    line stays crisp, ``source / processed`` times thicker).

    Parameters
    ----------
    result : the run the plan was made for.
    row : candidate row.
    plan : from :func:`backend.render.plan_overlays`.
    source : (Hs, Ws, 3) uint8 RGB, the decoded source frame (not modified).

    Returns
    -------
    (Hs, Ws, 3) uint8 RGB.
    """
    check_row(result, row)
    opts = plan.options
    hs, ws = source.shape[:2]
    if opts.heatmap:
        if opts.heat == "block":
            grid = block_heat_grid(result, row, scale=opts.scale, video_max=plan.log_max)
        else:
            grid = score_grid(result, row, scale=opts.scale, log_max=plan.log_max)
        colour = heatmap_rgb(grid, (hs, ws), opts.colormap)
        image = cv2.addWeighted(colour, float(opts.opacity), source, 1.0 - float(opts.opacity), 0.0)
    else:
        image = np.array(source, copy=True)
    bad = opts.bad_frames and not bool(result.quality.good[row])
    if bad:
        tint = np.empty_like(image)
        tint[:] = BAD_TINT_RGB
        image = cv2.addWeighted(tint, BAD_TINT_ALPHA, image, 1.0 - BAD_TINT_ALPHA, 0.0)
    lines_only = dataclasses.replace(opts, heatmap=False, bad_frames=False)
    drawn = draw_overlays(result, row, cached_plan(result, lines_only))
    changed = np.any(drawn != result.decoded.pixels[row], axis=2)
    if changed.any():
        mask = cv2.resize(changed.view(np.uint8), (ws, hs), interpolation=cv2.INTER_NEAREST).astype(bool)
        image[mask] = cv2.resize(drawn, (ws, hs), interpolation=cv2.INTER_NEAREST)[mask]
    if bad:
        draw_bad_label(image, f"BAD: {result.quality.reasons[row] or 'bad'}")
    return image
