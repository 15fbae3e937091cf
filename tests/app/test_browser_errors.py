"""Refused inputs in headless Chromium: the reason stays in the tab's status line, no other
component shows Gradio's error state, one toast per refusal (issue 27, items 4 and 22)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.luma_clip_pairs import make_pair
from lens_browser import CHROMIUM, open_page, screenshot, served_app

# Every refusal here happens before any decode: no codec-video-prep needed.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="Debian chromium not installed; run scripts/setup.sh as root"
    ),
]

# Gradio marks an output of an event that raised gr.Error with a red "Error" pill in its status
# tracker (measured on 6.31: ``[data-testid=status-tracker] span.error``); the toasts are apart.
ERROR_PILLS_JS = """() => [...document.querySelectorAll('[data-testid=status-tracker] .error')]
  .map((e) => (e.closest('[id]') || {}).id || '?')"""
TOASTS_JS = "() => document.querySelectorAll('.toast-body').length"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from app.workspace import make_workspace
    from backend.store import write_summary_parquet

    root = tmp_path_factory.mktemp("errors_app")
    ws = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    make_pair(ws.output_root / "clips", "a", pattern="moving", gain=0.004, seed=1)
    (root / "outside.mp4").write_bytes((ws.output_root / "clips" / "a.test.mp4").read_bytes())
    rows = [
        {"path": f"/d/{n}.mp4", "rel_path": f"{n}.mp4", "status": "done", "valid_tokens": 100 * (i + 1)}
        for i, n in enumerate("abc")
    ]
    (ws.output_root / "batch").mkdir()
    write_summary_parquet(rows, ws.output_root / "batch" / "batch.parquet")
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def page(workspace, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with (
        served_app(workspace, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url,
        open_page(url, height=1400) as pg,
    ):
        pg.get_by_role("tab", name="Luma bias").wait_for(timeout=60_000)
        yield pg


def _type(page, elem_id: str, text: str) -> None:
    page.locator(f"#{elem_id} textarea, #{elem_id} input").first.fill(text)


def _wait_status(page, elem_id: str, text: str) -> None:
    page.wait_for_function(
        "([id, text]) => (document.querySelector('#' + id)?.innerText || '').includes(text)",
        arg=[elem_id, text],
        timeout=60_000,
    )


def _close_toasts(page) -> None:
    for close in page.locator(".toast-close").all():
        close.click()
    page.wait_for_function(f"() => ({TOASTS_JS})() === 0", timeout=10_000)


def _traces(page, elem_id: str) -> list[str]:
    return page.evaluate(
        "(id) => { const gd = document.querySelector('#' + id + ' .js-plotly-plot');"
        " return gd && gd.data ? gd.data.map((t) => t.name) : []; }",
        elem_id,
    )


def test_luma_bias_keeps_the_reason_and_leaves_the_analysis_shown(page, workspace) -> None:
    page.get_by_role("tab", name="Luma bias").click()
    page.wait_for_selector("#luma_analyze", timeout=60_000)
    clips = workspace.output_root / "clips"
    _type(page, "luma_reference", str(clips / "a.reference.mp4"))
    _type(page, "luma_test", str(clips / "a.test.mp4"))
    page.locator("#luma_analyze").click()
    _wait_status(page, "luma_status", "Analysed a.test.mp4")
    page.wait_for_function(
        "() => document.querySelector('#luma_bias_plot .js-plotly-plot')?.data?.length > 0", timeout=60_000
    )
    traces, summary = _traces(page, "luma_bias_plot"), page.locator("#luma_summary").inner_text()
    # A test file outside the allowed folders.
    _type(page, "luma_test", "../outside.mp4")
    page.locator("#luma_analyze").click()
    _wait_status(page, "luma_status", "is outside the allowed folders")
    assert "../outside.mp4" in page.locator("#luma_status").inner_text()
    assert page.evaluate(ERROR_PILLS_JS) == []
    assert page.evaluate(TOASTS_JS) == 1
    # The analysis shown before is still shown, unmarked.
    assert _traces(page, "luma_bias_plot") == traces
    assert page.locator("#luma_summary").inner_text() == summary
    screenshot(page, "errors_luma_outside.png")
    # The toast fades (Gradio's 10 s); the reason stays.
    page.wait_for_function(f"() => ({TOASTS_JS})() === 0", timeout=20_000)
    assert "is outside the allowed folders" in page.locator("#luma_status").inner_text()
    assert page.evaluate(ERROR_PILLS_JS) == []


def test_the_run_tab_keeps_the_reason_in_its_status(page, workspace) -> None:
    page.get_by_role("tab", name="Run").click()
    page.wait_for_selector("#run_btn", timeout=60_000)
    run_id = page.locator("#run_id textarea, #run_id input").first.input_value()
    _type(page, "video_path", str(workspace.output_root.parent / "outside.mp4"))
    page.locator("#run_btn").click()
    _wait_status(page, "run_status", "is outside the allowed folders")
    status = page.locator("#run_status").inner_text()
    assert status.startswith("Error:") and "outside.mp4" in status
    assert page.evaluate(ERROR_PILLS_JS) == []
    assert page.locator("#run_id textarea, #run_id input").first.input_value() == run_id
    _type(page, "video_path", str(workspace.output_root / "missing.mp4"))
    page.locator("#run_btn").click()
    _wait_status(page, "run_status", "no such video file")
    assert page.evaluate(ERROR_PILLS_JS) == []
    _close_toasts(page)


def test_a_refused_filter_says_why_clears_the_result_and_toasts_once(page) -> None:
    page.get_by_role("tab", name="Dataset").click()
    _type(page, "ds_path", "batch")
    page.locator("#ds_open_path").click()
    _wait_status(page, "ds_status", "3 videos")
    page.wait_for_function(
        "() => document.querySelectorAll('#ds_table [role=row]').length === 4", timeout=30_000
    )
    _close_toasts(page)
    _type(page, "ds_where", "valid_tokens > (SELECT count(*) FROM runs)")
    page.locator("#ds_apply").click()
    _wait_status(page, "ds_status", "it may read only the summary table")
    assert page.locator("#ds_status").inner_text().startswith("Error:")
    # The last result is gone, not shown under a condition that was refused.
    page.wait_for_function(
        "() => document.querySelectorAll('#ds_table [role=row]').length <= 1", timeout=10_000
    )
    assert page.locator("#ds_hist .js-plotly-plot").count() == 0
    assert page.evaluate(ERROR_PILLS_JS) == []
    assert page.evaluate(TOASTS_JS) == 1
    screenshot(page, "errors_dataset_filter.png")
    # A good condition brings the rows back and replaces the reason.
    _type(page, "ds_where", "valid_tokens >= 200")
    page.locator("#ds_apply").click()
    _wait_status(page, "ds_status", "3 videos")
    page.wait_for_function(
        "() => document.querySelectorAll('#ds_table [role=row]').length === 3", timeout=30_000
    )
    assert "Error" not in page.locator("#ds_status").inner_text()
