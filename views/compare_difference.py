"""The A/B difference of two compared runs: the blocks one kept and the other did not, drawn."""

from __future__ import annotations

import cv2
import numpy as np

from backend.compare import kept_mask_at, kept_mask_into
from backend.pipeline import RunResult
from backend.selectors import picture_of

A_ONLY_RGB = (0, 160, 255)
"""Blocks kept by the reference pane (A) only."""
B_ONLY_RGB = (255, 0, 200)
"""Blocks kept by this pane (B) only."""
BOTH_RGB = (40, 200, 60)
"""Blocks kept by both (outlined only, in the selector comparison)."""
DIFF_ALPHA = 0.45
DIFF_BORDER_PX = 2


def difference_masks(a: RunResult, b: RunResult, frame_index: int) -> dict[str, np.ndarray]:
    """Blocks of a frame in A's canvases only, in B's only and in both, on B's block grid.

    When the runs' grids differ (selectors size canvases differently, onevision letterboxes), A's
    kept blocks of the picture are mapped onto B's picture by area
    (``backend.compare.selectors.kept_mask_into``: kept where at least half covered; none on B's bars).

    Returns
    -------
    dict ``a_only``, ``b_only``, ``both`` → (block_rows, block_cols) bool (anchors count whole).
    """
    mb = kept_mask_at(b, frame_index)
    same = tuple(a.geometry.block_grid_hw) == tuple(b.geometry.block_grid_hw) and picture_of(
        a.options, a.geometry
    ) == picture_of(b.options, b.geometry)
    ma = kept_mask_at(a, frame_index) if same else kept_mask_into(a, frame_index, b)
    if ma.shape != mb.shape:
        raise ValueError(f"Invalid pair: block grids differ ({ma.shape} vs {mb.shape}).")
    return {"a_only": ma & ~mb, "b_only": mb & ~ma, "both": ma & mb}


def draw_difference(
    image: np.ndarray, masks: dict[str, np.ndarray], block_px: int, *, show_both: bool = False
) -> np.ndarray:
    """Tint and outline A-only blocks in :data:`A_ONLY_RGB` and B-only blocks in :data:`B_ONLY_RGB`
    (``show_both``: also outline blocks both kept in :data:`BOTH_RGB`).

    Parameters
    ----------
    image : (H, W, 3) uint8 RGB; not modified.
    masks : from :func:`difference_masks`.
    block_px : block side in pixels (patch × block size).

    Returns
    -------
    (H, W, 3) uint8 RGB copy with the difference drawn in.
    """
    out = np.array(image, copy=True)
    bh, bw = masks["a_only"].shape
    h, w = bh * block_px, bw * block_px
    for key, rgb in (("a_only", A_ONLY_RGB), ("b_only", B_ONLY_RGB)):
        mask = masks[key]
        if not mask.any():
            continue
        # Blend only inside the blocks: a block-grid mask stretched to pixels.
        pixels = np.repeat(np.repeat(mask, block_px, axis=0), block_px, axis=1)
        region = out[:h, :w]
        tint = np.empty_like(region)
        tint[:] = rgb
        blended = cv2.addWeighted(tint, DIFF_ALPHA, region, 1.0 - DIFF_ALPHA, 0.0)
        region[pixels] = blended[pixels]
        _outline(out, mask, block_px, rgb)
    if show_both:
        _outline(out, masks["both"], block_px, BOTH_RGB)
    return out


def _outline(out: np.ndarray, mask: np.ndarray, block_px: int, rgb: tuple[int, int, int]) -> None:
    k = DIFF_BORDER_PX
    for r, c in np.argwhere(mask).tolist():
        y0, x0 = r * block_px, c * block_px
        box = out[y0 : y0 + block_px, x0 : x0 + block_px]
        box[:k], box[-k:], box[:, :k], box[:, -k:] = rgb, rgb, rgb, rgb
