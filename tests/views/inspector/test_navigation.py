"""Navigation targets for keys and timeline clicks, on a synthetic run (no cvp, no decode)."""

from __future__ import annotations

import pytest
from helpers.synthetic import synthetic_run

from views.inspector import navigation


@pytest.fixture(scope="module")
def result():
    """150 frames, every one a candidate, keyframes 0 and 90, three groups of 50."""
    return synthetic_run(frames=150, keyframes=(0, 90), groups=3)


def test_steps_and_ends(result):
    last = result.candidates.frame_indices.size - 1
    assert navigation.navigate(result, 5, "next") == 6
    assert navigation.navigate(result, 5, "prev") == 4
    assert navigation.navigate(result, 0, "prev") == 0 and navigation.navigate(result, last, "next") == last
    assert navigation.navigate(result, 7, "home") == 0 and navigation.navigate(result, 7, "end") == last


def test_group_boundaries(result):
    starts = [s.start for s in result.groups.specs]
    assert navigation.navigate(result, 0, "next_group") == starts[1]
    assert navigation.navigate(result, starts[1], "next_group") == starts[2]
    assert navigation.navigate(result, starts[2] + 1, "prev_group") == starts[2]
    assert navigation.navigate(result, starts[-1], "next_group") == starts[-1]  # stays at the last


def test_keyframes_include_bitstream_keys(result):
    # The run's keyframes are frames 0 and 90; dense sampling keeps both.
    rows = navigation.keyframe_rows(result).tolist()
    fids = [int(result.candidates.frame_indices[r]) for r in rows]
    assert fids == [0, 90]
    assert navigation.navigate(result, 10, "next_key") == rows[1]
    assert navigation.navigate(result, 10, "prev_key") == rows[0]


def test_frame_to_row_and_bad_actions(result):
    assert navigation.row_for_frame(result, 60.4) == 60
    with pytest.raises(ValueError, match=r"Invalid action \('jump'\)"):
        navigation.navigate(result, 0, "jump")


def test_moved_keyframes_are_found_through_their_new_frame():
    sparse = synthetic_run(frames=150, keyframes=(0, 90), sampled=range(0, 150, 10), moved=[(0, 1)])
    moved = dict(sparse.candidates.moved)
    assert 0 in moved  # frame 0 is a keyframe and sampled, so avoidance moved it
    fids = [int(sparse.candidates.frame_indices[r]) for r in navigation.keyframe_rows(sparse)]
    assert moved[0] in fids and 0 not in fids
