"""Signals beyond bitcost on real PyAV-encoded clips with a known moving square."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from av.sidedata.sidedata import Type
from helpers.clips import encode_clip, render_frame

from backend.errors import DecodeError, UnsupportedVideoError
from backend.records import VideoInfo
from backend.stages.probe import ProbeConfig, probe
from backend.stages.signal_maps import cell_means, fuse_mvres, grid_shape
from backend.stages.signals import SignalConfig, SignalGrids, compute_signals
from native import encode_frame, side_data

WIDTH, HEIGHT, FRAMES, GOP, CELL = 320, 240, 32, 16, 16
# Frames 1..15: every picture of the first GOP except its keyframe, so every H.264 frame
# asked for carries vectors (P and B pictures).
INTER = np.arange(1, GOP, dtype=np.int32)
PATH_BACK = 3  # the square's recent path: where it was up to 3 frames ago (the farthest reference)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VideoInfo]:
    """The ``square`` pattern (static textured background, 48×48 square moving +5, +2 px per frame)
    at 320×240, 32 frames, keyframes at 0 and 16, two B-frames for H.264/HEVC."""
    folder = tmp_path_factory.mktemp("signals")
    out = {}
    for codec in ("h264", "hevc", "vp9", "av1", "mpeg4"):
        path = encode_clip(
            folder / codec,
            codec=codec,  # type: ignore[arg-type]
            width=WIDTH,
            height=HEIGHT,
            frames=FRAMES,
            fps=24,
            gop=GOP,
            bframes=2,
            pattern="square",
        )
        out[codec] = probe(path, config=ProbeConfig())
    return out


def square_cells(t: int) -> np.ndarray:
    """(rows, cols) bool: cells holding any square pixel in frame t (truth from the generator)."""
    square = render_frame(t, width=WIDTH, height=HEIGHT, pattern="square")
    static = render_frame(t, width=WIDTH, height=HEIGHT, pattern="static")
    return cell_means(np.any(square != static, axis=-1).astype(np.float32), CELL) > 0


def path_cells(t: int) -> np.ndarray:
    """Cells the square covers in frames t-3..t: the current square plus the trail it uncovered."""
    cells = np.zeros(grid_shape(HEIGHT, WIDTH, CELL), dtype=bool)
    for k in range(max(0, t - PATH_BACK), t + 1):
        cells |= square_cells(k)
    return cells


def peak_overlap(grid: np.ndarray, t: int) -> float:
    """Share of the top-K cells (K = the square's cell count in frame t) lying on the square's path.

    Cells below 5 % of the frame's maximum are left out of the top-K: a perfectly predicted flat
    interior has zero energy, and ties among zeros would be ranked arbitrarily.
    """
    values = grid.ravel()
    k = int(square_cells(t).sum())
    top = np.argsort(-values, kind="stable")[:k]
    top = top[values[top] > 0.05 * values.max()]
    assert top.size, f"frame {t}: the grid is all zero"
    return float(path_cells(t).ravel()[top].mean())


def assert_peaks_on_square(sg: SignalGrids, frames: np.ndarray) -> None:
    overlaps = [peak_overlap(g, int(t)) for g, t in zip(sg.grids, frames, strict=True)]
    # The single strongest cell is on the square in every frame; most top cells are too.
    for g, t in zip(sg.grids, frames, strict=True):
        assert path_cells(int(t)).ravel()[int(np.argmax(g))], f"frame {t}: peak off the square"
    assert min(overlaps) >= 0.6, overlaps
    assert float(np.mean(overlaps)) >= 0.85, overlaps


# --------------------------------------------------------------------------- native side data


def test_h264_exports_motion_vectors(clips: dict[str, VideoInfo]) -> None:
    path = clips["h264"].path
    assert side_data.side_data_support(path) == {
        "codec_name": "h264",
        "motion_vectors": True,
        "block_qp": True,
    }
    mvs = side_data.read_motion_vectors(path, range(GOP))
    assert mvs[0].shape == (0, 8)  # the keyframe has no vectors
    for t in INTER.tolist():
        assert mvs[t].ndim == 2 and mvs[t].shape[1] == len(side_data.MV_COLUMNS) and len(mvs[t]) > 0, t
    stacked = np.concatenate([mvs[t] for t in INTER.tolist()])
    cols = {name: stacked[:, k] for k, name in enumerate(side_data.MV_COLUMNS)}
    assert set(np.unique(cols["motion_scale"]).tolist()) == {4}  # quarter-pel
    assert set(np.unique(cols["source"]).tolist()) == {-1, 1}  # B-frames use past and future references
    assert set(np.unique(cols["w"]).tolist()) <= {8, 16}


@pytest.mark.parametrize("codec", ["hevc", "vp9", "av1"])
def test_other_codecs_export_no_vectors(clips: dict[str, VideoInfo], codec: str) -> None:
    support = side_data.side_data_support(clips[codec].path)
    assert support["motion_vectors"] is False
    assert support["block_qp"] is (codec == "vp9")
    assert all(len(v) == 0 for v in side_data.read_motion_vectors(clips[codec].path, [1, 2, 3]).values())


def test_block_qp_matches_a_single_threaded_decode(clips: dict[str, VideoInfo]) -> None:
    """Regression: with frame threading, FFmpeg handed some H.264 frames another frame's QP table."""
    path = clips["h264"].path
    ours = side_data.read_block_qp(path, range(FRAMES))
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        stream.codec_context.options = {"export_side_data": "venc_params"}
        for t, frame in enumerate(container.decode(stream)):
            params = frame.side_data[Type.VIDEO_ENC_PARAMS]
            np.testing.assert_array_equal(ours[t], params.qp_map(), err_msg=f"frame {t}")
    inter = np.concatenate([ours[t].ravel() for t in INTER.tolist()])
    assert 15 <= np.median(inter) <= 35  # libx264 crf 23
    assert ours[0].shape == (HEIGHT // 16, WIDTH // 16)


def test_vp9_segment_qp_read_from_the_raw_side_data(tmp_path: Path) -> None:
    """With adaptive quantisation libvpx enables segmentation and FFmpeg exports one entry per
    block (8×8 to 64×64). Our numpy view of the AVVideoBlockParams array must equal PyAV's
    per-block accessors, painted on the 8-px grid."""
    path = tmp_path / "vp9_aq.webm"
    options = {"crf": "32", "b": "0", "aq-mode": "1", "cpu-used": "5", "deadline": "good", "g": "16"}
    with av.open(str(path), "w", format="webm", container_options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream("libvpx-vp9", rate=24, options=options)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for i in range(6):
            rgb = render_frame(i, width=WIDTH, height=HEIGHT, pattern="square")
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts = i
            encode_frame(out, stream, frame)
        encode_frame(out, stream, None)
    ours = side_data.read_block_qp(path, range(6))
    blocks_seen = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        stream.codec_context.options = {"export_side_data": "venc_params"}
        for t, frame in enumerate(container.decode(stream)):
            params = frame.side_data[Type.VIDEO_ENC_PARAMS]
            expected = np.full((HEIGHT // 8, WIDTH // 8), params.qp, np.int32)
            for k in range(params.nb_blocks):
                b = params.block_params(k)
                expected[b.src_y // 8 : (b.src_y + b.h) // 8, b.src_x // 8 : (b.src_x + b.w) // 8] = (
                    params.qp + b.delta_qp
                )
            blocks_seen += params.nb_blocks
            np.testing.assert_array_equal(ours[t], expected, err_msg=f"frame {t}")
    assert blocks_seen > 0  # segmentation was on, so the per-block path ran
    assert len(np.unique(ours[0])) > 1  # and the keyframe's QP varies across blocks


def test_decode_luma_frames(clips: dict[str, VideoInfo]) -> None:
    luma = side_data.decode_luma_frames(clips["av1"].path, [7, 3, 7])
    assert sorted(luma) == [3, 7]
    assert luma[3].shape == (HEIGHT, WIDTH) and luma[3].dtype == np.uint8


# --------------------------------------------------------------------------- mv and residual


@pytest.mark.parametrize("codec", ["h264", "hevc", "vp9", "av1", "mpeg4"])
@pytest.mark.parametrize("kind", ["mv", "residual"])
def test_signal_peaks_on_moving_square(clips: dict[str, VideoInfo], codec: str, kind: str) -> None:
    sg = compute_signals(clips[codec], INTER, config=SignalConfig(kind=kind, cell_size=CELL))
    if codec in ("h264", "mpeg4"):  # FFmpeg exports their vectors
        assert sg.exactness == "exact"
        assert all("vectors" in note for note in sg.notes)
    else:
        assert sg.exactness.startswith("proxy"), sg.exactness
    assert len(sg.grids) == len(INTER)
    assert all(g.shape == (15, 20) and g.dtype == np.float32 for g in sg.grids)
    assert_peaks_on_square(sg, INTER)


def test_h264_vector_magnitude_is_pixels_per_frame(clips: dict[str, VideoInfo]) -> None:
    """The square moves √(5² + 2²) ≈ 5.39 px per frame. P pictures predict it from references up to
    3 frames back (16.2 px away); dividing by the inferred reference distance brings those back to
    5.39 px/frame, so cells wholly inside a moving block read 5.39, and 2× or 3× values are rare."""
    sg = compute_signals(clips["h264"], INTER, config=SignalConfig(kind="mv", cell_size=CELL))
    values = np.concatenate([g[square_cells(int(t))] for g, t in zip(sg.grids, INTER, strict=True)])
    step = np.hypot(5, 2)
    near = int((np.abs(values - step) < 0.1 * step).sum())
    multiples = int(sum((np.abs(values - m * step) < 0.1 * m * step).sum() for m in (2, 3)))
    assert near >= 0.25 * values.size, np.round(values, 1)
    assert multiples <= near / 5, np.round(values, 1)


def test_keyframe_falls_back_to_the_proxy(clips: dict[str, VideoInfo]) -> None:
    sg = compute_signals(clips["h264"], np.array([0, 5, 16], np.int32), config=SignalConfig(kind="mv"))
    assert sg.pict_types[0] == "I" and sg.pict_types[2] == "I"
    assert sg.frame_exactness[1] == "exact"
    assert sg.frame_exactness[0].startswith("proxy") and sg.frame_exactness[2].startswith("proxy")
    assert sg.exactness.startswith("mixed: exact on 1 of 3 frames")
    assert "against frame 1" in sg.notes[0]  # frame 0 has no predecessor: compared with its successor
    assert [w.code for w in sg.warnings] == ["signal_proxy_frames"]
    assert sg.warnings[0].message.startswith("frames 0, 16: no motion vectors; proxy: optical flow")


# --------------------------------------------------------------------------- mvres


@pytest.mark.parametrize("codec", ["h264", "hevc", "vp9", "av1"])
def test_mvres_in_unit_range_and_peaks_on_square(clips: dict[str, VideoInfo], codec: str) -> None:
    sg = compute_signals(clips[codec], INTER, config=SignalConfig(kind="mvres", cell_size=CELL))
    assert all(float(g.min()) >= 0 and float(g.max()) <= 1 for g in sg.grids)
    assert (sg.exactness == "exact") == (codec == "h264")
    assert_peaks_on_square(sg, INTER)


def test_fuse_mvres_follows_the_cvp_formula() -> None:
    rng = np.random.default_rng(0)
    mag = rng.gamma(1.0, 2.0, size=(40, 50)).astype(np.float32)
    res = rng.normal(0, 20, size=(40, 50)).astype(np.float32)
    got = fuse_mvres(mag, res, mv_weight=2.0, residual_weight=1.0, percentile=90.0)
    mv = np.clip(mag / max(np.percentile(mag, 90), 1e-6), 0, 1)
    x = np.abs(res)
    rs = np.clip(x / max(np.percentile(x, 90), 1.0), 0, 1)
    np.testing.assert_allclose(got, np.clip((2 * mv + rs) / 3, 0, 1), rtol=1e-6, atol=1e-6)
    # A still frame: the motion term is zero, the residual floor (1) keeps tiny noise small.
    still = fuse_mvres(np.zeros((4, 4)), np.full((4, 4), 0.5))
    np.testing.assert_allclose(still, 0.25)


def test_mvres_weights_change_the_mix(clips: dict[str, VideoInfo]) -> None:
    info, ids = clips["hevc"], INTER[:4]
    mv_only = compute_signals(info, ids, config=SignalConfig(kind="mvres", residual_weight=0.0))
    mv = compute_signals(info, ids, config=SignalConfig(kind="mv"))
    # Weight 0 on the residual: mvres is the motion term alone, 1 wherever motion ≥ its p95.
    for fused, raw in zip(mv_only.grids, mv.grids, strict=True):
        assert np.corrcoef(fused.ravel(), raw.ravel())[0, 1] > 0.8


# --------------------------------------------------------------------------- qp


def test_qp_on_h264(clips: dict[str, VideoInfo]) -> None:
    sg = compute_signals(clips["h264"], INTER, config=SignalConfig(kind="qp", cell_size=CELL))
    assert sg.exactness == "exact"
    qp = side_data.read_block_qp(clips["h264"].path, INTER.tolist())
    for t, g in zip(INTER.tolist(), sg.grids, strict=True):
        # 16-px cells on 16-px macroblocks: each cell is exactly 51 - its macroblock's QP.
        np.testing.assert_array_equal(g, (51 - qp[t]).astype(np.float32))


def test_qp_on_vp9_uses_the_quantiser_index(clips: dict[str, VideoInfo]) -> None:
    sg = compute_signals(clips["vp9"], np.array([0, 1, 2], np.int32), config=SignalConfig(kind="qp"))
    assert sg.exactness == "exact"
    # The keyframe is coded finer (lower q index) than the inter frames, so it scores higher.
    assert float(sg.grids[0].mean()) > float(sg.grids[1].mean()) > 0
    assert all(float(g.max()) <= 255 for g in sg.grids)


@pytest.mark.parametrize("codec", ["hevc", "av1"])
def test_qp_refused_where_not_exported(clips: dict[str, VideoInfo], codec: str) -> None:
    with pytest.raises(UnsupportedVideoError) as err:
        compute_signals(clips[codec], INTER, config=SignalConfig(kind="qp"))
    message = str(err.value)
    assert f"codec {codec}" in message and "H264, VP9" in message
    assert err.value.stage == "signals" and err.value.path == clips[codec].path


# --------------------------------------------------------------------------- pkt_energy


def test_pkt_energy_one_value_per_frame(clips: dict[str, VideoInfo]) -> None:
    info = clips["h264"]
    ids = np.array([5, 0, 5, 16, 9], np.int32)
    sg = compute_signals(info, ids, config=SignalConfig(kind="pkt_energy"))
    assert sg.exactness == "exact" and len(sg.grids) == len(ids)
    values = [float(g.flat[0]) for g in sg.grids]
    assert all(float(g.min()) == float(g.max()) for g in sg.grids)  # uniform: a per-frame scalar
    assert values[1] == 0.0 and values[3] == 0.0  # keyframes
    assert sg.grids[0] is sg.grids[2]  # repeats share the grid
    # The documented formula, by hand, for frame 9.
    e = np.log1p(info.packet_size_bytes.astype(np.float64))
    neighbours = [j for j in range(6, 13) if j != 9 and not info.packet_is_keyframe[j]]
    assert values[4] == pytest.approx(max(e[9] - np.median(e[neighbours]), 0.0), abs=1e-6)


# --------------------------------------------------------------------------- config, record, errors


def test_config_validation() -> None:
    with pytest.raises(ValueError, match=r"Invalid kind \('bitrate'\)\. Supported values are 'mv', "):
        SignalConfig(kind="bitrate")
    with pytest.raises(ValueError, match=r"Invalid cell size \(0\)"):
        SignalConfig(cell_size=0)
    with pytest.raises(ValueError, match=r"Invalid mv weight \+ residual weight"):
        SignalConfig(kind="mvres", mv_weight=0.0, residual_weight=0.0)


def test_record_checks_shapes_and_signs() -> None:
    good = dict(
        frame_indices=np.array([3], np.int32),
        grids=(np.zeros((2, 2), np.float32),),
        kind="mv",
        exactness="exact",
        cell_size=16,
        frame_exactness=("exact",),
        notes=("",),
        pict_types=("P",),
    )
    assert SignalGrids(**good).grids[0].shape == (2, 2)
    with pytest.raises(ValueError, match="non-negative"):
        SignalGrids(**(good | {"grids": (np.full((2, 2), -1, np.float32),)}))
    with pytest.raises(ValueError, match="float32"):
        SignalGrids(**(good | {"grids": (np.zeros((2, 2), np.float64),)}))
    with pytest.raises(ValueError, match="lengths"):
        SignalGrids(**(good | {"notes": ("", "")}))


def test_frame_past_the_end_is_a_decode_error(clips: dict[str, VideoInfo]) -> None:
    with pytest.raises(DecodeError) as err:
        compute_signals(
            clips["vp9"], np.array([2, FRAMES + 5], np.int32), config=SignalConfig(kind="residual")
        )
    assert err.value.frame_index == FRAMES + 5
    with pytest.raises(ValueError, match="at least 0"):
        compute_signals(clips["vp9"], np.array([-1], np.int32), config=SignalConfig(kind="mv"))


def test_last_frames_and_repeats(clips: dict[str, VideoInfo]) -> None:
    """The stream ends inside the reference window of the last frame; repeats keep request order."""
    ids = np.array([FRAMES - 1, 2, FRAMES - 1], np.int32)
    sg = compute_signals(clips["h264"], ids, config=SignalConfig(kind="residual"))
    assert sg.frame_indices.tolist() == ids.tolist()
    assert sg.grids[0] is sg.grids[2]
    assert sg.frame_exactness == ("exact",) * 3
