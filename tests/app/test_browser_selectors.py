"""Selectors in headless Debian Chromium: a stored selector comparison in the Compare tab (panes, keys,
only-A/only-B/both, coverage table, metric plot), and the Run tab's selector choice running llava-ov2."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from lens_browser import ARTIFACTS, BROWSER_MARKS, open_page, served_app

pytestmark = [*BROWSER_MARKS, pytest.mark.needs_cvp]

ENTRIES = "cvp[num_sampled_frames=48],llava-ov2[target_canvas=8],uniform[num_frames=12]"
LABELS = ["cvp[num_sampled_frames=48]", "llava-ov2[target_canvas=8]", "uniform[num_frames=12]"]


@pytest.fixture(scope="module")
def app_url(real_clips, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from app.workspace import Workspace
    from backend.compare import compare_selectors, parse_entries
    from backend.store import SessionStore

    work = tmp_path_factory.mktemp("selectors_app")
    db = work / "sessions.duckdb"
    with SessionStore(db) as store:
        compare_selectors(real_clips / "real_h264_film_friday.mp4", store, entries=parse_entries(ENTRIES))
    ws = Workspace(store_path=db, input_roots=(real_clips,), output_root=work / "out")
    try:
        with served_app(ws, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield url
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(app_url: str) -> Iterator[object]:
    with open_page(app_url) as pg:
        pg.get_by_role("tab", name="Compare codecs & selectors").click()
        pg.wait_for_selector("#cmp_pane_2 img", timeout=60_000)
        yield pg


def _requested(page, n: int = 3) -> list[int]:
    """The frame every pane was asked for: its own, or the one it shows its nearest candidate for
    (the selectors sample different frames)."""
    out = []
    for i in range(n):
        text = page.locator(f"#cmp_info_{i}").inner_text()
        match = re.search(r"nearest candidate to frame (\d+)", text) or re.search(r" · frame (\d+) · ", text)
        assert match, text
        out.append(int(match.group(1)))
    return out


def test_the_selector_comparison_opens_in_synchronised_panes(page) -> None:
    labels = [page.locator(f"#cmp_info_{i}").inner_text().split(" · ")[0] for i in range(3)]
    assert labels == LABELS
    assert not page.locator("#cmp_pane_3").is_visible()
    assert _requested(page) == [0, 0, 0]
    table = page.locator("#cmp_variants").inner_text()
    assert "time covered" in table and "space covered" in table and "longest gap" in table
    assert "blocks compared on the first entry's" in page.locator("#cmp_settings").inner_text()
    # Positions are the frames any selector sampled: the next one after 0 is the first of those.
    page.locator("#cmp_step_next").click()
    page.wait_for_function(
        "() => !document.querySelector('#cmp_info_0').innerText.includes('to frame 0)')", timeout=15_000
    )
    first = _requested(page)
    assert first[0] > 0 and len(set(first)) == 1
    page.locator("#cmp_slider input[type=range]").focus()
    page.keyboard.press("ArrowRight")  # the app's keys move every pane
    page.wait_for_function(
        f"() => !document.querySelector('#cmp_info_1').innerText.match(/ (frame|to frame) {first[0]}\\b/)",
        timeout=15_000,
    )
    second = _requested(page)
    assert second[0] > first[0] and len(set(second)) == 1


def test_only_a_only_b_and_both(page) -> None:
    page.locator("#cmp_slider input[type=range]").fill("40")
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_0').innerText.includes(' · frame ')", timeout=15_000
    )
    page.locator("#cmp_diff input").check()
    page.wait_for_function(
        f"() => document.querySelector('#cmp_info_1').innerText.includes('vs {LABELS[0]}:')", timeout=15_000
    )
    caption = page.locator("#cmp_info_1").inner_text()
    match = re.search(r"(\d+) only there, (\d+) only here, (\d+) both", caption)
    assert match, caption
    assert sum(int(g) for g in match.groups()) > 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_selectors_difference.png"), full_page=True)
    page.locator("#cmp_diff input").uncheck()


def test_the_metric_plot_has_jaccard_and_kept_blocks(page) -> None:
    names = page.evaluate(
        "() => document.querySelector('#cmp_metrics .js-plotly-plot').data.map((t) => t.name)"
    )
    assert f"{LABELS[0]} vs {LABELS[1]}" in names and f"{LABELS[2]} kept" in names


def test_the_run_tab_runs_another_selector(page) -> None:
    page.get_by_role("tab", name="Run").click()
    assert page.locator("#opt_num_sampled_frames").is_visible()
    assert not page.locator("#opt_llava_ov2_score_mode").is_visible()
    page.locator("#opt_selector input").click()
    page.locator("[role=option]", has_text="llava-ov2").first.click()
    page.wait_for_selector("#opt_llava_ov2_score_mode", state="visible", timeout=15_000)
    assert not page.locator("#opt_num_sampled_frames").is_visible()
    page.locator("#video_path textarea, #video_path input").first.fill("real_h264_film_friday.mp4")
    page.locator("#opt_llava_ov2_target_canvas input").fill("8")
    page.locator("#run_btn").click()
    page.wait_for_function(
        "() => document.querySelector('#run_status').innerText.includes(' done in ')", timeout=180_000
    )
    status = page.locator("#run_status").inner_text()
    assert "8 canvases" in status and "2 groups" in status
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_function(
        "() => document.querySelector('#summary').innerText.includes('64 candidates')", timeout=60_000
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "inspect_llava_ov2.png"), full_page=True)
