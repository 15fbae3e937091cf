"""Heatmap scales: score grids on the frame or video scale, their colouring, the legend bar and stops."""

from __future__ import annotations

import functools

import cv2
import numpy as np

from backend.imaging import upsample
from backend.pipeline import RunResult
from backend.render.colors import colormap_lut
from backend.render.facts import check_row

SCALES: tuple[str, ...] = ("frame", "video")
HEAT_SOURCES: tuple[str, ...] = ("block", "cell")
"""What a heatmap shows: ``block``, the ranked 2×2-block score (one tile per block); ``cell``, the
signal's score map per codec cell (one tile per macroblock, CTU or superblock)."""
HEAT_ALIASES: dict[str, str] = {"signal": "cell"}
"""Older names of a heat source, still read (the viewer's radio and saved views said ``signal``)."""
DEFAULT_HEAT = "block"
"""The viewer's heatmap mode, which exports and the CLI default to as well."""


def canonical_heat(heat: str) -> str:
    """The :data:`HEAT_SOURCES` name of ``heat`` (an alias of :data:`HEAT_ALIASES` mapped).

    Raises
    ------
    ValueError : neither a heat source nor an alias.
    """
    name = HEAT_ALIASES.get(heat, heat) if isinstance(heat, str) else heat
    if name not in HEAT_SOURCES:
        raise ValueError(f"Invalid heat ({heat!r}). Supported values are {', '.join(HEAT_SOURCES)}.")
    return name


def video_log_max(result: RunResult) -> float:
    """Largest log1p(raw signal) over all candidate frames (the ``video`` scale's 1.0)."""
    tops = [float(np.log1p(max(float(np.max(g)), 0.0))) for g in result.decoded.grids if g is not None]
    return max(tops, default=0.0)


def video_raw_max(result: RunResult) -> float:
    """Largest raw signal value over all candidate frames."""
    return max((float(np.max(g)) for g in result.decoded.grids if g is not None), default=0.0)


def score_grid(
    result: RunResult, row: int, *, scale: str = "frame", log_max: float | None = None
) -> np.ndarray:
    """The score grid of a candidate frame before upsampling.

    Parameters
    ----------
    result : a finished run.
    row : candidate row.
    scale : ``frame`` (stored per-frame normalised grid) or ``video`` (raw grid, log1p, divided
        by ``log_max``, the run's :func:`video_log_max`, computed when not given).

    Returns
    -------
    (gh, gw) float32 in [0, 1], the codec grid's shape.
    """
    check_row(result, row)
    if scale not in SCALES:
        raise ValueError(f"Invalid scale ({scale!r}). Supported values are {', '.join(SCALES)}.")
    raw = result.decoded.grids[row]
    if scale == "frame" or raw is None:
        return np.asarray(result.scores.grids[row], np.float32)
    # The stored grids are each normalised to their own percentile, so all frames peak at
    # 1.0; comparing frames needs the raw signal against one run-wide maximum.
    top = max(video_log_max(result) if log_max is None else log_max, 1e-6)
    grid = np.log1p(np.maximum(np.asarray(raw, np.float32), 0)) / np.float32(top)
    return grid.astype(np.float32)


def video_block_max(result: RunResult) -> float:
    """Largest block score over all candidate frames (the ``video`` scale's 1.0 for block heat)."""
    scores = result.scores.block_scores
    return float(scores.max()) if scores.size else 0.0


def block_heat_grid(
    result: RunResult, row: int, *, scale: str = "frame", video_max: float | None = None
) -> np.ndarray:
    """The 2×2-block scores of a candidate frame as a grid in [0, 1].

    Parameters
    ----------
    result : a finished run.
    row : candidate row.
    scale : ``frame`` (divided by the frame's highest block score) or ``video`` (by the run's,
        ``video_max``, computed when not given).

    Returns
    -------
    (block_rows, block_cols) float32 in [0, 1].
    """
    check_row(result, row)
    if scale not in SCALES:
        raise ValueError(f"Invalid scale ({scale!r}). Supported values are {', '.join(SCALES)}.")
    bh_n, bw_n = result.geometry.block_grid_hw
    scores = np.maximum(np.asarray(result.scores.block_scores[row], np.float32), 0).reshape(bh_n, bw_n)
    top = (
        float(scores.max())
        if scale == "frame"
        else (video_block_max(result) if video_max is None else video_max)
    )
    return np.clip(scores / np.float32(max(top, 1e-6)), 0, 1).astype(np.float32)


def score_map(result: RunResult, row: int, *, scale: str = "frame") -> np.ndarray:
    """The score map of a candidate frame at the processed size.

    Returns
    -------
    (H, W) float32 in [0, 1]: :func:`score_grid` stretched by nearest neighbour.
    """
    return upsample(score_grid(result, row, scale=scale), result.geometry.processed_hw)


def heatmap_rgb(grid: np.ndarray, processed_hw: tuple[int, int], colormap: str) -> np.ndarray:
    """Colour a score grid and stretch it over the processed frame.

    Colouring the small grid first and then stretching by nearest neighbour gives the same
    pixels as stretching first (nearest copies values), at a fraction of the work.

    Parameters
    ----------
    grid : (gh, gw) float32 in [0, 1].
    processed_hw : (H, W).

    Returns
    -------
    (H, W, 3) uint8 RGB.
    """
    levels = cv2.convertScaleAbs(grid, alpha=255.0)  # rounds and saturates in one pass
    small = colormap_lut(colormap)[levels]
    h, w = processed_hw
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_NEAREST)


@functools.lru_cache(maxsize=64)
def legend(colormap: str, low_label: str, high_label: str) -> np.ndarray:
    """(40, 256, 3) uint8 RGB colour bar with the two labels under it (read-only)."""
    image = np.full((40, 256, 3), 255, np.uint8)
    image[:18] = colormap_lut(colormap)[None, :, :]
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(image, low_label, (2, 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    (w, _), _ = cv2.getTextSize(high_label, font, 0.4, 1)
    cv2.putText(image, high_label, (254 - w, 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    image.setflags(write=False)
    return image


def legend_stops(
    colormap: str, high_value: float, *, log: bool
) -> tuple[tuple[float, tuple[int, int, int]], ...]:
    """Five (value, rgb) stops of the colour bar, 0 … ``high_value``.

    The video scale colours log1p(raw) / log1p(max), so with ``log`` the stops are raw
    values on that curve.
    """
    rgb = colormap_lut(colormap)[np.linspace(0, 255, 5).astype(np.uint8)]
    fractions = np.linspace(0.0, 1.0, 5)
    values = np.expm1(fractions * np.log1p(high_value)) if log else fractions * high_value
    return tuple((float(v), (int(c[0]), int(c[1]), int(c[2]))) for v, c in zip(values, rgb, strict=True))
