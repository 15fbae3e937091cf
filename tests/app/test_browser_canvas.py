"""The canvases tab and the import panel in headless Debian Chromium, on a stored run of a small clip."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from helpers.clips import encode_clip
from lens_browser import BROWSER_MARKS, open_page, screenshot, served_app

CVP_CLI = Path(sys.executable).parent / "codec-video-prep"
CVP_ARGS = [
    "--num_sampled_frames",
    "32",
    "--grouping_mode",
    "fixed",
    "--group_size",
    "8",
    "--canvas_format",
    "png",
]

pytestmark = [*BROWSER_MARKS, pytest.mark.needs_ffprobe]  # BROWSER_MARKS carries needs_cvp


@dataclass
class Setup:
    ws: Any
    run_id: str
    result: Any
    clip: Path
    cvp_dir: Path
    url: str = ""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    from app.workspace import Workspace
    from backend.pipeline import SelectionOptions
    from backend.runs import select_and_store

    root = tmp_path_factory.mktemp("canvas_app")
    inputs = root / "inputs"
    clip = encode_clip(inputs / "moving", codec="h264", frames=48)
    cvp_dir = inputs / "cvp_png"
    proc = subprocess.run(
        [str(CVP_CLI), "--video", str(clip), "--out_dir", str(cvp_dir), *CVP_ARGS],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ws = Workspace(store_path=root / "s.duckdb", input_roots=(inputs,), output_root=root / "out")
    options = SelectionOptions(num_sampled_frames=32, grouping_mode="fixed", group_size=8)
    run_id, result = select_and_store(clip, ws.store, options=options)

    try:
        # The real app; the canvases tab is one of its tabs.
        with served_app(ws, run_id=run_id, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield Setup(ws, run_id, result, clip, cvp_dir, url)
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(setup: Setup) -> Iterator[Any]:
    with open_page(setup.url, height=1100) as pg:
        pg.get_by_role("tab", name="Canvases").click()
        pg.wait_for_selector("#canvas_recon img", timeout=60_000)
        yield pg


def _shown_image(page: Any, selector: str) -> np.ndarray:
    """The RGB pixels of the <img> the browser shows (fetched from the same URL, once it has loaded)."""
    page.wait_for_function(
        f"() => {{ const i = document.querySelector({selector!r});"
        " return i && i.complete && i.naturalWidth > 0; }",
        timeout=30_000,
    )
    src = page.locator(selector).get_attribute("src")
    body = page.request.get(src).body()
    bgr = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR)
    assert bgr is not None, f"{src} is not an image"
    return bgr[:, :, ::-1]


def test_reconstruction_renders_kept_patches_bright_and_the_rest_dimmed(setup: Setup, page: Any) -> None:
    from views import canvases

    page.wait_for_function(
        "() => document.querySelector('#recon_info').innerText.startsWith('frame ')", timeout=30_000
    )
    result = setup.result
    # The tab was clicked while the page was still opening its run: it opens on the viewer's
    # frame (issue 15, defect 11), the first candidate.
    opened = int(page.locator("#recon_info").inner_text().split()[1].rstrip(":"))
    assert opened == int(result.candidates.frame_indices[0])
    # A frame with kept and dimmed patches, chosen as a researcher would.
    frame_index = canvases.default_frame(result)
    assert frame_index != opened
    page.locator("#recon_frame input").first.click()
    page.get_by_role("option").filter(has_text=f"frame {frame_index} ").first.click()
    page.wait_for_function(
        f"() => document.querySelector('#recon_info').innerText.startsWith('frame {frame_index}:')",
        timeout=30_000,
    )
    shown = _shown_image(page, "#canvas_recon img").astype(np.float64)
    recon = canvases.prepare_reconstruction(result, frame_index)
    assert shown.shape == recon.image.shape
    # Gradio sends JPEG (PIL quality 75): a few levels off on this noisy synthetic texture.
    assert np.abs(shown - recon.image).mean() < 6.0
    row = int(np.flatnonzero(result.candidates.frame_indices == frame_index)[0])
    source = np.asarray(result.decoded.pixels[row], dtype=np.float64)
    p = result.geometry.patch
    kept = np.kron(recon.patch_mask, np.ones((p, p), bool))
    assert 0 < kept.sum() < kept.size, "the default frame should be partly kept"
    # Kept patches show the source as is; the rest is a quarter as bright.
    assert shown[kept].mean() / source[kept].mean() == pytest.approx(1.0, abs=0.03)
    assert shown[~kept].mean() / source[~kept].mean() == pytest.approx(0.25, abs=0.03)
    # JPEG noise (about 6 levels here) against the dimming (about 100 levels on this texture).
    assert np.abs(shown[kept] - source[kept]).mean() < 10.0
    assert np.abs(shown[~kept] - source[~kept]).mean() > 50.0
    screenshot(page, "canvas_reconstruction.png")


def _hover_patch(page: Any, patch_row: int, patch_col: int, patch: int) -> str:
    """Move the mouse over a canvas patch in the plotly figure and return the hover label's text."""
    page.locator("#canvas_hover").scroll_into_view_if_needed()
    page.wait_for_selector("#canvas_hover .js-plotly-plot", timeout=30_000)
    point = page.evaluate(
        """([x, y]) => {
          const gd = document.querySelector('#canvas_hover .js-plotly-plot');
          const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
          const r = gd.getBoundingClientRect();
          return {x: r.left + xa._offset + xa.l2p(x), y: r.top + ya._offset + ya.l2p(y)};
        }""",
        [patch_col * patch + patch / 2, patch_row * patch + patch / 2],
    )
    page.mouse.move(point["x"] - 5, point["y"] - 5)
    page.mouse.move(point["x"], point["y"])
    label = page.locator("#canvas_hover .hoverlayer .hovertext")
    label.wait_for(timeout=15_000)
    return label.text_content() or ""


def test_hover_names_each_patch_source(setup: Setup, page: Any) -> None:
    from views import canvases

    result = setup.result
    p = result.geometry.patch
    hb, wb = result.geometry.grid_hw
    sources = canvases.patch_sources(result, 0)
    r, c = hb // 2, wb // 3
    f, sr, sc = (int(v) for v in sources[r, c])
    text = _hover_patch(page, r, c, p)
    assert f"packed ({r}, {c})" in text and f"frame {f} · row {sr} · col {sc}" in text, text
    # Select a blocks canvas in the gallery; the figure and its hover follow it.
    page.locator("#canvas_gallery button.thumbnail-item").nth(2).click()
    page.wait_for_function(
        "() => { const gd = document.querySelector('#canvas_hover .js-plotly-plot');"
        " return gd && gd.layout.title.text.startsWith('canvas 2 '); }",
        timeout=30_000,
    )
    sources = canvases.patch_sources(result, 2)
    f, sr, sc = (int(v) for v in sources[1, 3])
    assert f not in (int(canvases.patch_sources(result, 0)[0, 0, 0]), -1)  # a kept block, not the anchor
    text = _hover_patch(page, 1, 3, p)
    assert f"frame {f} · row {sr} · col {sc}" in text, text
    # Selecting the canvas also shows its main source frame in the reconstruction.
    main = canvases.dominant_source_frame(result, 2)
    page.wait_for_function(
        f"() => document.querySelector('#recon_info').innerText.startsWith('frame {main}:')", timeout=30_000
    )
    screenshot(page, "canvas_hover.png")


def test_sparse_video_plays(setup: Setup, page: Any) -> None:
    page.locator("#sparse_btn").click()
    page.wait_for_selector("#sparse_video video", timeout=60_000)
    state = page.evaluate(
        """async () => {
          const v = document.querySelector('#sparse_video video');
          v.muted = true;
          await v.play();
          await new Promise((done) => setTimeout(done, 600));
          return {t: v.currentTime, w: v.videoWidth, h: v.videoHeight, err: v.error && v.error.code};
        }"""
    )
    h, w = setup.result.geometry.processed_hw
    assert state["err"] is None and state["w"] == w and state["h"] == h and state["t"] > 0.0, state
    assert list((setup.ws.output_root / "sparse_videos").glob(f"{setup.run_id}_*.mp4"))


def test_coverage_and_round_trip(setup: Setup, page: Any) -> None:
    result = setup.result
    text = page.locator("#canvas_roundtrip").inner_text()
    valid = int(result.canvases.tokens[:, 7].sum())
    assert text.startswith("Round trip: PASS") and f"{valid} of {valid} patches" in text, text
    # calcdata holds one entry per drawn bar (data[0].x may still be plotly's packed typed array).
    bars = page.evaluate(
        "() => document.querySelector('#canvas_coverage .js-plotly-plot').calcdata[0].length"
    )
    assert bars == np.unique(result.candidates.frame_indices).size


def test_the_prompt_box_shows_the_llava_ov2_prompt_of_the_canvases(setup: Setup, page: Any) -> None:
    from backend.payload import prompt_for_result

    want = prompt_for_result(setup.result, compact=True)
    assert want.startswith("<0.0 seconds><|vision_start|><|image_pad|>×")
    box = page.locator("#canvas_prompt textarea")
    box.scroll_into_view_if_needed()
    assert box.input_value() == want
    screenshot(page, "canvas_prompt.png")


def test_import_panel_opens_the_imported_run(setup: Setup, page: Any) -> None:
    page.get_by_role("tab", name="Run").click()
    page.get_by_text("Import a codec-video-prep output directory").click()
    page.locator("#import_dir textarea, #import_dir input").first.fill("../../etc")
    page.locator("#import_video textarea, #import_video input").first.fill(str(setup.clip))
    page.locator("#import_btn").click()
    toast = page.get_by_text("is outside the allowed folders")
    toast.first.wait_for(timeout=30_000)
    page.locator("#import_dir textarea, #import_dir input").first.fill(str(setup.cvp_dir))
    page.locator("#import_btn").click()
    page.wait_for_function(
        "() => document.querySelector('#import_status').innerText.includes('Imported')", timeout=60_000
    )
    status = page.locator("#import_status").inner_text()
    assert "matches our parity recomputation" in status, status
    new_id = status.split("run ")[1].split(":")[0].strip()
    page.get_by_role("tab", name="Canvases").click()
    page.wait_for_function(
        f"() => document.querySelector('#canvas_summary').innerText.includes({new_id!r})", timeout=60_000
    )
    page.wait_for_function(
        "() => document.querySelector('#canvas_roundtrip').innerText.includes('png files')", timeout=30_000
    )
    assert page.locator("#canvas_roundtrip").inner_text().startswith("Round trip: PASS")
    # Defect 3: a failed import after a success shows its error alone, not next to "Imported".
    # (The first failure's toast is closed first, so that the error waited for is this one's.)
    page.get_by_role("tab", name="Run").click()
    page.evaluate("() => document.querySelectorAll('[data-testid=toast-close]').forEach((b) => b.click())")
    page.wait_for_function(
        "() => !document.body.innerText.includes('is outside the allowed folders')", timeout=30_000
    )
    assert "Imported" in page.locator("#import_status").inner_text()
    page.locator("#import_dir textarea, #import_dir input").first.fill("../../etc")
    page.locator("#import_btn").click()
    page.get_by_text("is outside the allowed folders").first.wait_for(timeout=30_000)
    assert "Imported" not in page.locator("#import_status").inner_text()
    assert "Error" not in page.locator("#runs_table").inner_text()
    run = setup.ws.store.get_run(new_id)
    assert run.config["imported_from"] == str(setup.cvp_dir.resolve())
    screenshot(page, "canvas_imported.png")
