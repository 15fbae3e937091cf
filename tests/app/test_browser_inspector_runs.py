"""Two runs in one inspector page, as a researcher compares them (issue 15), in headless Debian Chromium at
1600×1000: run A set as B, a second run from the Run tab (its progress names the running stage and leaves the
stored-run list uncovered), a failed run after that success (its error alone), the A/B flip between the two
runs at the same frame, play/pause and the signal plots' playhead."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lens_browser import (
    ARTIFACTS,
    BROWSER_MARKS,
    go_to_candidate,
    info_line,
    open_inspector_page,
    served_app,
    shown_frame,
)

pytestmark = BROWSER_MARKS

WIDTH, HEIGHT = 1600, 1000

# Gradio's status tracker over #run_status: every progress label drawn during a run, and whether its
# box ever overlapped the stored-run choice (#open_pick) under it.
WATCH_PROGRESS_JS = """() => {
  window.__lensProgress = {labels: [], overlaps: 0};
  const pick = () => document.querySelector('#open_pick');
  new MutationObserver(() => {
    for (const el of document.querySelectorAll('.progress-level-inner, .progress-text, .eta-bar')) {
      const t = el.textContent.trim();
      if (t) window.__lensProgress.labels.push(t);
    }
    const p = pick() && pick().getBoundingClientRect();
    for (const el of document.querySelectorAll('.progress-level, .eta-bar')) {
      const r = (el.closest('.wrap') || el).getBoundingClientRect();
      if (p && r.width && r.left < p.right && r.right > p.left && r.top < p.bottom && r.bottom > p.top) {
        window.__lensProgress.overlaps += 1;
      }
    }
  }).observe(document.body, {childList: true, subtree: true, characterData: true});
}"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from helpers.clips import encode_clip

    from app.workspace import ensure_run, make_workspace
    from backend.pipeline import SelectionOptions

    root = tmp_path_factory.mktemp("inspector_runs")
    ws = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    # 48 frames of moving texture at 320×240, keyframes every 24: run A samples all 48 frames,
    # the second run (started in the page) 16, so B's candidates are not A's.
    clip = encode_clip(ws.output_root / "ab" / "moving", codec="h264", frames=48, gop=24)
    try:
        run_a = ensure_run(ws, clip, SelectionOptions(profile="clean", num_sampled_frames=48))
        with served_app(ws, run_id=run_a, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield {"ws": ws, "url": url, "run_a": run_a, "clip": clip}
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(app: dict[str, Any]) -> Iterator[Any]:
    with open_inspector_page(app["url"], height=HEIGHT, width=WIDTH) as pg:
        yield pg


def _run_id(page: Any) -> str:
    return page.locator("#run_id textarea, #run_id input").first.input_value()


def _viewer_shot(page: Any, name: str) -> None:
    """A still of the viewer column, from its tools to the candidate slider (for docs/screenshots/)."""
    top = page.locator("#frame_tools").bounding_box()
    bottom = page.locator("#frame_slider").bounding_box()
    x, y = top["x"] - 8, top["y"] - 8
    right, low = bottom["x"] + bottom["width"] + 8, bottom["y"] + bottom["height"] + 8
    clip = {"x": x, "y": y, "width": right - x, "height": low - y}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), clip=clip)
    assert (ARTIFACTS / name).stat().st_size > 10_000


def test_a_second_run_shows_its_stage_and_a_failed_run_after_it_its_error_alone(
    page: Any, app: dict[str, Any]
) -> None:
    go_to_candidate(page, 10)
    page.locator("#set_b_btn").click()  # B: run A, as it is shown now
    assert f"B = run {app['run_a']}" in page.locator("#b_label").inner_text()
    page.get_by_role("tab", name="Run").click()
    assert page.locator("#video_path textarea, #video_path input").first.input_value().endswith("moving.mp4")
    page.evaluate(WATCH_PROGRESS_JS)
    page.locator("#opt_num_sampled_frames input").fill("16")
    page.locator("#run_btn").click()
    page.wait_for_function(
        "() => document.querySelector('#run_status').innerText.includes(' done in ')", timeout=120_000
    )
    run_c = _run_id(page)
    assert run_c != app["run_a"] and run_c in page.locator("#run_status").inner_text()
    # Defect 13: the label names the stage that runs, and the bar covers the status line only.
    from backend.pipeline.registry import STAGES

    progress = page.evaluate("() => window.__lensProgress")
    assert any(any(s in label for s in STAGES.names) for label in progress["labels"]), progress
    assert not any("geometry" in label and "40" in label for label in progress["labels"]), progress
    assert progress["overlaps"] == 0, progress
    # Defect 3: a failed run after the success shows its error alone. (First the page settles on
    # the new run: opening it fills the video path again.)
    page.wait_for_function(
        f"() => document.querySelector('#open_pick input').value.startsWith('{run_c}')"
        f" && document.querySelector('#frame_img').src.includes('run={run_c}')",
        timeout=60_000,
    )
    page.locator("#video_path textarea, #video_path input").first.fill(str(app["clip"].parent))
    page.locator("#run_btn").click()
    page.wait_for_function("() => document.body.innerText.includes('is a directory, not a video file')")
    assert " done in " not in page.locator("#run_status").inner_text()
    table = page.locator("#runs_table").inner_text()
    assert "Error" not in table and app["run_a"] in table and run_c in table
    assert "Error" not in page.locator("#open_pick").inner_text()
    assert _run_id(page) == run_c
    page.get_by_role("tab", name="Inspect").click()


def test_the_ab_flip_shows_the_other_run_at_the_same_frame(page: Any, app: dict[str, Any]) -> None:
    run_c = _run_id(page)
    assert run_c != app["run_a"]
    page.wait_for_function(f"() => document.querySelector('#frame_img').src.includes('run={run_c}')")
    go_to_candidate(page, 5)
    frame, info_c = shown_frame(page), info_line(page)
    page.locator("#summary").click()
    page.keyboard.press("b")
    # B is run A at the frame C shows: the image, the tag and the info line all follow.
    page.wait_for_function(
        f"() => {{ const i = document.querySelector('#frame_img');"
        f" return i.src.includes('run={app['run_a']}') && i.src.includes('f={frame}')"
        f" && i.complete && i.naturalWidth > 0; }}",
        timeout=30_000,
    )
    assert page.locator("#frame_mode").inner_text().startswith("B")
    fids = app["ws"].result(app["run_a"]).candidates.frame_indices.tolist()
    row_a = min(range(len(fids)), key=lambda r: abs(fids[r] - frame))  # A's candidate nearest the frame
    want = f"candidate {row_a} · frame {fids[row_a]} "
    page.wait_for_function(
        f"() => document.querySelector('#frame_info').innerText.startsWith({want!r})", timeout=30_000
    )
    page.wait_for_timeout(300)
    _viewer_shot(page, "inspector_ab_runs.png")
    page.locator("#flip_btn").click()
    page.wait_for_function(
        f"() => {{ const s = document.querySelector('#frame_img').src;"
        f" return s.includes('run={run_c}') && !s.includes('f='); }}"
    )
    page.wait_for_function(
        "(t) => document.querySelector('#frame_info').innerText === t", arg=info_c, timeout=30_000
    )
    assert page.locator("#frame_mode").inner_text().startswith("A")


def test_play_pause_and_the_signal_plots_playhead(page: Any) -> None:
    go_to_candidate(page, 1)
    page.locator("#play_rate").select_option("2")  # 7 s to the last of 16 candidates, even under load
    page.locator("#play_btn").click()
    assert "pause" in page.locator("#play_btn").inner_text()
    page.wait_for_function(
        "() => parseInt(document.querySelector('#frame_info').innerText.split(' ')[1]) >= 3", timeout=30_000
    )
    _viewer_shot(page, "inspector_playing.png")
    page.locator("#play_btn").click()
    assert "play" in page.locator("#play_btn").inner_text()
    page.wait_for_timeout(300)
    stopped = info_line(page)
    page.wait_for_timeout(1200)  # 2 frames at 2 fps, had it not stopped
    assert info_line(page) == stopped
    # The playhead of the signal plots stands on the frame the viewer shows.
    frame = shown_frame(page)
    page.locator("#signal_plots").scroll_into_view_if_needed()
    page.wait_for_selector("#signal_plots .js-plotly-plot", timeout=60_000)
    page.wait_for_function(
        "(f) => { const gd = document.querySelector('#signal_plots .js-plotly-plot');"
        " const s = gd && gd.layout.shapes.find((x) => x.name === 'cursor'); return s && s.x0 === f; }",
        arg=frame,
        timeout=15_000,
    )
    page.locator("#signal_plots").screenshot(path=str(ARTIFACTS / "inspector_signal_playhead.png"))
