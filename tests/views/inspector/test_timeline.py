"""The timeline view's figure on a synthetic run (no cvp, no decode)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
from helpers.synthetic import synthetic_run

from backend.pipeline import RunResult
from backend.render import kept_blocks_by_row
from views import figure_style
from views.inspector import timeline


@pytest.fixture(scope="module")
def result() -> RunResult:
    """50 candidates (every third frame, keyframe 0 moved to 1) in three readiness groups."""
    return synthetic_run(frames=150, sampled=range(0, 150, 3), moved=[(0, 1)], groups=3)


def _kind(fig, kind: str) -> list:
    return [t for t in fig.data if (t.meta or {}).get("kind") == kind]


def _is_packet_bar(trace) -> bool:
    """A packet-size bar trace (the never-observed bands are bars too)."""
    return (trace.meta or {}).get("kind") == "packet_size"


def test_bars_cover_every_frame_once_coloured_by_picture_type(result):
    fig = timeline.prepare_timeline(result)
    bars = [t for t in fig.data if _is_packet_bar(t)]
    assert {t.name for t in bars} <= set(timeline.PICT_NAMES.values())
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
    # One tick per candidate frame, all in one path: (frame, below), (frame, above), a gap.
    ticks = list(cand.x)
    assert ticks[0::3] == np.unique(result.candidates.frame_indices).tolist()
    assert ticks[1::3] == ticks[0::3] and set(ticks[2::3]) == {None}
    assert list(cand.customdata) == ticks and cand.mode == "lines"
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
    # Built without validation (figure_style.plain_figure): every property must still be plotly's.
    go.Figure(fig.to_plotly_json())
    go.Figure(timeline.prepare_timeline(result, paper=True).to_plotly_json())


def test_cursor_sits_at_the_given_frame(result):
    assert not [s for s in timeline.prepare_timeline(result).layout.shapes if s.name == timeline.CURSOR_NAME]
    fig = timeline.prepare_timeline(result, cursor_frame_index=37)
    (cursor,) = [s for s in fig.layout.shapes if s.name == timeline.CURSOR_NAME]
    assert cursor.x0 == cursor.x1 == 37 and cursor.xref == "x"


def _ticks(axis) -> np.ndarray:
    """The tick values a linear axis shows over its range."""
    lo, hi = axis.range
    return np.arange(axis.tick0, hi + 1e-9, axis.dtick)[np.arange(axis.tick0, hi + 1e-9, axis.dtick) >= lo]


def test_each_meaning_has_its_own_colour_and_no_two_share_one(result):
    fig = timeline.prepare_timeline(result)
    colours = {}
    for t in fig.data:
        kind = (t.meta or {}).get("kind")
        if kind == "packet_size":
            colours[t.name] = t.marker.color
        elif kind in ("kept_blocks", "anchors", "moved_keyframes"):
            colours[kind] = t.marker.color
    c = figure_style.COLOURS
    assert colours["kept_blocks"] == c["kept"] and colours["anchors"] == c["anchor"]
    assert colours[timeline.PICT_NAMES["I"]] == c["I"] and colours[timeline.PICT_NAMES["P"]] == c["P"]
    # The defect: I-frame bars and the kept-blocks line were both red.
    assert len(set(colours.values())) == len(colours)
    palette = set(figure_style.OKABE_ITO.values()) | {figure_style.GREY}
    assert set(colours.values()) <= palette


def test_both_y_axes_start_at_zero_and_counts_get_whole_ticks(result):
    fig = timeline.prepare_timeline(result)
    left, right = fig.layout.yaxis, fig.layout.yaxis2
    assert left.range[0] == 0 and right.range[0] == 0  # zero at the same height (the bottom)
    (kept,) = _kind(fig, "kept_blocks")
    assert right.range[1] >= max(kept.y) and right.range[1] % right.dtick == 0
    for axis in (left, right):
        assert axis.tickmode == "linear" and axis.tick0 == 0 and float(axis.dtick).is_integer()
        ticks = _ticks(axis)
        assert ticks.size >= 3 and np.all(ticks == np.round(ticks))
    assert right.tickformat == "d"
    # The rug sits above the tallest bar, inside the axis.
    (cand,) = _kind(fig, "candidates")
    bars_top = max(max(t.y) for t in fig.data if _is_packet_bar(t))
    ys = [y for y in cand.y if y is not None]
    centre, half = timeline.RUG_HEIGHT * left.range[1], timeline.RUG_TICK * left.range[1]
    assert set(np.round(ys, 6)) == set(np.round([centre - half, centre + half], 6))
    assert min(ys) > bars_top and max(ys) < left.range[1]


def test_candidates_are_thin_ticks_and_bars_have_no_outline(result):
    fig = timeline.prepare_timeline(result)
    (cand,) = _kind(fig, "candidates")
    assert cand.mode == "lines" and cand.line.width <= 1
    assert "0.6" in cand.line.color  # translucent: a dense rug is grey, not a black band
    for bar in (t for t in fig.data if _is_packet_bar(t)):
        # The template's white bar outline hid every bar narrower than a couple of pixels.
        assert bar.marker.line.width == 0 and bar.width == 1.0


def test_legend_sits_under_the_plot_clear_of_the_panel_label(result):
    fig = timeline.prepare_timeline(result)
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.yref == "container"
    assert legend.y == 0 and legend.yanchor == "bottom"
    spans = _kind(fig, "group_span")
    assert {t.name for t in spans} == {timeline.GROUPS_NAME}
    assert [t.showlegend for t in spans].count(True) == 1
    assert [t.meta["group_index"] for t in spans] == [g.group_index for g in result.groups.specs]


def test_a_frame_range_limits_every_trace_and_the_x_axis(result):
    full = timeline.prepare_timeline(result)
    fig = timeline.prepare_timeline(result, frame_range=(90, 130))
    assert tuple(fig.layout.xaxis.range) == (89.5, 129.5)
    for t in fig.data:
        xs = [x for x in t.x if x is not None]
        if (t.meta or {}).get("kind") == "group_span":
            assert min(xs) >= 89.5 and max(xs) <= 129.5
        elif (t.meta or {}).get("kind") != "moved_keyframes":
            assert all(90 <= x < 130 for x in xs), t.name
    bars = np.concatenate([np.asarray(t.x) for t in fig.data if _is_packet_bar(t)])
    assert np.array_equal(np.sort(bars), np.arange(90, 130))
    fids = result.candidates.frame_indices
    touching = [
        g.group_index
        for g in result.groups.specs
        if ((fids[g.start : g.end] >= 90) & (fids[g.start : g.end] < 130)).any()
    ]
    assert [t.meta["group_index"] for t in _kind(fig, "group_span")] == touching
    assert len(touching) < len(_kind(full, "group_span"))
    # The byte axis fits the range's own bars, not the whole clip's.
    top = int(result.info.packet_size_bytes[90:130].max())
    assert top <= fig.layout.yaxis.range[1] * timeline.RUG_HEIGHT
    assert fig.layout.yaxis.range[1] <= full.layout.yaxis.range[1]


def test_paper_style_uses_larger_fonts(result):
    screen = timeline.prepare_timeline(result)
    paper = timeline.prepare_timeline(result, paper=True)
    assert paper.layout.font.size > screen.layout.font.size
    assert paper.layout.width == figure_style.PAPER_WIDTH_PX
    assert paper.layout.yaxis.tickfont.size >= 18 and paper.layout.font.family.startswith("DejaVu Sans")


# --------------------------------------------------------------------------- keyframe avoidance marks
# Issue 27 item 6: every keyframe of a short clip sampled 4× over got a moved-keyframe mark (each
# drawn once per sample: 63 points for 5 keyframes), and frame 0's hover said "moved keyframe"
# while its info line said "keyframe kept despite avoid_keyframes".


@pytest.fixture(scope="module")
def oversampled(clips_dir) -> RunResult:
    """A real run: 30 frames of H.264 with keyframes 0, 6, 12, 18, 24, 120 frames sampled.

    Each frame is sampled four times (frame 0 five), so avoidance moves every keyframe several
    times, and the refill then puts every keyframe back: each frame is a candidate.
    """
    from helpers.clips import encode_clip

    from backend.pipeline import SelectionOptions, run

    clip = encode_clip(clips_dir / "kf5_30", codec="h264", width=320, height=192, frames=30, gop=6, bframes=0)
    return run(clip, options=SelectionOptions(num_sampled_frames=120))


def _points(trace) -> int:
    return sum(x is not None for x in trace.x)


def _info_line(result: RunResult, frame_index: int) -> str:
    """The Inspect tab's info line of a candidate frame, as the server builds it."""
    from app.tabs.inspect.routes import info_text_html
    from views.inspector.frame_layers import prepare_frame_layers

    row = int(np.flatnonzero(result.candidates.frame_indices == frame_index)[0])
    return info_text_html(result, prepare_frame_layers(result, row).info)


def test_refilled_keyframes_get_no_moved_mark_and_the_hover_says_what_the_info_line_says(oversampled):
    cand = oversampled.candidates
    keys = (0, 6, 12, 18, 24)
    assert cand.keyframe_indices == keys and len(cand.moved) > len(keys)  # each moved several times
    assert cand.refilled_keyframes == keys and not cand.stayed_keyframes
    for paper in (False, True):  # the viewer's and the export's figure
        fig = timeline.prepare_timeline(oversampled, paper=paper)
        # Every keyframe is a candidate again: none was moved off, so none is marked moved.
        assert not _kind(fig, "moved_keyframes")
        (rug,) = _kind(fig, "candidates")
        hover = dict(zip(rug.customdata.tolist(), rug.hovertext, strict=True))
        for k in keys:
            assert hover[k] == " · keyframe kept despite avoid_keyframes"
            assert "keyframe kept despite avoid_keyframes" in _info_line(oversampled, k)
            assert "moved" not in hover[k]
        assert hover[1] == " · moved from keyframe 0 (refilled as a candidate too)"
        assert "moved from keyframe 0 (refilled as a candidate too)" in _info_line(oversampled, 1)
        assert hover[2] == ""
        (i_bars,) = [t for t in fig.data if t.name == timeline.PICT_NAMES["I"]]
        assert dict(zip(i_bars.x.tolist(), i_bars.hovertext, strict=True))[0] == (
            "<br>keyframe kept despite avoid_keyframes"
        )


def test_each_keyframe_moved_off_is_marked_once_with_the_info_lines_words():
    import dataclasses

    base = synthetic_run(frames=150, sampled=range(0, 150, 3), moved=[(0, 1), (90, 91)], keyframes=(0, 90))
    # As avoidance records a keyframe the sampler listed four times: one move per listing.
    moved = ((0, 1),) * 4 + ((90, 91),) * 4
    result = dataclasses.replace(base, candidates=dataclasses.replace(base.candidates, moved=moved))
    assert {0, 90}.isdisjoint(result.candidates.frame_indices.tolist())
    assert {1, 91} <= set(result.candidates.frame_indices.tolist())
    fig = timeline.prepare_timeline(result)
    (segments,) = _kind(fig, "moved_keyframes")
    assert segments.meta["moved"] == [[0, 1], [90, 91]]
    assert _points(segments) == 4  # from and to of each, once (was 3 points × 8 moves)
    texts = [t for t, x in zip(segments.hovertext, segments.x, strict=True) if x is not None]
    assert texts == [
        "keyframe 0: moved to frame 1",
        "frame 1: moved from keyframe 0",
        "keyframe 90: moved to frame 91",
        "frame 91: moved from keyframe 90",
    ]
    (rug,) = _kind(fig, "candidates")
    assert 0 not in rug.customdata.tolist()
    assert dict(zip(rug.customdata.tolist(), rug.hovertext, strict=True))[91] == " · moved from keyframe 90"
    assert "moved from keyframe 90" in _info_line(result, 91)
    paper = timeline.prepare_timeline(result, paper=True)
    (exported,) = _kind(paper, "moved_keyframes")
    assert exported.meta["moved"] == [[0, 1], [90, 91]] and _points(exported) == 4


def test_a_long_kept_blocks_line_drops_its_markers_and_keeps_every_point():
    # Up to KEPT_MARKERS_UP_TO frames a dot marks each; beyond, the line alone (the page redraws
    # the timeline on every re-selection, and a marker is an SVG element each).
    for frames, marked in ((150, True), (2 * timeline.KEPT_MARKERS_UP_TO + 40, False)):
        result = synthetic_run(frames=frames, sampled=range(0, frames), keyframes=(0,))
        (kept,) = _kind(timeline.prepare_timeline(result), "kept_blocks")
        assert len(kept.x) == frames and (kept.mode == "lines+markers") is marked, frames
        assert int(np.sum(kept.y)) == sum(len(b) for b in kept_blocks_by_row(result).values())
