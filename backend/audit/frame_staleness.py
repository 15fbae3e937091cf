"""Staleness at one frame: how many frames ago a valid token last covered each patch position."""

from __future__ import annotations

import numpy as np

from backend.audit.coverage import _COL, _FRAME, _ROW, _VALID, AuditSource, _picture_mask


def staleness_at_frame(source: AuditSource, frame_index: int) -> np.ndarray:
    """Each patch position's staleness at one frame (definitions: ``docs/audit.md``).

    The staleness of position p at frame f is f minus the last frame ≤ f in which a valid token
    covered p, and f + 1 when no valid token covered p up to f. It is the per-position table whose
    mean and maximum over the picture are the audit's ``mean_staleness_frames[f]`` and
    ``max_staleness_frames[f]`` (:func:`backend.audit.audit_coverage`); its maximum over every frame
    is the ``staleness_map``. The input is read, never changed.

    Parameters
    ----------
    source : AuditSource
        The run's tokens (N, 8), frame count F, patch grid (Hp, Wp) and picture box.
    frame_index : int
        The frame f, 0 ≤ f < F (any decoded frame, a candidate or not).

    Returns
    -------
    numpy.ndarray
        (Hp, Wp) int64: the staleness of each position in frames, 0 where a valid token of frame f
        covers it; −1 off the picture (a selector's bars, ``source.picture``).

    Raises
    ------
    ValueError
        ``frame_index`` outside 0 … F−1, or a valid token of a frame ≤ f outside the patch grid.

    Examples
    --------
    A 1×2 grid: frame 0 seen whole, frame 2 at its right patch only.

    >>> from backend.audit.sources import _frame_secs
    >>> tokens = np.zeros((3, 8), np.int32)
    >>> tokens[:, :3] = [(0, 0, 0), (0, 0, 1), (2, 0, 1)]
    >>> tokens[:, 7] = 1
    >>> secs, step = _frame_secs(4, 1.0)
    >>> source = AuditSource(tokens=tokens, total_frames=4, grid_hw=(1, 2), frame_secs=secs,
    ...                      frame_secs_step=step)
    >>> staleness_at_frame(source, 3).tolist()
    [[3, 1]]
    """
    hp, wp = source.grid_hw
    frames = source.total_frames
    if isinstance(frame_index, bool) or not isinstance(frame_index, int | np.integer):
        raise ValueError(f"Invalid frame_index ({frame_index!r}). Supported values are 0 to {frames - 1}.")
    f = int(frame_index)
    if not 0 <= f < frames:
        raise ValueError(f"Invalid frame_index ({f}). Supported values are 0 to {frames - 1}.")
    tokens = source.tokens
    # Whole columns, then the picked entries: a copy of every picked row would cost twice as much.
    pick = np.flatnonzero((tokens[:, _VALID] != 0) & (tokens[:, _FRAME] <= f))
    seen = tokens[pick, _FRAME].astype(np.int64)
    r, c = tokens[pick, _ROW].astype(np.int64), tokens[pick, _COL].astype(np.int64)
    inside = (seen >= 0) & (r >= 0) & (r < hp) & (c >= 0) & (c < wp)
    if not inside.all():
        bad = tokens[pick[~inside][0], :3].tolist()
        raise ValueError(
            f"Invalid token ({bad}). Supported values are frame_index 0 to {frames - 1}, "
            f"patch_row 0 to {hp - 1} and patch_col 0 to {wp - 1}."
        )
    last = np.full(hp * wp, -1, np.int64)
    np.maximum.at(last, r * wp + c, seen)
    stale = f - last  # a position never covered up to f: f − (−1) = f + 1
    stale[~_picture_mask(source)] = -1
    return stale.reshape(hp, wp)
