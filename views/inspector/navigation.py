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
    ("Space", "play / pause (at the chosen rate)"),
    ("b", "A/B flip: the frame with the layers or run saved as B, and back"),
    ("+ / − / 0", "zoom in / out / fit (wheel zooms, drag pans)"),
    ("?", "show or hide this key map"),
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


def group_of_row(result: RunResult, row: int) -> int | None:
    """The group holding candidate ``row`` (skipped groups included), None outside every group."""
    for spec in result.groups.specs:
        if spec.start <= row < spec.end:
            return int(spec.group_index)
    return None


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


def row_for_frame(result: RunResult, frame_index: object, *, default_row: int = 0) -> int:
    """The candidate row showing ``frame_index``, or the nearest candidate's row.

    A click anywhere on a plot sends whatever x the browser read: ``frame_index`` may be a
    string, None, NaN or beyond the video. Out-of-range values go to the nearest candidate;
    what is not a number at all returns ``default_row`` (clamped to the run), never an error.
    """
    fids = result.candidates.frame_indices.astype(np.int64)
    last = int(fids.size) - 1
    try:
        value = float(str(frame_index).strip()) if frame_index is not None else float("nan")
    except ValueError:
        value = float("nan")
    if not np.isfinite(value):
        return min(max(int(default_row), 0), last)
    value = min(max(value, -1e12), 1e12)
    return int(np.argmin(np.abs(fids - round(value))))
