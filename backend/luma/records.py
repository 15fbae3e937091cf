"""Luma records shared by measuring and reporting: FrameLuma, the per-frame measurements of one pairing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.imaging import psnr_db
from backend.records import _check, _ShapeRepr

LUMA_WEIGHTS: tuple[float, float, float] = (0.299, 0.587, 0.114)
"""BT.601 full-range luma of 8-bit RGB, Y = 0.299 R + 0.587 G + 0.114 B."""
_W = np.asarray(LUMA_WEIGHTS, dtype=np.float64)


@dataclass(frozen=True, repr=False)
class FrameLuma(_ShapeRepr):
    """Per-frame measurements of one (test, reference) pairing; everything later derives from it."""

    test_name: str
    reference_name: str
    reference_label: str
    """``reference`` or ``official`` (the second reference)."""
    height: int
    width: int
    cell: int
    offset: int
    truncated: bool
    frame_index: np.ndarray
    """(n,) int64, test frame index (decoded presentation order), consecutive."""
    reference_index: np.ndarray
    """(n,) int64, reference frame index = frame_index + offset."""
    test_mean_rgb: np.ndarray
    """(n, 3) float64, mean R, G, B of the test frame (levels)."""
    reference_mean_rgb: np.ndarray
    """(n, 3) float64, mean R, G, B of the reference frame."""
    y_mse: np.ndarray
    """(n,) float64, mean squared difference of Y = 0.299 R + 0.587 G + 0.114 B."""
    test_cells: np.ndarray
    """(n, ch, cw, 3) float32, per-channel means of the test frame's full cell × cell cells."""
    diff_cells: np.ndarray
    """(n, ch, cw, 3) float32, test minus reference cell means (exact: sums / cell²)."""

    def __post_init__(self) -> None:
        n = self.frame_index.shape[0]
        _check(self.frame_index.shape == (n,), f"{self.frame_index.shape = } must be 1-D")
        _check(self.reference_index.shape == (n,), f"{self.reference_index.shape = }, {n = }")
        _check(self.test_mean_rgb.shape == (n, 3), f"{self.test_mean_rgb.shape = }, {n = }")
        _check(self.reference_mean_rgb.shape == (n, 3), f"{self.reference_mean_rgb.shape = }, {n = }")
        _check(self.y_mse.shape == (n,), f"{self.y_mse.shape = }, {n = }")
        grid = (n, self.height // self.cell, self.width // self.cell, 3)
        _check(self.test_cells.shape == grid, f"{self.test_cells.shape = } != {grid}")
        _check(self.diff_cells.shape == grid, f"{self.diff_cells.shape = } != {grid}")

    def __len__(self) -> int:
        return int(self.frame_index.shape[0])

    @property
    def channel_diff(self) -> np.ndarray:
        """(n, 3) float64, per-channel mean difference test − reference."""
        return self.test_mean_rgb - self.reference_mean_rgb

    @property
    def bias(self) -> np.ndarray:
        """(n,) float64, meanY(test) − meanY(reference) in levels."""
        return self.channel_diff @ _W

    @property
    def psnr_db(self) -> np.ndarray:
        """(n,) float64, Y-PSNR in dB (inf for identical frames)."""
        return psnr_db(self.y_mse)

    def cell_luma(self) -> tuple[np.ndarray, np.ndarray]:
        """Cell luma of the test and its difference: two (n, ch, cw) float64 arrays (x, d)."""
        return self.test_cells @ _W, self.diff_cells @ _W


__all__ = ["LUMA_WEIGHTS", "FrameLuma"]
