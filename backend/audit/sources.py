"""What an audit reads: the tokens, frames and scores of a run, or of a cvp output folder."""

from __future__ import annotations

import numpy as np

from backend.audit.coverage import _FRAME, _GROUP, _VALID, AuditSource
from backend.cvp_format.read import CvpOutput
from backend.errors import InputError
from backend.pipeline.recipe import RunResult
from backend.selectors import picture_patches


def _frame_secs(
    total_frames: int, fps: float, packet_pts_secs: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """(F,) seconds from the first frame and one frame's duration: frame_index / fps, else the
    packets' presentation times (then the median packet step is a frame's duration)."""
    if fps > 0:
        return np.arange(total_frames, dtype=np.float64) / fps, 1.0 / fps
    pts = np.asarray(packet_pts_secs if packet_pts_secs is not None else [], np.float64)[:total_frames]
    if pts.size:
        pts = pts - pts[0]
    step = float(np.median(np.diff(pts))) if pts.size > 1 else 1.0
    tail = (
        pts[-1] + step * np.arange(1, total_frames - pts.size + 1)
        if pts.size
        else np.arange(total_frames) * step
    )
    return np.concatenate([pts, tail]).astype(np.float64), step


def _score_mass(result: RunResult) -> dict[int, tuple[float, float]] | None:
    """group_index → (kept, whole) patch-score mass; None when the score grid is not the token grid."""
    patch_scores = result.scores.patch_scores
    if patch_scores.shape[1:] != tuple(result.geometry.grid_hw) or patch_scores.shape[0] != len(
        result.candidates.frame_indices
    ):
        return None
    frames = result.candidates.frame_indices.astype(np.int64)
    order = np.argsort(frames, kind="stable")
    tokens = result.canvases.tokens
    tokens = tokens[tokens[:, _VALID] != 0]
    # Candidate row of each token's frame (−1: not a candidate), then each patch counted once.
    at = np.searchsorted(frames[order], tokens[:, _FRAME])
    at = np.minimum(at, max(0, frames.size - 1))
    rows = np.where(frames[order][at] == tokens[:, _FRAME], order[at], -1) if frames.size else at - 1
    hw = patch_scores.shape[1] * patch_scores.shape[2]
    flat = np.where(
        rows >= 0, rows * hw + tokens[:, 1].astype(np.int64) * patch_scores.shape[2] + tokens[:, 2], -1
    )
    flat, first = np.unique(flat, return_index=True)
    groups = tokens[first, _GROUP]
    ok = flat >= 0
    values = patch_scores.reshape(-1)[flat[ok]].astype(np.float64)
    kept_by_group = dict(zip(*_sums_by(groups[ok], values), strict=True))
    return {
        sel.group_index: (
            kept_by_group.get(sel.group_index, 0.0),
            float(patch_scores[sel.start : sel.end].sum(dtype=np.float64)),
        )
        for sel in result.selection.groups
    }


def _sums_by(keys: np.ndarray, values: np.ndarray) -> tuple[list[int], list[float]]:
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq.tolist(), np.bincount(inverse, weights=values, minlength=uniq.size).tolist()


def audit_source_of_run(result: RunResult, *, scores: bool = True) -> AuditSource:
    """The audit's view of a selection run (any selector, or an imported cvp folder).

    Frames are the video's decoded frames: ``info.total_frames``, widened to the last candidate
    when the container's count fell short. ``scores=False`` leaves the score masses unknown
    (None) without summing them, for a view that shows only coverage and staleness.
    """
    info = result.info
    last = int(result.candidates.frame_indices.max()) + 1 if result.candidates.frame_indices.size else 0
    total = max(int(info.total_frames), last, 1)
    secs, step = _frame_secs(total, info.fps, info.packet_pts_secs)
    return AuditSource(
        picture=picture_patches(result),
        tokens=result.canvases.tokens,
        total_frames=total,
        grid_hw=tuple(result.geometry.grid_hw),
        frame_secs=secs,
        frame_secs_step=step,
        group_score_mass=_score_mass(result) if scores else None,
        score_mass=float(result.scores.patch_scores.sum(dtype=np.float64)) if scores else None,
    )


def audit_source_of_output(cvp: CvpOutput) -> AuditSource:
    """The audit's view of a cvp output folder read without its video: its meta.json gives the
    frame count and frame rate; the folder holds no scores of the blocks it dropped, so the
    kept score share is unknown.

    Raises
    ------
    InputError when meta.json lacks the video's frame count.
    """
    from backend.cvp_format.import_run import tokens_from_positions

    meta = cvp.meta
    total = meta.get("total_frames", meta.get("metadata", {}).get("total_frames"))
    if not isinstance(total, int | float) or total <= 0:
        raise InputError(
            "meta.json has no total_frames: cannot tell the unobserved frames", path=cvp.meta_path
        )
    tokens = tokens_from_positions(cvp.positions, cvp.grid_hw, cvp.canvas_group_index)
    last = int(cvp.positions[:, _FRAME].max()) + 1 if cvp.positions.size else 0
    total = max(int(total), last)
    fps = float(meta.get("fps", meta.get("metadata", {}).get("fps", 0.0)) or 0.0)
    secs, step = _frame_secs(total, fps)
    # Our own folders name the picture's patches when a selector added bars (cvp's never do).
    picture = (meta.get("codec_lens") or {}).get("picture_patches")
    return AuditSource(
        tokens=tokens,
        total_frames=total,
        grid_hw=tuple(cvp.grid_hw),
        frame_secs=secs,
        frame_secs_step=step,
        picture=tuple(int(v) for v in picture) if isinstance(picture, list) and len(picture) == 4 else None,
    )
