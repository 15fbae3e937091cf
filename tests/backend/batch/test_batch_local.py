"""Batches on the local engine over a tiny real dataset: outputs, summary, resume, crashes, session file."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from faults import fault_env
from helpers.batch_clips import make_dataset
from helpers.clips import encode_clip

from backend.batch import BatchConfig, output_folder, plan_batch, run_batch
from backend.store import SessionStore, read_summary_parquet

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("dataset")
    return folder, make_dataset(folder)


@pytest.fixture(scope="module")
def first(dataset, tmp_path_factory: pytest.TempPathFactory):
    folder, _ = dataset
    root = tmp_path_factory.mktemp("batch")
    config = BatchConfig(workers=2, session_db=root / "s.duckdb")
    report = run_batch(plan_batch(folder, root / "out", config=config), config=config)
    return root, config, report


def _partials(out: Path) -> list[Path]:
    return [p for p in out.rglob(".*") if ".partial-" in p.name or ".old-" in p.name]


def test_every_video_gets_its_output_folder_and_one_summary_row(dataset, first) -> None:
    _, clips = dataset
    root, _, report = first
    assert [r["rel_path"] for r in report.rows] == sorted(clips)
    assert {r["status"] for r in report.rows} == {"done"}
    summary = read_summary_parquet(root / "out" / "batch.parquet")
    assert summary["rel_path"].tolist() == sorted(clips)
    for row in summary.itertuples():
        out = output_folder(root / "out", row.rel_path)
        assert (out / "codec_lens.json").is_file() and (out / "codec_lens_batch.json").is_file()
        assert row.output_dir == f"videos/{row.rel_path}"
        assert row.valid_tokens == int(np.load(out / "tokens.npy")[:, 7].sum()) > 0
        assert 0 < row.temporal_coverage <= 1
        assert len(row.content_sha256) == 64 and row.seconds > 0
    assert not _partials(root / "out")
    # The unit runs the selection as `select` would, single-threaded.
    from backend.pipeline import SelectionOptions, run

    alone = run(clips["sub/deeper/c.mp4"], options=SelectionOptions(workers=1))
    batch_tokens = np.load(output_folder(root / "out", "sub/deeper/c.mp4") / "tokens.npy")
    np.testing.assert_array_equal(batch_tokens, alone.canvases.tokens)


def test_the_session_file_joins_runs_across_the_dataset(first) -> None:
    root, config, report = first
    with SessionStore(config.session_db) as store:
        joined = store.query(
            """SELECT d.rel_path, r.status, s.content_sha256 = d.content_sha256 AS same_content
               FROM dataset_videos d JOIN runs r USING (run_id) JOIN sessions s USING (session_id)
               WHERE d.dataset_id = ? ORDER BY d.rel_path""",
            [report.dataset_id],
        )
        datasets = store.list_datasets()
    assert joined["status"].tolist() == ["done"] * 4 and joined["same_content"].all()
    assert datasets["out_dir"].tolist() == [str(root / "out")]


def test_each_row_carries_its_runs_coverage_audit(first) -> None:
    from backend.audit import AuditConfig, audit_stored_run
    from backend.store import AUDIT_SUMMARY_COLUMNS, filter_summary

    root, config, report = first
    names = [name for name, _ in AUDIT_SUMMARY_COLUMNS]
    summary = read_summary_parquet(root / "out" / "batch.parquet")
    with SessionStore(config.session_db) as store:
        stored = store.dataset_rows(report.dataset_id)
        for row in summary.to_dict("records"):
            want = audit_stored_run(store, row["run_id"], config=AuditConfig()).summary()
            assert {k: row[k] for k in names} == pytest.approx(want), row["rel_path"]
            assert 0 < row["kept_score_fraction"] <= 1 and row["observed_frames"] <= row["total_frames"]
    assert stored[names].equals(
        summary.set_index("rel_path").loc[stored["rel_path"], names].reset_index(drop=True)
    )
    worst = filter_summary(summary, where="", order_by="longest_never_observed_secs", descending=True)
    assert worst["longest_never_observed_secs"].is_monotonic_decreasing


def test_a_rerun_skips_everything_before_starting_a_worker(dataset, first) -> None:
    folder, clips = dataset
    root, config, _ = first
    plan = plan_batch(folder, root / "out", config=config)
    assert plan.tasks == ()
    report = run_batch(plan, config=config)
    assert [r["status"] for r in report.rows] == ["skipped"] * len(clips)
    assert read_summary_parquet(root / "out" / "batch.parquet")["status"].tolist() == ["skipped"] * 4


def test_changed_content_or_options_are_redone_and_a_touched_file_is_hashed(dataset, tmp_path) -> None:
    folder, clips = dataset
    work = tmp_path / "copy"
    shutil.copytree(folder, work)
    config = BatchConfig(workers=2)
    run_batch(plan_batch(work, tmp_path / "out", config=config), config=config)
    before = {
        rel: json.loads((output_folder(tmp_path / "out", rel) / "codec_lens_batch.json").read_text())
        for rel in clips
    }
    # a.mp4: other options (a manifest row); sub/b.mp4: touched, same bytes; c: new content.
    os.utime(work / "sub" / "b.mp4", ns=(1, 1))
    encode_clip(work / "sub" / "deeper" / "c", codec="h264", width=192, height=128, frames=32, gop=12)
    manifest = work / "set.jsonl"
    manifest.write_text(
        "\n".join(
            json.dumps({"path": rel, **({"num_sampled_frames": 16} if rel == "a.mp4" else {})})
            for rel in clips
        )
    )
    plan = plan_batch(manifest, tmp_path / "out", config=config)
    assert sorted(t.rel_path for t in plan.tasks) == ["a.mp4", "sub/b.mp4", "sub/deeper/c.mp4"]
    report = run_batch(plan, config=config)
    status = {r["rel_path"]: r["status"] for r in report.rows}
    assert status == {
        "a.mp4": "done",
        "a.webm": "skipped",
        "sub/b.mp4": "skipped",
        "sub/deeper/c.mp4": "done",
    }
    rows = {r["rel_path"]: r for r in report.rows}
    assert (
        rows["a.mp4"]["frames"] == 16
        and rows["a.mp4"]["options_key"] != before["a.mp4"]["row"]["options_key"]
    )
    assert rows["sub/deeper/c.mp4"]["content_sha256"] != before["sub/deeper/c.mp4"]["row"]["content_sha256"]
    # The touched file's record now holds its new time: the next plan skips it without hashing.
    assert plan_batch(manifest, tmp_path / "out", config=config).tasks == ()


def test_an_interrupt_keeps_a_video_finished_before_its_row_arrived(dataset, first, tmp_path) -> None:
    # Ctrl-C can land after a worker wrote a video's output and unit record but before the
    # batch process read its row: that video is done (the record holds its row), unless the
    # record is older than the task (an earlier batch's output, being redone).
    from backend.batch.local import _finished_row

    folder, _ = dataset
    root, config, _ = first
    task = plan_batch(folder, tmp_path / "out", config=config).tasks[0]
    done_dir = output_folder(root / "out", task.rel_path)
    finished = dataclasses.replace(task, out_dir=str(done_dir))
    written = (done_dir / "codec_lens_batch.json").stat().st_mtime
    row = _finished_row(finished, since=written - 1.0)
    assert row is not None and row["status"] == "done" and row["rel_path"] == task.rel_path
    assert _finished_row(finished, since=written + 1.0) is None
    assert _finished_row(task, since=0.0) is None  # nothing written there


def test_a_crashed_worker_costs_its_video_alone(dataset, tmp_path, monkeypatch) -> None:
    _, clips = dataset
    listing = tmp_path / "two.txt"
    listing.write_text(f"{clips['a.mp4']}\n{clips['sub/b.mp4']}\n")
    config = BatchConfig(workers=2, session_db=tmp_path / "s.duckdb")
    plan = plan_batch(listing, tmp_path / "out", config=config)
    crashing = next(t.rel_path for t in plan.tasks if t.path.endswith("b.mp4"))
    # The worker running b.mp4 aborts at its decode (tests/faults/sitecustomize.py): the workers,
    # spawned by run_batch, inherit the fault.
    for name, value in fault_env("decode", video="sub/b.mp4").items():
        monkeypatch.setenv(name, value)
    report = run_batch(plan, config=config)
    rows = {Path(r["path"]).name: r for r in report.rows}
    assert rows["a.mp4"]["status"] == "done"
    assert rows["b.mp4"]["status"] == "failed"
    assert rows["b.mp4"]["error"] == f"{clips['sub/b.mp4']}: the decoder crashed (SIGABRT) during decode"
    assert not _partials(tmp_path / "out")
    assert not output_folder(tmp_path / "out", crashing).exists()
    with SessionStore(config.session_db) as store:
        runs = store.query(
            "SELECT status, error FROM runs r JOIN sessions s USING (session_id) "
            "WHERE s.video_path LIKE '%b.mp4'"
        )
    assert runs["status"].tolist() == ["failed"] and "interrupted" in runs["error"].iloc[0]


def test_a_video_that_vanishes_after_listing_is_one_failed_row(dataset, tmp_path) -> None:
    _, clips = dataset
    work = tmp_path / "copy"
    work.mkdir()
    for name in ("a.mp4", "a.webm"):
        shutil.copy(clips[name], work / name)
    config = BatchConfig(workers=1)
    plan = plan_batch(work, tmp_path / "out", config=config)
    (work / "a.webm").unlink()
    report = run_batch(plan, config=config)
    rows = {r["rel_path"]: r for r in report.rows}
    assert rows["a.mp4"]["status"] == "done"
    assert rows["a.webm"]["status"] == "failed"
    assert rows["a.webm"]["error"] == f"{work / 'a.webm'}: No such file or directory"
