"""Faults outside the video, one line each and nothing left behind: an unusable work folder, a
full disk during export (CLI and the app's Export panel), a video deleted while the app shows
it, and Ctrl-C during the long commands."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gradio as gr
import pytest
from helpers.cli import run_cli
from helpers.paths import REPO_ROOT
from procfs import alive, children

from app.workspace import Workspace, ensure_run, make_workspace
from backend.errors import InputError, OutputError

# Process-level end-to-end tests: the slow tier, not --fast.
pytestmark = pytest.mark.slow


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("codec-lens: error: "), lines
    return lines[0]


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@contextlib.contextmanager
def _tmpfs(folder: Path, *options: str) -> Iterator[Path]:
    """A tmpfs mounted on ``folder`` (skips the test where mounting is not permitted)."""
    folder.mkdir(parents=True, exist_ok=True)
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def _file_size_limit(size_bytes: int) -> Callable[[], None]:
    """A preexec_fn: writes past ``size_bytes`` fail with EFBIG (Python ignores SIGXFSZ)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size_bytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return limit


def _cli(
    *args: str | os.PathLike[str], preexec_fn: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        preexec_fn=preexec_fn,
    )


# -- the work folder --------------------------------------------------------------------------------


def test_an_uncreatable_work_folder_is_one_line_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    work = blocker / "work"
    result = run_cli("app", "--work-dir", work, "--session-db", tmp_path / "s.duckdb", timeout=120)
    line = _one_error_line(result)
    assert str(work) in line and "work folder" in line and "--work-dir" in line, line
    assert not (tmp_path / "s.duckdb").exists()  # before any run


def test_a_read_only_work_folder_is_one_line_at_start(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "ro", "ro", "size=1m") as work:
        result = run_cli("app", "--work-dir", work, "--session-db", tmp_path / "s.duckdb", timeout=120)
    line = _one_error_line(result)
    assert str(work) in line and "read-only file system" in line.lower(), line


def test_make_workspace_refuses_an_unwritable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(OutputError, match="cannot use the work folder"):
        make_workspace(session_db=tmp_path / "s.duckdb", output_dir=blocker)
    ws = make_workspace(session_db=tmp_path / "s.duckdb", output_dir=tmp_path / "fine")
    assert _files_under(tmp_path / "fine") == []  # the write check leaves nothing behind
    assert (tmp_path / "fine" / "uploads").is_dir()
    ws.close()


# -- a full disk during export ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored_run(h264_clip: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A session database with one finished run of the H.264 clip: (database, run id)."""
    db = tmp_path_factory.mktemp("faults") / "sessions.duckdb"
    result = run_cli("select", h264_clip, "--session-db", db, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    return db, json.loads(result.stdout)["run_id"]


# (format, extra args, file-size limit): each fails part-way, after some files were complete.
FULL_DISK_CASES = {
    "mp4": ("clip.mp4", ["--tables"], 40_000),
    "png_folder": ("frames", ["--format", "png"], 200_000),
    # The processed size keeps the clip under the limit, so the tables after it hit it.
    "tables_after_clip": ("clip.mp4", ["--tables", "--yuview", "--size", "processed"], 2_000_000),
}


@pytest.mark.needs_cvp
@pytest.mark.parametrize("case", list(FULL_DISK_CASES))
def test_export_on_a_full_disk_is_one_line_and_leaves_nothing(
    case: str, stored_run: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = stored_run
    out_name, extra, limit = FULL_DISK_CASES[case]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = ["export", run_id, "--out", out_dir / out_name, *extra, "--session-db", db]
    result = _cli(*args, preexec_fn=_file_size_limit(limit))
    line = _one_error_line(result)
    assert "file too large" in line.lower() and str(out_dir) in line, line
    assert list(out_dir.iterdir()) == []  # no clip, no partial clip, no csv, no sidecar, no png folder


@pytest.mark.needs_cvp
def test_export_on_a_real_full_disk_is_one_line_and_leaves_nothing(
    stored_run: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = stored_run
    with _tmpfs(tmp_path / "small", "size=256k") as out_dir:
        result = run_cli(
            "export",
            run_id,
            "--out",
            out_dir / "clip.mp4",
            "--tables",
            "--session-db",
            db,
        )
        line = _one_error_line(result)
        assert "no space left on device" in line.lower(), line
        assert list(out_dir.iterdir()) == []


# -- the app: the Export panel on a full disk, a video deleted while shown ---------------------------


@pytest.fixture(scope="module")
def app_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, Path]]:
    root = tmp_path_factory.mktemp("app_faults")
    videos = root / "videos"
    videos.mkdir()
    ws = make_workspace(session_db=root / "sessions.duckdb", input_dirs=(videos,), output_dir=root / "work")
    yield ws, videos
    ws.close()


@pytest.mark.needs_cvp
def test_the_export_panel_on_a_full_disk_is_one_line_and_leaves_nothing(
    app_ws: tuple[Workspace, Path], h264_clip: Path
) -> None:
    from app.tabs import export_panel

    ws, videos = app_ws
    video = videos / "panel.mp4"
    shutil.copyfile(h264_clip, video)
    run_id = ensure_run(ws, video)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, hard))
    try:
        with pytest.raises(gr.Error) as caught:
            export_panel.export_files(
                ws, run_id, export_panel.ClipForm(layers=["kept"], fmt="mp4", extras=export_panel.EXTRAS)
            )
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    message = str(caught.value.message)
    assert "\n" not in message and "file too large" in message.lower(), message
    assert _files_under(ws.output_root / export_panel.EXPORT_FOLDER) == []
    # With room again the same export works.
    files = export_panel.export_files(ws, run_id, export_panel.ClipForm(layers=["kept"], fmt="mp4"))
    assert [Path(f).suffix for f in files] == [".mp4", ".json"]


@pytest.mark.needs_cvp
def test_a_deleted_video_keeps_stepping_and_names_the_file_where_it_is_needed(
    app_ws: tuple[Workspace, Path], h264_clip: Path
) -> None:
    from app.tabs import inspect, sessions
    from app.tabs.canvases import CanvasViews
    from views.inspector.frame_cache import JpegCache

    ws, videos = app_ws
    video = videos / "deleted.mp4"
    shutil.copyfile(h264_clip, video)
    run_id = ensure_run(ws, video)
    cache = JpegCache(budget_bytes=16 << 20)
    assert (
        inspect.render_jpeg(
            ws, cache, inspect.FrameRequest(run_id, 0, inspect.ViewSettings("kept", 0.5, "turbo", "frame"))
        )[:2]
        == b"\xff\xd8"
    )
    video.unlink()
    # Shown already: every frame still steps (rendered from the decode in memory), the view opens.
    for row in (1, 2, 5):
        assert (
            inspect.render_jpeg(
                ws,
                cache,
                inspect.FrameRequest(
                    run_id, row, inspect.ViewSettings("kept,heatmap", 0.5, "turbo", "frame")
                ),
            )[:2]
            == b"\xff\xd8"
        )
        assert "frame" in inspect.info_fragment(ws, run_id, row)
    assert inspect.open_view(ws, run_id, 3, inspect.ViewSettings(["kept"], 0.5, "turbo", "frame"))
    # Evicted from memory: the decode cache on disk still serves it.
    ws._results.clear()
    ws.memory.clear()
    assert "frame" in inspect.info_fragment(ws, run_id, 4)
    # Evicted everywhere: what needs the file says which, in one line.
    ws._results.clear()
    ws.memory.clear()
    folder = ws.store.cache_lookup(ws.store.get_run(run_id).cache_key)
    assert folder is not None
    shutil.rmtree(folder)
    with pytest.raises(InputError) as caught:
        ws.result(run_id)
    assert caught.value.one_line().startswith(f"{video}: no longer exists"), caught.value.one_line()
    with pytest.raises(InputError, match="no longer exists"):
        ws.video_of(run_id)
    handlers: list[Callable[[], object]] = [
        lambda: inspect.result_of(ws, run_id),
        lambda: inspect.step(ws, run_id, 0, "next_key"),
        lambda: sessions.open_stored(ws, "", run_id, 0, ["kept"], 0.5, "turbo"),
        lambda: CanvasViews(ws).current(run_id),
    ]
    for handler in handlers:
        with pytest.raises(gr.Error) as error:
            handler()
        text = str(error.value.message)
        assert "\n" not in text and str(video) in text and "no longer exists" in text, text
    # The frame route answers one line (404), not a traceback.
    with pytest.raises(InputError, match="no longer exists"):
        inspect.render_jpeg(
            ws, cache, inspect.FrameRequest(run_id, 7, inspect.ViewSettings("kept", 0.5, "turbo", "frame"))
        )


# -- Ctrl-C during the long commands ----------------------------------------------------------------


def _interrupt_when(proc: subprocess.Popen[str], ready: Callable[[], bool], what: str) -> str:
    """SIGINT ``proc`` once ``ready()``; its stderr after it ended with 130 and one line."""
    deadline = time.monotonic() + 300
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, f"the command ended before {what}: {proc.communicate()[1][-2000:]}"
    proc.send_signal(signal.SIGINT)
    stderr = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, stderr[-2000:]
    assert [line for line in stderr.splitlines() if line.strip()] == ["codec-lens: interrupted"]
    return stderr


# A Ctrl-C whose handler runs inside an at-fork callback: Python discards the KeyboardInterrupt
# there ("Exception ignored in: _releaseLock"), as it did once in CI when the re-selection's
# reader processes were forked. The armed process must still stop.
_LOST_INTERRUPT_SCRIPT = """
import os, signal, sys, time
from backend.isolation import arm_interrupts
if sys.argv[1] == "armed":
    arm_interrupts()
def interrupt_inside_callback():
    os.kill(os.getpid(), signal.SIGINT)
    sum(range(1000))  # the handler runs at a bytecode boundary in here
os.register_at_fork(after_in_parent=interrupt_inside_callback)
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    for _ in range(100):
        time.sleep(0.01)
except KeyboardInterrupt as exc:
    print("stopped", exc)
    sys.exit(130)
print("ran on")
"""


@pytest.mark.parametrize("mode", ["armed", "bare"])
def test_an_interrupt_python_discards_is_delivered_again(mode: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LOST_INTERRUPT_SCRIPT, mode],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if mode == "bare":  # the premise: without the hook the interrupt is lost
        assert (done.returncode, done.stdout.strip()) == (0, "ran on"), done.stderr[-2000:]
        assert "Exception ignored" in done.stderr
    else:
        assert (done.returncode, done.stdout.strip()) == (130, "stopped SIGINT"), done.stderr[-2000:]
        assert "Exception ignored" not in done.stderr


def _start(*args: str | os.PathLike[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", *map(str, args)],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.needs_cvp
@pytest.mark.slow  # an export of four panes side by side, stopped mid-clip
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_ctrl_c_during_export_removes_its_files(stored_run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = stored_run
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = _start(
        "export", run_id, "--compare", run_id, run_id, run_id, "--layers", "heatmap,kept,grid",
        "--out", out_dir / "clip.mp4", "--tables", "--allow-dir", out_dir, "--session-db", db,
    )  # fmt: skip
    partial = out_dir / ".clip.partial.mp4"
    _interrupt_when(proc, lambda: partial.is_file() and partial.stat().st_size > 0, "its clip was begun")
    assert list(out_dir.iterdir()) == []


@pytest.mark.needs_cvp
@pytest.mark.slow  # a re-selection that decodes again, stopped mid-decode
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_ctrl_c_during_reselect_marks_its_run_failed(stored_run: tuple[Path, str], tmp_path: Path) -> None:
    from backend.store import SessionStore

    source_db, run_id = stored_run
    db = tmp_path / "s.duckdb"
    shutil.copyfile(source_db, db)  # the module's store stays as it was
    out = tmp_path / "out"
    # A front option changed: it decodes again, through reader processes.
    proc = _start("reselect", run_id, "--num_sampled_frames", "40", "--out", out, "--session-db", db)
    readers: list[int] = []

    def decoding() -> bool:
        # The command runs in a forked child of the CLI's process (app.cli.entry); the split
        # read's reader processes are that child's.
        readers[:] = [r for c in children(proc.pid) for r in children(c)]
        return bool(readers)

    _interrupt_when(proc, decoding, "its decode started")
    time.sleep(0.5)
    assert not [pid for pid in readers if alive(pid)]  # no reader left behind
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    with SessionStore(db) as store:
        runs = {r.run_id: r for r in store.list_runs()}
    assert runs.pop(run_id).status == "done"
    assert [(r.status, r.error) for r in runs.values()] == [("failed", "interrupted")]


@pytest.mark.needs_cvp
@pytest.mark.slow  # encodes two variants, stopped mid-encode
def test_ctrl_c_during_compare_marks_it_failed_and_removes_its_encodes(
    h264_clip: Path, tmp_path: Path
) -> None:
    from backend.store import SessionStore

    db = tmp_path / "s.duckdb"
    encodes = tmp_path / f"{db.name}.compare"
    proc = _start("compare", h264_clip, "--codecs", "h264,vp9", "--session-db", db)
    _interrupt_when(proc, lambda: any(p.is_file() for p in encodes.rglob("*")), "it began encoding")
    assert not encodes.exists() or _files_under(encodes) == []
    with SessionStore(db) as store:
        rows = store.list_comparisons()
        runs = store.list_runs()
    assert [(r["status"], r["error"]) for r in rows] == [("failed", "interrupted")], rows
    assert all(r.status in ("done", "failed") for r in runs)
