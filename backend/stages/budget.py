"""Hard token budget: a run's anchors, then its blocks by score, in one fixed order, until N tokens."""

from __future__ import annotations

import collections
from dataclasses import dataclass, replace

import numpy as np

from backend.config import param, validate_fields
from backend.records import BudgetOutcome, Geometry, GroupSelection, ScoreMaps, Selection, VideoInfo

DEFAULT_STOP_GAIN = 0.05
"""A block is worth keeping when its estimated bytes are at least 5 % of an average intra
block's (a keyframe's bytes over its blocks); docs/audit.md, "Choosing the stop gain", has the
measurements on real clips behind it."""
MAX_TOKEN_BUDGET = 100_000_000


@dataclass(frozen=True, kw_only=True)
class BudgetConfig:
    """The controller's budget and content floor, and the canvases each group has room on."""

    token_budget: int = param(
        0,
        label="Token budget",
        help="most valid tokens a run keeps, anchors included, in one nested order (0: the selector's own)",
        min=0,
        max=MAX_TOKEN_BUDGET,
        step=1,
    )
    stop_gain: float = param(
        DEFAULT_STOP_GAIN,
        label="Stop gain",
        help="with a token budget: pass over blocks whose estimated bytes are below this share of an "
        "average keyframe block's (0: keep every block that fits)",
        min=0.0,
        max=100.0,
    )
    images_per_group: int = param(4, label="Images per group", help="canvases of a group", min=1, max=4096)
    scored: bool = True
    """False for a selector without block scores (uniform): its blocks keep the spread order and
    no content stop applies. A scored run whose scores are all 0 (a still clip) passes over every
    block by content."""
    picture_blocks: tuple[int, int, int, int] | None = None
    """``(r0, r1, c0, c1)`` block rows and columns that show the video (None: the whole grid);
    blocks on a selector's bars are never kept."""

    def __post_init__(self) -> None:
        validate_fields(self)


def spread_order(n: int) -> np.ndarray:
    """(n,) int64 permutation of 0…n−1 whose every prefix is spread over the range: 0, then the
    midpoints of the largest gaps (0, n−1, n/2, n/4, 3n/4, …), so that a budget that stops after
    k items still spans the video.

    Examples
    --------
    >>> spread_order(5).tolist()
    [0, 4, 2, 1, 3]
    """
    if n <= 0:
        return np.zeros(0, np.int64)
    order = [0] if n == 1 else [0, n - 1]
    gaps = collections.deque([(0, n - 1)])
    while gaps:  # breadth first: every gap of one level is halved before the next level's
        lo, hi = gaps.popleft()
        if hi - lo < 2:
            continue
        mid = (lo + hi) // 2
        order.append(mid)
        gaps.extend(((lo, mid), (mid, hi)))
    return np.asarray(order, np.int64)


@dataclass(frozen=True)
class _Blocks:
    """Every eligible block after the anchors, in the controller's order."""

    group: np.ndarray  # (m,) position of its group in selection.groups
    t: np.ndarray  # (m,) group-relative frame position (≥ 1)
    flat: np.ndarray  # (m,) block_row · Wb + block_col
    score: np.ndarray  # (m,) float64


def _candidate_blocks(
    selection: Selection, scores: ScoreMaps, geometry: Geometry, picture: np.ndarray
) -> _Blocks:
    """Descending score; ties by the frame's place in a spread order over every non-anchor frame
    (a selector without scores then keeps whole frames spread over the video), then raster."""
    eligible = np.flatnonzero(picture)
    parts: list[tuple[np.ndarray, ...]] = []
    for k, sel in enumerate(selection.groups):
        rows = sel.candidate_rows()
        if rows.size < 2:
            continue
        ts = np.repeat(np.arange(1, rows.size), eligible.size)
        flats = np.tile(eligible, rows.size - 1)
        values = scores.block_scores[rows[ts], flats].astype(np.float64)
        parts.append((np.full(ts.size, k), ts, flats, values, rows[ts]))
    if not parts:
        empty = np.zeros(0, np.int64)
        return _Blocks(empty, empty, empty, np.zeros(0))
    group, t, flat, score, row = (np.concatenate(c) for c in zip(*parts, strict=True))
    frames = np.unique(row)
    spread = np.empty(frames.size, np.int64)
    spread[spread_order(frames.size)] = np.arange(frames.size)
    frame_rank = spread[np.searchsorted(frames, row)]
    order = np.lexsort((flat, frame_rank, -score))
    return _Blocks(group[order], t[order], flat[order], score[order])


def _group_rank(group: np.ndarray, n_groups: int) -> np.ndarray:
    """(m,) each block's place among its group's blocks, in list order."""
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(n_groups))
    rank = np.empty(group.size, np.int64)
    rank[order] = np.arange(group.size) - np.repeat(starts, np.bincount(group, minlength=n_groups))
    return rank


def _gains(
    selection: Selection, scores: ScoreMaps, info: VideoInfo, picks: _Blocks, *, scored: bool
) -> tuple[np.ndarray, float]:
    """(m,) each block's estimated bytes over the bytes of an average keyframe block, and that unit.

    Scores are normalised per frame, so they cannot tell a static clip from a busy one; the
    packets can: a block's bytes are estimated as its frame's packet size shared out as the
    frame's block scores are. The unit is a keyframe's bytes per block, what the whole picture
    costs coded from nothing; not the anchors', which cvp moves off keyframes (a 25-byte P-frame
    anchor of a still clip made every block look worth keeping). Unit 0 (no content stop)
    without scores or when packets do not map onto frames.
    """
    sizes = np.asarray(info.packet_size_bytes, np.float64)
    frames = [np.asarray(sel.frame_indices, np.int64) for sel in selection.groups]
    rows = [sel.candidate_rows() for sel in selection.groups]
    last = max((int(f.max()) for f in frames), default=-1)
    mapped = bool(frames) and sizes.size >= info.total_frames and last < sizes.size
    if not scored or not mapped:
        return np.zeros(picks.group.size), 0.0
    per_frame = scores.block_scores.shape[1]
    keys = np.asarray(info.packet_is_keyframe, bool)[: sizes.size]
    intra = sizes[keys] if keys.any() else sizes[:1]
    unit = float(intra.mean()) / per_frame
    if unit <= 0:
        return np.zeros(picks.group.size), 0.0
    frame_of = np.concatenate(frames)[np.cumsum([0, *map(len, frames)])[:-1][picks.group] + picks.t]
    row_of = np.concatenate(rows)[np.cumsum([0, *map(len, rows)])[:-1][picks.group] + picks.t]
    totals = scores.block_scores.astype(np.float64).sum(axis=1)[row_of]
    share = np.divide(picks.score, totals, out=np.zeros_like(picks.score), where=totals > 0)
    return share * sizes[frame_of] / unit, unit


def _picture_mask(geometry: Geometry, box: tuple[int, int, int, int] | None) -> np.ndarray:
    bh, bw = geometry.block_grid_hw
    r0, r1, c0, c1 = box if box is not None else (0, bh, 0, bw)
    mask = np.zeros((bh, bw), bool)
    mask[r0:r1, c0:c1] = True
    return mask.reshape(-1)


def _budgeted_group(
    sel: GroupSelection, picks: _Blocks, mine: np.ndarray, bw: int, per_canvas: int
) -> GroupSelection:
    """``sel`` keeping the blocks ``picks[mine]`` (in the controller's order)."""
    t, flat, score = picks.t[mine], picks.flat[mine], picks.score[mine]
    by_pos = np.lexsort((flat, t))
    kept = np.stack([t[by_pos], flat[by_pos] // bw, flat[by_pos] % bw], axis=1).astype(np.int32)
    canvas = None
    if sel.kept_canvas is not None:  # a packer that places blocks by canvas: fill them in order
        canvas = (1 + np.arange(kept.shape[0]) // per_canvas).astype(np.int32)
    return replace(
        sel,
        kept=kept.reshape(-1, 3),
        kept_scores=score[by_pos].astype(np.float32),
        ranked=np.stack([t, flat], axis=1).astype(np.int32).reshape(-1, 2),
        ranked_scores=score.astype(np.float32),
        cutoff_score=float(score.min()) if score.size else float("-inf"),
        kept_canvas=canvas,
    )


def budget_selection(
    selection: Selection, scores: ScoreMaps, geometry: Geometry, info: VideoInfo, *, config: BudgetConfig
) -> Selection:
    """Re-select a run's blocks under a hard budget of ``config.token_budget`` valid tokens.

    One fixed priority list: the groups' anchors (whole frames, Hp·Wp tokens each) in
    :func:`spread_order` of the groups, then every block of the groups' other frames
    (block_size² tokens each) by descending score. The list is walked until the first item that
    does not fit (``budget``) or its end. Passed over on the way: a block whose group's canvases
    are full, and a block whose gain (its estimated bytes over an average keyframe block's, see
    :func:`_gains`) is below ``stop_gain``; a list that ends with such blocks passed over stops
    by ``content``, else by ``video_end``. The list does not depend on N, so a larger budget
    keeps a superset of a smaller one's tokens. A group whose anchor does not fit is dropped whole.

    Parameters
    ----------
    selection : the selector's own selection: its groups, anchors and anchor swaps are kept.
    scores : block scores (n, Hb·Wb) of the candidates.
    geometry : the patch and block grid.
    config : the budget, the content floor and the canvases per group.

    Returns
    -------
    Selection with the budgeted blocks, the dropped groups among ``skipped_group_indices`` and a
    :class:`BudgetOutcome` in ``budget``.

    Raises
    ------
    ValueError : a budget below one anchor frame.
    """
    anchor_tokens = geometry.patches_per_canvas
    budget, (hp, wp) = config.token_budget, geometry.grid_hw
    if budget < anchor_tokens:
        raise ValueError(
            f"Invalid token budget ({budget}). Supported values are 0 (the selector's own) or at least "
            f"{anchor_tokens}, one anchor frame of this run's {hp}x{wp} grid."
        )
    bw = geometry.block_grid_hw[1]
    per_canvas = geometry.block_grid_hw[0] * bw
    block_tokens = geometry.block_size**2
    picture = _picture_mask(geometry, config.picture_blocks)
    n_groups = len(selection.groups)
    anchors = min(n_groups, budget // anchor_tokens)
    kept_groups = np.sort(spread_order(n_groups)[:anchors])
    used, blocks = anchors * anchor_tokens, 0
    reason = "budget" if anchors < n_groups else "video_end"
    picks = _candidate_blocks(selection, scores, geometry, picture)
    gain, unit = _gains(selection, scores, info, picks, scored=config.scored)
    take = np.zeros(picks.group.size, bool)
    if anchors == n_groups and picks.group.size:
        # Passed over, whatever N: blocks beyond their group's room (ranked after its first C),
        # then blocks worth less than stop_gain of an anchor's block.
        room = (config.images_per_group - 1) * per_canvas
        fits = _group_rank(picks.group, n_groups) < room
        worth = gain >= config.stop_gain if config.stop_gain > 0 and unit > 0 else np.ones_like(fits)
        eligible = np.flatnonzero(fits & worth)
        afford = (budget - used) // block_tokens
        if afford < eligible.size:
            reason = "budget"
        elif (fits & ~worth).any():
            reason = "content"
        take[eligible[:afford]] = True
        blocks = int(min(afford, eligible.size))
        used += blocks * block_tokens
    groups = []
    for k in kept_groups.tolist():
        groups.append(_budgeted_group(selection.groups[k], picks, take & (picks.group == k), bw, per_canvas))
    kept_set = set(kept_groups.tolist())
    dropped = tuple(sel.group_index for k, sel in enumerate(selection.groups) if k not in kept_set)
    outcome = BudgetOutcome(
        token_budget=budget,
        tokens_used=int(used),
        stop_reason=reason,
        stop_gain=float(config.stop_gain),
        anchors=int(anchors),
        blocks=blocks,
        gain_unit_bytes=unit,
    )
    return Selection(
        groups=tuple(groups),
        skipped_group_indices=tuple(sorted(selection.skipped_group_indices + dropped)),
        warnings=selection.warnings,
        budget=outcome,
    )
