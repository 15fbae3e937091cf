"""A decoder crash in the CLI is one error line and exit 2: no core-dump exit, no half-written output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults import STAGE_ENV, VIDEO_ENV, fault_env
from helpers.paths import REPO_ROOT, SAMPLE_VIDEO

pytestmark = [pytest.mark.needs_cvp, pytest.mark.slow]  # process-level end-to-end tier, not --fast


def _run_cli(*args: str | Path, abort_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (STAGE_ENV, VIDEO_ENV)}
    if abort_at is not None:  # the test's own fault (tests/faults/sitecustomize.py), at start-up
        env.update(fault_env(abort_at))
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def _stored(db: Path) -> list[tuple[str, str | None]]:
    from backend.store import SessionStore

    with SessionStore(db, read_only=True) as store:
        return [(r.status, r.error) for r in store.list_runs()]


def test_a_decoder_abort_in_select_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out, db = tmp_path / "out", tmp_path / "s.duckdb"
    stale = tmp_path / ".out.partial-stale"  # as a write of this --out would leave it
    stale.mkdir()
    result = _run_cli("select", SAMPLE_VIDEO, "--out", out, "--session-db", db, abort_at="decode")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"codec-lens: error: {SAMPLE_VIDEO}: the decoder crashed (SIGABRT) during decode"
    ]
    # No output, no partial folder: the session file and its lock file (backend.store.base).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.duckdb", "s.duckdb.lock"]
    [(status, error)] = _stored(db)
    assert status == "failed" and error is not None and error.startswith("interrupted: its process")


def test_the_crash_stage_is_where_it_died_and_no_db_is_needed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _run_cli("select", SAMPLE_VIDEO, "--out", out, abort_at="group")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        f"codec-lens: error: {SAMPLE_VIDEO}: the decoder crashed (SIGABRT) during group"
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_reselect_that_decodes_and_dies_marks_its_run_failed(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    first = _run_cli("select", SAMPLE_VIDEO, "--session-db", db)
    assert first.returncode == 0, first.stderr[-2000:]
    run_id = first.stdout.strip().rsplit("→ ", 1)[1]
    result = _run_cli("reselect", run_id, "--num_sampled_frames", "48", "--session-db", db, abort_at="decode")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        f"codec-lens: error: run {run_id}: the decoder crashed (SIGABRT) during decode"
    ]
    assert sorted(status for status, _ in _stored(db)) == ["done", "failed"]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to find the command's process")
def test_a_killed_command_is_one_line_too(tmp_path: Path) -> None:
    """A real death by a signal (as the kernel's OOM killer would end it), without the test switch."""
    out, db = tmp_path / "out", tmp_path / "s.duckdb"
    video = REPO_ROOT / "tests" / "data" / "real_hevc_bbb_1080p.ts"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "select", str(video), "--out", str(out), "--session-db", str(db)],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    child = None
    deadline = time.monotonic() + 60
    while child is None and proc.poll() is None and time.monotonic() < deadline:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        pids = children.read_text().split() if children.exists() else []
        child = int(pids[0]) if pids else None
        time.sleep(0.01)
    assert child is not None, "the command's process never started"
    while not db.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until its run is being stored
    time.sleep(0.3)
    os.kill(child, signal.SIGKILL)
    stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == 2, stderr
    [line] = stderr.splitlines()
    assert line.startswith(f"codec-lens: error: {video}: the run was killed (SIGKILL)"), line
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    assert [status for status, _ in _stored(db)] in ([], ["failed"])


def test_a_compare_that_dies_leaves_no_encodes(h264_clip: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    result = _run_cli(
        "compare", h264_clip, "--codecs", "h264", "--max-frames", "24", "--session-db", db, abort_at="decode"
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        f"codec-lens: error: {h264_clip}: the decoder crashed (SIGABRT) during decode"
    ]
    encodes = tmp_path / f"{db.name}.compare"
    assert not encodes.exists() or list(encodes.iterdir()) == []  # the variants it had encoded
    assert [status for status, _ in _stored(db)] == ["failed"]


def test_no_production_code_reads_the_test_switch() -> None:
    """The fault is the test's (tests/faults/): the app, backend and native code know no switch."""
    readers = [
        path.relative_to(REPO_ROOT).as_posix()
        for folder in ("app", "backend", "native")
        for path in (REPO_ROOT / folder).rglob("*.py")
        if STAGE_ENV in path.read_text() or "AbortSwitch" in path.read_text()
    ]
    assert readers == []
