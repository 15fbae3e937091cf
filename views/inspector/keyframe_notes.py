"""Keyframe avoidance in words: which keyframes really moved, and what a frame's hover and info line say."""

from __future__ import annotations

from collections.abc import Iterable

from backend.pipeline import RunResult
from backend.records import Candidates


def unique_moves(candidates: Candidates) -> tuple[tuple[int, int], ...]:
    """``candidates.moved`` once each, in the order avoidance first made them.

    A keyframe sampled several times (more samples than frames) is moved once per sample, so
    ``moved`` repeats it; a figure or a sentence names it once.
    """
    return tuple(dict.fromkeys((int(a), int(b)) for a, b in candidates.moved))


def moved_off(candidates: Candidates) -> tuple[tuple[int, int], ...]:
    """The moves that took a keyframe out of the candidates: (keyframe, frame it moved to).

    A keyframe the refill put back (more samples than free frames, ``refilled_keyframes``) is a
    candidate after all, so it is not among them.
    """
    present = set(candidates.frame_indices.tolist())
    return tuple((a, b) for a, b in unique_moves(candidates) if a not in present)


def avoidance_note(result: RunResult, frame_index: int) -> str:
    """What keyframe avoidance did with frame ``frame_index``, in the info line's words ('' for nothing).

    * a candidate a keyframe moved to: ``moved from keyframe K``, plus ``(refilled as a
      candidate too)`` when K is a candidate as well;
    * a keyframe among the candidates although avoidance was on (it stayed, or the refill put
      it back): ``keyframe kept despite avoid_keyframes``;
    * a keyframe moved off the candidates: ``keyframe moved to frame F`` (no info line shows
      it: it is no candidate).
    """
    return avoidance_notes(result, [frame_index])[0]


def avoidance_notes(result: RunResult, frame_indices: Iterable[int]) -> list[str]:
    """:func:`avoidance_note` of each frame, the run's sets built once."""
    candidates = result.candidates
    present = set(candidates.frame_indices.tolist())
    moved_from: dict[int, int] = {}
    for a, b in unique_moves(candidates):
        moved_from.setdefault(b, a)
    moved_to = {a: b for a, b in moved_off(candidates)}
    # Only cvp's options have keyframe avoidance; other selectors' candidates list keyframes too.
    avoiding = bool(getattr(result.options, "avoid_keyframes", False))
    kept_keys = set(candidates.keyframe_indices) if avoiding else set()
    notes = []
    for f in frame_indices:
        fid = int(f)
        if fid in moved_from and fid in present:
            again = " (refilled as a candidate too)" if moved_from[fid] in present else ""
            notes.append(f"moved from keyframe {moved_from[fid]}{again}")
        elif fid in present and fid in kept_keys:
            notes.append("keyframe kept despite avoid_keyframes")
        else:
            notes.append("" if fid not in moved_to else f"keyframe moved to frame {moved_to[fid]}")
    return notes
