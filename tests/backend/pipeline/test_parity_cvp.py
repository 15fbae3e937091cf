"""`codec-lens select --profile parity` reproduces codec-video-prep 0.2.5's CLI outputs exactly."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pytest
from helpers.cli import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.needs_cvp]

CVP_CLI = Path(sys.executable).parent / "codec-video-prep"

CONFIGS: dict[str, list[str]] = {
    "default": [],
    "n64": ["--num_sampled_frames", "64"],
    "fixed": ["--grouping_mode", "fixed"],
    "thr_auto": ["--readiness_sum_threshold_mode", "auto"],
    "thr_clamped": ["--readiness_sum_threshold_mode", "clamped_sqrt_bpppf"],
    # On clips shorter than 1024 frames this keeps 1024 ids with duplicates, as cvp does.
    "no_avoid_kf": ["--no_avoid_keyframes"],
    "grid_sub": ["--bitcost_grid", "sub"],
    "png_n64": ["--canvas_format", "png", "--num_sampled_frames", "64"],
    # Sparse sampling: cvp's target-only pruning drops maps of reordered frames, which both
    # tools then backfill from the previous frame (quirk 7; fires on the B-frame clips).
    "n16": ["--num_sampled_frames", "16"],
    "iframe_clip": ["--iframe_score_clip_mode", "non_i_percentile"],
}

SYNTHETIC_CLIPS = ["h264_clip", "hevc_clip", "vp9_clip"]
SHARED_CLIPS = [
    "real_h264_flower_timelapse.mp4",
    "real_h264_film_friday.mp4",
    "real_h264_static_parkinglot.mp4",
]

# Every config on every clip, except the 1024-id no_avoid_kf run (cvp alone takes 7–9 s on the
# real clips), which runs on the shortest real clip only; this file stays near 3 minutes on 2 cores.
CASES: list[tuple[str, str]] = [(clip, cfg) for clip in SYNTHETIC_CLIPS for cfg in CONFIGS]
CASES += [(clip, cfg) for clip in SHARED_CLIPS for cfg in CONFIGS if cfg != "no_avoid_kf"]
CASES += [("real_h264_film_friday.mp4", "no_avoid_kf")]

HEVC_TS = "real_hevc_bbb_1080p.ts"

CvpRunner = Callable[[Path, str], Path]


def _clip_path(request: pytest.FixtureRequest, clip: str) -> Path:
    """A synthetic clip fixture by name, or a real clip from tests/data."""
    if clip in SYNTHETIC_CLIPS:
        return request.getfixturevalue(clip)
    return request.getfixturevalue("real_clips") / clip


@pytest.fixture(scope="session")
def cvp_outputs(tmp_path_factory: pytest.TempPathFactory) -> CvpRunner:
    """Run cvp's own CLI once per (video, config) in this session and return its out_dir."""
    cache: dict[tuple[str, str], Path] = {}

    def run(video: Path, cfg: str) -> Path:
        key = (str(video), cfg)
        if key not in cache:
            out = tmp_path_factory.mktemp(f"cvp_{video.stem}_{cfg}")
            args = [str(CVP_CLI), "--video", str(video), "--out_dir", str(out), *CONFIGS[cfg]]
            result = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
            assert result.returncode == 0, f"cvp failed on {video.name} {cfg}:\n{result.stderr}"
            cache[key] = out
        return cache[key]

    return run


def _group_specs(meta: dict) -> list[tuple[int, int, str]]:
    return [(g["start"], g["end"], g["stop_reason"]) for g in meta["group_specs"]]


def _canvas_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("canvas_*") if p.suffix in (".jpg", ".png"))


def _assert_same_outputs(theirs: Path, ours: Path) -> None:
    """Compare the files a cvp consumer reads: ids, positions, groups, threshold, canvases."""
    for name in ("frame_ids.npy", "src_patch_position.npy"):
        want = np.load(theirs / name, allow_pickle=False)
        got = np.load(ours / name, allow_pickle=False)
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        if not np.array_equal(got, want):
            rows = np.flatnonzero((got != want).reshape(len(want), -1).any(axis=1))
            pytest.fail(f"{name}: {rows.size} rows differ, first at {rows[:5].tolist()}")

    meta_theirs = json.loads((theirs / "meta.json").read_text(encoding="utf-8"))
    meta_ours = json.loads((ours / "meta.json").read_text(encoding="utf-8"))
    assert _group_specs(meta_ours) == _group_specs(meta_theirs)
    assert math.isclose(
        meta_ours["readiness_sum_threshold"], meta_theirs["readiness_sum_threshold"], rel_tol=1e-6
    ), (meta_ours["readiness_sum_threshold"], meta_theirs["readiness_sum_threshold"])

    names = _canvas_names(theirs)
    assert names, "cvp wrote no canvases"
    assert _canvas_names(ours) == names
    for name in names:
        want_px = cv2.imread(str(theirs / name), cv2.IMREAD_UNCHANGED)
        got_px = cv2.imread(str(ours / name), cv2.IMREAD_UNCHANGED)
        assert got_px is not None, f"{name} does not decode"
        assert got_px.shape == want_px.shape, (name, got_px.shape, want_px.shape)
        if not np.array_equal(got_px, want_px):
            diff = np.abs(got_px.astype(np.int16) - want_px.astype(np.int16))
            pytest.fail(f"{name}: {np.count_nonzero(diff)} values differ, max {diff.max()}")
        if name.endswith(".png"):
            # PNG is lossless and deterministic, so identical pixels should mean identical files.
            assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


@pytest.mark.needs_cvp
@pytest.mark.needs_ffprobe
@pytest.mark.needs_ffprobe
@pytest.mark.parametrize(("clip", "cfg"), CASES, ids=[f"{c.removesuffix('.mp4')}-{g}" for c, g in CASES])
def test_parity_with_cvp(
    clip: str,
    cfg: str,
    request: pytest.FixtureRequest,
    cvp_outputs: CvpRunner,
    tmp_path: Path,
) -> None:
    video = _clip_path(request, clip)
    ours_dir = tmp_path / "ours"
    # cvp decodes on one thread, so running both side by side uses the second core.
    with ThreadPoolExecutor(max_workers=1) as pool:
        theirs_future = pool.submit(cvp_outputs, video, cfg)
        ours = run_cli("select", video, "--out", ours_dir, "--profile", "parity", *CONFIGS[cfg])
        theirs_dir = theirs_future.result()
    assert ours.returncode == 0, ours.stderr[-3000:]
    _assert_same_outputs(theirs_dir, ours_dir)
    if (clip, cfg) == ("h264_clip", "n16"):
        # The case exists for the backfill; make sure it still takes place.
        codes = [w["code"] for w in json.loads((ours_dir / "codec_lens.json").read_text())["warnings"]]
        assert "bitcost_backfill" in codes, codes


@pytest.mark.needs_cvp
@pytest.mark.needs_ffprobe
@pytest.mark.needs_ffprobe
@pytest.mark.parametrize(("clip", "grid"), [("h264_clip", "ctu"), ("hevc_clip", "mb"), ("vp9_clip", "mb")])
def test_a_grid_the_codec_lacks_fails_in_both_tools(
    clip: str, grid: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """``--bitcost_grid mb`` on HEVC/VP9 or ``ctu`` on H.264: cvp fails, and parity says why in one line."""
    video = _clip_path(request, clip)
    args = ["--bitcost_grid", grid]
    theirs = subprocess.run(
        [str(CVP_CLI), "--video", str(video), "--out_dir", str(tmp_path / "cvp"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert theirs.returncode != 0 and "missing bitcost data" in theirs.stderr, theirs.stderr[-2000:]
    out = tmp_path / "ours"
    ours = run_cli("select", video, "--out", out, "--profile", "parity", *args)
    lines = [line for line in ours.stderr.splitlines() if line.strip()]
    assert ours.returncode == 2 and len(lines) == 1, ours.stderr[-2000:]
    assert str(video) in lines[0] and "missing bitcost data" in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.needs_cvp
@pytest.mark.needs_ffprobe
@pytest.mark.needs_ffprobe
def test_cvp_fails_on_hevc_ts(real_clips: Path, tmp_path: Path) -> None:
    """The oracle itself cannot read bitcost from this stream, so parity must refuse it too."""
    video = real_clips / HEVC_TS
    result = subprocess.run(
        [str(CVP_CLI), "--video", str(video), "--out_dir", str(tmp_path / "cvp")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode != 0
    assert "missing bitcost data" in result.stderr


@pytest.mark.needs_cvp
def test_parity_rejects_hevc_ts(real_clips: Path, tmp_path: Path) -> None:
    video = real_clips / HEVC_TS
    out = tmp_path / "ours"
    result = run_cli("select", video, "--out", out, "--profile", "parity")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback (most recent call last)" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and HEVC_TS in lines[0], lines
    assert "missing bitcost data" in lines[0], lines[0]
    assert not out.exists()


def test_clean_runs_hevc_ts(real_clips: Path, tmp_path: Path) -> None:
    video = real_clips / HEVC_TS
    out = tmp_path / "ours"
    result = run_cli("select", video, "--out", out, "--profile", "clean")
    assert result.returncode == 0, result.stderr[-3000:]
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["total_frames"] == 120
