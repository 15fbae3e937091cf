"""Trust what the Inspect page shows (issue 27), in headless Debian Chromium at 1600×1000 on a fresh session:
the first run says it was computed now, the readiness trace shows for every group, the layout does not move
under the cursor or the key map, a run opened after an A/B flip is itself, a live re-selection's info line
changes with its frame, and a new page opens the run viewed last."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from lens_browser import (
    BROWSER_MARKS,
    go_to_candidate,
    info_line,
    open_inspector_page,
    open_run_id,
    open_stored_run,
    screenshot,
    served_app,
)

pytestmark = BROWSER_MARKS

WIDTH, HEIGHT = 1600, 1000

# The readiness panel as drawn: its height, the plot's traces and what its annotations say.
TRACE_PANEL_JS = """() => {
  const el = document.querySelector('#readiness_plot');
  const gd = el && el.querySelector('.js-plotly-plot');
  const notes = gd && gd._fullLayout ? (gd._fullLayout.annotations || []).map((a) => a.text) : [];
  return {height: el ? el.getBoundingClientRect().height : 0,
          plotHeight: gd ? gd.getBoundingClientRect().height : 0,
          traces: gd && gd.data ? gd.data.length : 0,
          title: gd && gd._fullLayout && gd._fullLayout.title ? gd._fullLayout.title.text : '',
          notes: notes,
          pick: document.querySelector('#group_pick input').value};
}"""

# Every load of the frame image, with the info line as it read at that moment.
WATCH_FRAMES_JS = """() => {
  window.__lensLoads = [];
  document.addEventListener('load', (ev) => {
    if (ev.target && ev.target.id === 'frame_img') {
      window.__lensLoads.push({src: ev.target.getAttribute('src'),
                               info: document.querySelector('#frame_info').innerText});
    }
  }, true);
}"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from helpers.clips import encode_clip

    from app.server import first_run
    from app.workspace import SAMPLE_VIDEO, ensure_run, make_workspace
    from backend.pipeline import SelectionOptions

    root = tmp_path_factory.mktemp("trust")
    ws = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    try:
        # As `codec-lens app` starts on a fresh session: the bundled sample, computed now (in a
        # worker, then opened by the app from the cache the worker filled).
        first = first_run(ws, video=None)
        clean = {"profile": "clean", "num_sampled_frames": 64}
        # Eight readiness groups of at most 8 candidates, and eight fixed ones (no trace to draw).
        groups = ensure_run(ws, SAMPLE_VIDEO, SelectionOptions(**clean, max_group_frames=8))
        fixed = ensure_run(ws, SAMPLE_VIDEO, SelectionOptions(**clean, grouping_mode="fixed", group_size=8))
        clip = encode_clip(ws.output_root / "other" / "moving", codec="h264", frames=48, gop=24)
        other = ensure_run(ws, clip, SelectionOptions(profile="clean", num_sampled_frames=16))
        with served_app(ws, run_id=first, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield {"ws": ws, "url": url, "first": first, "groups": groups, "fixed": fixed, "other": other}
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(app: dict[str, Any]) -> Iterator[Any]:
    with open_inspector_page(app["url"], height=HEIGHT, width=WIDTH) as pg:
        yield pg


def _text_of(fragment: str) -> str:
    """An HTML fragment as the page's innerText reads it."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _trace_panel(page: Any) -> dict[str, Any]:
    return page.evaluate(TRACE_PANEL_JS)


def _wait_group_shown(page: Any, group: int) -> dict[str, Any]:
    """The readiness panel once the group stepper shows ``group``'s figure (its title or note
    names the group) and no redraw is pending."""
    page.wait_for_function(
        "(g) => { const gd = document.querySelector('#readiness_plot .js-plotly-plot');"
        " if (!gd || !gd._fullLayout) return false;"
        " const t = gd._fullLayout.title && gd._fullLayout.title.text || '';"
        " const n = (gd._fullLayout.annotations || []).map((a) => a.text).join(' ');"
        " return document.querySelector('#group_pick input').value === String(g)"
        "   && (t.startsWith('group ' + g + ':') || n.includes('for group ' + g + ':')); }",
        arg=group,
        timeout=30_000,
    )
    page.wait_for_timeout(300)  # a second react of the same figure would land by now
    return _trace_panel(page)


def _pick_group(page: Any, group: int) -> None:
    page.locator("#group_pick input").click()
    page.locator(f"li[role=option][aria-label='{group}']").click()


def test_a_fresh_session_says_its_first_run_was_computed_now(page: Any, app: dict[str, Any]) -> None:
    summary = page.locator("#summary").inner_text()
    assert open_run_id(page) == app["first"]
    assert "computed at" in summary and " UTC" in summary, summary
    assert "reopened" not in summary, summary


def test_a_stored_run_from_before_the_app_says_it_was_reopened(app: dict[str, Any]) -> None:
    from app.tabs.inspect import summary_of

    ws = app["ws"]
    row = ws.store.get_run(app["first"])
    # As an app started after the run was made reads it: a stored run, reopened from the cache.
    later = row.created_at + timedelta(seconds=1)
    text = summary_of(ws, app["first"], ws.result(app["first"]), app_started_at=later)
    assert f"stored run computed {row.created_at:%Y-%m-%d %H:%M} UTC" in text
    assert re.search(r"pipeline \d+\.\d\d s \(stored run computed .*, reopened from the cache in", text), text
    now = summary_of(ws, app["first"], ws.result(app["first"]), app_started_at=row.created_at)
    assert "reopened" not in now and f"computed at {row.created_at:%H:%M:%S} UTC" in now


@pytest.mark.parametrize("how", ["dropdown", "bracket key"])
def test_every_group_shows_its_readiness_trace(page: Any, app: dict[str, Any], how: str) -> None:
    """Issue 27 item 1: the trace collapsed to 2 px and showed nothing on every second group."""
    ws, run = app["ws"], app["groups"]
    if open_run_id(page) != run:
        open_stored_run(page, run)
    specs = ws.result(run).groups.specs
    assert len(specs) >= 6
    page.locator("#readiness_plot").scroll_into_view_if_needed()
    go_to_candidate(page, 0)
    _wait_group_shown(page, specs[0].group_index)
    for spec in specs[1:]:
        if how == "dropdown":
            _pick_group(page, spec.group_index)
        else:
            page.locator("#summary").click()
            page.keyboard.press("]")
        panel = _wait_group_shown(page, spec.group_index)
        assert panel["height"] > 100 and panel["plotHeight"] > 100, (spec.group_index, panel)
        assert panel["traces"] >= 4, (spec.group_index, panel)


def test_a_group_without_a_trace_shows_why_every_time(page: Any, app: dict[str, Any]) -> None:
    """The figure saying a fixed group has no trace carries no height of its own: it collapsed too."""
    ws, run = app["ws"], app["fixed"]
    open_stored_run(page, run)
    page.locator("#readiness_plot").scroll_into_view_if_needed()
    for spec in ws.result(run).groups.specs[1:5]:
        _pick_group(page, spec.group_index)
        panel = _wait_group_shown(page, spec.group_index)
        assert panel["height"] > 100 and panel["plotHeight"] > 100, (spec.group_index, panel)
        assert any("No readiness trace" in n for n in panel["notes"]), panel


def _layer_controls_box(page: Any) -> dict[str, float]:
    box = page.locator("#layers").bounding_box()
    assert box is not None
    return box


def test_the_readout_and_the_key_map_do_not_move_the_layer_controls(page: Any, app: dict[str, Any]) -> None:
    """Issue 27 item 15: a hover readout or the key map pushed the layer controls ~170 px down."""
    open_stored_run(page, app["groups"])
    go_to_candidate(page, 9)
    page.locator("#frame").scroll_into_view_if_needed()
    page.mouse.move(5, 5)
    before = _layer_controls_box(page)
    frame = page.locator("#frame_img").bounding_box()
    for fx, fy in ((0.4, 0.45), (0.1, 0.1), (0.85, 0.8)):
        page.mouse.move(frame["x"] + frame["width"] * fx, frame["y"] + frame["height"] * fy)
        page.wait_for_function("() => document.querySelector('#block_info').innerText.includes('decision')")
        assert _layer_controls_box(page) == before, (fx, fy)
    page.mouse.click(frame["x"] + frame["width"] * 0.6, frame["y"] + frame["height"] * 0.5)  # a pin
    page.wait_for_function("() => getComputedStyle(document.querySelector('#block_pin')).display === 'block'")
    assert _layer_controls_box(page) == before
    page.locator("#summary").click()
    page.keyboard.press("?")
    page.wait_for_selector("#key_map", state="visible")
    assert _layer_controls_box(page) == before
    screenshot(page, "trust_key_map_over_the_readout.png")
    page.keyboard.press("?")
    page.wait_for_selector("#key_map", state="hidden")
    assert _layer_controls_box(page) == before


def test_a_run_opened_after_an_ab_flip_shows_its_own_frame_and_info(page: Any, app: dict[str, Any]) -> None:
    """Issue 27 item 3: flipped to B, another run's header came with B's frame and info line."""
    ws, run_a, other = app["ws"], app["groups"], app["other"]
    if open_run_id(page) != run_a:
        open_stored_run(page, run_a)
    go_to_candidate(page, 5)
    page.locator("#set_b_btn").click()
    page.locator("#summary").click()
    page.keyboard.press("b")
    page.wait_for_function("() => document.querySelector('#frame_mode').innerText.startsWith('B')")
    open_stored_run(page, other)
    page.wait_for_function(
        "(r) => document.querySelector('#frame_info').innerText.startsWith('candidate ')"
        " && document.querySelector('#summary').innerText.includes('moving.mp4')",
        arg=other,
    )
    src = page.locator("#frame_img").get_attribute("src")
    assert f"run={other}" in src and "f=" not in src, src
    row = int(info_line(page).split(" · ")[0].split()[1])
    from app.tabs.inspect import info_fragment

    page.wait_for_function(
        "(t) => document.querySelector('#frame_info').innerText.trim() === t",
        arg=_text_of(info_fragment(ws, other, row)).strip(),
        timeout=10_000,
    )
    assert page.locator("#frame_mode").inner_text().startswith("A")
    # B is still set: the flip now compares the opened run with it.
    page.locator("#summary").click()
    page.keyboard.press("b")
    page.wait_for_function(
        "(a) => document.querySelector('#frame_img').getAttribute('src').includes('run=' + a)", arg=run_a
    )
    page.keyboard.press("b")
    page.wait_for_function(
        "(r) => document.querySelector('#frame_img').getAttribute('src').includes('run=' + r)", arg=other
    )


def test_a_live_reselection_changes_the_info_line_with_the_frame(page: Any, app: dict[str, Any]) -> None:
    """Issue 27 item 8: the old run's "N kept blocks" stayed on the line under the new frame."""
    from app.tabs.inspect import info_fragment

    ws = app["ws"]
    open_stored_run(page, app["groups"])
    row = 9
    go_to_candidate(page, row)
    box = page.locator("#live_images_per_group input")
    if not box.is_visible():
        page.locator("#live_box").get_by_text("Re-select live").click()
    for value in ("2", "1"):
        before = open_run_id(page)
        old_line = info_line(page).strip()
        page.evaluate(WATCH_FRAMES_JS)
        box.fill(value)
        box.press("Enter")
        page.wait_for_function(
            "(r) => document.querySelector('#run_id textarea, #run_id input').value !== r", arg=before
        )
        new_id = open_run_id(page)
        new_line = _text_of(info_fragment(ws, new_id, row)).strip()
        assert new_line != old_line, "pick another value: both runs read the same at this row"
        page.wait_for_function(
            "(r) => (window.__lensLoads || []).some((l) => l.src.includes('run=' + r))", arg=new_id
        )
        loads = [x for x in page.evaluate("() => window.__lensLoads") if f"run={new_id}" in x["src"]]
        # The moment the new run's frame shows, its line is the new run's.
        assert loads[0]["info"].strip() == new_line, (loads[0], new_line)


def test_a_new_page_opens_the_run_viewed_last(page: Any, app: dict[str, Any]) -> None:
    """Issue 27 item 16: every new page opened the bundled sample."""
    if open_run_id(page) == app["first"]:
        open_stored_run(page, app["other"])
    last = open_run_id(page)
    # Another user's page: a new context of the same browser (one Playwright per test process).
    second = page.context.browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        second.goto(app["url"], timeout=60_000)
        second.wait_for_function(
            "(r) => { const i = document.querySelector('#frame_img');"
            " return i && i.getAttribute('src').includes('run=' + r) && i.complete; }",
            arg=last,
            timeout=60_000,
        )
        assert open_run_id(second) == last
        assert "computed at" in second.locator("#summary").inner_text()
    finally:
        second.close()
