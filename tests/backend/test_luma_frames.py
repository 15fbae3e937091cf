"""The analyzer's band-wise RGB conversion gives the gateway's pixels, and the kernel the same sums."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from clips import encode_clip
from luma_clip_pairs import make_pair

from backend.luma import MeasureConfig, measure_frames
from native import gateway
from native.luma_frames import Yuv420Frame, iter_luma_frames

REAL_CLIPS = ("real_h264_film_friday.mp4", "real_h264_static_parkinglot.mp4", "real_hevc_bbb_1080p.ts")


def _assert_same_pixels(path, count: int, band_rows: tuple[int, ...]) -> int:
    yuv = 0
    expected = itertools.islice(gateway.iter_rgb(path), count)
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
def test_band_conversion_matches_the_gateway_on_real_clips(shared_videos, name) -> None:
    assert _assert_same_pixels(shared_videos / name, 3, (64, 6, 2)) == 3


def test_non_yuv420_frames_come_as_the_gateways_rgb(tmp_path) -> None:
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
        iter_luma_frames(test), [iter_luma_frames(ref), gateway.iter_rgb(ref)], config=config
    )
    from_rgb = measure_frames(
        gateway.iter_rgb(test), [gateway.iter_rgb(ref), iter_luma_frames(ref)], config=config
    )
    for a, b in zip(from_yuv, from_rgb, strict=True):
        for name in ("test_mean_rgb", "reference_mean_rgb", "y_mse", "test_cells", "diff_cells"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert from_yuv[0].y_mse.min() > 0  # crf 12 vs crf 35 differ
