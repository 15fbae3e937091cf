"""The coverage figure draws the audit's own numbers: coverage and staleness per frame, the spans, the map."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

from backend.audit import AuditConfig, AuditSource, CoverageAudit, audit_coverage, audit_source_of_run
from views import coverage_figure as cf
from views import figure_style


@pytest.fixture(scope="module")
def source() -> AuditSource:
    """150 frames at 30 fps, every third sampled (keyframe 0 moved to 1), three groups, 8 × 8 patches."""
    return audit_source_of_run(synthetic_run(frames=150, sampled=range(0, 150, 3), moved=[(0, 1)], groups=3))


@pytest.fixture(scope="module")
def audit(source: AuditSource) -> CoverageAudit:
    return audit_coverage(source, config=AuditConfig())


def _figure(source: AuditSource, audit: CoverageAudit, **kwargs):
    return cf.prepare_coverage_figure(
        audit, frame_secs=source.frame_secs, frame_secs_step=source.frame_secs_step, **kwargs
    )


def _trace(fig, name: str):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def _rectangles(trace) -> list[tuple[float, float, float, float]]:
    """(x0, x1, y0, y1) of each polygon of a filled trace, polygons separated by None."""
    out, xs, ys = [], [], []
    for x, y in zip([*trace.x, None], [*trace.y, None], strict=True):
        if x is None:
            if xs:
                out.append((min(xs), max(xs), min(ys), max(ys)))
            xs, ys = [], []
        else:
            xs.append(x)
            ys.append(y)
    return out


def test_the_series_are_the_audits_per_frame_numbers(source, audit):
    fig = _figure(source, audit)
    assert [t.name for t in fig.data] == [
        cf.SPANS_NAME,
        cf.COVERAGE_NAME,
        cf.MEAN_NAME,
        cf.MAX_NAME,
        cf.MAP_NAME,
    ]
    secs = np.arange(150) / 30.0  # frame_index / fps
    for name, values, yaxis in [
        (cf.COVERAGE_NAME, audit.frame_coverage, "y"),
        (cf.MEAN_NAME, audit.mean_staleness_frames, "y2"),
        (cf.MAX_NAME, audit.max_staleness_frames, "y2"),
    ]:
        trace = _trace(fig, name)
        assert np.allclose(trace.x, secs) and np.array_equal(trace.y, values), name
        assert np.array_equal(trace.customdata, np.arange(150)) and trace.yaxis == yaxis, name
        assert trace.line.shape == "hv" and trace.line.color == figure_style.COLOURS[name.replace(" ", "_")]
    # Frame 1 replaced keyframe 0 as the first candidate: it is the first group's anchor, shown whole.
    assert _trace(fig, cf.COVERAGE_NAME).y[1] == 1.0 and _trace(fig, cf.MAX_NAME).y[1] == 0
    # Staleness counts frames: whole-number ticks from 0, above the video's maximum.
    stale = fig.layout.yaxis2
    assert stale.range[0] == 0 and float(stale.dtick).is_integer() and stale.tickformat == "d"
    assert stale.range[1] > audit.video_max_staleness_frames
    # Without the source's times: frame_index × duration / F, which is 1 / fps here.
    times, step = cf.frame_times(audit)
    assert np.allclose(times, secs) and step == pytest.approx(1 / 30)


def test_spans_are_shaded_exactly_at_the_audits_spans(source, audit):
    fig = _figure(source, audit)
    spans = audit.never_observed_spans
    assert spans[0].tolist() == [0, 0]  # frame 0 is no candidate (moved to 1), so never observed
    boxes = _rectangles(_trace(fig, cf.SPANS_NAME))
    assert len(boxes) == len(spans) == len(audit.span_secs) > 1
    step = 1 / 30
    for (first, last), secs, (x0, x1, y0, y1) in zip(spans, audit.span_secs, boxes, strict=True):
        assert x0 == pytest.approx(first * step) and x1 == pytest.approx((last + 1) * step)
        assert x1 - x0 == pytest.approx(secs)
        assert (y0, y1) == (0.0, cf.COVERAGE_TOP) == tuple(fig.layout.yaxis.range)  # the panel's height
    # Each frame's middle lies in a shaded box exactly when no token covers it.
    middles = (np.arange(150) + 0.5) * step
    shaded = np.array([any(x0 < t < x1 for x0, x1, _, _ in boxes) for t in middles])
    assert np.array_equal(shaded, audit.frame_coverage == 0)
    assert _trace(fig, cf.SPANS_NAME).fill == "toself"
    assert fig.data.index(_trace(fig, cf.SPANS_NAME)) < fig.data.index(_trace(fig, cf.COVERAGE_NAME))


def _drawn_map(fig, shape_hw: tuple[int, int], value_of: dict[str, int]) -> np.ndarray:
    """The map the figure's rectangles paint, cell by cell (NaN where none does): each rectangle's
    colour read back as its value through ``value_of``."""
    drawn = np.full(shape_hw, np.nan)
    painted = np.zeros(shape_hw, int)
    for rect in fig.layout.shapes:
        assert (rect.xref, rect.yref, rect.type) == ("x3", "y3", "rect")
        r0, r1, c0, c1 = (round(v + 0.5) for v in (rect.y0, rect.y1, rect.x0, rect.x1))
        drawn[r0:r1, c0:c1] = value_of[rect.fillcolor]
        painted[r0:r1, c0:c1] += 1
    assert painted.max() <= 1  # rectangles never overlap
    return drawn


def test_the_map_is_the_staleness_map_with_the_bars_blank(source):
    # A letterbox of one patch column each side (as onevision's bars): −1 off the picture.
    boxed = audit_coverage(dataclasses.replace(source, picture=(0, 8, 1, 7)), config=AuditConfig())
    stale = boxed.staleness_map
    assert (stale[:, [0, 7]] == -1).all() and (stale[:, 1:7] >= 0).all()
    fig = _figure(source, boxed)
    top = int(stale.max())
    value_of = {cf.map_colour(v, top): v for v in range(top + 1)}
    assert len(value_of) == top + 1  # one colour per value
    # Cividis from 0 to the map's maximum.
    assert cf.map_colour(0, top) == "rgb(0, 34, 78)" and cf.map_colour(top, top) == "rgb(254, 232, 56)"
    # The rectangles paint the map's values, nothing off the picture, each cell once.
    expected = np.where(stale < 0, np.nan, stale.astype(np.float64))
    assert np.array_equal(_drawn_map(fig, (8, 8), value_of), expected, equal_nan=True)
    rects = cf.map_rectangles(boxed)
    assert len(fig.layout.shapes) == len(rects) < 48  # equal neighbours merged (8 rows × 6 columns)
    # Hover and colour bar: one invisible marker on each picture position, with its value.
    carrier = _trace(fig, cf.MAP_NAME)
    assert (carrier.xaxis, carrier.yaxis, carrier.marker.opacity) == ("x3", "y3", 0)
    assert len(carrier.x) == 48 and np.array_equal(stale[carrier.y, carrier.x], carrier.marker.color)
    assert (carrier.marker.cmin, carrier.marker.cmax, carrier.marker.showscale) == (0, top, True)
    # Row 0 at the top, square cells.
    assert tuple(fig.layout.yaxis3.range) == (7.5, -0.5) and fig.layout.yaxis3.scaleanchor == "x3"
    assert tuple(fig.layout.xaxis3.range) == (-0.5, 7.5)
    assert (boxed.staleness_map == -1).sum() == 16  # the audit is not changed


def test_map_rectangles_merge_equal_neighbours_by_hand():
    stale = np.array([[3, 3, 5, -1], [3, 3, 5, -1], [3, 4, 4, -1]])
    audit = CoverageAudit(
        frames=1,
        patch_grid=(3, 4),
        frame_coverage=np.zeros(1),
        never_observed_spans=np.zeros((0, 2), np.int64),
        span_secs=np.zeros(0),
        duration_secs=1.0,
        mean_staleness_frames=np.zeros(1),
        max_staleness_frames=np.zeros(1, np.int64),
        staleness_map=stale,
        groups=(),
        kept_score_fraction=None,
    )
    # (r0, r1, c0, c1, value), ends exclusive; column 3 is off the picture.
    assert cf.map_rectangles(audit) == [(0, 2, 0, 2, 3), (0, 2, 2, 3, 5), (2, 3, 0, 1, 3), (2, 3, 1, 3, 4)]


def test_paper_style_sizes(source, audit):
    paper = _figure(source, audit, paper=True, title="coverage of run a")
    assert (paper.layout.width, paper.layout.height) == (figure_style.PAPER_WIDTH_PX, cf.PAPER_HEIGHT_PX)
    assert paper.layout.font.size == 20 and paper.layout.legend.font.size == 18
    assert paper.layout.font.family == figure_style.FONT_FAMILY
    for axis in ("xaxis", "xaxis2", "xaxis3", "yaxis", "yaxis2", "yaxis3"):
        assert paper.layout[axis].tickfont.size == 18, axis
    assert paper.layout.legend.orientation == "h" and paper.layout.legend.yanchor == "bottom"
    assert paper.layout.title.text == "coverage of run a"
    assert [a.font.size for a in paper.layout.annotations] == [20, 20, 20]
    assert [a.text for a in paper.layout.annotations] == list(cf.PANEL_TITLES.values())
    screen = _figure(source, audit)
    assert screen.layout.width is None and screen.layout.height == cf.SCREEN_HEIGHT_PX
    assert screen.layout.font.size == 13 and screen.layout.title.text is None


def test_a_frame_range_spans_the_time_axes(source, audit):
    fig = _figure(source, audit, frames=(30, 90))
    assert tuple(fig.layout.xaxis.range) == pytest.approx((1.0, 3.0))  # frames 30 … 89 end at 90 / 30 s
    assert fig.layout.xaxis2.matches == "x"
    top = int(audit.max_staleness_frames[30:90].max())
    assert fig.layout.yaxis2.range[1] == figure_style.integer_axis_range(top)[0]
    to_end = _figure(source, audit, frames=(120, None))
    assert tuple(to_end.layout.xaxis.range) == pytest.approx((4.0, 5.0))
    with pytest.raises(ValueError, match=r"Invalid frames \(\(400, 500\)\)\. Supported values are"):
        _figure(source, audit, frames=(400, 500))
    with pytest.raises(ValueError, match=r"Invalid frame_secs"):
        cf.prepare_coverage_figure(audit, frame_secs=np.zeros(3))
