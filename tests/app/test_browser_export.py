"""The export panel in headless Debian Chromium: Export and Export figure yield downloadable files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import av
import pytest
from lens_browser import BROWSER_MARKS, open_inspector_page, served_app

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, h264_clip: Path) -> Iterator[object]:
    """A workspace with one stored run of the small H.264 test clip."""
    from app.workspace import Workspace
    from backend.pipeline import SelectionOptions
    from backend.runs import select_and_store

    root = tmp_path_factory.mktemp("export_app")
    ws = Workspace(store_path=root / "s.duckdb", input_roots=(h264_clip.parent,), output_root=root / "work")
    run_id, result = select_and_store(h264_clip, ws.store, options=SelectionOptions(num_sampled_frames=48))
    ws.remember(run_id, result)
    ws.run_id = run_id  # type: ignore[attr-defined]  # for the tests below
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory, workspace) -> Iterator[str]:
    # The real app; the export panel sits under the inspector.
    with served_app(workspace, run_id=workspace.run_id, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
        yield url


@pytest.fixture(scope="module")
def page(app_url: str) -> Iterator[object]:
    with open_inspector_page(app_url, accept_downloads=True) as pg:
        pg.locator("#frame_slider input[type=range]").fill("12")  # the viewed frame
        pg.wait_for_function(
            "() => document.querySelector('#frame_info').innerText.startsWith('candidate 12 ')",
            timeout=30_000,
        )
        pg.get_by_text("Export", exact=True).first.click()  # open the accordion
        pg.wait_for_selector("#export_btn", state="visible", timeout=60_000)
        yield pg


def _download_link(page, elem_id: str, suffix: str):
    """The download link of the gr.File row whose file name ends in ``suffix``."""
    row = page.locator(f"#{elem_id} tr.file", has=page.locator(f'td.filename[aria-label$="{suffix}"]'))
    return row.locator("a.download-link").first


def test_export_button_yields_a_downloadable_clip(page, workspace, tmp_path) -> None:
    page.locator("#export_start input").fill("4")
    page.locator("#export_stop input").fill("16")
    page.locator("#export_layers label", has_text="heatmap").click()
    page.locator("#export_width input").fill("320")  # the 640×360 clip at half its size
    page.locator("#export_btn").click()
    link = _download_link(page, "export_files", ".mp4")
    link.wait_for(state="visible", timeout=120_000)
    with page.expect_download(timeout=60_000) as info:
        link.click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    assert target.suffix == ".mp4"
    fids = workspace.result(workspace.run_id).candidates.frame_indices.tolist()
    wanted = [f for f in fids if 4 <= f < 16]
    assert len(wanted) >= 5  # 48 of 96 frames are sampled
    with av.open(str(target)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == len(wanted) and frames[0].shape[1] == 320
    # The sidecar is offered too, and it names the run and the range that was asked for.
    names = [c.get_attribute("aria-label") or "" for c in page.locator("#export_files td.filename").all()]
    assert any(n.endswith(".mp4.json") for n in names), names
    exported = sorted((workspace.output_root / "exports").glob("*.mp4.json"))
    side = json.loads(exported[-1].read_text())
    assert side["runs"][0]["run_id"] == workspace.run_id
    assert side["frames"]["frame_indices"] == wanted
    assert "heatmap" in side["export_config"]["layers"]
    assert side["export_config"]["width_px"] == 320 and side["clip"]["pixels"] == "source_decode"


def test_start_at_the_viewed_frame_fills_the_range(page, workspace) -> None:
    page.locator("#export_here").click()
    fid = int(workspace.result(workspace.run_id).candidates.frame_indices[12])
    page.wait_for_function(
        f"() => document.querySelector('#export_start input').value === '{fid}'", timeout=15_000
    )


def test_figure_export_yields_a_downloadable_file(page, tmp_path) -> None:
    # The timeline spans the panel's range: from frame 8 to the end (an emptied stop box).
    page.locator("#export_start input").fill("8")
    page.locator("#export_stop input").fill("")
    page.locator("#figure_format label", has_text="html").click()
    page.locator("#figure_btn").click()
    link = _download_link(page, "figure_files", ".html")
    link.wait_for(state="visible", timeout=120_000)
    with page.expect_download(timeout=60_000) as info:
        link.click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    text = target.read_text()
    assert "Plotly.newPlot" in text and "frame_index" in text
    assert '"range":[7.5,95.5]' in text.replace(" ", "")  # the 96-frame clip from frame 8 on


def _view_sidecar(page, workspace, count_before: int) -> dict:
    """Press "Export this view" and wait for its export: the newest sidecar."""
    page.locator("#export_view_btn").click()
    folder = workspace.output_root / "exports"
    page.wait_for_function(
        "() => document.querySelectorAll('#export_files td.filename').length > 0", timeout=60_000
    )
    toasts: set[str] = set()
    for _ in range(600):
        made = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        if len(made) > count_before:
            return json.loads(made[-1].read_text())
        toasts |= {t.inner_text() for t in page.locator(".toast-body").all()}  # before they fade
        page.wait_for_timeout(100)
    raise AssertionError(f"Export this view wrote no sidecar; toasts: {toasts}")


def test_export_this_view_draws_the_shown_side_with_its_settings(page, workspace) -> None:
    import numpy as np
    from PIL import Image

    import backend.render as render

    folder = workspace.output_root / "exports"
    # The viewer: heatmap of the per-cell signal, remembered as B; then A shows the block score.
    page.locator("#layers label", has_text="heatmap").click()
    page.locator("#heat label", has_text="signal per codec cell").click()
    page.wait_for_function(
        "() => { const s = document.querySelector('#frame_img').getAttribute('src') || '';"
        " return s.includes('h=cell') && s.includes('heatmap'); }",
        timeout=30_000,
    )
    page.locator("#set_b_btn").click()
    page.locator("#heat label", has_text="2×2-block score").click()
    page.wait_for_function(
        "() => (document.querySelector('#frame_img').getAttribute('src') || '').includes('h=block')",
        timeout=30_000,
    )
    page.locator("#export_format label", has_text="png").click()
    page.locator("#export_size label", has_text="processed").click()
    page.locator("#export_width input").fill("")
    page.locator("#export_scale input").fill("1")
    result = workspace.result(workspace.run_id)
    fid = int(result.candidates.frame_indices[12])
    for side, heat in (("A", "block"), ("B", "cell")):
        if side == "B":
            page.locator("#flip_btn").click()
            page.wait_for_function(
                "() => document.querySelector('#frame_mode').innerText.startsWith('B')", timeout=15_000
            )
        sidecar = _view_sidecar(page, workspace, len(list(folder.glob("*.json"))))
        assert sidecar["view"]["side"] == side and sidecar["view"]["heat"] == heat
        assert "heatmap" in sidecar["view"]["layers"] and sidecar["view"]["crop"] is None
        assert sidecar["frames"]["frame_indices"] == [fid]  # the viewed frame only
        assert sidecar["clip"]["pixels"] == "processed_frames"
        # The exported frame is the viewer's renderer's, pixel for pixel, for those settings.
        (png,) = [f for f in sidecar["files"] if f["role"] == "clip"]
        image = np.asarray(Image.open(folder / png["name"]).convert("RGB"))
        view = sidecar["view"]
        opts = render.layer_options(
            view["layers"], opacity=view["opacity"], colormap=view["colormap"], scale=view["scale"], heat=heat
        )
        expected = render.draw_frame(result, 12, render.plan_overlays(result, options=opts))
        assert np.array_equal(image[: expected.shape[0]], expected)
    page.locator("#flip_btn").click()  # back to A for the tests after this one


def test_export_this_view_keeps_the_zoom_crop(page, workspace) -> None:
    import numpy as np
    from PIL import Image

    folder = workspace.output_root / "exports"
    page.evaluate("() => { window.__lens.zoom_fit(); window.__lens.zoomAt(2.0); }")  # ×2 at the centre
    crop = page.evaluate("() => window.__lens.viewCrop()")
    result = workspace.result(workspace.run_id)
    ph, pw = result.geometry.processed_hw
    # The centre half of the processed frame, in processed pixels.
    assert crop == pytest.approx([pw / 4, ph / 4, pw / 2, ph / 2], abs=1.0)
    sidecar = _view_sidecar(page, workspace, len(list(folder.glob("*.json"))))
    assert sidecar["view"]["crop"] == pytest.approx(crop, abs=1e-6)
    (png,) = [f for f in sidecar["files"] if f["role"] == "clip"]
    image = np.asarray(Image.open(folder / png["name"]).convert("RGB"))
    assert image.shape[1] == pytest.approx(pw / 2, abs=2)  # the zoomed box, not the whole frame
    page.evaluate("() => window.__lens.zoom_fit()")
    page.evaluate("() => window.__lens.zoom_fit()")
