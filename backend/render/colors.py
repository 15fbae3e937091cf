"""Overlay colours and heatmap colormaps: the RGB constants every drawing shares and the colormap LUTs."""

from __future__ import annotations

import functools

import cv2
import numpy as np

COLORMAPS: dict[str, int] = {
    "turbo": cv2.COLORMAP_TURBO,
    "viridis": cv2.COLORMAP_VIRIDIS,
    "magma": cv2.COLORMAP_MAGMA,
    "jet": cv2.COLORMAP_JET,
    "inferno": cv2.COLORMAP_INFERNO,
}

KEPT_RGB = (255, 64, 32)
ANCHOR_RGB = (32, 200, 255)
LOST_RGB = (255, 220, 0)
PATCH_GRID_RGB = (160, 160, 160)
BLOCK_GRID_RGB = (255, 255, 255)
CODEC_GRID_RGB = (255, 0, 255)
BAD_TINT_RGB = (255, 0, 0)
BAD_TINT_ALPHA = 0.35


@functools.lru_cache(maxsize=16)
def colormap_lut(colormap: str) -> np.ndarray:
    """(256, 3) uint8 RGB colour of each level 0 … 255 (read-only)."""
    if colormap not in COLORMAPS:
        raise ValueError(f"Invalid colormap ({colormap!r}). Supported values are {', '.join(COLORMAPS)}.")
    bgr = cv2.applyColorMap(np.arange(256, dtype=np.uint8).reshape(1, 256), COLORMAPS[colormap])
    lut = np.ascontiguousarray(bgr[0, :, ::-1])
    lut.setflags(write=False)
    return lut
