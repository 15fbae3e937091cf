"""onevision's selection: frame 0 whole, then a global or per-time-bucket top-K of patches."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.config import Registry, Variant, param, validate_fields
from backend.records import (
    Candidates,
    Geometry,
    Groups,
    GroupSelection,
    GroupSpec,
    RunWarning,
    ScoreMaps,
    Selection,
)
from backend.selectors.onevision.letterbox import letterbox_offsets, valid_patches

TOPK_MODES = ("global", "time_bucket")  # the names of TOPK below (the options' choices)
SELECTOR = "onevision"


@dataclass(frozen=True, kw_only=True)
class TopKConfig:
    """How the patches after frame 0 are chosen."""

    num_images: int = param(8, label="Canvases", help="canvases (frame 0 whole + the rest)", min=2, max=256)
    topk_mode: str = param("global", label="Top-K mode", help="global or time_bucket", choices=TOPK_MODES)
    time_bucket_count: int = param(-1, label="Time buckets", help="-1: num_images - 1", min=-1, max=100000)
    static_fallback: bool = param(True, label="Static fallback", help="uniform frames for static videos")
    static_abs_thresh: float = param(2.0, label="Static level", help="p95 level (0–255)", min=0, max=255)
    static_rel_thresh: float = param(0.15, label="Static contrast", help="(p95 − p50) / p95", min=0, max=1)
    static_uniform_frames: int = param(4, label="Static frames", help="uniform frames", min=1, max=1000)

    def __post_init__(self) -> None:
        validate_fields(self)


@dataclass(frozen=True)
class StaticCheck:
    """The static-video test on the patch mean energies (0–255) of frames 1…."""

    p95: float
    p50: float
    rel_contrast: float
    is_static: bool

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def static_check(patch_means: np.ndarray, *, config: TopKConfig) -> StaticCheck:
    """Whether the energy is nearly static: p95 < a, or p95 < 2a with (p95 − p50) / p95 < r.

    Parameters
    ----------
    patch_means : any shape, patch mean energies on a 0–255 scale.

    Examples
    --------
    >>> static_check(np.array([0.0, 1.0, 1.0, 1.5]), config=TopKConfig()).is_static  # p95 1.425 < 2
    True
    >>> static_check(np.array([0.0, 1.0, 10.0, 30.0]), config=TopKConfig()).is_static
    False
    """
    values = np.asarray(patch_means, np.float64).ravel()
    if values.size == 0:
        return StaticCheck(0.0, 0.0, 0.0, True)
    p95 = float(np.percentile(values, 95.0))
    p50 = float(np.percentile(values, 50.0))
    rel = (p95 - p50) / max(p95, 1e-6)
    a = config.static_abs_thresh
    return StaticCheck(p95, p50, rel, bool(p95 < a or (p95 < 2 * a and rel < config.static_rel_thresh)))


def uniform_patch_picks(ts: list[int], valid_flat: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """The static fallback's uniform part: whole frames when the budget allows, else the budget
    spread evenly over the frames and, within each, evenly over its valid patches.

    Parameters
    ----------
    ts : the frames (candidate positions) picked uniformly.
    valid_flat : (m,) int, the flat indices of a frame's valid patches, raster order.
    budget : patches available.

    Returns
    -------
    (t, flat patch) pairs, frame by frame.

    Examples
    --------
    >>> uniform_patch_picks([1, 3], np.arange(4), 8)
    [(1, 0), (1, 1), (1, 2), (1, 3), (3, 0), (3, 1), (3, 2), (3, 3)]
    >>> uniform_patch_picks([1, 3], np.arange(4), 3)
    [(1, 0), (1, 2), (3, 0)]
    """
    m = int(valid_flat.size)
    if not ts or m == 0 or budget <= 0:
        return []
    if budget >= len(ts) * m:
        return [(t, int(v)) for t in ts for v in valid_flat]
    out: list[tuple[int, int]] = []
    base, extra = divmod(budget, len(ts))
    for j, t in enumerate(ts):
        k = base + (1 if j < extra else 0)
        if k <= 0:
            continue
        if k >= m:
            picks = list(range(m))
        else:
            step = m / k
            picks = list(dict.fromkeys(min(m - 1, round(i * step)) for i in range(k)))
            for p in range(m):  # duplicates after rounding: fill with the first unused
                if len(picks) >= k:
                    break
                if p not in picks:
                    picks.append(p)
        out.extend((t, int(valid_flat[p])) for p in picks)
    return out


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first; ties keep the lower index (stable)."""
    if k <= 0:
        return np.zeros(0, np.int64)
    return np.argsort(-scores, kind="stable")[:k]


def topk_global(
    cand: np.ndarray, *, budget: int, s_valid: int, config: TopKConfig
) -> tuple[list[int], dict[str, Any]]:
    """One top-K over every valid patch of frames 1…: the ``budget`` best, best first.

    Parameters
    ----------
    cand : (n − 1, S) float32 scores of frames 1…, −inf on the bars.
    budget : patches to choose; s_valid : valid patches per frame.

    Returns
    -------
    Flat indices ``(t − 1) · S + patch`` in the order chosen, and nothing for the debug record.

    Examples
    --------
    >>> topk_global(np.array([[1.0, 5.0], [3.0, -np.inf]], np.float32), budget=2, s_valid=1,
    ...             config=TopKConfig())
    ([1, 2], {})
    """
    del config
    available = cand.shape[0] * s_valid
    return _top(cand.reshape(-1), min(budget, available)).tolist(), {}


def topk_time_bucket(
    cand: np.ndarray, *, budget: int, s_valid: int, config: TopKConfig
) -> tuple[list[int], dict[str, Any]]:
    """Frames 1… in ``time_bucket_count`` contiguous buckets (−1: ``num_images − 1``), the best
    canvas-full (S patches) of each in turn, the list cut at the budget.

    Returns
    -------
    Flat indices as :func:`topk_global`, and ``time_buckets`` (first and last frame of each).

    Examples
    --------
    >>> cand = np.array([[1.0, 5.0], [3.0, 0.0], [2.0, 4.0]], np.float32)
    >>> topk_time_bucket(cand, budget=4, s_valid=2, config=TopKConfig(num_images=3))
    ([1, 2, 5, 4], {'time_buckets': [[1, 2], [3, 3]]})
    """
    n_later, s_total = cand.shape
    later = np.arange(1, n_later + 1)
    count = config.time_bucket_count if config.time_bucket_count > 0 else config.num_images - 1
    count = max(1, min(count, max(1, n_later)))
    buckets = [b for b in np.array_split(later, count) if b.size]
    chosen: list[int] = []
    for b in buckets:
        part = cand[b - 1].reshape(-1)
        top = _top(part, min(s_total, b.size * s_valid))
        chosen += ((b[top // s_total] - 1) * s_total + top % s_total).tolist()
    return chosen[:budget], {"time_buckets": [[int(b[0]), int(b[-1])] for b in buckets]}


TOPK: Registry[Variant] = Registry(
    "topk mode",
    (
        Variant("global", topk_global, "one top-K over every valid patch of frames 1…"),
        Variant("time_bucket", topk_time_bucket, "the best canvas-full of patches of each stretch of time"),
    ),
)


def _static_choices(
    flat_cand: np.ndarray, n: int, valid_flat: np.ndarray, s_total: int, budget: int, *, config: TopKConfig
) -> tuple[list[int], list[int]]:
    """The static fallback: patches of a few uniformly spaced frames first, then the top-K of the rest.

    Returns
    -------
    (flat candidate indices in the order chosen, the uniformly spaced frames t).
    """
    f_u = max(1, min(n - 1, config.static_uniform_frames))
    ts = list(dict.fromkeys(np.linspace(1, n - 1, f_u).astype(int).tolist()))
    for t in range(1, n):  # duplicates after rounding: fill with the first unused frames
        if len(ts) >= f_u:
            break
        if t not in ts:
            ts.append(t)
    picks = uniform_patch_picks(ts, valid_flat, budget)
    chosen = [(t - 1) * s_total + p for t, p in picks]
    rest = flat_cand.copy()
    rest[chosen] = -np.inf
    available = (n - 1) * int(valid_flat.size)
    k = min(budget - len(chosen), available - len(chosen))
    chosen += _top(rest, k).tolist()
    return chosen, ts


def _topk_warnings(
    check: StaticCheck, debug: dict[str, Any], kept: int, budget: int, *, config: TopKConfig
) -> tuple[RunWarning, ...]:
    warnings: list[RunWarning] = []
    if config.static_fallback and check.is_static:
        warnings.append(
            RunWarning(
                "static_fallback",
                f"nearly static video (p95 {check.p95:.2f}, contrast {check.rel_contrast:.2f}): "
                f"frames {debug['static_uniform_frames']} kept uniformly before the top-K",
            )
        )
    if kept < budget:
        warnings.append(
            RunWarning(
                "onevision_padded",
                f"{kept} of {budget} patches available after frame 0; the rest is padding",
            )
        )
    return tuple(warnings)


def select_topk(
    candidates: Candidates,
    scores: ScoreMaps,
    geometry: Geometry,
    *,
    config: TopKConfig,
) -> tuple[Selection, Groups]:
    """Frame 0 whole; the remaining canvases' patches by global or per-bucket top-K.

    Parameters
    ----------
    candidates : (n,) sampled frames; position t is the positions' time index.
    scores : (n, rows·cols) patch scores of the letterboxed frames.
    geometry : the square's patch grid (1×1 blocks).
    config : canvases, top-K mode and the static fallback.

    Returns
    -------
    Selection of one group (every candidate; frame 0 its anchor) whose ``kept`` rows are
    [t, patch_row, patch_col] and ``ranked`` the choices in the order they were made, and the
    Groups record holding that group and the selection's figures.
    """
    n = int(candidates.frame_indices.size)
    rows, cols = geometry.grid_hw
    s_total = rows * cols
    valid = valid_patches(geometry).ravel()
    valid_flat = np.flatnonzero(valid)
    s_valid = int(valid_flat.size)
    budget = (config.num_images - 1) * s_total
    block = scores.block_scores.astype(np.float32, copy=False)
    # Candidate scores of frames 1…, padding patches excluded: index (t - 1) · S + flat.
    cand = block[1:].copy() if n > 1 else np.zeros((0, s_total), np.float32)
    cand[:, ~valid] = -np.inf
    flat_cand = cand.reshape(-1)
    available = (n - 1) * s_valid
    debug: dict[str, Any] = {
        "selector": SELECTOR,
        "topk_mode": config.topk_mode,
        "S_total": s_total,
        "S_valid": s_valid,
        "K_rem": budget,
        "letterbox_offsets": list(letterbox_offsets(geometry)),
    }
    area = float(geometry.patch * geometry.patch)
    check = static_check(
        block[:, valid] / area * 255.0 if n else np.zeros(0),
        config=config,
    )
    chosen: list[int] = []  # flat candidate indices, in the order they were chosen
    if config.static_fallback and check.is_static and n > 1:
        chosen, ts = _static_choices(flat_cand, n, valid_flat, s_total, budget, config=config)
        debug["static_uniform_frames"] = ts
    else:
        chosen, extra = TOPK.lookup(config.topk_mode).function(
            cand, budget=budget, s_valid=s_valid, config=config
        )
        debug |= extra
    debug["static"] = check.as_dict() | {"fallback_on": config.static_fallback}
    order = np.asarray(chosen, np.int64)
    t_of = order // s_total + 1
    flat_of = order % s_total
    ranked = np.stack([t_of, flat_of], axis=1).astype(np.int32) if order.size else np.zeros((0, 2), np.int32)
    ranked_scores = flat_cand[order].astype(np.float32) if order.size else np.zeros(0, np.float32)
    by_pos = np.lexsort((flat_of, t_of)) if order.size else np.zeros(0, np.int64)
    kept = (
        np.stack([t_of[by_pos], flat_of[by_pos] // cols, flat_of[by_pos] % cols], axis=1).astype(np.int32)
        if order.size
        else np.zeros((0, 3), np.int32)
    )
    selection_group = GroupSelection(
        group_index=0,
        start=0,
        end=n,
        frame_indices=tuple(int(i) for i in candidates.frame_indices),
        anchor_swapped_with=None,
        kept=kept,
        kept_scores=ranked_scores[by_pos].astype(np.float32),
        ranked=ranked,
        ranked_scores=ranked_scores,
        candidate_count=available,
        budget=budget,
        cutoff_score=float(ranked_scores.min()) if order.size else float("-inf"),
    )
    warnings = _topk_warnings(check, debug, int(kept.shape[0]), budget, config=config)
    debug["selected"] = int(kept.shape[0])
    why = "onevision: one group of every sampled frame"
    spec = GroupSpec(group_index=0, start=0, end=n, stop_reason=why, readiness=debug)
    groups = Groups(specs=(spec,), threshold=0.0, threshold_debug={}, trace=(), dropped_tail=None)
    return Selection((selection_group,), (), warnings), groups
