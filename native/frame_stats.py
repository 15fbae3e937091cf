"""Reader frames copied into RGB with the bad-frame test's pixel statistics, in one compiled pass."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from native.compiled import kernels as _kernels


@dataclass(frozen=True)
class PixelStats:
    """Exact integer statistics of one RGB frame of ``count`` pixels."""

    count: int
    sums: tuple[int, int, int]
    """Σ R, Σ G, Σ B."""
    squares: tuple[int, int, int]
    """Σ R², Σ G², Σ B²."""
    green: int
    """Pixels with R ≤ 90, G ≥ 180, B ≤ 90 (``cv2.inRange(rgb, (0, 180, 0), (90, 255, 90))``)."""

    def means(self) -> np.ndarray:
        """(3,) float64 channel means, equal to numpy's ``rgb[..., c].mean()`` (exact sums)."""
        return np.asarray(self.sums, np.float64) / self.count

    def stds(self) -> np.ndarray:
        """(3,) float64 channel standard deviations from the moments (to ~1e-9; a filter, not a verdict)."""
        mean = self.means()
        return np.sqrt(np.maximum(np.asarray(self.squares, np.float64) / self.count - mean * mean, 0.0))


def bgr_to_rgb_with_stats(bgr: np.ndarray, out: np.ndarray) -> PixelStats | None:
    """Write ``bgr`` into ``out`` as RGB and return its :class:`PixelStats`.

    Parameters
    ----------
    bgr : (H, W, 3) uint8 BGR (the bitcost reader's pixels), rows may be strided.
    out : (H, W, 3) uint8, written in place (e.g. a row of a shared pixel mapping).

    Returns
    -------
    The statistics, or None when the kernel was not built (nothing written; the caller
    converts with OpenCV instead).
    """
    if _kernels is None:
        return None
    sums, squares, green = _kernels.bgr_to_rgb_stats(bgr, out)
    return PixelStats(count=int(bgr.shape[0] * bgr.shape[1]), sums=sums, squares=squares, green=green)
