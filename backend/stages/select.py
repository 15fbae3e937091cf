"""Selection stage: per group, one full anchor frame plus the top-K 2×2 blocks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.config import PROFILES, Profile, option_of, param, validate_fields
from backend.quirks import quirk_on, quirk_warning
from backend.records import (
    Candidates,
    FrameQuality,
    Geometry,
    Groups,
    GroupSelection,
    RunWarning,
    ScoreMaps,
    Selection,
)
from backend.stages.group import GroupConfig, block_budget

MIN_PARITY_GROUP_FRAMES = 4


@dataclass(frozen=True, kw_only=True)
class SelectConfig:
    """Selection parameters."""

    images_per_group: int = option_of(GroupConfig, "images_per_group")
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity skips groups shorter than 4 frames like cvp; clean keeps them",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest float32 scores, best first.

    Membership at the k-th value follows numpy's introselect (``argpartition``), as
    cvp's does; the result is then ordered by descending score (quicksort).

    Examples
    --------
    >>> top_k(np.array([1, 5, 3, 5], np.float32), 2).tolist()
    [1, 3]
    """
    if k <= 0 or scores.size == 0:
        return np.zeros(0, dtype=np.int64)
    if k < scores.size:
        idx = np.argpartition(-scores, kth=k - 1)[:k]
    else:
        idx = np.arange(scores.size)
    return idx[np.argsort(-scores[idx])]


def select_group(
    frame_indices: np.ndarray,
    block_scores: np.ndarray,
    good: np.ndarray,
    *,
    group_index: int,
    start: int,
    budget: int,
    block_cols: int,
) -> GroupSelection:
    """Anchor swap and top-K blocks for one group.

    Parameters
    ----------
    frame_indices : (G,) int, the group's candidates in order.
    block_scores : (G, nblocks) float32.
    good : (G,) bool bad-frame mask.

    Returns
    -------
    GroupSelection with ``kept`` rows [t, block_row, block_col] (t after the swap).
    """
    g = frame_indices.shape[0]
    order = np.arange(g)
    swapped = None
    if g and not good[0]:
        later = np.flatnonzero(good[1:])
        if later.size:
            j = int(later[0]) + 1
            order[0], order[j] = j, 0
            swapped = j
    ids = frame_indices[order]
    blocks = block_scores[order]
    ok = good[order]
    ts = np.flatnonzero(ok[1:]) + 1  # candidate positions: good frames after the anchor
    nb = blocks.shape[1]
    if ts.size:
        cand = np.ascontiguousarray(blocks[ts], dtype=np.float32).reshape(-1)
    else:
        cand = np.zeros(0, np.float32)
    idx = top_k(cand, min(budget, cand.size)) if budget > 0 else np.zeros(0, np.int64)
    # Candidate i is block i % nb of position ts[i // nb].
    ranked = (
        np.stack([ts[idx // nb], idx % nb], axis=1).astype(np.int32)
        if idx.size
        else np.zeros((0, 2), np.int32)
    )
    ranked_scores = cand[idx]
    by_pos = np.lexsort((ranked[:, 1], ranked[:, 0])) if idx.size else np.zeros(0, np.int64)
    kept_tf = ranked[by_pos]
    kept = (
        np.stack([kept_tf[:, 0], kept_tf[:, 1] // block_cols, kept_tf[:, 1] % block_cols], axis=1).astype(
            np.int32
        )
        if idx.size
        else np.zeros((0, 3), np.int32)
    )
    return GroupSelection(
        group_index=group_index,
        start=start,
        end=start + g,
        frame_indices=tuple(int(i) for i in ids),
        anchor_swapped_with=swapped,
        kept=kept,
        kept_scores=ranked_scores[by_pos].astype(np.float32),
        ranked=ranked,
        ranked_scores=ranked_scores.astype(np.float32),
        candidate_count=int(cand.size),
        budget=int(budget),
        cutoff_score=float(ranked_scores.min()) if idx.size else float("-inf"),
    )


def select_blocks(
    candidates: Candidates,
    scores: ScoreMaps,
    quality: FrameQuality,
    groups: Groups,
    geometry: Geometry,
    *,
    config: SelectConfig,
) -> Selection:
    """Choose the anchor and kept blocks of every group.

    Parameters
    ----------
    candidates : (n,) frame indices.
    scores : (n, nblocks) block scores.
    quality : (n,) good mask.
    groups : group specs.
    geometry : block grid.
    config : images per group and profile.

    Returns
    -------
    Selection with one GroupSelection per processed group.
    """
    budget = block_budget(geometry, config.images_per_group)
    block_cols = geometry.block_grid_hw[1]
    out: list[GroupSelection] = []
    skipped: list[int] = []
    warnings: list[RunWarning] = []
    skip_short = quirk_on(config.profile, "group_skipped")
    for spec in groups.specs:
        if skip_short and spec.frame_count < MIN_PARITY_GROUP_FRAMES:
            skipped.append(spec.group_index)
            warnings.append(
                quirk_warning(
                    "group_skipped",
                    f"group {spec.group_index} (candidates {spec.start}–{spec.end - 1}) skipped: "
                    f"{spec.frame_count} frames < {MIN_PARITY_GROUP_FRAMES}",
                )
            )
            continue
        sl = slice(spec.start, spec.end)
        sel = select_group(
            candidates.frame_indices[sl],
            scores.block_scores[sl],
            quality.good[sl],
            group_index=spec.group_index,
            start=spec.start,
            budget=budget,
            block_cols=block_cols,
        )
        if sel.kept.shape[0] < budget:
            warnings.append(
                quirk_warning(
                    "group_padded",
                    f"group {spec.group_index}: {sel.kept.shape[0]} of {budget} blocks available; "
                    "the rest is padding",
                )
            )
        out.append(sel)
    return Selection(tuple(out), tuple(skipped), tuple(warnings))
