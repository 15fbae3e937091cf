"""Luma-bias analyzer: measurement, geometry, summaries, fitted correction, decoder pairs, batch, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers.clips import encode_clip
from helpers.paths import REAL_CLIPS

import native
from app.cli import luma as luma_cli
from backend.errors import InputError
from backend.luma import (
    COEFFS_VERSION,
    FitConfig,
    GopGeometry,
    LatentWindowGeometry,
    MeasureConfig,
    analyze_batch,
    analyze_frames,
    analyze_videos,
    apply_correction,
    correct_frames,
    fast_reader_pair,
    fit_and_evaluate,
    load_model,
    make_geometry,
    measure_frames,
    pair_by_name,
    roundtrip_pair,
    save_model,
)

H3 = LatentWindowGeometry()

# ----------------------------------------------------------------------------- the synthetic decoder
# The H3 frame → latent → slot mapping, written out from the spec independently of
# backend.luma.geometry so the tests do not check the code against itself.


def latent_of(t: int) -> int:
    c, r = divmod(t, 17)
    return 5 * c + (0 if r == 0 else 1 + (r - 1) // 4)


def slot_of(k: int) -> int:
    return k if k < 7 else k - 5 * ((k - 2) // 5)


def position_of(t: int) -> int:
    r = t % 17
    return 0 if r == 0 else (r - 1) % 4


# Offsets in levels: one per latent with per-frame keys (latents 0..5 = frames 0..17; frame 0 dark,
# as in the background document), one per steady-state slot (slots 3 and 4 bright, slot 5 dark).
# Latent 6 (frames 18..21, slot 6 of the first window) behaves like steady slot 6, which is what
# the spec's 231-number model assumes.
HEAD_OFFSETS = (-12.5, 0.34, 0.6, 0.9, 1.2, -0.4)
STEADY_OFFSETS = {2: 0.3, 3: 0.54, 4: 1.0, 5: -0.63, 6: 0.2}
CHANNEL_GAIN = np.array([1.0, 0.8, 1.2])  # per-channel spread of the gain errors


def pattern(t: int, *, gains: bool) -> tuple[float, np.ndarray]:
    """(offset, per-channel gain g) of frame t: the decoder outputs ref·(1 + g) + offset."""
    k, p = latent_of(t), position_of(t)
    if k < 6:
        offset = HEAD_OFFSETS[k] + (0.03 * (t % 4) if gains else 0.0)
        gain = 0.02 * math.sin(t) + 0.01
    else:
        s = slot_of(k)
        offset = STEADY_OFFSETS[s] + (0.05 * p if gains else 0.0)
        gain = 0.01 * (s - 4) + 0.004 * p + 0.006
    return offset, (gain * CHANNEL_GAIN if gains else np.zeros(3))


def stream_decode(refs: list[np.ndarray], *, gains: bool, seed: int = 0) -> list[np.ndarray]:
    """A synthetic streaming decoder: known per-slot offsets (and gains) on real frames.

    Rounding uses a random dither so that fractional offsets survive in the frame means.
    With ``gains``, frame 0 is darkened by 1.5 + 0.05·x + 0.0002·x² (brighter pixels more).
    """
    rng = np.random.default_rng(seed)
    out = []
    for t, ref in enumerate(refs):
        x = ref.astype(np.float64)
        offset, gain = pattern(t, gains=gains)
        y = x * (1.0 + gain) + offset
        if gains and t == 0:
            y = x - (1.5 + 0.05 * x + 0.0002 * x**2)
        out.append(np.clip(np.floor(y + rng.random(ref.shape)), 0, 255).astype(np.uint8))
    return out


def real_frames(name: str, count: int, width: int, height: int) -> list[np.ndarray]:
    """The first frames of a real clip, downscaled, mapped to levels 16–235 (no clipping later)."""
    frames = native.decode_frames_rgb(REAL_CLIPS / name, range(count), out_width=width, out_height=height)
    return [np.rint(16 + frames[i] * (219 / 255)).astype(np.uint8) for i in range(count)]


@pytest.fixture(scope="module")
def film() -> list[np.ndarray]:
    """153 frames of the black-and-white film, 256×192 (4×3 cells of 64)."""
    return real_frames("real_h264_film_friday.mp4", 153, 256, 192)


@pytest.fixture(scope="module")
def flower() -> list[np.ndarray]:
    """102 frames of the colour time-lapse, 320×192 (5×3 cells)."""
    return real_frames("real_h264_flower_timelapse.mp4", 102, 320, 192)


# ----------------------------------------------------------------------------- geometry


def test_h3_geometry_matches_the_spec_formulas() -> None:
    t = np.arange(300)
    layout = H3.assign(t)
    assert layout.latent.tolist() == [latent_of(i) for i in t]
    assert layout.slot.tolist() == [slot_of(latent_of(i)) for i in t]
    assert layout.position.tolist() == [position_of(i) for i in t]
    assert np.flatnonzero(layout.is_boundary[:18]).tolist() == [0, 1, 5, 9, 13, 17]
    assert np.flatnonzero(~layout.is_steady).tolist() == list(range(22))  # first window: frames 0..21
    assert set(layout.slot[layout.is_steady].tolist()) == {2, 3, 4, 5, 6}
    assert set(layout.slot[layout.is_steady & (layout.in_chunk == 0)].tolist()) == {5}  # chunk starts


def test_geometry_parameters_and_gop_model() -> None:
    g = LatentWindowGeometry(temporal_compression=2, latents_per_chunk=3, window=4, stride=3)
    assert g.chunk_frames == 5 and g.steady_slots == (1, 2, 3)
    with pytest.raises(ValueError, match="Invalid stride"):
        LatentWindowGeometry(window=4, stride=5)
    with pytest.raises(ValueError, match="Invalid window"):
        LatentWindowGeometry(window=0)
    gop = GopGeometry().assign(np.arange(10), keyframes=(0, 4, 7))
    assert gop.slot.tolist() == [0, 1, 2, 3, 0, 1, 2, 0, 1, 2]
    assert gop.chunk.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert GopGeometry(every=3).assign(np.arange(7)).slot.tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_unknown_geometry_lists_the_choices() -> None:
    with pytest.raises(ValueError, match=r"Invalid geometry \('h4'\)\. Supported values are 'h3', 'gop'"):
        make_geometry("h4")


# ----------------------------------------------------------------------------- measurement


def test_measurement_is_exact_against_numpy() -> None:
    rng = np.random.default_rng(3)
    # 150×200: neither side a multiple of 64, so partial bands and columns are exercised.
    test = [rng.integers(0, 256, (150, 200, 3), dtype=np.uint8) for _ in range(3)]
    ref = [rng.integers(0, 256, (150, 200, 3), dtype=np.uint8) for _ in range(3)]
    (m,) = measure_frames(test, [ref])
    w = np.array([0.299, 0.587, 0.114])
    for i in range(3):
        t, r = test[i].astype(np.float64), ref[i].astype(np.float64)
        assert m.bias[i] == pytest.approx((t @ w).mean() - (r @ w).mean(), abs=1e-12)
        assert m.y_mse[i] == pytest.approx((((t - r) @ w) ** 2).mean(), rel=1e-9)
        assert np.allclose(m.channel_diff[i], (t - r).mean(axis=(0, 1)), atol=1e-12)
        cells_t = t[:128, :192].reshape(2, 64, 3, 64, 3).mean(axis=(1, 3))
        cells_d = cells_t - r[:128, :192].reshape(2, 64, 3, 64, 3).mean(axis=(1, 3))
        assert np.array_equal(m.test_cells[i], cells_t.astype(np.float32))
        assert np.array_equal(m.diff_cells[i], cells_d.astype(np.float32))


def test_identical_inputs_give_zero_bias_and_p95(h264_clip: Path) -> None:
    analysis = analyze_videos(h264_clip, h264_clip, official=h264_clip, geometry=H3)
    assert len(analysis.reports) == 2
    for report in analysis.reports:
        assert len(report.frames) == 96
        assert np.all(report.bias == 0.0)
        assert report.p95_all == 0.0 and report.p95_steady == 0.0 and report.jump_0_1 == 0.0
        assert np.all(np.isinf(report.frames.psnr_db))
        assert np.all(report.slots.mean == 0.0)
        summary = report.summary()
        assert summary["y_psnr_db"] is None  # inf is not JSON; null stands for identical
    json.dumps(analysis.to_json())  # strictly JSON-serialisable


def test_offset_pairs_test_t_with_reference_t_plus_offset() -> None:
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(12)]
    analysis = analyze_frames(frames[2:], frames, geometry=H3, config=MeasureConfig(offset=2, truncate=True))
    report = analysis.report
    assert len(report.frames) == 10 and np.all(report.bias == 0)
    assert report.frames.reference_index.tolist() == list(range(2, 12))
    shifted = analyze_frames(frames, frames[3:], geometry=H3, config=MeasureConfig(offset=-3))
    assert shifted.report.frames.frame_index.tolist() == list(range(3, 12))
    assert np.all(shifted.report.bias == 0)


# ----------------------------------------------------------------------------- the synthetic decoder


def test_slot_table_and_p95_recover_a_known_offset_pattern(film: list[np.ndarray]) -> None:
    refs = film[:51]  # three chunks of 17 frames
    report = analyze_frames(stream_decode(refs, gains=False), refs, geometry=H3).report

    table = {int(s): m for s, m in zip(report.slots.slot, report.slots.mean, strict=True)}
    assert set(table) == set(STEADY_OFFSETS)
    for slot, offset in STEADY_OFFSETS.items():
        assert table[slot] == pytest.approx(offset, abs=0.05)
    by_position = report.slot_positions
    for s, p, m in zip(by_position.slot, by_position.position, by_position.mean, strict=True):
        assert m == pytest.approx(STEADY_OFFSETS[int(s)], abs=0.05), (s, p)
    assert np.abs(report.gain.b).max() < 0.005  # constant offsets show as b ≈ 0

    # p95 by hand. Token boundaries t ≥ 2 of 51 frames start latents 2..14 (t = 5, 9, 13, 17, 18,
    # 22, 26, 30, 34, 35, 39, 43, 47); each jump is |offset(latent k) − offset(latent k − 1)|:
    #   k=2 .26  k=3 .30  k=4 .30  k=5 1.60  k=6 .60 (latent 6 has slot 6's +0.2)
    #   k=7 .10 (slot 2 after slot 6)  k=8 .24  k=9 .46  k=10 1.63  k=11 .83  k=12 .10  k=13 .24
    #   k=14 .46                                              (steady: slots 2,3,4,5,6,2,3,4)
    # Sorted: .10 .10 .24 .24 .26 .30 .30 .46 .46 .60 .83 1.60 1.63 → rank 0.95·12 = 11.4
    # → 1.60 + 0.4·0.03 = 1.612. Steady only (t ≥ 22, k ≥ 7): .10 .10 .24 .24 .46 .46 .83 1.63
    # → rank 0.95·7 = 6.65 → .83 + 0.65·0.80 = 1.35.
    jumps_all = [0.26, 0.3, 0.3, 1.6, 0.6, 0.1, 0.24, 0.46, 1.63, 0.83, 0.1, 0.24, 0.46]
    assert np.percentile(jumps_all, 95) == pytest.approx(1.612)
    assert np.percentile(jumps_all[5:], 95) == pytest.approx(1.35)
    assert report.p95_all == pytest.approx(1.612, abs=0.01)
    assert report.p95_steady == pytest.approx(1.35, abs=0.01)
    assert report.jump_0_1 == pytest.approx(0.34 - (-12.5), abs=0.01)

    stacked = report.stacked
    assert stacked.chunk.tolist() == [2]  # chunks from the third on
    assert stacked.slot_by_position.tolist() == [5, 6, 6, 6, 6, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4]
    expected = [STEADY_OFFSETS[int(s)] for s in stacked.slot_by_position]
    assert np.allclose(stacked.bias[0], expected, atol=0.05)


@pytest.fixture(scope="module")
def synthetic_clips(film: list[np.ndarray], flower: list[np.ndarray]) -> dict[str, list]:
    """Five clips through the offsets-and-gains decoder; split by clip into train and test."""
    cuts = {
        "film_a": film[0:51],
        "film_b": film[51:102],
        "flower_a": flower[0:51],
        "film_c": film[102:153],
        "flower_b": flower[51:102],
    }
    reports = {}
    outputs = {}
    for seed, (name, refs) in enumerate(cuts.items()):
        outputs[name] = stream_decode(refs, gains=True, seed=seed)
        reports[name] = analyze_frames(outputs[name], refs, geometry=H3, test_name=name).report
    return {
        "train": [reports[n] for n in ("film_a", "film_b", "flower_a")],
        "test": [reports[n] for n in ("film_c", "flower_b")],
        "refs": cuts,
        "outputs": outputs,
    }


@pytest.fixture(scope="module")
def fitted(synthetic_clips: dict[str, list]):
    return fit_and_evaluate(synthetic_clips["train"], synthetic_clips["test"], geometry=H3)


def test_fit_has_231_coefficients_and_cuts_held_out_residuals(fitted) -> None:
    model = fitted.model
    assert model.coefficient_count == 231
    assert model.linear.shape == (38, 3, 2) and model.quadratic is not None and model.quadratic.shape == (3,)
    assert model.keys[:18] == tuple(f"frame {t}" for t in range(18))
    assert fitted.train == ("film_a", "film_b", "flower_a") and fitted.test == ("film_c", "flower_b")

    evaluation = fitted.evaluation
    assert evaluation is not None
    groups = list(evaluation.group)
    assert groups == ["frame 0", "first window", "slot 2", "slot 3", "slot 4", "slot 5", "slot 6"]
    assert np.all(evaluation.rms_before > 0.3)
    assert np.all(evaluation.reduction >= 0.8), dict(zip(groups, evaluation.reduction, strict=True))
    # Gains matter: the constant-only model (b = 0) leaves more behind than a + b·x.
    assert np.all(evaluation.rms_after < evaluation.rms_constant)

    # The fitted gain of one steady key equals the synthetic one: d = (o + g·x) / (1 + g).
    key = model.keys.index("slot 3 position 2")
    g = (0.01 * (3 - 4) + 0.004 * 2 + 0.006) * CHANNEL_GAIN
    assert np.allclose(model.linear[key, :, 1], g / (1 + g), atol=2e-3)


def test_applied_correction_removes_the_slot_pattern(fitted, synthetic_clips: dict[str, list]) -> None:
    refs = synthetic_clips["refs"]["film_c"]
    before = analyze_frames(synthetic_clips["outputs"]["film_c"], refs, geometry=H3).report
    corrected = list(correct_frames(fitted.model, synthetic_clips["outputs"]["film_c"]))
    after = analyze_frames(corrected, refs, geometry=H3).report
    assert np.abs(before.slots.mean).max() > 0.5
    assert np.abs(after.slots.mean).max() < 0.05
    assert after.p95_steady < 0.2 * before.p95_steady
    assert abs(after.jump_0_1) < 0.2 * abs(before.jump_0_1)


def _write_lossless(path: Path, frames: list[np.ndarray]) -> Path:
    h, w = frames[0].shape[:2]
    options = {"qp": "0", "preset": "ultrafast"}
    with native.VideoWriter(
        path, codec="libx264rgb", width=w, height=h, fps=24, options=options, pix_fmt="rgb24"
    ) as v:
        for frame in frames:
            v.write(frame)
    return path


def test_coefficients_file_round_trips_and_applies_to_a_video(
    fitted, synthetic_clips: dict[str, list], tmp_path: Path
) -> None:
    coeffs = save_model(fitted.model, tmp_path / "coeffs.json")
    loaded = load_model(coeffs)
    assert loaded.coefficient_count == 231
    assert np.array_equal(loaded.linear, fitted.model.linear)
    assert np.array_equal(loaded.quadratic, fitted.model.quadratic)

    test = _write_lossless(tmp_path / "test.mp4", synthetic_clips["outputs"]["flower_b"])
    ref = _write_lossless(tmp_path / "ref.mp4", synthetic_clips["refs"]["flower_b"])
    out = apply_correction(loaded, test, tmp_path / "corrected.mp4", lossless=True)
    before = analyze_videos(test, ref, geometry=H3).report
    after = analyze_videos(out, ref, geometry=H3).report
    assert np.abs(after.slots.mean).max() < 0.05 < np.abs(before.slots.mean).max()
    assert after.p95_all < 0.2 * before.p95_all


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version=COEFFS_VERSION + 1), "unsupported coefficients version 2"),
        (
            lambda d: d.update(linear=d["linear"][:-1], keys=d["keys"][:-1]),
            r"shape \(37, 3, 2\).*\(38, 3, 2\)",
        ),
        (lambda d: d.update(linear=[[[1.0, 0.0, 0.0]] * 3] * 38), r"shape \(38, 3, 3\)"),
        (lambda d: d.update(quadratic=[0.0, 0.0]), r"quadratic terms have shape \(2,\)"),
        (lambda d: d.update(format="something-else"), "not a luma-correction coefficients file"),
    ],
)
def test_wrong_coefficients_files_are_refused(fitted, tmp_path: Path, change, message: str) -> None:
    data = fitted.model.to_json()
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=message) as info:
        load_model(path)
    assert str(path) in info.value.one_line()


# ----------------------------------------------------------------------------- decoder pairs


@pytest.mark.needs_cvp
@pytest.mark.parametrize("clip", ["h264_clip", "hevc_clip"])
def test_fast_reader_drift_grows_within_a_gop_and_resets_at_keyframes(clip: str, request) -> None:
    analysis = fast_reader_pair(request.getfixturevalue(clip))
    report = analysis.report
    assert analysis.keyframes == (0, 48)
    err = np.abs(report.bias)
    mse = report.frames.y_mse  # the PSNR-based error: 10·log10(255² / mse) falls as it grows
    assert mse[47] > 2 * mse[48] and err[47] > err[48]  # reset at the keyframe
    for start in (0, 48):  # both GOPs: the last third drifts more than the first third
        early, late = slice(start, start + 16), slice(start + 32, start + 48)
        assert mse[late].mean() > 2 * mse[early].mean()
    slot = report.layout.slot  # frames since the last keyframe
    assert err[slot >= 32].mean() > 2 * err[slot < 16].mean()
    assert err[32:48].mean() > 2 * err[0:16].mean()


@pytest.mark.parametrize("codec", ["libx264", "libx265", "libvpx-vp9", "libsvtav1"])
def test_encoder_round_trip_against_its_source(codec: str, clips_dir: Path, tmp_path: Path) -> None:
    source = encode_clip(clips_dir / "luma_rt_source", codec="h264", width=128, height=96, frames=20, gop=10)
    analysis, encoded = roundtrip_pair(source, codec, tmp_path)
    report = analysis.report
    assert encoded.exists() and len(report.frames) == 20
    assert analysis.keyframes[0] == 0 and analysis.geometry["name"] == "gop"
    assert 25 < report.summary()["y_psnr_db"] < 70
    assert abs(report.summary()["mean_bias"]) < 0.75


# ----------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def small_clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("luma_small")
    return {
        "a12": encode_clip(folder / "a12", codec="h264", width=96, height=64, frames=12, gop=6),
        "b10": encode_clip(folder / "b10", codec="h264", width=96, height=64, frames=10, gop=6, crf=30),
        "wide": encode_clip(folder / "wide", codec="h264", width=128, height=64, frames=12, gop=6),
    }


def test_different_frame_counts_name_both_files_unless_truncated(small_clips: dict[str, Path]) -> None:
    a, b = small_clips["a12"], small_clips["b10"]
    with pytest.raises(InputError) as info:
        analyze_videos(a, b, geometry=H3)
    line = info.value.one_line()
    assert str(a) in line and str(b) in line and "12" in line and "10" in line and "truncate" in line
    report = analyze_videos(a, b, geometry=H3, config=MeasureConfig(truncate=True)).report
    assert len(report.frames) == 10 and report.frames.truncated


def test_different_frame_sizes_name_both_files(small_clips: dict[str, Path]) -> None:
    a, wide = small_clips["a12"], small_clips["wide"]
    with pytest.raises(InputError, match="frame sizes differ") as info:
        analyze_videos(a, wide, geometry=H3, config=MeasureConfig(truncate=True))
    line = info.value.one_line()
    assert str(a) in line and str(wide) in line and "96x64" in line and "128x64" in line


def test_missing_file_is_an_input_error(small_clips: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        analyze_videos(small_clips["a12"], tmp_path / "nope.mp4", geometry=H3)


# ----------------------------------------------------------------------------- batch and CLI


def test_batch_pairs_by_file_name(small_clips: dict[str, Path], tmp_path: Path) -> None:
    tests, refs = tmp_path / "tests", tmp_path / "refs"
    tests.mkdir()
    refs.mkdir()
    for name in ("one", "two", "orphan"):
        (tests / f"{name}.mp4").write_bytes(small_clips["b10"].read_bytes())
    (refs / "one.mp4").write_bytes(small_clips["b10"].read_bytes())  # identical: bias 0
    (refs / "two.mp4").write_bytes(small_clips["a12"].read_bytes())  # 12 frames vs 10: fails
    pairs, missing = pair_by_name(tests, refs)
    assert [(t.name, r.name) for t, r in pairs] == [("one.mp4", "one.mp4"), ("two.mp4", "two.mp4")]
    assert [m.name for m in missing] == ["orphan.mp4"]
    result = analyze_batch(tests, refs, geometry=H3, config=MeasureConfig(truncate=True))
    assert [Path(c).name for c in result.clip] == ["one.mp4", "two.mp4"]
    assert result.values[0, 0] == 10 and result.values[0, 1] == 0.0
    assert result.medians["frames"] == 10
    assert [Path(u).name for u in result.unmatched] == ["orphan.mp4"]
    strict = analyze_batch(tests, refs, geometry=H3)
    assert len(strict.clip) == 1 and "frame counts differ" in strict.failures[0][1]


def test_cli_analyze_writes_json_and_plot(small_clips: dict[str, Path], tmp_path: Path, capsys) -> None:
    out_json, out_html = tmp_path / "bias.json", tmp_path / "bias.html"
    a = small_clips["a12"]
    argv = ["luma-bias", "--reference", str(a), "--test", str(a), "--official", str(a)]
    code = luma_cli.main([*argv, "--json", str(out_json), "--plot", str(out_html)])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out_json.read_text())
    assert [r["label"] for r in data["references"]] == ["reference", "official"]
    ref = data["references"][0]
    assert ref["per_frame"]["bias"] == [0.0] * 12
    assert {"p95_all", "p95_steady", "jump_0_1"} <= set(ref["summary"])
    assert ref["summary"]["p95_all"] == 0.0
    assert [r["slot"] for r in ref["slots"]] == []  # 12 frames never leave the first window
    html = out_html.read_text()
    assert "plotly" in html and "stacked chunks" in html and "<script" in html


def test_cli_bad_input_exits_2_with_one_line(small_clips: dict[str, Path], capsys) -> None:
    a, b = str(small_clips["a12"]), str(small_clips["b10"])
    assert luma_cli.main(["luma-bias", "--reference", a, "--test", b]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("codec-lens: error: frame counts differ")
    assert a in err and b in err
    assert luma_cli.main(["luma-bias", "--reference", a, "--test", a, "--geometry", "h4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Supported values are 'h3', 'gop'" in err
    assert luma_cli.main(["luma-bias", "--reference", a, "--test", b, "--truncate"]) == 0
    assert luma_cli.main(["luma-bias"]) == 2


def test_cli_fit_then_apply(synthetic_clips: dict[str, list], tmp_path: Path, capsys) -> None:
    tests, refs = tmp_path / "tests", tmp_path / "refs"
    tests.mkdir()
    refs.mkdir()
    for name in ("film_a", "flower_a", "film_c"):
        _write_lossless(tests / f"{name}.mp4", synthetic_clips["outputs"][name])
        _write_lossless(refs / f"{name}.mp4", synthetic_clips["refs"][name])
    coeffs, report = tmp_path / "coeffs.json", tmp_path / "fit.json"
    argv = ["luma-bias", "fit", "--references", str(refs), "--train", str(tests / "film_a.mp4")]
    argv += [str(tests / "flower_a.mp4"), "--test", str(tests / "film_c.mp4"), "--out", str(coeffs)]
    assert luma_cli.main([*argv, "--json", str(report)]) == 0, capsys.readouterr().err
    fit = json.loads(report.read_text())
    assert fit["coefficient_count"] == 231 == json.loads(coeffs.read_text())["coefficient_count"]
    assert all(row["reduction"] >= 0.8 for row in fit["evaluation"])

    out, applied = tmp_path / "corrected.mp4", tmp_path / "apply.json"
    argv = ["luma-bias", "apply", str(coeffs), "--test", str(tests / "film_c.mp4"), "--out", str(out)]
    argv += ["--reference", str(refs / "film_c.mp4"), "--lossless", "--json", str(applied)]
    assert luma_cli.main(argv) == 0, capsys.readouterr().err
    data = json.loads(applied.read_text())
    before = data["before"]["references"][0]["summary"]["p95_all"]
    after = data["after"]["references"][0]["summary"]["p95_all"]
    assert after < 0.2 * before

    bad = tmp_path / "v2.json"
    bad.write_text(json.dumps(json.loads(coeffs.read_text()) | {"version": 2}))
    capsys.readouterr()
    assert (
        luma_cli.main(["luma-bias", "apply", str(bad), "--test", str(out), "--out", str(tmp_path / "x.mp4")])
        == 2
    )
    assert "unsupported coefficients version 2" in capsys.readouterr().err


def test_fit_config_validation() -> None:
    with pytest.raises(ValueError, match="Invalid min cells"):
        FitConfig(min_cells=1)
