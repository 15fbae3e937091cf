"""Frame sizes: the fast reader's pixels at every width, against a normal decode and the reader itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.clips import encode_clip
from helpers.paths import REPO_ROOT
from PIL import Image

import native
from native import bitcost_reader

# Whole-clip reads at every size: the end-to-end tier, not the unit tier (--fast).
pytestmark = [pytest.mark.needs_cvp, pytest.mark.slow]

FRAMES = 20
# No-deblocking drift of the reader against a deblocked decode stays above this on these clips;
# the broken unscaled path gave 22–34 dB (or aborted the process).
MIN_Y_PSNR_DB = 35.0


def _y(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def _min_y_psnr(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    assert len(a) == len(b) == FRAMES
    worst = np.inf
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape
        mse = float(np.mean((_y(x) - _y(y)) ** 2))
        worst = min(worst, np.inf if mse == 0 else 10 * np.log10(255.0**2 / mse))
    return worst


def _clip(root: Path, codec: str, width: int, height: int) -> Path:
    return encode_clip(
        root / f"{codec}_{width}x{height}", codec=codec, width=width, height=height, frames=FRAMES, gop=10
    )


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sizes")


@pytest.mark.parametrize("width", range(400, 450, 2))
def test_native_size_reads_are_right_at_every_width(sweep_dir: Path, width: int) -> None:
    clip = _clip(sweep_dir, "h264", width, 240)
    got = list(native.iter_reader_rgb(clip))
    assert _min_y_psnr(got, list(native.iter_rgb(clip))) >= MIN_Y_PSNR_DB


@pytest.mark.parametrize(
    ("codec", "width", "height"),
    [("h264", 854, 480), ("hevc", 854, 480), ("vp9", 854, 480), ("hevc", 418, 240), ("vp9", 426, 240)],
)
def test_native_size_reads_other_codecs_and_480p(
    sweep_dir: Path, codec: str, width: int, height: int
) -> None:
    clip = _clip(sweep_dir, codec, width, height)
    got = list(native.iter_reader_rgb(clip))
    assert _min_y_psnr(got, list(native.iter_rgb(clip))) >= MIN_Y_PSNR_DB


@pytest.mark.parametrize(("codec", "width"), [("h264", 400), ("h264", 448), ("hevc", 640), ("vp9", 416)])
def test_the_unfiltered_decode_equals_the_reader_where_the_reader_is_right(
    sweep_dir: Path, codec: str, width: int
) -> None:
    """The stand-in for the broken path is the reader's own output wherever that one is correct."""
    clip = _clip(sweep_dir, codec, width, 240)
    ids = list(range(FRAMES))
    assert not bitcost_reader._reader_pixels_unsafe(clip, 0, 0)
    reader = native.read_bitcost(clip, ids, export=native.ReaderExport(pixels=True, bitcost=False))
    ours = native.decode_unfiltered_bgr(clip, ids)
    for item in reader:
        np.testing.assert_array_equal(item.pixels_bgr, ours[item.frame_index])


def test_bitcost_reads_keep_their_maps_when_pixels_come_from_pyav(sweep_dir: Path) -> None:
    clip = _clip(sweep_dir, "h264", 410, 240)
    assert bitcost_reader._reader_pixels_unsafe(clip, 410, 240)
    assert not bitcost_reader._reader_pixels_unsafe(clip, 392, 224)  # a scaled read uses the reader's pixels
    ids = [0, 3, 7, 19]
    # Unpruned, so every wanted frame has its map (pruning drops reordered P frames, spec §14.5).
    with_pixels = native.read_bitcost(
        clip, ids, export=native.ReaderExport(pixels=True, out_width=410, out_height=240), target_only=False
    )
    maps_only = native.read_bitcost(clip, ids, export=native.ReaderExport(pixels=False), target_only=False)
    assert [i.frame_index for i in with_pixels] == ids
    for a, b in zip(with_pixels, maps_only, strict=True):
        assert a.pict_type == b.pict_type
        np.testing.assert_array_equal(a.grids["mb_bit_cost"], b.grids["mb_bit_cost"])
        assert a.pixels_bgr.shape == (240, 410, 3)
    segment = native.read_segment(
        clip, ids[1:], export=native.ReaderExport(pixels=True, bitcost=True, out_width=0, out_height=0)
    )
    for item in segment:
        np.testing.assert_array_equal(item.pixels_bgr, with_pixels[ids.index(item.frame_index)].pixels_bgr)


def test_select_at_a_native_size_with_an_odd_width_runs(sweep_dir: Path, tmp_path: Path) -> None:
    """392×392 is its own prepared size (area = max_pixels), so select asks the reader for the
    native size; before the fix this aborted the process (exit 134)."""
    clip = _clip(sweep_dir, "h264", 392, 392)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "app.cli", "select", str(clip), "--out", str(out), "--canvas_format", "png"]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    tokens = np.load(out / "tokens.npy")
    anchor_frame = int(tokens[0, 0])
    canvas = np.asarray(Image.open(out / "canvas_000.png").convert("RGB"))
    assert canvas.shape == (392, 392, 3)
    decoded = list(native.iter_rgb(clip))[anchor_frame]
    mse = float(np.mean((_y(canvas) - _y(decoded)) ** 2))
    assert 10 * np.log10(255.0**2 / max(mse, 1e-9)) >= MIN_Y_PSNR_DB
