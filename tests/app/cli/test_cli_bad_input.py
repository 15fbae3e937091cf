"""`codec-lens select` rejects bad inputs with exit code 2 and one clear line on stderr."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.paths import REPO_ROOT

# Every case is a whole CLI process: the end-to-end tier, not the unit tier (--fast).
pytestmark = pytest.mark.slow

# (case id, how to get the path, phrase the last stderr line must contain)
BAD_CASES: list[tuple[str, str, str]] = [
    ("missing", "missing", "does not exist"),
    ("directory", "directory", "is a directory"),
    ("zero_byte", "empty", "is empty"),
    ("text_file", "notes", "cannot read video"),
    ("truncated", "cut", "cannot read video"),
    ("truncated_index_first", "cut_front", "file is truncated"),
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


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("codec-lens: error: "), lines
    return lines[0]


def _assert_clean_rejection(
    result: subprocess.CompletedProcess[str], bad: Path, out: Path, phrase: str
) -> None:
    """Exit 2, one stderr line naming the file and the problem, no traceback, no outputs."""
    last = _one_error_line(result)  # one line: no traceback, no decoder log lines, no usage text
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


@pytest.mark.slow  # a whole-clip select
def test_clean_accepts_size_not_multiple_of_16(bad_inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("select", bad_inputs["odd_642x362"], "--out", out, "--profile", "clean")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (out / "meta.json").is_file()
    assert (out / "src_patch_position.npy").is_file()


# --- the output folder is never something else's -------------------------------------------------


def test_out_never_replaces_what_is_not_an_output(h264_clip: Path, tmp_path: Path) -> None:
    work = tmp_path / "thesis"
    work.mkdir()
    (work / "thesis.tex").write_text("months of work")
    line = _one_error_line(run_cli("select", h264_clip, "--out", work, "--num_sampled_frames", "16"))
    assert str(work) in line and "not a codec-lens output" in line
    assert (work / "thesis.tex").read_text() == "months of work"

    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    line = _one_error_line(run_cli("select", h264_clip, "--out", a_file, "--num_sampled_frames", "16"))
    assert "not a folder" in line and a_file.read_text() == "keep me"

    before = h264_clip.read_bytes()
    line = _one_error_line(run_cli("select", h264_clip, "--out", h264_clip, "--num_sampled_frames", "16"))
    assert "not a folder" in line and h264_clip.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if ".partial-" in p.name or ".old-" in p.name]


@pytest.mark.slow  # whole-clip selects
def test_out_replaces_an_earlier_output_and_fills_an_empty_folder(h264_clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()  # empty: fine
    for n in ("16", "8"):
        result = run_cli("select", h264_clip, "--out", out, "--num_sampled_frames", n, "--json")
        assert result.returncode == 0, result.stderr[-2000:]
        assert json.loads((out / "meta.json").read_text())["sampled_frames"] == int(n)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_option_errors_are_one_line(h264_clip: Path, tmp_path: Path) -> None:
    for args, phrase in (
        (["--frame_sampling_mode", "nope"], "invalid choice: 'nope'"),
        (["--patch", "abc"], "invalid int value: 'abc'"),
        (["--readiness_norm_sum_threshold", "nan"], "Supported values are finite numbers"),
        (["--frame_sampling_mode", "fps", "--sample_fps", "nan"], "Invalid sample fps (nan)"),
    ):
        line = _one_error_line(run_cli("select", h264_clip, "--out", tmp_path / "o", *args))
        assert phrase in line, line
        assert not (tmp_path / "o").exists()


def test_session_db_runs_reject_bad_paths_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    missing = tmp_path / "gone.mp4"
    line = _one_error_line(run_cli("select", missing, "--session-db", db))
    assert str(missing) in line and "does not exist" in line
    line = _one_error_line(run_cli("select", tmp_path, "--session-db", db))
    assert "is a directory" in line


def test_a_file_name_that_is_not_utf8_is_named_in_the_error(h264_clip: Path, tmp_path: Path) -> None:
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/clip\xff.mp4"))
    shutil.copyfile(h264_clip, odd)
    line = _one_error_line(run_cli("select", odd, "--out", tmp_path / "o"))
    assert "clip" in line and "not valid UTF-8" in line


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (forked readers keep the parent's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


@pytest.mark.slow  # the CLI on the whole 1080p clip, stopped mid-read
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to find the reader processes")
def test_sigterm_during_a_split_read_cleans_up(real_clips: Path, tmp_path: Path) -> None:
    video = real_clips / "real_hevc_bbb_1080p.ts"
    out, db = tmp_path / "out_sigterm", tmp_path / "s.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "select", str(video), "--out", str(out), "--session-db", str(db)],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    # The CLI's waiting parent, the command's process and, once the split read has started, its reader.
    while len(_processes_mentioning(str(out))) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until the reader child exists: the split read has started
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, stderr
    assert [line for line in stderr.splitlines() if line.strip()] == ["codec-lens: interrupted"]
    time.sleep(0.5)
    assert _processes_mentioning(str(out)) == []  # no reader left behind
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".out_sigterm.")]
    from backend.store import SessionStore

    with SessionStore(db) as store:
        assert [r.status for r in store.list_runs()] == ["failed"]


@pytest.mark.slow  # selects over the whole clip in both profiles
def test_a_damaged_stream_is_one_warning_not_decoder_noise(h264_clip: Path, tmp_path: Path) -> None:
    # Bytes flipped inside the media data: the stream still decodes (with concealment), and
    # cvp's FFmpeg would print a line per broken macroblock on the terminal.
    data = bytearray(h264_clip.read_bytes())
    rng = random.Random(7)
    for _ in range(60):
        data[rng.randrange(len(data) // 3, 2 * len(data) // 3)] ^= 0xFF
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(bytes(data))
    for profile in ("clean", "parity"):
        result = run_cli("select", damaged, "--out", tmp_path / profile, "--profile", profile, "--json")
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stderr == "", result.stderr[:2000]
        warnings = json.loads(result.stdout)["warnings"]
        warned = [w["message"] for w in warnings if w["code"] == "decoder_errors"]
        assert len(warned) == 1 and "damaged stream" in warned[0], warned
