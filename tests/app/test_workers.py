"""The app's worker pool with real processes: a crashing job is one error, the pool goes on."""

from __future__ import annotations

import ctypes
import os
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import AbortAt, fault_env
from helpers.paths import SAMPLE_VIDEO

from app.workers import PoolBusy, WorkerCrashed, WorkerPool
from backend.isolation import Cleanup, stage_from_dump

# Process-level end-to-end tests: the slow tier, not --fast.
pytestmark = pytest.mark.slow

# -- jobs (module level: a worker imports them by name) -----------------------------------------


def job_double(value: int, *, progress: Any) -> int:
    progress("probe", 0.5)
    progress("select", 1.0)
    return 2 * value


def job_reaches(stage: str, *, progress: Any) -> str:
    """Reports ``stage``: :data:`aborts_at_decode` aborts there when it is ``decode``."""
    progress("probe", 0.1)
    progress(stage, 0.5)
    return "not aborted"


aborts_at_decode = AbortAt(job_reaches, "decode")  # the fault is the job's: the pool has no switch


def job_segfault(*, progress: Any) -> None:
    progress("score", 0.5)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    ctypes.string_at(0)  # reads address 0: SIGSEGV, as a decoder's bad pointer would


def job_raises(*, progress: Any) -> None:
    from backend.errors import InputError

    raise InputError("cannot read video", path="bad.mp4", stage="probe")


def job_wait_for(flag: str, *, progress: Any) -> int:
    """Runs until ``flag`` exists (the test releases it)."""
    deadline = time.monotonic() + 60
    while not Path(flag).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return os.getpid()


def job_writes_then_aborts(folder: str, *, progress: Any) -> None:
    out = Path(folder)
    (out / ".out.partial-abc").mkdir()
    (out / ".out.partial-abc" / "meta.json").write_text("{}")
    (out / "export.mp4").write_bytes(b"half")
    progress("output", 0.5)


# -- tests ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(2, per_session=2, max_pending=8, preload=()) as p:
        yield p


def test_a_job_runs_in_a_worker_with_its_progress(pool: WorkerPool) -> None:
    seen: list[tuple[str, float]] = []
    assert pool.run(job_double, 21, on_progress=lambda stage, fraction: seen.append((stage, fraction))) == 42
    assert seen == [("probe", 0.5), ("select", 1.0)]
    assert pool.run(aborts_at_decode, "select") == "not aborted"  # the fault aborts only at "decode"
    assert pool.pending() == 0


def test_an_aborting_job_is_one_error_and_the_worker_is_replaced(pool: WorkerPool) -> None:
    before = set(pool.worker_pids())
    with pytest.raises(WorkerCrashed) as crashed:
        pool.run(aborts_at_decode, "decode", subject="clip.mp4")
    assert crashed.value.signal_name == "SIGABRT" and crashed.value.stage == "decode"
    assert (
        crashed.value.one_line()
        == "clip.mp4: the decoder crashed (SIGABRT) during decode; the app keeps running"
    )
    assert pool.run(aborts_at_decode, "group") == "not aborted"  # the next job runs
    deadline = time.monotonic() + 60
    while None in pool.worker_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    after = set(pool.worker_pids())
    assert len(after) == 2 and None not in after and after != before  # one worker was replaced


def test_a_segfault_names_its_signal_and_the_last_stage(pool: WorkerPool) -> None:
    with pytest.raises(WorkerCrashed) as crashed:
        pool.run(job_segfault, subject="bad.mp4")
    assert crashed.value.signal_name == "SIGSEGV"
    assert (
        crashed.value.one_line()
        == "bad.mp4: the decoder crashed (SIGSEGV) during score; the app keeps running"
    )


def test_a_job_error_comes_back_as_itself(pool: WorkerPool) -> None:
    from backend.errors import InputError

    with pytest.raises(InputError) as failed:
        pool.run(job_raises)
    assert failed.value.one_line() == "bad.mp4: cannot read video" and failed.value.stage == "probe"


def test_a_crash_fails_only_its_own_job(pool: WorkerPool, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    other = pool.submit(job_wait_for, str(flag), session="b")  # running in one worker
    with pytest.raises(WorkerCrashed):
        pool.run(aborts_at_decode, "decode", session="a", subject="clip.mp4")  # dies in the other
    flag.touch()
    assert other.wait() > 0  # the other session's job never noticed
    assert pool.pending() == 0


def test_a_crash_undoes_what_the_job_left(pool: WorkerPool, tmp_path: Path) -> None:
    kept = tmp_path / "earlier.mp4"
    kept.write_bytes(b"an earlier export")
    os.utime(kept, (time.time() - 3600, time.time() - 3600))
    pool_abort = WorkerPool(1, preload=())
    called: list[bool] = []
    try:
        cleanup = Cleanup(
            written=(tmp_path / "export.mp4", kept),
            partials=((tmp_path, ".out.partial-*"),),
            then=lambda reason: called.append(reason),
        )
        with pytest.raises(WorkerCrashed) as crashed:
            pool_abort.run(
                AbortAt(job_writes_then_aborts, "output"), str(tmp_path), subject="clip.mp4", cleanup=cleanup
            )
    finally:
        pool_abort.stop()
    assert "during output" in crashed.value.one_line()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier.mp4"] and called == [
        crashed.value.one_line()
    ]


def test_pending_work_is_capped_per_session_and_in_all(tmp_path: Path) -> None:
    flag = tmp_path / "go"
    with WorkerPool(1, per_session=2, max_pending=3, preload=()) as small:
        a1 = small.submit(job_wait_for, str(flag), session="a")
        a2 = small.submit(job_wait_for, str(flag), session="a")  # queued behind a1
        with pytest.raises(PoolBusy, match="already has 2 jobs running or waiting"):
            small.submit(job_wait_for, str(flag), session="a")
        b1 = small.submit(job_wait_for, str(flag), session="b")
        with pytest.raises(PoolBusy, match=r"the app is busy \(3 jobs running or waiting\)"):
            small.submit(job_wait_for, str(flag), session="c")
        assert small.pending("a") == 2 and small.pending() == 3
        flag.touch()
        assert {a1.wait(), a2.wait(), b1.wait()} == {small.worker_pids()[0]}
        assert small.pending() == 0
        small.submit(job_wait_for, str(flag), session="a").wait()  # accepted again


def test_jobs_of_two_threads_run_side_by_side(pool: WorkerPool) -> None:
    results: list[int] = []
    threads = [threading.Thread(target=lambda v=v: results.append(pool.run(job_double, v))) for v in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [2, 4]


def test_the_crash_stage_comes_from_the_innermost_stage_frame() -> None:
    dump = (
        "Fatal Python error: Aborted\n\n"
        "Thread 0x00007f0000000001 (most recent call first):\n"
        '  File "/x/backend/stages/pack.py", line 3 in pack\n\n'
        "Current thread 0x00007f0000000002 (most recent call first):\n"
        '  File "/x/native/split_read.py", line 310 in _read_into\n'
        '  File "/x/backend/stages/decode.py", line 219 in decode\n'
        '  File "/x/backend/pipeline/runner.py", line 96 in call\n\n'
        "Extension modules: numpy\n"
    )
    assert stage_from_dump(dump) == "decode"
    encode = dump.replace("backend/stages/decode.py", "backend/compare/encode.py")
    assert stage_from_dump(encode) == "encode"
    assert stage_from_dump(dump.replace("backend/stages/decode.py", "app/jobs.py")) is None
    assert stage_from_dump("") is None


@pytest.mark.needs_cvp
def test_a_select_that_aborts_is_stored_as_failed_and_the_next_one_runs(tmp_path: Path) -> None:
    from app import jobs
    from backend.pipeline import SelectionOptions
    from backend.store import SessionStore

    db = tmp_path / "s.duckdb"
    options = SelectionOptions(profile="clean")
    with SessionStore(db) as store, WorkerPool(1) as aborting:
        with pytest.raises(WorkerCrashed) as crashed:
            aborting.run(
                AbortAt(jobs.select_run, "decode"),
                SAMPLE_VIDEO,
                db,
                options,
                subject=SAMPLE_VIDEO.name,
                cleanup=Cleanup(store=store),
            )
        assert crashed.value.one_line() == (
            f"{SAMPLE_VIDEO.name}: the decoder crashed (SIGABRT) during decode; the app keeps running"
        )
        assert [(r.status, r.error[:12]) for r in store.list_runs()] == [("failed", "interrupted:")]
    with SessionStore(db) as store, WorkerPool(1) as pool:
        stages: list[str] = []
        done = pool.run(jobs.select_run, SAMPLE_VIDEO, db, options, on_progress=lambda s, f: stages.append(s))
        assert done["how"] == "full" and stages[-1] == "pack"
        assert store.get_run(done["run_id"]).status == "done"


@pytest.mark.needs_cvp
def test_the_run_tab_runs_through_the_pool(tmp_path: Path) -> None:
    from app.main import start_pool, stop_pool
    from app.tabs import run
    from app.workspace import make_workspace
    from backend.pipeline import SelectionOptions

    ws = make_workspace(session_db=tmp_path / "s.duckdb", output_dir=tmp_path / "work")
    try:
        start_pool(ws)
        seen: list[str] = []
        view = (0, ["kept"], 0.5, "turbo")
        options = SelectionOptions(profile="clean")
        new_id, status = run.start_run(
            ws, "", str(SAMPLE_VIDEO), view, options, lambda f, desc: seen.append(desc), "session-a"
        )
        assert "(decoded)" in status and seen[0] == "probe" and seen[-2:] == ["pack", "storing the run"]
        result = ws.result(new_id)
        assert f"{len(result.selection.groups)} groups" in status
        assert ws.pool.pending() == 0
    finally:
        stop_pool(ws)
        ws.close()


@pytest.mark.needs_cvp
def test_av1_refused_in_a_worker_names_the_run_tabs_controls(tmp_path: Path) -> None:
    """Issue 27, item 13: the fix the decode stage carries survives the worker's pickling, so
    the Run tab words it with its controls, not the CLI's flags."""
    import gradio as gr
    from helpers.clips import encode_clip

    from app.main import start_pool, stop_pool
    from app.tabs import run
    from app.workspace import make_workspace
    from backend.pipeline import SelectionOptions

    ws = make_workspace(session_db=tmp_path / "s.duckdb", output_dir=tmp_path / "work")
    av1 = encode_clip(ws.output_root / "av1", codec="av1", width=160, height=96, frames=8, gop=4)
    try:
        start_pool(ws)
        # The parity profile declares no fallback (the Run tab's default would run a signal instead).
        parity = SelectionOptions(profile="parity")
        with pytest.raises(gr.Error) as refused:
            run.start_run(ws, "", str(av1), (0, [], 0.5, "turbo"), parity, lambda *a, **k: None)
        message = str(refused.value.message)
        assert "set Profile to clean and Score to residual" in message and "--profile" not in message
    finally:
        stop_pool(ws)
        ws.close()


@pytest.mark.needs_cvp
def test_the_first_run_and_a_reopen_after_eviction_decode_in_a_worker(tmp_path: Path) -> None:
    from app.main import stop_pool
    from app.server import first_run
    from app.workspace import make_workspace
    from backend.runs import decode_is_cached, prune_cache

    video = tmp_path / "work" / "clip.mp4"
    video.parent.mkdir()
    video.write_bytes(SAMPLE_VIDEO.read_bytes())
    ws = make_workspace(session_db=tmp_path / "s.duckdb", output_dir=tmp_path / "work")
    try:
        # The app's first run is a job of its pool: a decoder crash there is one error, not the end.
        # The pool's workers, spawned now, inherit the fault (tests/faults/sitecustomize.py).
        with pytest.MonkeyPatch.context() as faulty:
            for name, value in fault_env("decode").items():
                faulty.setenv(name, value)
            with pytest.raises(
                WorkerCrashed, match=r"clip\.mp4: the decoder crashed \(SIGABRT\) during decode"
            ):
                first_run(ws, video=str(video))
            stop_pool(ws)
        run_id = first_run(ws, video=str(video))
        assert ws.pool is not None and ws.store.get_run(run_id).status == "done"
        shown = ws.result(run_id)
        # Evicted from memory and disk: reopening decodes again, in a worker, and caches it.
        ws._results.clear()
        ws.memory.clear()
        prune_cache(ws.store, budget_bytes=0)
        assert not decode_is_cached(ws.store, run_id)
        again = ws.result(run_id)
        assert decode_is_cached(ws.store, run_id)
        assert (again.canvases.tokens == shown.canvases.tokens).all()
    finally:
        stop_pool(ws)
        ws.close()


@pytest.mark.needs_cvp
def test_a_decoder_crash_while_reopening_an_evicted_run_is_one_error(tmp_path: Path) -> None:
    from app.main import stop_pool
    from app.workspace import ensure_run, make_workspace
    from backend.runs import prune_cache

    ws = make_workspace(session_db=tmp_path / "s.duckdb", output_dir=tmp_path / "work")
    try:
        run_id = ensure_run(ws, SAMPLE_VIDEO)  # no pool yet: in this process
        ws._results.clear()
        ws.memory.clear()
        prune_cache(ws.store, budget_bytes=0)
        with pytest.MonkeyPatch.context() as faulty:  # inherited by the worker it spawns
            for name, value in fault_env("decode").items():
                faulty.setenv(name, value)
            ws.pool = WorkerPool(1)
            with pytest.raises(WorkerCrashed) as crashed:
                ws.result(run_id)
        assert crashed.value.one_line() == (
            f"{SAMPLE_VIDEO.name}: the decoder crashed (SIGABRT) during decode; the app keeps running"
        )
        assert ws.pool.run(job_double, 2) == 4  # replaced; this process goes on
    finally:
        stop_pool(ws)
        ws.close()


@pytest.mark.needs_cvp
def test_the_sparse_video_is_encoded_in_a_worker(tmp_path: Path) -> None:
    import av

    from app.main import start_pool, stop_pool
    from app.tabs.canvases import CanvasViews, sparse_video
    from app.workspace import ensure_run, make_workspace

    ws = make_workspace(session_db=tmp_path / "s.duckdb", output_dir=tmp_path / "work")
    try:
        start_pool(ws)
        run_id = ensure_run(ws, SAMPLE_VIDEO)
        fractions: list[float] = []
        path = Path(
            sparse_video(CanvasViews(ws), run_id, 0.25, 4, progress=lambda f, desc: fractions.append(f))
        )
        with av.open(str(path)) as container:
            frames = sum(1 for _ in container.decode(video=0))
        assert frames == ws.result(run_id).candidates.frame_indices.size
        assert fractions and fractions[-1] <= 1.0
        assert not list(path.parent.glob(".*partial*"))
    finally:
        stop_pool(ws)
        ws.close()
