"""Selector-comparison views on a real, stored comparison of four selectors (onevision letterboxed)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.clips import encode_clip

from backend.compare import compare_selectors, load_comparison, parse_entries
from backend.runs import open_run
from backend.store import SessionStore
from views import compare as cv
from views.inspector.frame_layers import LayerOptions

pytestmark = pytest.mark.needs_cvp

ENTRIES = (
    "cvp[num_sampled_frames=24],llava-ov2[target_canvas=8],uniform[num_frames=6],"
    "onevision[seq_len_frames=16,num_images=3,square_size=192]"
)


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    """48 frames of 320×192 H.264 compared across cvp, llava-ov2, uniform and onevision: the
    onevision square is 192×192 with the 192×115 picture between bars above and below."""
    folder = tmp_path_factory.mktemp("selector_view")
    clip = encode_clip(folder / "h264", codec="h264", width=320, height=192, frames=48, fps=24, gop=24)
    with SessionStore(folder / "s.duckdb") as store:
        done = compare_selectors(clip, store, entries=parse_entries(ENTRIES))
        stored = load_comparison(store, done.comparison_id)
        results = [open_run(store, rid) for rid in stored.run_ids]
    return stored, results


def test_the_metric_figure_tells_its_ten_lines_apart_and_titles_both_axes(opened):
    stored, results = opened
    fig = cv.prepare_selector_metric_figure(stored, cv.prepare_positions(results))
    pairs = [t for t in fig.data if t.yaxis == "y"]
    kept = [t for t in fig.data if t.yaxis == "y2"]
    assert len(pairs) == 6 and len(kept) == 4  # the ten traces of issue 27 item 18
    looks = [(t.line.color, t.line.dash or "solid") for t in fig.data]
    assert len(set(looks)) == len(looks)
    # A pair never takes a selector's colour: colour alone says which row's legend to read.
    assert not {t.line.color for t in pairs} & {t.line.color for t in kept}
    assert len({t.line.color for t in kept}) == 4
    assert {t.legend for t in pairs} == {"legend"} and {t.legend for t in kept} == {"legend2"}
    assert fig.layout.yaxis.title.text == "Jaccard" and fig.layout.yaxis2.title.text == "kept blocks"
    assert (
        fig.layout.legend.title.text.strip() == "pairs"
        and fig.layout.legend2.title.text.strip() == "selectors"
    )


def test_the_letterboxed_pane_shows_its_picture_without_the_bars(opened):
    stored, results = opened
    onevision = 3  # the last entry
    assert stored.labels[onevision].startswith("onevision")
    result = results[onevision]
    (s, _), (hn, wn) = result.geometry.processed_hw, result.geometry.prepared_hw
    assert (s, hn, wn) == (192, 115, 192)
    frame = int(result.candidates.frame_indices[0])
    heat = LayerOptions(heatmap=True, opacity=1.0)
    options = cv.PaneOptions(layers=heat, labels=stored.labels)
    pane = cv.prepare_pane(results, onevision, frame, options)
    assert pane.image.shape == (hn, wn, 3)  # the square's bars are cut away, not painted
    y0, y1, x0, x1 = cv.picture_pixels(result)
    assert (y1 - y0, x1 - x0) == (hn, wn) and y0 == (s - hn) // 2
    # What is left is the picture: the decoded pixels there hold no black bar rows.
    picture = result.decoded.pixels[0][y0:y1, x0:x1]
    assert picture.reshape(-1, 3).max(axis=0).min() > 0 and picture.max(axis=1).min() > 0
    # The pane now has the video's aspect (it was a 1:1 square), as the other panes have.
    assert abs(pane.image.shape[1] / pane.image.shape[0] - 320 / 192) < 0.01
    # Panes without bars are untouched.
    cvp = cv.prepare_pane(results, 0, frame, options).image
    assert cvp.shape[:2] == tuple(results[0].geometry.processed_hw)


def test_coverage_is_a_share_from_0_to_1_as_the_dataset_tab_shows_it(opened):
    stored, _ = opened
    headers, rows = cv.prepare_selector_table(stored)
    for name in ("time covered (share of 1 s bins)", "space covered (share of blocks)"):
        column = headers.index(name)
        values = np.asarray([r[column] for r in rows], np.float64)
        assert np.all((values >= 0) & (values <= 1)), name
    assert not [h for h in headers if "%" in h]
    expected = stored.coverage.set_index("variant_index")["temporal_coverage"].round(3).tolist()
    assert [r[headers.index("time covered (share of 1 s bins)")] for r in rows] == expected


@pytest.mark.browser
def test_the_metric_figure_as_drawn_cuts_off_no_title_or_legend(opened):
    from figure_page import CHROMIUM, chromium_page, clipped_texts, draw_figure, overlapping_texts, text_of

    from views.figure_style import SCREEN_FULL_WIDTH_PX

    if not __import__("pathlib").Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed; run scripts/setup.sh")
    stored, results = opened
    fig = cv.prepare_selector_metric_figure(stored, cv.prepare_positions(results))
    with chromium_page() as page:
        m = draw_figure(page, fig, width_px=SCREEN_FULL_WIDTH_PX)
    assert clipped_texts(m) == [] and overlapping_texts(m) == []
    assert text_of(m, "ytitle")["text"] == "Jaccard" and text_of(m, "y2title")["text"] == "kept blocks"
    legend = [t for t in m["texts"] if t["cls"].split()[0] in ("legendtext", "legend2text")]
    assert len(legend) == 10  # every entry drawn, none over another (checked above)
