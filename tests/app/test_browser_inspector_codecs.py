"""The inspector on every clip kind issue 15 was tried on, in headless Debian Chromium at 1600×1000: a
720p H.264 clip, VP9, AV1 (decoder-side residual signal), the real HEVC clip in MPEG-TS, MPEG-4 Part 2
(motion vectors, no bitcost) and an anamorphic (SAR 16:11) clip. Each opens from the stored-run list and
is used as a researcher would: the info line, a layer checkbox then →, a click inside a group span of
the timeline, the block and pixel readout under the cursor, the codec layers (arrows drawn where the
decoder exports vectors, else the legend's word that the codec has none), zoom to the source frame at
its own size, play/pause, the A/B flip, an export at the source resolution and a live re-selection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lens_browser import (
    ARTIFACTS,
    BROWSER_MARKS,
    anamorphic_clip,
    info_line,
    open_inspector_page,
    open_stored_run,
    served_app,
    wait_candidate,
)

pytestmark = BROWSER_MARKS

WIDTH, HEIGHT = 1600, 1000
REAL = Path(__file__).resolve().parents[1] / "data"

# kind → (source width × height, codec layers the decoder exports, words the legend must show)
KINDS: dict[str, tuple[tuple[int, int], tuple[str, ...]]] = {
    "h264_720p": ((1280, 720), ("motion vector", "block QP")),
    "vp9": ((480, 272), ("block QP",)),
    "av1": ((480, 272), ()),
    "hevc_ts": ((1920, 1080), ()),
    "mpeg4": ((320, 240), ("motion vector", "block QP")),
    "anamorphic": ((352, 288), ("motion vector", "block QP")),
}
MV_ARROWS = ("h264_720p", "mpeg4", "anamorphic")  # content that moves, from a decoder that exports vectors
DISPLAY_ASPECT = {"anamorphic": 352 * 16 / (288 * 11)}  # pixel aspect 16:11, shown stretched to it

# Pixels of #frame_img in the colour of past-reference arrows (views.inspector.codec_layers.MV_PAST_RGB,
# (0, 255, 120)), give or take the JPEG.
ARROW_PIXELS_JS = """() => {
  const im = document.querySelector('#frame_img'), c = document.createElement('canvas');
  c.width = im.naturalWidth; c.height = im.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(im, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i] < 90 && d[i + 1] > 190 && d[i + 2] > 60 && d[i + 2] < 190) n++;
  }
  return n;
}"""


def _clips(folder: Path) -> dict[str, tuple[Path, Any]]:
    """Real content in each clip kind: the Big Buck Bunny HEVC/TS clip as it is; the first 24 frames of
    the flower time-lapse (960×540 H.264) re-encoded at 720p (H.264) and 480×272 (VP9); BBB's first 24
    frames (its title fade, bad frames: the readout's 'not a candidate' wording) in AV1; 24 frames of the
    synthetic moving texture (tests/clips.py) in MPEG-4 Part 2, and 36 in a 352×288 H.264 clip of pixel
    aspect 16:11."""
    from helpers.clips import encode_clip, transcode_clip

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
        # MPEG-4 Part 2 has no bitcost: the motion-vector signal ranks its blocks.
        "mpeg4": (
            encode_clip(folder / "moving_mpeg4", codec="mpeg4", frames=24, gop=12),
            SelectionOptions(profile="clean", score="mv"),
        ),
        "anamorphic": (anamorphic_clip(folder / "anamorphic.mp4"), SelectionOptions(profile="clean")),
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


def _open(page: Any, run_id: str) -> None:
    """Open ``run_id`` from the Run tab's stored-run list, back on the Inspect tab at its first frame."""
    open_stored_run(page, run_id)
    # The viewer has drawn the run (not only pointed its image at it) before a test moves it.
    page.wait_for_function(
        f"() => document.querySelector('#shown_run textarea, #shown_run input').value === '{run_id}'",
        timeout=60_000,
    )
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
    wait_candidate(page, 3)
    # The info line: picture type and packet size of the shown frame.
    parts = info_line(page).split(" · ")
    assert parts[3] in ("I", "P", "B") and parts[4].endswith(" bytes"), parts

    # A layer checkbox keeps the focus; → still steps.
    page.locator("#layers label", has_text="block grid").click()
    page.keyboard.press("ArrowRight")
    wait_candidate(page, 4)
    page.locator("#layers label", has_text="block grid").click()

    # Hover reads the block (units, rank, budget, decision) and the pixel under the cursor.
    box = page.locator("#frame_img").bounding_box()
    assert abs(box["width"] / box["height"] - DISPLAY_ASPECT.get(kind, src_w / src_h)) < 0.05, box
    page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
    unit = {"av1": "luma levels", "mpeg4": "px/frame of motion"}.get(kind, "bits per")
    page.wait_for_function(
        f"() => document.querySelector('#block_info').innerText.includes('decision')"
        f" && document.querySelector('#block_info').innerText.includes('{unit}')",
        timeout=30_000,
    )
    readout = page.locator("#block_info").inner_text()
    assert "rank in group" in readout and "K=" in readout, readout
    assert "RGB" in page.locator("#pixel_info").inner_text()

    # Codec layers: drawn where the decoder exports them, else the legend says it has none.
    plain_arrows = page.evaluate(ARROW_PIXELS_JS)
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
    if kind in MV_ARROWS:  # the arrows are on the image, not only in its URL
        page.locator("#codec_layers label", has_text="block QP").click()
        page.wait_for_function(
            "() => { const i = document.querySelector('#frame_img');"
            " return !i.src.includes('qp') && i.complete && i.naturalWidth > 0; }",
            timeout=60_000,
        )
        arrows = page.evaluate(ARROW_PIXELS_JS)
        assert arrows > plain_arrows + 200, (plain_arrows, arrows)
        page.locator("#codec_layers label", has_text="block QP").click()
    page.screenshot(path=str(ARTIFACTS / f"inspector_codec_layers_{kind}.png"))
    for label in ("motion vectors", "block QP"):
        page.locator("#codec_layers label", has_text=label).click()

    # Zoom in: the source frame decoded at its own size, when it has more pixels than the processed one
    # (the anamorphic clip's 352 columns are upscaled: zoom magnifies the processed frame).
    stage = page.locator("#frame_stage").bounding_box()
    page.mouse.move(stage["x"] + stage["width"] / 2, stage["y"] + stage["height"] / 2)
    for _ in range(4):
        page.mouse.wheel(0, -200)
    processed_w = int(page.locator("#frame_img").get_attribute("data-pw"))
    if src_w > processed_w:
        page.wait_for_function(
            f"() => {{ const i = document.querySelector('#frame_img');"
            f" return i.src.includes('lens/native') && i.complete && i.naturalWidth === {src_w}; }}",
            timeout=60_000,
        )
    else:
        page.wait_for_function("() => document.querySelector('#frame_mode').innerText.includes('×')")
        assert "processed pixels" in page.locator("#frame_mode").inner_text()
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

    page.locator("#frame").scroll_into_view_if_needed()
    _play_pause_and_flip(page)
    _export_at_the_source_size(page, app, run_id, src_w)
    _reselect_live(page, app, run_id)
    _no_error_badges(page)


def _play_pause_and_flip(page: Any) -> None:
    """Play from candidate 1 at 8 fps, pause; B = the layers as they are, heatmap on, flip to B and back."""
    page.locator("#frame_slider input[type=range]").fill("1")
    wait_candidate(page, 1)
    page.locator("#play_rate").select_option("8")
    page.locator("#play_btn").click()
    page.wait_for_function(
        "() => parseInt(document.querySelector('#frame_info').innerText.split(' ')[1]) >= 3", timeout=30_000
    )
    page.locator("#play_btn").click()
    page.wait_for_timeout(300)
    stopped = info_line(page)
    page.wait_for_timeout(400)
    assert info_line(page) == stopped
    page.locator("#set_b_btn").click()
    page.locator("#layers label", has_text="heatmap").click()
    page.wait_for_function("() => document.querySelector('#frame_img').src.includes('heatmap')")
    page.locator("#flip_btn").click()
    page.wait_for_function(
        "() => { const s = document.querySelector('#frame_img').src;"
        " return !s.includes('heatmap') && s.includes('f='); }"
    )
    assert page.locator("#frame_mode").inner_text().startswith("B")
    page.locator("#flip_btn").click()
    page.wait_for_function("() => document.querySelector('#frame_img').src.includes('heatmap')")
    page.locator("#layers label", has_text="heatmap").click()


def _export_at_the_source_size(page: Any, app: dict[str, Any], run_id: str, src_w: int) -> None:
    """Export the first three candidates as MP4 from the panel: the clip comes at the source width."""
    import av

    if not page.locator("#export_btn").is_visible():
        page.get_by_text("Export", exact=True).first.click()  # open the accordion
    fids = app["ws"].result(run_id).candidates.frame_indices
    page.locator("#export_start input").fill(str(int(fids[0])))
    page.locator("#export_stop input").fill(str(int(fids[2]) + 1))
    page.locator("#export_btn").click()
    cell = page.locator(f'#export_files td.filename[aria-label^="{run_id}_"][aria-label$=".mp4"]').first
    cell.wait_for(state="visible", timeout=120_000)
    clip = app["ws"].output_root / "exports" / cell.get_attribute("aria-label")
    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.width == src_w and stream.frames in (0, 3), (clip, stream.frames)


def _reselect_live(page: Any, app: dict[str, Any], run_id: str) -> None:
    """A live option change re-selects the open run: a new run, its frame shown."""
    box = page.locator("#live_images_per_group input")
    if not box.is_visible():
        page.locator("#live_box").get_by_text("Re-select live").click()
    box.fill("2" if box.input_value() != "2" else "3")
    box.press("Enter")
    page.wait_for_function(
        f"() => document.querySelector('#run_id textarea, #run_id input').value !== {run_id!r}"
        f" && document.querySelector('#frame_img').src.includes('run=')"
        f" && !document.querySelector('#frame_img').src.includes('run={run_id}')",
        timeout=60_000,
    )
    new_id = page.locator("#run_id textarea, #run_id input").first.input_value()
    assert app["ws"].store.get_run(new_id).config["images_per_group"] in (2, 3)
