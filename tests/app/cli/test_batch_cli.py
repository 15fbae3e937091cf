"""``codec-lens batch`` end to end: bad inputs are rows, re-runs skip, Ctrl-C keeps what finished."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.batch_clips import make_bad_dataset, make_dataset
from helpers.cli import run_cli, run_cli_forked
from helpers.paths import REAL_CLIPS, REPO_ROOT

from backend.store import read_summary_parquet

pytestmark = pytest.mark.slow

_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _without_file_capabilities() -> None:
    """In the child before exec: drop root's power to read any folder, so that a mode-000
    folder is as unreadable to the batch as it is to any other user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _batch(*args: str | Path, **kwargs) -> subprocess.CompletedProcess[str]:
    preexec = _without_file_capabilities if os.geteuid() == 0 else None
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "batch", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        preexec_fn=preexec,
        **kwargs,
    )


@pytest.fixture(scope="module")
def bad_dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("bad_dataset")
    return folder, make_bad_dataset(folder)


def test_every_bad_input_is_one_row_and_the_rest_is_done(bad_dataset, tmp_path: Path) -> None:
    folder, files = bad_dataset
    locked = folder / "locked"
    locked.chmod(0)
    try:
        result = _batch(folder, "--out", tmp_path / "out", "--json", "--workers", "2")
        rows = read_summary_parquet(tmp_path / "out" / "batch.parquet").set_index("rel_path")
        again = _batch(folder, "--out", tmp_path / "out", "--json", "--workers", "2")
    finally:
        locked.chmod(0o755)
    assert result.returncode == 1, result.stderr  # 1: some videos failed
    summary = json.loads(result.stdout)
    # MPEG-4 Part 2 and AV1 have no bitcost: the batch's declared fallback (signal, then uniform) runs them.
    done = {"good/a.mp4", "good/b.mp4", "bad/odd_642x362.mp4", "bad/mpeg4.mp4", "bad/av1.mp4"}
    failed = {
        "bad/empty.mp4": "is empty (0 bytes)",
        "bad/notes.mp4": "is named like a video, but its content is not one",
        "bad/cut.mp4": "cannot read video",
        "bad/cut_front.mp4": "file is truncated",
        "bad/audio_only.m4a": "no video stream",
        "bad/tiny_2x2.mp4": "frame size is too small",
        "locked": "cannot list folder (Permission denied)",
    }
    assert set(rows.index) == done | set(failed)
    assert (summary["done"], summary["failed"], summary["skipped"]) == (5, 7, 0)
    for rel in done:
        assert rows.loc[rel, "status"] == "done" and rows.loc[rel, "tokens"] > 0
    for rel in ("bad/mpeg4.mp4", "bad/av1.mp4"):
        assert rows.loc[rel, "selector_requested"] == "cvp"
        assert rows.loc[rel, "fallback_reason"] in {"no_bitcost", "flat_scores"}, rows.loc[rel]
    for rel, phrase in failed.items():
        error = rows.loc[rel, "error"]
        assert rows.loc[rel, "status"] == "failed"
        assert phrase in error and "\n" not in error and error.startswith(str(folder / rel)), error
        assert f"failed: {error}" in result.stderr
    assert "locked/hidden.mp4" not in rows.index
    # The re-run skips (and names) the finished videos, and tries the failed ones again.
    assert again.returncode == 1
    repeat = json.loads(again.stdout)
    assert sorted(repeat["skipped_paths"]) == sorted(str(files[rel]) for rel in done)
    for rel in done:
        assert f"skipped: {files[rel]}" in again.stderr
    assert repeat["failed"] == 7


# Run in a fresh interpreter (the forked CLI server of conftest has the pipeline loaded already):
# the batch command's main(), then the heavy packages it imported, as JSON on stdout.
_IMPORTS_OF_A_RUN = """
import json, sys
from app.cli import main
code = main(sys.argv[1:])
heavy = ("av", "cv2", "pandas", "numpy", "duckdb", "gradio", "ray")
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}))
"""


def test_a_rerun_that_skips_everything_imports_no_decoder_and_no_pandas(tmp_path: Path) -> None:
    # A re-run that skips every video is start-up and planning; it stays a few percent of the
    # first run only if it loads neither the decoders (PyAV, OpenCV: the option classes it
    # validates with live beside the stages that decode) nor pandas (the session store).
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copyfile(REAL_CLIPS / "real_h264_flower_timelapse.mp4", folder / "clip.mp4")
    args = ("batch", str(folder), "--out", str(tmp_path / "out"), "--workers", "1", "--profile", "parity")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    def imports_of_a_run() -> dict:
        probe = [sys.executable, "-c", _IMPORTS_OF_A_RUN, *args]
        out = subprocess.run(probe, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        return {**json.loads(out.stdout.splitlines()[-1]), "stderr": out.stderr}

    first = imports_of_a_run()
    assert first["code"] == 0 and "1 done" in first["stderr"], first["stderr"]
    rerun = imports_of_a_run()
    assert rerun["code"] == 0 and "1 skipped" in rerun["stderr"], rerun["stderr"]
    # numpy (the option classes' records) and DuckDB (it writes batch.parquet) are loaded, which
    # also shows that the probe sees what the command imports; the decoders and pandas are not.
    assert rerun["loaded"] == ["numpy", "duckdb"], rerun["loaded"]
    assert read_summary_parquet(tmp_path / "out" / "batch.parquet")["status"].tolist() == ["skipped"]


def test_every_selector_runs_a_batch_and_a_preset_sets_its_values(tmp_path: Path) -> None:
    clips = make_dataset(tmp_path / "data")
    counts = {}
    for selector in ("llava-ov2", "onevision", "uniform"):
        out = tmp_path / selector
        extra = ("--num_frames", "6") if selector == "uniform" else ()
        result = run_cli_forked(
            "batch",
            tmp_path / "data",
            "--out",
            out,
            "--json",
            "--workers",
            "1",
            "--selector",
            selector,
            *extra,
        )
        assert result.returncode == 0, result.stderr
        rows = read_summary_parquet(out / "batch.parquet").set_index("rel_path")
        assert set(rows.index) == set(clips) and (rows["status"] == "done").all()
        assert (rows["selector"] == selector).all() and (rows["tokens"] > 0).all()
        counts[selector] = rows[["frames", "groups", "canvases"]].to_dict("index")
    # Uniform keeps 6 whole frames, one canvas each, in groups of 4: the second group's last two
    # canvases are padding.
    assert all(c == {"frames": 6, "groups": 2, "canvases": 8} for c in counts["uniform"].values())
    # The Dataset tab reopens an output folder with its own selector's options, not cvp's.
    from app.tabs.dataset import _stored_options
    from backend.selectors import UniformOptions

    assert _stored_options(tmp_path / "uniform" / "videos" / "a.mp4") == UniformOptions(
        num_frames=6, workers=1
    )
    # A preset names its selector: mage-vl is cvp with patch 16 and up to 256 samples.
    out = tmp_path / "mage"
    listed = tmp_path / "data" / "one.txt"
    listed.write_text("a.mp4\n")
    result = run_cli_forked("batch", listed, "--out", out, "--json", "--workers", "1", "--preset", "mage-vl")
    assert result.returncode == 0, result.stderr
    rows = read_summary_parquet(out / "batch.parquet")
    assert list(rows["selector"]) == ["cvp"]
    record = json.loads((out / "videos" / "a.mp4" / "codec_lens_batch.json").read_text())
    assert record["options"]["options"]["patch"] == 16 and record["options"]["preset"] == "mage-vl"
    assert record["options"]["options"]["num_sampled_frames"] == 256  # mage-vl does not cap
    # llava-ov2-release caps its 512 samples at the 24-frame clip's frame count, as select --preset does.
    out = tmp_path / "release"
    result = run_cli_forked(
        "batch", listed, "--out", out, "--json", "--workers", "1", "--preset", "llava-ov2-release"
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "videos" / "a.mp4" / "codec_lens_batch.json").read_text())
    assert record["options"]["options"]["num_sampled_frames"] == 24


def test_a_manifest_gives_options_per_video(tmp_path: Path) -> None:
    clips = make_dataset(tmp_path / "data")
    manifest = tmp_path / "data" / "set.csv"
    manifest.write_text(
        "path,num_sampled_frames,caption\na.mp4,16,first\nsub/b.mp4,,second\nsub/deeper/c.mp4,lots,third\n"
    )
    result = run_cli_forked("batch", manifest, "--out", tmp_path / "out", "--json", "--workers", "1")
    assert result.returncode == 1, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ignored_columns"] == ["caption"]
    rows = read_summary_parquet(tmp_path / "out" / "batch.parquet").set_index("rel_path")
    assert rows.loc["a.mp4", "frames"] == 16
    assert rows.loc["sub/b.mp4", "frames"] == 24  # every frame of the 24-frame clip (default 48)
    assert rows.loc["sub/deeper/c.mp4", "error"] == (
        f"{clips['sub/deeper/c.mp4']}: Invalid num_sampled_frames ('lots'). Supported values are int values."
    )


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (
            ("--selector", "uniform", "--preset", "mage-vl"),
            "Invalid preset ('mage-vl') for the uniform selector",
        ),
        (("--selector", "uniform", "--group_size", "4"), "Invalid option (group_size) for selector uniform"),
        (("--selector", "nope"), "argument --selector: invalid choice: 'nope'"),
        (("--ray-address", "auto"), "use --engine ray"),
        (("--workers", "0"), "Invalid workers (0)"),
        (("--group_size", "0"), "Invalid group size (0)"),
    ],
)
def test_invalid_flags_are_one_line_and_run_nothing(
    args: tuple[str, ...], phrase: str, tmp_path: Path
) -> None:
    # argparse exits through SystemExit, whose code only the real entry passes on.
    runner = run_cli if "nope" in args else run_cli_forked
    result = runner("batch", REAL_CLIPS, "--out", tmp_path / "out", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and phrase in lines[0], result.stderr
    assert not (tmp_path / "out" / "videos").exists()


NAMES = [f"{c}.mp4" for c in "abcdefgh"]


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _batch_until_one_is_done(tmp_path: Path) -> tuple[Path, Path, subprocess.Popen[str]]:
    """A batch of eight real clips on one worker, running, once its first video is done (~1 s
    each: what follows lands mid-batch even when this process is slow to notice, as on a loaded
    CI machine): (input folder, output folder, the batch process)."""
    folder = tmp_path / "real"
    folder.mkdir()
    for name in NAMES:
        shutil.copy(REAL_CLIPS / "real_h264_film_friday.mp4", folder / name)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "batch", folder, "--out", out, "--workers", "1"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A terminal's Ctrl-C, even when these tests run as a background job (a shell's `&`
        # starts it with SIGINT ignored, and Python then keeps ignoring it).
        preexec_fn=_interruptible,
    )
    deadline = time.monotonic() + 300
    while not list(out.glob("videos/*/codec_lens_batch.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return folder, out, proc


def test_ctrl_c_keeps_the_finished_videos_and_the_rerun_does_the_rest(tmp_path: Path) -> None:
    folder, out, proc = _batch_until_one_is_done(tmp_path)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    rows = read_summary_parquet(out / "batch.parquet")
    finished = set(rows.loc[rows["status"] == "done", "rel_path"])
    assert finished and len(rows) < len(NAMES) and set(rows["status"]) == {"done"}
    assert not [p for p in out.rglob(".*") if ".partial-" in p.name]
    rerun = run_cli_forked("batch", folder, "--out", out, "--workers", "2", "--json")
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    assert {Path(p).name for p in summary["skipped_paths"]} == finished
    assert summary["done"] == len(NAMES) - len(finished)


def test_a_killed_batch_process_takes_its_workers_and_the_rerun_does_the_rest(tmp_path: Path) -> None:
    folder, out, proc = _batch_until_one_is_done(tmp_path)
    workers = {
        int(p) for t in Path(f"/proc/{proc.pid}/task").iterdir() for p in (t / "children").read_text().split()
    }
    assert workers, "no worker running"
    proc.kill()  # SIGKILL: no clean-up of its own
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
    assert not alive, f"workers {alive} outlived the batch process"
    finished = {p.parent.name for p in out.glob("videos/*/codec_lens_batch.json")}
    assert finished and finished != set(NAMES)
    unfinished = sorted(set(NAMES) - finished)[0]
    (out / "videos" / f".{unfinished}.partial-killed").mkdir()  # as a kill during its write leaves
    rerun = run_cli_forked("batch", folder, "--out", out, "--workers", "2", "--json")
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    assert {Path(p).name for p in summary["skipped_paths"]} == finished
    assert summary["done"] == len(NAMES) - len(finished)
    rows = read_summary_parquet(out / "batch.parquet")
    assert sorted(rows["rel_path"]) == NAMES
    # Partial folders of a killed write are cleared by the rerun's unit of that video.
    assert not [p for p in out.rglob(".*") if ".partial-" in p.name or ".old-" in p.name]
