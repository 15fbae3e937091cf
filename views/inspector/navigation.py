"""Frame navigation: which candidate row a key press or a timeline click leads to."""

from __future__ import annotations

import numpy as np

from backend.pipeline import RunResult

ACTIONS = ("prev", "next", "prev_key", "next_key", "prev_group", "next_group", "home", "end")

KEY_MAP = (
    ("← / ,", "previous frame"),
    ("→ / .", "next frame"),
    ("Shift+← / Shift+→", "previous / next keyframe"),
    ("[ / ]", "previous / next group boundary"),
    ("Home / End", "first / last frame"),
    ("?", "show this key map"),
)


def keyframe_rows(result: RunResult) -> np.ndarray:
    """Candidate rows showing each bitstream keyframe, sorted.

    A keyframe that avoidance moved off (and that is not a candidate itself) is
    represented by the row of the frame it moved to.
    """
    fids = result.candidates.frame_indices.tolist()
    first_row: dict[int, int] = {}
    for row, fid in enumerate(fids):
        first_row.setdefault(int(fid), row)
    moved = dict(result.candidates.moved)
    rows = set()
    for key in result.info.keyframe_indices:
        if key in first_row:
            rows.add(first_row[key])
        elif moved.get(key) in first_row:
            rows.add(first_row[moved[key]])
    return np.asarray(sorted(rows), dtype=np.int64)


def group_start_rows(result: RunResult) -> np.ndarray:
    """First candidate row of every group, sorted."""
    return np.asarray(sorted({s.start for s in result.groups.specs}), dtype=np.int64)


def navigate(result: RunResult, row: int, action: str) -> int:
    """The row an action moves to from ``row``; stays put at either end.

    Examples
    --------
    ``next`` → row + 1; ``next_group`` → the first group start after ``row``.
    """
    if action not in ACTIONS:
        raise ValueError(f"Invalid action ({action!r}). Supported values are {', '.join(ACTIONS)}.")
    last = int(result.candidates.frame_indices.size) - 1
    row = min(max(int(row), 0), last)
    if action in ("prev", "next"):
        return min(max(row + (1 if action == "next" else -1), 0), last)
    if action == "home":
        return 0
    if action == "end":
        return last
    marks = keyframe_rows(result) if action.endswith("_key") else group_start_rows(result)
    if action.startswith("next"):
        later = marks[marks > row]
        return int(later[0]) if later.size else row
    earlier = marks[marks < row]
    return int(earlier[-1]) if earlier.size else row


def row_for_frame(result: RunResult, frame_index: float) -> int:
    """The candidate row showing ``frame_index``, or the nearest candidate's row."""
    fids = result.candidates.frame_indices.astype(np.int64)
    return int(np.argmin(np.abs(fids - round(float(frame_index)))))
