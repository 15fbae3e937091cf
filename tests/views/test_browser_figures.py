"""The figures as Chromium draws them: no title, label or legend runs off the figure, none covers
another, axis titles sit by their rows (issue 27 items 7, 10, 17, 19)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from figure_page import BROWSER_MARKS, chromium_page, clipped_texts, draw_figure, overlapping_texts, text_of
from helpers.synthetic import synthetic_run

from views import figure_style as fs
from views.inspector import group_stepper, signal_plots, timeline

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def page():
    with chromium_page() as p:
        yield p


@pytest.fixture(scope="module")
def result():
    """48 candidates of a 144-frame run in three readiness groups, keyframes 13× the other packets."""
    return synthetic_run(frames=144, sampled=range(0, 144, 3), groups=3)


def test_signal_plot_titles_are_whole_by_their_rows_and_frame_index_is_under_the_bottom(page, result):
    m = draw_figure(
        page,
        signal_plots.prepare_signal_plots(result, cursor_frame_index=7),
        width_px=fs.SCREEN_FULL_WIDTH_PX,
    )
    assert clipped_texts(m) == [] and overlapping_texts(m) == []
    plots = {p["id"]: p for p in m["plots"]}
    for i, plot in enumerate(("xy", "x2y2", "x3y3", "x4y4")):
        title = text_of(m, "ytitle" if i == 0 else f"y{i + 1}title")
        # Turned by 90°, each y title lies within its own row's height.
        assert plots[plot]["top"] - 1 <= title["top"] and title["bottom"] <= plots[plot]["bottom"] + 1, title
    assert text_of(m, "ytitle")["text"] == "bits perframe (kbit)"  # both lines, whole
    x_title = text_of(m, "x4title")
    assert x_title["text"] == "frame_index" and x_title["top"] >= plots["x4y4"]["bottom"]
    # Tick labels only under the bottom row: no x tick text between the rows.
    upper = "#fig .xtick text, #fig .x2tick text, #fig .x3tick text"
    ticks = page.evaluate(f"() => document.querySelectorAll('{upper}').length")
    assert ticks == 0 and page.evaluate("() => document.querySelectorAll('#fig .x4tick text').length") > 2


def test_readiness_texts_fit_and_the_viewed_label_covers_nothing(page, result):
    for spec in result.groups.specs:
        for row in (spec.start, spec.start + 4, spec.end - 1):
            fig = group_stepper.prepare_readiness_plot(result, spec.group_index, viewed_row=row)
            m = draw_figure(page, fig, width_px=fs.SCREEN_HALF_WIDTH_PX)
            assert clipped_texts(m) == [], (spec.group_index, row)
            assert overlapping_texts(m) == [], (spec.group_index, row)
            assert any(t["text"].startswith("viewed: candidate") for t in m["texts"])


@pytest.mark.parametrize("paper", [False, True])
def test_timeline_texts_fit(page, result, paper):
    fig = timeline.prepare_timeline(result, cursor_frame_index=9, paper=paper)
    m = draw_figure(page, fig, width_px=fs.PAPER_WIDTH_PX if paper else fs.SCREEN_FULL_WIDTH_PX)
    assert clipped_texts(m) == []


def test_a_fitted_title_is_drawn_whole_where_the_plain_one_was_cut(page):
    # The luma gain scatter's title of issue 27 item 19, on a figure as narrow as it gets on screen.
    text = (
        "gain per slot: 16×16 cells, d = test − ref vs x, fit d ≈ a + b·x (every 2nd of 123456 cells shown)"
    )
    plain = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]), layout={"title": {"text": text}, "height": 420})
    fs.apply_style(plain)
    assert len(clipped_texts(draw_figure(page, plain, width_px=fs.SCREEN_HALF_WIDTH_PX))) == 1
    title = fs.fitted_title(text)
    fitted = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]), layout={"title": title, "height": 420})
    fs.apply_style(fitted)
    fitted.update_layout(margin={"t": fs.title_margin_px(title, base_px=60)})
    m = draw_figure(page, fitted, width_px=fs.SCREEN_HALF_WIDTH_PX)
    assert clipped_texts(m) == [] and text_of(m, "gtitle")["text"].replace(" ", "") == text.replace(" ", "")
    # The lines stay above the plot area.
    assert text_of(m, "gtitle")["bottom"] <= m["plots"][0]["top"]


def test_the_groups_table_shows_all_eleven_columns_in_its_half_width_column(page, result):
    from app.main import CSS
    from app.tabs.inspect.fragments import GROUP_COLUMNS, groups_table_html

    rows = group_stepper.prepare_group_table(result)
    # The widest values a long clip gives: five-digit frames, a readiness threshold, the longest reason.
    rows = [r | {"first_frame_index": 12345, "last_frame_index": 12399, "threshold": 176242.2} for r in rows]
    rows[0] |= {"stop_reason": "readiness_threshold_low_gain", "anchor_frame_index": None}
    html = groups_table_html(rows, rows[1]["group_index"])
    for width in (fs.SCREEN_HALF_WIDTH_PX, 760):  # a 1280 px window's column, and a 1600 px one's
        page.set_content(f"<style>{CSS}</style><div style='width: {width}px'>{html}</div>")
        got = page.evaluate(
            "() => { const d = document.querySelector('.lens-groups');"
            " const x0 = d.getBoundingClientRect().left;"
            " const heads = [...d.querySelectorAll('th')].map((th) => th.getBoundingClientRect().right - x0);"
            " return {client: d.clientWidth, scroll: d.scrollWidth, right: Math.max(...heads),"
            " keys: [...d.querySelectorAll('th')].map((th) => th.dataset.key)}; }"
        )
        assert got["keys"] == list(GROUP_COLUMNS) and len(got["keys"]) == 11
        # Nothing to scroll to: every column is in view (6 of 11 were, issue 27 item 17).
        assert got["scroll"] <= got["client"] and got["right"] <= width + 1, (width, got)
    page.add_script_tag(path=str(__import__("figure_page").PLOTLY_JS))  # set_content dropped it
