"""llava-ov2's stages on hand-computed inputs: sample count, canvas grid, GOP partition with the valley
search, P-canvas quotas, rank attenuation and the reuse penalty, torch's tie order, the quota packer;
and on a real clip, the decode's race-free vectors and the reference's packet attribution."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers.paths import REAL_CLIPS

from backend.records import Geometry, Groups, GroupSpec, ScoreMaps, VideoInfo
from backend.selectors.llava_ov2.decode import separate_size_pass, stream_flags
from backend.selectors.llava_ov2.geometry import CanvasConfig, block_grid, canvas_geometry
from backend.selectors.llava_ov2.gop import GopConfig, GopInputs, bitcost_bounds, partition, uniform_bounds
from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.quota import (
    QuotaConfig,
    attenuation,
    p_canvas_rows,
    pick_blocks,
    select_gop,
    select_quota,
)
from backend.selectors.llava_ov2.run import select_llava_ov2
from backend.selectors.llava_ov2.sample import LlavaSampleConfig, sample_count, sample_indices
from backend.selectors.llava_ov2.torch_order import std_sort_desc, top_members, topk_members
from native import stream_decode

# ----------------------------------------------------------------------------------- sampling


def test_sample_count_from_the_budget_the_rate_and_the_cap() -> None:
    assert sample_count(100.0, LlavaSampleConfig())[0] == 256  # (32 // 4) × 32
    # 12.6 s × 5 fps = 63 → rounded down to 32 (a warning says so).
    n, warnings = sample_count(12.6, LlavaSampleConfig(target_fps=5.0))
    assert n == 32 and [w.code for w in warnings] == ["sample_count_rounded"]
    # The range, not the video: (9 − 3) × 16 = 96, a multiple of 32.
    assert sample_count(100.0, LlavaSampleConfig(target_fps=16.0, start_time=3.0, end_time=9.0)) == (96, ())
    assert sample_count(100.0, LlavaSampleConfig(max_frames=70))[0] == 64
    assert sample_count(1.0, LlavaSampleConfig(target_fps=1.0))[0] == 32  # never below group_size


def test_sample_indices_round_half_to_even_within_the_range() -> None:
    # linspace(0, 9, 4) = 0, 3, 6, 9; linspace(0, 7, 3) = 0, 3.5, 7 → 3.5 rounds to 4.
    assert sample_indices(10, 30.0, 4, LlavaSampleConfig())[0].tolist() == [0, 3, 6, 9]
    assert sample_indices(8, 30.0, 3, LlavaSampleConfig())[0].tolist() == [0, 4, 7]
    # 1 s to 2 s at 10 fps: frames 10 … 19; linspace(10, 19, 4) = 10, 13, 16, 19.
    ids, _ = sample_indices(100, 10.0, 4, LlavaSampleConfig(start_time=1.0, end_time=2.0))
    assert ids.tolist() == [10, 13, 16, 19]
    # linspace(0, 5, 3) = 0, 2.5, 5: 2.5 rounds to 2 (half to even), not 3.
    assert sample_indices(6, 30.0, 3, LlavaSampleConfig())[0].tolist() == [0, 2, 5]
    ids, warnings = sample_indices(5, 30.0, 32, LlavaSampleConfig())
    assert ids.tolist() == [0, 1, 2, 3, 4] and warnings[0].code == "sample_count_clamped"
    with pytest.raises(ValueError, match="Invalid start time"):
        sample_indices(10, 30.0, 4, LlavaSampleConfig(start_time=2.0))


def test_options_are_lmms_video_utils_codec_config() -> None:
    with pytest.raises(ValueError, match=r"Invalid target canvas \(30\)"):
        LlavaOv2Options(target_canvas=30)
    with pytest.raises(ValueError, match="Invalid min group frames"):
        LlavaOv2Options(min_group_frames=70)
    with pytest.raises(ValueError, match="Invalid score mode"):
        LlavaOv2Options(score_mode="bitcost")
    kwargs = LlavaOv2Options(max_frames=40, start_time=1.5).codec_config()
    assert kwargs["max_frames"] == 40 and kwargs["start_time"] == 1.5 and kwargs["target_fps"] is None


# ----------------------------------------------------------------------------------- geometry


def _info(width: int, height: int) -> VideoInfo:
    empty = np.zeros(0)
    return VideoInfo(
        path="v.mp4", size_bytes=1, format_name="mp4", codec_name="h264", width=width, height=height,
        fps=30.0, total_frames=10, frame_count_source="header", duration_secs=1.0, stream_bit_rate=0,
        format_bit_rate=0, start_pts_secs=0.0, packet_pts_secs=empty,
        packet_size_bytes=empty.astype(np.int64), packet_is_keyframe=empty.astype(bool), stss_keyframes=None,
        has_programs=False,
    )  # fmt: skip


def test_canvas_grid_fits_the_block_budget() -> None:
    # 150000 // 28² = 191 blocks. 16:9: hp = round(√(191 / 1.78)) = 10, wp = round(17.8) = 18.
    assert block_grid(150000, 28, 16 / 9) == (10, 18)
    # 4:3: hp = round(11.97) = 12, wp = 16 → 192 > 191 → wp 15.
    assert block_grid(150000, 28, 4 / 3) == (12, 15)
    assert block_grid(150000, 28, 1.0) == (14, 13)  # 14 × 14 = 196 > 191 → wp 13
    assert block_grid(784, 28, 3.0) == (1, 1)
    parity = canvas_geometry(_info(640, 480), None, config=CanvasConfig(profile="parity"))
    assert parity.geometry.processed_hw == (336, 420) and parity.crop == (0, 0, 480, 640)
    assert [w.code for w in parity.warnings] == ["aspect_bent"]  # 420/336 = 1.25, not 1.33


def test_clean_fits_the_display_aspect_and_crops_the_rest() -> None:
    # 480×360 with SAR 4:3 displays 16:9: the clean grid is 10 × 18 blocks, the parity one 12 × 15.
    clean = canvas_geometry(_info(480, 360), 4 / 3, config=CanvasConfig(profile="clean"))
    assert clean.geometry.processed_hw == (280, 504)
    # Grid 18:10 in display pixels = 1.35 stored width per height: 486 > 480, so rows are cut.
    top, left, h, w = clean.crop
    assert (left, w) == (0, 480) and h == round(480 / (1.8 / (4 / 3))) and top == (360 - h) // 2
    parity = canvas_geometry(_info(480, 360), 4 / 3, config=CanvasConfig(profile="parity"))
    assert parity.geometry.processed_hw == (336, 420)
    assert "sample aspect ratio" in parity.warnings[0].message


# ----------------------------------------------------------------------------------- GOPs


def test_uniform_gops_and_the_frames_parity_drops() -> None:
    assert uniform_bounds(10, 3, 64) == [(0, 4), (4, 7), (7, 10)]
    assert uniform_bounds(20, 2, 6) == [(0, 6), (6, 12)]  # base 10 clipped to 6: frames 12… dropped
    inputs = GopInputs(packet_sizes=np.ones(20, np.int64), pict_types=("P",) * 20)
    cfg = {"target_canvas": 8, "images_per_group": 4, "max_group_frames": 6, "min_group_frames": 2}
    parity = partition(inputs, config=GopConfig(profile="parity", **cfg))
    assert [(s.start, s.end) for s in parity.specs] == [(0, 6), (6, 12)]
    assert parity.dropped_tail == (12, 20) and parity.warnings[0].code == "frames_dropped"
    assert "(lmms-video-utils defect 3)" in parity.warnings[0].message  # cited from its table, not cvp's
    # Clean needs ceil(20 / 6) = 4 GOPs: 5 frames each.
    clean = partition(inputs, config=GopConfig(profile="clean", **cfg))
    assert [(s.start, s.end) for s in clean.specs] == [(0, 5), (5, 10), (10, 15), (15, 20)]
    assert clean.dropped_tail is None and clean.warnings[0].code == "gop_count_raised"


def test_bitcost_gops_cut_at_the_energy_valley() -> None:
    # Energies (I frames count 0). Σ = 44, K = 2 → θ = 22; L_min 4, L_max 8, W = 2.
    e = np.array([0, 6, 6, 6, 1, 6, 3, 6, 2, 8])
    # From 0: running sums 0 6 12 18 19 25 → stops at i = 5 (length 6 ≥ 4, 25 ≥ 22).
    # Valley over [max(0+4−1, 5−2), min(0+8−1, 5+2)] = [3, 7]: energies 6 1 6 3 6 → 1 at 4: cut 4.
    # From 5: 6 9 15 17 25 → stops at i = 9 (length 5, 25 ≥ 22); valley over
    # [max(5+3, 9−2), min(5+7, 9+2, 9)] = [8, 9]: energies 2, 8 → cut 8; the rest, [9, 10), ends it.
    found = bitcost_bounds(e, 2, 4, 8)
    assert [(s, t) for s, t, _ in found] == [(0, 5), (5, 9), (9, 10)]
    assert found[0][2] == {"stop": "energy", "i_k": 5, "cut": 4, "energy": 25, "theta": 22.0}
    # Equal energies: the cut nearest the stop wins, then the earliest.
    flat = bitcost_bounds(np.full(12, 5), 2, 4, 8)
    assert [(s, t) for s, t, _ in flat] == [(0, 6), (6, 12)]
    # The maximum length forces a cut without energy.
    capped = bitcost_bounds(np.array([0, 1, 0, 1, 0, 1, 0, 1, 100, 0]), 1, 2, 4)
    assert capped[0][2]["stop"] == "max length"


def test_bitcost_mode_zeroes_i_frames_and_falls_back_to_uniform() -> None:
    cfg = GopConfig(
        gop_mode="bitcost", target_canvas=8, min_group_frames=2, max_group_frames=8, profile="parity"
    )
    only_i = GopInputs(packet_sizes=np.full(8, 900, np.int64), pict_types=("I",) * 8)
    groups = partition(only_i, config=cfg)
    assert [(s.start, s.end) for s in groups.specs] == [(0, 4), (4, 8)]
    assert groups.warnings[0].code == "gop_energy_missing"


def test_clean_merges_one_frame_gops_into_their_neighbour() -> None:
    inputs = GopInputs(packet_sizes=np.ones(9, np.int64), pict_types=("P",) * 9)
    # 9 frames in K = 8 GOPs: 2, 1, 1, … frames; clean merges every single-frame GOP backwards.
    cfg = {"target_canvas": 32, "images_per_group": 4, "min_group_frames": 1, "max_group_frames": 64}
    parity = partition(inputs, config=GopConfig(profile="parity", **cfg))
    assert [s.frame_count for s in parity.specs] == [2, 1, 1, 1, 1, 1, 1, 1]
    clean = partition(inputs, config=GopConfig(profile="clean", **cfg))
    assert [(s.start, s.end) for s in clean.specs] == [(0, 9)]
    assert clean.specs[0].readiness["merged_one_frame_gop"] == 8


# ----------------------------------------------------------------------------------- quotas


def test_p_canvas_rows_split_the_gop_in_time() -> None:
    # n_g = 32 frames, 31 score rows, P = 3: round(0) … round(10.67) = 11 … round(21.33) = 21 … 31.
    assert p_canvas_rows(32, 3) == [(0, 11), (11, 21), (21, 31)]
    assert p_canvas_rows(10, 3) == [(0, 3), (3, 7), (7, 9)]  # 3.33 → 3, 6.67 → 7, 10 → 9 rows
    assert p_canvas_rows(2, 3) == [(0, 1), (1, 1), (1, 1)]
    assert p_canvas_rows(4, 1) == [(0, 3)]


def test_rank_attenuation_and_the_reuse_penalty_pick_by_hand() -> None:
    assert attenuation(np.array([0, 1, 2, 6], np.float32)).tolist() == pytest.approx(
        [1.0, 1 / math.sqrt(1.5), 1 / math.sqrt(2.0), 0.5]
    )
    # Two frames × 3 blocks, budget 3. Frame 0 ranks 9 > 8 > 1, frame 1 ranks 8.5 > 4 > 2.
    rows = np.array([[9.0, 8.0, 1.0], [4.0, 8.5, 2.0]], np.float32)
    a = [1.0, 1 / math.sqrt(1.5), 1 / math.sqrt(2.0)]
    # Attenuated: frame 0: 9, 8a1 = 6.53, 1a2 = 0.71; frame 1: 4a1 = 3.27, 8.5, 2a2 = 1.41.
    flat, values = pick_blocks(rows, np.zeros(3, bool), 3, torch_order=False)
    assert flat.tolist() == [0, 1, 4]
    assert values.tolist() == pytest.approx([9.0, 8 * a[1], 8.5])
    # Block 0 was used by an earlier P-canvas: ×0.15 → 1.35 and 0.49; now 4a1 = 3.27 (block 0 of
    # frame 1) loses too (×0.15 = 0.49) and frame 1's block 2 (1.41) comes in.
    flat, values = pick_blocks(rows, np.array([True, False, False]), 3, torch_order=False)
    assert flat.tolist() == [1, 4, 5]
    assert values.tolist() == pytest.approx([8 * a[1], 8.5, 2 * a[2]], rel=1e-6)


def test_a_gop_gets_an_i_canvas_frame_and_p_canvases_of_its_time_thirds() -> None:
    # 4 frames (3 score rows), P = 3: p_canvas_rows(4, 3) = (0, 1), (1, 3), (3, 3) — the last is empty.
    rows = np.array([[5, 1], [1, 5], [3, 4]], np.float32)
    sel = select_gop(
        rows,
        np.array([10, 11, 12, 13]),
        group_index=0,
        start=0,
        block_cols=2,
        images_per_group=4,
        torch_order=False,
    )
    assert sel.frame_indices[0] == 10
    a1 = 1 / math.sqrt(1.5)
    # Canvas 1: frame 11's two blocks, 5 and 1·a1. Canvas 2: frames 12 and 13, every position used
    # (×0.15): 1·a1·0.15, 5·0.15 = 0.75, 3·a1·0.15, 4·0.15 = 0.6 → keeps 0.75 and 0.6.
    assert sel.kept.tolist() == [[1, 0, 0], [1, 0, 1], [2, 0, 1], [3, 0, 1]]
    assert sel.kept_canvas.tolist() == [1, 1, 2, 2]
    assert sel.kept_scores.tolist() == pytest.approx([5, a1, 0.75, 0.6])
    assert sel.budget == 6 and sel.candidate_count == 6 and sel.cutoff_score == pytest.approx(0.6)


def test_parity_skips_one_frame_gops_and_the_quota_packer_places_each_canvas() -> None:
    geometry = Geometry(orig_hw=(56, 56), prepared_hw=(56, 56), processed_hw=(56, 56), patch=14, block_size=2)
    n = 5
    scores = ScoreMaps(
        grids=tuple(np.zeros((2, 2), np.float32) for _ in range(n)),
        processed_hw=(56, 56),
        patch_scores=np.zeros((n, 4, 4), np.float32),
        block_scores=np.arange(n * 4, dtype=np.float32).reshape(n, 4),
        iframe_clip_cap=None,
    )
    specs = (GroupSpec(0, 0, 4, "uniform", {}), GroupSpec(1, 4, 5, "uniform", {}))
    groups = Groups(specs, 0.0, {}, (), None)
    ids = np.arange(100, 105)
    selection = select_quota(scores, groups, ids, 2, config=QuotaConfig(images_per_group=2, profile="parity"))
    assert selection.skipped_group_indices == (1,) and selection.warnings[0].code == "gop_skipped"
    (sel,) = selection.groups
    # One P-canvas from frames 101–103 (scores 4…7, 8…11, 12…15; block 3 ranks first in each):
    # attenuated 15, 14/√1.5 = 11.4, 11, 13/√2 = 9.2 beat 10/√1.5 = 8.2 and 7.
    assert sel.kept.tolist() == [[2, 1, 1], [3, 0, 1], [3, 1, 0], [3, 1, 1]]

    from backend.records import DecodedFrames
    from backend.stages.pack import PackConfig, pack

    pixels = np.zeros((n, 56, 56, 3), np.uint8)
    for i in range(n):
        pixels[i] = 10 * i
    decoded = DecodedFrames(
        frame_indices=ids.astype(np.int32), pixels=pixels, grids=scores.grids, grid_key="framediff",
        pict_types=("?",) * n, bitcost_source=ids.astype(np.int32), pixel_source="x",
    )  # fmt: skip
    canvases = pack(selection, decoded, geometry, config=PackConfig(images_per_group=2, packer="quota"))
    assert canvases.images.shape == (2, 56, 56, 3)
    assert (canvases.images[0] == 0).all()  # the I-canvas: frame 100
    # Canvas 1 block slots in raster order get (102, 1, 1), (103, 0, 1), (103, 1, 0), (103, 1, 1).
    assert canvases.images[1, 0, 0, 0] == 20 and canvases.images[1, 0, 28, 0] == 30
    assert canvases.images[1, 28, 0, 0] == 30 and canvases.images[1, 28, 28, 0] == 30
    pos = canvases.src_patch_position.reshape(2, 4, 4, 3)
    assert pos[1, 0, 0].tolist() == [102, 2, 2] and pos[1, 2, 1].tolist() == [103, 2, 1]


# ----------------------------------------------------------------------------------- tie order


def test_torch_tie_order_of_equal_scores() -> None:
    # torch 2.13 CPU argsort(descending) of 20 zeros (recorded): libstdc++ introsort's order.
    assert std_sort_desc(np.zeros(20, np.float32)).tolist() == [10, 19, 18, 17, 16, 15, 14, 13, 12, 11,
                                                                0, 9, 8, 7, 6, 5, 4, 3, 2, 1]  # fmt: skip
    assert std_sort_desc(np.array([1, 0, 1, 0, 2], np.float32)).tolist() == [4, 0, 2, 1, 3]
    # top-k members: 3 of 5 zeros plus a 1 — any correct top-k has the 1; torch's zeros are its own.
    values = np.array([0, 0, 1, 0, 0], np.float32)
    assert 2 in topk_members(values, 3).tolist()
    assert top_members(values, 3, torch_order=False).tolist() == [0, 1, 2]
    # No tie straddles the cut: every method agrees.
    clear = np.array([5, 1, 4, 2, 3], np.float32)
    assert (
        top_members(clear, 2, torch_order=True).tolist() == top_members(clear, 2, torch_order=False).tolist()
    )


# ----------------------------------------------------------------------------------- decode


def test_parity_takes_race_free_vectors_and_the_references_packet_attribution() -> None:
    """Vectors from slice threads (equal to one thread's); sizes as a frame-threaded pass with vectors."""
    clip = REAL_CLIPS / "real_h264_film_friday.mp4"  # H.264 with B-frames, 185 frames

    def decode_config(**opts: object) -> object:
        return LlavaOv2Options(**opts).stage_configs()["decode"]

    both = decode_config(profile="parity", score_mode="mvwarp", gop_mode="bitcost")
    assert stream_flags(both)["frame_threads"] is False and separate_size_pass(both)
    framediff = decode_config(profile="parity", gop_mode="bitcost")
    assert stream_flags(framediff)["frame_threads"] is True and not separate_size_pass(framediff)
    clean = decode_config(profile="clean", score_mode="mvwarp", gop_mode="bitcost")
    assert not separate_size_pass(clean)

    def vectors(**threads: object) -> list[bytes]:
        items = stream_decode.iter_stream(clip, frozenset(range(185)), motion_vectors=True, **threads)
        return [item["mvs"].tobytes() for item in items]

    assert vectors(frame_threads=False) == vectors(frame_threads=False, thread_count=1)
    # The reference's kind of pass: frame threads, vectors exported, every frame decoded.
    reference = [
        item["attributed_size"]
        for item in stream_decode.iter_stream(clip, frozenset({184}), motion_vectors=True, frame_threads=True)
    ]
    sizes = stream_decode.attributed_sizes(clip, 184)
    assert sizes.tolist() == reference and np.count_nonzero(sizes) < 185  # some frames get 0 (defect 2)

    run = select_llava_ov2(
        clip, options=LlavaOv2Options(profile="parity", score_mode="mvwarp", gop_mode="bitcost")
    )
    codes = {w.code for w in run.warnings}
    assert {"motion_vectors_race_free", "packet_size_misattributed"} <= codes


def test_frames_converted_later_on_another_thread_equal_those_converted_at_once() -> None:
    """``rgb_later``: the decode pass hands out each wanted frame's conversion (run on the scoring
    thread, after the decoder has moved on, the last ones after the file is closed)."""
    clip = REAL_CLIPS / "real_h264_film_friday.mp4"
    wanted = frozenset(range(0, 185, 7))
    now = [item["rgb"] for item in stream_decode.iter_stream(clip, wanted) if "rgb" in item]
    later = [item for item in stream_decode.iter_stream(clip, wanted, rgb_later=True) if "to_rgb" in item]
    assert len(now) == len(later) == len(wanted)
    with ThreadPoolExecutor(max_workers=1) as pool:
        converted = list(pool.map(lambda item: item["to_rgb"](), later))
    assert all((item["height"], item["width"]) == rgb.shape[:2] for item, rgb in zip(later, now, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(converted, now, strict=True))
    # A run that scores on its own thread and one that scores inline select the same.
    two = select_llava_ov2(clip, options=LlavaOv2Options(profile="parity", workers=2))
    one = select_llava_ov2(clip, options=LlavaOv2Options(profile="parity", workers=1))
    assert np.array_equal(two.canvases.src_patch_position, one.canvases.src_patch_position)
    assert np.array_equal(two.decoded.pixels, one.decoded.pixels)
