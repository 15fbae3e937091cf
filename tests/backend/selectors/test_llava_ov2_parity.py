"""llava-ov2 parity against the real lmms-video-utils 0.1.0: positions identical, png canvases within 1 level.

lmms-video-utils needs torch, which Codec Lens does not depend on: the module fixture makes a
throwaway virtual environment with ``torch`` and ``lmms-video-utils==0.1.0`` once and keeps it
under ``~/.cache/codec-lens-tests/`` (about two minutes to create from a local torch wheel;
nothing afterwards), and skips with the reason where it cannot be made (no pip index). One
subprocess then runs the reference on every case; each case runs here in-process.

Cases cover H.264 with B-frames (two real clips), real content re-encoded to VP9 (no motion
vectors: mvwarp falls back to the frame difference), an anamorphic clip (SAR 4:3, which the
reference ignores), both GOP modes, every score mode, both packet-size weightings, a time range
and a rate-based sample whose uniform GOPs drop frames (defect 3).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from helpers.clips import transcode_clip
from helpers.paths import REAL_CLIPS

from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.run import select_llava_ov2

# The reference decodes each clip whole (twice for its metadata): minutes on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REFERENCE = "lmms-video-utils==0.1.0"
TORCH = "torch==2.13.0"  # the CPU wheel; pip's configured index or find-links supplies it
CACHE = Path.home() / ".cache" / "codec-lens-tests" / "lvu-0.1.0-venv"
RUNNER = Path(__file__).resolve().parents[2] / "helpers" / "lvu_reference.py"


def _venv_python(folder: Path) -> Path:
    return folder / "bin" / "python"


@pytest.fixture(scope="module")
def reference_python() -> Path:
    """A Python with lmms-video-utils and torch: the cached venv, made on first use."""
    if (CACHE / ".complete").is_file():
        return _venv_python(CACHE)
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".lvu-venv-", dir=CACHE.parent))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(tmp)], check=True, capture_output=True, timeout=300)
        done = subprocess.run(
            [str(_venv_python(tmp)), "-m", "pip", "install", "--quiet", TORCH, REFERENCE],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            pytest.skip(f"cannot install {REFERENCE} and {TORCH} into a throwaway venv: {last}")
        (tmp / ".complete").write_text(f"{TORCH} {REFERENCE}\n")
        # Run as ``bin/python -m``, a venv works from any folder: move it into place whole.
        shutil.rmtree(CACHE, ignore_errors=True)
        tmp.rename(CACHE)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _venv_python(CACHE)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lvu_clips")
    return {
        "friday": REAL_CLIPS / "real_h264_film_friday.mp4",
        "flower": REAL_CLIPS / "real_h264_flower_timelapse.mp4",
        "parking": REAL_CLIPS / "real_h264_static_parkinglot.mp4",
        # Real content in VP9 (no motion vectors) and with anamorphic pixels.
        "vp9": transcode_clip(
            REAL_CLIPS / "real_h264_flower_timelapse.mp4",
            folder / "flower_vp9",
            codec="vp9",
            frames=60,
            width=320,
            height=180,
        ),
        "anamorphic": transcode_clip(
            REAL_CLIPS / "real_h264_film_friday.mp4",
            folder / "friday_sar43",
            codec="h264",
            frames=60,
            width=480,
            height=360,
            sample_aspect_ratio=Fraction(4, 3),
        ),
    }


CASES: dict[str, tuple[str, dict]] = {
    "friday-framediff-uniform": ("friday", {}),
    "friday-mvwarp-bitcost": ("friday", {"score_mode": "mvwarp", "gop_mode": "bitcost"}),
    "friday-edge-bitcost-range": (
        "friday",
        {"score_mode": "mvwarp_edge", "gop_mode": "bitcost", "start_time": 1.0, "end_time": 4.5},
    ),
    "flower-edge-multiplicative": (
        "flower",
        {
            "score_mode": "mvwarp_edge",
            "bitcost_score_mode": "multiplicative",
            "images_per_group": 2,
            "target_canvas": 16,
            "group_size": 16,
        },
    ),
    "flower-framediff-bitcost": ("flower", {"gop_mode": "bitcost", "target_canvas": 16}),
    "parking-mvwarp-rate-dropped": (
        "parking",
        {"score_mode": "mvwarp", "target_fps": 4.0, "max_group_frames": 8},
    ),
    "vp9-framediff-bitcost": ("vp9", {"gop_mode": "bitcost", "min_group_frames": 4}),
    "vp9-mvwarp-uniform": ("vp9", {"score_mode": "mvwarp"}),
    "anamorphic-framediff": ("anamorphic", {}),
}


def _selected_cases(request: pytest.FixtureRequest) -> list[str]:
    """The cases this session runs (``-k`` may pick a few): the reference runs only those."""
    picked = {
        item.callspec.params["case"]
        for item in request.session.items
        if getattr(item, "module", None) is request.module
        and "case" in getattr(getattr(item, "callspec", None), "params", {})
    }
    return [name for name in CASES if name in picked]


@pytest.fixture(scope="module")
def reference(
    request: pytest.FixtureRequest,
    reference_python: Path,
    clips: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict:
    """The selected cases' reference outputs, from one run of the reference's process."""
    folder = tmp_path_factory.mktemp("lvu_reference")
    names = _selected_cases(request)
    jobs = []
    for name in names:
        clip, opts = CASES[name]
        kwargs = LlavaOv2Options(profile="parity", **opts).codec_config()
        jobs.append({"video": str(clips[clip]), "kwargs": kwargs, "out": str(folder / f"{name}.npz")})
    (folder / "jobs.json").write_text(json.dumps(jobs))
    done = subprocess.run(
        [str(reference_python), str(RUNNER), str(folder / "jobs.json")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {name: dict(np.load(folder / f"{name}.npz")) for name in names}


@pytest.mark.parametrize("case", list(CASES))
def test_positions_identical_and_canvases_within_one_level(
    case: str, clips: dict[str, Path], reference: dict
) -> None:
    clip, opts = CASES[case]
    result = select_llava_ov2(clips[clip], options=LlavaOv2Options(profile="parity", **opts))
    ref = reference[case]
    ours = result.canvases.src_patch_position
    assert ours.shape == ref["positions"].shape
    differ = np.flatnonzero((ours != ref["positions"]).any(axis=1))
    assert differ.size == 0, f"{differ.size} position rows differ, first {differ[:5].tolist()}"
    assert result.canvases.images.shape == ref["canvases"].shape
    diff = np.abs(result.canvases.images.astype(np.int16) - ref["canvases"].astype(np.int16))
    assert int(diff.max()) <= 1
    # One canvas per position block, in the reference's GOP order.
    gop_of_canvas = result.canvases.canvas_group_index
    assert gop_of_canvas.tolist() == ref["gop_ids"].tolist()
    assert len(result.groups.specs) == int(ref["n_groups"])


def test_clean_differs_where_the_defects_are(clips: dict[str, Path]) -> None:
    """Clean keeps every sampled frame (no dropped tail), fits the SAR and rounds its resize."""
    opts = {"score_mode": "mvwarp", "target_fps": 4.0, "max_group_frames": 8}
    parity = select_llava_ov2(clips["parking"], options=LlavaOv2Options(profile="parity", **opts))
    clean = select_llava_ov2(clips["parking"], options=LlavaOv2Options(profile="clean", **opts))
    assert parity.groups.dropped_tail is not None and "frames_dropped" in {w.code for w in parity.warnings}
    assert clean.groups.dropped_tail is None
    assert clean.groups.specs[-1].end == clean.candidates.frame_indices.size
    ana = select_llava_ov2(clips["anamorphic"], options=LlavaOv2Options(profile="clean"))
    h, w = ana.geometry.processed_hw
    assert abs((w / h) / (480 * 4 / 3 / 360) - 1) < 0.1  # display aspect 16:9, not the stored 4:3
