"""tests/helpers/synthetic.py: the synthetic run's records agree with one another."""

from __future__ import annotations

import numpy as np
from helpers.synthetic import synthetic_run

from backend.render import anchor_rows, kept_blocks_by_row


def test_every_valid_token_shows_its_source_patch():
    run = synthetic_run(frames=60, sampled=range(0, 60, 2), moved=[(0, 1)], groups=2)
    p = run.geometry.patch
    per_canvas = run.geometry.patches_per_canvas
    row_of = {int(f): r for r, f in enumerate(run.decoded.frame_indices.tolist())}
    tokens = run.canvases.tokens
    assert tokens[:, 7].sum() == tokens.shape[0]  # the budget fills the non-anchor canvases exactly
    for i, (fid, pr, pc, canvas, qr, qc, group, valid) in enumerate(tokens.tolist()):
        assert valid == 1 and canvas == i // per_canvas
        assert run.canvases.canvas_group_index[canvas] == group
        shown = run.canvases.images[canvas, qr * p : (qr + 1) * p, qc * p : (qc + 1) * p]
        source = run.decoded.pixels[row_of[fid], pr * p : (pr + 1) * p, pc * p : (pc + 1) * p]
        assert np.array_equal(shown, source)


def test_groups_trace_and_selection_line_up():
    run = synthetic_run(frames=90, groups=3, keyframes=(0, 45))
    assert [(s.start, s.end) for s in run.groups.specs] == [(0, 30), (30, 60), (60, 90)]
    assert sorted(anchor_rows(run)) == [0, 30, 60]
    budget = run.selection.groups[0].budget
    assert all(blocks.shape[1] == 2 for blocks in kept_blocks_by_row(run).values())
    assert sum(len(b) for b in kept_blocks_by_row(run).values()) == 3 * budget
    for spec in run.groups.specs:
        steps = [s for s in run.groups.trace if s.group_index == spec.group_index]
        assert steps[-1].end == spec.end and steps[-1].decision == "stop" and steps[-1].passed
        assert not any(s.passed for s in steps[:-1])
        assert all(s.passed == (s.topk_sum >= s.threshold and s.covered_bins >= s.needed_bins) for s in steps)
    fixed = synthetic_run(frames=90, groups=3, grouping="fixed")
    assert fixed.groups.trace == () and fixed.options.grouping_mode == "fixed"
