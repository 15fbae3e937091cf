"""Picture helpers shared by stages, render, compare, luma and exports: PSNR, grid stretch."""

from __future__ import annotations

import math

import numpy as np


def psnr_db(mse: float | np.ndarray | np.floating) -> float | np.ndarray | np.floating:
    """Peak signal-to-noise ratio of 8-bit pictures, 10·log10(255² / MSE), in dB.

    Parameters
    ----------
    mse : float | np.ndarray | np.floating
        Mean squared error in levels²: a Python number, a numpy scalar or an array of any shape.

    Returns
    -------
    float | np.ndarray | np.floating
        For a Python number, a float from ``math.log10`` (``math.inf`` when ``mse == 0``); for a
        numpy scalar or an array, ``np.log10`` in the input's float dtype (float32 stays float32),
        ``inf`` where ``mse == 0``; an array keeps the shape of ``mse``.

    Examples
    --------
    >>> psnr_db(0.0)
    inf
    >>> psnr_db(650.25)
    20.0
    >>> psnr_db(np.array([0.0, 65025.0]))
    array([inf,  0.])
    """
    # Both paths are kept, not one: callers' stored figures were computed with math.log10 on
    # floats and np.log10 on arrays, and the two may differ in the last bit.
    if isinstance(mse, (int, float)) and not isinstance(mse, np.generic):
        value = float(mse)
        return math.inf if value == 0.0 else 10.0 * math.log10(255.0**2 / value)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(255.0**2 / np.asarray(mse))


def upsample(grid: np.ndarray, processed_hw: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour stretch of a grid over the processed frame.

    Parameters
    ----------
    grid : np.ndarray
        (rows, cols) cell grid, float32 for score and signal grids (OpenCV keeps the dtype).
    processed_hw : tuple[int, int]
        (H, W) of the processed frame the grid covers.

    Returns
    -------
    np.ndarray
        (H, W) array of ``grid``'s dtype: each pixel takes the value of its nearest cell.

    Examples
    --------
    >>> upsample(np.array([[1, 2]], dtype=np.float32), (2, 4))
    array([[1., 1., 2., 2.],
           [1., 1., 2., 2.]], dtype=float32)
    """
    import cv2

    h, w = processed_hw
    return cv2.resize(grid, (w, h), interpolation=cv2.INTER_NEAREST)
