"""The analyzer's band-wise RGB conversion equals ``native.iter_rgb``, and its kernel gives the same sums."""

from __future__ import annotations

import itertools

import av
import numpy as np
import pytest
from helpers.clips import encode_clip
from helpers.luma_clip_pairs import make_pair

import native
from backend.luma import MeasureConfig, measure_frames
from native.compiled import COMPILED_KERNEL
from native.luma_frames import Yuv420Frame, iter_luma_frames, measure_yuv420_pair

REAL_CLIPS = ("real_h264_film_friday.mp4", "real_h264_static_parkinglot.mp4", "real_hevc_bbb_1080p.ts")


def _assert_same_pixels(path, count: int, band_rows: tuple[int, ...]) -> int:
    yuv = 0
    expected = itertools.islice(native.iter_rgb(path), count)
    got = itertools.islice(iter_luma_frames(path), count)
    for want, frame in itertools.zip_longest(expected, got):
        assert want is not None and frame is not None
        if isinstance(frame, Yuv420Frame):
            yuv += 1
            h = frame.shape[0]
            assert frame.shape == want.shape
            assert np.array_equal(frame.to_rgb(), want)
            for rows in band_rows:
                bands = [frame.rgb_rows(y0, min(h, y0 + rows)) for y0 in range(0, h, rows)]
                assert np.array_equal(np.concatenate(bands), want), rows
        else:
            assert np.array_equal(frame, want)
    return yuv


@pytest.mark.parametrize("name", REAL_CLIPS)
def test_band_conversion_matches_iter_rgb_on_real_clips(real_clips, name) -> None:
    assert _assert_same_pixels(real_clips / name, 3, (64, 6, 2)) == 3


def test_non_yuv420_frames_come_as_iter_rgb_gives_them(tmp_path) -> None:
    _, test = make_pair(tmp_path, "rgb", frames=4)  # libx264rgb: not yuv420p
    assert _assert_same_pixels(test, 4, ()) == 0
    frame = next(iter(iter_luma_frames(encode_clip(tmp_path / "c.mp4", codec="h264", frames=2))))
    with pytest.raises(ValueError, match="Invalid rows"):
        frame.rgb_rows(1, 4)


@pytest.mark.parametrize("cell", [64, 5, 1000])
def test_the_kernel_measures_yuv_frames_as_their_rgb(clips_dir, cell) -> None:
    ref = encode_clip(
        clips_dir / "luma_frames_ref.mp4", codec="h264", width=320, height=182, frames=6, crf=12
    )
    test = encode_clip(
        clips_dir / "luma_frames_test.mp4", codec="h264", width=320, height=182, frames=6, crf=35
    )
    config = MeasureConfig(cell=cell)
    from_yuv = measure_frames(
        iter_luma_frames(test), [iter_luma_frames(ref), native.iter_rgb(ref)], config=config
    )
    from_rgb = measure_frames(
        native.iter_rgb(test), [native.iter_rgb(ref), iter_luma_frames(ref)], config=config
    )
    for a, b in zip(from_yuv, from_rgb, strict=True):
        for name in ("test_mean_rgb", "reference_mean_rgb", "y_mse", "test_cells", "diff_cells"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert from_yuv[0].y_mse.min() > 0  # crf 12 vs crf 35 differ


def _random_yuv420(rng: np.random.Generator, h: int, w: int) -> Yuv420Frame:
    """Planes over the whole 0..255 range, so the conversion clamps often in every channel."""
    i420 = rng.integers(0, 256, size=(h * 3 // 2, w), dtype=np.uint8)
    return Yuv420Frame(av.VideoFrame.from_ndarray(i420, format="yuv420p"))


def _sums_of(rgb_test: np.ndarray, rgb_ref: np.ndarray, cell: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Straightforward per-cell sums and exact Σ(1000·ΔY)² from two RGB frames."""
    h, w, _ = rgb_test.shape
    rows, cols = -(-h // cell), -(-w // cell)
    t = rgb_test.astype(np.int64)
    d = t - rgb_ref.astype(np.int64)
    tc = np.zeros((rows, cols, 3), np.int64)
    dc = np.zeros((rows, cols, 3), np.int64)
    for r in range(rows):
        for c in range(cols):
            window = np.s_[r * cell : (r + 1) * cell, c * cell : (c + 1) * cell]
            tc[r, c] = t[window].sum(axis=(0, 1))
            dc[r, c] = d[window].sum(axis=(0, 1))
    luma = d @ np.asarray([299, 587, 114], np.int64)
    return tc, dc, int((luma * luma).sum())


@pytest.mark.skipif(not COMPILED_KERNEL, reason="native._kernels not built (no C compiler)")
@pytest.mark.parametrize(("h", "w", "cell"), [(64, 128, 64), (38, 46, 8), (182, 320, 64), (6, 10, 4)])
def test_compiled_kernel_equals_opencv_rgb_sums(h, w, cell) -> None:
    rng = np.random.default_rng(h * w + cell)
    test, ref = _random_yuv420(rng, h, w), _random_yuv420(rng, h, w)
    rgb_test, rgb_ref = test.to_rgb(), ref.to_rgb()
    assert (rgb_test == 0).any() and (rgb_test == 255).any()  # clamping is exercised
    test_cells, diff_cells, sse = measure_yuv420_pair(test, ref, cell)
    want_t, want_d, want_sse = _sums_of(rgb_test, rgb_ref, cell)
    assert np.array_equal(test_cells, want_t)
    assert np.array_equal(diff_cells, want_d)
    assert sse == want_sse  # exact, not approximately


@pytest.mark.skipif(not COMPILED_KERNEL, reason="native._kernels not built (no C compiler)")
def test_compiled_kernel_refuses_mismatched_frames() -> None:
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="same even size"):
        measure_yuv420_pair(_random_yuv420(rng, 16, 16), _random_yuv420(rng, 16, 32), 8)
    with pytest.raises(ValueError, match="even cell"):
        measure_yuv420_pair(_random_yuv420(rng, 16, 16), _random_yuv420(rng, 16, 16), 5)


@pytest.mark.parametrize("name", ["real_h264_film_friday.mp4", "real_hevc_bbb_1080p.ts"])
def test_all_yuv_pairs_measure_as_their_rgb_on_real_clips(real_clips, tmp_path, name) -> None:
    # Every input yuv420p: the compiled kernel (when built) against the numpy kernel over RGB.
    source, test = real_clips / name, tmp_path / "test.mp4"
    frames = list(itertools.islice(native.iter_rgb(source), 8))
    h, w, _ = frames[0].shape
    with native.VideoWriter(test, codec="libx264", width=w, height=h, fps=25, options={"crf": "40"}) as out:
        for frame in frames:
            out.write(frame)
    for cell in (64, 16):
        config = MeasureConfig(cell=cell)
        from_yuv = measure_frames(
            iter_luma_frames(test), [itertools.islice(iter_luma_frames(source), 8)], config=config
        )
        from_rgb = measure_frames(
            native.iter_rgb(test), [itertools.islice(native.iter_rgb(source), 8)], config=config
        )
        assert from_yuv[0].y_mse.max() > 0  # (the first frames of the HEVC clip are black)
        for field in ("test_mean_rgb", "reference_mean_rgb", "test_cells", "diff_cells"):
            assert np.array_equal(getattr(from_yuv[0], field), getattr(from_rgb[0], field)), field
        # The compiled sum is exact; OpenCV's float norm may be one ulp off on 1080p frames.
        np.testing.assert_allclose(from_yuv[0].y_mse, from_rgb[0].y_mse, rtol=1e-12, atol=0)
