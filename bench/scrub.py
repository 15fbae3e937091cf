"""Benchmark: frame-viewer render time at 720p with every layer on, and the browser round trip.

Usage::

    .venv/bin/python bench/scrub.py [--frames 90] [--clicks 30]

Makes a 1280×720 H.264 clip from the bundled sample (upscaled real footage), runs the
clean pipeline with ``max_pixels`` = 1280·720 so frames are processed near 720p, then:
1. server side: ``prepare_frame_layers`` with every layer on (heatmap at video scale,
   patch/block/codec grids, kept and lost blocks, anchor badge, bad frames) for every
   candidate, alone and followed by the JPEG encode Gradio does (PIL, quality 75);
2. browser: the real app in headless Debian Chromium (Playwright); the slider is set to
   random candidates and the time until the new frame image has loaded is measured.
Prints p50/p95 in ms. Targets (issue 4): render p95 ≤ 30 ms, round trip p95 ≤ 150 ms.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from PIL import Image  # noqa: E402

import native  # noqa: E402
from app.main import build_app  # noqa: E402
from app.server import serve  # noqa: E402
from app.workspace import SAMPLE_VIDEO, ensure_run, make_workspace  # noqa: E402
from backend.pipeline import SelectionOptions, run  # noqa: E402
from views.inspector.frame_layers import LayerOptions, prepare_frame_layers  # noqa: E402

ALL_LAYERS = LayerOptions(
    heatmap=True,
    opacity=0.5,
    scale="video",
    patch_grid=True,
    block_grid=True,
    codec_grid=True,
    kept=True,
    lost=True,
    anchor_badge=True,
    bad_frames=True,
)


def make_720p(path: Path, frames: int) -> Path:
    src = native.decode_frames_rgb(SAMPLE_VIDEO, range(frames), out_width=1280, out_height=720)
    with native.VideoWriter(
        path, codec="libx264", width=1280, height=720, fps=30, options={"crf": "20", "g": "60", "bf": "2"}
    ) as writer:
        for i in range(frames):
            writer.write(src[i])
    return path


IN_PAGE_JS = """
(row) => new Promise((resolve) => {
  const input = document.querySelector('#frame_slider input[type=range]');
  const before = document.querySelector('#frame_img').getAttribute('src');
  const t0 = performance.now();
  const check = () => {
    const img = document.querySelector('#frame_img');
    if (img && img.getAttribute('src') !== before && img.complete && img.naturalWidth > 0) {
      img.decode().then(() => resolve(performance.now() - t0), () => resolve(performance.now() - t0));
    } else {
      setTimeout(check, 1);
    }
  };
  input.value = String(row);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  check();
})
"""


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=90)
    parser.add_argument("--clicks", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clip = make_720p(Path(tmp) / "clip720.mp4", args.frames)
        options = SelectionOptions(max_pixels=1280 * 720)
        result = run(clip, options=options)
        n = result.candidates.frame_indices.size
        h, w = result.geometry.processed_hw
        render, render_jpeg = [], []
        for row in range(n):
            t0 = time.perf_counter()
            view = prepare_frame_layers(result, row, ALL_LAYERS)
            t1 = time.perf_counter()
            Image.fromarray(view.image).save(io.BytesIO(), format="JPEG", quality=75)
            t2 = time.perf_counter()
            render.append(t1 - t0)
            render_jpeg.append(t2 - t0)
        print(f"processed {w}x{h}, {n} candidates, all layers on")
        print(f"server render          p50 {pct(render, 50):6.1f} ms   p95 {pct(render, 95):6.1f} ms")
        print(
            f"server render + JPEG   p50 {pct(render_jpeg, 50):6.1f} ms   p95 {pct(render_jpeg, 95):6.1f} ms"
        )

        chromium = Path("/usr/bin/chromium")
        if not chromium.exists():
            print("browser round trip: skipped (no /usr/bin/chromium)")
            return 0
        from playwright.sync_api import sync_playwright

        ws = make_workspace(
            session_db=Path(tmp) / "s.duckdb", input_dirs=(Path(tmp),), output_dir=Path(tmp) / "work"
        )
        demo = build_app(ws, run_id=ensure_run(ws, clip, options))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        serve(demo, ws, host="127.0.0.1", port=port, block=False)
        trips, steps, in_page = [], [], []
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=str(chromium),
                    headless=True,
                    args=[
                        "--headless",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-quic",
                        "--no-first-run",
                        "--disable-background-networking",
                        "--disable-component-update",
                        "--disable-sync",
                    ],
                )
                page = browser.new_page(viewport={"width": 1600, "height": 1200})
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_selector("#frame_img", timeout=60_000)
                # Every layer on in the UI too.
                for label in ("heatmap", "patch grid", "block grid", "codec grid", "lost"):
                    page.locator("#layers label", has_text=label).click()
                page.wait_for_timeout(1500)
                rng = random.Random(0)
                current = 0
                for _ in range(args.clicks):
                    row = rng.randrange(n)
                    while row == current:
                        row = rng.randrange(n)
                    before = page.locator("#frame_img").get_attribute("src")
                    t0 = time.perf_counter()
                    page.locator("#frame_slider input[type=range]").fill(str(row))
                    page.wait_for_function(
                        "(b) => { const i = document.querySelector('#frame_img');"
                        " return i && i.getAttribute('src') !== b && i.complete && i.naturalWidth > 0; }",
                        arg=before,
                        timeout=10_000,
                    )
                    trips.append(time.perf_counter() - t0)
                    current = row
                # The same jumps timed inside the page: input event → new image decoded, without
                # Playwright's own protocol round trips.
                for _ in range(args.clicks):
                    row = rng.randrange(n)
                    while row == current:
                        row = rng.randrange(n)
                    in_page.append(page.evaluate(IN_PAGE_JS, row) / 1000)
                    current = row
                # Stepping with → (what scrubbing frame by frame does): neighbours are prefetched.
                page.locator("#frame_slider input[type=range]").fill("0")
                page.wait_for_timeout(500)
                page.locator("#summary").click()
                for _ in range(min(args.clicks, n - 1)):
                    before = page.locator("#frame_img").get_attribute("src")
                    t0 = time.perf_counter()
                    page.keyboard.press("ArrowRight")
                    page.wait_for_function(
                        "(b) => { const i = document.querySelector('#frame_img');"
                        " return i && i.getAttribute('src') !== b && i.complete && i.naturalWidth > 0; }",
                        arg=before,
                        timeout=10_000,
                    )
                    steps.append(time.perf_counter() - t0)
                    page.wait_for_timeout(100)  # a person pressing → about 8 times a second
                browser.close()
        finally:
            demo.close(verbose=False)
        print(
            f"browser round trip     p50 {pct(trips, 50):6.1f} ms   p95 {pct(trips, 95):6.1f} ms   "
            f"(n={len(trips)}, random jumps, Playwright fill → image loaded)"
        )
        print(
            f"in-page round trip     p50 {pct(in_page, 50):6.1f} ms   p95 {pct(in_page, 95):6.1f} ms   "
            f"(n={len(in_page)}, random jumps, input event → image decoded)"
        )
        print(
            f"browser → step         p50 {pct(steps, 50):6.1f} ms   p95 {pct(steps, 95):6.1f} ms   "
            f"(n={len(steps)}, key presses)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
