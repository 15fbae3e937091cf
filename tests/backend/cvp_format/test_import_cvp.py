"""Importing codec-video-prep output directories: real cvp runs on encoded clips, real DuckDB stores."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from helpers.cli import run_cli
from helpers.clips import encode_clip

from backend.cvp_format import (
    IMPORT_KEY,
    IMPORT_STATUS_KEY,
    ImportConfig,
    import_cvp,
    imported_view,
    read_cvp_dir,
)
from backend.errors import InputError
from backend.runs import open_run
from backend.stages.probe import ProbeConfig, probe
from backend.store import SessionStore
from views import canvases

# Runs cvp's own CLI on each clip.
pytestmark = [pytest.mark.slow, pytest.mark.needs_cvp, pytest.mark.needs_ffprobe]

CVP_CLI = Path(sys.executable).parent / "codec-video-prep"
# 32 ids in fixed groups of 8: four groups, 16 canvases, in about a second of cvp time.
FIXED_PNG = [
    "--num_sampled_frames",
    "32",
    "--grouping_mode",
    "fixed",
    "--group_size",
    "8",
    "--canvas_format",
    "png",
]
READINESS_JPG = ["--num_sampled_frames", "32"]

CvpRunner = Callable[[str, list[str]], Path]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return encode_clip(tmp_path_factory.mktemp("import_clip") / "moving", codec="h264", frames=48)


@pytest.fixture(scope="module")
def other_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Same size, codec and length as ``clip`` but other content."""
    return encode_clip(
        tmp_path_factory.mktemp("import_other") / "square", codec="h264", frames=48, pattern="square"
    )


@pytest.fixture(scope="module")
def cvp_run(clip: Path, tmp_path_factory: pytest.TempPathFactory) -> CvpRunner:
    """Run cvp's own CLI on ``clip`` once per name; returns its out_dir."""
    done: dict[str, Path] = {}

    def run(name: str, args: list[str]) -> Path:
        if name not in done:
            out = tmp_path_factory.mktemp(f"cvp_{name}")
            cmd = [str(CVP_CLI), "--video", str(clip), "--out_dir", str(out), *args]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
            assert proc.returncode == 0, proc.stderr[-2000:]
            done[name] = out
        return done[name]

    return run


def _stored_tokens(store: SessionStore, run_id: str) -> np.ndarray:
    frame = store.table("tokens", run_id).sort_values(["canvas_index", "packed_row", "packed_col"])
    return frame.to_numpy().astype(np.int32)


def _png_canvases(folder: Path) -> np.ndarray:
    names = sorted(folder.glob("canvas_*.png"))
    return np.stack([cv2.imread(str(p), cv2.IMREAD_COLOR)[:, :, ::-1] for p in names])


def test_png_import_matches_and_stores_cvps_tokens(cvp_run, clip, tmp_path):
    out = cvp_run("fixed_png", FIXED_PNG)
    positions = np.load(out / "src_patch_position.npy")
    with SessionStore(tmp_path / "s.duckdb") as store:
        imp = import_cvp(out, clip, store, config=ImportConfig())
        assert imp.status == "match" and imp.warnings == (), imp.describe()
        tokens = _stored_tokens(store, imp.run_id)
        assert np.array_equal(tokens[:, :3], positions)
        assert np.array_equal(tokens[:, 7] == 1, positions[:, 0] >= 0)
        row = store.get_run(imp.run_id)
        assert row.config[IMPORT_KEY] == str(out.resolve()) and row.config[IMPORT_STATUS_KEY] == "match"
        assert row.parent_run_id == imp.recomputed_run_id and row.status == "done" and row.profile == "parity"
        assert row.config["grouping_mode"] == "fixed" and row.config["canvas_format"] == "png"
        # The stored run reopens like our own runs, and its canvases are cvp's PNGs, exactly.
        view = imported_view(store, imp.run_id, open_run(store, imp.run_id))
    assert np.array_equal(view.canvases.images, _png_canvases(out))
    assert np.array_equal(view.canvases.src_patch_position, positions)
    check = canvases.round_trip_check(view, canvas_dir=out)
    assert check.fmt == "png" and check.passed and check.checked_patches == int((positions[:, 0] >= 0).sum())


def test_cli_imports_a_jpg_readiness_run(cvp_run, clip, tmp_path):
    out = cvp_run("readiness_jpg", READINESS_JPG)
    db = tmp_path / "cli.duckdb"
    proc = run_cli("import", out, clip, "--session-db", db, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["status"] == "match" and summary["canvases_differing"] == 0
    assert summary["anchor_psnr_db"] is None  # our anchor, written as JPEG q95, has cvp's exact pixels
    with SessionStore(db, read_only=True) as store:
        tokens = _stored_tokens(store, summary["run_id"])
        assert store.get_run(summary["run_id"]).config[IMPORT_KEY] == str(out.resolve())
    assert np.array_equal(tokens[:, :3], np.load(out / "src_patch_position.npy"))
    text = run_cli("import", out, clip, "--session-db", db)
    assert text.returncode == 0 and text.stdout.splitlines()[0].startswith(f"{out} ({clip}): match")


@pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="cvp's ffmpeg_native backend needs the ffmpeg binary"
)
def test_ffmpeg_native_pixels_are_a_named_mismatch(cvp_run, clip, tmp_path):
    out = cvp_run("ffmpeg_native", [*READINESS_JPG, "--decode_backend", "ffmpeg_native"])
    with SessionStore(tmp_path / "s.duckdb") as store:
        imp = import_cvp(out, clip, store, config=ImportConfig())
        codes = [w.code for w in imp.warnings]
        assert imp.status == "mismatch" and codes == ["cvp_decode_backend", "cvp_canvases_differ"], codes
        assert imp.comparison.position_rows_differing == 0 and imp.comparison.frame_ids_differing == 0
        assert 30.0 < imp.comparison.anchor_psnr_db < 80.0  # close, not equal: another decoder's pixels
        row = store.get_run(imp.run_id)
        assert row.config[IMPORT_STATUS_KEY] == "mismatch"
        assert {"cvp_decode_backend", "cvp_canvases_differ"} <= {w["code"] for w in row.warnings}
        assert np.array_equal(
            _stored_tokens(store, imp.run_id)[:, :3], np.load(out / "src_patch_position.npy")
        )


def _swap_blocks(folder: Path, canvas: int, s: int, wb: int, patch: int) -> None:
    """Swap the first two 2×2 blocks of a PNG canvas, pixels and positions alike (a consistent edit)."""
    positions = np.load(folder / "src_patch_position.npy")
    for ph in range(2):
        for pw in range(2):
            a, b = canvas * s + ph * wb + pw, canvas * s + ph * wb + pw + 2
            positions[[a, b]] = positions[[b, a]]
    np.save(folder / "src_patch_position.npy", positions, allow_pickle=False)
    path = folder / f"canvas_{canvas:03d}.png"
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    f = 2 * patch
    left = bgr[:f, :f].copy()
    bgr[:f, :f] = bgr[:f, f : 2 * f]
    bgr[:f, f : 2 * f] = left
    assert cv2.imwrite(str(path), bgr, [cv2.IMWRITE_PNG_COMPRESSION, 3])


def test_cvps_tokens_stay_authoritative_when_they_differ(cvp_run, clip, tmp_path):
    edited = tmp_path / "edited"
    shutil.copytree(cvp_run("fixed_png", FIXED_PNG), edited)
    cvp = read_cvp_dir(edited)
    hb, wb = cvp.grid_hw
    assert (
        cvp.positions[hb * wb, 0] != cvp.positions[hb * wb + 2, 0]
        or cvp.positions[hb * wb, 2] != cvp.positions[hb * wb + 2, 2]
    )
    _swap_blocks(edited, 1, hb * wb, wb, cvp.patch)
    positions = np.load(edited / "src_patch_position.npy")
    with SessionStore(tmp_path / "s.duckdb") as store:
        imp = import_cvp(edited, clip, store, config=ImportConfig())
        assert imp.status == "mismatch"
        assert [w.code for w in imp.warnings] == ["cvp_positions_differ", "cvp_canvases_differ"]
        assert imp.comparison.position_rows_differing == 8 and imp.comparison.canvases_differing == 1
        assert np.array_equal(_stored_tokens(store, imp.run_id)[:, :3], positions)
        # The recomputation (the parent run) keeps our own tokens.
        ours = _stored_tokens(store, imp.recomputed_run_id)[:, :3]
        assert not np.array_equal(ours, positions) and np.array_equal(
            np.sort(ours, axis=0), np.sort(positions, axis=0)
        )
        view = imported_view(store, imp.run_id, open_run(store, imp.run_id))
    # Canvases rebuilt from cvp's tokens and our pixels equal cvp's edited PNGs exactly.
    assert np.array_equal(view.canvases.images, _png_canvases(edited))
    assert np.array_equal(imp.result.canvases.images, view.canvases.images)
    assert canvases.round_trip_check(view, canvas_dir=edited).passed
    assert {w.code for w in view.warnings} >= {"cvp_positions_differ"}


# -- bad inputs: one line naming the file --------------------------------------------------------------


@pytest.fixture
def copy_of(cvp_run, tmp_path) -> Callable[[], Path]:
    def make() -> Path:
        dst = tmp_path / "cvp"
        shutil.copytree(cvp_run("fixed_png", FIXED_PNG), dst)
        return dst

    return make


def _import_error(folder: Path, video: Path, tmp_path: Path) -> str:
    with SessionStore(tmp_path / "bad.duckdb") as store:
        with pytest.raises(InputError) as info:
            import_cvp(folder, video, store, config=ImportConfig())
        assert store.list_runs(status="done") == [], "a refused import must leave no finished run"
    message = info.value.one_line()
    assert "\n" not in message
    return message


def test_missing_meta_json(copy_of, clip, tmp_path):
    folder = copy_of()
    (folder / "meta.json").unlink()
    message = _import_error(folder, clip, tmp_path)
    assert message == f"{folder / 'meta.json'}: missing; not a codec-video-prep output directory"


def test_truncated_npy(copy_of, clip, tmp_path):
    folder = copy_of()
    path = folder / "src_patch_position.npy"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    message = _import_error(folder, clip, tmp_path)
    assert message.startswith(f"{path}: is truncated or not a .npy array"), message


def test_mismatched_shapes(copy_of, clip, tmp_path):
    folder = copy_of()
    ids = np.load(folder / "frame_ids.npy")
    np.save(folder / "frame_ids.npy", ids[:-1], allow_pickle=False)
    message = _import_error(folder, clip, tmp_path)
    assert (
        message
        == f"{folder / 'frame_ids.npy'}: has {ids.size - 1} ids; meta.json says {ids.size} sampled frames"
    )


def test_corrupt_json_and_canvas(copy_of, clip, tmp_path):
    folder = copy_of()
    canvas = folder / "canvas_002.png"
    canvas.write_bytes(b"not a png at all")
    assert _import_error(folder, clip, tmp_path) == f"{canvas}: cannot be decoded as an image"
    (folder / "meta.json").write_text('{"hb_wb": [18, 22],')
    assert _import_error(folder, clip, tmp_path).startswith(f"{folder / 'meta.json'}: is not valid JSON")


def test_wrong_video(cvp_run, other_clip, tmp_path):
    folder = cvp_run("fixed_png", FIXED_PNG)
    message = _import_error(folder, other_clip, tmp_path)
    assert message.startswith(f"{other_clip}: is not the video cvp read for {folder} (stream_bit_rate "), (
        message
    )


def test_same_facts_other_pixels_is_refused(copy_of, clip, other_clip, tmp_path):
    """A video whose stream facts match meta.json but whose pixels do not fails the anchor check."""
    folder = copy_of()
    meta = json.loads((folder / "meta.json").read_text())
    info = probe(other_clip, config=ProbeConfig(profile="parity"))
    meta["metadata"] |= {"stream_bit_rate": info.stream_bit_rate, "format_bit_rate": info.format_bit_rate}
    (folder / "meta.json").write_text(json.dumps(meta))
    message = _import_error(folder, other_clip, tmp_path)
    assert message.startswith(f"{other_clip}: content does not match {folder}: anchor canvas canvas_"), (
        message
    )
    assert "dB from this video's pixels (floor 30 dB)" in message


def test_cli_bad_input_is_one_line_exit_2(copy_of, clip, tmp_path):
    folder = copy_of()
    (folder / "meta.json").unlink()
    proc = run_cli("import", folder, clip, "--session-db", tmp_path / "cli.duckdb")
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr.strip()
        == f"codec-lens: error: {folder / 'meta.json'}: missing; not a codec-video-prep output directory"
    )


def test_import_config_is_validated():
    with pytest.raises(ValueError, match=r"Invalid content psnr db \(-1\.0\)\. Supported values are between"):
        ImportConfig(content_psnr_db=-1.0)
