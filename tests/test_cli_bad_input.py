"""`codec-lens select` rejects bad inputs with exit code 2 and one clear line on stderr."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

# (case id, how to get the path, phrase the last stderr line must contain)
BAD_CASES: list[tuple[str, str, str]] = [
    ("missing", "missing", "does not exist"),
    ("directory", "directory", "is a directory"),
    ("zero_byte", "empty", "is empty"),
    ("text_file", "notes", "cannot read video"),
    ("truncated", "cut", "cannot read video"),
    ("audio_only", "audio_only", "no video stream"),
    ("mpeg4_part2", "mpeg4", "no bitcost"),
    ("tiny_2x2", "tiny_2x2", "too small"),
]


def _bad_path(key: str, bad_inputs: dict[str, Path], tmp_path: Path) -> Path:
    if key == "missing":
        return tmp_path / "no_such_clip.mp4"
    if key == "directory":
        folder = tmp_path / "a_folder.mp4"
        folder.mkdir()
        return folder
    return bad_inputs[key]


def _assert_clean_rejection(
    result: subprocess.CompletedProcess[str], bad: Path, out: Path, phrase: str
) -> None:
    """Exit 2, one stderr line naming the file and the problem, no traceback, no outputs."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback (most recent call last)" not in result.stderr, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines  # one line: no decoder log lines, no usage text
    last = lines[0]
    assert str(bad) in last or bad.name in last, last
    assert phrase in last.lower(), last
    # A rejected input leaves nothing behind: no output folder, no partial folder beside it.
    assert not out.exists()
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


@pytest.mark.parametrize(("key", "phrase"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_select_rejects_bad_input(key: str, phrase: str, bad_inputs: dict[str, Path], tmp_path: Path) -> None:
    bad = _bad_path(key, bad_inputs, tmp_path)
    out = tmp_path / "out"
    result = run_cli("select", bad, "--out", out)
    _assert_clean_rejection(result, bad, out, phrase)


def test_parity_rejects_size_not_multiple_of_16(bad_inputs: dict[str, Path], tmp_path: Path) -> None:
    bad = bad_inputs["odd_642x362"]
    out = tmp_path / "out"
    result = run_cli("select", bad, "--out", out, "--profile", "parity")
    _assert_clean_rejection(result, bad, out, "multiple of 16")


def test_clean_accepts_size_not_multiple_of_16(bad_inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("select", bad_inputs["odd_642x362"], "--out", out, "--profile", "clean")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (out / "meta.json").is_file()
    assert (out / "src_patch_position.npy").is_file()
