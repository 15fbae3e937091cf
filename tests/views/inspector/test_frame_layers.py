"""The frame viewer's layer rendering and block picking on a real run of the bundled sample."""

from __future__ import annotations

import dataclasses
import timeit

import numpy as np
import pytest

from backend.imaging import upsample
from backend.pipeline import RunResult
from backend.records import FrameQuality
from backend.render import KEPT_RGB, anchor_rows, kept_blocks_by_row
from views.inspector import frame_layers as fl

pytestmark = pytest.mark.needs_cvp

PLAIN = fl.LayerOptions(kept=False, anchor_badge=False, bad_frames=False)


@pytest.fixture(scope="module")
def result(sample_run: RunResult) -> RunResult:
    """The session's shared run of the sample, 48 sampled frames (conftest.sample_run)."""
    return sample_run


@pytest.fixture(scope="module")
def kept_row(result) -> int:
    """A non-anchor candidate row with kept blocks."""
    kept = kept_blocks_by_row(result)
    return next(r for r, blocks in kept.items() if blocks.size and r not in anchor_rows(result))


def _block_px(result) -> int:
    return result.geometry.patch * result.geometry.block_size


def test_kept_blocks_are_drawn_in_the_kept_colour_over_every_other_layer(result, kept_row):
    every = fl.LayerOptions(
        heatmap=True, patch_grid=True, block_grid=True, codec_grid=True, kept=True, lost=True
    )
    f = _block_px(result)
    for options in (fl.LayerOptions(), every):
        image = fl.prepare_frame_layers(result, kept_row, options).image
        assert image.shape == result.decoded.pixels[kept_row].shape and image.dtype == np.uint8
        for br, bc in kept_blocks_by_row(result)[kept_row]:
            assert tuple(image[br * f, bc * f + f // 2]) == KEPT_RGB
            assert tuple(image[br * f + f // 2, bc * f + f - 1]) == KEPT_RGB
    # Outline only: the block's inside keeps the frame's pixels when no other layer is on.
    br, bc = kept_blocks_by_row(result)[kept_row][0]
    image = fl.prepare_frame_layers(result, kept_row, fl.LayerOptions()).image
    inner = (slice(br * f + 2, br * f + f - 2), slice(bc * f + 2, bc * f + f - 2))
    assert np.array_equal(image[inner], result.decoded.pixels[kept_row][inner])


def test_heatmap_changes_pixels_and_zero_opacity_is_the_plain_frame(result, kept_row):
    plain = fl.prepare_frame_layers(result, kept_row, PLAIN)
    assert np.array_equal(plain.image, result.decoded.pixels[kept_row])
    assert plain.legend is None and plain.legend_stops == ()
    heat = fl.prepare_frame_layers(result, kept_row, dataclasses.replace(PLAIN, heatmap=True, opacity=0.6))
    assert (
        np.count_nonzero(np.any(heat.image != plain.image, axis=2))
        > heat.image.shape[0] * heat.image.shape[1] // 2
    )
    assert heat.legend is not None and heat.legend.shape == (40, 256, 3) and heat.legend.dtype == np.uint8
    assert heat.legend_stops[0][0] == 0.0 and heat.legend_stops[-1][0] == 1.0
    zero = fl.prepare_frame_layers(result, kept_row, dataclasses.replace(PLAIN, heatmap=True, opacity=0.0))
    assert np.array_equal(zero.image, plain.image)
    magma = fl.prepare_frame_layers(
        result, kept_row, dataclasses.replace(PLAIN, heatmap=True, opacity=0.6, colormap="magma")
    )
    assert not np.array_equal(magma.image, heat.image)


def test_video_scale_differs_from_frame_scale(result, kept_row):
    by_frame = fl.score_map(result, kept_row, scale="frame")
    by_video = fl.score_map(result, kept_row, scale="video")
    assert by_frame.shape == by_video.shape == result.geometry.processed_hw
    assert np.array_equal(by_frame, upsample(result.scores.grids[kept_row], result.geometry.processed_hw))
    assert 0.0 <= by_video.min() and by_video.max() <= 1.0 and not np.allclose(by_frame, by_video)
    # The video scale's 1.0 is the run-wide maximum, so exactly the peak frames reach it.
    peaks = [float(fl.score_map(result, r, scale="video").max()) for r in range(len(result.decoded.grids))]
    assert max(peaks) == pytest.approx(1.0) and min(peaks) < 0.99
    opts = dataclasses.replace(PLAIN, heatmap=True, opacity=0.7)
    a = fl.prepare_frame_layers(result, kept_row, opts)
    b = fl.prepare_frame_layers(result, kept_row, dataclasses.replace(opts, scale="video"))
    assert not np.array_equal(a.image, b.image)
    assert b.legend_stops[-1][0] == pytest.approx(
        max(float(g.max()) for g in result.decoded.grids if g is not None)
    )


def test_codec_grid_lines_land_on_multiples_of_the_scaled_macroblock(result, kept_row):
    assert result.info.codec_name == "h264"
    (oh, ow), (h, w) = result.geometry.orig_hw, result.geometry.processed_hw
    cell_h, cell_w = 16 * h / oh, 16 * w / ow
    ys, xs = fl.codec_grid_lines(result)
    assert ys.tolist() == [round(k * cell_h) for k in range(1, len(ys) + 1)] and ys[-1] + cell_h >= h - 1
    assert xs.tolist() == [round(k * cell_w) for k in range(1, len(xs) + 1)] and xs[-1] + cell_w >= w - 1
    image = fl.prepare_frame_layers(result, kept_row, dataclasses.replace(PLAIN, codec_grid=True)).image
    is_line = np.all(image == fl.CODEC_GRID_RGB, axis=2)
    assert np.flatnonzero(is_line.all(axis=0)).tolist() == xs.tolist()
    assert np.flatnonzero(is_line.all(axis=1)).tolist() == ys.tolist()


@pytest.mark.parametrize(
    ("decoder", "cell"), [("libdav1d", 64), ("hevc", 64), ("libvpx-vp9", 64), ("h264", 16)]
)
def test_codec_grid_follows_the_codec_behind_the_decoder_name(result, decoder, cell):
    # PyAV reports AV1 streams by their decoder (libdav1d); the grid is still AV1's 64 px.
    renamed = dataclasses.replace(result, info=dataclasses.replace(result.info, codec_name=decoder))
    (oh, _), (h, _) = result.geometry.orig_hw, result.geometry.processed_hw
    ys, _ = fl.codec_grid_lines(renamed)
    assert ys[0] == round(cell * h / oh)


def test_patch_and_block_grids_sit_on_patch_and_block_edges(result, kept_row):
    p, f = result.geometry.patch, _block_px(result)
    image = fl.prepare_frame_layers(result, kept_row, dataclasses.replace(PLAIN, patch_grid=True)).image
    cols = np.flatnonzero(np.all(image == fl.PATCH_GRID_RGB, axis=2).all(axis=0))
    assert cols.tolist() == list(range(0, image.shape[1], p))
    image = fl.prepare_frame_layers(result, kept_row, dataclasses.replace(PLAIN, block_grid=True)).image
    rows = np.flatnonzero(np.all(image == fl.BLOCK_GRID_RGB, axis=2).all(axis=1))
    assert rows.tolist() == list(range(0, image.shape[0], f))


def test_lost_blocks_scored_high_but_were_not_kept(result):
    bh_n, bw_n = result.geometry.block_grid_hw
    f = _block_px(result)
    total_lost = 0
    for sel in result.selection.groups:
        rows = sel.candidate_rows()
        assert not fl.lost_blocks(result, int(rows[0])).any()  # the anchor is kept whole
        for t in range(1, rows.size):
            row = int(rows[t])
            lost = fl.lost_blocks(result, row)
            kept = np.zeros((bh_n, bw_n), bool)
            k = sel.kept[sel.kept[:, 0] == t]
            kept[k[:, 1], k[:, 2]] = True
            scores = result.scores.block_scores[row].reshape(bh_n, bw_n)
            assert not (lost & kept).any()
            assert np.all(scores[lost] >= fl.LOST_FRACTION * sel.cutoff_score)
            # Every not-kept block at or above the threshold is marked.
            assert np.array_equal(lost, (scores >= np.float32(fl.LOST_FRACTION * sel.cutoff_score)) & ~kept)
            if lost.any() and total_lost == 0:
                image = fl.prepare_frame_layers(result, row, fl.LayerOptions(lost=True)).image
                br, bc = np.argwhere(lost)[0]
                assert tuple(image[br * f, bc * f + f // 2]) == fl.LOST_RGB
            total_lost += int(lost.sum())
    assert total_lost > 0


def test_bad_frame_tint_appears_only_on_bad_frames(result, kept_row):
    n = result.candidates.frame_indices.size
    bad_row = kept_row
    good = np.ones(n, bool)
    good[bad_row] = False
    reasons = tuple("black" if r == bad_row else "" for r in range(n))
    marked = dataclasses.replace(result, quality=FrameQuality(good=good, reasons=reasons))
    on = dataclasses.replace(PLAIN, bad_frames=True)
    bad = fl.prepare_frame_layers(marked, bad_row, on)
    assert bad.info["bad_reason"] == "black"
    plain = result.decoded.pixels[bad_row].astype(int)
    # The tint pulls every pixel towards red: red rises or stays, green and blue fall or stay
    # (above the white label at the bottom).
    diff = (bad.image.astype(int) - plain)[: plain.shape[0] - 30]
    assert (diff[..., 0] >= -1).all() and (diff[..., 1] <= 1).all() and (diff[..., 2] <= 1).all()
    assert np.count_nonzero(np.any(diff != 0, axis=2)) > 0.9 * diff.shape[0] * diff.shape[1]
    other = (bad_row + 1) % n
    assert np.array_equal(fl.prepare_frame_layers(marked, other, on).image, result.decoded.pixels[other])
    assert fl.prepare_frame_layers(marked, other, on).info["bad_reason"] is None
    assert np.array_equal(
        fl.prepare_frame_layers(marked, bad_row, PLAIN).image, result.decoded.pixels[bad_row]
    )


def test_info_panel_fields(result, kept_row):
    info = fl.prepare_frame_layers(result, kept_row).info
    fid = int(result.candidates.frame_indices[kept_row])
    assert info["frame_index"] == fid and info["candidate_row"] == kept_row
    assert info["time_secs"] == pytest.approx(
        float(result.info.packet_pts_secs[fid] - result.info.start_pts_secs)
    )
    assert info["size_bytes"] == int(result.info.packet_size_bytes[fid])
    assert info["pict_type"] == result.decoded.pict_types[kept_row]
    assert info["is_anchor"] is False and info["kept_blocks"] == len(kept_blocks_by_row(result)[kept_row])
    assert info["group_index"] in {s.group_index for s in result.groups.specs}
    # The sample's first keyframe (0) is moved to frame 1 by keyframe avoidance.
    assert result.candidates.moved == ((0, 1),)
    row_of_1 = int(np.flatnonzero(result.candidates.frame_indices == 1)[0])
    anchor_info = fl.prepare_frame_layers(result, row_of_1).info
    assert anchor_info["moved_from"] == 0 and anchor_info["is_anchor"] is True
    assert info["moved_from"] is None


def test_frame_info_is_the_info_of_the_drawn_frame(result):
    """The info line route's undrawn facts equal the drawn frame's, row by row."""
    for row in range(len(result.candidates.frame_indices)):
        assert fl.frame_info(result, row) == fl.prepare_frame_layers(result, row).info, row


def test_anchor_badge_is_drawn_only_on_anchors(result, kept_row):
    anchor = min(anchor_rows(result))
    badge = dataclasses.replace(PLAIN, anchor_badge=True)
    image = fl.prepare_frame_layers(result, anchor, badge).image
    assert tuple(image[0, 0]) == fl.ANCHOR_RGB and tuple(image[-1, -1]) == fl.ANCHOR_RGB
    assert np.array_equal(
        fl.prepare_frame_layers(result, kept_row, badge).image, result.decoded.pixels[kept_row]
    )


def test_block_at_a_kept_block_finds_its_canvas_pixels(result, kept_row):
    p, b = result.geometry.patch, result.geometry.block_size
    f = p * b
    sel = next(s for s in result.selection.groups if s.start <= kept_row < s.end)
    for br, bc in kept_blocks_by_row(result)[kept_row][:10]:
        hit = fl.block_at(result, kept_row, bc * f + f // 2, br * f + 3)
        assert (hit["block_row"], hit["block_col"]) == (br, bc)
        assert hit["kept"] is True and hit["kept_as"] == "block"
        assert 1 <= hit["rank"] <= sel.budget and hit["score"] >= sel.cutoff_score
        c, pr, pc = hit["canvas_index"], hit["packed_row"], hit["packed_col"]
        assert int(result.canvases.canvas_group_index[c]) == sel.group_index
        canvas_block = result.canvases.images[c, pr * p : pr * p + f, pc * p : pc * p + f]
        source_block = result.decoded.pixels[kept_row, br * f : (br + 1) * f, bc * f : (bc + 1) * f]
        assert np.array_equal(canvas_block, source_block)


def test_block_at_reports_bitcost_score_and_rank(result, kept_row):
    f = _block_px(result)
    bh_n, bw_n = result.geometry.block_grid_hw
    sel = next(s for s in result.selection.groups if s.start <= kept_row < s.end)
    kept = set(map(tuple, kept_blocks_by_row(result)[kept_row].tolist()))
    br, bc = next((r, c) for r in range(bh_n) for c in range(bw_n) if (r, c) not in kept)
    hit = fl.block_at(result, kept_row, bc * f, br * f)
    assert hit["kept"] is False and hit["canvas_index"] is None and hit["kept_as"] is None
    assert hit["score"] == pytest.approx(float(result.scores.block_scores[kept_row, br * bw_n + bc]))
    assert hit["rank"] > sel.budget or hit["score"] <= sel.cutoff_score
    # The raw cells under the block are exactly those the upsampled map shows there.
    raw = result.decoded.grids[kept_row].astype(np.float32)
    stretched = upsample(raw, result.geometry.processed_hw)[br * f : (br + 1) * f, bc * f : (bc + 1) * f]
    assert set(hit["bitcost"]) == set(np.unique(stretched).tolist())
    assert len(hit["bitcost"]) == len(hit["bitcost_cells"])


def test_block_at_on_an_anchor_points_into_the_anchor_canvas(result):
    p = result.geometry.patch
    f = _block_px(result)
    anchor = min(anchor_rows(result))
    hit = fl.block_at(result, anchor, 3 * f + 1, 2 * f + 1)
    assert hit["kept"] is True and hit["kept_as"] == "anchor" and hit["rank"] is None
    c, pr, pc = hit["canvas_index"], hit["packed_row"], hit["packed_col"]
    assert np.array_equal(
        result.canvases.images[c, pr * p : pr * p + f, pc * p : pc * p + f],
        result.decoded.pixels[anchor, 2 * f : 3 * f, 3 * f : 4 * f],
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("colormap", "rainbow", r"Invalid colormap \('rainbow'\)\. Supported values are turbo, viridis"),
        ("scale", "global", r"Invalid scale \('global'\)\. Supported values are frame, video\."),
        ("opacity", 1.5, r"Invalid opacity \(1\.5\)\. Supported values are 0\.0 to 1\.0\."),
        ("opacity", -0.1, r"Invalid opacity"),
    ],
)
def test_invalid_options_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        fl.LayerOptions(**{field: value})


def test_invalid_rows_and_pixels_are_refused(result):
    n = result.candidates.frame_indices.size
    with pytest.raises(ValueError, match=r"Invalid row \(48\)\. Supported values are 0 to 47\."):
        fl.prepare_frame_layers(result, n)
    w = result.geometry.processed_hw[1]
    with pytest.raises(ValueError, match=r"Invalid pixel"):
        fl.block_at(result, 0, w, 0)
    with pytest.raises(ValueError, match=r"Invalid pixel"):
        fl.block_at(result, 0, 0, -1)
    with pytest.raises(ValueError, match=r"Invalid scale"):
        fl.score_map(result, 0, scale="global")


def test_render_time_with_every_layer_on(result, kept_row):
    every = fl.LayerOptions(
        heatmap=True, scale="video", patch_grid=True, block_grid=True, codec_grid=True, lost=True
    )
    reps = 50
    secs = timeit.timeit(lambda: fl.prepare_frame_layers(result, kept_row, every), number=reps) / reps
    h, w = result.geometry.processed_hw
    print(f"prepare_frame_layers, every layer on, {w}x{h}: {secs * 1e3:.2f} ms per frame")
    assert secs < 0.05
