"""Coverage audit: which frames and patch positions the model saw, and how stale each was."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.config import param, validate_fields
from backend.records import TOKEN_COLUMNS, _check, _ShapeRepr

_FRAME, _ROW, _COL = 0, 1, 2
_GROUP = TOKEN_COLUMNS.index("group_index")
_VALID = TOKEN_COLUMNS.index("valid")


@dataclass(frozen=True, repr=False)
class AuditSource(_ShapeRepr):
    """What an audit reads of one run: its tokens and the video's frames and patch grid."""

    tokens: np.ndarray
    """(N, 8) int32 token rows, columns :data:`backend.records.TOKEN_COLUMNS`."""
    total_frames: int
    """F, the source's decoded frames (0 … F−1), candidates or not."""
    grid_hw: tuple[int, int]
    """(Hp, Wp), the run's processed patch grid."""
    frame_secs: np.ndarray
    """(F,) float64 seconds of each frame from the first frame."""
    frame_secs_step: float
    """Seconds one frame lasts (1 / fps), so a span of frames ``[a, b]`` lasts
    ``frame_secs[b] − frame_secs[a] + frame_secs_step``."""
    group_score_mass: dict[int, tuple[float, float]] | None = None
    """group_index → (kept score mass, the group's whole score mass); None when the run's
    score maps are not at hand (a cvp folder read without its video)."""
    score_mass: float | None = None
    """Score mass of every candidate frame, grouped or not (a dropped tail counts, unkept)."""
    picture: tuple[int, int, int, int] | None = None
    """``(r0, r1, c0, c1)``: the patch rows r0…r1−1 and columns c0…c1−1 that show the video; the
    rest of the grid is a selector's bars (onevision's letterbox), which the audit leaves out.
    None: the whole grid."""

    def __post_init__(self) -> None:
        _check(
            self.tokens.ndim == 2 and self.tokens.shape[1] == len(TOKEN_COLUMNS), f"{self.tokens.shape = }"
        )
        _check(self.frame_secs.shape == (self.total_frames,), f"{self.frame_secs.shape = }")


@dataclass(frozen=True, kw_only=True)
class AuditConfig:
    """How the audit works through the staleness table (it never changes the numbers)."""

    frames_per_chunk: int = param(
        512,
        label="Frames per chunk",
        help="frames whose staleness is held at once (memory: chunk × patch positions × 4 bytes)",
        min=1,
        max=1 << 20,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


@dataclass(frozen=True, repr=False)
class GroupCoverage(_ShapeRepr):
    """One group's share of the run."""

    group_index: int
    tokens: int
    """Valid tokens of the group."""
    covered_frames: int
    """Distinct frames the group's valid tokens come from."""
    kept_score_fraction: float | None
    """Score mass of the kept patches / the group's whole score mass (None: scores unknown)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "group_index": self.group_index,
            "tokens": self.tokens,
            "covered_frames": self.covered_frames,
            "kept_score_fraction": self.kept_score_fraction,
        }


@dataclass(frozen=True, repr=False)
class CoverageAudit(_ShapeRepr):
    """What the model saw of a video (definitions: ``docs/audit.md``)."""

    frames: int
    patch_grid: tuple[int, int]
    frame_coverage: np.ndarray
    """(F,) float64 in [0, 1]: distinct covered patch positions of each frame / the picture's
    positions (Hp·Wp unless the selector adds bars)."""
    never_observed_spans: np.ndarray
    """(s, 2) int64 ``[first, last]`` frame_index (inclusive) of each maximal unobserved run."""
    span_secs: np.ndarray
    """(s,) float64 duration of each never-observed span."""
    duration_secs: float
    mean_staleness_frames: np.ndarray
    """(F,) float64, mean over patch positions of the frames since each was last covered."""
    max_staleness_frames: np.ndarray
    """(F,) int64, the maximum over patch positions."""
    staleness_map: np.ndarray
    """(Hp, Wp) int64, each position's maximum staleness over the video; −1 off the picture."""
    groups: tuple[GroupCoverage, ...]
    kept_score_fraction: float | None
    """Kept score mass / the score mass of every candidate frame (None: scores unknown)."""

    @property
    def observed_frames(self) -> int:
        return int(np.count_nonzero(self.frame_coverage > 0))

    @property
    def longest_never_observed_secs(self) -> float:
        return float(self.span_secs.max()) if self.span_secs.size else 0.0

    @property
    def never_observed_fraction(self) -> float:
        """Share of the video's duration inside never-observed spans."""
        return float(self.span_secs.sum() / self.duration_secs) if self.duration_secs > 0 else 0.0

    @property
    def video_max_staleness_frames(self) -> int:
        return int(self.max_staleness_frames.max()) if self.frames else 0

    def summary(self) -> dict[str, Any]:
        """The figures a batch summary row holds (``backend.store.summary.AUDIT_SUMMARY_COLUMNS``)."""
        share = self.kept_score_fraction
        return {
            "observed_frames": self.observed_frames,
            "never_observed_spans": int(self.never_observed_spans.shape[0]),
            "longest_never_observed_secs": round(self.longest_never_observed_secs, 6),
            "never_observed_fraction": round(self.never_observed_fraction, 6),
            "mean_staleness_frames": round(float(self.mean_staleness_frames.mean()), 6)
            if self.frames
            else 0.0,
            "video_max_staleness_frames": self.video_max_staleness_frames,
            "kept_score_fraction": None if share is None else round(share, 6),
        }

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object (keys in ``docs/audit.md``)."""
        return {
            "frames": self.frames,
            "patch_grid": list(self.patch_grid),
            "observed_frames": self.observed_frames,
            "frame_coverage": self.frame_coverage.tolist(),
            "never_observed_spans": self.never_observed_spans.tolist(),
            "longest_never_observed_secs": self.longest_never_observed_secs,
            "never_observed_fraction": self.never_observed_fraction,
            "mean_staleness_frames": self.mean_staleness_frames.tolist(),
            "max_staleness_frames": self.max_staleness_frames.tolist(),
            "video_max_staleness_frames": self.video_max_staleness_frames,
            "staleness_map": self.staleness_map.tolist(),
            "kept_score_fraction": self.kept_score_fraction,
            "groups": [g.as_dict() for g in self.groups],
        }


def _covered_positions(source: AuditSource) -> np.ndarray:
    """(c,) int64 distinct flat ``frame_index · Hp·Wp + patch`` ids of the valid tokens."""
    hp, wp = source.grid_hw
    rows = source.tokens[source.tokens[:, _VALID] != 0]
    f, r, c = (rows[:, k].astype(np.int64) for k in (_FRAME, _ROW, _COL))
    inside = (f >= 0) & (f < source.total_frames) & (r >= 0) & (r < hp) & (c >= 0) & (c < wp)
    if not inside.all():
        bad = rows[~inside][0, :3].tolist()
        raise ValueError(
            f"Invalid token ({bad}). Supported values are frame_index 0 to {source.total_frames - 1}, "
            f"patch_row 0 to {hp - 1} and patch_col 0 to {wp - 1}."
        )
    return np.unique(f * (hp * wp) + r * wp + c)


def _picture_mask(source: AuditSource) -> np.ndarray:
    """(Hp·Wp,) bool: the positions that show the video."""
    hp, wp = source.grid_hw
    r0, r1, c0, c1 = source.picture if source.picture is not None else (0, hp, 0, wp)
    if not (0 <= r0 < r1 <= hp and 0 <= c0 < c1 <= wp):
        raise ValueError(
            f"Invalid picture ({source.picture}). Supported values are "
            f"0 <= r0 < r1 <= {hp} and 0 <= c0 < c1 <= {wp}."
        )
    mask = np.zeros((hp, wp), bool)
    mask[r0:r1, c0:c1] = True
    return mask.reshape(-1)


def _spans(observed: np.ndarray) -> np.ndarray:
    """(s, 2) inclusive ``[first, last]`` of each maximal run of False in ``observed``."""
    edges = np.diff(np.concatenate([[1], observed.astype(np.int8), [1]]))
    starts, ends = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1) - 1
    return np.stack([starts, ends], axis=1).astype(np.int64)


def _staleness(
    covered: np.ndarray, frames: int, picture: np.ndarray, chunk: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-frame mean and max staleness over the picture's positions and the per-position max
    (−1 off the picture), a chunk of frames at a time.

    ``last`` carries, per position, the last frame that covered it (−1: none yet), so the
    staleness at f is ``f − last`` (f + 1 when never covered up to f).
    """
    inside = np.flatnonzero(picture)
    index_of = np.full(picture.size, -1, np.int64)
    index_of[inside] = np.arange(inside.size)
    frame_of, pos_of = np.divmod(covered, picture.size)
    keep = index_of[pos_of] >= 0
    frame_of, pos_of = frame_of[keep], index_of[pos_of[keep]]
    positions = inside.size
    mean = np.empty(frames, np.float64)
    peak = np.empty(frames, np.int64)
    worst = np.zeros(positions, np.int64)
    last = np.full(positions, -1, np.int64)
    for f0 in range(0, frames, chunk):
        f1 = min(frames, f0 + chunk)
        seen = np.full((f1 - f0, positions), -1, np.int64)
        here = (frame_of >= f0) & (frame_of < f1)
        seen[frame_of[here] - f0, pos_of[here]] = frame_of[here]
        seen[0] = np.maximum(seen[0], last)
        np.maximum.accumulate(seen, axis=0, out=seen)
        stale = np.arange(f0, f1, dtype=np.int64)[:, None] - seen
        mean[f0:f1] = stale.mean(axis=1)
        peak[f0:f1] = stale.max(axis=1)
        np.maximum(worst, stale.max(axis=0), out=worst)
        last = seen[-1]
    full = np.full(picture.size, -1, np.int64)
    full[inside] = worst
    return mean, peak, full


def _group_rows(source: AuditSource) -> tuple[GroupCoverage, ...]:
    """One row per group named by a token (padding rows of no group, −1, aside), in one pass over
    the tokens: a mask per group cost O(groups × tokens), ~16 ms on a 712-frame run of 40 groups."""
    group_of = source.tokens[:, _GROUP].astype(np.int64)
    named = group_of >= 0
    groups = np.flatnonzero(np.bincount(group_of[named]))  # group indices are small counts
    mine = named & (source.tokens[:, _VALID] != 0)
    index = np.searchsorted(groups, group_of[mine])
    counts = np.bincount(index, minlength=groups.size)
    frames = source.tokens[mine, _FRAME].astype(np.int64)  # 0 … F−1: checked by _covered_positions
    span = int(frames.max()) + 1 if frames.size else 1
    covered = np.bincount(np.unique(index * span + frames) // span, minlength=groups.size)
    out = []
    for k, g in enumerate(groups.tolist()):
        share = None
        if source.group_score_mass is not None and g in source.group_score_mass:
            kept, whole = source.group_score_mass[g]
            share = float(kept / whole) if whole > 0 else None  # nothing to keep: no share
        out.append(
            GroupCoverage(
                group_index=int(g),
                tokens=int(counts[k]),
                covered_frames=int(covered[k]),
                kept_score_fraction=share,
            )
        )
    return tuple(out)


def audit_coverage(source: AuditSource, *, config: AuditConfig) -> CoverageAudit:
    """Frame coverage, never-observed spans and staleness of one run's tokens.

    Parameters
    ----------
    source
        The run's tokens (N, 8), its frame count F, patch grid (Hp, Wp) and frame times (F,).
    config
        How many frames the staleness table holds at once.

    Returns
    -------
    CoverageAudit with (F,) coverage and staleness series, the (s, 2) never-observed spans and
    the (Hp, Wp) map of each position's maximum staleness.

    Raises
    ------
    ValueError if a valid token lies outside the frames or the patch grid.
    """
    hp, wp = source.grid_hw
    frames, picture = source.total_frames, _picture_mask(source)
    covered = _covered_positions(source)
    covered = covered[picture[covered % picture.size]]  # a token on the bars shows no video
    per_frame = np.bincount(covered // picture.size, minlength=frames)[:frames]
    coverage = per_frame / int(picture.sum())
    spans = _spans(per_frame > 0)
    secs = source.frame_secs
    span_secs = (
        (secs[spans[:, 1]] - secs[spans[:, 0]] + source.frame_secs_step) if spans.size else np.zeros(0)
    )
    duration = float(secs[-1] - secs[0] + source.frame_secs_step) if frames else 0.0
    mean, peak, worst = _staleness(covered, frames, picture, config.frames_per_chunk)
    return CoverageAudit(
        frames=frames,
        patch_grid=(hp, wp),
        frame_coverage=coverage,
        never_observed_spans=spans,
        span_secs=np.asarray(span_secs, np.float64),
        duration_secs=duration,
        mean_staleness_frames=mean,
        max_staleness_frames=peak,
        staleness_map=worst.reshape(hp, wp),
        groups=_group_rows(source),
        kept_score_fraction=_kept_share(source),
    )


def _kept_share(source: AuditSource) -> float | None:
    if source.group_score_mass is None or not source.score_mass:
        return None
    return float(sum(kept for kept, _ in source.group_score_mass.values()) / source.score_mass)
