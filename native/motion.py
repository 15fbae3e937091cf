"""A frame's motion-compensated residual and motion magnitude, in one compiled pass (or None)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from native.compiled import kernels as _kernels

RESIDUAL_SCALE = 2048
"""Residual keys are ``|Y - prediction| * RESIDUAL_SCALE``: every prediction is exact at that scale."""
MAX_RESIDUAL_KEY = 255 * RESIDUAL_SCALE

HISTOGRAM_SHIFT = 6
HISTOGRAM_BINS = 8192
"""The kernel's residual histogram counts ``key >> 6`` (8161 bins used: keys are at most 255 * 2048)."""

CELL_MODES: dict[str, int] = {"mv": 0, "residual": 1, "mvres": 2}
"""The maps :func:`cell_sums` can sum, by signal name."""


@dataclass(frozen=True)
class MotionResidual:
    """What :func:`motion_residual` computed for one frame."""

    residual_keys: np.ndarray | None
    """(H, W) int32, ``|Y - prediction| * RESIDUAL_SCALE`` (None when not asked for)."""
    magnitude_units: np.ndarray
    """(ceil(H / unit), ceil(W / unit)) float32, motion per frame in pixels, averaged over the
    directions that cover each unit cell (0 where none does)."""
    unit: int
    distances: np.ndarray
    """(N,) int32, the reference distance inferred for each vector (0: vector not used)."""
    covered_pixels: int
    histogram: np.ndarray | None = None
    """(HISTOGRAM_BINS,) int64 counts of ``residual_keys >> HISTOGRAM_SHIFT`` over the keys at or above
    ``histogram_floor`` (None unless asked for)."""
    histogram_floor: int = 0
    """Keys below this (a multiple of ``1 << HISTOGRAM_SHIFT``) are not binned, only counted."""
    keys_below_floor: int = 0
    """How many keys lie below ``histogram_floor`` (0 when the floor is 0)."""
    distance_counts: np.ndarray | None = None
    """(2, max_distance + 1) int64: how many past (row 0) and future (row 1) vectors chose each
    reference distance (all zero for a direction without vectors or references to try)."""
    residual_cell_sums: np.ndarray | None = None
    """(ceil(H / cell), ceil(W / cell)) int64 sums of ``residual_keys`` per cell, when a cell size
    was given (taken as the keys are written, no pass over the frame)."""
    keys_aligned: bool = False
    """Every residual key is a multiple of ``1 << HISTOGRAM_SHIFT`` (whole-, half- and quarter-pel
    vectors): the histogram then ranks the keys exactly."""


@dataclass(frozen=True, kw_only=True)
class ResidualOutputs:
    """Which of its outputs :func:`motion_residual` computes, beyond the motion magnitude."""

    residual: bool = True
    """Compute the residual keys."""
    histogram: bool = True
    """Count the keys for :func:`residual_order_statistics` (with ``residual``)."""
    histogram_floor: int = 0
    """Keys below it are only counted, not binned (a multiple of ``1 << HISTOGRAM_SHIFT``): cheaper
    where the ranks a caller needs lie above it (:func:`residual_order_statistics` stays exact
    either way)."""
    cell_size: int = 0
    """Above 0 (with ``residual``), also sum the keys per cell of that side."""
    keep_keys: bool = True
    """With ``cell_size``, False when only the sums are wanted: the keys are then not written to
    the frame buffer (``residual_keys`` is None)."""


@dataclass(frozen=True, kw_only=True)
class MvresFusion:
    """The float32 scales and weights of the fused ``mvres`` map that :func:`cell_sums` sums."""

    mv_scale: float = 1.0
    """Motion magnitude (pixels per frame) that maps to 1 before clipping."""
    residual_scale: float = 1.0
    """Residual that maps to 1 before clipping."""
    mv_weight: float = 0.5
    residual_weight: float = 0.5


class MotionScratch:
    """Work arrays :func:`motion_residual` reuses from frame to frame of one size (fresh large
    arrays cost a page fault per 4 KiB on every frame). Not shared between threads."""

    def __init__(self) -> None:
        self._arrays: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        key = (name, shape)
        if key not in self._arrays:
            self._arrays = {k: v for k, v in self._arrays.items() if k[0] != name}
            self._arrays[key] = np.empty(shape, dtype)
        return self._arrays[key]


def motion_kernel_available() -> bool:
    """Whether the compiled kernel was built (the numpy path serves otherwise)."""
    return _kernels is not None


def block_unit(mvs: np.ndarray) -> int:
    """The gcd of the block sizes and |corners| of (N, 8) int32 vectors (1 when all are 0):
    ``int(np.gcd.reduce([w, h, |dst_x - w // 2|, |dst_y - h // 2|, 0])) or 1`` without the arrays."""
    assert _kernels is not None
    return int(_kernels.block_unit(np.ascontiguousarray(mvs, dtype=np.int32)))


def motion_residual(
    current: np.ndarray,
    references: dict[int, np.ndarray],
    mvs: np.ndarray,
    hypot: np.ndarray,
    *,
    unit: int,
    max_distance: int,
    outputs: ResidualOutputs = ResidualOutputs(),  # frozen: one shared default is safe
    scratch: MotionScratch | None = None,
) -> MotionResidual | None:
    """Rebuild the inter prediction of ``current`` from its exported vectors, in integers.

    Same model as ``backend.stages.signals.motion_compensate`` (bilinear prediction on
    OpenCV's 1/32-pixel grid with replicated borders, the reference of each vector inferred
    as the least-SAD frame at distance 1..max_distance in its direction, bi-directional
    pixels averaged, uncovered pixels predicted by the nearest past, else future, frame) and
    the same numbers: the test suite compares them bit for bit.

    Parameters
    ----------
    current : (H, W) uint8 luma.
    references : display offset (-d past, +d future) → (H, W) uint8 luma.
    mvs : (N, 8) int32 in ``native.side_data.MV_COLUMNS`` order.
    hypot : (N,) float32, ``np.hypot(dx, dy)`` of each vector in pixels (numpy's float32 hypot).
    unit : grid side every block and offset is a multiple of (their gcd).
    max_distance : largest |offset| tried.
    outputs : which outputs to compute (residual keys, their histogram, per-cell sums), see
        :class:`ResidualOutputs`.
    scratch : work arrays to reuse; the returned ``residual_keys`` live there until the next
        call with the same scratch.

    Returns
    -------
    MotionResidual, or None when the kernel is not built or cannot reproduce the numpy path
    exactly on these vectors (off the 1/32 grid, or overlapping blocks).
    """
    if _kernels is None:
        return None
    residual, histogram, cell_size = outputs.residual, outputs.histogram, outputs.cell_size
    histogram_floor, keep_keys = outputs.histogram_floor, outputs.keep_keys
    h, w = current.shape
    refs = tuple(references.get(k) if k else None for k in range(-max_distance, max_distance + 1))
    mvs = np.ascontiguousarray(mvs, dtype=np.int32)
    hypot = np.ascontiguousarray(hypot, dtype=np.float32)
    scratch = scratch or MotionScratch()
    keys = scratch.get("keys", (h, w), np.int32) if residual else None
    mag = np.empty((-(-h // unit), -(-w // unit)), np.float32)
    dist = np.empty(mvs.shape[0], np.int32)
    hist = np.empty(HISTOGRAM_BINS, np.int64) if residual and histogram else None
    counts = np.empty((2, max_distance + 1), np.int64)
    cells = None
    if residual and cell_size > 0:
        cells = np.empty((-(-h // cell_size), -(-w // cell_size)), np.int64)
    floor = histogram_floor if hist is not None else 0
    status, covered, aligned, below = _kernels.motion_residual(
        current,
        refs,
        mvs,
        hypot,
        unit,
        keys,
        mag,
        dist,
        hist,
        floor,
        counts,
        cells,
        max(cell_size, 0),
        keep_keys,
    )
    if status:
        return None
    if cells is not None and not keep_keys:
        keys = None
    return MotionResidual(
        residual_keys=keys,
        magnitude_units=mag,
        unit=unit,
        distances=dist,
        covered_pixels=int(covered),
        histogram=hist,
        histogram_floor=floor,
        keys_below_floor=int(below),
        distance_counts=counts,
        residual_cell_sums=cells,
        keys_aligned=bool(aligned),
    )


def residual_order_statistics(motion: MotionResidual, ranks: tuple[int, int]) -> tuple[int, int]:
    """The residual keys of two ranks (0-based, ascending, ``ranks[0] <= ranks[1]``), without sorting.

    The kernel's histogram of ``key >> 6`` finds the bins of the ranks. Where every key is a
    multiple of 64 (``keys_aligned``) a bin holds one key value and that is the answer; else one
    more pass counts the keys of those bins. Both histograms stay in cache, where one of every key
    (522 241 bins) would miss on most pixels. A rank below the histogram's floor takes one more
    pass that bins the keys below it.
    """
    assert _kernels is not None and motion.residual_keys is not None and motion.histogram is not None
    # Keys below the floor were only counted: they come before every binned key.
    histogram, below = motion.histogram, motion.keys_below_floor
    if below > ranks[0]:
        histogram, below = histogram.copy(), 0
        floor_bin = motion.histogram_floor >> HISTOGRAM_SHIFT
        _kernels.key_histogram(motion.residual_keys, HISTOGRAM_SHIFT, 0, histogram[:floor_bin])
    ends = np.cumsum(histogram) + below
    bins = np.searchsorted(ends, np.asarray(ranks), side="right")
    lo_bin, hi_bin = int(bins[0]), int(bins[1])
    width = 1 << HISTOGRAM_SHIFT
    if motion.keys_aligned:
        return lo_bin * width, hi_bin * width
    fine = np.empty((hi_bin - lo_bin + 1) * width, np.int64)
    _kernels.key_histogram(motion.residual_keys, 0, lo_bin * width, fine)
    before = int(ends[lo_bin - 1]) if lo_bin else 0
    fine_ends = np.cumsum(fine) + before
    picks = np.searchsorted(fine_ends, np.asarray(ranks), side="right")
    return lo_bin * width + int(picks[0]), lo_bin * width + int(picks[1])


def cell_sums(
    kind: str,
    motion: MotionResidual,
    *,
    height: int,
    width: int,
    cell_size: int,
    fusion: MvresFusion = MvresFusion(),  # frozen: one shared default is safe
) -> np.ndarray:
    """Per-cell float64 sums of a motion signal's per-pixel map, in numpy's reduction order.

    ``kind`` ``mv`` sums the magnitude, ``residual`` the residual, ``mvres`` the fused map
    ``clip(clip(mv / mv_scale, 0, 1) * mv_weight + min(res / residual_scale, 1) * residual_weight,
    0, 1)`` with the scales and weights of ``fusion`` (float32 operations, as ``fuse_mvres``; the
    scales and weights are float32).

    Returns
    -------
    (ceil(H / cell_size), ceil(W / cell_size)) float64, equal to the sums ``cell_means``
    takes of the same map.
    """
    assert _kernels is not None
    out = np.empty((-(-height // cell_size), -(-width // cell_size)), np.float64)
    _kernels.cell_sums(
        CELL_MODES[kind],
        motion.residual_keys,
        motion.magnitude_units,
        height,
        width,
        motion.unit,
        cell_size,
        float(fusion.mv_scale),
        float(fusion.residual_scale),
        float(fusion.mv_weight),
        float(fusion.residual_weight),
        out,
    )
    return out
