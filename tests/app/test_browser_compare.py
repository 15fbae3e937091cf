"""The Compare-codecs tab in headless Debian Chromium: panes step together, keys drive them, plots follow."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from helpers.compare_clips import make_comparison
from lens_browser import ARTIFACTS, BROWSER_MARKS, open_page, served_app

PANES = 4

pytestmark = [*BROWSER_MARKS, pytest.mark.needs_cvp]


@pytest.fixture(scope="module")
def app_url(real_clips, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from app.workspace import Workspace

    work = tmp_path_factory.mktemp("compare_app")
    db = work / "sessions.duckdb"
    make_comparison(db, real_clips / "real_h264_flower_timelapse.mp4")
    ws = Workspace(store_path=db, input_roots=(real_clips,), output_root=work / "out")
    try:
        # The real app, its key handler included; no run is open in the inspector.
        with served_app(ws, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield url
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(app_url: str) -> Iterator[object]:
    with open_page(app_url) as pg:
        pg.get_by_role("tab", name="Compare codecs").click()
        pg.wait_for_selector(f"#cmp_pane_{PANES - 1} img", timeout=60_000)
        yield pg


def _frames(page) -> list[int]:
    """The frame index in every pane's caption."""
    out = []
    for i in range(PANES):
        text = page.locator(f"#cmp_info_{i}").inner_text()
        match = re.search(r" · frame (\d+) · ", text)
        assert match, text
        out.append(int(match.group(1)))
    return out


def _srcs(page) -> list[str | None]:
    return [page.locator(f"#cmp_pane_{i} img").get_attribute("src") for i in range(PANES)]


def _wait_new_images(page, before: list[str | None]) -> None:
    """Wait until every pane shows another image than ``before``."""
    page.wait_for_function(
        f"() => {json.dumps(before)}"
        ".every((s, i) => document.querySelector('#cmp_pane_' + i + ' img').src !== s)",
        timeout=15_000,
    )


def _wait_frames(page, frame: int) -> None:
    checks = " && ".join(
        f"document.querySelector('#cmp_info_{i}').innerText.includes(' · frame {frame} · ')"
        for i in range(PANES)
    )
    page.wait_for_function(f"() => {checks}", timeout=15_000)


def test_four_panes_open_on_the_stored_comparison(page) -> None:
    labels = [page.locator(f"#cmp_info_{i}").inner_text().split(" · ")[0] for i in range(PANES)]
    assert labels == ["h264 crf23", "hevc crf28", "vp9 crf32", "av1 crf35"]
    assert _frames(page) == [0] * PANES
    assert not page.locator("#compare_hidden").is_visible()  # CSS-hidden, but in the page
    assert page.locator("#cmp_next").count() == 1


def test_step_buttons_move_every_pane_by_one_frame(page) -> None:
    before, srcs = _frames(page), _srcs(page)
    page.locator("#cmp_step_next").click()
    _wait_frames(page, before[0] + 1)
    assert _frames(page) == [before[0] + 1] * PANES
    _wait_new_images(page, srcs)
    page.locator("#cmp_step_next").click()
    _wait_frames(page, before[0] + 2)
    page.locator("#cmp_step_prev").click()
    _wait_frames(page, before[0] + 1)


def test_keys_drive_all_panes(page) -> None:
    page.locator("#cmp_step_home").click()
    _wait_frames(page, 0)
    page.locator("#cmp_settings").click()  # focus the page, not an input
    page.keyboard.press("ArrowRight")
    _wait_frames(page, 1)
    page.keyboard.press("Period")
    _wait_frames(page, 2)
    page.keyboard.press("ArrowLeft")
    _wait_frames(page, 1)
    page.keyboard.press("Shift+ArrowRight")  # next keyframe of pane 1: GOP 12
    _wait_frames(page, 12)
    page.keyboard.press("End")
    _wait_frames(page, 23)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_panes_keys.png"), full_page=True)
    assert (ARTIFACTS / "compare_panes_keys.png").stat().st_size > 10_000


def test_metric_cursor_follows_and_a_plot_click_jumps_the_panes(page) -> None:
    page.locator("#cmp_slider input[type=range]").fill("6")
    _wait_frames(page, 6)
    page.wait_for_function(
        "() => { const gd = document.querySelector('#cmp_metrics .js-plotly-plot');"
        " const s = gd && gd.layout.shapes.find((x) => x.name === 'cursor'); return s && s.x0 === 6; }",
        timeout=15_000,
    )
    page.locator("#cmp_metrics").scroll_into_view_if_needed()
    # The metric plots come with the load's outputs; on a loaded machine they draw after the panes.
    page.wait_for_function(
        "() => { const gd = document.querySelector('#cmp_metrics .js-plotly-plot');"
        " return gd && gd._fullLayout && gd._fullLayout.xaxis; }",
        timeout=30_000,
    )
    point = page.evaluate(
        """() => {
          const gd = document.querySelector('#cmp_metrics .js-plotly-plot');
          const xa = gd._fullLayout.xaxis3, ya = gd._fullLayout.yaxis3;
          const r = gd.getBoundingClientRect();
          const trace = gd.data.findIndex((t) => t.name === 'h264 crf23 (full decode)');
          const y = gd.data[trace].y[17];
          return {x: r.left + xa._offset + xa.l2p(17), y: r.top + ya._offset + ya.l2p(y)};
        }"""
    )
    page.mouse.click(point["x"], point["y"])
    _wait_frames(page, 17)


def test_difference_mode_colours_the_blocks_each_codec_kept_alone(page) -> None:
    page.locator("#cmp_slider input[type=range]").fill("5")
    _wait_frames(page, 5)
    srcs = _srcs(page)
    page.locator("#cmp_diff input").check()
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_1').innerText.includes('vs h264 crf23:')", timeout=15_000
    )
    captions = [page.locator(f"#cmp_info_{i}").inner_text() for i in range(PANES)]
    assert "only there" not in captions[0] and all("only here" in c for c in captions[1:])
    assert _srcs(page)[1:] != srcs[1:]
    page.locator("#cmp_step_next").click()  # stepping keeps the difference on every pane
    _wait_frames(page, 6)
    assert all("only here" in page.locator(f"#cmp_info_{i}").inner_text() for i in range(1, PANES))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_difference.png"), full_page=True)
    page.locator("#cmp_diff input").uncheck()


def test_shared_heatmap_scale_shows_its_units(page) -> None:
    before = _srcs(page)
    page.locator("#cmp_layers label", has_text="heatmap").click()
    page.locator("#cmp_scale label", has_text="across compared runs").click()
    page.wait_for_selector("#cmp_legend", state="visible", timeout=15_000)
    page.wait_for_function(
        "() => document.querySelector('#cmp_legend').innerText.includes('all bitcost runs max')",
        timeout=15_000,
    )
    assert "all residual runs max" in page.locator("#cmp_legend").inner_text()
    _wait_new_images(page, before)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_heatmap_all_runs.png"), full_page=True)
    page.locator("#cmp_scale label", has_text="per frame").click()
    page.locator("#cmp_layers label", has_text="heatmap").click()
    page.wait_for_selector("#cmp_legend", state="hidden", timeout=15_000)


def test_the_variants_table_shows_every_column_within_its_width(page) -> None:
    """Issue 27, item 17: side by side with the pairs, 7 of its 13 columns were scrolled away."""
    page.locator("#cmp_variants").scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelectorAll('#cmp_variants th').length >= 13", timeout=15_000)
    box = page.evaluate(
        """() => {
          const t = document.querySelector('#cmp_variants'), r = t.getBoundingClientRect();
          const cells = (sel) => [...t.querySelectorAll(sel)].map((c) => c.getBoundingClientRect());
          return {left: r.left, right: r.right, width: r.width, page: document.body.clientWidth,
                  heads: cells('th').map((c) => [c.left, c.right]),
                  names: [...t.querySelectorAll('th')].map((c) => c.innerText.trim())};
        }"""
    )
    assert {"variant", "luma bias", "reader Y-PSNR dB"} <= {" ".join(n.split()) for n in box["names"]}
    assert box["width"] > 0.7 * box["page"], box  # a row of its own
    for left, right in box["heads"]:
        assert box["left"] - 1 <= left and right <= box["right"] + 1, box
    # Every row has a value under every header (a dash where a measure does not apply).
    filled = page.evaluate(
        """() => [...document.querySelectorAll('#cmp_variants [role=row]')].slice(1).map((r) =>
          [...r.querySelectorAll('[role=gridcell]')].filter((c) => c.innerText.trim()).length)"""
    )
    assert filled == [len(box["names"])] * PANES, filled


def test_a_new_comparison_runs_from_a_path_and_opens(page) -> None:
    page.locator("#cmp_pick").scroll_into_view_if_needed()
    if not page.locator("#cmp_path").is_visible():
        page.get_by_text("New comparison").click()
    page.locator("#cmp_path textarea, #cmp_path input").first.fill("/etc/hostname")
    page.locator("#cmp_run").click()
    page.wait_for_selector("text=outside the allowed folders", timeout=15_000)
    page.locator("#cmp_path textarea, #cmp_path input").first.fill("real_h264_film_friday.mp4")
    page.locator("#cmp_codecs label", has_text="hevc").click()  # three codecs: three panes
    for label, value in (("Max frames", "12"), ("Max side", "160")):
        page.get_by_label(re.compile(label)).fill(value)
    page.locator("#cmp_run").click()
    page.wait_for_function(
        "() => document.querySelector('#cmp_status').innerText"
        ".includes('3 variants of real_h264_film_friday')",
        timeout=120_000,
    )
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_2').innerText.includes('av1 ')"
        " && document.querySelector('#cmp_info_0').innerText.includes('h264 ')",
        timeout=30_000,
    )
    assert not page.locator("#cmp_pane_3").is_visible()
    # Every pane settled on frame 0 before the step, so the step is not lost in its redraw.
    page.wait_for_function(
        "() => [0, 1, 2].every((i) =>"
        " document.querySelector('#cmp_info_' + i).innerText.includes(' · frame 0 · '))",
        timeout=30_000,
    )
    page.locator("#cmp_step_next").click()
    page.wait_for_function(
        "() => [0, 1, 2].every((i) =>"
        " document.querySelector('#cmp_info_' + i).innerText.includes(' · frame 1 · '))",
        timeout=15_000,
    )


def test_a_reload_brings_the_open_comparison_back(page) -> None:
    """Issue 15, defect 10: after a reload the comparison shown last comes back whole."""
    before = page.locator("#cmp_info_0").inner_text().strip().splitlines()[-1].split(" · ")[0]
    page.reload()
    page.get_by_role("tab", name="Compare codecs").click()
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_0').innerText.includes(' · frame 0 · ')", timeout=60_000
    )
    # Gradio's pending timer ("0.7s") may precede the caption inside the element.
    assert page.locator("#cmp_info_0").inner_text().strip().splitlines()[-1].startswith(before)
    assert int(page.locator("#cmp_slider input[type=range]").get_attribute("max")) > 1
    for table in ("#cmp_variants", "#cmp_pairs"):
        headers = page.locator(f"{table} th").all_inner_texts()
        assert headers and not {h.strip() for h in headers} <= {"1", "2", "3", ""}, headers
    page.locator("#cmp_settings").click()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_0').innerText.includes(' · frame 1 · ')", timeout=15_000
    )
    page.locator("#cmp_metrics").scroll_into_view_if_needed()
    # The metric plots come with the load's outputs; on a loaded machine they draw after the panes.
    page.wait_for_function(
        "() => { const gd = document.querySelector('#cmp_metrics .js-plotly-plot');"
        " return gd && gd._fullLayout && gd._fullLayout.xaxis; }",
        timeout=30_000,
    )
    point = page.evaluate(
        """() => {
          const gd = document.querySelector('#cmp_metrics .js-plotly-plot');
          const xa = gd._fullLayout.xaxis, size = gd._fullLayout._size, r = gd.getBoundingClientRect();
          return {x: r.left + xa._offset + xa.c2p(6), y: r.top + size.t + size.h * 0.5};
        }"""
    )
    page.mouse.click(point["x"], point["y"])  # anywhere on the plot, not on a point
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_0').innerText.includes(' · frame 6 · ')", timeout=15_000
    )
