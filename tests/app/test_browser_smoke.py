"""The app in headless Debian Chromium through Playwright: loads on the sample and steps frames."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from helpers.paths import REPO_ROOT
from lens_browser import ARTIFACTS, BROWSER_MARKS, open_inspector_page, served_app, wait_candidate

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from app.workspace import make_workspace

    root = tmp_path_factory.mktemp("app")
    ws = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory, workspace) -> Iterator[str]:
    from app.workspace import SAMPLE_VIDEO, ensure_run

    run_id = ensure_run(workspace, SAMPLE_VIDEO)
    with served_app(workspace, run_id=run_id, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
        yield url


@pytest.fixture(scope="module")
def page(app_url: str) -> Iterator[object]:
    with open_inspector_page(app_url) as pg:
        yield pg


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
    wait_candidate(page, row, timeout_ms=15_000)


def test_step_buttons_move_the_viewer(page) -> None:
    page.locator("#frame_slider input[type=range]").fill("10")
    _wait_candidate(page, 10)
    page.locator("#step_next").click()
    _wait_candidate(page, 11)
    page.locator("#step_prev").click()
    _wait_candidate(page, 10)
    page.locator("#step_next_group").click()
    page.wait_for_function(
        "() => !document.querySelector('#frame_info').innerText.startsWith('candidate 10 ')", timeout=15_000
    )
    assert _candidate(page) > 10
    page.locator("#step_home").click()
    _wait_candidate(page, 0)


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
        "() => document.querySelector('#block_info').innerText.includes('decision')", timeout=15_000
    )
    text = page.locator("#block_info").inner_text()
    assert "block score" in text and "rank in group" in text and "K=" in text


def _run_id(page) -> str:
    return page.locator("#run_id textarea, #run_id input").first.input_value()


def _open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name).click()


def _wait_text(page, text: str, timeout: int = 30_000) -> None:
    page.get_by_text(text, exact=False).first.wait_for(state="visible", timeout=timeout)


def test_run_with_changed_parameters_then_reopen_restores_the_view(page) -> None:
    _open_tab(page, "Inspect")
    first_run = _run_id(page)
    page.locator("#frame_slider input[type=range]").fill("7")
    _wait_candidate(page, 7)
    page.locator("#layers label", has_text="heatmap").click()
    _open_tab(page, "Run")
    # Record every progress bar Gradio draws while the run is going.
    page.evaluate(
        """() => { window.__lensProgress = [];
          new MutationObserver(() => document.querySelectorAll('.progress-level, .progress-bar, .eta-bar')
            .forEach((el) => window.__lensProgress.push(el.textContent.trim())))
          .observe(document.body, {childList: true, subtree: true, characterData: true}); }"""
    )
    page.locator("#opt_num_sampled_frames input").fill("64")
    page.locator("#opt_images_per_group input").fill("3")
    page.locator("#run_btn").click()
    page.wait_for_function(
        "() => document.querySelector('#run_status').innerText.includes(' done in ')", timeout=120_000
    )
    status = page.locator("#run_status").inner_text()
    assert "decoded" in status and "canvases" in status
    assert page.evaluate("() => window.__lensProgress.length") > 0, "no progress bar was drawn"
    second_run = _run_id(page)
    assert second_run != first_run and second_run in status
    _open_tab(page, "Inspect")
    page.wait_for_function(
        "() => document.querySelector('#summary').innerText.includes('64 candidates')", timeout=30_000
    )
    _wait_candidate(page, 0)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "app_after_run.png"), full_page=True)
    # Reopen the first run from the sessions list: same frame and layers as it was left.
    _open_tab(page, "Run")
    page.locator("#open_pick input").click()
    page.locator("#open_pick input").fill(first_run)
    page.locator("[role=option]", has_text=re.compile(re.escape(first_run) + " · ")).first.click()
    page.locator("#open_btn").click()
    page.wait_for_function(
        f"() => document.querySelector('#run_id textarea, #run_id input').value === '{first_run}'"
    )
    _open_tab(page, "Inspect")
    _wait_candidate(page, 7)
    assert page.locator("#layers label", has_text="heatmap").locator("input").is_checked()
    assert f"run={first_run}" in page.locator("#frame_img").get_attribute("src")
    assert page.locator("#opt_num_sampled_frames input").input_value() == "1024"  # its own options
    page.locator("#layers label", has_text="heatmap").click()  # back off for the other tests


def test_non_video_upload_shows_an_error_and_the_session_stays_usable(page, tmp_path) -> None:
    _open_tab(page, "Inspect")
    before = _run_id(page)
    page.locator("#frame_slider input[type=range]").fill("3")
    _wait_candidate(page, 3)
    bogus = tmp_path / "notes.mp4"
    bogus.write_text("these are meeting notes, not a video\n" * 20)
    _open_tab(page, "Run")
    page.locator("#upload input[type=file]").set_input_files(str(bogus))
    _wait_text(page, "notes.mp4:")
    page.screenshot(path=str(ARTIFACTS / "app_bad_upload.png"), full_page=True)
    assert _run_id(page) == before
    _open_tab(page, "Inspect")
    page.locator("#summary").click()
    page.keyboard.press("ArrowRight")
    _wait_candidate(page, 4)


def test_typed_paths_outside_the_allowed_folders_are_refused(page, workspace) -> None:
    _open_tab(page, "Run")
    before = _run_id(page)
    page.locator("#video_path textarea, #video_path input").first.fill("../../../../../../etc/passwd")
    page.locator("#run_btn").click()
    _wait_text(page, "outside the allowed folders")
    assert _run_id(page) == before
    assert not (workspace.output_root.parent / "etc").exists()
    _open_tab(page, "Inspect")


def test_the_server_reads_no_file_outside_the_allowed_folders(app_url: str) -> None:
    import urllib.error
    import urllib.request

    # The frame route takes run ids, never paths.
    for query in ("run=../../etc/passwd&row=0", "run=nope&row=0", "run=x&row=-1"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{app_url}lens/frame?{query}", timeout=10)
        assert err.value.code in (404, 422)
    # Gradio's file route serves only its cache and the work folder.
    for path in ("/etc/passwd", "../../../../etc/passwd", str(REPO_ROOT / "pyproject.toml")):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{app_url}gradio_api/file={path}", timeout=10)
        assert err.value.code in (403, 404)
