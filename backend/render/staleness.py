"""The staleness heat layer: frames since each patch position was last seen, on the video's fixed scale."""

from __future__ import annotations

import functools

import cv2
import numpy as np

from backend.pipeline import RunResult
from backend.render.colors import colormap_lut
from backend.render.facts import check_row


def video_staleness_top(result: RunResult) -> int:
    """The layer's fixed scale: the video's highest staleness in frames (the audit's
    ``video_max_staleness_frames``, over every frame, candidates or not)."""
    from backend.audit.cached import cached_run_audit

    return cached_run_audit(result).coverage.video_max_staleness_frames


def staleness_at_row(result: RunResult, row: int) -> np.ndarray:
    """(Hp, Wp) int64 staleness of each patch position at candidate ``row``'s frame, −1 off the
    picture (:func:`backend.audit.staleness_at_frame` on the run's cached audit source)."""
    from backend.audit.cached import cached_run_audit
    from backend.audit.frame_staleness import staleness_at_frame

    check_row(result, row)
    return staleness_at_frame(cached_run_audit(result).source, int(result.candidates.frame_indices[row]))


@functools.lru_cache(maxsize=64)
def _cells(cells: int, patch: int, out_px: int, processed_px: int) -> np.ndarray:
    """(n,) patch row (or column) of each output pixel row (column) the patch grid covers, n the
    output pixel of the grid's far edge: patch k spans processed pixels [k·patch, (k+1)·patch),
    scaled to the output and rounded as the renderer's grid edges (read-only)."""
    edges = np.round(np.arange(cells + 1) * patch * out_px / processed_px).astype(np.int64)
    index = np.searchsorted(edges, np.arange(int(edges[-1])), side="right") - 1
    index.setflags(write=False)
    return index


def blend_staleness(
    image: np.ndarray, result: RunResult, row: int, *, top: int, colormap: str, opacity: float
) -> None:
    """Blend candidate ``row``'s staleness over ``image``, in place.

    Parameters
    ----------
    image : (H, W, 3) uint8 RGB, the row's picture at any size (written in place).
    result : the run.
    row : candidate row.
    top : the scale's top in frames (the colormap's last colour; 0 … top is the whole bar).
    colormap : a :data:`backend.render.COLORMAPS` name.
    opacity : the layer's weight in [0, 1].

    Each patch position is one tile over its patch's pixels; positions off the picture (−1) and
    pixels past the patch grid keep the picture's own.
    """
    stale = staleness_at_row(result, row)
    geo = result.geometry
    (ph, pw), (h, w) = geo.processed_hw, image.shape[:2]
    rows = _cells(stale.shape[0], geo.patch, h, ph)
    cols = _cells(stale.shape[1], geo.patch, w, pw)
    levels = cv2.convertScaleAbs(stale.astype(np.float32), alpha=255.0 / max(int(top), 1))
    colour = np.take(np.take(colormap_lut(colormap)[levels], rows, axis=0), cols, axis=1)
    target = image[: rows.size, : cols.size]
    blended = cv2.addWeighted(colour, float(opacity), target, 1.0 - float(opacity), 0.0)
    on = stale >= 0
    if on.all():
        target[...] = blended
        return
    # A masked copy in OpenCV: numpy's boolean assignment took ~10 ms a frame at 504×280.
    mask = np.take(np.take(on, rows, axis=0), cols, axis=1).view(np.uint8)
    target[...] = cv2.copyTo(blended, mask, np.ascontiguousarray(target))
