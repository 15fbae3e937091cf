"""The browser helpers' own paths that the app tests only take when Chromium misbehaves."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import cv2
import numpy as np
import pytest
from lens_browser import ARTIFACTS, CHROMIUM, FIRST_FRAME_JS, open_inspector_page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="Debian chromium not installed; run scripts/setup.sh as root",
    ),
]

_PAGE = b'<html><body><img id="frame_img" src="/frame.png"></body></html>'


@pytest.fixture
def stalls_once() -> Iterator[tuple[str, dict[str, int]]]:
    """A local page whose first ``hits["refuse"]`` (1) frame requests are refused, so that
    browser's frame never shows; later ones are answered."""
    ok, png = cv2.imencode(".png", np.full((8, 8, 3), 200, np.uint8))
    assert ok
    hits = {"/": 0, "/frame.png": 0, "refuse": 1}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits[self.path] = hits.get(self.path, 0) + 1
            if self.path == "/frame.png" and hits[self.path] <= hits["refuse"]:
                self.send_error(503)
                return
            body, kind = (bytes(png), "image/png") if self.path == "/frame.png" else (_PAGE, "text/html")
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", hits
    finally:
        server.shutdown()
        server.server_close()


def test_a_stalled_first_frame_is_retried_in_a_fresh_browser(stalls_once: tuple[str, dict[str, int]]) -> None:
    url, hits = stalls_once
    shot = ARTIFACTS / "first_frame_stall.png"
    shot.unlink(missing_ok=True)
    with open_inspector_page(url, timeout_ms=3_000) as page:
        assert page.evaluate(FIRST_FRAME_JS) == 8
    assert (hits["/"], hits["/frame.png"]) == (2, 2), hits  # one page load per browser
    assert shot.stat().st_size > 0  # the stalled attempt left its screenshot


def test_a_frame_that_never_arrives_fails_after_the_retry(stalls_once: tuple[str, dict[str, int]]) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    url, hits = stalls_once
    hits["refuse"] = 1_000  # every frame request is refused
    with pytest.raises(PlaywrightTimeout):
        with open_inspector_page(url, timeout_ms=1_500):
            pass
    assert hits["/"] == 2
