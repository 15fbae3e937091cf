"""The inspector on every clip kind issue 15 was tried on, in headless Debian Chromium at 1600×1000: a 720p
H.264 clip, VP9, AV1 (decoder-side residual signal) and the real HEVC clip in MPEG-TS. Each opens from the
stored-run list and is used as a researcher would: the info line, a layer checkbox then →, a click inside a
group span of the timeline, the block and pixel readout under the cursor, the codec layers (or the legend's
word that the codec has none), and zoom to the source frame at its own size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lens_browser import ARTIFACTS, BROWSER_MARKS, open_inspector_page, served_app

pytestmark = BROWSER_MARKS

WIDTH, HEIGHT = 1600, 1000
REAL = Path(__file__).resolve().parents[1] / "data"

# kind → (source width × height, codec layers the decoder exports, words the legend must show)
KINDS: dict[str, tuple[tuple[int, int], tuple[str, ...]]] = {
    "h264_720p": ((1280, 720), ("motion vector", "block QP")),
    "vp9": ((480, 272), ("block QP",)),
    "av1": ((480, 272), ()),
    "hevc_ts": ((1920, 1080), ()),
}


def _clips(folder: Path) -> dict[str, tuple[Path, Any]]:
    """Real content in each clip kind: the Big Buck Bunny HEVC/TS clip as it is; the first 24 frames of
    the flower time-lapse (960×540 H.264) re-encoded at 720p (H.264) and 480×272 (VP9); BBB's first 24
    frames (its title fade, bad frames: the readout's 'not a candidate' wording) in AV1."""
    from clips import transcode_clip

    from backend.pipeline import SelectionOptions

    bbb, flower = REAL / "real_hevc_bbb_1080p.ts", REAL / "real_h264_flower_timelapse.mp4"
    small = {"frames": 24, "width": 480, "height": 272, "gop": 12}
    return {
        "h264_720p": (
            transcode_clip(flower, folder / "f720", codec="h264", frames=24, width=1280, height=720, gop=12),
            SelectionOptions(profile="clean"),
        ),
        "vp9": (
            transcode_clip(flower, folder / "flower_vp9", codec="vp9", **small),
            SelectionOptions(profile="clean"),
        ),
        "av1": (
            transcode_clip(bbb, folder / "bbb_av1", codec="av1", **small),
            SelectionOptions(profile="clean", score="residual"),
        ),
        "hevc_ts": (bbb, SelectionOptions(profile="clean", num_sampled_frames=32)),
    }


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from app.workspace import ensure_run, make_workspace

    root = tmp_path_factory.mktemp("inspector_codecs")
    ws = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work", input_dirs=(REAL,))
    try:
        runs = {kind: ensure_run(ws, path, opts) for kind, (path, opts) in _clips(ws.output_root).items()}
        with served_app(ws, run_id=runs["h264_720p"], gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
            yield {"ws": ws, "url": url, "runs": runs}
    finally:
        ws.close()


@pytest.fixture(scope="module")
def page(app: dict[str, Any]) -> Iterator[Any]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open_inspector_page(app["url"], height=HEIGHT, width=WIDTH) as pg:
        yield pg


def _info(page: Any) -> str:
    return page.locator("#frame_info").inner_text()


def _wait_candidate(page: Any, row: int) -> None:
    page.wait_for_function(
        f"() => document.querySelector('#frame_info').innerText.startsWith('candidate {row} ')",
        timeout=30_000,
    )


def _open(page: Any, run_id: str) -> None:
    """Open ``run_id`` from the Run tab's stored-run list, back on the Inspect tab at its first frame."""
    page.get_by_role("tab", name="Run").click()
    page.locator("#open_pick input").click()
    page.locator("#open_pick input").fill(run_id)
    page.locator("[role=option]", has_text=run_id).first.click()
    page.locator("#open_btn").click()
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_function(
        f"() => {{ const i = document.querySelector('#frame_img');"
        f" return i.src.includes('run={run_id}') && i.complete && i.naturalWidth > 0; }}",
        timeout=60_000,
    )


def _no_error_badges(page: Any) -> None:
    assert page.evaluate("() => document.querySelectorAll('.error, .validation-error').length") == 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_inspector_works_on_each_clip_kind(page: Any, app: dict[str, Any], kind: str) -> None:
    (src_w, src_h), codec_words = KINDS[kind]
    run_id = app["runs"][kind]
    _open(page, run_id)
    page.locator("#frame").scroll_into_view_if_needed()
    page.locator("#frame_slider input[type=range]").fill("3")
    _wait_candidate(page, 3)
    # The info line: picture type and packet size of the shown frame.
    parts = _info(page).split(" · ")
    assert parts[3] in ("I", "P", "B") and parts[4].endswith(" bytes"), parts

    # A layer checkbox keeps the focus; → still steps.
    page.locator("#layers label", has_text="block grid").click()
    page.keyboard.press("ArrowRight")
    _wait_candidate(page, 4)
    page.locator("#layers label", has_text="block grid").click()

    # Hover reads the block (units, rank, budget, decision) and the pixel under the cursor.
    box = page.locator("#frame_img").bounding_box()
    assert abs(box["width"] / box["height"] - src_w / src_h) < 0.05, box
    page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
    unit = "luma levels" if kind == "av1" else "bits per"
    page.wait_for_function(
        f"() => document.querySelector('#block_info').innerText.includes('decision')"
        f" && document.querySelector('#block_info').innerText.includes('{unit}')",
        timeout=30_000,
    )
    readout = page.locator("#block_info").inner_text()
    assert "rank in group" in readout and "K=" in readout, readout
    assert "RGB" in page.locator("#pixel_info").inner_text()

    # Codec layers: drawn where the decoder exports them, else the legend says it has none.
    for label in ("motion vectors", "block QP"):
        page.locator("#codec_layers label", has_text=label).click()
    page.wait_for_function(
        "() => { const i = document.querySelector('#frame_img');"
        " return i.src.includes('k=mv') && i.src.includes('qp') && i.complete && i.naturalWidth > 0; }",
        timeout=60_000,
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('#colour_legend .lens-on')]"
        ".some((d) => d.innerText.includes('block QP'))"
    )
    legend = page.locator("#colour_legend").inner_text()
    if len(codec_words) == 2:
        assert "exports no" not in legend, legend
    else:
        missing = [w for w in ("motion vectors", "block QP") if not any(w.startswith(c) for c in codec_words)]
        assert "exports no " + " or ".join(missing) in legend, legend
    page.screenshot(path=str(ARTIFACTS / f"inspector_codec_layers_{kind}.png"))
    for label in ("motion vectors", "block QP"):
        page.locator("#codec_layers label", has_text=label).click()

    # Zoom in: the source frame decoded at its own size.
    stage = page.locator("#frame_stage").bounding_box()
    page.mouse.move(stage["x"] + stage["width"] / 2, stage["y"] + stage["height"] / 2)
    for _ in range(4):
        page.mouse.wheel(0, -200)
    page.wait_for_function(
        f"() => {{ const i = document.querySelector('#frame_img');"
        f" return i.src.includes('lens/native') && i.complete && i.naturalWidth === {src_w}; }}",
        timeout=60_000,
    )
    page.locator("#zoom_fit_btn").click()
    page.wait_for_function("() => document.querySelector('#frame_img').src.includes('lens/frame')")

    # A click inside a group's shaded span, at mid-height, jumps without an error.
    page.locator("#timeline").scroll_into_view_if_needed()
    page.wait_for_selector("#timeline .js-plotly-plot", timeout=60_000)
    target = app["ws"].result(run_id).candidates.frame_indices[-2]
    point = page.evaluate(
        """(f) => {
          const gd = document.querySelector('#timeline .js-plotly-plot');
          const xa = gd._fullLayout.xaxis, size = gd._fullLayout._size, r = gd.getBoundingClientRect();
          return {x: r.left + xa._offset + xa.c2p(f), y: r.top + size.t + size.h * 0.6};
        }""",
        int(target),
    )
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function(
        f"() => document.querySelector('#frame_info').innerText.includes(' · frame {int(target)} · ')",
        timeout=30_000,
    )
    _no_error_badges(page)
