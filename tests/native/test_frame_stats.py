"""The decode workers' compiled BGR→RGB copy gives OpenCV's pixels and exact bad-frame figures."""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

import cv2
import numpy as np
import pytest

from backend.stages.quality import QualityConfig, frame_bad_reason
from native.compiled import COMPILED_KERNEL
from native.frame_stats import bgr_to_rgb_with_stats

needs_kernel = pytest.mark.skipif(not COMPILED_KERNEL, reason="native._kernels not built (no compiler)")


def _frames(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """BGR frames for every verdict of the bad-frame rule, and frames right at its thresholds."""
    h, w = 48, 64
    noisy = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    black = rng.integers(0, 14, (h, w, 3), dtype=np.uint8)
    solid = np.clip(rng.normal(120, 1.0, (h, w, 3)), 0, 255).astype(np.uint8)
    green_rgb = np.zeros((h, w, 3), np.uint8)
    green_rgb[: h * 2 // 5] = (40, 200, 40)  # 40 % of the pixels in the green box
    green_rgb[h * 2 // 5 :] = rng.integers(90, 256, (h - h * 2 // 5, w, 3), dtype=np.uint8)
    edge = np.full((h, w, 3), 8, np.uint8)  # mean luma exactly at black_mean
    edge[::2, ::2] = 9
    edge[1::2, 1::2] = 7
    return {
        "noisy": noisy,
        "black": black,
        "solid": solid,
        "green": cv2.cvtColor(green_rgb, cv2.COLOR_RGB2BGR),
        "edge": edge,
        "box edges": np.dstack([np.full((h, w), 90), np.full((h, w), 180), np.full((h, w), 91)]).astype(
            np.uint8
        ),
    }


@needs_kernel
def test_kernel_copies_like_opencv_and_counts_exactly() -> None:
    for name, bgr in _frames(np.random.default_rng(3)).items():
        rgb = np.zeros_like(bgr)
        stats = bgr_to_rgb_with_stats(bgr, rgb)
        assert stats is not None
        assert np.array_equal(rgb, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)), name
        wide = rgb.astype(np.int64).reshape(-1, 3)
        assert stats.sums == tuple(int(v) for v in wide.sum(axis=0)), name
        assert stats.squares == tuple(int(v) for v in (wide * wide).sum(axis=0)), name
        assert stats.green == cv2.countNonZero(cv2.inRange(rgb, (0, 180, 0), (90, 255, 90))), name
        assert np.array_equal(stats.means(), [rgb[..., c].mean() for c in range(3)]), name
        np.testing.assert_allclose(stats.stds(), [rgb[..., c].std() for c in range(3)], rtol=1e-9, atol=1e-9)


@needs_kernel
def test_verdicts_with_kernel_stats_equal_the_opencv_path() -> None:
    config = QualityConfig()
    verdicts = {}
    for name, bgr in _frames(np.random.default_rng(4)).items():
        rgb = np.zeros_like(bgr)
        stats = bgr_to_rgb_with_stats(bgr, rgb)
        verdicts[name] = frame_bad_reason(rgb, config, stats=stats)
        assert verdicts[name] == frame_bad_reason(rgb, config), name
    assert verdicts["noisy"] == "" and verdicts["black"] == "black"
    assert verdicts["solid"] == "solid" and verdicts["green"] == "green"


@needs_kernel
def test_kernel_takes_strided_rows_and_refuses_other_shapes() -> None:
    bgr = np.random.default_rng(5).integers(0, 256, (20, 40, 3), dtype=np.uint8)
    out = np.zeros((20, 32, 3), np.uint8)
    stats = bgr_to_rgb_with_stats(bgr[:, :32], out)  # rows 40 px apart
    assert stats is not None and np.array_equal(out, bgr[:, :32, ::-1])
    with pytest.raises(ValueError, match="same size"):
        bgr_to_rgb_with_stats(bgr, out)
    with pytest.raises(ValueError, match="same size"):
        bgr_to_rgb_with_stats(bgr[:, :, :2].copy(), np.zeros((20, 40, 2), np.uint8))


@pytest.mark.skipif(
    sys.platform != "linux"
    or shutil.which("cc") is None
    or not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists(),
    reason="needs Linux with a C compiler and Python's headers",
)
def test_the_kernels_were_built_where_a_compiler_exists() -> None:
    # Otherwise the decode workers and the luma analyzer silently fall back to numpy/OpenCV.
    from native import frame_stats, luma_frames

    assert COMPILED_KERNEL and frame_stats._kernels is not None and luma_frames._kernels is not None
