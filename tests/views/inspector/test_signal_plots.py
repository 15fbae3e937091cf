"""The per-frame signal plots' layout: titles where they belong and whole, ranges that hold the data."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
from helpers.synthetic import KEYFRAME_BYTES, synthetic_run

from views.figure_style import text_width_px
from views.inspector import signal_plots


@pytest.fixture(scope="module")
def fig() -> go.Figure:
    """Signal plots of 48 candidates of a 144-frame run whose keyframes 0 and 90 are 13× the other
    packets (the I-frame spike of issue 27 item 7)."""
    return signal_plots.prepare_signal_plots(
        synthetic_run(frames=144, sampled=range(0, 144, 3)), cursor_frame_index=7
    )


def _axes(fig: go.Figure) -> list[tuple[str, str]]:
    return [(t.xaxis or "x", t.yaxis or "y") for t in fig.data]


def test_the_frame_index_title_and_tick_labels_sit_under_the_bottom_row(fig):
    layout = fig.layout
    rows = _axes(fig)
    assert rows == [("x", "y"), ("x2", "y2"), ("x3", "y3"), ("x4", "y4")]
    bottoms = [layout[f"yaxis{'' if i == 0 else i + 1}"].domain[0] for i in range(4)]
    assert bottoms == sorted(bottoms, reverse=True) and bottoms[-1] == 0  # row 4 is the bottom one
    for i in range(4):
        name = "xaxis" if i == 0 else f"xaxis{i + 1}"
        x = layout[name]
        assert x.anchor == ("y" if i == 0 else f"y{i + 1}")  # each row has its own x axis and grid
        if i == 3:
            assert x.title.text == "frame_index" and x.showticklabels is True and x.matches == "x"
        else:
            assert not x.title.text and x.showticklabels is False
    # The one cursor spans every row, on the top row's axis (the page moves it, app/static/page.js).
    (cursor,) = layout.shapes
    assert cursor.name == "cursor" and cursor.xref == "x" and cursor.yref == "paper" and cursor.x0 == 7


def test_every_y_title_fits_the_height_of_its_row(fig):
    layout = fig.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    for i in range(4):
        axis = layout["yaxis" if i == 0 else f"yaxis{i + 1}"]
        row_px = (axis.domain[1] - axis.domain[0]) * plot_px
        size = axis.title.font.size
        lines = axis.title.text.split("<br>")
        # A y title is drawn turned by 90°: each line's length must fit the row, not overrun it.
        assert max(text_width_px(line, size_px=size) for line in lines) <= row_px, axis.title.text
        assert "(" not in lines[-1] or lines[-1].endswith(")"), axis.title.text  # whole, not cut
    assert layout.yaxis.title.text.replace("<br>", " ") == "bits per frame (kbit)"


def test_every_y_range_holds_its_largest_value_with_room(fig):
    layout = fig.layout
    for i, trace in enumerate(fig.data):
        axis = layout["yaxis" if i == 0 else f"yaxis{i + 1}"]
        values = np.asarray(trace.y, np.float64)
        lo, hi = axis.range
        assert lo <= values.min() and hi > values.max(), trace.name
    spike_kbit = KEYFRAME_BYTES * 8 / 1000
    assert max(fig.data[0].y) == spike_kbit and layout.yaxis.range[1] >= 1.05 * spike_kbit
    assert layout.yaxis3.range == (0.0, 1.04)  # coverage is a share, 0–1
    go.Figure(fig.to_plotly_json())  # plotly's own property names only
