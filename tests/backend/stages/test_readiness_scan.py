"""The readiness scan (sort once, top K by prefix) against the exact per-window statistics."""

from __future__ import annotations

import numpy as np
import pytest

from backend.stages.group import _GrowingWindow, window_stats


def _blocks(kind: str, rng: np.random.Generator) -> np.ndarray:
    shape = (90, 48)
    if kind == "distinct":
        return rng.random(shape).astype(np.float32)
    if kind == "ties":  # few distinct values: ties at the k-th place on most windows
        return np.round(rng.random(shape) * 3).astype(np.float32)
    if kind == "sparse":  # mostly zeros, as on static video: ties at zero
        return ((rng.random(shape) < 0.1) * rng.random(shape)).astype(np.float32)
    # Scores clipped at a cap, as the normalised bitcost maps are: ties at the top.
    return np.minimum(rng.random(shape) * 2, 1.0).astype(np.float32) * 784


@pytest.mark.parametrize("kind", ["distinct", "ties", "sparse", "capped"])
def test_scan_equals_window_stats_on_every_window(kind):
    rng = np.random.default_rng(11)
    blocks = _blocks(kind, rng)
    for budget in (0, 5, 48, 200, 1000, 10_000):
        for bins in (1, 3, 7):
            for start, stop in ((0, 64), (9, 90), (30, 40)):
                grow = _GrowingWindow(blocks, start, budget=budget, bins=bins, stop=stop)
                got = list(grow.scan(range(start + 4, stop + 1)))
                assert [end for end, _, _ in got] == list(range(start + 4, stop + 1))
                for end, total, covered in got:
                    exact = window_stats(blocks[start:end], budget=budget, bins=bins)
                    assert total == exact["topk_candidate_block_score_sum"], (kind, budget, start, end)
                    assert covered == exact["selected_time_bins"], (kind, budget, start, end)
                    # The full statistics of any scanned window (the chosen one) match too.
                    assert grow.stats(end) == exact


def test_non_finite_scores_fall_back_to_the_exact_window():
    blocks = np.random.default_rng(5).random((40, 12)).astype(np.float32)
    blocks[7, 3] = np.nan
    grow = _GrowingWindow(blocks, 0, budget=20, bins=3)
    for end, total, covered in grow.scan(range(4, 41)):
        exact = window_stats(blocks[:end], budget=20, bins=3)
        assert covered == exact["selected_time_bins"]
        assert total == exact["topk_candidate_block_score_sum"] or (
            np.isnan(total) and np.isnan(exact["topk_candidate_block_score_sum"])
        )
