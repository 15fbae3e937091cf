"""The hard token budget (backend.stages.budget) on a synthetic run whose figures are known by hand.

The synthetic run is 112×112 with 14-pixel patches: an anchor is 8×8 = 64 tokens, a 2×2 block
4 tokens, a canvas 16 blocks; 150 candidates in 3 groups of 50 (anchors at frames 0, 50, 100).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

from backend.records import Selection
from backend.stages.budget import BudgetConfig, budget_selection, spread_order

ANCHOR, BLOCK, PER_CANVAS = 64, 4, 16


@pytest.fixture(scope="module")
def run():
    return synthetic_run(frames=150, groups=3)


def _budget(run, **config) -> Selection:
    return budget_selection(run.selection, run.scores, run.geometry, run.info, config=BudgetConfig(**config))


def _valid_tokens(selection: Selection) -> int:
    return sum(ANCHOR + BLOCK * g.kept.shape[0] for g in selection.groups)


def _kept_blocks(selection: Selection) -> set[tuple[int, int, int]]:
    return {
        (g.frame_indices[int(t)], int(r), int(c)) for g in selection.groups for t, r, c in g.kept.tolist()
    }


@pytest.mark.parametrize("n", range(0, 40))
def test_spread_order_is_a_permutation_whose_prefixes_span_the_range(n: int) -> None:
    order = spread_order(n).tolist()
    assert sorted(order) == list(range(n))
    if n >= 2:
        assert order[:2] == [0, n - 1]
    # Every prefix of 2^k + 1 items leaves no gap wider than the range over 2^k (rounded up).
    for k in range(1, 6):
        size = 2**k + 1
        if size > n:
            break
        prefix = sorted(order[:size])
        assert max(np.diff(prefix)) <= -(-(n - 1) // 2**k)


def test_spread_order_of_five() -> None:
    assert spread_order(5).tolist() == [0, 4, 2, 1, 3]


@pytest.mark.parametrize("budget", [64, 100, 192, 196, 260, 400, 1000, 3000])
def test_valid_tokens_never_exceed_the_budget_and_are_counted_in_the_outcome(run, budget: int) -> None:
    got = _budget(run, token_budget=budget, stop_gain=0.0)
    assert _valid_tokens(got) <= budget
    assert got.budget.tokens_used == _valid_tokens(got)
    assert got.budget.anchors == len(got.groups)
    assert got.budget.blocks == sum(g.kept.shape[0] for g in got.groups)
    # Stopped by the budget: the next item would not fit (an anchor, or a block once all are in).
    if got.budget.stop_reason == "budget":
        step = ANCHOR if len(got.groups) < 3 else BLOCK
        assert budget - got.budget.tokens_used < step


def test_a_larger_budget_keeps_a_superset(run) -> None:
    previous: set[tuple[int, int, int]] = set()
    previous_groups: set[int] = set()
    for budget in (64, 128, 192, 196, 240, 320, 640, 1200, 2400, 10_000):
        got = _budget(run, token_budget=budget)
        groups = {g.group_index for g in got.groups}
        blocks = _kept_blocks(got)
        assert previous_groups <= groups and previous <= blocks, budget
        previous, previous_groups = blocks, groups


def test_anchors_come_first_in_spread_order_and_a_group_without_room_is_dropped(run) -> None:
    got = _budget(run, token_budget=2 * ANCHOR + BLOCK * 3)  # two anchors, then no blocks yet
    assert [g.group_index for g in got.groups] == [0, 2]  # spread_order(3) = 0, 2, 1
    assert got.skipped_group_indices == (1,)
    assert all(g.kept.shape[0] == 0 for g in got.groups)
    assert (got.budget.stop_reason, got.budget.anchors, got.budget.blocks) == ("budget", 2, 0)
    assert got.budget.tokens_used == 2 * ANCHOR
    # Anchors are the selector's own: frame, swap and candidates untouched.
    for g in got.groups:
        own = run.selection.groups[g.group_index]
        assert (g.frame_indices, g.anchor_swapped_with, g.start, g.end) == (
            own.frame_indices,
            own.anchor_swapped_with,
            own.start,
            own.end,
        )


def test_blocks_are_taken_by_descending_score_across_groups(run) -> None:
    got = _budget(run, token_budget=3 * ANCHOR + 10 * BLOCK, stop_gain=0.0, images_per_group=64)
    assert got.budget.blocks == 10
    kept = _kept_blocks(got)
    bw = run.geometry.block_grid_hw[1]
    row_of = {int(f): i for i, f in enumerate(run.candidates.frame_indices)}
    anchors = {g.frame_indices[0] for g in run.selection.groups}
    every = [
        (float(run.scores.block_scores[row_of[f], r * bw + c]), (f, r, c))
        for f in row_of
        if f not in anchors
        for r in range(run.geometry.block_grid_hw[0])
        for c in range(bw)
    ]
    kept_scores = [s for s, key in every if key in kept]
    passed = [s for s, key in every if key not in kept]
    assert min(kept_scores) >= max(passed)
    for g in got.groups:  # each group's kept blocks are listed by position, scores alongside
        assert np.all(np.diff(g.kept[:, 0] * 10_000 + g.kept[:, 1] * bw + g.kept[:, 2]) > 0)
        assert np.all(np.diff(g.ranked_scores) <= 0)


def test_a_group_keeps_no_more_blocks_than_its_canvases_hold(run) -> None:
    got = _budget(run, token_budget=10**6, stop_gain=0.0, images_per_group=2)
    assert [g.kept.shape[0] for g in got.groups] == [PER_CANVAS] * 3
    assert got.budget.stop_reason == "video_end"
    for g in got.groups:
        assert g.kept_canvas is None or set(g.kept_canvas.tolist()) == {1}


def test_every_block_that_fits_is_kept_with_no_floor(run) -> None:
    got = _budget(run, token_budget=10**6, stop_gain=0.0, images_per_group=64)
    assert got.budget.stop_reason == "video_end"
    assert [g.kept.shape[0] for g in got.groups] == [49 * PER_CANVAS] * 3


def test_the_stop_gain_passes_over_cheap_blocks_and_says_so(run) -> None:
    free = _budget(run, token_budget=10**6, stop_gain=0.0, images_per_group=64)
    floor = _budget(run, token_budget=10**6, stop_gain=0.2, images_per_group=64)
    none = _budget(run, token_budget=10**6, stop_gain=100.0, images_per_group=64)
    assert floor.budget.stop_reason == "content" and none.budget.stop_reason == "content"
    assert 0 < floor.budget.blocks < free.budget.blocks
    assert none.budget.blocks == 0 and none.budget.tokens_used == 3 * ANCHOR
    assert _kept_blocks(floor) <= _kept_blocks(free)
    # The unit: the mean keyframe packet (frames 0 and 90: 40,000 bytes) over the blocks of a frame.
    sizes = run.info.packet_size_bytes
    unit = 40_000 / PER_CANVAS
    assert floor.budget.gain_unit_bytes == pytest.approx(unit)
    # A kept block's estimated bytes (its frame's packet shared out by score) reach the floor.
    row_of = {int(f): i for i, f in enumerate(run.candidates.frame_indices)}
    bw = run.geometry.block_grid_hw[1]
    for f, r, c in _kept_blocks(floor):
        row = run.scores.block_scores[row_of[f]].astype(np.float64)
        assert row[r * bw + c] / row.sum() * sizes[f] / unit >= 0.2 - 1e-9


def test_no_blocks_outside_the_picture(run) -> None:
    got = _budget(run, token_budget=10**6, stop_gain=0.0, images_per_group=64, picture_blocks=(1, 3, 0, 2))
    rows = {r for _, r, _ in _kept_blocks(got)}
    cols = {c for _, _, c in _kept_blocks(got)}
    assert rows == {1, 2} and cols == {0, 1}
    assert got.budget.blocks == 3 * 49 * 4


def test_the_input_selection_is_not_changed(run) -> None:
    before = [(g.kept.copy(), g.kept_scores.copy()) for g in run.selection.groups]
    _budget(run, token_budget=500)
    for (kept, scores), g in zip(before, run.selection.groups, strict=True):
        assert np.array_equal(kept, g.kept) and np.array_equal(scores, g.kept_scores)
    assert run.selection.budget is None


def test_a_budget_below_one_anchor_is_refused_naming_the_grid(run) -> None:
    with pytest.raises(ValueError, match=r"Invalid token budget \(63\)\. .* at least 64, .* 8x8 grid"):
        _budget(run, token_budget=63)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("token_budget", -1),
        ("token_budget", 10**9),
        ("stop_gain", -0.5),
        ("stop_gain", 101.0),
        ("images_per_group", 0),
    ],
)
def test_configs_out_of_range_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=r"^Invalid .*Supported values are"):
        BudgetConfig(**{field: value})
