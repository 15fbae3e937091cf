"""The onevision selector: letterbox, fusion, frame 0 whole, global vs per-bucket top-K, static fallback.

Hand-computed cases on tiny records, then whole runs on real clips (``slow``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from backend.cvp_format.write import write_output
from backend.records import Candidates, DecodedFrames, Geometry, ScoreMaps, VideoInfo
from backend.selectors.onevision import (
    TOPK,
    TOPK_MODES,
    LetterboxConfig,
    OnevisionOptions,
    TopKConfig,
    letterbox_geometry,
    letterbox_offsets,
    score_letterboxed,
    select_onevision,
    select_topk,
    static_check,
    uniform_patch_picks,
    valid_patches,
)
from backend.stages.signal_maps import fuse_mvres

DATA = Path(__file__).resolve().parents[2] / "data"


def info_of(width: int, height: int) -> VideoInfo:
    e = np.zeros(0)
    return VideoInfo(
        "v.mp4", 0, "mp4", "h264", width, height, 30.0, 1, "header", 1.0, 0, 0, 0.0,
        e, e.astype(np.int64), e.astype(bool), None, False,
    )  # fmt: skip


def candidates_of(n: int) -> Candidates:
    ids = np.arange(n, dtype=np.int32) * 3
    return Candidates(ids, ids, (), (), {})


def scores_of(block: np.ndarray, geometry: Geometry) -> ScoreMaps:
    n = block.shape[0]
    rows, cols = geometry.grid_hw
    return ScoreMaps(
        grids=tuple(np.zeros((rows, cols), np.float32) for _ in range(n)),
        processed_hw=geometry.processed_hw,
        patch_scores=block.reshape(n, rows, cols).astype(np.float32),
        block_scores=block.astype(np.float32),
        iframe_clip_cap=None,
    )


# --------------------------------------------------------------------------- geometry and scores


def test_letterbox_scales_the_longer_side_and_centres_the_frame() -> None:
    geo = letterbox_geometry(info_of(1280, 720), config=LetterboxConfig())
    # 576 / 1280 = 0.45: 720 × 0.45 = 324 rows, centred: (576 - 324) // 2 = 126 rows above.
    assert geo.prepared_hw == (324, 576) and geo.processed_hw == (576, 576) and geo.block_size == 1
    assert letterbox_offsets(geo) == (126, 0)
    valid = valid_patches(geo)
    # Rows of 16 px wholly inside rows 126..449: patch rows 8 (128..143) to 27 (432..447).
    assert valid.shape == (36, 36)
    assert np.flatnonzero(valid[:, 0]).tolist() == list(range(8, 28))
    assert valid.all(axis=0).sum() == 0 and valid[8:28].all()
    tall = letterbox_geometry(info_of(480, 640), config=LetterboxConfig(square_size=64, patch_size=8))
    assert tall.prepared_hw == (64, 48) and letterbox_offsets(tall) == (0, 8)


def test_scores_are_the_stretched_grid_summed_per_patch_inside_the_square() -> None:
    # A 2 × 4 cell grid over an 8 × 16 frame (scale 1) in a 16 × 16 square of 4-px patches:
    # the frame sits in rows 4..11, so patch rows 1 and 2; each cell covers 4 × 4 px = 1 patch.
    geo = Geometry(orig_hw=(8, 16), prepared_hw=(8, 16), processed_hw=(16, 16), patch=4, block_size=1)
    grid = np.array([[0.0, 0.25, 0.5, 1.0], [1.0, 0.0, 0.0, 0.5]], np.float32)
    ids = np.zeros(1, np.int32)
    decoded = DecodedFrames(
        frame_indices=ids, pixels=np.zeros((1, 16, 16, 3), np.uint8), grids=(grid,), grid_key="mvres",
        pict_types=("P",), bitcost_source=ids, pixel_source="full_decode",
    )  # fmt: skip
    scores = score_letterboxed(decoded, geo, normalisation="none")
    want = np.zeros((4, 4), np.float32)
    want[1] = [0.0, 4.0, 8.0, 16.0]  # 16 pixels × the cell's value
    want[2] = [16.0, 0.0, 0.0, 8.0]
    assert np.array_equal(scores.patch_scores[0], want)
    assert np.array_equal(scores.block_scores[0], want.ravel())
    assert np.array_equal(scores.grids[0], want / 16)  # patch means: a view stretches them in place


def test_fusion_is_the_weighted_mean_of_the_percentile_scaled_maps() -> None:
    """mvres as the reference fuses it: clip(mag / P(mag)), clip(|r| / max(P(|r|), 1)), weighted mean."""
    mag = np.array([[0.0, 1.0, 2.0, 4.0]], np.float32)
    res = np.array([[8.0, 0.0, 2.0, 4.0]], np.float32)
    # P100: mag / 4 = [0, .25, .5, 1]; |r| / 8 = [1, 0, .25, .5]; weights 3 : 1.
    got = fuse_mvres(mag, res, mv_weight=3.0, residual_weight=1.0, percentile=100.0)
    want = (3 * np.array([0, 0.25, 0.5, 1.0]) + np.array([1, 0, 0.25, 0.5])) / 4
    assert np.allclose(got, [want], atol=1e-7)
    # The residual's scale never drops below 1 (a nearly flat residual is not blown up).
    assert np.allclose(fuse_mvres(mag * 0, np.full((1, 4), 0.5), percentile=100.0), 0.25)


# --------------------------------------------------------------------------- selection


def grid4() -> Geometry:
    """A 4 × 4 frame in a 4 × 4 square of 1-px patches: every patch valid."""
    return Geometry(orig_hw=(4, 4), prepared_hw=(4, 4), processed_hw=(4, 4), patch=1, block_size=1)


def ramp_scores() -> np.ndarray:
    """5 frames × 16 patches: frame t scores 10·t + patch/100 (later frames dominate, then raster)."""
    t = np.arange(5)[:, None]
    return (10.0 * t + np.arange(16)[None, :] / 100).astype(np.float32)


def test_frame_zero_is_kept_whole_and_never_ranked() -> None:
    geo = grid4()
    block = ramp_scores()
    block[0] = 1000.0  # frame 0 scores highest: still it only fills canvas 0
    sel, groups = select_topk(candidates_of(5), scores_of(block, geo), geo, config=TopKConfig(num_images=2))
    g = sel.groups[0]
    assert g.frame_indices[0] == 0 and g.anchor_swapped_with is None
    assert 0 not in g.kept[:, 0].tolist() and g.budget == 16
    assert groups.specs[0].start == 0 and groups.specs[0].end == 5


def test_global_top_k_takes_the_best_patches_of_any_frame() -> None:
    geo = grid4()
    cfg = TopKConfig(num_images=3, topk_mode="global")  # budget 2 canvases = 32 patches
    sel, _ = select_topk(candidates_of(5), scores_of(ramp_scores(), geo), geo, config=cfg)
    g = sel.groups[0]
    # Frames 4 and 3 (scores 40.xx and 30.xx) beat every patch of frames 1 and 2.
    assert sorted(set(g.kept[:, 0].tolist())) == [3, 4] and g.kept.shape == (32, 3)
    # Ranked best first: frame 4's last patch (40.15) first, frame 3's first patch (30.00) last.
    assert g.ranked[0].tolist() == [4, 15] and g.ranked[-1].tolist() == [3, 0]
    assert g.cutoff_score == pytest.approx(30.0)


def test_time_buckets_take_a_canvas_of_patches_from_each_stretch_of_time() -> None:
    geo = grid4()
    cfg = TopKConfig(num_images=3, topk_mode="time_bucket")  # buckets = 2: frames [1, 2] and [3, 4]
    sel, groups = select_topk(candidates_of(5), scores_of(ramp_scores(), geo), geo, config=cfg)
    g = sel.groups[0]
    per_frame = np.bincount(g.kept[:, 0], minlength=5).tolist()
    # Each bucket gives its best 16 of 32: all of its later frame (2, then 4), none of the earlier.
    assert per_frame == [0, 0, 16, 0, 16]
    assert groups.specs[0].readiness["time_buckets"] == [[1, 2], [3, 4]]
    # More buckets than canvases: the later buckets fall past the budget (the reference's cap).
    cfg4 = TopKConfig(num_images=2, topk_mode="time_bucket", time_bucket_count=4)
    sel4, _ = select_topk(candidates_of(5), scores_of(ramp_scores(), geo), geo, config=cfg4)
    assert sel4.groups[0].kept[:, 0].tolist() == [1] * 16


def test_padding_patches_are_never_chosen() -> None:
    # A 2 × 4 frame in a 4 × 4 square: rows 0 and 3 are padding, whatever they score.
    geo = Geometry(orig_hw=(2, 4), prepared_hw=(2, 4), processed_hw=(4, 4), patch=1, block_size=1)
    block = np.zeros((3, 16), np.float32)
    block[:, [0, 1, 2, 3, 12, 13, 14, 15]] = 100.0
    block[:, 4:12] = np.arange(8) / 10
    sel, _ = select_topk(candidates_of(3), scores_of(block, geo), geo, config=TopKConfig(num_images=2))
    g = sel.groups[0]
    assert set(g.kept[:, 1].tolist()) <= {1, 2}
    assert g.kept.shape[0] == 16 and g.candidate_count == 16  # 2 frames × 8 valid patches
    # Fewer candidates than the budget: the rest of the canvases is padding, said so.
    sel2, _ = select_topk(candidates_of(2), scores_of(block[:2], geo), geo, config=TopKConfig(num_images=2))
    assert sel2.groups[0].kept.shape[0] == 8
    assert [w.code for w in sel2.warnings] == ["onevision_padded"]


def test_static_check_and_uniform_picks_by_hand() -> None:
    cfg = TopKConfig()
    # p95 of [0..19] = 18.05 ≥ 2 · 2: moving.
    assert not static_check(np.arange(20.0), config=cfg).is_static
    # Everything at 1.5: p95 1.5 < 2: static.
    assert static_check(np.full(20, 1.5), config=cfg).is_static
    # p95 3.0 in [2, 4) and flat (p50 3.0: contrast 0 < 0.15): static; a spread one is not.
    assert static_check(np.full(20, 3.0), config=cfg).is_static
    spread = static_check(np.r_[np.zeros(10), np.full(10, 3.0)], config=cfg)
    assert spread.p95 == 3.0 and spread.p50 == 1.5 and not spread.is_static
    # Budget for whole frames: every valid patch of each; otherwise spread evenly.
    assert uniform_patch_picks([2, 5], np.array([4, 5, 6]), 6) == [
        (2, 4),
        (2, 5),
        (2, 6),
        (5, 4),
        (5, 5),
        (5, 6),
    ]
    # 5 over 2 frames: 3 then 2; 3 of 4 patches at round(i · 4/3) = 0, 1, 3 (banker's 1.33 → 1).
    assert uniform_patch_picks([1, 2], np.arange(4), 5) == [(1, 0), (1, 1), (1, 3), (2, 0), (2, 2)]


def test_static_fallback_keeps_uniform_frames_then_the_top_k() -> None:
    geo = grid4()
    n = 9
    block = np.full((n, 16), 0.001, np.float32)  # next to nothing moves …
    block[7, 5] = 0.004  # … a little here
    cfg = TopKConfig(num_images=6, static_uniform_frames=4)  # budget 5 × 16 = 80
    sel, groups = select_topk(candidates_of(n), scores_of(block, geo), geo, config=cfg)
    g = sel.groups[0]
    debug = groups.specs[0].readiness
    assert debug["static"]["is_static"]
    # linspace(1, 8, 4) = 1, 3.33, 5.67, 8 → frames 1, 3, 5, 8 whole (64 patches) …
    assert debug["static_uniform_frames"] == [1, 3, 5, 8]
    assert g.ranked[:64, 0].tolist() == [1] * 16 + [3] * 16 + [5] * 16 + [8] * 16
    # … then the top 16 of the rest: frame 7's moving patch first, then ties in frame order.
    assert g.ranked[64].tolist() == [7, 5] and g.ranked[65].tolist() == [2, 0]
    assert [w.code for w in sel.warnings] == ["static_fallback"]
    off = TopKConfig(num_images=6, static_fallback=False)
    sel_off, _ = select_topk(candidates_of(n), scores_of(block, geo), geo, config=off)
    assert sel_off.groups[0].ranked[0].tolist() == [7, 5] and not sel_off.warnings


def test_options_refuse_what_cannot_run() -> None:
    with pytest.raises(ValueError, match=r"Invalid square size \(100\)"):
        OnevisionOptions(square_size=100)
    with pytest.raises(ValueError, match="Invalid topk mode"):
        OnevisionOptions(topk_mode="local")
    with pytest.raises(ValueError, match="Invalid w mv"):
        OnevisionOptions(w_mv=0.0, w_res=0.0)
    # The top-K modes are the registry's variants, and the option's choices are their names.
    assert TOPK.names == TOPK_MODES
    # Its fields in order, as every selector's (the Run tab fills its controls from them in order).
    assert list(OnevisionOptions().as_dict()) == [f.name for f in dataclasses.fields(OnevisionOptions)]


# --------------------------------------------------------------------------- whole runs


@pytest.mark.slow
def test_a_run_on_a_real_clip_writes_a_cvp_layout_folder(tmp_path: Path) -> None:
    options = OnevisionOptions(seq_len_frames=16, num_images=4, square_size=192, canvas_format="png")
    seen: list[str] = []
    result = select_onevision(
        DATA / "real_h264_film_friday.mp4", options=options, on_progress=lambda s, f: seen.append(s)
    )
    assert (
        seen[-1] == "pack"
        and result.candidates.frame_indices.tolist() == np.linspace(0, 184, 16).astype(int).tolist()
    )
    geo = result.geometry
    assert geo.processed_hw == (192, 192) and geo.prepared_hw == (144, 192) and geo.block_size == 1
    canvases = result.canvases
    assert canvases.images.shape == (4, 192, 192, 3) and canvases.tokens.shape == (4 * 144, 8)
    # Canvas 0 is frame 0, letterbox bars included; every other token comes from frames 1….
    assert np.array_equal(canvases.images[0], result.decoded.pixels[0])
    assert (result.decoded.pixels[0, :24] == 0).all()  # (192 - 144) // 2 = 24 rows of bar
    first = canvases.tokens[:144]
    assert (first[:, 0] == 0).all() and first[:, 7].all()
    rest = canvases.tokens[144:]
    assert (rest[rest[:, 7] == 1, 0] > 0).all() and rest[:, 7].all()
    codes = [w.code for w in result.warnings]
    assert "signal_stand_in" in codes and "letterboxed" in result.decoded.read_mode
    out = write_output(result, tmp_path / "ov")
    spp = np.load(out / "src_patch_position.npy")
    assert spp.shape == (576, 3) and np.array_equal(spp, canvases.src_patch_position)
    assert sorted(p.name for p in out.glob("canvas_*")) == [f"canvas_{i:03d}.png" for i in range(4)]


@pytest.mark.slow
def test_a_codec_without_vectors_runs_on_the_proxy_and_says_so(hevc_clip: Path) -> None:
    options = OnevisionOptions(seq_len_frames=12, num_images=3, square_size=96, topk_mode="time_bucket")
    result = select_onevision(hevc_clip, options=options)
    assert "proxy" in result.decoded.read_mode
    assert result.canvases.images.shape == (3, 96, 96, 3)
    assert result.groups.specs[0].readiness["topk_mode"] == "time_bucket"
