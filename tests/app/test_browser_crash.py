"""Two browser sessions on one app: a decoder crash in one session's run leaves the other stepping frames."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from faults import fault_env
from helpers.paths import REAL_CLIPS
from lens_browser import BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, FIRST_FRAME_JS, screenshot, served_app

pytestmark = BROWSER_MARKS

CLIP = REAL_CLIPS / "real_hevc_bbb_1080p.ts"  # long enough a decode for the other page to step meanwhile
CRASH_LINE = f"{CLIP.name}: the decoder crashed (SIGABRT) during decode; the app keeps running"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any, Path]]:
    """The app whose workers abort when a job reaches the decode stage (the test's fault, which
    each worker the pool spawns inherits: tests/faults/sitecustomize.py)."""
    from app.main import stop_pool
    from app.workspace import SAMPLE_VIDEO, ensure_run, make_workspace

    root = tmp_path_factory.mktemp("crash")
    ws = make_workspace(
        session_db=root / "sessions.duckdb", output_dir=root / "work", input_dirs=(REAL_CLIPS,)
    )
    run_id = ensure_run(ws, SAMPLE_VIDEO)  # in this process: the fault is for the workers only
    with pytest.MonkeyPatch.context() as mp:
        gate = root / "abort-now"  # the worker holds at decode until the test creates it
        # Set while the app runs: a worker spawned to replace a dead one has the fault too.
        for name, value in fault_env(f"decode@{gate}").items():
            mp.setenv(name, value)
        with served_app(ws, run_id=run_id, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            try:
                yield url, ws, gate
            finally:
                stop_pool(ws)
    ws.close()


@contextmanager
def two_sessions(url: str) -> Iterator[tuple[Any, Any]]:
    """Two pages on ``url`` in one headless Chromium, each in its own context: two app sessions."""
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            pages = []
            for _ in range(2):
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.goto(url, timeout=60_000)
                page.wait_for_function(FIRST_FRAME_JS, timeout=60_000)
                pages.append(page)
            yield pages[0], pages[1]
        finally:
            browser.close()


def _frame(page: Any) -> tuple[str, str]:
    return page.locator("#frame_info").inner_text(), page.locator("#frame img").get_attribute("src")


def _step(page: Any) -> None:
    """→ once; waits until the frame image and its info line have moved on."""
    before_info, before_src = _frame(page)
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "([info, src]) => document.querySelector('#frame_info').innerText !== info"
        " && document.querySelector('#frame img').getAttribute('src') !== src",
        arg=[before_info, before_src],
        timeout=15_000,
    )


def test_a_crash_in_one_session_is_its_error_only(app: tuple[str, Any, Path]) -> None:
    url, ws, gate = app
    with two_sessions(url) as (page_a, page_b):
        page_b.locator("#summary").click()  # keys go to the viewer, not an input
        page_a.get_by_role("tab", name="Run").click()
        page_a.locator("#video_path textarea, #video_path input").first.fill(str(CLIP))
        page_a.locator("#run_btn").click()
        crash = page_a.get_by_text("the decoder crashed", exact=False)
        # B steps frames while A's job is in a worker (held at decode by the gate), then the
        # worker aborts and B steps on.
        steps_while_pending = 0
        deadline = time.monotonic() + 120
        while steps_while_pending < 3 and time.monotonic() < deadline:
            _step(page_b)
            steps_while_pending += ws.pool.pending() > 0
        assert steps_while_pending == 3, "A's job never reached the pool while B stepped"
        assert crash.count() == 0, "the worker aborted before the gate opened"
        gate.touch()
        crash.first.wait_for(state="visible", timeout=120_000)
        # One line in A's status line, kept there, and one toast with it (issue 27, item 4).
        page_a.wait_for_function(
            "() => document.querySelector('#run_status').innerText.includes('the decoder crashed')",
            timeout=30_000,
        )
        assert page_a.locator("#run_status").inner_text().strip() == f"Error: {CRASH_LINE}"
        assert page_a.locator(".toast-body").count() == 1
        assert page_a.locator(".toast-body").first.inner_text().strip().endswith(CRASH_LINE)
        screenshot(page_a, "crash_session_a.png")
        for _ in range(3):
            _step(page_b)
        assert page_b.get_by_text("the decoder crashed", exact=False).count() == 0
        for page in (page_a, page_b):
            assert page.get_by_text("Connection to the server was lost", exact=False).count() == 0
        screenshot(page_b, "crash_session_b.png")
        # The server answers, the crashed run is stored as failed, and A can step and run again.
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        failed = [r for r in ws.store.list_runs() if r.video_path == str(CLIP)]
        assert [r.status for r in failed] == ["failed"] and "interrupted" in (failed[0].error or "")
        assert ws.pool.pending() == 0
        deadline = time.monotonic() + 120
        while None in ws.pool.worker_pids() and time.monotonic() < deadline:
            time.sleep(0.1)  # the pool replaces the dead worker
        assert None not in ws.pool.worker_pids()
        page_a.get_by_role("tab", name="Inspect").click()
        page_a.locator("#summary").click()
        _step(page_a)
