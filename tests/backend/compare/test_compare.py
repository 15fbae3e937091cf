"""Codec comparison: config, encoder settings, lossless reference, metrics and the stored comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.compare_clips import SMALL_OPTIONS, make_comparison

import native
from backend.compare import (
    CODECS,
    CompareConfig,
    compare,
    heatmap_normaliser,
    kept_mask_at,
    load_comparison,
    parse_crf,
)
from backend.compare.config import score_for
from backend.compare.encode import encoder_options, output_size
from backend.compare.metrics import _average_ranks, compare_runs, kept_masks, pair_metrics, spearman
from backend.errors import InputError, StoreError
from backend.pipeline import SelectionOptions, run
from backend.runs import open_run
from backend.store import SessionStore
from native import encode as encode_mod

# Whole comparisons (four encodes each): the end-to-end tier, not the unit tier (--fast).
pytestmark = pytest.mark.slow

FLOWER = "real_h264_flower_timelapse.mp4"


# --------------------------------------------------------------------------- config and settings


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"codecs": ("h264", "mpeg2")}, "Invalid codecs"),
        ({"codecs": ("h264", "h264")}, "distinct"),
        ({"codecs": ()}, "1 to 4"),
        ({"codecs": ["h264"]}, "Invalid codecs"),
        ({"gop": 0}, "Invalid gop (0)"),
        ({"crf_vp9": 64}, "Invalid crf vp9 (64)"),
        ({"crf_av1": 0}, "Invalid crf av1 (0)"),
        ({"speed": "ludicrous"}, "Supported values are 'fast', 'medium', 'slow'"),
        ({"max_side": 8}, "Invalid max side (8)"),
        ({"fallback_score": "bitcost"}, "Invalid fallback score"),
    ],
)
def test_config_rejects_bad_values_and_lists_the_choices(changes, fragment) -> None:
    with pytest.raises(ValueError, match="Supported values") as info:
        CompareConfig(**changes)
    assert fragment in str(info.value)


def test_config_is_frozen_and_keyword_only() -> None:
    cfg = CompareConfig()
    with pytest.raises(AttributeError):
        cfg.gop = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        CompareConfig(("h264",))  # type: ignore[misc]
    assert cfg.codecs == CODECS and cfg.crf("av1") == 35


def test_parse_crf_sets_every_codec_or_named_ones() -> None:
    assert parse_crf("30") == {f"crf_{c}": 30 for c in CODECS}
    assert parse_crf("h264=20, av1=40") == {"crf_h264": 20, "crf_av1": 40}
    with pytest.raises(ValueError, match="Invalid codec \\('vp8'\\)"):
        parse_crf("vp8=3")
    with pytest.raises(ValueError, match="Invalid crf"):
        parse_crf("h264=high")


def test_encoder_options_fix_the_gop_and_record_quality() -> None:
    cfg = CompareConfig(gop=24, bframes=0)
    h264, _ = encoder_options("h264", cfg)
    assert "keyint=24:min-keyint=24:scenecut=0:bframes=0" in h264["x264-params"] and h264["crf"] == "23"
    hevc, _ = encoder_options("hevc", cfg)
    assert "keyint=24" in hevc["x265-params"] and "open-gop=0" in hevc["x265-params"]
    vp9, note = encoder_options("vp9", cfg)
    assert vp9["g"] == vp9["keyint_min"] == "24" and vp9["b"] == "0" and vp9["auto-alt-ref"] == "0"
    assert "no B-frames" in note
    av1, note = encoder_options("av1", cfg)
    assert "keyint=24:scd=0:pred-struct=1" in av1["svtav1-params"] and "low delay" in note
    # B-frames: exact where the codec has them, a hierarchy for AV1 (mini-GOP 4 = 3 B-frames + 1).
    av1_b, note = encoder_options("av1", CompareConfig(bframes=3))
    assert "hierarchical-levels=2" in av1_b["svtav1-params"] and "(= bframes + 1)" in note
    rate, _ = encoder_options("hevc", CompareConfig(bitrate_kbps=400))
    assert rate["b"] == "400k" and "crf" not in rate


def test_output_size_keeps_the_aspect_and_even_sides() -> None:
    assert output_size(960, 540, 0) == (960, 540)
    assert output_size(960, 540, 480) == (480, 270)
    assert output_size(961, 541, 0) == (962, 542)
    assert output_size(1920, 1080, 333) == (334, 188)


@pytest.mark.needs_cvp
def test_av1_gets_the_fallback_signal_and_says_why() -> None:
    assert score_for("h264", CompareConfig()) == ("bitcost", "bitcost (as configured)")
    score, note = score_for("av1", CompareConfig())
    assert score == "residual" and "bitcost unavailable for av1" in note and "residual stands in" in note
    score, note = score_for("hevc", CompareConfig(score="qp", fallback_score="mv"))
    assert score == "mv" and "qp exists for h264, vp9 only" in note


# --------------------------------------------------------------------------- encoding


def test_one_decode_feeds_every_encoder_and_the_reference_is_lossless(real_clips, tmp_path) -> None:
    source = real_clips / FLOWER
    cfg = CompareConfig(gop=4)
    targets = [encode_mod.EncodeTarget(tmp_path / "ref.mp4", "libx264", {"qp": "0", "preset": "ultrafast"})]
    targets += [
        encode_mod.EncodeTarget(tmp_path / f"{c}.mp4", enc, encoder_options(c, cfg)[0])
        for c, enc in (("h264", "libx264"), ("av1", "libsvtav1"))
    ]
    facts, outcomes = encode_mod.transcode(source, targets, width=960, height=540, max_frames=10)
    assert facts.frames == 10 and [o.frames for o in outcomes] == [10, 10, 10]
    src = [f for _, f in zip(range(10), native.iter_rgb(source), strict=False)]
    ref = list(native.iter_rgb(tmp_path / "ref.mp4"))
    assert len(ref) == 10
    for a, b in zip(src, ref, strict=True):
        assert np.array_equal(a, b)  # qp 0: the encoders' input pictures, bit for bit
    for path in (tmp_path / "h264.mp4", tmp_path / "av1.mp4"):
        keys = native.probe_container(path).packet_is_keyframe
        assert np.flatnonzero(keys).tolist() == [0, 4, 8]


# --------------------------------------------------------------------------- metrics


def test_average_ranks_and_spearman() -> None:
    assert _average_ranks(np.array([3.0, 1.0, 1.0])).tolist() == [2.0, 0.5, 0.5]
    assert spearman(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 4.0, 9.0, 16.0])) == pytest.approx(1.0)
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    assert math.isnan(spearman(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0])))
    # With ties it is Pearson's r of the average ranks.
    a, b = np.array([1.0, 2.0, 2.0, 5.0, 3.0]), np.array([2.0, 1.0, 4.0, 4.0, 3.0])
    expected = np.corrcoef(_average_ranks(a), _average_ranks(b))[0, 1]
    assert spearman(a, b) == pytest.approx(expected)


@pytest.fixture(scope="module")
def h264_run(h264_clip):
    return run(h264_clip, options=SelectionOptions(num_sampled_frames=48))


@pytest.mark.needs_cvp
def test_the_jaccard_of_a_run_with_itself_is_one(h264_run) -> None:
    pm = pair_metrics(h264_run, h264_run)
    summary = pm.summary()
    assert summary["jaccard"] == 1.0 and summary["jaccard_frame_mean"] == 1.0
    assert np.all(pm.jaccard[np.isfinite(pm.jaccard)] == 1.0) and np.isfinite(pm.jaccard).any()
    assert summary["spearman_mean"] == pytest.approx(1.0) and summary["spearman_frames"] > 0
    assert np.array_equal(pm.kept_a, pm.kept_both)


@pytest.mark.needs_cvp
def test_kept_masks_hold_anchors_whole_and_kept_blocks(h264_run) -> None:
    masks = kept_masks(h264_run)
    bh, bw = h264_run.geometry.block_grid_hw
    assert masks.shape == (h264_run.info.total_frames, bh, bw)
    for sel in h264_run.selection.groups:
        assert masks[sel.frame_indices[0]].all()  # the anchor's every block is in a canvas
        for t, r, c in sel.kept.tolist():
            assert masks[sel.frame_indices[t], r, c]
    fid = h264_run.selection.groups[0].frame_indices[1]
    assert np.array_equal(kept_mask_at(h264_run, fid), masks[fid])


@pytest.mark.needs_cvp
def test_different_runs_do_not_agree_perfectly(h264_run, h264_clip) -> None:
    other = run(h264_clip, options=SelectionOptions(num_sampled_frames=48, score="residual"))
    (pm,) = compare_runs([h264_run, other])
    assert 0.0 < pm.summary()["jaccard"] < 1.0
    assert pm.frame_index.size == np.unique(h264_run.candidates.frame_indices).size


@pytest.mark.needs_cvp
def test_heatmap_normaliser_scales(h264_run) -> None:
    runs = [h264_run, h264_run]
    frame = heatmap_normaliser(runs, mode="frame")
    assert np.array_equal(frame.grid(runs, 0, 3), h264_run.scores.grids[3])
    video = heatmap_normaliser(runs, mode="video")
    tops = [float(video.grid(runs, 0, r).max()) for r in range(h264_run.candidates.frame_indices.size)]
    assert max(tops) == pytest.approx(1.0) and min(tops) < 1.0  # one run-wide maximum
    shared = heatmap_normaliser(runs, mode="all")
    assert shared.log_max[0] == shared.log_max[1]
    with pytest.raises(ValueError, match="Supported values are frame, video, all"):
        heatmap_normaliser(runs, mode="global")


# --------------------------------------------------------------------------- stored comparisons


@pytest.mark.needs_cvp
@pytest.mark.needs_cvp
@pytest.mark.slow
def test_a_four_codec_comparison_completes_and_stores_its_metrics(real_clips, tmp_path) -> None:
    db = tmp_path / "c.duckdb"
    cfg = CompareConfig(max_frames=48, max_side=480, gop=24)
    comparison = make_comparison(db, real_clips / FLOWER, config=cfg)
    assert [v.codec for v in comparison.variants] == list(CODECS)
    for v in comparison.variants:
        assert v.frame_count == 48 and v.keyframe_indices == (0, 24), v.label
        assert v.score == ("residual" if v.codec == "av1" else "bitcost")
    with SessionStore(db, read_only=True) as store:
        stored = load_comparison(store, comparison.comparison_id)
        assert stored.row["status"] == "done" and stored.labels == [v.label for v in comparison.variants]
        assert stored.row["config"]["gop"] == 24 and stored.row["settings"]["width"] == 480
        assert len(stored.variants) == 4 and len(stored.pairs) == 6 and len(stored.pair_frames) == 6 * 48
        counts = stored.luma.groupby("decoder").size().to_dict()
        assert counts == {"full_decode": 4 * 48, "fast_reader": 3 * 48}
        options = stored.variants["encoder_options_json"].tolist()
        assert all("24" in o for o in options)  # every setting is recorded
        for run_id, v in zip(stored.run_ids, comparison.variants, strict=True):
            row = store.get_run(run_id)
            assert row.status == "done" and row.video_path == v.video_path and row.config["score"] == v.score
        # The stored figures are those of the stored runs: recompute them from the runs.
        results = [open_run(store, r) for r in stored.run_ids]
    again = compare_runs(results)
    for pm, row in zip(again, stored.pairs.to_dict(orient="records"), strict=True):
        assert pm.summary()["jaccard"] == pytest.approx(row["jaccard"])
    jaccards = stored.pairs["jaccard"].to_numpy()
    assert np.all((jaccards > 0) & (jaccards < 1))  # codecs disagree, but not completely
    m = stored.metrics
    assert np.all((m["psnr_y_db"] > 30) & (m["psnr_y_db"] < 60)) and np.all(m["luma_abs_bias_mean"] < 3)
    assert m["reader_psnr_y_db"].isna().tolist() == [False, False, False, True]  # no fast reader for AV1
    assert np.allclose(m["canvases_per_sec"], m["canvases"] / m["duration_secs"])
    assert np.all((m["time_covered_share"] > 0) & (m["time_covered_share"] <= 1))


@pytest.mark.needs_cvp
@pytest.mark.needs_cvp
def test_a_stored_self_comparison_has_jaccard_one_and_no_luma_bias(h264_clip, tmp_path) -> None:
    with SessionStore(tmp_path / "s.duckdb") as store:
        c = compare(h264_clip, store, config=CompareConfig(), options=SMALL_OPTIONS, encoded=[h264_clip] * 2)
        stored = load_comparison(store, c.comparison_id)
    (pair,) = stored.pairs.to_dict(orient="records")
    assert pair["jaccard"] == 1.0 and pair["spearman_mean"] == pytest.approx(1.0)
    frames = stored.pair_frames
    kept = frames["kept_a"] > 0
    assert kept.any() and np.all(frames["jaccard"][kept] == 1.0)
    assert frames["jaccard"][~kept].isna().all()  # nothing kept on either side: undefined, not 1
    assert np.all(frames["kept_a"] == frames["kept_both"])
    full = stored.luma[stored.luma["decoder"] == "full_decode"]
    assert len(full) == 2 * 96 and np.all(full["luma_bias"] == 0.0) and np.all(np.isinf(full["psnr_y_db"]))
    assert stored.variants["encoder"].isna().all() and stored.row["reference_path"] == str(h264_clip)


@pytest.mark.needs_cvp
def test_a_failed_comparison_is_recorded_and_refused_on_load(h264_clip, tmp_path) -> None:
    with SessionStore(tmp_path / "s.duckdb") as store:
        with pytest.raises(InputError, match="does not exist"):
            compare(
                h264_clip,
                store,
                config=CompareConfig(),
                options=SMALL_OPTIONS,
                encoded=[h264_clip, tmp_path / "missing.mp4"],
            )
        (row,) = store.list_comparisons()
        assert row["status"] == "failed" and "missing.mp4" in row["error"]
        with pytest.raises(StoreError, match="failed"):
            load_comparison(store, row["comparison_id"])
        with pytest.raises(ValueError, match="Invalid profile \\('parity'\\)"):
            compare(h264_clip, store, config=CompareConfig(), options=SelectionOptions(profile="parity"))
