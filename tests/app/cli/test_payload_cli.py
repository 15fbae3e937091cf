"""``codec-lens payload`` on real output folders: files, refusals in one line, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run_cli, run_cli_forked

from backend.cvp_format.write import write_output

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def output_dir(sample_run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_output(sample_run, tmp_path_factory.mktemp("payload") / "run")


def test_llava_ov2_payload(output_dir: Path, sample_run, tmp_path: Path) -> None:
    out = tmp_path / "llava"
    done = run_cli_forked("payload", output_dir, "--model", "llava-ov2", "--out", out)
    assert done.returncode == 0, done.stderr
    assert "llava-ov2 payload of" in done.stdout and done.stdout.count("\n") == 1
    manifest = json.loads((out / "manifest.json").read_text())
    positions = np.load(out / "positions.npy")
    hb, wb = sample_run.geometry.grid_hw
    kept = manifest["canvas_files"]
    assert positions.shape == (len(kept) * hb * wb, 3)
    # Each canvas's rows are its src_patch_position rows in 2×2 block order.
    src = np.load(output_dir / "src_patch_position.npy")
    first = src[: hb * wb].reshape(hb // 2, 2, wb // 2, 2, 3).transpose(0, 2, 1, 3, 4).reshape(-1, 3)
    assert np.array_equal(positions[: hb * wb], first)
    prompt = (out / "prompt.txt").read_text()
    assert prompt.count("<|image_pad|>") == manifest["image_pad_tokens"] == positions.shape[0] // 4
    assert prompt.startswith("<0.0 seconds><|vision_start|>") and prompt.endswith("<|vision_end|>\n")
    assert manifest["fps"] == pytest.approx(sample_run.info.fps)
    assert manifest["max_pixels"] == max(150000, hb * wb * 14 * 14)
    assert sorted(p.name for p in out.glob("canvas_*")) == kept
    again = run_cli_forked("payload", output_dir, "--model", "llava-ov2", "--out", out, "--json")
    assert (
        again.returncode == 0 and json.loads(again.stdout)["image_pad_tokens"] == manifest["image_pad_tokens"]
    )


def test_onevision_encoder_payload(output_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ove"
    done = run_cli_forked("payload", output_dir, "--model", "onevision-encoder", "--out", out)
    assert done.returncode == 0, done.stderr
    thw = np.load(out / "positions_thw.npy")
    vis = np.load(out / "visible_indices.npy")
    manifest = json.loads((out / "manifest.json").read_text())
    hb, wb = manifest["grid_hw"]
    assert thw.shape == (len(manifest["canvas_files"]) * hb * wb, 3)
    assert np.array_equal(vis, thw[:, 0].astype(np.int64) * hb * wb + thw[:, 1] * wb + thw[:, 2])
    assert (thw[: hb * wb, 0] == 0).all()  # canvas 0: the first sampled frame


def test_a_half_padded_canvas_is_one_error_line(output_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in output_dir.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    src = np.load(broken / "src_patch_position.npy")
    tokens = np.load(broken / "tokens.npy")
    s = src.shape[0] // len(json.loads((broken / "meta.json").read_text())["canvas_files"])
    src[s : s + 3] = -1  # three padding rows in canvas 1
    tokens[s : s + 3, :3] = -1
    np.save(broken / "src_patch_position.npy", src)
    np.save(broken / "tokens.npy", tokens)
    out = tmp_path / "never"
    done = run_cli_forked("payload", broken, "--model", "llava-ov2", "--out", out)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "canvas_001.jpg: half-padded canvas" in lines[0], done.stderr
    assert not out.exists()


def test_bad_folders_and_outputs_are_one_error_line(output_dir: Path, tmp_path: Path) -> None:
    missing = run_cli_forked("payload", tmp_path / "nothing", "--model", "llava-ov2", "--out", tmp_path / "o")
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    refused = run_cli_forked("payload", output_dir, "--model", "llava-ov2", "--out", occupied)
    assert refused.returncode == 2 and "not a payload folder" in refused.stderr
    assert (occupied / "notes.txt").read_text() == "mine"
    unknown = run_cli("payload", output_dir, "--model", "gpt", "--out", tmp_path / "o")  # argparse's exit
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
