"""One session file, several processes: concurrent writers lose no row, readers open it meanwhile."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
from helpers.clips import encode_clip
from helpers.paths import REPO_ROOT

from backend.errors import StoreError
from backend.store import SessionStore

# Process-level end-to-end tests: the slow tier, not --fast.
pytestmark = pytest.mark.slow

# Enough turn-taking to catch a lost write: before the store's side lock, 4 of 6 runs of this
# size lost a committed row or update (the old 3 writers × 15: 1 of 18 runs).
WRITERS = 6
RUNS_PER_WRITER = 20

_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from backend.store import SessionStore
    store = SessionStore({db!r})
    for i in range({n}):
        config = {{"writer": {w}, "i": i}}
        run_id = store.begin_run({session!r}, profile="clean", config=config, versions={{}})
        store.fail_run(run_id, "test row")
    store.close()
    """
)


def _session_id(db: Path) -> str:
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "INSERT INTO sessions (session_id, video_path, content_sha256) VALUES ('s1', 'v.mp4', 'x')"
        )
    finally:
        con.close()
    return "s1"


def test_concurrent_writers_and_a_reader_lose_no_row(tmp_path: Path) -> None:
    db = tmp_path / "shared.duckdb"
    SessionStore(db).close()
    session = _session_id(db)
    # This process plays the app: it keeps reading while the writers write.
    app_store = SessionStore(db)
    stop = threading.Event()
    reads: list[int] = []

    def keep_reading() -> None:
        while not stop.is_set():
            reads.append(len(app_store.list_runs()))
            time.sleep(0.01)

    reader = threading.Thread(target=keep_reading)
    reader.start()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER.format(repo=str(REPO_ROOT), db=str(db), session=session, n=RUNS_PER_WRITER, w=w),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    stop.set()
    reader.join()
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    runs = app_store.list_runs()
    app_store.close()
    assert len(runs) == WRITERS * RUNS_PER_WRITER
    assert {(r.config["writer"], r.config["i"]) for r in runs} == {
        (w, i) for w in range(WRITERS) for i in range(RUNS_PER_WRITER)
    }
    assert all(r.status == "failed" for r in runs)
    # The reader saw the count grow while the writers ran: it was never locked out for good.
    assert len(reads) > 5 and reads == sorted(reads)


def test_a_call_waits_for_another_process_then_gives_up_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "held.duckdb"
    SessionStore(db).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(db)!r}); print(1, flush=True); "
            "time.sleep(2.5); c.close()",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "1"
    with pytest.raises(StoreError, match=r"is busy: another process held it for over 0\.3 s"):
        SessionStore(db, lock_wait_secs=0.3)
    started = time.monotonic()
    store = SessionStore(db, lock_wait_secs=30)  # waits until the holder lets go
    waited = time.monotonic() - started
    assert store.list_runs() == []
    store.close()
    holder.wait(timeout=30)
    assert waited > 0.5


def test_the_file_is_free_between_calls_even_after_a_failed_one(tmp_path: Path) -> None:
    """Between two calls of a store that stays open, another process can open the file, also
    after a call that raised (its traceback keeps the call's frames, and their cursors, alive)."""
    db = tmp_path / "free.duckdb"
    store = SessionStore(db)
    session = _session_id_via(store, db)
    run_id = store.begin_run(session, profile="clean", config={}, versions={})
    with pytest.raises(StoreError) as failed:
        store.get_run("no-such-run")
    assert failed.value.__traceback__ is not None  # the frames are still referenced here
    opener = [
        sys.executable,
        "-c",
        f"import duckdb; c = duckdb.connect({str(db)!r}); "
        "print(c.execute('SELECT count(*) FROM runs').fetchone()[0]); c.close()",
    ]
    done = subprocess.run(opener, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
    store.fail_run(run_id, "after another process had the file")  # and this store opens it again
    assert [r.status for r in store.list_runs()] == ["failed"]
    store.close()


def _session_id_via(store: SessionStore, db: Path) -> str:
    store.close()  # let the raw connection in
    return _session_id(db)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.needs_cvp
@pytest.mark.slow
def test_the_app_and_two_cli_writers_share_one_file(tmp_path: Path) -> None:
    db = tmp_path / "sessions.duckdb"
    clips = [
        encode_clip(tmp_path / f"clip{i}", codec="h264", width=320, height=240, frames=24, gop=12)
        for i in range(2)
    ]
    port = _free_port()
    app = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "app",
            "--session-db",
            str(db),
            "--port",
            str(port),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                if app.poll() is not None or time.monotonic() > deadline:
                    log = app.stdout.read() if app.stdout else ""
                    raise AssertionError(f"app did not start: {log}") from None
                time.sleep(0.5)
        cli = [sys.executable, "-m", "app.cli"]
        writers = [
            subprocess.Popen(
                [*cli, "select", str(c), "--session-db", str(db)],
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for c in clips
        ]
        listing = subprocess.run(
            [*cli, "sessions", "list", "--session-db", str(db)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert listing.returncode == 0, listing.stderr
        outs = [w.communicate(timeout=300) for w in writers]
        for w, (_, err) in zip(writers, outs, strict=True):
            assert w.returncode == 0, err
        assert app.poll() is None  # the app is still serving
    finally:
        app.terminate()
        app.wait(timeout=60)
    with SessionStore(db, read_only=True) as store:
        done = store.list_runs(status="done")
    # The app's own run of the bundled sample plus one per CLI writer.
    assert len(done) == 3
    assert {Path(r.video_path).name for r in done} >= {"clip0.mp4", "clip1.mp4"}
