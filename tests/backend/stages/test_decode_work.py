"""Per-frame work inside the decode workers gives exactly what the quality and score stages compute."""

from __future__ import annotations

import dataclasses
import functools
import gc
import multiprocessing
import os
import signal
import threading

import av
import numpy as np
import pytest

import native
from backend.stages.decode import DecodeConfig, decode, decode_frames
from backend.stages.decode_reads import FrameWork, split_parts
from backend.stages.geometry import GeometryConfig, resolve_geometry
from backend.stages.keyframes import KeyframeConfig, avoid_keyframes
from backend.stages.probe import ProbeConfig, probe
from backend.stages.quality import QualityConfig, assess_frames, frame_bad_reason
from backend.stages.sample import SampleConfig, sample
from backend.stages.score import ScoreConfig, frame_scores, per_frame_scoring, score_frames
from native import bitcost_reader


def _front(path, profile: str, n: int):
    info = probe(path, config=ProbeConfig(profile=profile))
    cands = avoid_keyframes(
        sample(info, config=SampleConfig(num_sampled_frames=n, profile=profile)),
        info,
        config=KeyframeConfig(profile=profile),
    )
    return info, cands, resolve_geometry(info, config=GeometryConfig(profile=profile))


@pytest.mark.parametrize(
    ("clip", "profile", "n", "mode"),
    [
        ("h264_clip", "clean", 1024, "split"),
        ("h264_clip", "parity", 1024, "split"),
        # Sparse parity sampling can prune maps: pixels in workers, bitcost here.
        ("parkinglot", "parity", 64, "bitcost here, pixels in workers"),
        # WebM: the reader's seek is not trusted, so the second part decodes from the start.
        ("vp9_clip", "clean", 1024, "split from start"),
    ],
)
def test_worker_results_equal_the_stages(request, clip, profile, n, mode):
    if clip == "parkinglot":
        path = request.getfixturevalue("real_clips") / "real_h264_static_parkinglot.mp4"
    else:
        path = request.getfixturevalue(clip)
    info, cands, geo = _front(path, profile, n)
    qcfg, scfg = QualityConfig(), ScoreConfig()
    assert per_frame_scoring(scfg)
    work = FrameWork(
        on_pixels=functools.partial(frame_bad_reason, config=qcfg),
        on_grid=functools.partial(frame_scores, geometry=geo, config=scfg),
    )
    dcfg = DecodeConfig(profile=profile)
    decoded, results = decode_frames(info, cands, geo, config=dcfg, work=work)
    assert decoded.read_mode == mode
    plain = decode(info, cands, geo, config=dcfg)
    assert np.array_equal(decoded.pixels, plain.pixels)
    assert np.array_equal(decoded.bitcost_source, plain.bitcost_source)
    assert all(np.array_equal(a, b) for a, b in zip(decoded.grids, plain.grids, strict=True))

    sources = sorted(set(decoded.bitcost_source.tolist()))
    assert set(sources) <= set(results.pixels) and set(sources) <= set(results.grids)
    for row, fid in enumerate(decoded.bitcost_source.tolist()):
        if fid in results.pixels:
            assert results.pixels[fid] == frame_bad_reason(decoded.pixels[row], qcfg)
        if fid in results.grids:
            want = frame_scores(decoded.grids[row], geo, config=scfg)
            assert all(np.array_equal(a, b) for a, b in zip(results.grids[fid], want, strict=True))

    q_fast = assess_frames(decoded, config=qcfg, precomputed=results.pixels)
    q_plain = assess_frames(plain, config=qcfg)
    assert q_fast.reasons == q_plain.reasons and np.array_equal(q_fast.good, q_plain.good)
    s_fast = score_frames(decoded, geo, config=scfg, precomputed=results.grids)
    s_plain = score_frames(plain, geo, config=scfg)
    assert np.array_equal(s_fast.patch_scores, s_plain.patch_scores)
    assert np.array_equal(s_fast.block_scores, s_plain.block_scores)
    assert all(np.array_equal(a, b) for a, b in zip(s_fast.grids, s_plain.grids, strict=True))


def test_full_decode_pixels_never_take_reader_results(h264_clip):
    """on_pixels ran on the reader's pixels, which full_decode replaces, so its results are dropped."""
    info, cands, geo = _front(h264_clip, "clean", 1024)
    work = FrameWork(on_pixels=lambda rgb, stats: "seen", on_grid=lambda grid: grid.shape)
    decoded, results = decode_frames(
        info, cands, geo, config=DecodeConfig(profile="clean", pixel_source="full_decode"), work=work
    )
    assert decoded.pixel_source == "full_decode"
    assert not results.pixels
    assert results.grids and all(shape == decoded.grids[0].shape for shape in results.grids.values())


def test_run_wide_scoring_ignores_per_frame_results(h264_clip):
    """The I-frame cap looks at every frame, so precomputed sums must not be used."""
    info, cands, geo = _front(h264_clip, "clean", 1024)
    cfg = ScoreConfig(iframe_score_clip_mode="non_i_percentile")
    assert not per_frame_scoring(cfg)
    decoded = decode(info, cands, geo, config=DecodeConfig(profile="clean"))
    bogus = {int(f): (np.zeros((1, 1), np.float32),) * 3 for f in decoded.bitcost_source}
    with_bogus = score_frames(decoded, geo, config=cfg, precomputed=bogus)
    plain = score_frames(decoded, geo, config=cfg)
    assert np.array_equal(with_bogus.block_scores, plain.block_scores)
    assert with_bogus.iframe_clip_cap == plain.iframe_clip_cap


def _bad_reason_by_the_rule(rgb: np.ndarray) -> str:
    """The cvp rule (spec §7.1) written out with plain numpy float64 statistics."""
    r, g, b = (rgb[..., c].astype(np.int64) for c in range(3))
    y = ((4899 * r + 9617 * g + 1868 * b + 8192) >> 14).astype(np.float64)
    if y.mean() <= 8 and y.std() <= 6:
        return "black"
    chans = (r, g, b)
    if y.std() <= 4 and all(c.std() <= 4 for c in chans) and all(c.max() - c.min() <= 12 for c in chans):
        return "solid"
    if ((g >= 180) & (r <= 90) & (b <= 90)).mean() >= 0.35:
        return "green"
    if g.mean() > 120 and g.mean() - max(r.mean(), b.mean()) > 80 and g.std() < 50:
        return "green"
    return ""


def test_bad_frame_gates_never_change_a_verdict():
    """Frames built around every threshold get the verdict of the plain rule."""
    rng = np.random.default_rng(7)
    cfg = QualityConfig()
    seen: dict[str, int] = {}
    for k in range(3000):
        h, w = (int(v) for v in rng.integers(2, 40, 2))
        base = rng.integers(0, 256, 3)
        kind = k % 5
        if kind == 0:  # dark, mean luma and std near 8 / 6
            f = rng.normal(rng.uniform(0, 14), rng.uniform(0, 9), (h, w, 1)) * np.ones(3)
        elif kind == 1:  # one colour plus noise near std 4 / range 12
            f = base + rng.normal(0, rng.uniform(0, 6), (h, w, 3))
        elif kind == 2:  # share of saturated green near 35 %
            green = rng.random((h, w)) < rng.uniform(0.2, 0.5)
            f = rng.integers(0, 256, (h, w, 3)).astype(float)
            f[green] = (rng.integers(0, 95), rng.integers(175, 256), rng.integers(0, 95))
        elif kind == 3:  # green-dominant, means near 120 / 80 and std G near 50
            mean_g = rng.uniform(110, 230)
            f = np.stack(
                [
                    np.full((h, w), mean_g - rng.uniform(70, 100)),
                    rng.normal(mean_g, rng.uniform(0, 60), (h, w)),
                    np.full((h, w), mean_g - rng.uniform(70, 100)),
                ],
                axis=-1,
            )
        else:  # flat frame with one odd pixel
            f = np.broadcast_to(base, (h, w, 3)).astype(float)
            f[rng.integers(0, h), rng.integers(0, w)] = rng.integers(0, 256, 3)
        rgb = np.clip(np.round(f), 0, 255).astype(np.uint8)
        want = _bad_reason_by_the_rule(rgb)
        assert frame_bad_reason(rgb, cfg) == want, (k, want)
        seen[want] = seen.get(want, 0) + 1
    assert all(seen.get(v, 0) > 100 for v in ("", "black", "solid", "green")), seen


def test_grid_domain_sums_equal_the_full_size_reduction():
    """Patch and block sums from the small grid are bit-identical to summing the stretched map."""
    from backend.imaging import upsample
    from backend.stages.score import grid_patch_and_block_sums, normalise_grid, patch_and_block_sums

    rng = np.random.default_rng(3)
    checked = 0
    for k in range(1500):
        p = int(rng.choice([1, 2, 5, 7, 8, 9, 14, 16, 17, 28, 33, 64, 128, 129]))
        b = int(rng.integers(1, 4))
        hb, wb = (b * int(v) for v in rng.integers(1, 10, 2))
        if hb * wb * p * p > 2_000_000:
            continue
        gh, gw = (int(v) for v in rng.integers(1, 60, 2))
        if k % 2:
            grid = normalise_grid(rng.integers(0, 5000, (gh, gw)))
        else:  # arbitrary float32 magnitudes make any change of summation order visible
            grid = (rng.random((gh, gw)) * 10.0 ** rng.integers(-3, 7)).astype(np.float32)
        want = patch_and_block_sums(upsample(grid, (hb * p, wb * p)), patch=p, block_size=b)
        got = grid_patch_and_block_sums(grid, (hb * p, wb * p), patch=p, block_size=b)
        assert got[0].dtype == np.float32 and got[1].dtype == np.float32
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (p, b, hb, wb, gh, gw)
        checked += 1
    assert checked > 1000


def _remux(src, dst):
    """Copy the video packets of ``src`` into another container (no re-encode)."""
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        stream = out.add_stream_from_template(inp.streams.video[0])
        for packet in inp.demux(inp.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    return dst


# hevc_1080p_ts decodes the whole 1080p clip twice.
@pytest.mark.parametrize(
    "clip", ["vp9_webm", "h264_bframes_ts", pytest.param("hevc_1080p_ts", marks=pytest.mark.slow)]
)
def test_split_from_start_equals_a_serial_read(request, tmp_path, clip):
    """Without a trusted seek the second part decodes a lead-in from frame 0; what it
    returns must equal one serial read: pixels, maps, picture types, per-frame results."""
    if clip == "vp9_webm":
        path = request.getfixturevalue("vp9_clip")
    elif clip == "h264_bframes_ts":
        path = _remux(request.getfixturevalue("h264_clip"), tmp_path / "h264_bframes.ts")
    else:
        path = request.getfixturevalue("real_clips") / "real_hevc_bbb_1080p.ts"
    info, cands, geo = _front(path, "clean", 1024)
    assert info.stss_keyframes is None
    qcfg, scfg = QualityConfig(), ScoreConfig()
    work = FrameWork(
        on_pixels=functools.partial(frame_bad_reason, config=qcfg),
        on_grid=functools.partial(frame_scores, geometry=geo, config=scfg),
    )
    split, split_results = decode_frames(info, cands, geo, config=DecodeConfig(workers=2), work=work)
    serial, serial_results = decode_frames(info, cands, geo, config=DecodeConfig(workers=1), work=work)
    assert split.read_mode == "split from start" and serial.read_mode == "serial"
    assert np.array_equal(split.pixels, serial.pixels)
    assert split.pict_types == serial.pict_types
    assert np.array_equal(split.bitcost_source, serial.bitcost_source)
    assert all(np.array_equal(a, b) for a, b in zip(split.grids, serial.grids, strict=True))
    assert split_results.pixels == serial_results.pixels
    assert split_results.grids.keys() == serial_results.grids.keys()
    for fid, want in serial_results.grids.items():
        assert all(np.array_equal(a, b) for a, b in zip(split_results.grids[fid], want, strict=True))


class _Info:
    def __init__(self, stss, keyframes=(0,)):
        self.stss_keyframes = stss
        self.keyframe_indices = keyframes


def test_split_parts_by_container_and_density():
    dense = list(range(120))
    # MP4 family: cut at the keyframe nearest the middle, parts seek.
    mp4 = split_parts(_Info((1, 49, 97), (0, 48, 96)), dense, workers=DecodeConfig().workers)
    assert mp4 is not None and mp4.seek and mp4.parts == [dense[:48], dense[48:]]
    # No trusted seek: the first part is longer by what the lead-in costs
    # (k = 0.55·k + (120 − k) → k ≈ 83), and the two parts cover the request once.
    lead = split_parts(_Info(None), dense, workers=DecodeConfig().workers)
    assert lead is not None and not lead.seek
    assert lead.parts[0] + lead.parts[1] == dense and len(lead.parts[0]) == 83
    # Sparse requests decode nearly everything in both parts: not worth a second process.
    assert split_parts(_Info(None), list(range(0, 377, 6)), workers=DecodeConfig().workers) is None
    assert split_parts(_Info(None), dense, workers=1) is None
    assert split_parts(_Info(None), dense[:20], workers=DecodeConfig().workers) is None


# --- failures inside a split read -----------------------------------------------------------------


def _fails_in_children(parent_pid: int, exc: BaseException):
    def on_pixels(rgb, stats=None):
        if os.getpid() != parent_pid:
            raise exc
        return frame_bad_reason(rgb, config=QualityConfig(), stats=stats)

    return on_pixels


def test_a_failing_reader_child_is_reported_and_the_frames_are_read_serially(h264_clip, capfd):
    info, cands, geo = _front(h264_clip, "clean", 1024)
    dcfg = DecodeConfig(profile="clean")
    # KeyError is not among the errors a reader raises: the child must still report it.
    work = FrameWork(on_pixels=_fails_in_children(os.getpid(), KeyError("boom in a child")))
    decoded, results = decode_frames(info, cands, geo, config=dcfg, work=work)
    assert decoded.read_mode == "serial (split failed)"
    warned = [w.message for w in decoded.warnings if w.code == "split_read_failed"]
    assert len(warned) == 1 and "KeyError" in warned[0] and "boom in a child" in warned[0], warned
    plain = decode(info, cands, geo, config=DecodeConfig(profile="clean", workers=1))
    assert np.array_equal(decoded.pixels, plain.pixels)
    assert all(np.array_equal(a, b) for a, b in zip(decoded.grids, plain.grids, strict=True))
    assert results.pixels == dict.fromkeys(decoded.frame_indices.tolist(), "")  # the work ran here
    assert multiprocessing.active_children() == []
    assert "Traceback" not in capfd.readouterr().err  # one report, through the warning


def test_a_failure_in_the_parent_part_ends_the_children(h264_clip):
    info, cands, geo = _front(h264_clip, "clean", 1024)
    parent = os.getpid()

    def on_pixels(rgb, stats=None):
        if os.getpid() == parent:
            raise KeyError("boom in the parent")
        return ""

    with pytest.raises(KeyError, match="boom in the parent"):
        decode_frames(
            info, cands, geo, config=DecodeConfig(profile="clean"), work=FrameWork(on_pixels=on_pixels)
        )
    # The child had sent (or was sending) its part: it must not be left waiting on the pipe.
    assert multiprocessing.active_children() == []


def test_a_child_killed_mid_read_names_its_exit_code(h264_clip):
    parent = os.getpid()

    def hook(item, bgr, slot):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would

    ids = list(range(96))
    reads = native.SegmentReads(
        h264_clip,
        [ids[:48], ids[48:]],
        export=native.ReaderExport(pixels=False, bitcost=True),
        hook=hook,
    )
    with pytest.raises(RuntimeError, match=r"reader exited with code -9"):
        reads.wait()
    assert multiprocessing.active_children() == []


def test_a_lock_held_at_the_fork_does_not_stall_a_from_start_child(vp9_clip):
    # Children of a from-start read take the reader's environment lock; a fork copies it held
    # if another thread holds it then, and the child would wait on it for ever.
    holder_started, release = threading.Event(), threading.Event()

    def hold() -> None:
        with bitcost_reader._ENV_LOCK:
            holder_started.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    holder_started.wait(5)
    try:
        reads = native.SegmentReads(
            vp9_clip,
            [list(range(0, 40)), list(range(40, 96))],
            export=native.ReaderExport(pixels=False, bitcost=True),
            read_first_here=False,
            seek=False,
        )
        ready = [recv.poll(60) for _, _, recv in reads._children]
    finally:
        release.set()
        holder.join()
    assert ready == [True, True]
    assert [item.frame_index for item in reads.wait()] == list(range(96))


def test_split_reads_reject_what_they_cannot_size_or_index(h264_clip):
    with pytest.raises(ValueError, match=r"Invalid output size \(0x0\)"):
        native.SegmentReads(h264_clip, [[0, 1]], export=native.ReaderExport(pixels=True, bitcost=True))
    info, cands, geo = _front(h264_clip, "clean", 8)
    bad = dataclasses.replace(cands, frame_indices=np.array([-1, 3], np.int32))
    with pytest.raises(ValueError, match=r"Invalid frame index \(-1\)"):
        decode_frames(info, bad, geo, config=DecodeConfig(profile="clean"))


def _threaded_scaler_garbage(tmp_path) -> None:
    """Leave an unreachable PyAV output container whose scaler runs slice threads."""
    container = av.open(str(tmp_path / "garbage.mp4"), "w")
    stream = container.add_stream("libx264", rate=24)
    stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
    # An RGB frame of another size: the encoder's own scaler converts it (threads: automatic).
    stream.encode(av.VideoFrame.from_ndarray(np.zeros((128, 128, 3), np.uint8), format="rgb24"))
    cycle: list[object] = [container, stream]
    cycle.append(cycle)


def test_garbage_the_parent_left_does_not_stall_a_child(h264_clip, tmp_path):
    # A collection in a forked reader freed a PyAV scaler copied from the parent, which waits
    # for slice threads that the fork did not copy: the child, and the parent on its pipe,
    # blocked for ever (seen in the test suite after an export had failed mid-write).
    parent = os.getpid()

    def hook(item, bgr, slot):
        if os.getpid() != parent:
            gc.collect()  # as any allocation in the child may trigger

    gc.disable()
    try:
        _threaded_scaler_garbage(tmp_path)
        reads = native.SegmentReads(
            h264_clip,
            [list(range(8)), list(range(8, 16))],
            export=native.ReaderExport(pixels=False, bitcost=True),
            hook=hook,
            read_first_here=False,
        )
        ready = [recv.poll(60) for _, _, recv in reads._children]
        if not all(ready):
            reads.stop()
        assert ready == [True, True], "a reader child stalled"
        assert [item.frame_index for item in reads.wait()] == list(range(16))
    finally:
        gc.enable()
        gc.collect()
