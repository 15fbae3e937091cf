"""Score stage: bitcost grids → normalised score maps → patch and 2×2-block scores."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

# OpenCV loads in upsample(): the option classes import this module for ScoreConfig, and a
# batch re-run that skips everything must not load it.
from backend.config import Registry, Variant, param, validate_fields
from backend.imaging import upsample
from backend.records import DecodedFrames, Geometry, ScoreMaps

IFRAME_CLIP_MODES = ("none", "non_i_percentile")


def _frame_percentile(grids: Sequence[np.ndarray], *, config: ScoreConfig) -> tuple[np.ndarray, ...]:
    return tuple(
        normalise_grid(g, percentile=config.bitcost_pct, log_scale=config.bitcost_log_scale) for g in grids
    )


def _unit_clip(grids: Sequence[np.ndarray], *, config: ScoreConfig) -> tuple[np.ndarray, ...]:
    return tuple(np.clip(np.asarray(g, np.float32), 0, 1) for g in grids)


def _video_max(grids: Sequence[np.ndarray], *, config: ScoreConfig) -> tuple[np.ndarray, ...]:
    top = max((float(np.max(g)) for g in grids), default=0.0)
    return tuple(np.asarray(g, np.float32) / np.float32(max(top, 1e-6)) for g in grids)


@dataclass(frozen=True)
class Normaliser(Variant):
    """A score normalisation, ``function(grids, *, config) -> grids`` (float32, [0, 1]).

    ``per_frame``: each grid's result depends on that grid alone, so frames can be
    normalised one by one (in the decode workers).
    """

    per_frame: bool = True


NORMALISERS: Registry[Normaliser] = Registry(
    "normalisation",
    (
        Normaliser("frame_percentile", _frame_percentile, "log1p, divide by the frame's percentile, clip"),
        Normaliser("none", _unit_clip, "clip to [0, 1] (signals already in that range)"),
        Normaliser("video_max", _video_max, "divide by the run's largest value", per_frame=False),
    ),
)
NORMALISATIONS = NORMALISERS.names


@dataclass(frozen=True, kw_only=True)
class ScoreConfig:
    """Score-map normalisation (cvp option names)."""

    normalisation: str = param(
        "frame_percentile",
        label="Normalisation",
        help="frame_percentile: log1p and divide by each frame's percentile (cvp, bitcost); none: the "
        "signal is already in [0, 1] (mvres); video_max: divide by the largest value of the run "
        "(per-frame scalars such as pkt_energy)",
        choices=NORMALISATIONS,
    )
    bitcost_pct: float = param(
        99.0, label="Normalisation percentile", help="grid value mapped to 1.0", min=0, max=100
    )
    bitcost_log_scale: bool = param(
        True, label="log1p", help="compress bitcost with log1p before normalising"
    )
    iframe_score_clip_mode: str = param(
        "none",
        label="I-frame clip",
        help="non_i_percentile: cap I-frame maps at a percentile of all non-I maps",
        choices=IFRAME_CLIP_MODES,
    )
    iframe_score_clip_percentile: float = param(
        95.0,
        label="I-frame clip percentile",
        help="percentile of non-I scores used as the cap",
        min=0,
        max=100,
    )
    threads: int = param(2, label="Threads", help="threads for upsampling and patch sums", min=1, max=64)

    def __post_init__(self) -> None:
        validate_fields(self)


def percentile_linear(values: np.ndarray, percentile: float) -> float:
    """``float(np.percentile(values, percentile))`` (linear method), bit for bit, in ~1/20 of the time.

    np.percentile spends ~100 µs per call on argument handling around a ~5 µs partition,
    which per frame of a run adds up. This takes the two order statistics with one partition
    and interpolates with the same numpy operations on the same dtypes as numpy 1.26's
    ``_quantile``/``_lerp`` (0-d float64 weight, legacy scalar casting), so the result is
    identical (tests/backend/test_stages.py compares them on random and tied arrays).

    Parameters
    ----------
    values : any shape, float dtype, no NaN.
    percentile : in [0, 100].

    Returns
    -------
    The percentile as a Python float.
    """
    flat = np.array(values, copy=True).ravel()

    def order_statistics(ranks: tuple[int, int]) -> tuple[np.generic, np.generic]:
        flat.partition(np.unique(ranks))
        return flat[ranks[0]], flat[ranks[1]]

    return percentile_of_order_statistics(flat.size, percentile, order_statistics)


def percentile_of_order_statistics(
    n: int,
    percentile: float,
    order_statistics: Callable[[tuple[int, int]], tuple[np.generic, np.generic]],
) -> float:
    """:func:`percentile_linear` of ``n`` values known only through their order statistics.

    ``order_statistics((i, j))`` returns the i-th and j-th smallest values (0-based) as numpy
    scalars of the values' dtype; the interpolation between them is numpy's, operation for
    operation, so a caller that can rank its values more cheaply than by sorting them all (a
    histogram, block-constant maps) gets the same float.
    """
    virtual = np.asanyarray((n - 1) * np.true_divide(np.asanyarray(percentile, np.float64), 100))
    previous = np.asanyarray(np.floor(virtual))
    following = np.asanyarray(previous + 1)
    if virtual >= n - 1:
        previous, following = np.asanyarray(-1.0), np.asanyarray(-1.0)
    elif virtual < 0:
        previous, following = np.asanyarray(0.0), np.asanyarray(0.0)
    lo, hi = previous.astype(np.intp), following.astype(np.intp)
    a, b = order_statistics((int(lo) % n, int(hi) % n))
    gamma = np.asanyarray(virtual - previous)
    diff = np.subtract(b, a)
    result = np.asanyarray(np.add(a, diff * gamma))
    np.subtract(
        b, diff * (1 - gamma), out=result, where=gamma >= 0.5, casting="unsafe", dtype=type(result.dtype)
    )
    return float(result)


def normalise_grid(grid: np.ndarray, *, percentile: float = 99.0, log_scale: bool = True) -> np.ndarray:
    """Clamp negatives, log1p, divide by the percentile, clip to [0, 1].

    Parameters
    ----------
    grid : (rows, cols) raw bitcost grid, any numeric dtype.

    Returns
    -------
    (rows, cols) float32 in [0, 1].

    Examples
    --------
    >>> normalise_grid(np.array([[0, 1], [3, 7]]), log_scale=False).round(3).tolist()
    [[0.0, 0.145], [0.436, 1.0]]
    """
    arr = np.asarray(grid, dtype=np.float32)
    arr = np.maximum(arr, np.float32(0))
    if log_scale:
        arr = np.log1p(arr)
    scale = max(percentile_linear(arr, percentile), 1e-6)
    return np.clip(arr / np.float32(scale), 0, 1).astype(np.float32, copy=False)


def patch_and_block_sums(
    score_map: np.ndarray, *, patch: int, block_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sum a (H, W) map over p×p patches, then over b×b patches.

    Returns
    -------
    patch_scores : (H/p, W/p) float32.
    block_scores : (H/p/b · W/p/b,) float32 in block-raster order.

    Examples
    --------
    >>> ps, bs = patch_and_block_sums(np.ones((4, 4), np.float32), patch=1, block_size=2)
    >>> bs.tolist()
    [4.0, 4.0, 4.0, 4.0]
    """
    h, w = score_map.shape
    hb, wb = h // patch, w // patch
    patches = score_map.reshape(hb, patch, wb, patch).sum(axis=(1, 3))
    blocks = patches.reshape(hb // block_size, block_size, wb // block_size, block_size).sum(axis=(1, 3))
    return patches, blocks.reshape(-1)


@functools.lru_cache(maxsize=64)
def _nearest_rows_cols(
    grid_hw: tuple[int, int], processed_hw: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Source row of every output row and source column of every output column of :func:`upsample`.

    Read off the same OpenCV call on an index grid, and checked to be separable (each
    output row copies one source row, each output column one source column).
    """
    gh, gw = grid_hw
    index = np.arange(gh * gw, dtype=np.float32).reshape(gh, gw)  # exact below 2**24
    stretched = upsample(index, processed_hw).astype(np.int64)
    rows, cols = stretched[:, 0] // gw, stretched[0, :] % gw
    if not np.array_equal(stretched, rows[:, None] * gw + cols[None, :]):
        raise ValueError(f"Invalid nearest-neighbour mapping for {grid_hw} -> {processed_hw}: not separable.")
    return rows, cols


def _numpy_pairwise(values: np.ndarray) -> np.ndarray:
    """Sum the last axis in the order numpy's float32 ``add.reduce`` uses for a contiguous run.

    numpy's pairwise summation: fewer than 8 values are added one by one; up to 128 go to
    8 running sums combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the remainder is
    added one by one; longer runs split in two at a multiple of 8.
    """
    n = values.shape[-1]
    if n < 8:
        total = np.zeros(values.shape[:-1], np.float32)
        for i in range(n):
            total += values[..., i]
        return total
    if n > 128:
        half = n // 2
        half -= half % 8
        return _numpy_pairwise(values[..., :half]) + _numpy_pairwise(values[..., half:])
    acc = [values[..., j].copy() for j in range(8)]
    for i in range(8, n - n % 8, 8):
        for j in range(8):
            acc[j] += values[..., i + j]
    total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    for i in range(n - n % 8, n):
        total += values[..., i]
    return total


def grid_patch_and_block_sums(
    grid: np.ndarray, processed_hw: tuple[int, int], *, patch: int, block_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """``patch_and_block_sums(upsample(grid, processed_hw), ...)`` without the full-size map.

    Every row of a nearest-neighbour stretched map repeats a source row, so each patch
    row's sum is computed once per source row and the p rows of a patch are added in
    numpy's order (one row after the other); bit-identical to the full-size reduction,
    several times faster. Patches wider than 128 pixels and single patch columns (where
    numpy merges a patch's rows into one run) take the full-size path.

    Parameters
    ----------
    grid : (rows, cols) float32 score grid.
    processed_hw : (H, W), multiples of ``patch · block_size``.

    Returns
    -------
    patch_scores : (H/p, W/p) float32.
    block_scores : (H/p/b · W/p/b,) float32 in block-raster order.
    """
    grid = np.ascontiguousarray(grid, dtype=np.float32)
    h, w = processed_hw
    hb, wb = h // patch, w // patch
    # One patch column makes a patch's rows contiguous: numpy then sums p·p values as one run.
    if patch > 128 or wb < 2 or hb * patch != h or wb * patch != w:
        return patch_and_block_sums(upsample(grid, processed_hw), patch=patch, block_size=block_size)
    rows, cols = _nearest_rows_cols(grid.shape, (h, w))
    row_sums = _numpy_pairwise(grid[:, cols.reshape(wb, patch)])  # (rows, wb): one patch row each
    stacked = row_sums[rows].reshape(hb, patch, wb)
    patches = np.zeros((hb, wb), np.float32)
    for r in range(patch):
        patches += stacked[:, r, :]
    blocks = patches.reshape(hb // block_size, block_size, wb // block_size, block_size).sum(axis=(1, 3))
    return patches, blocks.reshape(-1)


FrameScores = tuple[np.ndarray, np.ndarray, np.ndarray]
"""One frame's (normalised grid, patch sums (hb, wb), block sums (hb/b · wb/b,))."""


def per_frame_scoring(config: ScoreConfig) -> bool:
    """True when a frame's scores depend on its own grid only (no run-wide cap or maximum)."""
    return NORMALISERS.lookup(config.normalisation).per_frame and config.iframe_score_clip_mode == "none"


def frame_scores(grid: np.ndarray, geometry: Geometry, *, config: ScoreConfig) -> FrameScores:
    """Normalise one raw grid, stretch it over the processed frame and sum patches and blocks.

    Only for configs where :func:`per_frame_scoring` holds.

    Returns
    -------
    (rows, cols) float32 normalised grid, (hb, wb) float32 patch sums and
    (hb/b · wb/b,) float32 block sums.
    """
    normaliser = NORMALISERS.lookup(config.normalisation)
    if not normaliser.per_frame:
        per_frame = ", ".join(repr(name) for name, n in NORMALISERS.items() if n.per_frame)
        raise ValueError(
            f"Invalid normalisation ({config.normalisation!r}) for per-frame scoring. "
            f"Supported values are {per_frame}."
        )
    (norm,) = normaliser.function((grid,), config=config)
    patches, blocks = grid_patch_and_block_sums(
        norm, geometry.processed_hw, patch=geometry.patch, block_size=geometry.block_size
    )
    return norm, patches, blocks


def score_frames(
    decoded: DecodedFrames,
    geometry: Geometry,
    *,
    config: ScoreConfig,
    precomputed: Mapping[int, FrameScores] | None = None,
) -> ScoreMaps:
    """Turn every frame's bitcost grid into a score map and its patch/block sums.

    Parameters
    ----------
    decoded : raw grids, one per candidate row (n rows).
    geometry : processed size, patch and block size.
    config : normalisation and the optional I-frame clip.
    precomputed : :func:`frame_scores` of some source frames' grids (keyed by
        ``decoded.bitcost_source`` values, on exactly those grids with this config and
        geometry), e.g. from the decode workers; used only when
        :func:`per_frame_scoring` holds, the others are computed here.

    Returns
    -------
    ScoreMaps with ``patch_scores`` (n, hb, wb) and ``block_scores`` (n, hb/b · wb/b),
    both float32, plus the normalised grids for re-rendering maps.
    """
    if per_frame_scoring(config):
        return _score_per_frame(decoded, geometry, config, precomputed or {})
    return _score_run_wide(decoded, geometry, config)


def _score_per_frame(
    decoded: DecodedFrames, geometry: Geometry, config: ScoreConfig, precomputed: Mapping[int, FrameScores]
) -> ScoreMaps:
    n = len(decoded.grids)
    hb, wb = geometry.grid_hw
    b = geometry.block_size
    # Repeated candidates (N > frame count, or parity backfill) share one grid object;
    # a grid is the one of its row's source frame, which is what ``precomputed`` keys.
    sources = decoded.bitcost_source.tolist()
    first_row: dict[int, int] = {}
    for row in range(n):
        first_row.setdefault(id(decoded.grids[row]), row)
    done = {g: precomputed[sources[r]] for g, r in first_row.items() if sources[r] in precomputed}
    todo = [g for g in first_row if g not in done]

    def one(key: int) -> FrameScores:
        grid = decoded.grids[first_row[key]]
        return frame_scores(np.zeros((1, 1), np.float32) if grid is None else grid, geometry, config=config)

    if todo:
        with ThreadPoolExecutor(max_workers=config.threads) as pool:
            done.update(zip(todo, pool.map(one, todo), strict=True))
    patch_scores = np.empty((n, hb, wb), dtype=np.float32)
    block_scores = np.empty((n, (hb // b) * (wb // b)), dtype=np.float32)
    grids = []
    for row in range(n):
        norm, patch_scores[row], block_scores[row] = done[id(decoded.grids[row])]
        grids.append(norm)
    return ScoreMaps(
        grids=tuple(grids),
        processed_hw=geometry.processed_hw,
        patch_scores=patch_scores,
        block_scores=block_scores,
        iframe_clip_cap=None,
        debug={"iframe_score_clip_debug": None},
    )


def _score_run_wide(decoded: DecodedFrames, geometry: Geometry, config: ScoreConfig) -> ScoreMaps:
    """Scores whose normalisation or I-frame cap looks at every frame of the run."""
    hw = geometry.processed_hw
    p, b = geometry.patch, geometry.block_size
    hb, wb = geometry.grid_hw
    n = len(decoded.grids)
    raw = [np.zeros((1, 1), np.float32) if g is None else g for g in decoded.grids]
    grids = NORMALISERS.lookup(config.normalisation).function(raw, config=config)
    cap: float | None = None
    debug: dict[str, Any] | None = None
    clip_rows: set[int] = set()
    if config.iframe_score_clip_mode == "non_i_percentile":
        i_rows = [r for r, t in enumerate(decoded.pict_types) if t.upper() == "I"]
        non_i = [r for r in range(n) if r not in set(i_rows)]
        pct = min(max(config.iframe_score_clip_percentile, 0.0), 100.0)
        debug = {
            "mode": config.iframe_score_clip_mode,
            "percentile": pct,
            "iframe_count": len(i_rows),
        }
        if i_rows and non_i:
            flat = np.concatenate([upsample(grids[r], hw).ravel() for r in non_i])
            cap = float(np.percentile(flat, pct))
            del flat
            clip_rows = set(i_rows)
            debug.update({"cap": cap, "applied": True, "changed_pixels": 0})
        else:
            debug["applied"] = False
    patch_scores = np.empty((n, hb, wb), dtype=np.float32)
    block_scores = np.empty((n, (hb // b) * (wb // b)), dtype=np.float32)
    # Repeated candidates (N > frame count, or parity backfill) share one grid object;
    # clipped I-frame rows are computed on their own.
    first_row: dict[object, int] = {}
    for row in range(n):
        first_row.setdefault(("clip", row) if row in clip_rows else id(decoded.grids[row]), row)

    def sums(row: int) -> tuple[np.ndarray, np.ndarray, int]:
        if row not in clip_rows:
            return (*grid_patch_and_block_sums(grids[row], hw, patch=p, block_size=b), 0)
        score_map = upsample(grids[row], hw)
        changed = int(np.count_nonzero(score_map > cap))
        score_map = np.minimum(score_map, np.float32(cap))
        return (*patch_and_block_sums(score_map, patch=p, block_size=b), changed)

    with ThreadPoolExecutor(max_workers=config.threads) as pool:
        computed = dict(zip(first_row, pool.map(sums, first_row.values()), strict=True))
    for row in range(n):
        key = ("clip", row) if row in clip_rows else id(decoded.grids[row])
        patch_scores[row], block_scores[row], _ = computed[key]
    if clip_rows:
        assert debug is not None
        debug["changed_pixels"] = sum(changed for _, _, changed in computed.values())
    return ScoreMaps(
        grids=grids,
        processed_hw=hw,
        patch_scores=patch_scores,
        block_scores=block_scores,
        iframe_clip_cap=cap,
        debug={"iframe_score_clip_debug": debug},
    )
