"""Per-pixel maps of the signals and their cell means, below the signals stage.

Motion compensation, the mv + residual fusion, optical flow, packet energy and the order statistics
the compiled motion kernel ranks: pure numpy / OpenCV functions. ``backend.stages.signals`` decodes
the frames and turns these maps into each signal's cell grids.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

import native

# OpenCV loads in the functions that use it: the signals stage imports this module, and the
# option classes import that stage for SignalConfig (a batch re-run must not load OpenCV).
from backend.errors import DecodeError
from backend.records import VideoInfo
from backend.stages.score import percentile_linear

# --------------------------------------------------------------------------- grid helpers


def grid_shape(height: int, width: int, cell_size: int) -> tuple[int, int]:
    """(rows, cols) of the cell grid covering a height × width frame (last cells may be partial).

    Examples
    --------
    >>> grid_shape(240, 320, 16), grid_shape(360, 640, 16)
    ((15, 20), (23, 40))
    """
    return math.ceil(height / cell_size), math.ceil(width / cell_size)


def cell_means(pixel_map: np.ndarray, cell_size: int) -> np.ndarray:
    """Mean of a per-pixel map over each cell; partial edge cells average their own pixels.

    Parameters
    ----------
    pixel_map : (H, W) numeric.

    Returns
    -------
    (ceil(H / cell_size), ceil(W / cell_size)) float32.

    Examples
    --------
    >>> cell_means(np.arange(12, dtype=np.float32).reshape(3, 4), 2).tolist()
    [[2.5, 4.5], [8.5, 10.5]]
    """
    h, w = pixel_map.shape
    rows, cols = grid_shape(h, w, cell_size)
    padded = np.zeros((rows * cell_size, cols * cell_size), dtype=np.float64)
    padded[:h, :w] = pixel_map
    sums = padded.reshape(rows, cell_size, cols, cell_size).sum(axis=(1, 3))
    row_n = np.minimum(cell_size, h - cell_size * np.arange(rows))
    col_n = np.minimum(cell_size, w - cell_size * np.arange(cols))
    return (sums / np.outer(row_n, col_n)).astype(np.float32)


# --------------------------------------------------------------------------- per-pixel signals


def flow_magnitude(current: np.ndarray, other: np.ndarray, *, max_side: int = 320) -> np.ndarray:
    """Optical-flow magnitude from ``current`` to ``other`` (Farneback), full-resolution pixels.

    The flow is computed on luma downscaled so its longer side is at most ``max_side`` and
    anchored on ``current``'s pixels (like a codec vector: where each current pixel came from).

    Parameters
    ----------
    current, other : (H, W) luma, uint8 or float32.

    Returns
    -------
    (H, W) float32, displacement length in full-resolution pixels.
    """
    import cv2

    h, w = current.shape
    scale = min(1.0, max_side / max(h, w))
    size = (max(1, round(w * scale)), max(1, round(h * scale)))

    def small(y: np.ndarray) -> np.ndarray:
        y8 = np.clip(y, 0, 255).astype(np.uint8) if y.dtype != np.uint8 else y
        return y8 if scale == 1.0 else cv2.resize(y8, size, interpolation=cv2.INTER_AREA)

    flow = cv2.calcOpticalFlowFarneback(small(current), small(other), None, 0.5, 3, 15, 3, 5, 1.2, 0)
    mag = np.hypot(flow[..., 0], flow[..., 1]) / np.float32(scale)
    if scale != 1.0:
        mag = cv2.resize(mag, (w, h), interpolation=cv2.INTER_LINEAR)
    return mag.astype(np.float32, copy=False)


def _paint(
    shape: tuple[int, int],
    blocks: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    values: np.ndarray,
    fill: float,
) -> np.ndarray:
    """A grid of ``fill`` with each block (x0, y0, w, h in grid units) set to its value."""
    import native

    # float32 / int32 only: cv2.resize (in expand_units) silently narrows int64 to int32.
    dtype = np.float32 if np.issubdtype(values.dtype, np.floating) else np.int32
    grid = np.full(shape, fill, dtype=dtype)
    native.paint_blocks(grid, *blocks, values.astype(dtype, copy=False))
    return grid


def expand_units(grid: np.ndarray, unit: int, hw: tuple[int, int]) -> np.ndarray:
    """Unit grid → per-pixel map cropped to (H, W)."""
    import cv2

    if unit == 1:
        return grid[: hw[0], : hw[1]]
    # Nearest-neighbour at an integer factor is an exact repeat, and faster than np.repeat.
    size = (grid.shape[1] * unit, grid.shape[0] * unit)
    return cv2.resize(grid, size, interpolation=cv2.INTER_NEAREST)[: hw[0], : hw[1]]


class _VectorBlocks(NamedTuple):
    """One frame's exported vectors as blocks: displacement, painting grid and clipped pixel extent."""

    dx: np.ndarray
    """(N,) float32 horizontal displacement in pixels."""
    dy: np.ndarray
    """(N,) float32 vertical displacement in pixels."""
    source: np.ndarray
    """(N,) prediction direction of each vector (< 0 past list, > 0 future list)."""
    unit: int
    """Side in pixels of the coarsest grid every block aligns with."""
    ushape: tuple[int, int]
    """(rows, cols) of that grid over the frame."""
    cells: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    """(x0, y0, w, h) of each block in grid units, each (N,)."""
    extent: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    """(x_start, x_end, y_start, y_end) of each block in pixels clipped to the frame, each (N,)."""


def _vector_blocks(mvs: np.ndarray, hw: tuple[int, int]) -> _VectorBlocks:
    """The blocks of (N, 8) ``side_data.MV_COLUMNS`` vectors over an (H, W) frame."""
    height, width = hw
    dst_x, dst_y, bw, bh, mx, my, mscale, source = (mvs[:, k] for k in range(8))
    mscale = np.maximum(mscale, 1).astype(np.float32)
    dx = mx.astype(np.float32) / mscale
    dy = my.astype(np.float32) / mscale
    x0 = dst_x - bw // 2  # FFmpeg's dst is the block centre
    y0 = dst_y - bh // 2
    # Paint on the coarsest grid every block aligns with (8 px for H.264 / MPEG-4 vectors).
    unit = int(np.gcd.reduce(np.concatenate([bw, bh, np.abs(x0), np.abs(y0), [0]]).astype(np.int64))) or 1
    ushape = (math.ceil(height / unit), math.ceil(width / unit))
    cells = (x0 // unit, y0 // unit, np.maximum(bw // unit, 1), np.maximum(bh // unit, 1))
    xa, xb = np.clip(x0, 0, width), np.clip(x0 + bw, 0, width)
    ya, yb = np.clip(y0, 0, height), np.clip(y0 + bh, 0, height)
    extent = (xa, xb, ya, yb)
    return _VectorBlocks(dx, dy, source, unit, ushape, cells, extent)


def _displaced_references(
    current: np.ndarray,
    references: list[np.ndarray],
    maps: tuple[np.ndarray, np.ndarray],
    extent: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate reference displaced by the vectors, and each block's difference to ``current``.

    Parameters
    ----------
    current : (H, W) float32 luma.
    references : R candidate references, each (H, W) float32 luma.
    maps : (map_x, map_y), each (H, W) float32: where each pixel of ``current`` comes from.
    extent : (x_start, x_end, y_start, y_end) of the M blocks compared, each (M,), clipped.

    Returns
    -------
    stack : (R, H, W) float32, the displaced references (bilinear, edges replicated).
    sad : (R, M) float64, sum of absolute differences of each block against each reference.
    """
    import cv2

    map_x, map_y = maps
    xa, xb, ya, yb = extent
    stack = np.empty((len(references), *current.shape), np.float32)
    sad = np.empty((len(references), xa.size), np.float64)
    err = np.empty(current.shape, np.float32)
    for k, reference in enumerate(references):
        cv2.remap(
            reference,
            map_x,
            map_y,
            cv2.INTER_LINEAR,
            dst=stack[k],
            borderMode=cv2.BORDER_REPLICATE,
        )
        cv2.absdiff(current, stack[k], dst=err)
        integral = cv2.integral(err, sdepth=cv2.CV_64F)
        sad[k] = integral[yb, xb] - integral[ya, xb] - integral[yb, xa] + integral[ya, xa]
    return stack, sad


def motion_compensate(
    current: np.ndarray,
    references: dict[int, np.ndarray],
    mvs: np.ndarray,
    *,
    max_distance: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, Counter[int]]]:
    """Rebuild the codec's inter prediction of a frame from its exported motion vectors.

    Each vector block of ``current`` is predicted by the reference block displaced by the
    vector (bilinear sub-pixel interpolation). FFmpeg exports the prediction direction
    (``source``: -1 past list, +1 future list) but not the reference index, so for every
    block the reference is inferred: among the frames at display distance 1..max_distance
    in that direction, the one whose displaced block matches best (least absolute
    difference). Blocks predicted from both directions average the two predictions;
    pixels no vector covers (intra blocks) are predicted by the co-located pixel of the
    nearest past frame (else the nearest future frame).

    Parameters
    ----------
    current : (H, W) float32 luma.
    references : display offset (-d past, +d future) → (H, W) float32 luma of that frame.
    mvs : (N, 8) int32 in ``side_data.MV_COLUMNS`` order.
    max_distance : largest |offset| tried.

    Returns
    -------
    prediction : (H, W) float32.
    magnitude : (H, W) float32, vector length divided by the inferred reference distance
        (pixels per frame), averaged over the directions covering the pixel; 0 where none.
    covered : (H, W) bool, pixels covered by at least one vector.
    distances : direction (-1, +1) → Counter of inferred distances over that direction's blocks.
    """
    hw = current.shape
    height, width = hw
    vectors = _vector_blocks(mvs, hw)
    ux, uy, uw, uh = vectors.cells
    xa, xb, ya, yb = vectors.extent
    grid_x = np.arange(width, dtype=np.float32)[None, :]
    grid_y = np.arange(height, dtype=np.float32)[:, None]

    pred_sum = np.zeros(hw, np.float32)
    pred_n = np.zeros(hw, np.float32)
    mag_sum = np.zeros(hw, np.float32)
    distances: dict[int, Counter[int]] = {}
    for direction in (-1, 1):
        sel = np.flatnonzero(np.sign(vectors.source) == direction)
        cands = [d for d in range(1, max_distance + 1) if direction * d in references]
        if sel.size == 0 or not cands:
            continue
        blocks = (ux[sel], uy[sel], uw[sel], uh[sel])
        fx = expand_units(_paint(vectors.ushape, blocks, vectors.dx[sel], 0), vectors.unit, hw)
        fy = expand_units(_paint(vectors.ushape, blocks, vectors.dy[sel], 0), vectors.unit, hw)
        map_x = grid_x + fx
        map_y = grid_y + fy
        stack, sad = _displaced_references(
            current,
            [references[direction * d] for d in cands],
            (map_x, map_y),
            (xa[sel], xb[sel], ya[sel], yb[sel]),
        )
        best = np.argmin(sad, axis=0)  # ties keep the nearest reference
        dist = np.asarray(cands)[best]
        distances[direction] = Counter(dist.tolist())
        choice = expand_units(_paint(vectors.ushape, blocks, best, -1), vectors.unit, hw)
        pred = stack[0]
        for k in range(1, len(cands)):
            np.copyto(pred, stack[k], where=choice == k)
        has = choice >= 0
        np.add(pred_sum, pred, out=pred_sum, where=has)
        np.add(pred_n, 1, out=pred_n, where=has)
        per_frame = (np.hypot(vectors.dx[sel], vectors.dy[sel]) / dist).astype(np.float32)
        mag = expand_units(_paint(vectors.ushape, blocks, per_frame, 0), vectors.unit, hw)
        mag_sum += mag
    covered = pred_n > 0
    fallback = references.get(-1, references.get(1, current))
    prediction = np.where(covered, pred_sum / np.maximum(pred_n, 1), fallback).astype(np.float32)
    magnitude = (mag_sum / np.maximum(pred_n, 1)).astype(np.float32)
    return prediction, magnitude, covered, distances


RESIDUAL_SCALE_FLOOR = 1.0
"""fuse_mvres divides the residual by max(percentile, 1.0): residual values below 1.0 never set the
scale, so the kernel only counts their keys (``histogram_floor``) and bins the rest (on most video
80-95 % of the keys lie below it)."""


def fuse_mvres(
    magnitude: np.ndarray,
    residual: np.ndarray,
    *,
    mv_weight: float = 1.0,
    residual_weight: float = 1.0,
    percentile: float = 95.0,
) -> np.ndarray:
    """The OneVision-Encoder / cvp ``mv_res_score_map`` fusion of motion and residual.

    mv = clip(mag / max(p(mag), 1e-6), 0, 1); res = clip(|r| / max(p(|r|), 1), 0, 1);
    fused = clip((w_mv·mv + w_res·res) / (w_mv + w_res), 0, 1), with p the ``percentile``
    of the frame's pixels.

    Parameters
    ----------
    magnitude : (H, W) motion magnitude.
    residual : (H, W) residual (signed or absolute).

    Returns
    -------
    (H, W) float32 in [0, 1].

    Examples
    --------
    >>> fuse_mvres(np.array([[0.0, 2.0]]), np.array([[4.0, 0.0]]), percentile=100).tolist()
    [[0.5, 0.5]]
    """
    mag = np.asarray(magnitude, np.float32)
    if not np.isfinite(mag).all():  # cvp maps NaN to 0
        mag = np.nan_to_num(mag, nan=0.0, posinf=0.0, neginf=0.0)
    res = np.abs(np.asarray(residual, np.float32))
    total = mv_weight + residual_weight
    total = total if total > 0 else 1.0
    # In-place minimum/maximum instead of np.clip: np.clip costs ~4× more on 1080p float32 maps.
    mv_n = mag / np.float32(max(percentile_linear(mag, percentile), 1e-6))
    np.maximum(np.minimum(mv_n, 1, out=mv_n), 0, out=mv_n)
    res_n = res / np.float32(max(percentile_linear(res, percentile), RESIDUAL_SCALE_FLOOR))
    np.minimum(res_n, 1, out=res_n)
    fused = mv_n * np.float32(mv_weight / total)
    fused += res_n * np.float32(residual_weight / total)
    return np.maximum(np.minimum(fused, 1, out=fused), 0, out=fused)


def packet_energy(info: VideoInfo, frame_indices: Iterable[int], *, radius: int = 3) -> np.ndarray:
    """Packet-size temporal energy of frames: how far a frame's log size rises above its neighbours'.

    e_t = log1p(bytes_t); energy_t = max(e_t - median{e_j : 0 < |j - t| <= radius, j not a
    keyframe}, 0). Keyframes get 0: an intra picture's size says nothing about change over
    time (cvp's packet-energy sampler skips them too). A frame with no non-key neighbour gets 0.

    Returns
    -------
    (n,) float32, one value per requested frame.

    Raises
    ------
    DecodeError : a frame index has no packet.
    """
    sizes = np.log1p(np.maximum(info.packet_size_bytes.astype(np.float64), 0))
    keys = info.packet_is_keyframe
    count = sizes.shape[0]
    out = []
    for t in frame_indices:
        t = int(t)
        if not 0 <= t < count:
            raise DecodeError(
                f"no packet for this frame (the probe found {count})",
                path=info.path,
                stage="signals",
                frame_index=t,
            )
        if keys[t]:
            out.append(0.0)
            continue
        lo, hi = max(0, t - radius), min(count, t + radius + 1)
        idx = [j for j in range(lo, hi) if j != t and not keys[j]]
        out.append(max(float(sizes[t] - np.median(sizes[idx])), 0.0) if idx else 0.0)
    return np.asarray(out, dtype=np.float32)


@functools.lru_cache(maxsize=16)
def cell_counts(height: int, width: int, cell_size: int) -> np.ndarray:
    """(rows, cols) int64 pixels of each cell inside a height × width frame (``cell_means``' divisor).

    Cached (every frame of a video asks the same), so read-only.
    """
    rows, cols = grid_shape(height, width, cell_size)
    row_n = np.minimum(cell_size, height - cell_size * np.arange(rows))
    col_n = np.minimum(cell_size, width - cell_size * np.arange(cols))
    counts = np.outer(row_n, col_n)
    counts.flags.writeable = False
    return counts


def unit_order_statistics(
    values: np.ndarray, unit: int, height: int, width: int
) -> Callable[[tuple[int, int]], tuple[np.generic, np.generic]]:
    """Order statistics of the per-pixel map that repeats each unit cell of ``values`` over its pixels."""
    flat = values.ravel()
    counts = cell_counts(height, width, unit).ravel()

    def select(ranks: tuple[int, int]) -> tuple[np.generic, np.generic]:
        if counts.min() == counts.max():  # equal cells: pixel rank r is unit rank r // count
            c = int(counts[0])
            part = np.partition(flat, np.unique([r // c for r in ranks]))
            return part[ranks[0] // c], part[ranks[1] // c]
        order = np.argsort(flat, kind="stable")
        ends = np.cumsum(counts[order])
        picks = np.searchsorted(ends, np.asarray(ranks), side="right")
        return flat[order[picks[0]]], flat[order[picks[1]]]

    return select


def residual_order_statistics(
    motion: native.MotionResidual,
) -> Callable[[tuple[int, int]], tuple[np.generic, np.generic]]:
    """Order statistics of the residual map whose keys (``|r| * RESIDUAL_SCALE``) the kernel wrote,
    for a percentile clamped below at ``RESIDUAL_SCALE_FLOOR``.

    When both ranks lie below the kernel's histogram floor the percentile (which lies between them)
    is below it too, and any pair of values below it gives the same clamped scale: 0 stands for both.
    """

    def select(ranks: tuple[int, int]) -> tuple[np.generic, np.generic]:
        if motion.keys_below_floor > ranks[1]:
            assert motion.histogram_floor <= RESIDUAL_SCALE_FLOOR * native.RESIDUAL_SCALE
            return np.float32(0), np.float32(0)
        lo, hi = native.residual_order_statistics(motion, ranks)
        scale = native.RESIDUAL_SCALE
        return np.float32(lo / scale), np.float32(hi / scale)

    return select
