"""Shared pieces of the browser tests: the real app served on a free port, a headless Chromium page."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO_ROOT

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

BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.needs_cvp,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="Debian chromium not installed; run scripts/setup.sh as root"
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served_app(ws: Any, *, run_id: str | None = None, gradio_tmp: Path | None = None) -> Iterator[str]:
    """The real app (``app.main.build_app``) over ``ws`` on 127.0.0.1; yields its URL."""
    if gradio_tmp is not None:
        os.environ["GRADIO_TEMP_DIR"] = str(gradio_tmp)
    from app.main import build_app
    from app.server import serve

    demo = build_app(ws, run_id=run_id)
    port = free_port()
    serve(demo, ws, host="127.0.0.1", port=port, block=False)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close(verbose=False)
        from app.main import stop_pool

        stop_pool(ws)  # the worker processes build_app started


@contextmanager
def open_page(
    url: str, *, height: int = 1000, width: int = 1400, accept_downloads: bool = False
) -> Iterator[Any]:
    """A page on ``url`` in headless Debian Chromium; fails if it requested anything off the machine."""
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(
            viewport={"width": width, "height": height}, accept_downloads=accept_downloads
        )
        external: list[str] = []
        page.on(
            "request",
            lambda r: (
                None if r.url.startswith(("http://127.0.0.1", "data:", "blob:")) else external.append(r.url)
            ),
        )
        try:
            page.goto(url, timeout=60_000)
            yield page
            assert not external, f"the page reached outside the machine: {external[:3]}"
        finally:
            # Also when a test or fixture failed: a renderer left behind keeps a CPU busy
            # and slows every later test.
            browser.close()


def anamorphic_clip(path: Path) -> Path:
    """36 frames of 352×288 H.264 with pixel aspect 16:11 (a PAL-like anamorphic clip)."""
    import av
    from helpers.clips import render_frame

    from native import encode_frame

    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=24, options={"g": "12", "crf": "28"})
        stream.width, stream.height, stream.pix_fmt = 352, 288, "yuv420p"
        stream.codec_context.sample_aspect_ratio = Fraction(16, 11)
        for i in range(36):
            frame = av.VideoFrame.from_ndarray(render_frame(i, width=352, height=288), format="rgb24")
            encode_frame(out, stream, frame)
        encode_frame(out, stream, None)
    return path


FIRST_FRAME_JS = (
    "() => { const i = document.querySelector('#frame_img'); return i && i.complete && i.naturalWidth; }"
)


@contextmanager
def open_inspector_page(url: str, *, timeout_ms: int = 30_000, **kwargs: Any) -> Iterator[Any]:
    """``open_page`` once the inspector shows its first frame.

    A page whose first frame never arrives is retried once in a fresh browser: on this
    machine an intermittent Chromium stall (renderer and zygote spinning, no frame request
    answered, about one full browser run in eight) is not about the app. The stalled
    attempt leaves a screenshot in artifacts/screenshots/ for whoever looks next.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in (1, 2):
        with open_page(url, **kwargs) as page:
            try:
                page.wait_for_function(FIRST_FRAME_JS, timeout=timeout_ms)
            except PlaywrightTimeout:
                if attempt == 2:
                    raise
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "first_frame_stall.png"), timeout=10_000)
                continue
            yield page
            return


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept as a test artefact (artifacts/screenshots/, not in git)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path


def info_line(page: Any) -> str:
    """The inspector's info line (``candidate R · frame F · …``)."""
    return str(page.locator("#frame_info").inner_text())


def shown_frame(page: Any) -> int:
    """The frame_index the info line names."""
    return int(info_line(page).split(" · ")[1].split()[1])


def wait_candidate(page: Any, row: int, *, timeout_ms: int = 30_000) -> None:
    """Wait until the info line shows candidate ``row``."""
    page.wait_for_function(
        f"() => document.querySelector('#frame_info').innerText.startsWith('candidate {row} ')",
        timeout=timeout_ms,
    )


def go_to_candidate(page: Any, row: int) -> None:
    """Move the candidate slider to ``row`` and wait until the info line shows it."""
    page.locator("#frame_slider input[type=range]").fill(str(row))
    wait_candidate(page, row)


def open_stored_run(page: Any, run_id: str, *, timeout_ms: int = 60_000) -> None:
    """Open stored run ``run_id`` from the Run tab's sessions panel and come back to the Inspect
    tab once the viewer shows one of its frames."""
    page.get_by_role("tab", name="Run").click()
    page.locator("#open_pick input").click()
    page.locator("#open_pick input").fill(run_id)
    page.locator("[role=option]", has_text=re.compile(re.escape(run_id) + " · ")).first.click()
    page.locator("#open_btn").click()
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_function(
        "(r) => { const i = document.querySelector('#frame_img');"
        " return i && i.getAttribute('src').includes('run=' + r) && i.complete && i.naturalWidth; }",
        arg=run_id,
        timeout=timeout_ms,
    )


def open_run_id(page: Any) -> str:
    """The id of the run the page has open (the hidden ``#run_id`` box)."""
    return str(page.locator("#run_id textarea, #run_id input").first.input_value())
