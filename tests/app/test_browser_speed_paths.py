"""The fast paths of issue 27 items 11 and 12 in headless Debian Chromium: keyframe and group jumps, plot
clicks and Compare-tab steps are found and drawn by the page (the frame and pane routes), as a frame step is,
and show what the server's navigation says they should. Timings are the bench's (bench/browser.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers.compare_clips import make_comparison
from lens_browser import BROWSER_MARKS, go_to_candidate, info_line, open_inspector_page, served_app

pytestmark = BROWSER_MARKS

PANES = 4
# Resolves once the frame image has a new src, loaded: meanwhile every request the page made is
# listed, so a test can tell a page-side jump from one that asked Gradio's queue.
WATCH_JS = """
([sel, before]) => new Promise((resolve) => {
  performance.clearResourceTimings();
  const t0 = performance.now();
  const check = () => {
    const imgs = sel.map((s) => document.querySelector(s));
    const done = imgs.every((im, k) => im && im.getAttribute('src') !== before[k] && im.complete);
    if (done) {
      resolve(performance.getEntriesByType('resource').map((e) => e.name));
    } else if (performance.now() - t0 > 15000) resolve(null);
    else setTimeout(check, 2);
  };
  check();
})
"""


@pytest.fixture(scope="module")
def app(real_clips, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from app.workspace import SAMPLE_VIDEO, Workspace, ensure_run
    from backend.pipeline import SelectionOptions

    work = tmp_path_factory.mktemp("speed_paths")
    db = work / "sessions.duckdb"
    make_comparison(db, real_clips / "real_h264_flower_timelapse.mp4")
    ws = Workspace(store_path=db, input_roots=(real_clips, SAMPLE_VIDEO.parent), output_root=work / "out")
    try:
        # Nine readiness groups of at most 8 candidates; keyframes 0 and 90 moved to candidates 0 and 45.
        options = SelectionOptions(profile="clean", num_sampled_frames=75, max_group_frames=8)
        run_id = ensure_run(ws, SAMPLE_VIDEO, options)
        with served_app(ws, run_id=run_id, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield {"ws": ws, "url": url, "run_id": run_id}
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(app: dict[str, Any]) -> Iterator[Any]:
    with open_inspector_page(app["url"], height=1000, width=1600) as pg:
        yield pg


def _src(page: Any, sel: str) -> str | None:
    return page.locator(sel).first.get_attribute("src")


def _press_and_watch(page: Any, key: str, images: list[str]) -> list[str]:
    """Press ``key`` and return the requests the page made until ``images`` show new frames."""
    before = [_src(page, s) for s in images]
    page.evaluate("(a) => { window.__watch = (" + WATCH_JS + ")(a); }", [images, before])
    page.keyboard.press(key)
    asked = page.evaluate("() => window.__watch")
    assert asked is not None, f"{key}: {images} showed no new frame in 15 s"
    return asked


def _no_queue(asked: list[str]) -> None:
    """The page showed the frame without a Gradio backend event (no queue/join before it)."""
    assert not [u for u in asked if "queue/join" in u], asked


def _candidate(page: Any) -> int:
    return int(info_line(page).split(" · ")[0].split()[1])


def _wait_row(page: Any, row: int) -> None:
    page.wait_for_function(
        f"() => document.querySelector('#frame_info').innerText.startsWith('candidate {row} ')",
        timeout=15_000,
    )


def _readiness_group(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """() => {
          const gd = document.querySelector('#readiness_plot .js-plotly-plot');
          const title = gd && gd.layout && gd.layout.title;
          return {title: title ? (title.text || String(title)) : '',
                  rows: gd && gd.layout.meta ? gd.layout.meta.group_rows : null,
                  pick: document.querySelector('#group_pick input').value};
        }"""
    )


def test_group_jumps_show_the_next_group_its_info_line_and_then_its_trace(
    page: Any, app: dict[str, Any]
) -> None:
    from views.inspector import navigation

    result = app["ws"].result(app["run_id"])
    specs = {s.start: s for s in result.groups.specs}
    go_to_candidate(page, 0)
    page.locator("#summary").click()  # the keys' focus: the page, not an input
    row = 0
    for key, action in (("]", "next_group"), ("]", "next_group"), ("[", "prev_group"), ("]", "next_group")):
        want = navigation.navigate(result, row, action)
        assert want != row
        asked = _press_and_watch(page, key, ["#frame_img"])
        _no_queue(asked)
        assert f"row={want}&" in _src(page, "#frame_img")
        _wait_row(page, want)
        spec = specs[want]
        frame = int(result.candidates.frame_indices[want])
        assert f" · frame {frame} · " in info_line(page)
        assert f" · group {spec.group_index} · " in info_line(page)
        # Then, once the viewer rests, the stepper shows that group's readiness trace.
        page.wait_for_function(
            f"() => document.querySelector('#group_pick input').value === '{spec.group_index}'",
            timeout=15_000,
        )
        page.wait_for_function(
            "(g) => { const gd = document.querySelector('#readiness_plot .js-plotly-plot');"
            " const t = gd && gd.layout && gd.layout.title;"
            " return !!t && (t.text || '').startsWith('group ' + g + ':'); }",
            arg=spec.group_index,
            timeout=15_000,
        )
        shown = _readiness_group(page)
        assert shown["rows"] == [spec.start, spec.end], shown
        # The groups table marks the viewed group's row.
        marked = page.locator("#groups_table tr.lens-current").get_attribute("data-group")
        assert marked == str(spec.group_index)
        row = want


def test_keyframe_jumps_land_where_the_server_says(page: Any, app: dict[str, Any]) -> None:
    from views.inspector import navigation

    result = app["ws"].result(app["run_id"])
    keys = navigation.keyframe_rows(result)
    assert keys.size >= 2, keys
    go_to_candidate(page, 1)
    page.locator("#summary").click()
    row = 1
    for key, action in (("Shift+ArrowRight", "next_key"), ("Shift+ArrowLeft", "prev_key")):
        want = navigation.navigate(result, row, action)
        assert want != row
        asked = _press_and_watch(page, key, ["#frame_img"])
        _no_queue(asked)
        _wait_row(page, want)
        assert f" · frame {int(result.candidates.frame_indices[want])} · " in info_line(page)
        row = want
    # At the first keyframe a further Shift+← leads nowhere: the viewer stays.
    assert navigation.navigate(result, row, "prev_key") == row
    page.keyboard.press("Shift+ArrowLeft")
    page.wait_for_timeout(300)
    assert _candidate(page) == row
    # The visible buttons jump the same way.
    page.locator("#step_next_key").click()
    _wait_row(page, navigation.navigate(result, row, "next_key"))


def test_a_far_timeline_click_shows_the_clicked_candidate(page: Any, app: dict[str, Any]) -> None:
    result = app["ws"].result(app["run_id"])
    fids = result.candidates.frame_indices.astype(np.int64)
    go_to_candidate(page, 0)
    page.locator("#timeline").scroll_into_view_if_needed()
    page.wait_for_function(
        "() => !!(document.querySelector('#timeline .js-plotly-plot') || {}).__lensClick", timeout=30_000
    )
    total = result.info.total_frames
    for f in (0.85 * (total - 1), 0.15 * (total - 1), 0.6 * (total - 1)):
        point = page.evaluate(
            """(f) => {
              const gd = document.querySelector('#timeline .js-plotly-plot');
              const xa = gd._fullLayout.xaxis, size = gd._fullLayout._size, r = gd.getBoundingClientRect();
              const x = Math.round(r.left + xa._offset + xa.c2p(f));
              return {x: x, y: Math.round(r.top + size.t + size.h * 0.5), f: xa.p2c(x - r.left - xa._offset)};
            }""",
            float(f),
        )
        hit = int(np.floor(point["f"] + 0.5))
        want = int(np.argmin(np.abs(fids - hit)))
        before = _src(page, "#frame_img")
        page.evaluate("(a) => { window.__watch = (" + WATCH_JS + ")(a); }", [["#frame_img"], [before]])
        page.mouse.click(point["x"], point["y"])
        asked = page.evaluate("() => window.__watch")
        assert asked is not None, f"a click at frame {hit} showed no new frame"
        _no_queue(asked)
        _wait_row(page, want)
        assert f" · frame {int(fids[want])} · " in info_line(page)
    page.locator("#frame").scroll_into_view_if_needed()


def test_the_frame_route_renders_jump_targets_ahead(app: dict[str, Any]) -> None:
    """After a frame is asked for, the next and previous group starts and keyframes are rendered
    before anyone asks (the prefetcher), so a jump finds its frame ready, as a step does."""
    from app.tabs import inspect
    from views.inspector import navigation
    from views.inspector.frame_cache import JpegCache

    ws, run = app["ws"], app["run_id"]
    result = ws.result(run)
    cache = JpegCache(budget_bytes=64 << 20, idle_secs=0.0)
    view = inspect.ViewSettings(["kept", "anchor", "bad"], 0.5, "turbo", "frame", "block")
    row = int(navigation.group_start_rows(result)[1]) + 1
    inspect.render_jpeg(ws, cache, inspect.FrameRequest(run, row, view))
    assert cache.wait_idle(30.0)
    targets = {
        navigation.navigate(result, row, a) for a in ("next_group", "prev_group", "next_key", "prev_key")
    }
    opts = view.options()
    for target in targets - {row}:
        assert (run, target, opts, "") in cache, target


# --------------------------------------------------------------------------- the Compare tab


@pytest.fixture(scope="module")
def compare_page(page: Any) -> Any:
    page.get_by_role("tab", name="Compare codecs").click()
    page.wait_for_selector(f"#cmp_pane_{PANES - 1} img", timeout=60_000)
    _wait_panes_at(page, 0)
    return page


def _opened(app: dict[str, Any]) -> tuple[Any, Any, str]:
    from app.tabs import compare

    ws = app["ws"]
    cid = compare.choices(ws)[0][1]
    opened = compare.Comparisons(ws)
    return opened, opened.get(cid), cid


def _wait_panes_at(page: Any, frame: int) -> None:
    """Wait until every pane's caption names frame ``frame``."""
    page.wait_for_function(
        "(f) => [0, 1, 2, 3].every((i) =>"
        " document.querySelector('#cmp_info_' + i).innerText.includes(' · frame ' + f + ' · '))",
        arg=frame,
        timeout=15_000,
    )


def _captions(page: Any) -> list[str]:
    return [page.locator(f"#cmp_info_{i}").inner_text().strip() for i in range(PANES)]


def _pane_srcs() -> list[str]:
    return [f"#cmp_pane_{i} img" for i in range(PANES)]


def _want_captions(app: dict[str, Any], position: int, **controls: Any) -> list[str]:
    from app.tabs import compare
    from views import compare as cv

    opened, _, cid = _opened(app)
    frames = compare.panes(opened, cid, position, compare.PaneControls(**controls))
    return [str(c) for c in frames[cv.MAX_PANES :]]


def test_a_compare_step_moves_all_four_panes_with_their_captions(
    compare_page: Any, app: dict[str, Any]
) -> None:
    page = compare_page
    page.locator("#cmp_settings").click()  # focus the page
    layers = ["kept", "anchor", "bad"]
    for position in (1, 2, 3):
        asked = _press_and_watch(page, "ArrowRight", _pane_srcs())
        _no_queue(asked)
        want = _want_captions(app, position, layers=layers, reference="0")
        page.wait_for_function(
            "(w) => w.every((c, i) => document.querySelector('#cmp_info_' + i).innerText.trim() === c)",
            arg=want,
            timeout=15_000,
        )
        assert _captions(page) == want
        for i in range(PANES):
            src = _src(page, f"#cmp_pane_{i} img")
            assert src.startswith("lens/pane?") and f"pos={position}&" in src and f"i={i}&" in src, src


def test_compare_jumps_and_a_metric_click_land_where_the_server_says(
    compare_page: Any, app: dict[str, Any]
) -> None:
    from views import compare as cv

    page = compare_page
    _, o, _ = _opened(app)
    page.locator("#cmp_step_home").click()
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_0').innerText.includes(' · frame 0 · ')", timeout=15_000
    )
    page.locator("#cmp_settings").click()
    position = 0
    for key, action in (("Shift+ArrowRight", "next_key"), ("Shift+ArrowLeft", "prev_key")):
        want = cv.navigate_position(o.results, o.positions, position, action)
        assert want != position
        _no_queue(_press_and_watch(page, key, _pane_srcs()))
        _wait_panes_at(page, int(o.positions[want]))
        position = want
    page.locator("#cmp_step_next_group").click()
    _wait_panes_at(
        page, int(o.positions[cv.navigate_position(o.results, o.positions, position, "next_group")])
    )
    # A click on the metric plots: the position nearest the frame clicked.
    page.locator("#cmp_metrics").scroll_into_view_if_needed()
    point = page.evaluate(
        """() => {
          const gd = document.querySelector('#cmp_metrics .js-plotly-plot');
          const xa = gd._fullLayout.xaxis3, ya = gd._fullLayout.yaxis3, r = gd.getBoundingClientRect();
          return {x: r.left + xa._offset + xa.l2p(19), y: r.top + ya._offset + ya._length / 2};
        }"""
    )
    page.mouse.click(point["x"], point["y"])
    _wait_panes_at(page, 19)


def test_a_pane_route_image_is_the_pane_the_view_draws(compare_page: Any, app: dict[str, Any]) -> None:
    """The pane route sends prepare_pane's image (the frame the Gradio image showed), as JPEG."""
    from app.tabs import compare
    from views import compare as cv
    from views.inspector.frame_cache import JpegCache, encode_jpeg

    page = compare_page
    page.locator("#cmp_diff input").check()
    page.wait_for_function(
        "() => document.querySelector('#cmp_info_1').innerText.includes('vs h264 crf23:')", timeout=15_000
    )
    src = _src(page, "#cmp_pane_2 img")
    query = dict(re.findall(r"([a-z]+)=([^&]*)", src))
    assert query["d"] == "1" and query["i"] == "2"
    got = page.request.get(app["url"] + src).body()
    opened, _, cid = _opened(app)
    controls = compare.PaneControls(layers=["kept", "anchor", "bad"], difference=True, reference="0")
    image = np.asarray(compare.panes(opened, cid, int(query["pos"]), controls)[2])
    assert got == encode_jpeg(image, quality=JpegCache().quality)
    caption = page.locator("#cmp_info_2").inner_text().strip()
    assert caption == compare.panes(opened, cid, int(query["pos"]), controls)[cv.MAX_PANES + 2]
    assert json.loads(page.locator("#cmp_nav textarea, #cmp_nav input").first.input_value())["panes"] == PANES
    page.locator("#cmp_diff input").uncheck()
