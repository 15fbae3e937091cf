"""Staleness at one frame: hand cases, a brute-force reference, the audit's figures, a synthetic run."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

from backend.audit import AuditConfig, AuditSource, audit_coverage, audit_source_of_run, staleness_at_frame
from backend.audit.sources import _frame_secs
from backend.records import TOKEN_COLUMNS

VALID = TOKEN_COLUMNS.index("valid")


def _tokens(rows: list[tuple[int, int, int]], *, group: int = 0, valid: int = 1) -> np.ndarray:
    """(N, 8) token rows at (frame_index, patch_row, patch_col), every other column 0 but group and valid."""
    out = np.zeros((len(rows), len(TOKEN_COLUMNS)), np.int32)
    out[:, :3] = np.asarray(rows, np.int32).reshape(-1, 3)
    out[:, TOKEN_COLUMNS.index("group_index")] = group
    out[:, VALID] = valid
    return out


def _source(
    tokens: np.ndarray,
    frames: int,
    grid: tuple[int, int],
    picture: tuple[int, int, int, int] | None = None,
) -> AuditSource:
    secs, step = _frame_secs(frames, 2.0)
    return AuditSource(
        tokens=tokens,
        total_frames=frames,
        grid_hw=grid,
        frame_secs=secs,
        frame_secs_step=step,
        picture=picture,
    )


def test_a_six_frame_run_by_hand() -> None:
    # Grid 1×2. Frame 0 is seen whole, frame 2 at its right patch, frame 5 at its left.
    # Left patch last seen 0, 0, 0, 0, 0, 5; right patch 0, 0, 2, 2, 2, 2.
    source = _source(_tokens([(0, 0, 0), (0, 0, 1), (2, 0, 1), (5, 0, 0)]), 6, (1, 2))
    got = [staleness_at_frame(source, f).tolist() for f in range(6)]
    assert got == [[[0, 0]], [[1, 1]], [[2, 0]], [[3, 1]], [[4, 2]], [[0, 3]]]
    assert staleness_at_frame(source, 2).shape == (1, 2) and staleness_at_frame(source, 2).dtype == np.int64


def test_a_position_never_covered_up_to_f_is_f_plus_one_stale() -> None:
    # Only frame 2's left patch is seen: the right patch is 1, 2, 3, 4 frames stale, the left 1, 2, 0, 1.
    source = _source(_tokens([(2, 0, 0)]), 4, (1, 2))
    assert [staleness_at_frame(source, f).tolist() for f in range(4)] == [
        [[1, 1]],
        [[2, 2]],
        [[0, 3]],
        [[1, 4]],
    ]


def test_padding_and_later_frames_count_nowhere_and_the_input_is_untouched() -> None:
    # Padding (valid 0) may point anywhere, even outside the grid; frame 3's token is after frame 1.
    tokens = np.concatenate(
        [_tokens([(1, 0, 0), (3, 0, 1)]), _tokens([(-1, -1, -1), (0, 9, 9)], group=-1, valid=0)]
    )
    before = tokens.copy()
    source = _source(tokens, 4, (1, 2))
    assert staleness_at_frame(source, 1).tolist() == [[0, 2]]
    assert staleness_at_frame(source, 3).tolist() == [[2, 0]]
    assert np.array_equal(source.tokens, before)


def test_positions_off_the_picture_are_minus_one() -> None:
    # A 3×2 grid whose top row is a letterbox bar: a token there shows no video and is not drawn.
    tokens = _tokens([(0, 0, 0), (0, 1, 0), (0, 1, 1), (1, 2, 1)])
    source = _source(tokens, 3, (3, 2), picture=(1, 3, 0, 2))
    assert staleness_at_frame(source, 0).tolist() == [[-1, -1], [0, 0], [1, 1]]
    assert staleness_at_frame(source, 2).tolist() == [[-1, -1], [2, 2], [3, 1]]


def _brute_force(tokens: np.ndarray, frames: int, grid: tuple[int, int]) -> np.ndarray:
    """(F, Hp, Wp) staleness by the definition: for each frame and position, walk back to the
    last frame a valid token covered it."""
    hp, wp = grid
    seen = np.zeros((frames, hp, wp), bool)
    for f, r, c, *_rest, valid in tokens.tolist():
        if valid:
            seen[f, r, c] = True
    stale = np.zeros((frames, hp, wp), np.int64)
    for f in range(frames):
        for r in range(hp):
            for c in range(wp):
                back = next((f - g for g in range(f, -1, -1) if seen[g, r, c]), f + 1)
                stale[f, r, c] = back
    return stale


@pytest.mark.parametrize("seed", range(10))
def test_random_runs_match_the_definition_and_the_audit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    frames, grid = int(rng.integers(1, 30)), (int(rng.integers(1, 5)), int(rng.integers(1, 6)))
    n = int(rng.integers(0, 3 * frames))
    picked = rng.choice(frames, size=max(1, frames // 3))
    rows = [
        (int(rng.choice(picked)), int(rng.integers(grid[0])), int(rng.integers(grid[1]))) for _ in range(n)
    ]
    tokens = _tokens(rows) if rows else np.zeros((0, len(TOKEN_COLUMNS)), np.int32)
    tokens[:, VALID] = rng.random(len(rows)) < 0.7
    source = _source(tokens, frames, grid)
    want = _brute_force(tokens, frames, grid)
    got = np.stack([staleness_at_frame(source, f) for f in range(frames)])
    assert np.array_equal(got, want)
    # The audit's per-frame mean and max and its per-position map are this table's.
    audit = audit_coverage(source, config=AuditConfig())
    assert np.allclose(got.reshape(frames, -1).mean(axis=1), audit.mean_staleness_frames)
    assert np.array_equal(got.reshape(frames, -1).max(axis=1), audit.max_staleness_frames)
    assert np.array_equal(got.max(axis=0), audit.staleness_map)


def test_a_synthetic_runs_anchors_are_fresh_and_unsampled_frames_age() -> None:
    # Every third frame sampled, three groups of ten candidates: anchors at frames 0, 30 and 60.
    run = synthetic_run(frames=90, sampled=range(0, 90, 3), groups=3)
    source = audit_source_of_run(run)
    hp, wp = run.geometry.grid_hw
    for sel in run.selection.groups:
        anchor = int(run.candidates.frame_indices[sel.start])
        assert np.array_equal(staleness_at_frame(source, anchor), np.zeros((hp, wp), np.int64))
        # Frames anchor+1 and anchor+2 hold no token: every position ages by one frame each.
        assert np.array_equal(staleness_at_frame(source, anchor + 1), np.ones((hp, wp), np.int64))
        assert np.array_equal(staleness_at_frame(source, anchor + 2), np.full((hp, wp), 2))
    # A frame some of whose blocks were kept: those patches are fresh, the rest older.
    sel = run.selection.groups[0]
    t, br, bc = (int(v) for v in sel.kept[0])
    fid = int(run.candidates.frame_indices[sel.start + t])
    stale = staleness_at_frame(source, fid)
    assert (stale[2 * br : 2 * br + 2, 2 * bc : 2 * bc + 2] == 0).all() and stale.max() > 0


def test_frames_outside_the_video_and_tokens_outside_the_grid_are_refused() -> None:
    source = _source(_tokens([(0, 0, 0)]), 3, (1, 2))
    for bad in (-1, 3, 1.0, True, "1"):
        with pytest.raises(ValueError, match=r"Invalid frame_index \(.*\)\. Supported values are 0 to 2\."):
            staleness_at_frame(source, bad)  # type: ignore[arg-type]
    assert staleness_at_frame(source, np.int64(2)).tolist() == [[2, 3]]
    off = _source(_tokens([(0, 1, 0)]), 2, (1, 2))
    with pytest.raises(ValueError, match=r"Invalid token \(\[0, 1, 0\]\)\. Supported values are"):
        staleness_at_frame(off, 1)


def test_the_docstring_example_runs() -> None:
    module = importlib.import_module("backend.audit.frame_staleness")
    failures, tried = doctest.testmod(module, extraglobs={"np": np})
    assert tried > 0 and failures == 0
