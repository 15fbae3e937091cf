"""The app in headless Debian Chromium through Playwright: loads on the sample and steps frames."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO_ROOT, requires_cvp

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "artifacts" / "screenshots"

pytestmark = [
    pytest.mark.browser,
    requires_cvp,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="Debian chromium not installed; run scripts/setup.sh as root"
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    os.environ["GRADIO_TEMP_DIR"] = str(tmp_path_factory.mktemp("gradio"))
    from app.main import LAUNCH_KWARGS, SAMPLE_VIDEO, build_app

    demo = build_app(SAMPLE_VIDEO)
    port = _free_port()
    demo.launch(
        server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **LAUNCH_KWARGS
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close(verbose=False)


@pytest.fixture(scope="module")
def page(app_url: str) -> Iterator[object]:
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        external: list[str] = []
        pg.on(
            "request",
            lambda r: (
                None if r.url.startswith(("http://127.0.0.1", "data:", "blob:")) else external.append(r.url)
            ),
        )
        pg.goto(app_url)
        pg.wait_for_selector("#frame img", timeout=30_000)
        yield pg
        assert not external, f"the page reached outside the machine: {external[:3]}"
        browser.close()


def test_loads_on_the_sample_with_a_finished_run(page) -> None:
    summary = page.locator("#summary").inner_text()
    assert "flower_timelapse_cc0.mp4" in summary and "canvases" in summary
    assert page.locator("#frame_info").inner_text().startswith("candidate 0 · frame 0")


def test_slider_steps_exactly_one_frame(page) -> None:
    first = page.locator("#frame img").get_attribute("src")
    page.locator("#frame_slider input[type=range]").fill("5")
    page.wait_for_function(
        "() => document.querySelector('#frame_info').innerText.startsWith('candidate 5 ')", timeout=15_000
    )
    page.locator("#frame_slider input[type=range]").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('#frame_info').innerText.startsWith('candidate 6 ')", timeout=15_000
    )
    assert page.locator("#frame img").get_attribute("src") != first
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "app_frame6.png"), full_page=True)
    assert (ARTIFACTS / "app_frame6.png").stat().st_size > 10_000


def _candidate(page) -> int:
    return int(page.locator("#frame_info").inner_text().split(" · ")[0].split()[1])


def _wait_candidate(page, row: int) -> None:
    page.wait_for_function(
        f"() => document.querySelector('#frame_info').innerText.startsWith('candidate {row} ')",
        timeout=15_000,
    )


def test_keys_step_one_frame_and_jump_to_group_boundaries(page) -> None:
    page.locator("#frame_slider input[type=range]").fill("0")
    _wait_candidate(page, 0)
    page.locator("#summary").click()  # focus the page, not an input
    page.keyboard.press("ArrowRight")
    _wait_candidate(page, 1)
    page.keyboard.press("Period")
    _wait_candidate(page, 2)
    page.keyboard.press("ArrowLeft")
    _wait_candidate(page, 1)
    info_text = page.locator("#frame_info").inner_text()
    group_now = int(info_text.split("group ")[1].split()[0])
    page.keyboard.press("]")
    page.wait_for_function(
        f"() => !document.querySelector('#frame_info').innerText.includes('group {group_now} ')",
        timeout=15_000,
    )
    after = page.locator("#frame_info").inner_text()
    assert int(after.split("group ")[1].split()[0]) == group_now + 1
    assert "anchor" in after or "kept blocks" in after
    page.keyboard.press("End")
    page.wait_for_function(
        "() => !document.querySelector('#frame_info').innerText.startsWith('candidate 1 ')"
    )
    page.keyboard.press("?")
    page.wait_for_selector("#key_map", state="visible", timeout=15_000)
    assert "group boundary" in page.locator("#key_map").inner_text()


def test_heatmap_toggle_changes_the_image(page) -> None:
    before = page.locator("#frame img").get_attribute("src")
    page.locator("#layers label", has_text="heatmap").click()
    page.wait_for_function(
        f"() => document.querySelector('#frame img').getAttribute('src') !== {before!r}", timeout=15_000
    )
    page.locator("#layers label", has_text="heatmap").click()  # back off for the other tests


def test_timeline_click_moves_the_viewer(page) -> None:
    page.locator("#timeline").scroll_into_view_if_needed()
    page.wait_for_selector("#timeline .js-plotly-plot", timeout=15_000)
    point = page.evaluate(
        """() => {
          const gd = document.querySelector('#timeline .js-plotly-plot');
          const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
          const r = gd.getBoundingClientRect();
          const y = ya.range[0] + (ya.range[1] - ya.range[0]) * 0.02;
          return {x: r.left + xa._offset + xa.l2p(60), y: r.top + ya._offset + ya.l2p(y)};
        }"""
    )
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function(
        "() => { const t = document.querySelector('#frame_info').innerText;"
        " const f = parseInt(t.split(' · ')[1].split(' ')[1]); return f >= 58 && f <= 62; }",
        timeout=15_000,
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "app_timeline_jump.png"), full_page=True)


def test_timeline_cursor_follows_the_viewer_and_blocks_can_be_picked(page) -> None:
    page.locator("#frame_slider input[type=range]").fill("30")
    _wait_candidate(page, 30)
    page.wait_for_function(
        "() => { const gd = document.querySelector('#timeline .js-plotly-plot');"
        " const s = gd.layout.shapes.find((x) => x.name === 'cursor'); return s && s.x0 === 30; }",
        timeout=15_000,
    )
    page.locator("#frame img").scroll_into_view_if_needed()
    box = page.locator("#frame img").bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.wait_for_function(
        "() => document.querySelector('#block_info').innerText.startsWith('block (')", timeout=15_000
    )
    text = page.locator("#block_info").inner_text()
    assert "score" in text and "rank" in text and ("canvas" in text or "not kept" in text)
