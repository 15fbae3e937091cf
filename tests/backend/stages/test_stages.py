"""Unit tests of each pipeline stage on hand-computable inputs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from backend.config import option_of
from backend.imaging import upsample
from backend.pipeline import SelectionOptions
from backend.records import (
    Candidates,
    DecodedFrames,
    FrameQuality,
    Geometry,
    Groups,
    GroupSpec,
    ScoreMaps,
    VideoInfo,
)
from backend.stages.geometry import GeometryConfig, resolve_geometry, smart_resize
from backend.stages.group import GroupConfig, block_budget, build_groups, window_stats
from backend.stages.keyframes import KeyframeConfig, avoid_keyframes
from backend.stages.pack import PackConfig, pack
from backend.stages.sample import SampleConfig, linspace_int, sample
from backend.stages.score import ScoreConfig, normalise_grid, patch_and_block_sums, score_frames
from backend.stages.select import SelectConfig, select_blocks, select_group, top_k


def make_info(
    total: int = 240,
    *,
    fps: float = 30.0,
    keyframes: tuple[int, ...] = (0, 60, 120, 180),
    width: int = 640,
    height: int = 360,
    codec: str = "h264",
    stss: bool = True,
) -> VideoInfo:
    """A VideoInfo for a clip with one packet per frame."""
    is_key = np.zeros(total, dtype=bool)
    keyframes = tuple(k for k in keyframes if k < total)
    is_key[list(keyframes)] = True
    return VideoInfo(
        path="synthetic.mp4",
        size_bytes=1,
        format_name="mov,mp4",
        codec_name=codec,
        width=width,
        height=height,
        fps=fps,
        total_frames=total,
        frame_count_source="header",
        duration_secs=total / fps,
        stream_bit_rate=339472,
        format_bit_rate=0,
        start_pts_secs=0.0,
        packet_pts_secs=np.arange(total) / fps,
        packet_size_bytes=np.full(total, 1000, np.int64),
        packet_is_keyframe=is_key,
        stss_keyframes=keyframes if stss else None,
        has_programs=False,
    )


# --- geometry ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hw", "kwargs", "expected"),
    [
        ((360, 640), {}, (280, 504)),
        ((720, 1280), {}, (280, 504)),
        ((1080, 1920), {}, (280, 504)),
        ((480, 854), {}, (280, 504)),
        ((1920, 1080), {}, (504, 280)),
        ((100, 100), {}, (112, 112)),
        ((300, 500), {}, (308, 504)),
        ((360, 640), {"max_pixels": 1_000_000}, (364, 644)),
        ((360, 640), {"factor": 42}, (294, 504)),
    ],
)
def test_smart_resize_matches_spec_examples(hw, kwargs, expected):
    args = {"factor": 28, "min_pixels": 3136, "max_pixels": 153664} | kwargs
    assert smart_resize(*hw, **args) == expected


def test_double_resize_only_in_parity():
    info = make_info(width=500, height=300)
    parity = resolve_geometry(info, config=GeometryConfig(profile="parity"))
    clean = resolve_geometry(info, config=GeometryConfig(profile="clean"))
    assert parity.prepared_hw == (308, 504) and parity.processed_hw == (280, 476)
    assert clean.prepared_hw == clean.processed_hw == (280, 476)
    assert parity.grid_hw == (20, 34) and parity.block_grid_hw == (10, 17)


def test_geometry_rejects_tiny_frames():
    with pytest.raises(ValueError, match="too small"):
        resolve_geometry(make_info(width=2, height=2), config=GeometryConfig())


def test_config_errors_name_value_and_choices():
    with pytest.raises(
        ValueError,
        match=r"Invalid grouping mode \('adaptive_gop'\). Supported values are 'readiness', 'fixed'",
    ):
        SelectionOptions(grouping_mode="adaptive_gop")
    with pytest.raises(ValueError, match=r"Invalid patch \(0\)"):
        GeometryConfig(patch=0)
    with pytest.raises(TypeError):
        GeometryConfig(14)  # keyword-only


def test_selection_options_agree_with_the_stage_configs_they_feed():
    # Each option a stage consumes must default, validate and read as that stage declares it;
    # the profile and workers are run-wide and described on their own.
    from backend.pipeline import STAGES

    options = {f.name: f for f in dataclasses.fields(SelectionOptions)}
    helps: dict[str, set[str]] = {}
    for stage in STAGES.values():
        for field in dataclasses.fields(stage.config_class):
            if field.name not in options or field.name in ("profile", "workers"):
                continue
            mine = options[field.name]
            assert mine.default == field.default, (stage.name, field.name)
            for key in ("choices", "min", "max"):
                assert mine.metadata[key] == field.metadata[key], (stage.name, field.name, key)
            helps.setdefault(field.name, set()).add(field.metadata["help"])
    assert len(helps) >= 18, sorted(helps)
    for name, stage_helps in helps.items():  # the help a stage wrote, not a second text
        assert options[name].metadata["help"] in stage_helps, name
    with pytest.raises(ValueError, match=r"Invalid option \('nope'\)"):
        option_of(GroupConfig, "nope")


# --- sampling and keyframes ---------------------------------------------------------------------


def test_linspace_int_truncates_and_keeps_last():
    assert linspace_int(0, 239, 5).tolist() == [0, 59, 119, 179, 239]
    assert linspace_int(0, 10, 1).tolist() == [0]


def test_uniform_count_keeps_duplicates():
    ids = sample(make_info(10), config=SampleConfig(num_sampled_frames=16)).frame_indices
    # 16 steps of 9/15 = 0.6 from 0 to 9, truncated (rounding would give 0, 1, 1, 2, 2, 3 …)
    assert ids.tolist() == [0, 0, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6, 7, 7, 8, 9]


def test_fps_sampling_rounds_half_to_even():
    ids = sample(make_info(240), config=SampleConfig(frame_sampling_mode="fps", sample_fps=4.0)).frame_indices
    assert ids[:8].tolist() == [0, 8, 15, 22, 30, 38, 45, 52]
    assert ids.size == 32


def test_pkt_peak_alias_depends_on_profile():
    assert SampleConfig(frame_sampling_mode="pkt_peak", profile="parity").effective_mode == "fps"
    assert SampleConfig(frame_sampling_mode="pkt_peak", profile="clean").effective_mode == "pkt_size_peak"


def test_packet_peaks_find_the_big_packets():
    info = make_info(120, keyframes=(0,))
    sizes = info.packet_size_bytes.copy()
    sizes[45] = 200_000  # bin 3 (1.5–2.0 s)
    info = VideoInfo(**{**info.__dict__, "packet_size_bytes": sizes})
    cfg = SampleConfig(frame_sampling_mode="pkt_size_peak", pkt_peak_per_sec=0.25, pkt_peak_smooth_bins=0)
    ids = sample(info, config=cfg).frame_indices
    assert ids.tolist() == [52]  # centre of bin 3 = 1.75 s → frame round(52.5) = 52


def _candidates(info: VideoInfo, ids: list[int], **cfg) -> Candidates:
    sampled = sample(info, config=SampleConfig(num_sampled_frames=len(ids)))
    sampled = type(sampled)(frame_indices=np.asarray(ids, np.int32), debug=sampled.debug)
    return avoid_keyframes(sampled, info, config=KeyframeConfig(profile="parity", **cfg))


def test_keyframe_shift_prefers_forward_neighbour():
    info = make_info(20, keyframes=(0, 10))
    cand = _candidates(info, [0, 5, 10, 15])
    assert cand.frame_indices.tolist() == [1, 5, 11, 15]
    assert cand.moved == ((0, 1), (10, 11))


def test_keyframe_refill_uses_nearest_free_frames_then_sorts():
    info = make_info(10, keyframes=(0,))
    cand = _candidates(info, [0, 1, 2])  # 0 → 1 collides with 1
    assert cand.frame_indices.tolist() == [1, 2, 3]


def test_dense_sampling_returns_all_frames_keyframes_included_without_a_warning():
    # N ≥ frame count: every keyframe is moved to its neighbour, then the refill puts it back
    # (cvp quirk 10). The record says both; nothing stayed, so keyframes_kept does not fire.
    info = make_info(240)
    sampled = sample(info, config=SampleConfig(num_sampled_frames=1024))
    for profile in ("parity", "clean"):
        cand = avoid_keyframes(sampled, info, config=KeyframeConfig(profile=profile))
        assert cand.frame_indices.tolist() == list(range(240))
        assert cand.moved and {a for a, _ in cand.moved} == {0, 60, 120, 180}
        assert all(b == a + 1 for a, b in cand.moved)
        assert cand.stayed_keyframes == ()
        assert cand.refilled_keyframes == (0, 60, 120, 180)
        assert not [w for w in cand.warnings if w.code == "keyframes_kept"]


def test_a_keyframe_with_no_free_neighbour_stays_and_is_named():
    # Frames 0-4 are keyframes: 0 has no non-keyframe within ±4 and stays; 1 moves to 5.
    info = make_info(10, keyframes=(0, 1, 2, 3, 4))
    cand = _candidates(info, [0, 1, 8])
    assert cand.frame_indices.tolist() == [0, 5, 8]
    assert cand.moved == ((1, 5),)
    assert cand.stayed_keyframes == (0,) and cand.refilled_keyframes == ()
    (warning,) = [w for w in cand.warnings if w.code == "keyframes_kept"]
    assert warning.message.startswith("keyframe 0 stayed") and "±4" in warning.message
    # With N ≥ frame count the same keyframe stays, the others come back by the refill.
    sampled = sample(info, config=SampleConfig(num_sampled_frames=16))
    dense = avoid_keyframes(sampled, info, config=KeyframeConfig(profile="clean"))
    assert dense.frame_indices.tolist() == list(range(10))
    assert dense.stayed_keyframes == (0,)
    assert set(dense.refilled_keyframes) == {1, 2, 3, 4}
    (warning,) = [w for w in dense.warnings if w.code == "keyframes_kept"]
    assert "keyframe 0 " in warning.message and "1" not in warning.message.split("despite")[0][9:]


def test_vp9_parity_warns_once_that_avoidance_is_inactive():
    info = make_info(30, keyframes=(0, 20), codec="vp9", stss=False)
    cand = _candidates(info, [0, 10, 20])
    assert cand.stayed_keyframes == (0, 10, 20)
    assert [w.code for w in cand.warnings] == ["vp9_keyframes_all"]


def test_avoidance_off_passes_ids_through():
    info = make_info(20, keyframes=(0, 10))
    cand = _candidates(info, [0, 10], avoid_keyframes=False)
    assert cand.frame_indices.tolist() == [0, 10] and cand.moved == ()


def test_vp9_keyframes_parity_lists_every_frame_clean_reads_bitstream():
    from backend.stages.keyframes import keyframe_list

    info = make_info(30, keyframes=(0, 20), codec="vp9", stss=False)
    assert keyframe_list(info, profile="parity") == tuple(range(30))
    assert keyframe_list(info, profile="clean") == (0, 20)


# --- scores ------------------------------------------------------------------------------------


def test_percentile_normalisation_by_hand():
    grid = np.array([[0, 1, 3, 7]], dtype=np.int32)
    out = normalise_grid(grid, percentile=50.0, log_scale=False)
    # p50 of [0, 1, 3, 7] = 2.0 → [0, .5, 1.5, 3.5] clipped to [0, 1]
    assert out.dtype == np.float32 and out.tolist() == [[0.0, 0.5, 1.0, 1.0]]
    logged = normalise_grid(np.array([[-5, np.e - 1]]), percentile=100.0)
    assert logged.tolist() == [[0.0, 1.0]]  # negatives clamp to 0 before log1p


def _three_frames(pict_types: tuple[str, ...]) -> DecodedFrames:
    grids = (
        np.array([[1.0, 0.9], [0.2, 0.0]], np.float32),
        np.array([[0.1, 0.2], [0.3, 0.4]], np.float32),
        np.array([[0.5, 0.6], [0.7, 0.8]], np.float32),
    )
    return DecodedFrames(
        frame_indices=np.arange(3, dtype=np.int32),
        pixels=np.zeros((3, 4, 4, 3), np.uint8),
        grids=grids,
        grid_key="mb_bit_cost",
        pict_types=pict_types,
        bitcost_source=np.arange(3, dtype=np.int32),
        pixel_source="fast_reader",
    )


def test_iframe_clip_caps_i_maps_at_a_percentile_of_the_others_by_hand():
    # Maps used as given (normalisation none), 2×2 cells stretched over 4×4 pixels, one block
    # of 2×2 pixels per cell. The P maps hold 0.1 … 0.8, four pixels each: the p50 of those
    # 32 values lies halfway between the 16th (0.4) and 17th (0.5), so the cap is 0.45.
    config = ScoreConfig(
        normalisation="none", iframe_score_clip_mode="non_i_percentile", iframe_score_clip_percentile=50.0
    )
    scores = score_frames(_three_frames(("I", "P", "P")), TINY, config=config)
    assert scores.iframe_clip_cap == pytest.approx(0.45)
    assert scores.block_scores[0] == pytest.approx([4 * 0.45, 4 * 0.45, 4 * 0.2, 0.0])
    assert scores.block_scores[1] == pytest.approx([0.4, 0.8, 1.2, 1.6])  # P maps untouched
    assert scores.block_scores[2] == pytest.approx([2.0, 2.4, 2.8, 3.2])
    debug = scores.debug["iframe_score_clip_debug"]
    assert (debug["applied"], debug["iframe_count"], debug["changed_pixels"]) == (True, 1, 8)
    # Without an I frame (or without any other frame) nothing is capped.
    unclipped = score_frames(_three_frames(("P", "P", "P")), TINY, config=config)
    assert unclipped.iframe_clip_cap is None
    assert unclipped.block_scores[0] == pytest.approx([4.0, 3.6, 0.8, 0.0])
    assert unclipped.debug["iframe_score_clip_debug"]["applied"] is False


def test_upsample_is_nearest_and_sums_are_exact():
    grid = np.array([[1, 0], [0, 2]], np.float32)
    m = upsample(grid, (4, 4))
    assert m.tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 2, 2], [0, 0, 2, 2]]
    patches, blocks = patch_and_block_sums(m, patch=1, block_size=2)
    assert blocks.tolist() == [4.0, 0.0, 0.0, 8.0]
    patches, blocks = patch_and_block_sums(m, patch=2, block_size=1)
    assert patches.tolist() == [[4.0, 0.0], [0.0, 8.0]]


# --- top-K and readiness -----------------------------------------------------------------------


def test_top_k_ties_follow_argpartition_and_order_by_score():
    scores = np.array([3, 1, 3, 3, 2, 3], np.float32)
    idx = top_k(scores, 3)
    expected = np.argpartition(-scores, kth=2)[:3]
    assert sorted(idx.tolist()) == sorted(expected.tolist())
    assert all(scores[i] == 3 for i in idx)
    assert top_k(scores, 6)[0] in (0, 2, 3, 5) and scores[top_k(scores, 6)[-1]] == 1
    # Nine of ten with seven tied zeros for six places: introselect keeps frame 7 and leaves out
    # frame 4, where a stable sort would keep 4 (cvp's rule; the spec counts 248–1988 rows that
    # change when the tie rule does). Written out, not recomputed with argpartition.
    ties = np.array([1, 1, 0, 0, 0, 0, 0, 0, 2, 1], np.float32)
    kept = top_k(ties, 9)
    assert sorted(kept.tolist()) == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert kept[0] == 8 and sorted(kept[1:4].tolist()) == [0, 1, 9]  # best first
    assert np.all(np.diff(ties[kept]) <= 0)


def test_window_stats_sum_and_coverage():
    blocks = np.array([[9, 9], [1, 5], [4, 0], [0, 6]], np.float32)  # row 0 = anchor
    st = window_stats(blocks, budget=3, bins=3)
    assert st["topk_candidate_block_score_sum"] == 15.0  # 6 + 5 + 4, anchor excluded
    assert st["selected_t_rel"] == [1, 2, 3]
    assert st["selected_time_bins"] == 3  # edges linspace_int(1, 4, 4) = [1, 2, 3, 4]
    assert window_stats(blocks, budget=0, bins=3)["topk_candidate_block_score_sum"] == 0.0


def _scores(block_rows: np.ndarray) -> ScoreMaps:
    n = block_rows.shape[0]
    return ScoreMaps(
        grids=tuple(np.zeros((1, 1), np.float32) for _ in range(n)),
        processed_hw=(4, 4),
        patch_scores=np.zeros((n, 4, 4), np.float32),
        block_scores=block_rows.astype(np.float32),
        iframe_clip_cap=None,
    )


def _range_candidates(n: int) -> Candidates:
    """Candidates 0 … n−1 with no keyframe handling."""
    ids = np.arange(n, dtype=np.int32)
    return Candidates(frame_indices=ids, sampled_frame_indices=ids, keyframe_indices=(), moved=(), debug={})


TINY = Geometry(orig_hw=(4, 4), prepared_hw=(4, 4), processed_hw=(4, 4), patch=1, block_size=2)


def test_readiness_stops_on_low_gain_and_drops_tail_in_parity():
    # 4 blocks per frame; ipg 2 → budget (32 − 16) / 4 = 4 blocks.
    n = 14
    rows = np.zeros((n, 4), np.float32)
    rows[1:5] = [[10, 0, 0, 0]] * 4  # frames 1–4 carry the score; later frames add nothing
    info = make_info(n, keyframes=(0,))
    cand = _range_candidates(n)
    cfg = dict(
        images_per_group=2,
        min_group_frames=4,
        max_group_frames=8,
        readiness_sum_threshold_mode="fixed",
        readiness_sum_threshold=20.0,
        readiness_coverage_bins=1,
    )
    assert block_budget(TINY, 2) == 4
    groups = build_groups(info, cand, _scores(rows), TINY, config=GroupConfig(profile="parity", **cfg))
    # end=4: sum 30 ≥ 20 → first pass (ratio 1.0); end=5: sum 40, gain 33% → continue;
    # end=6: sum 40, gain 0% < 5% → stop, end 6 included.
    first = groups.specs[0]
    assert (first.start, first.end, first.stop_reason) == (
        0,
        6,
        "readiness_threshold_low_gain",
    )
    steps = [s for s in groups.trace if s.group_index == 0]
    assert [s.end for s in steps] == [4, 5, 6] and steps[-1].decision == "stop"
    assert steps[0].marginal_gain == 1.0 and steps[1].topk_sum == 40.0
    # Group 2 (6–13): nothing passes the threshold → max_group_frames (6+8 = 14 = n → tail_flush).
    assert groups.specs[1].stop_reason == "tail_flush" and groups.specs[1].end == 14
    assert groups.dropped_tail is None


def _readiness(rows: np.ndarray, **cfg) -> Groups:
    """Parity readiness with a fixed threshold; by default ipg 2 (budget 4), groups of 4–8, 1 bin."""
    n = rows.shape[0]
    cfg = {
        "images_per_group": 2,
        "min_group_frames": 4,
        "max_group_frames": 8,
        "readiness_coverage_bins": 1,
    } | cfg
    config = GroupConfig(profile="parity", readiness_sum_threshold_mode="fixed", **cfg)
    return build_groups(
        make_info(n, keyframes=(0,)), _range_candidates(n), _scores(rows), TINY, config=config
    )


def test_readiness_keeps_growing_while_the_gain_is_high_until_max_group_frames():
    # Frame i scores 2**i in one block, budget 4 blocks (ipg 2), anchor row excluded: the
    # top-4 sum doubles with every frame, so each window passes and the gain never drops.
    rows = np.zeros((20, 4), np.float32)
    rows[:, 0] = 2.0 ** np.arange(20)
    groups = _readiness(rows, readiness_sum_threshold=1.0)
    first = groups.specs[0]
    assert (first.start, first.end, first.stop_reason) == (0, 8, "readiness_threshold")
    steps = [s for s in groups.trace if s.group_index == 0]
    assert [s.end for s in steps] == [4, 5, 6, 7, 8]
    assert [s.topk_sum for s in steps] == [2 + 4 + 8, 2 + 4 + 8 + 16, 4 + 8 + 16 + 32, 8 + 16 + 32 + 64, 240]
    assert all(s.passed and s.decision == "continue" for s in steps)


def test_readiness_cuts_at_max_group_frames_when_nothing_passes():
    groups = _readiness(np.ones((20, 4), np.float32), readiness_sum_threshold=1e9)
    assert [(g.start, g.end, g.stop_reason) for g in groups.specs] == [
        (0, 8, "max_group_frames"),
        (8, 16, "max_group_frames"),
        (16, 20, "tail_flush"),  # the last window reaches the end of the candidates
    ]
    assert all(not s.passed and "< threshold" in s.reason for s in groups.trace)


def test_readiness_needs_its_time_bins_covered():
    # ipg 4: budget 3 frames' blocks (12), and the top 12 must touch 3 time bins. Bins of a
    # 16-frame window are t in [1, 6), [6, 11), [11, 16); the top 12 are frames 1–3, all in the
    # first bin, so the sum passes but the coverage does not.
    rows = np.ones((40, 4), np.float32)
    rows[1:4] = 10.0
    groups = _readiness(
        rows,
        images_per_group=4,
        min_group_frames=16,
        max_group_frames=16,
        readiness_sum_threshold=1.0,
        readiness_coverage_bins=3,
    )
    first = groups.specs[0]
    assert (first.start, first.end, first.stop_reason) == (0, 16, "max_group_frames")
    step = next(s for s in groups.trace if s.group_index == 0)
    assert (step.topk_sum, step.covered_bins, step.needed_bins, step.passed) == (120.0, 1, 3, False)
    assert step.reason == "only 1 of 3 time bins covered"


def test_readiness_tail_parity_drops_clean_merges():
    n = 11
    rows = np.ones((n, 4), np.float32)
    info = make_info(n, keyframes=(0,))
    cand = _range_candidates(n)
    cfg = dict(
        images_per_group=2,
        min_group_frames=4,
        max_group_frames=8,
        readiness_sum_threshold_mode="fixed",
        readiness_sum_threshold=1e9,
    )
    parity = build_groups(info, cand, _scores(rows), TINY, config=GroupConfig(profile="parity", **cfg))
    clean = build_groups(info, cand, _scores(rows), TINY, config=GroupConfig(profile="clean", **cfg))
    assert [(s.start, s.end) for s in parity.specs] == [(0, 8)]
    assert parity.dropped_tail == (8, 11) and parity.warnings[0].code == "tail_dropped"
    assert [(s.start, s.end, s.stop_reason) for s in clean.specs] == [(0, 11, "tail_merged")]


def test_parity_min_group_frames_below_four_groups_as_four_and_warns():
    # cvp accepts min_group_frames 1 and runs 4 (spec §11.1): same groups, trace and tail as 4.
    rows = np.ones((11, 4), np.float32)
    rows[:, 0] = np.arange(11)
    low, four = (_readiness(rows, min_group_frames=m, readiness_sum_threshold=5.0) for m in (1, 4))
    assert low.specs == four.specs and low.trace == four.trace and low.dropped_tail == four.dropped_tail
    assert [w.code for w in low.warnings] == ["group_limits_raised"] + [w.code for w in four.warnings]
    assert low.warnings[0].message == "min_group_frames 1 ran as 4 (cvp, spec §11.1)"


# --- selection and packing ---------------------------------------------------------------------


def test_anchor_swap_skips_bad_first_frame():
    blocks = np.array([[0, 0, 0, 0], [1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
    sel = select_group(
        np.array([10, 11, 12]),
        blocks,
        np.array([False, True, True]),
        group_index=0,
        start=0,
        budget=2,
        block_cols=2,
    )
    assert sel.frame_indices == (11, 10, 12) and sel.anchor_swapped_with == 1
    # The bad frame moved to t=1 and is not a candidate: both blocks come from frame 12 (t=2).
    assert sel.kept.tolist() == [[2, 1, 0], [2, 1, 1]]


def test_packing_order_and_token_records():
    # 4×4 frames, patch 1, block 2: S = 16, 4 blocks per canvas; ipg 2 → budget 4.
    n = 3
    pixels = np.zeros((n, 4, 4, 3), np.uint8)
    for r in range(n):
        pixels[r] = (np.arange(16).reshape(4, 4) + 50 * r)[..., None]
    frames = np.array([7, 9, 8], np.int32)  # t=1 is frame 9, t=2 is frame 8
    blocks = np.array([[0, 0, 0, 0], [5, 0, 0, 4], [0, 6, 3, 0]], np.float32)
    decoded = DecodedFrames(
        frame_indices=frames,
        pixels=pixels,
        grids=(None,) * n,
        grid_key="mb_bit_cost",
        pict_types=("I", "P", "P"),
        bitcost_source=frames.copy(),
        pixel_source="fast_reader",
    )
    cand = Candidates(
        frame_indices=frames, sampled_frame_indices=frames, keyframe_indices=(), moved=(), debug={}
    )
    groups = Groups((GroupSpec(0, 0, 3, "fixed_group_size", {}),), 0.0, {}, (), None)
    selection = select_blocks(
        cand,
        _scores(blocks),
        FrameQuality(np.ones(n, bool), ("",) * n),
        groups,
        TINY,
        config=SelectConfig(images_per_group=2),
    )
    canv = pack(selection, decoded, TINY, config=PackConfig(images_per_group=2))
    assert canv.images.shape == (2, 4, 4, 3)
    assert np.array_equal(canv.images[0], pixels[0])  # the anchor canvas is the anchor frame
    # Kept: frame 9 blocks (0,0),(1,1); frame 8 blocks (0,1),(1,0). Packed by frame id: 8 first.
    src = canv.src_patch_position
    assert src.shape == (32, 3) and src.dtype == np.int32
    canvas1 = src[16:].reshape(4, 4, 3)
    assert canvas1[0, 0].tolist() == [8, 0, 2]  # slot 0 ← frame 8 block (0,1)
    assert canvas1[0, 2].tolist() == [8, 2, 0]  # slot 1 ← frame 8 block (1,0)
    assert canvas1[2, 0].tolist() == [9, 0, 0]  # slot 2 ← frame 9 block (0,0)
    assert canvas1[3, 3].tolist() == [9, 3, 3]  # slot 3 ← frame 9 block (1,1), bottom-right patch
    # Round trip: every valid token's canvas pixel equals its source pixel.
    tok = canv.tokens
    rows = {7: 0, 9: 1, 8: 2}
    for fid, pr, pc, ci, qr, qc, gi, valid in tok.tolist():
        assert valid == 1 and gi == 0
        assert canv.images[ci, qr, qc, 0] == pixels[rows[fid], pr, pc, 0]


def test_packing_pads_with_minus_one_rows():
    n = 2
    pixels = np.full((n, 4, 4, 3), 9, np.uint8)
    frames = np.array([0, 1], np.int32)
    blocks = np.array([[0, 0, 0, 0], [1, 0, 0, 0]], np.float32)
    decoded = DecodedFrames(
        frame_indices=frames,
        pixels=pixels,
        grids=(None,) * n,
        grid_key="mb_bit_cost",
        pict_types=("I", "P"),
        bitcost_source=frames.copy(),
        pixel_source="fast_reader",
    )
    cand = Candidates(
        frame_indices=frames, sampled_frame_indices=frames, keyframe_indices=(), moved=(), debug={}
    )
    groups = Groups((GroupSpec(0, 0, 2, "tail_flush", {}),), 0.0, {}, (), None)
    good = FrameQuality(np.array([True, False]), ("", "black"))
    selection = select_blocks(
        cand, _scores(blocks), good, groups, TINY, config=SelectConfig(images_per_group=2)
    )
    canv = pack(selection, decoded, TINY, config=PackConfig(images_per_group=2))
    assert (canv.src_patch_position[16:] == -1).all() and canv.tokens[16:, 7].sum() == 0
    assert (canv.images[1] == 0).all()
    assert any(w.code == "group_padded" for w in selection.warnings)


# --- bad frames --------------------------------------------------------------------------------


def test_bad_frame_rules_by_hand():
    from backend.stages.quality import QualityConfig, frame_bad_reason, luma

    cfg = QualityConfig()
    rng = np.random.default_rng(3)
    noisy = rng.integers(0, 256, (28, 28, 3), dtype=np.uint8)
    assert frame_bad_reason(noisy, cfg) == ""
    assert frame_bad_reason(np.full((28, 28, 3), 5, np.uint8), cfg) == "black"
    assert frame_bad_reason(np.full((28, 28, 3), 120, np.uint8), cfg) == "solid"
    greenish = np.zeros((28, 28, 3), np.uint8)
    greenish[:, :12] = (30, 200, 40)  # 12/28 = 43 % of pixels G≥180, R≤90, B≤90
    greenish[:, 12:] = noisy[:, 12:]
    assert frame_bad_reason(greenish, cfg) == "green"
    dominant = np.zeros((28, 28, 3), np.uint8)
    dominant[..., 0], dominant[..., 2] = 100, 100
    dominant[..., 1] = 200 + (np.arange(28) % 20)[None, :]
    assert frame_bad_reason(dominant, cfg) == "green"  # mean G 209.5 − 100 > 80, std G < 50
    # Luma is OpenCV's fixed-point BT.601: (4899 R + 9617 G + 1868 B + 8192) >> 14.
    px = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [10, 20, 30]]], np.uint8)
    expected = [(4899 * r + 9617 * g + 1868 * b + 8192) >> 14 for r, g, b in px[0].astype(int).tolist()]
    assert luma(px)[0].tolist() == expected


@pytest.mark.parametrize("kind", ["distinct", "ties", "zeros"])
def test_incremental_readiness_window_equals_the_exact_one(kind):
    from backend.stages.group import _GrowingWindow

    rng = np.random.default_rng(7)
    blocks = {
        "distinct": rng.random((70, 40)).astype(np.float32),
        "ties": np.round(rng.random((70, 40)) * 3).astype(np.float32),  # ties at the k-th place
        "zeros": np.zeros((30, 20), np.float32),
    }[kind]
    for budget in (3, 40, 500, 5000):
        for start in (0, 5):
            grow = _GrowingWindow(blocks, start, budget=budget, bins=3)
            for end in range(start + 4, min(len(blocks), start + 64) + 1):
                assert grow.stats(end) == window_stats(blocks[start:end], budget=budget, bins=3)


def test_versions_are_the_installed_ones():
    # The version strings are read without importlib.metadata (start-up cost); check them against it.
    from importlib.metadata import PackageNotFoundError, version

    import backend
    import native

    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert f'version = "{backend.__version__}"' in pyproject
    try:
        cvp = version("codec-video-prep")
    except PackageNotFoundError:
        cvp = None
    assert native.versions()["codec_video_prep"] == (cvp if native.bitcost_reader_available() else None)


def test_percentile_linear_is_numpys_percentile_bit_for_bit():
    from backend.stages.score import percentile_linear

    rng = np.random.default_rng(7)
    for trial in range(1500):
        n = int(rng.integers(1, 2000))
        values = [
            rng.random(n).astype(np.float32) * 10,
            np.log1p(rng.integers(0, 50, n).astype(np.float32)),  # log1p of bitcost-like integers
            rng.integers(0, 3, n).astype(np.float32),  # heavy ties
            rng.normal(0, 1e6, n),  # float64
        ][trial % 4].reshape((1, -1) if trial % 2 else (-1,))
        for q in (0.0, 1.0, 50.0, 95.0, 99.0, 100.0, float(rng.random() * 100)):
            assert percentile_linear(values, q) == float(np.percentile(values, q)), (n, q, values.dtype)
