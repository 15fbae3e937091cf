"""The timeline view's figure on a real run of the bundled sample."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import requires_cvp

from backend.pipeline import RunResult
from backend.render import kept_blocks_by_row
from views.inspector import timeline

pytestmark = requires_cvp


@pytest.fixture(scope="module")
def result(sample_run: RunResult) -> RunResult:
    """The session's shared run of the sample, 48 sampled frames (conftest.sample_run)."""
    return sample_run


def _kind(fig, kind: str) -> list:
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def test_bars_cover_every_frame_once_coloured_by_picture_type(result):
    fig = timeline.prepare_timeline(result)
    bars = [t for t in fig.data if t.type == "bar"]
    assert {t.name for t in bars} <= {"I frames", "P frames", "B frames", "? frames"}
    xs = np.concatenate([np.asarray(t.x) for t in bars])
    assert xs.size == result.info.total_frames and np.array_equal(np.sort(xs), np.arange(xs.size))
    for t in bars:
        assert np.array_equal(np.asarray(t.y), result.info.packet_size_bytes[np.asarray(t.x)])
        assert np.array_equal(np.asarray(t.customdata), np.asarray(t.x))
    types = timeline.frame_pict_types(result)
    for fid, pict in zip(result.decoded.frame_indices.tolist(), result.decoded.pict_types, strict=True):
        assert types[fid] == pict
    # Frames never decoded fall back to the bitstream keyframe flag.
    others = np.setdiff1d(np.arange(types.size), result.decoded.frame_indices)
    assert set(types[others].tolist()) <= {"I", "?"}
    assert all(types[k] == "I" for k in result.info.keyframe_indices if k in others)


def test_candidates_groups_moved_keyframes_and_kept_blocks(result):
    fig = timeline.prepare_timeline(result)
    (cand,) = _kind(fig, "candidates")
    assert len(cand.x) == np.unique(result.candidates.frame_indices).size
    spans = _kind(fig, "group_span")
    assert len(spans) == len(result.groups.specs)
    for spec, span in zip(result.groups.specs, spans, strict=True):
        first = int(result.candidates.frame_indices[spec.start])
        last = int(result.candidates.frame_indices[spec.end - 1])
        assert min(span.x) == first - 0.5 and max(span.x) == last + 0.5
    (moved,) = _kind(fig, "moved_keyframes")
    assert [x for x in moved.x if x is not None] == [v for m in result.candidates.moved for v in m]
    (kept,) = _kind(fig, "kept_blocks")
    assert kept.yaxis == "y2"
    assert int(np.sum(kept.y)) == sum(len(b) for b in kept_blocks_by_row(result).values())
    (anchors,) = _kind(fig, "anchors")
    assert sorted(anchors.x) == sorted(s.frame_indices[0] for s in result.selection.groups)


def test_every_trace_is_named_and_carries_frame_indices(result):
    fig = timeline.prepare_timeline(result)
    for t in fig.data:
        assert t.name
        assert t.customdata is not None and len(t.customdata) == len(t.x)
    fig.to_json()  # serialisable for the browser


def test_cursor_sits_at_the_given_frame(result):
    assert not [s for s in timeline.prepare_timeline(result).layout.shapes if s.name == timeline.CURSOR_NAME]
    fig = timeline.prepare_timeline(result, cursor_frame_index=37)
    (cursor,) = [s for s in fig.layout.shapes if s.name == timeline.CURSOR_NAME]
    assert cursor.x0 == cursor.x1 == 37 and cursor.xref == "x"
