"""Export sizes: source resolution by default, ×N and a width, overlays drawn crisp at that size.

A 640×360 H.264 clip processed at 504×280 (patch 14, 28 px blocks), so the source size is not a
whole multiple of the processed one; PNG frames are decoded back and checked pixel by pixel.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.clips import encode_clip
from PIL import Image

import backend.export as ex
import backend.render as render
import native
from backend.errors import InputError
from backend.export.clip import _pane_pictures
from backend.pipeline import SelectionOptions, run

pytestmark = pytest.mark.needs_cvp

W, H = 640, 360


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("size")
    return encode_clip(folder / "c", codec="h264", width=W, height=H, frames=24, gop=12)


@pytest.fixture(scope="module")
def export_run(clip) -> ex.ExportRun:
    result = run(clip, options=SelectionOptions(num_sampled_frames=24))
    assert result.geometry.processed_hw == (280, 504)
    return ex.ExportRun(
        run_id="r", result=result, config={}, versions={}, video_path=str(clip), cache_key=None
    )


def _png(export_run: ex.ExportRun, out: Path, frame: int, **changes) -> np.ndarray:
    """Export frame ``frame`` as one PNG without the footer; the decoded RGB array."""
    config = ex.ExportConfig(
        out_path=out, format="png", frames=(frame, frame + 1), stamp=False, layers=("kept",), **changes
    )
    done = ex.write_export([export_run], config=config)
    image = np.asarray(Image.open(out).convert("RGB"))
    assert image.shape[:2] == done.frame_size
    return image


def _kept_row(result) -> tuple[int, np.ndarray]:
    """A non-anchor candidate row with kept blocks, and its blocks."""
    kept = render.kept_blocks_by_row(result)
    row = next(r for r in sorted(kept) if r not in render.anchor_rows(result) and kept[r].size)
    return row, kept[row]


def _edges(n: int, f: int, out_px: int, processed_px: int) -> np.ndarray:
    return np.round(np.arange(n + 1) * f * out_px / processed_px).astype(int)


def _check_outlines(image: np.ndarray, result, blocks: np.ndarray, border: int) -> None:
    """Each kept block's ring is exactly ``border`` px of KEPT_RGB at its scaled edges."""
    f = result.geometry.patch * result.geometry.block_size
    ph, pw = result.geometry.processed_hw
    h, w = image.shape[:2]
    ys, xs = _edges(ph // f, f, h, ph), _edges(pw // f, f, w, pw)
    kept = np.asarray(render.KEPT_RGB)
    kept_set = {tuple(b) for b in blocks.tolist()}
    for br, bc in blocks.tolist():
        y0, y1, x0, x1 = ys[br], ys[br + 1], xs[bc], xs[bc + 1]
        xm = (x0 + x1) // 2
        assert (image[y0 : y0 + border, x0:x1] == kept).all(), (br, bc)  # top edge, one colour
        assert (image[y0:y1, x0 : x0 + border] == kept).all(), (br, bc)  # left edge
        assert (image[y1 - border : y1, x0:x1] == kept).all(), (br, bc)  # bottom edge
        # Crisp: the pixel just inside the ring is the picture, not a blend of the outline.
        if (br - 1, bc) not in kept_set and (br + 1, bc) not in kept_set:
            assert not (image[y0 + border, xm] == kept).all(), (br, bc)


def test_default_size_is_the_sources_with_crisp_2px_outlines(export_run, tmp_path):
    result = export_run.result
    row, blocks = _kept_row(result)
    fid = int(result.candidates.frame_indices[row])
    image = _png(export_run, tmp_path / "src.png", fid)
    assert image.shape[:2] == (H, W)  # not the processed 280×504
    _check_outlines(image, result, blocks, border=2)
    # Under the overlays are the source's own pixels, decoded at its size (not upscaled).
    (_, source), *_ = native.iter_frames_rgb(export_run.video_path, [fid])
    plain = np.ones(image.shape[:2], bool)
    f = result.geometry.patch * result.geometry.block_size
    ys, xs = _edges(280 // f, f, H, 280), _edges(504 // f, f, W, 504)
    for br, bc in blocks.tolist():
        plain[ys[br] : ys[br + 1], xs[bc] : xs[bc + 1]] = False
    assert np.array_equal(image[plain], source[plain])


def test_scale_and_width_set_the_size_and_lines_grow_above_720_rows(export_run, tmp_path):
    result = export_run.result
    row, blocks = _kept_row(result)
    fid = int(result.candidates.frame_indices[row])
    double = _png(export_run, tmp_path / "x2.png", fid, size_factor=2.0)
    assert double.shape[:2] == (2 * H, 2 * W)
    _check_outlines(double, result, blocks, border=2)  # 720 rows: the viewer's 2 px
    wide = _png(export_run, tmp_path / "w.png", fid, width_px=1920)
    assert wide.shape[:2] == (1080, 1920)
    _check_outlines(wide, result, blocks, border=3)  # 1080 rows: 2 px × 1.5
    small = _png(export_run, tmp_path / "w320.png", fid, width_px=320)
    assert small.shape[:2] == (180, 320)
    processed = _png(export_run, tmp_path / "p.png", fid, size="processed")
    assert processed.shape[:2] == (280, 504)
    plan = render.plan_overlays(result, options=render.layer_options("kept"))
    assert np.array_equal(processed, render.draw_frame(result, row, plan))


def test_scaled_drawing_is_the_viewers_at_the_processed_size(export_run):
    result = export_run.result
    plan = render.plan_overlays(result, options=render.layer_options(render.LAYER_NAMES))
    for row in range(0, result.candidates.frame_indices.size, 5):
        expected = render.draw_frame(result, row, plan)
        got = render.draw_frame(result, row, plan, result.decoded.pixels[row])
        assert np.array_equal(got, expected), row


def test_the_sidecar_says_what_the_pixels_are(export_run, tmp_path):
    config = ex.ExportConfig(out_path=tmp_path / "s.mp4", frames=(0, 6), size_factor=0.5)
    done = ex.write_export([export_run], config=config)
    side = json.loads(done.sidecar.read_text())
    assert side["clip"]["pixels"] == "source_decode" and side["clip"]["pane_sizes"] == [[180, 320]]
    assert side["export_config"]["size"] == "source" and side["export_config"]["size_factor"] == 0.5
    assert side["export_config"]["allowed_roots"] is None


def test_pictures_follow_any_row_order(export_run):
    result = export_run.result
    rows = [5, 2, None, 5, 9, 2]
    got = list(_pane_pictures(export_run, rows, (H, W), "source"))
    fids = [None if r is None else int(result.candidates.frame_indices[r]) for r in rows]
    direct = dict(native.iter_frames_rgb(export_run.video_path, [f for f in fids if f is not None]))
    for picture, fid in zip(got, fids, strict=True):
        assert (picture is None) == (fid is None)
        if fid is not None:
            assert np.array_equal(picture, direct[fid])


def test_a_missing_video_is_named_and_nothing_is_left(export_run, tmp_path):
    import dataclasses

    gone = dataclasses.replace(export_run, video_path=str(tmp_path / "moved.mp4"))
    config = ex.ExportConfig(out_path=tmp_path / "out" / "m.mp4", frames=(0, 4))
    with pytest.raises(InputError, match=r"moved\.mp4.*--size processed"):
        ex.write_export([gone], config=config)
    assert not list((tmp_path / "out").glob("*"))
    done = ex.write_export([gone], config=dataclasses.replace(config, size="processed"))
    assert done.frame_size[1] == 504


def test_size_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match=r"Invalid size \(scale 2 and width 640\)\. Supported values are a"):
        ex.ExportConfig(out_path=tmp_path / "x.mp4", size_factor=2.0, width_px=640)
    with pytest.raises(ValueError, match=r"Invalid size factor \(0\.0\)"):
        ex.ExportConfig(out_path=tmp_path / "x.mp4", size_factor=0.0)
    with pytest.raises(ValueError, match=r"Invalid size \('huge'\)\. Supported values are 'source'"):
        ex.ExportConfig(out_path=tmp_path / "x.mp4", size="huge")
    with pytest.raises(ValueError, match=r"Invalid width px \(8\)"):
        ex.ExportConfig(out_path=tmp_path / "x.mp4", width_px=8)
