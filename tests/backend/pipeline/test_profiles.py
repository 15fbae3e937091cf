"""The parity profile reproduces cvp's defects and records them; the clean profile fixes them."""

from __future__ import annotations

import json

import av
import numpy as np
import pytest
from helpers.clips import encode_clip

import native
from backend.cvp_format import write_output
from backend.errors import BitcostUnavailableError
from backend.pipeline import SelectionOptions, run
from backend.stages.probe import ProbeConfig, probe

# Whole runs of each profile over encoded clips: the end-to-end tier, not the unit tier (--fast).
pytestmark = [pytest.mark.needs_cvp, pytest.mark.slow]

SHARED_CLIPS = [
    "real_h264_flower_timelapse.mp4",
    "real_h264_film_friday.mp4",
    "real_h264_static_parkinglot.mp4",
    "real_hevc_bbb_1080p.ts",
]


def codes(result) -> list[str]:
    return [w.code for w in result.warnings]


@pytest.mark.slow  # a clean run over the whole 1080p clip
def test_hevc_ts_fails_in_parity_and_runs_clean(real_clips):
    video = real_clips / "real_hevc_bbb_1080p.ts"
    parity_info = probe(video, config=ProbeConfig(profile="parity"))
    assert parity_info.frame_count_source == "duration_estimate"  # round(24 × 5.013333) = 120
    # The message names the grids the stream does have, whichever way the read was split.
    with pytest.raises(BitcostUnavailableError, match=r"missing bitcost data.*has ctu_bit_cost"):
        run(video, options=SelectionOptions(profile="parity"))
    result = run(video, options=SelectionOptions(profile="clean"))
    assert result.info.frame_count_source == "counted"
    assert result.info.total_frames == native.count_decoded_frames(video) == 120
    assert result.decoded.grid_key == "ctu_bit_cost"
    assert result.canvases.images.shape[0] > 0


def test_sparse_bframe_sampling_backfills_in_parity_only(h264_clip):
    parity = run(h264_clip, options=SelectionOptions(profile="parity", num_sampled_frames=16))
    clean = run(h264_clip, options=SelectionOptions(profile="clean", num_sampled_frames=16))
    assert np.array_equal(parity.candidates.frame_indices, clean.candidates.frame_indices)
    ids = parity.decoded.frame_indices
    copied = np.flatnonzero(parity.decoded.bitcost_source != ids)
    assert copied.size > 0, "target-only pruning should drop maps of reordered P frames"
    assert codes(parity).count("bitcost_backfill") == copied.size
    row = int(copied[0])
    src_row = int(np.flatnonzero(ids == parity.decoded.bitcost_source[row])[0])
    # The copy carries the earlier frame's pixels and bitcost (cvp quirk 7)...
    assert np.array_equal(parity.decoded.pixels[row], parity.decoded.pixels[src_row])
    assert parity.decoded.grids[row] is parity.decoded.grids[src_row]
    # ...while clean reads the frame's own.
    assert np.array_equal(clean.decoded.bitcost_source, ids)
    assert "bitcost_backfill" not in codes(clean)
    assert not np.array_equal(clean.decoded.pixels[row], clean.decoded.pixels[src_row])
    assert not np.array_equal(clean.decoded.grids[row], clean.decoded.grids[src_row])


def test_short_readiness_tail_dropped_in_parity_merged_in_clean(h264_clip):
    common = dict(
        num_sampled_frames=70,
        max_group_frames=64,
        readiness_sum_threshold_mode="fixed",
        readiness_sum_threshold=1e11,
    )
    parity = run(h264_clip, options=SelectionOptions(profile="parity", **common))
    clean = run(h264_clip, options=SelectionOptions(profile="clean", **common))
    n = parity.candidates.frame_indices.size
    assert n == 70
    assert [(s.start, s.end) for s in parity.groups.specs] == [(0, 64)]
    assert parity.groups.dropped_tail == (64, 70) and "tail_dropped" in codes(parity)
    covered = sorted(i for s in clean.groups.specs for i in range(s.start, s.end))
    assert covered == list(range(n))
    assert clean.groups.specs[-1].stop_reason == "tail_merged"
    assert clean.canvases.tokens[:, 0].max() >= int(clean.candidates.frame_indices[-1]) - 1


def test_vp9_keyframes_from_bitstream_in_clean(vp9_clip):
    parity = run(vp9_clip, options=SelectionOptions(profile="parity", num_sampled_frames=16))
    clean = run(vp9_clip, options=SelectionOptions(profile="clean", num_sampled_frames=16))
    assert clean.candidates.keyframe_indices == (0, 48)
    assert parity.candidates.keyframe_indices == tuple(range(96))
    assert "vp9_keyframes_all" in codes(parity)
    assert 0 in parity.candidates.frame_indices.tolist()  # nothing could move
    assert 0 not in clean.candidates.frame_indices.tolist() and (0, 1) in clean.candidates.moved


def test_webm_frame_count_counted_in_clean(vp9_clip):
    parity = probe(vp9_clip, config=ProbeConfig(profile="parity"))
    clean = probe(vp9_clip, config=ProbeConfig(profile="clean"))
    assert parity.frame_count_source == "duration_estimate"
    assert parity.total_frames == round(parity.fps * parity.duration_secs)
    assert clean.frame_count_source == "counted"
    assert clean.total_frames == native.count_decoded_frames(vp9_clip) == 96


def test_frame_count_of_a_variable_rate_webm_is_counted_in_clean(tmp_path):
    # 48 frames at 1/24 s, then 48 at 3/24 s: 96 frames over ~7.9 s, while the stream
    # says 24 fps, so duration × fps guesses about 190.
    clip = encode_clip(tmp_path / "vfr", codec="vp9", frames=96, gop=48, slow_after=48)
    parity = probe(clip, config=ProbeConfig(profile="parity"))
    clean = probe(clip, config=ProbeConfig(profile="clean"))
    assert (clean.total_frames, clean.frame_count_source) == (96, "counted")
    assert native.count_decoded_frames(clip) == 96
    assert parity.frame_count_source == "duration_estimate"
    assert parity.total_frames > 180  # cvp's guess, far from the 96 frames there are


def test_meta_states_the_real_backend(h264_clip, tmp_path):
    opts = dict(num_sampled_frames=32)
    out = {}
    for name, o in {
        "parity": SelectionOptions(profile="parity", **opts),
        "clean": SelectionOptions(profile="clean", **opts),
        "full": SelectionOptions(profile="clean", pixel_source="full_decode", **opts),
    }.items():
        write_output(run(h264_clip, options=o), tmp_path / name)
        out[name] = json.loads((tmp_path / name / "meta.json").read_text())
    assert out["parity"]["decode_backend"] == "ffmpeg_native"  # cvp's hard-coded label, kept
    assert "meta_backend_mislabelled" in [w["code"] for w in out["parity"]["codec_lens"]["warnings"]]
    assert out["clean"]["decode_backend"] == "cv_reader_pixels"
    assert out["full"]["decode_backend"] == "pyav_full_decode"


def test_full_decode_pixels_are_deblocked(h264_clip):
    fast = run(h264_clip, options=SelectionOptions(profile="clean", num_sampled_frames=8))
    full = run(
        h264_clip,
        options=SelectionOptions(profile="clean", num_sampled_frames=8, pixel_source="full_decode"),
    )
    h, w = full.geometry.processed_hw
    ids = full.decoded.frame_indices.tolist()
    # The reference is a plain PyAV decode written here (loop filter on by default), not the
    # native function the pipeline calls (native.pyav_decode.decode_frames_rgb).
    with av.open(str(h264_clip)) as container:
        ref = {
            i: frame.to_ndarray(format="rgb24", width=w, height=h, interpolation="AREA")
            for i, frame in enumerate(container.decode(video=0))
            if i in ids
        }
    for row, fid in enumerate(ids):
        assert np.array_equal(full.decoded.pixels[row], ref[fid])
    diff = np.abs(fast.decoded.pixels.astype(int) - full.decoded.pixels.astype(int))
    assert diff.max() > 0, "the fast reader skips the loop filter, so pixels must differ"
    # Same bitstream, so the bitcost and the selection do not depend on the pixel source.
    assert np.array_equal(fast.scores.block_scores, full.scores.block_scores)


def test_trace_explains_every_readiness_boundary(h264_clip):
    result = run(h264_clip, options=SelectionOptions(profile="parity"))
    for spec in result.groups.specs:
        steps = [s for s in result.groups.trace if s.group_index == spec.group_index]
        assert steps, spec
        if spec.stop_reason == "readiness_threshold_low_gain":
            assert steps[-1].decision == "stop" and steps[-1].end == spec.end and steps[-1].passed
        for step in steps:
            assert step.frame_index_added == int(result.candidates.frame_indices[step.end - 1])


@pytest.mark.slow
@pytest.mark.parametrize("name", SHARED_CLIPS)
def test_clean_runs_on_every_shared_clip(real_clips, name, tmp_path):
    result = run(real_clips / name, options=SelectionOptions(profile="clean"))
    write_output(result, tmp_path / "out")
    assert np.array_equal(result.decoded.bitcost_source, result.decoded.frame_indices)
    assert (tmp_path / "out" / "codec_lens.json").exists()
    covered = sorted(i for s in result.groups.specs for i in range(s.start, s.end))
    assert covered == list(range(result.candidates.frame_indices.size))
