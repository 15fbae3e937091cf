"""The canvases view's prepare_* functions and round-trip check on real runs of the bundled sample."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest
from helpers.paths import SAMPLE_VIDEO

from backend.cvp_format import write_output
from backend.pipeline import RunResult, SelectionOptions, run
from views import canvases

pytestmark = pytest.mark.needs_cvp


@pytest.fixture(scope="module")
def result(sample_run: RunResult) -> RunResult:
    """The session's shared run of the sample, 48 sampled frames (conftest.sample_run)."""
    return sample_run


@pytest.fixture(scope="module")
def png_result() -> RunResult:
    return run(SAMPLE_VIDEO, options=SelectionOptions(num_sampled_frames=48, canvas_format="png"))


@pytest.fixture(scope="module")
def padded_result() -> RunResult:
    # Two-frame groups packed into 8 canvases: one frame's blocks cannot fill 7 canvases, so the rest pads.
    options = SelectionOptions(num_sampled_frames=16, images_per_group=8, grouping_mode="fixed", group_size=2)
    return run(SAMPLE_VIDEO, options=options)


def _patch(image: np.ndarray, patch: int, patch_row: int, patch_col: int) -> np.ndarray:
    return image[patch_row * patch : (patch_row + 1) * patch, patch_col * patch : (patch_col + 1) * patch]


def _anchor_frame_indices(result: RunResult) -> list[int]:
    return [sel.frame_indices[0] for sel in result.selection.groups]


def _first_row(result: RunResult, frame_index: int) -> int:
    return int(np.flatnonzero(result.candidates.frame_indices == frame_index)[0])


def test_anchor_reconstruction_is_the_frame_itself(result):
    frame_index = _anchor_frame_indices(result)[0]
    recon = canvases.prepare_reconstruction(result, frame_index)
    assert recon.coverage == 1.0 and recon.patch_mask.all()
    assert np.array_equal(recon.image, result.decoded.pixels[_first_row(result, frame_index)])


def test_non_anchor_frame_shows_kept_patches_and_dims_the_rest(result):
    anchors = set(_anchor_frame_indices(result))
    tokens = result.canvases.tokens
    kept = tokens[(tokens[:, 7] == 1) & ~np.isin(tokens[:, 0], list(anchors))]
    assert kept.shape[0], "the sample run should keep blocks outside the anchors"
    frame_index = int(kept[0, 0])
    dim = 0.25
    recon = canvases.prepare_reconstruction(result, frame_index, dim=dim)
    source = result.decoded.pixels[_first_row(result, frame_index)]
    p = result.geometry.patch
    assert 0.0 < recon.coverage < 1.0
    for patch_row, patch_col in kept[kept[:, 0] == frame_index][:, 1:3]:
        assert recon.patch_mask[patch_row, patch_col]
        assert np.array_equal(
            _patch(recon.image, p, patch_row, patch_col), _patch(source, p, patch_row, patch_col)
        )
    dark_row, dark_col = np.argwhere(~recon.patch_mask)[0]
    dimmed = _patch(recon.image, p, dark_row, dark_col).astype(int)
    expected = np.rint(_patch(source, p, dark_row, dark_col) * dim).astype(int)
    assert np.abs(dimmed - expected).max() <= 1
    # Everywhere outside the kept patches the frame is dimmed, never brighter than the source.
    outside = ~np.kron(recon.patch_mask, np.ones((p, p), bool))
    assert np.abs(recon.image[outside].astype(int) - np.rint(source[outside] * dim)).max() <= 1


def test_dim_and_frame_index_are_validated(result):
    frame_index = int(result.candidates.frame_indices[0])
    with pytest.raises(ValueError, match=r"Invalid dim \(1.5\)\. Supported values are 0.0 to 1.0\."):
        canvases.prepare_reconstruction(result, frame_index, dim=1.5)
    missing = next(
        f for f in range(result.info.total_frames) if f not in set(result.candidates.frame_indices)
    )
    with pytest.raises(ValueError, match=r"Invalid frame_index .* candidate frames between"):
        canvases.prepare_reconstruction(result, missing)
    with pytest.raises(ValueError, match="Invalid canvas_index"):
        canvases.patch_sources(result, result.canvases.images.shape[0])


def test_coverage_agrees_with_token_counts(result):
    coverage = canvases.prepare_coverage(result)
    tokens = result.canvases.tokens
    valid = tokens[tokens[:, 7] == 1]
    s = result.geometry.patches_per_canvas
    assert coverage.shape == (result.info.total_frames,)
    for frame_index in np.unique(valid[:, 0]):
        positions = {tuple(x) for x in valid[valid[:, 0] == frame_index][:, 1:3].tolist()}
        assert coverage[frame_index] == pytest.approx(len(positions) / s)
        recon = canvases.prepare_reconstruction(result, int(frame_index))
        assert recon.coverage == pytest.approx(coverage[frame_index])
    never = np.setdiff1d(np.arange(coverage.size), valid[:, 0])
    assert np.all(coverage[never] == 0.0)
    assert np.all(coverage[_anchor_frame_indices(result)] == 1.0)


def test_round_trip_passes_and_catches_a_corrupted_canvas(result):
    check = canvases.round_trip_check(result)
    assert check.passed and check.mismatched_patches == 0 and check.fmt == "memory"
    assert check.checked_patches == int(result.canvases.tokens[:, 7].sum())
    images = result.canvases.images.copy()
    p = result.geometry.patch
    images[1, :p, :p] ^= 0xFF  # flip the first patch of the second canvas (a valid token)
    corrupted = dataclasses.replace(result, canvases=dataclasses.replace(result.canvases, images=images))
    bad = canvases.round_trip_check(corrupted)
    assert not bad.passed and bad.mismatched_patches == 1


def test_png_files_round_trip_exactly(png_result, tmp_path: Path):
    out = write_output(png_result, tmp_path / "png_run")
    check = canvases.round_trip_check(png_result, canvas_dir=out)
    assert check.fmt == "png" and check.passed, check.note
    assert check.checked_patches == int(png_result.canvases.tokens[:, 7].sum())


def test_jpg_files_skip_the_lossy_file_check(result, tmp_path: Path):
    out = write_output(result, tmp_path / "jpg_run")
    check = canvases.round_trip_check(result, canvas_dir=out)
    assert check.fmt == "jpg" and check.passed and "lossy" in check.note


def test_hover_names_sources_and_padding(result, padded_result):
    hb, wb = result.geometry.grid_hw
    anchor_hover = canvases.prepare_canvas_hover(result, 0)
    assert len(anchor_hover) == hb and all(len(row) == wb for row in anchor_hover)
    anchor = _anchor_frame_indices(result)[0]
    assert anchor_hover[0][0] == f"frame {anchor} · row 0 · col 0"
    assert all(text != "padding" for row in anchor_hover for text in row)
    tokens = padded_result.canvases.tokens
    padding = tokens[tokens[:, 7] == 0]
    assert padding.size, "the two-frame-group run should pack padding"
    canvas_index, packed_row, packed_col = (int(v) for v in padding[0, 3:6])
    sources = canvases.patch_sources(padded_result, canvas_index)
    assert tuple(sources[packed_row, packed_col]) == (-1, -1, -1)
    assert canvases.prepare_canvas_hover(padded_result, canvas_index)[packed_row][packed_col] == "padding"


def test_sparse_video_plays_every_candidate(result):
    frames = canvases.prepare_sparse_video(result)
    ids = result.candidates.frame_indices
    assert len(frames) == ids.size
    h, w = result.geometry.processed_hw
    assert all(f.shape == (h, w, 3) and f.dtype == np.uint8 for f in frames)
    k = 3
    assert np.array_equal(frames[k], canvases.prepare_reconstruction(result, int(ids[k])).image)


def test_reconstruction_reads_pixels_from_the_canvases(result):
    # Mark one packed patch: the reconstruction must show the mark at the token's source position.
    s = result.geometry.patches_per_canvas
    p = result.geometry.patch
    token = result.canvases.tokens[s]  # canvas 1, packed (0, 0)
    assert token[7] == 1 and token[3] == 1
    images = result.canvases.images.copy()
    images[1, :p, :p] = (255, 0, 255)
    marked = dataclasses.replace(result, canvases=dataclasses.replace(result.canvases, images=images))
    recon = canvases.prepare_reconstruction(marked, int(token[0]))
    assert np.all(_patch(recon.image, p, int(token[1]), int(token[2])) == (255, 0, 255))


def test_iter_reconstructions_streams_every_candidate(result):
    ids = result.candidates.frame_indices
    streamed = list(canvases.iter_reconstructions(result, dim=0.5))
    assert [r.frame_index for r in streamed] == ids.tolist()
    for k in (0, 5, ids.size - 1):
        one = canvases.prepare_reconstruction(result, int(ids[k]), dim=0.5)
        assert np.array_equal(streamed[k].image, one.image)
        assert np.array_equal(streamed[k].patch_mask, one.patch_mask)
    with pytest.raises(ValueError, match=r"Invalid dim \(-0.1\)"):
        next(canvases.iter_reconstructions(result, dim=-0.1))


def _decode_data_uri(uri: str) -> np.ndarray:
    head, payload = uri.split(",", 1)
    assert head == "data:image/jpeg;base64"
    bgr = cv2.imdecode(np.frombuffer(base64.b64decode(payload), np.uint8), cv2.IMREAD_COLOR)
    return bgr[:, :, ::-1]


def test_canvas_figure_carries_the_picture_and_one_hover_cell_per_patch(result):
    c = 1
    fig = canvases.prepare_canvas_figure(result, c)
    image_trace, heat = fig.data
    picture = _decode_data_uri(image_trace.source)
    canvas = result.canvases.images[c]
    assert picture.shape == canvas.shape
    assert np.abs(picture.astype(int) - canvas).mean() < 4  # JPEG q90 of the same canvas
    hb, wb = result.geometry.grid_hw
    p = result.geometry.patch
    assert heat.name == canvases.HOVER_TRACE and np.asarray(heat.z).shape == (hb, wb)
    hover = canvases.prepare_canvas_hover(result, c)
    sources = canvases.patch_sources(result, c)
    for r, col in ((0, 0), (hb - 1, wb - 1), (hb // 2, wb // 3)):
        assert heat.text[r][col] == f"packed ({r}, {col})<br>{hover[r][col]}"
        assert np.asarray(heat.customdata)[r][col] == sources[r, col, 0]
        # The cell centre lies inside the patch's pixels, so hovering the patch hits its cell.
        assert col * p <= heat.x[col] < (col + 1) * p and r * p <= heat.y[r] < (r + 1) * p
    assert tuple(fig.layout.yaxis.range) == (canvas.shape[0] - 0.5, -0.5)  # rows run downwards
    with pytest.raises(ValueError, match="Invalid canvas_index"):
        canvases.prepare_canvas_figure(result, -1)


def test_dominant_source_and_frame_choices(result, padded_result):
    anchor = _anchor_frame_indices(result)[0]
    assert canvases.dominant_source_frame(result, 0) == anchor
    sources = canvases.patch_sources(result, 2)[:, :, 0].ravel()
    values, counts = np.unique(sources[sources >= 0], return_counts=True)
    assert canvases.dominant_source_frame(result, 2) == int(values[counts.argmax()])
    tokens = padded_result.canvases.tokens
    per_canvas = np.bincount(
        tokens[:, 3], weights=tokens[:, 7], minlength=padded_result.canvases.images.shape[0]
    )
    empty = np.flatnonzero(per_canvas == 0)
    if empty.size:
        assert canvases.dominant_source_frame(padded_result, int(empty[0])) is None
    choices = canvases.frame_choices(result)
    coverage = canvases.prepare_coverage(result)
    assert [f for _, f in choices] == np.unique(result.candidates.frame_indices).tolist()
    for label, f in choices:
        assert label == f"frame {f} · {coverage[f]:.0%} of patches kept"
    first = canvases.default_frame(result)
    assert 0.0 < coverage[first] < 1.0


def test_coverage_figure_plots_each_candidate_and_marks_the_frame(result):
    coverage = canvases.prepare_coverage(result)
    ids = np.unique(result.candidates.frame_indices)
    fig = canvases.prepare_coverage_figure(result, frame_index=int(ids[3]))
    (bars,) = fig.data
    assert np.array_equal(np.asarray(bars.x), ids)
    assert np.allclose(np.asarray(bars.y), coverage[ids] * 100.0)
    (line,) = fig.layout.shapes
    assert line.name == "selected" and line.x0 == line.x1 == int(ids[3])
    assert not canvases.prepare_coverage_figure(result).layout.shapes


def test_round_trip_counts_tokens_of_frames_never_decoded(result):
    tokens = result.canvases.tokens.copy()
    missing = next(
        f for f in range(result.info.total_frames) if f not in set(result.candidates.frame_indices)
    )
    row = int(np.flatnonzero(tokens[:, 7] == 1)[-1])
    tokens[row, 0] = missing
    moved = dataclasses.replace(result, canvases=dataclasses.replace(result.canvases, tokens=tokens))
    check = canvases.round_trip_check(moved)
    assert not check.passed and check.unchecked_patches == 1 and check.mismatched_patches == 0
    assert check.checked_patches == int(tokens[:, 7].sum()) - 1
    assert "1 patches name frames that were not decoded" in check.note
    assert canvases.round_trip_markdown(check).startswith("**Round trip: FAIL**")
    assert canvases.round_trip_markdown(canvases.round_trip_check(result)).startswith("**Round trip: PASS**")
