"""Run facts the overlays draw: kept blocks, anchors, groups, frame facts and lost blocks of a row."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from backend.pipeline import RunResult
from backend.records import GroupSelection

LOST_FRACTION = 0.9
"""A block is *lost* when it was a selection candidate (a good, non-anchor frame of a
processed group), was not kept, and its block score is ≥ ``LOST_FRACTION · cutoff_score``
of its group, where ``cutoff_score`` is the lowest kept score. These are the blocks that
scored close to the winners but did not fit the budget. Groups that kept nothing
(``cutoff_score = −inf``) have no lost blocks."""


def check_row(result: RunResult, row: int) -> None:
    """Refuse a candidate row outside 0 … n−1 (ValueError listing the range)."""
    n = int(result.candidates.frame_indices.size)
    if not 0 <= row < n:
        raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}.")


def kept_blocks_by_row(result: RunResult) -> Mapping[int, np.ndarray]:
    """Candidate row → kept blocks as a read-only (m, 2) int64 array of [block_row, block_col]
    (:attr:`backend.records.Selection.kept_by_row`, worked out once per run)."""
    return result.selection.kept_by_row


def anchor_rows(result: RunResult) -> frozenset[int]:
    """Candidate rows that are group anchors (kept whole)."""
    return frozenset(int(sel.candidate_rows()[0]) for sel in result.selection.groups)


def group_of_row(result: RunResult, row: int) -> tuple[GroupSelection | None, int | None]:
    """The selection holding candidate ``row`` and its group position t (after the anchor swap)."""
    for sel in result.selection.groups:
        if sel.start <= row < sel.end:
            t = int(np.flatnonzero(sel.candidate_rows() == row)[0])
            return sel, t
    return None, None


def frame_facts(result: RunResult, row: int) -> tuple[int, float | None, str]:
    """(frame_index, time_secs or None, pict_type) of a candidate row.

    ``time_secs`` counts from the first frame, so times mean the same in every container (an
    MPEG-TS stream starting at 1.483 s shows its first frame at 0 s; the container's start is
    ``info.start_pts_secs``). Packets are in presentation order, so frame_index indexes them when
    the packet count equals the frame count; otherwise the time comes from the frame rate.
    """
    info = result.info
    fid = int(result.candidates.frame_indices[row])
    if 0 <= fid < info.packet_pts_secs.size:
        secs: float | None = float(info.packet_pts_secs[fid] - info.start_pts_secs)
    else:
        secs = fid / info.fps if info.fps else None
    return fid, secs, result.decoded.pict_types[row]


def lost_blocks(result: RunResult, row: int) -> np.ndarray:
    """Blocks of a candidate frame that scored high but lost to the budget.

    Returns
    -------
    (block_rows, block_cols) bool mask; see :data:`LOST_FRACTION` for the definition.
    """
    check_row(result, row)
    bh_n, bw_n = result.geometry.block_grid_hw
    mask = np.zeros((bh_n, bw_n), bool)
    sel, t = group_of_row(result, row)
    if sel is None or t == 0 or not result.quality.good[row] or not np.isfinite(sel.cutoff_score):
        return mask
    scores = result.scores.block_scores[row].reshape(bh_n, bw_n)
    mask = scores >= np.float32(LOST_FRACTION * sel.cutoff_score)
    kept = sel.kept[sel.kept[:, 0] == t]
    mask[kept[:, 1], kept[:, 2]] = False
    return mask
