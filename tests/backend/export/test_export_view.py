"""The export is the view (issue 27 item 2): one renderer, the viewer's settings and defaults, its zoom crop.

A 640×360 H.264 clip processed at 504×280: each export is one PNG frame decoded back and compared
pixel for pixel with what the viewer's frame routes draw for the same settings.
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
from backend.pipeline import SelectionOptions, run
from backend.runs.source_frame import source_frame

pytestmark = pytest.mark.needs_cvp

EVERY_LAYER = ("heatmap", "kept", "lost", "grid", "patch_grid", "codec_grid", "anchor", "bad")


@pytest.fixture(scope="module")
def export_run(tmp_path_factory) -> ex.ExportRun:
    clip = encode_clip(
        tmp_path_factory.mktemp("view") / "c", codec="h264", width=640, height=360, frames=24, gop=12
    )
    result = run(clip, options=SelectionOptions(num_sampled_frames=24))
    assert result.geometry.processed_hw == (280, 504)
    return ex.ExportRun(
        run_id="r", result=result, config={}, versions={}, video_path=str(clip), cache_key=None
    )


def _row(result) -> int:
    """A non-anchor candidate row with kept blocks (outlines, lost blocks and heat all show)."""
    kept = render.kept_blocks_by_row(result)
    return next(r for r in sorted(kept) if r not in render.anchor_rows(result) and kept[r].size)


def _export_png(export_run: ex.ExportRun, out: Path, row: int, **config) -> tuple[np.ndarray, dict]:
    """Export candidate ``row`` as one PNG; its RGB array and the sidecar."""
    fid = int(export_run.result.candidates.frame_indices[row])
    config.setdefault("stamp", False)
    done = ex.write_export(
        [export_run], config=ex.ExportConfig(out_path=out, format="png", frames=(fid, fid + 1), **config)
    )
    return np.asarray(Image.open(out).convert("RGB")), json.loads(done.sidecar.read_text())


def _viewer(view, result, row: int) -> np.ndarray:
    """What the viewer's frame route (/lens/frame) encodes as JPEG for ``view``: its own render job."""
    from app.tabs.inspect.routes import _frame_job

    _, render_job = _frame_job(result, "r", row, view.options(), "", None)
    return render_job()


@pytest.mark.parametrize(
    ("heat", "scale", "colormap", "opacity"),
    [("block", "frame", "viridis", 0.7), ("cell", "video", "magma", 0.35), ("signal", "frame", "turbo", 0.5)],
)
def test_the_export_is_the_viewers_frame_at_the_processed_size(
    export_run, tmp_path, heat, scale, colormap, opacity
):
    from app.tabs.inspect.routes import ViewSettings

    result = export_run.result
    row = _row(result)
    view = ViewSettings(list(EVERY_LAYER), opacity, colormap, scale, heat)
    image, side = _export_png(
        export_run,
        tmp_path / "p.png",
        row,
        size="processed",
        layers=EVERY_LAYER,
        heat=heat,
        scale=scale,
        colormap=colormap,
        opacity=opacity,
    )
    assert np.array_equal(image, _viewer(view, result, row))
    # The sidecar names the mode by its one stored value ("signal" is the viewer's old name of cell).
    assert side["view"] | {"layers": tuple(side["view"]["layers"])} == {
        "heat": "cell" if heat == "signal" else heat,
        "scale": scale,
        "colormap": colormap,
        "opacity": opacity,
        "layers": EVERY_LAYER,
        "crop": None,
        "side": None,
    }


def _native_views(
    export_run: ex.ExportRun, row: int, opts: render.LayerOptions
) -> tuple[np.ndarray, np.ndarray]:
    """The native route's drawing (the renderer over a source frame) of ``row``: over the export's
    own decode of the frame, and over the viewer's (the worker's ``source_frame``)."""
    result = export_run.result
    fid = int(result.candidates.frame_indices[row])
    plan = render.cached_plan(result, opts)
    ((_, decoded),) = native.iter_frames_rgb(export_run.video_path, [fid])
    return render.draw_frame(result, row, plan, decoded), render.draw_frame(
        result, row, plan, source_frame(result.info, fid)
    )


def test_the_export_is_the_native_view_at_the_source_size(export_run, tmp_path):
    row = _row(export_run.result)
    opts = render.layer_options(EVERY_LAYER, heat="block", colormap="inferno", opacity=0.6)
    image, _ = _export_png(
        export_run, tmp_path / "s.png", row, layers=EVERY_LAYER, heat="block", colormap="inferno", opacity=0.6
    )
    drawn, viewer = _native_views(export_run, row, opts)
    assert image.shape == (360, 640, 3) and np.array_equal(image, drawn)
    # The viewer's source frame is the same decode (the next test).
    assert np.array_equal(image, viewer)


def test_the_viewers_native_frame_is_the_exports_decode(export_run):
    drawn, viewer = _native_views(export_run, _row(export_run.result), render.layer_options(()))
    assert np.array_equal(drawn, viewer)


def test_block_heat_shows_at_every_size(export_run, tmp_path):
    # The export path once coloured the per-cell signal whatever the mode: block and cell were equal.
    row = _row(export_run.result)
    block, _ = _export_png(export_run, tmp_path / "b.png", row, layers=("heatmap",), heat="block")
    cell, _ = _export_png(export_run, tmp_path / "c.png", row, layers=("heatmap",), heat="cell")
    assert not np.array_equal(block, cell)
    # Block tiles: one colour per 2×2 block (28 px at 504×280, 35.6 px at 640×360), away from their edges.
    f = export_run.result.geometry.patch * export_run.result.geometry.block_size
    heat_only = render.layer_options(("heatmap",), heat="block", opacity=1.0)
    tiles = render.draw_frame(
        export_run.result, row, render.plan_overlays(export_run.result, options=heat_only)
    )
    assert all(
        len({tuple(p) for p in tiles[y * f + 2 : (y + 1) * f - 2, 2 : f - 2].reshape(-1, 3)}) == 1
        for y in range(3)
    )


def test_the_defaults_are_the_viewers(tmp_path):
    from app.tabs.inspect.routes import DEFAULT_HEAT, ViewSettings

    config = ex.ExportConfig(out_path=tmp_path / "d.mp4", layers=(*render.DEFAULT_LAYERS, "heatmap"))
    assert config.heat == DEFAULT_HEAT == render.DEFAULT_HEAT == "block"
    viewer = ViewSettings([*render.DEFAULT_LAYERS, "heatmap"], 0.5, "turbo", "frame").options()
    assert config.layer_options() == viewer
    assert ex.ExportConfig(out_path=tmp_path / "d.mp4").layers == render.DEFAULT_LAYERS
    with pytest.raises(ValueError, match=r"Invalid heat \('tiles'\)\. Supported values are block, cell\."):
        ex.ExportConfig(out_path=tmp_path / "d.mp4", heat="tiles")


def test_the_zoom_crop_is_the_viewers_box(export_run, tmp_path):
    result = export_run.result
    row = _row(result)
    box = (140, 56, 252, 140)  # x, y, width, height in processed pixels: the middle half
    layers = ("heatmap", "kept", "grid")
    opts = render.layer_options(layers, heat="block")
    plan = render.cached_plan(result, opts)
    image, side = _export_png(
        export_run, tmp_path / "z.png", row, size="processed", layers=layers, crop=box, side="B"
    )
    assert np.array_equal(image, render.draw_frame(result, row, plan)[56:196, 140:392])
    assert side["view"]["crop"] == list(box) and side["view"]["side"] == "B"
    assert side["clip"]["pane_crops"] == [list(box)] and side["clip"]["pane_sizes"] == [[280, 504]]
    # At the source size the same fractions of the source frame (× 640/504 = 360/280), rounded.
    big, _ = _export_png(export_run, tmp_path / "zs.png", row, layers=layers, crop=box)
    drawn, _ = _native_views(export_run, row, opts)
    assert big.shape == (180, 320, 3) and np.array_equal(big, drawn[72:252, 178:498])
    # With the stamp the crop's footer carries the frame and the legend's colour bar.
    stamped, _ = _export_png(
        export_run, tmp_path / "zf.png", row, size="processed", layers=layers, crop=box, stamp=True
    )
    assert np.array_equal(stamped[:140, :252], image)
    lut = {tuple(c) for c in render.colormap_lut("turbo").tolist()}
    footer = {tuple(p) for p in stamped[140:].reshape(-1, 3).tolist()}
    assert len(footer & lut) > 50  # the colour bar (the stamp alone is greys)


def test_a_crop_outside_the_frame_is_one_line(export_run, tmp_path):
    with pytest.raises(ValueError, match=r"Invalid crop \(600, 0, 10, 10\)\. Supported values start inside"):
        _export_png(export_run, tmp_path / "o.png", _row(export_run.result), crop=(600, 0, 10, 10))
    with pytest.raises(ValueError, match=r"Invalid crop \(\(1, 2, 3\)\)"):
        ex.ExportConfig(out_path=tmp_path / "o.png", crop=(1, 2, 3))
    with pytest.raises(ValueError, match=r"Invalid side \('C'\)\. Supported values are A, B\."):
        ex.ExportConfig(out_path=tmp_path / "o.png", side="C")
