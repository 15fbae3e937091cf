"""The shared figure style: palette, whole-number count axes, ordinals, screen and paper fonts."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from views import figure_style as fs


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (101, "101st"),
        (111, "111th"),
        (112, "112th"),
        (0, "0th"),
    ],
)
def test_ordinals(n, text):
    assert fs.ordinal(n) == text


@pytest.mark.parametrize("top", [0, 1, 3, 7, 12.6, 44.7, 99, 100, 101, 173.3, 3.191, 4096, 123456])
def test_count_axes_have_whole_ticks_from_zero_covering_the_data(top):
    upper, step, count = fs.integer_axis_range(top)
    assert isinstance(upper, int) and isinstance(step, int) and step >= 1
    assert upper > top and upper % step == 0 and 1 <= count <= 11
    assert str(step).strip("0") in ("1", "2", "5")
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, top]))
    fs.integer_axis(fig, top)
    axis = fig.layout.yaxis
    ticks = np.arange(axis.tick0, axis.range[1] + 1e-9, axis.dtick)
    assert axis.range[0] == 0 and np.all(ticks == np.round(ticks)) and axis.tickformat == "d"


def test_colours_are_okabe_ito_and_distinct_where_they_meet():
    palette = set(fs.OKABE_ITO.values()) | {fs.GREY}
    assert set(fs.COLOURS.values()) <= palette
    # Kept / lost / anchor and the picture types never share a colour.
    shown_together = [fs.COLOURS[k] for k in ("kept", "lost", "anchor", "I", "P", "B", "?")]
    assert len(set(shown_together)) == len(shown_together)
    assert fs.series_colour(0) != fs.series_colour(1) and fs.series_colour(len(fs.SERIES)) == fs.SERIES[0]


def test_screen_and_paper_styles():
    screen = fs.apply_style(go.Figure(go.Scatter(x=[0, 1], y=[0, 1])))
    paper = fs.apply_style(go.Figure(go.Scatter(x=[0, 1], y=[0, 1])), paper=True)
    assert screen.layout.template.layout.paper_bgcolor == paper.layout.template.layout.paper_bgcolor
    assert paper.layout.font.size >= 20 > screen.layout.font.size
    assert paper.layout.xaxis.tickfont.size >= 18 and paper.layout.legend.font.size >= 18
    assert paper.layout.width == fs.PAPER_WIDTH_PX and paper.layout.height == fs.PAPER_HEIGHT_PX
    assert screen.layout.legend.yref == "container" and screen.layout.legend.orientation == "h"
    kept = fs.apply_style(go.Figure(), legend_below=False)
    assert kept.layout.legend.yref is None
