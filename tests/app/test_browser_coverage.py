"""The coverage audit in Chromium: the timeline's never-observed bands, the staleness layer toggled."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lens_browser import ARTIFACTS, BROWSER_MARKS, go_to_candidate, open_inspector_page, served_app

pytestmark = BROWSER_MARKS

WIDTH, HEIGHT = 1600, 1000

# The never-observed trace of the drawn timeline: its index, the spans it holds and the bars
# plotly drew for it (a bar each, all in one trace), and the legend's entries.
_BANDS_JS = """
() => {
  const gd = document.querySelector('#timeline .js-plotly-plot');
  if (!gd || !gd._fullData) return null;
  const index = gd._fullData.findIndex((t) => t.name === 'never observed');
  if (index < 0) return {index};
  const group = [...gd.querySelectorAll('.barlayer .trace')]
    .find((el) => el.__data__ && el.__data__[0] && el.__data__[0].trace.index === index);
  const drawn = group ? [...group.querySelectorAll('.point path')]
    .filter((p) => p.getBoundingClientRect().width > 0).length : 0;
  return {index, spans: gd._fullData[index].meta.spans, drawn,
          legend: [...gd.querySelectorAll('.legendtext')].map((t) => t.textContent)};
}
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from app.workspace import SAMPLE_VIDEO, ensure_run, make_workspace
    from backend.pipeline import SelectionOptions

    root = tmp_path_factory.mktemp("coverage")
    ws = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    try:
        # 64 of the sample's frames sampled: the frames between them hold no token.
        run_id = ensure_run(ws, SAMPLE_VIDEO, SelectionOptions(num_sampled_frames=64))
        with served_app(ws, run_id=run_id, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield {"ws": ws, "url": url, "run_id": run_id}
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(app: dict[str, Any]) -> Iterator[Any]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open_inspector_page(app["url"], height=HEIGHT, width=WIDTH) as pg:
        yield pg


def _frame_src(page: Any) -> str:
    return str(page.locator("#frame_img").get_attribute("src"))


def _wait_frame(page: Any, *, staleness: bool) -> None:
    """Wait until the viewer's image names the staleness layer (or not) and has loaded."""
    page.wait_for_function(
        "(on) => { const i = document.querySelector('#frame_img'); const l = new URL(i.src).searchParams"
        ".get('l').split(','); return l.includes('staleness') === on && i.complete && i.naturalWidth > 0; }",
        arg=staleness,
        timeout=30_000,
    )


def test_the_timeline_shades_the_never_observed_spans(page: Any, app: dict[str, Any]) -> None:
    from backend.audit import cached_run_audit

    audit = cached_run_audit(app["ws"].result(app["run_id"])).coverage
    spans = audit.never_observed_spans.tolist()
    assert spans, "the run should leave frames without a token"
    page.locator("#timeline").scroll_into_view_if_needed()
    page.wait_for_function(
        f"() => {{ const b = ({_BANDS_JS})(); return b && b.index >= 0; }}", timeout=60_000
    )
    bands = page.evaluate(_BANDS_JS)
    assert bands["spans"] == spans
    assert bands["drawn"] == len(spans)  # one bar per span, all in the one trace
    assert "never observed" in bands["legend"]
    # The hover names the span's frames and seconds.
    hover = page.evaluate(
        "(i) => { const gd = document.querySelector('#timeline .js-plotly-plot');"
        " Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: 0}]);"
        " return gd.querySelector('.hoverlayer').textContent; }",
        bands["index"],
    )
    first, last = spans[0]
    frames = f"frame {first}" if first == last else f"frames {first}–{last}"
    assert f"never observed: {frames} (" in hover and f"{audit.span_secs[0]:.3f} s)" in hover
    summary = page.locator("#summary").inner_text()
    assert f"Coverage: {audit.observed_frames} of {audit.frames} frames observed" in summary
    page.locator("#timeline").screenshot(path=str(ARTIFACTS / "inspector_never_observed.png"))


def test_the_staleness_layer_toggles_with_its_colour_bar_and_frames_step(
    page: Any, app: dict[str, Any]
) -> None:
    from backend.audit import cached_run_audit

    top = cached_run_audit(app["ws"].result(app["run_id"])).coverage.video_max_staleness_frames
    go_to_candidate(page, 5)
    page.evaluate("() => window.scrollTo(0, 0)")
    _wait_frame(page, staleness=False)
    plain = _frame_src(page)
    assert page.locator("#heat_legend").inner_text().strip() == ""
    page.locator("#layers label", has_text="staleness").click()
    _wait_frame(page, staleness=True)
    page.wait_for_function(
        "() => document.querySelector('#heat_legend').innerText.includes('Staleness')", timeout=30_000
    )
    legend = page.locator("#heat_legend").inner_text()
    assert f"{top} frames = the video's highest" in legend and "0 = covered in this frame" in legend
    # The server drew another picture for the layer.
    sizes = page.evaluate(
        "async (urls) => Promise.all(urls.map(async (u) =>"
        " (await (await fetch(u)).arrayBuffer()).byteLength))",
        [plain, _frame_src(page)],
    )
    assert sizes[0] > 0 and sizes[1] > 0 and sizes[0] != sizes[1]
    page.locator("#frame").screenshot(path=str(ARTIFACTS / "inspector_staleness.png"))
    # Frame steps keep the layer on.
    page.locator("#summary").click()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('#frame_info').innerText.startsWith('candidate 6 ')", timeout=30_000
    )
    _wait_frame(page, staleness=True)
    assert "row=6" in _frame_src(page)
    page.locator("#layers label", has_text="staleness").click()  # back off
    _wait_frame(page, staleness=False)
    page.wait_for_function(
        "() => !document.querySelector('#heat_legend').innerText.includes('Staleness')", timeout=30_000
    )


def test_the_coverage_panel_sweeps_the_open_runs_budgets(page: Any, app: dict[str, Any]) -> None:
    panel = page.locator("#coverage_panel")
    panel.scroll_into_view_if_needed()
    panel.get_by_text("Coverage and budget sweep").first.click()
    page.locator("#coverage_btn").click()
    page.wait_for_function(
        "() => { const gd = document.querySelector('#coverage_plot .js-plotly-plot');"
        " return gd && gd._fullData && gd._fullData.some((t) => t.name === 'coverage'); }",
        timeout=30_000,
    )
    box = page.locator("#sweep_budgets textarea, #sweep_budgets input").first
    box.fill("1000, 3000, 6000")
    page.locator("#sweep_btn").click()
    page.wait_for_function(
        "() => document.querySelector('#sweep_status').innerText.includes('at 3 budgets')", timeout=60_000
    )
    cells = """() => [...document.querySelectorAll('#sweep_table [role=row]')].slice(1).map((r) =>
      [...r.querySelectorAll('[role=gridcell]')].map((c) => c.innerText.trim()))"""
    page.wait_for_function(f"() => ({cells})().length === 4", timeout=30_000)
    rows = page.evaluate(cells)
    assert rows[0][0] == "1000" and int(rows[0][1]) <= 1000 and rows[3][0] == "own", rows
    page.wait_for_function(
        "() => { const gd = document.querySelector('#sweep_plot .js-plotly-plot');"
        " return gd && gd._fullData"
        " && gd._fullData.filter((t) => t.mode === 'lines+markers').length === 4; }",
        timeout=30_000,
    )
    page.locator("#coverage_panel").screenshot(path=str(ARTIFACTS / "coverage_panel.png"))
    # A budget below one anchor frame: one line, the table left as it was.
    box.fill("10")
    page.locator("#sweep_btn").click()
    page.get_by_text("Invalid token budget (10)").first.wait_for(timeout=30_000)
    assert page.evaluate(cells) == rows
