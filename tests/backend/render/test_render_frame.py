"""The one frame renderer: its fast processed-size path, heat names, layer names and the zoom crop."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import backend.render as render
from backend.render.frame import _draw

pytestmark = pytest.mark.needs_cvp


@pytest.mark.parametrize("heat", ["block", "cell"])
def test_the_fast_path_draws_the_general_paths_pixels(sample_run, heat):
    # The viewer's hot path (plan grid lines, strided outlines) against the any-size path, same size.
    opts = render.layer_options(render.LAYER_NAMES, heat=heat)
    plan = render.plan_overlays(sample_run, options=opts)
    for row in range(0, sample_run.candidates.frame_indices.size, 7):
        frame = sample_run.decoded.pixels[row]
        fast = _draw(sample_run, row, plan, frame, fast=True)
        assert np.array_equal(fast, _draw(sample_run, row, plan, frame, fast=False)), row
        assert np.array_equal(fast, render.draw_frame(sample_run, row, plan))
        assert np.array_equal(fast, render.draw_frame(sample_run, row, plan))


def test_heat_has_one_stored_name_per_mode():
    assert render.HEAT_SOURCES == ("block", "cell") and render.DEFAULT_HEAT == "block"
    old = render.LayerOptions(heatmap=True, heat="signal")
    assert old.heat == "cell" and old == render.LayerOptions(heatmap=True, heat="cell")
    assert render.layer_options("heatmap", heat="signal") == render.layer_options("heatmap", heat="cell")
    with pytest.raises(ValueError, match=r"Invalid heat \('tiles'\)\. Supported values are block, cell\."):
        render.LayerOptions(heat="tiles")


def test_layer_names_invert_layer_options():
    for name in render.LAYER_NAMES:
        assert render.layer_names(render.layer_options([name])) == (name,)
    assert render.layer_names(render.LayerOptions()) == render.DEFAULT_LAYERS
    every = render.layer_options(render.LAYER_NAMES, opacity=0.3, colormap="jet", scale="video", heat="block")
    assert (
        render.layer_options(
            render.layer_names(every), opacity=0.3, colormap="jet", scale="video", heat="block"
        )
        == every
    )
    assert dataclasses.replace(every, kept=False) != every


def test_crop_slices_keep_the_fractions_at_any_size():
    assert render.crop_slices(None, (280, 504), (360, 640)) == (slice(0, 360), slice(0, 640))
    assert render.crop_slices((140, 56, 252, 140), (280, 504), (280, 504)) == (
        slice(56, 196),
        slice(140, 392),
    )
    assert render.crop_slices((140, 56, 252, 140), (280, 504), (360, 640)) == (
        slice(72, 252),
        slice(178, 498),
    )
    # Clipped to the frame, and never under 2 px.
    assert render.crop_slices((500, 270, 100, 100), (280, 504), (280, 504)) == (
        slice(270, 280),
        slice(500, 504),
    )
    assert render.crop_slices((10, 10, 0.1, 0.1), (280, 504), (280, 504)) == (slice(10, 12), slice(10, 12))
    with pytest.raises(ValueError, match=r"Invalid crop \(504, 0, 1, 1\)\. Supported values start inside"):
        render.crop_slices((504, 0, 1, 1), (280, 504), (280, 504))
    for bad in [(1, 2, 3), (-1, 0, 5, 5), (0, 0, 0, 5), ("a", 0, 1, 1), (0, 0, float("nan"), 1)]:
        with pytest.raises(ValueError, match=r"Invalid crop"):
            render.check_crop(bad)


def test_the_heatmap_leaves_a_letterbox_black(tmp_path):
    from helpers.clips import encode_clip

    from backend.selectors import options_for, picture_of, select

    # onevision letterboxes the 320×192 frame into a 320 square: rows above and below are bars.
    clip = encode_clip(tmp_path / "wide", codec="h264", width=320, height=192, frames=16, gop=8)
    result = select(
        clip, options=options_for("onevision", {"seq_len_frames": 8, "num_images": 2, "square_size": 320})
    )
    r0, r1, _, _ = picture_of(result.options, result.geometry)
    assert r0 > 0  # the clip does have bars
    row = 1
    hot = render.layer_options(("heatmap",), heat="cell", opacity=1.0)
    drawn = render.draw_frame(result, row, render.plan_overlays(result, options=hot))
    frame = result.decoded.pixels[row]
    f = result.geometry.patch * result.geometry.block_size
    assert np.array_equal(drawn[: r0 * f], frame[: r0 * f]) and np.array_equal(
        drawn[r1 * f :], frame[r1 * f :]
    )
    assert not np.array_equal(drawn[r0 * f : r1 * f], frame[r0 * f : r1 * f])
