"""PyTorch's float32 CPU resampling arithmetic (bilinear interpolate, grid_sample) without torch.

lmms-video-utils resizes frames and motion fields with ``torch.nn.functional.interpolate``
(bilinear, ``align_corners=False``, no antialias) and warps frames with ``grid_sample``
(bilinear, border padding). Its canvases are then truncated to uint8, and its block scores are
sums over those canvases, so reproducing its selection exactly needs the same float32 results,
not just close ones. Measured against torch 2.13 (x86-64, AVX2), they are:

* index and weight of an output coordinate d: ``src = fma(scale, d + 0.5, -0.5)`` with
  ``scale = float32(in) / float32(out)``, clamped at 0; ``i0 = min(floor(src), in - 1)``,
  ``l1 = clamp(src - i0, 0, 1)``, ``l0 = 1 - l1``, ``i1 = i0 + (i0 < in - 1)``;
* interpolation, separable (every channel count, except 3 channels on one torch thread):
  ``t_r = fma(s[r, x0], lx0, s[r, x1] * lx1)`` for the rows ``y0`` and ``y1``, then
  ``fma(t_y0, ly0, t_y1 * ly1)``; for 3 channels on a single thread torch takes its other kernel,
  ``w_ab = ly_a * lx_b`` and ``fma(s11, w11, fma(s10, w10, fma(s00, w00, s01 * w01)))``;
* grid_sample: ``x = clip(fma(nx + 1, W / 2, -0.5), 0, W - 1)`` (same for y), weights
  ``nw = s * e`` … from the distances to the floor, and
  ``fma(se_v, se, fma(sw_v, sw, fma(ne_v, ne, nw_v * nw)))``.

The compiled kernel (``native/_torch_math.c``) computes these with ``fmaf``; the numpy
fallback emulates each fused step in float64 (exact products, one rounding to float32; a
double rounding could differ from a true fma in about one case in 2^29).
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

_kernel: ModuleType | None
try:
    import native._torch_math as _kernel
except ImportError:  # built by setup.py when a C compiler is present (optional extension)
    _kernel = None

COMPILED = _kernel is not None
"""Whether the compiled kernel was built (the numpy fallback serves otherwise)."""

_F32 = np.float32


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 fma(a, b, c), emulated in float64 (a float32 product is exact there)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(_F32)


@functools.lru_cache(maxsize=64)
def source_indices(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """torch's source indices and weights of a bilinear resize along one axis (read-only arrays,
    computed once per size pair: a video resizes every frame alike).

    Returns
    -------
    (i0, i1, l0, l1): (out_size,) int64 source indices and (out_size,) float32 weights.

    Examples
    --------
    >>> i0, i1, l0, l1 = source_indices(4, 2)
    >>> i0.tolist(), i1.tolist(), l1.tolist()
    ([0, 2], [1, 3], [0.5, 0.5])
    """
    scale = _F32(in_size) / _F32(out_size)
    d = np.arange(out_size, dtype=_F32) + _F32(0.5)
    real = np.maximum(_fma(np.full(out_size, scale, _F32), d, np.full(out_size, -0.5, _F32)), _F32(0))
    i0 = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    l1 = np.clip(real - i0.astype(_F32), _F32(0), _F32(1)).astype(_F32)
    i1 = i0 + (i0 < in_size - 1)
    l0 = (_F32(1) - l1).astype(_F32)
    for a in (i0, i1, l0, l1):
        a.setflags(write=False)
    return i0, i1, l0, l1


def uses_four_weight_kernel(channels: int, torch_threads: int) -> bool:
    """Whether torch resizes with its four-weight kernel: 3 channels on a single thread."""
    return channels == 3 and torch_threads == 1


def bilinear_u8(src: np.ndarray, out_hw: tuple[int, int], *, torch_threads: int) -> np.ndarray:
    """:func:`bilinear` of a uint8 image, clamped to [0, 255] and truncated to uint8 (torch's ``.to(uint8)``).

    Returns
    -------
    (h, w, C) uint8.
    """
    if _kernel is not None and src.dtype == np.uint8 and src.ndim == 3:
        h, w = out_hw
        big_h, big_w, channels = src.shape
        y0, y1, ly0, ly1 = source_indices(big_h, h)
        x0, x1, lx0, lx1 = source_indices(big_w, w)
        out = np.empty((h, w, channels), np.uint8)
        four = uses_four_weight_kernel(channels, torch_threads)
        _kernel.bilinear(np.ascontiguousarray(src), y0, y1, ly0, ly1, x0, x1, lx0, lx1, out, four)
        return out
    return np.clip(bilinear(src, out_hw, torch_threads=torch_threads), 0, 255).astype(np.uint8)


def luma(rgb: np.ndarray) -> np.ndarray:
    """(H, W) float32 ``(0.299 R + 0.587 G) + 0.114 B`` of (H, W, 3) uint8, each operation rounded."""
    if _kernel is not None and rgb.dtype == np.uint8:
        out = np.empty(rgb.shape[:2], _F32)
        _kernel.luma(np.ascontiguousarray(rgb), out)
        return out
    f = np.asarray(rgb, _F32)
    return (f[..., 0] * _F32(0.299) + f[..., 1] * _F32(0.587)) + f[..., 2] * _F32(0.114)


def block_sums(values: np.ndarray, block_px: int) -> np.ndarray:
    """Each whole ``block_px`` square's values added one by one in row-major order (float32), then
    divided and multiplied by the area: torch's ``avg_pool2d(...) * area``. Partial blocks are dropped.

    Returns
    -------
    (H // block_px, W // block_px) float32.

    Examples
    --------
    >>> block_sums(np.ones((4, 6), np.float32), 2).tolist()
    [[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]
    """
    h, w = values.shape
    hb, wb = h // block_px, w // block_px
    if _kernel is not None:
        out = np.empty((hb, wb), _F32)
        _kernel.block_sums(np.ascontiguousarray(values, _F32), int(block_px), out)
        return out
    v = np.ascontiguousarray(values[: hb * block_px, : wb * block_px], _F32)
    windows = v.reshape(hb, block_px, wb, block_px).transpose(0, 2, 1, 3).reshape(hb, wb, block_px * block_px)
    total = np.cumsum(windows, axis=-1, dtype=_F32)[..., -1]  # sequential, unlike np.sum's pairwise sum
    area = _F32(block_px * block_px)
    return ((total / area).astype(_F32) * area).astype(_F32)


def bilinear(src: np.ndarray, out_hw: tuple[int, int], *, torch_threads: int) -> np.ndarray:
    """``interpolate(mode="bilinear", align_corners=False)`` of an (H, W, C) image, as torch computes it.

    Parameters
    ----------
    src : (H, W, C) uint8 or float32.
    out_hw : (h, w).
    torch_threads : the thread count of the torch being reproduced (1 selects its other kernel
        for 3 channels).

    Returns
    -------
    (h, w, C) float32 (not clamped or truncated).
    """
    if src.ndim != 3 or src.dtype not in (np.uint8, np.float32):
        raise ValueError(
            f"Invalid image ({src.shape}, {src.dtype}). Supported values are (H, W, C) uint8/float32."
        )
    h, w = out_hw
    big_h, big_w, channels = src.shape
    y0, y1, ly0, ly1 = source_indices(big_h, h)
    x0, x1, lx0, lx1 = source_indices(big_w, w)
    four = uses_four_weight_kernel(channels, torch_threads)
    src = np.ascontiguousarray(src)
    if _kernel is not None:
        out = np.empty((h, w, channels), _F32)
        _kernel.bilinear(src, y0, y1, ly0, ly1, x0, x1, lx0, lx1, out, four)
        return out
    a = src.astype(_F32, copy=False)
    r0, r1 = a[y0], a[y1]
    lx0c, lx1c = lx0[None, :, None], lx1[None, :, None]
    ly0c, ly1c = ly0[:, None, None], ly1[:, None, None]
    if four:
        w00, w01 = (ly0c * lx0c).astype(_F32), (ly0c * lx1c).astype(_F32)
        w10, w11 = (ly1c * lx0c).astype(_F32), (ly1c * lx1c).astype(_F32)
        v = (r0[:, x1] * w01).astype(_F32)
        v = _fma(r0[:, x0], w00, v)
        v = _fma(r1[:, x0], w10, v)
        return _fma(r1[:, x1], w11, v)
    t0 = _fma(r0[:, x0], lx0c, (r0[:, x1] * lx1c).astype(_F32))
    t1 = _fma(r1[:, x0], lx0c, (r1[:, x1] * lx1c).astype(_F32))
    return _fma(t0, ly0c, (t1 * ly1c).astype(_F32))


def warp(src: np.ndarray, field: np.ndarray) -> np.ndarray:
    """``grid_sample(src, grid)`` with the grid lmms-video-utils builds from a motion field:
    ``nx = ((2·(x + dx) + 1) / W) − 1`` (each operation rounded), the same for y.

    Parameters
    ----------
    src : (H, W, C) float32.
    field : (H, W, 2) float32 (dx, dy) per pixel.

    Returns
    -------
    (H, W, C) float32.
    """
    src = np.ascontiguousarray(src, _F32)
    field = np.ascontiguousarray(field, _F32)
    if _kernel is not None:
        out = np.empty_like(src)
        _kernel.warp(src, field, out)
        return out
    h, w = field.shape[:2]
    gx = (np.arange(w, dtype=_F32)[None, :] + field[..., 0]).astype(_F32)
    gy = (np.arange(h, dtype=_F32)[:, None] + field[..., 1]).astype(_F32)
    nx = (((_F32(2) * gx + _F32(1)).astype(_F32) / _F32(w)).astype(_F32) - _F32(1)).astype(_F32)
    ny = (((_F32(2) * gy + _F32(1)).astype(_F32) / _F32(h)).astype(_F32) - _F32(1)).astype(_F32)
    return grid_sample(src, grid_coordinates(nx, w), grid_coordinates(ny, h))


def motion_field(mvs: np.ndarray, height: int, width: int) -> np.ndarray:
    """Dense (H, W, 2) float32 field of exported motion vectors, each block set to its (dx, dy).

    ``dx = motion_x / motion_scale`` (scale 0 counts as 1; a float64 quotient stored as float32);
    a block spans x0 = max(0, dst_x − w // 2) to min(W, x0 + w), the same for y; a later vector
    overwrites an earlier one.

    Parameters
    ----------
    mvs : (N, 8) int32 in ``native.side_data.MV_COLUMNS`` order.
    """
    mvs = np.ascontiguousarray(mvs, np.int32).reshape(-1, 8)
    field = np.empty((height, width, 2), _F32)
    if _kernel is not None:
        _kernel.motion_field(mvs, field)
        return field
    field[:] = 0
    for dst_x, dst_y, bw, bh, mx, my, scale, _ in mvs.tolist():
        s = float(scale) or 1.0
        x0, y0 = max(0, dst_x - bw // 2), max(0, dst_y - bh // 2)
        field[y0 : min(height, y0 + bh), x0 : min(width, x0 + bw)] = (mx / s, my / s)
    return field


def grid_coordinates(normalised: np.ndarray, size: int) -> np.ndarray:
    """grid_sample's pixel coordinate of a normalised one (align_corners=False, border padding).

    ``clip(fma(v + 1, size / 2, -0.5), 0, size - 1)`` in float32.
    """
    v = (np.asarray(normalised, _F32) + _F32(1)).astype(_F32)
    x = _fma(v, np.full(v.shape, _F32(size) / _F32(2), _F32), np.full(v.shape, -0.5, _F32))
    return np.minimum(_F32(size - 1), np.maximum(x, _F32(0))).astype(_F32)


def grid_sample(src: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear ``grid_sample`` of an (H, W, C) float32 image at pixel coordinates (:func:`grid_coordinates`).

    Returns
    -------
    (h, w, C) float32 for (h, w) coordinate arrays.
    """
    src = np.ascontiguousarray(src, _F32)
    x = np.ascontiguousarray(x, _F32)
    y = np.ascontiguousarray(y, _F32)
    big_h, big_w, channels = src.shape
    if _kernel is not None:
        out = np.empty((*x.shape, channels), _F32)
        _kernel.grid_sample(src, x, y, out)
        return out
    xw, yn = np.floor(x), np.floor(y)
    we = (x - xw).astype(_F32)
    e = (_F32(1) - we).astype(_F32)
    nn = (y - yn).astype(_F32)
    so = (_F32(1) - nn).astype(_F32)
    nw, ne, sw, se = (so * e)[..., None], (so * we)[..., None], (nn * e)[..., None], (nn * we)[..., None]
    ix, iy = xw.astype(np.int64), yn.astype(np.int64)
    right, down = ix + 1 < big_w, iy + 1 < big_h
    ix1, iy1 = np.minimum(ix + 1, big_w - 1), np.minimum(iy + 1, big_h - 1)
    zero = _F32(0)
    v00 = src[iy, ix]
    v01 = np.where(right[..., None], src[iy, ix1], zero)
    v10 = np.where(down[..., None], src[iy1, ix], zero)
    v11 = np.where((right & down)[..., None], src[iy1, ix1], zero)
    v = (v00 * nw).astype(_F32)
    v = _fma(v01, ne, v)
    v = _fma(v10, sw, v)
    return _fma(v11, se, v)
