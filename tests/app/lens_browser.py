"""Shared pieces of the browser tests: the real app served on a free port, a headless Chromium page."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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

BROWSER_MARKS = [
    pytest.mark.browser,
    requires_cvp,
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
    from app.main import build_app, serve

    demo = build_app(ws, run_id=run_id)
    port = free_port()
    serve(demo, ws, host="127.0.0.1", port=port, block=False)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close(verbose=False)


@contextmanager
def open_page(url: str, *, height: int = 1000, accept_downloads: bool = False) -> Iterator[Any]:
    """A page on ``url`` in headless Debian Chromium; fails if it requested anything off the machine."""
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": height}, accept_downloads=accept_downloads)
        external: list[str] = []
        page.on(
            "request",
            lambda r: (
                None if r.url.startswith(("http://127.0.0.1", "data:", "blob:")) else external.append(r.url)
            ),
        )
        page.goto(url, timeout=60_000)
        yield page
        assert not external, f"the page reached outside the machine: {external[:3]}"
        browser.close()


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept as a test artefact (artifacts/screenshots/, not in git)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path
