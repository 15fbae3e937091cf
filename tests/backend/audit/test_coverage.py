"""The coverage audit: hand-computed runs, a brute-force reference on random tokens, synthetic runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

from backend.audit import AuditConfig, AuditSource, audit_coverage, audit_source_of_run
from backend.audit.sources import _frame_secs
from backend.records import TOKEN_COLUMNS

CONFIG = AuditConfig()
GROUP = TOKEN_COLUMNS.index("group_index")


def _tokens(rows: list[tuple[int, int, int]], *, group: int = 0, valid: int = 1) -> np.ndarray:
    """(N, 8) token rows at (frame_index, patch_row, patch_col), every other column 0 but group and valid."""
    out = np.zeros((len(rows), len(TOKEN_COLUMNS)), np.int32)
    out[:, :3] = np.asarray(rows, np.int32).reshape(-1, 3)
    out[:, TOKEN_COLUMNS.index("group_index")] = group
    out[:, TOKEN_COLUMNS.index("valid")] = valid
    return out


def _source(tokens: np.ndarray, frames: int, grid: tuple[int, int], fps: float = 2.0) -> AuditSource:
    secs, step = _frame_secs(frames, fps)
    return AuditSource(
        tokens=tokens, total_frames=frames, grid_hw=grid, frame_secs=secs, frame_secs_step=step
    )


def test_a_six_frame_run_by_hand() -> None:
    # Grid 1×2 at 2 fps. Frame 0 is seen whole, frame 2 at its right patch, frame 5 at its left.
    tokens = _tokens([(0, 0, 0), (0, 0, 1), (2, 0, 1), (5, 0, 0)])
    audit = audit_coverage(_source(tokens, 6, (1, 2)), config=CONFIG)
    assert audit.frame_coverage.tolist() == [1, 0, 0.5, 0, 0, 0.5]
    assert audit.observed_frames == 3
    assert audit.never_observed_spans.tolist() == [[1, 1], [3, 4]]
    # Left patch: last seen 0, 0, 0, 0, 0, 5; right patch: 0, 0, 2, 2, 2, 2.
    assert audit.mean_staleness_frames.tolist() == [0, 1, 1, 2, 3, 1.5]
    assert audit.max_staleness_frames.tolist() == [0, 1, 2, 3, 4, 3]
    assert audit.staleness_map.tolist() == [[4, 3]]
    assert audit.video_max_staleness_frames == 4
    assert audit.span_secs.tolist() == [0.5, 1.0]
    assert audit.duration_secs == 3.0 and audit.longest_never_observed_secs == 1.0
    assert audit.never_observed_fraction == 0.5
    (group,) = audit.groups
    assert (group.group_index, group.tokens, group.covered_frames, group.kept_score_fraction) == (
        0,
        4,
        3,
        None,
    )
    assert audit.kept_score_fraction is None


def test_a_position_never_covered_is_f_plus_one_stale() -> None:
    # Only frame 2's left patch is seen: the right patch is 1, 2, 3, 4 frames stale, the left 1, 2, 0, 1.
    audit = audit_coverage(_source(_tokens([(2, 0, 0)]), 4, (1, 2)), config=CONFIG)
    assert audit.max_staleness_frames.tolist() == [1, 2, 3, 4]
    assert audit.mean_staleness_frames.tolist() == [1, 2, 1.5, 2.5]
    assert audit.staleness_map.tolist() == [[2, 4]]
    assert audit.never_observed_spans.tolist() == [[0, 1], [3, 3]]


def test_padding_rows_count_nowhere() -> None:
    # Padding (valid 0) may point anywhere, even outside the grid: it covers nothing.
    tokens = np.concatenate([_tokens([(1, 0, 0)]), _tokens([(-1, -1, -1), (9, 9, 9)], group=-1, valid=0)])
    audit = audit_coverage(_source(tokens, 3, (1, 1)), config=CONFIG)
    assert audit.frame_coverage.tolist() == [0, 1, 0]
    assert [g.group_index for g in audit.groups] == [0]


def _brute_force(tokens: np.ndarray, frames: int, grid: tuple[int, int]) -> dict[str, np.ndarray]:
    """Coverage and staleness by the definitions, one frame and position at a time."""
    hp, wp = grid
    seen = np.zeros((frames, hp * wp), bool)
    for f, r, c, *_rest, valid in tokens.tolist():
        if valid:
            seen[f, r * wp + c] = True
    stale = np.zeros((frames, hp * wp), np.int64)
    for p in range(hp * wp):
        last = -1
        for f in range(frames):
            last = f if seen[f, p] else last
            stale[f, p] = f - last
    return {
        "coverage": seen.mean(axis=1),
        "observed": seen.any(axis=1),
        "mean": stale.mean(axis=1),
        "max": stale.max(axis=1),
        "map": stale.max(axis=0).reshape(hp, wp),
    }


@pytest.mark.parametrize("seed", range(12))
def test_random_runs_match_the_definitions(seed: int) -> None:
    rng = np.random.default_rng(seed)
    frames, grid = int(rng.integers(1, 40)), (int(rng.integers(1, 5)), int(rng.integers(1, 6)))
    n = int(rng.integers(0, 3 * frames))
    # Few frames hold tokens, so spans of every length occur; repeats of one position are allowed.
    picked = rng.choice(frames, size=max(1, frames // 3))
    rows = [
        (int(rng.choice(picked)), int(rng.integers(grid[0])), int(rng.integers(grid[1]))) for _ in range(n)
    ]
    tokens = _tokens(rows) if rows else np.zeros((0, len(TOKEN_COLUMNS)), np.int32)
    tokens[:, TOKEN_COLUMNS.index("valid")] = rng.integers(0, 2, size=len(rows)) | (
        rng.random(len(rows)) < 0.7
    )
    source = _source(tokens, frames, grid, fps=float(rng.choice([1.0, 24.0, 29.97])))
    want = _brute_force(tokens, frames, grid)
    audits = [audit_coverage(source, config=AuditConfig(frames_per_chunk=k)) for k in (1, 3, 512)]
    for audit in audits:
        assert np.array_equal(audit.frame_coverage, want["coverage"])
        assert np.allclose(audit.mean_staleness_frames, want["mean"])
        assert np.array_equal(audit.max_staleness_frames, want["max"])
        assert np.array_equal(audit.staleness_map, want["map"])
        assert ((audit.frame_coverage >= 0) & (audit.frame_coverage <= 1)).all()
        # The spans are disjoint, ordered, maximal and hold exactly the unobserved frames.
        spans = audit.never_observed_spans
        inside = np.zeros(frames, bool)
        for a, b in spans.tolist():
            assert a <= b and not inside[a : b + 1].any()
            inside[a : b + 1] = True
            assert (a == 0 or want["observed"][a - 1]) and (b == frames - 1 or want["observed"][b + 1])
        assert np.array_equal(inside, ~want["observed"])
        assert np.all(np.diff(spans[:, 0]) > 0) if len(spans) > 1 else True
        total = audit.span_secs.sum()
        assert audit.never_observed_fraction == pytest.approx(total / audit.duration_secs)
        assert audit.never_observed_fraction == pytest.approx(1 - want["observed"].mean())
    assert all(a.as_dict() == audits[0].as_dict() for a in audits[1:])


def test_tokens_outside_the_grid_or_frames_are_refused() -> None:
    with pytest.raises(ValueError, match=r"Invalid token \(\[0, 1, 0\]\)\. Supported values are"):
        audit_coverage(_source(_tokens([(0, 1, 0)]), 2, (1, 2)), config=CONFIG)
    with pytest.raises(
        ValueError, match=r"Invalid token \(\[5, 0, 0\]\)\. Supported values are frame_index 0 to 1"
    ):
        audit_coverage(_source(_tokens([(5, 0, 0)]), 2, (1, 2)), config=CONFIG)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match=r"Invalid frames per chunk \(0\)\. Supported values are between 1"):
        AuditConfig(frames_per_chunk=0)


def test_frame_times_from_packets_when_the_rate_is_unknown() -> None:
    secs, step = _frame_secs(5, 0.0, np.asarray([10.0, 10.5, 11.0]))
    assert secs.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0] and step == 0.5
    secs, step = _frame_secs(3, 25.0)
    assert secs.tolist() == [0.0, 0.04, 0.08] and step == 0.04


def test_a_synthetic_run_anchors_are_fresh_and_scores_add_up() -> None:
    run = synthetic_run(frames=90, sampled=range(0, 90, 3), groups=3)
    audit = audit_coverage(audit_source_of_run(run), config=CONFIG)
    assert audit.frames == 90 and audit.patch_grid == tuple(run.geometry.grid_hw)
    # Every anchor frame is shown whole: coverage 1 and no position stale there.
    for sel in run.selection.groups:
        anchor = int(run.candidates.frame_indices[sel.start])
        assert audit.frame_coverage[anchor] == 1.0
        assert audit.mean_staleness_frames[anchor] == 0 and audit.max_staleness_frames[anchor] == 0
    # Frames between the sampled ones hold no token: each gap of two frames is a span.
    assert {tuple(s) for s in audit.never_observed_spans.tolist()} == {
        (f + 1, f + 2) for f in range(0, 90, 3)
    }
    assert audit.never_observed_fraction == pytest.approx(60 / 90)
    valid = run.canvases.tokens[run.canvases.tokens[:, TOKEN_COLUMNS.index("valid")] == 1]
    assert sum(g.tokens for g in audit.groups) == len(valid)
    # Kept score mass by hand: each (candidate, patch) a valid token names, counted once.
    scores = run.scores.patch_scores
    row_of = {int(f): i for i, f in enumerate(run.candidates.frame_indices)}
    kept = {(row_of[f], r, c) for f, r, c in valid[:, :3].tolist()}
    by_hand = sum(float(scores[i, r, c]) for i, r, c in kept) / float(scores.sum(dtype=np.float64))
    assert audit.kept_score_fraction == pytest.approx(by_hand)
    for g in audit.groups:
        sel = run.selection.groups[g.group_index]
        mine = {(row_of[f], r, c) for f, r, c in valid[valid[:, GROUP] == g.group_index, :3].tolist()}
        whole = float(scores[sel.start : sel.end].sum(dtype=np.float64))
        assert g.kept_score_fraction == pytest.approx(sum(float(scores[k]) for k in mine) / whole)
        assert 0 < g.kept_score_fraction <= 1


def test_a_selectors_bars_are_left_out() -> None:
    # A 3×2 grid whose top row is a letterbox bar: the picture is rows 1–2, four positions.
    tokens = _tokens([(0, 1, 0), (0, 1, 1), (0, 2, 0), (1, 2, 1)])
    secs, step = _frame_secs(2, 1.0)
    source = AuditSource(
        tokens=tokens,
        total_frames=2,
        grid_hw=(3, 2),
        frame_secs=secs,
        frame_secs_step=step,
        picture=(1, 3, 0, 2),
    )
    audit = audit_coverage(source, config=CONFIG)
    assert audit.frame_coverage.tolist() == [0.75, 0.25]
    assert audit.max_staleness_frames.tolist() == [1, 1] and audit.mean_staleness_frames.tolist() == [
        0.25,
        0.75,
    ]
    assert audit.staleness_map.tolist() == [[-1, -1], [1, 1], [1, 1]]
    with pytest.raises(
        ValueError, match=r"Invalid picture \(\(1, 4, 0, 2\)\)\. Supported values are 0 <= r0"
    ):
        audit_coverage(dataclasses.replace(source, picture=(1, 4, 0, 2)), config=CONFIG)
