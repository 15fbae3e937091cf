"""The Ray engine on a local Ray with 2 CPUs: the same outputs as the local engine, a crash is one row."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults import fault_env
from helpers.batch_clips import make_dataset

from backend.batch import BatchConfig, plan_batch, run_batch

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray", reason="Ray is not installed: the ray engine's test needs codec-lens[ray]")

# Fields that hold the time a run took or the folder it was written to, in each JSON file.
_VARYING = {
    "meta.json": ("timing_sec", "timings", "out_dir"),
    "codec_lens.json": ("timings_secs",),
    "codec_lens_batch.json": (),
}
_VARYING_ROW = ("seconds",)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray whose workers, and the local engine's, abort at the decode of ``sub/b.mp4``:
    each inherits the fault of this environment (tests/faults/sitecustomize.py)."""
    from backend.batch.ray_engine import init_local_ray

    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", os.environ.get("RAY_USAGE_STATS_ENABLED", "0"))  # no report
        for name, value in fault_env("decode", video="sub/b.mp4").items():  # one video, both engines
            env.setenv(name, value)
        init_local_ray(2)  # num_cpus=2, include_dashboard=False, on 127.0.0.1
        try:
            yield
        finally:
            ray.shutdown()


def _comparable(path: Path) -> bytes | dict:
    """A file's bytes, or for the JSON files the document without its timings and folder."""
    if path.name not in _VARYING:
        return path.read_bytes()
    doc = json.loads(path.read_text())
    for key in _VARYING[path.name]:
        doc.pop(key, None)
    if path.name == "codec_lens_batch.json":
        for key in _VARYING_ROW:
            doc["row"].pop(key)
    return doc


def _tree(out: Path) -> dict[str, bytes | dict]:
    videos = out / "videos"
    return {
        p.relative_to(videos).as_posix(): _comparable(p) for p in sorted(videos.rglob("*")) if p.is_file()
    }


def test_ray_and_local_engines_write_identical_outputs(local_ray, tmp_path: Path) -> None:
    folder = tmp_path / "dataset"
    clips = make_dataset(folder)
    reports = {}
    for engine in ("local", "ray"):
        config = BatchConfig(engine=engine, workers=2)
        reports[engine] = run_batch(plan_batch(folder, tmp_path / engine, config=config), config=config)
    for engine, report in reports.items():
        status = {r["rel_path"]: r["status"] for r in report.rows}
        assert status == {rel: "failed" if rel == "sub/b.mp4" else "done" for rel in clips}, engine
    assert reports["local"].rows[2]["error"].endswith("the decoder crashed (SIGABRT) during decode")
    assert reports["ray"].rows[2]["error"].startswith(f"{clips['sub/b.mp4']}: the worker died during the run")
    local, remote = _tree(tmp_path / "local"), _tree(tmp_path / "ray")
    assert sorted(local) == sorted(remote)
    assert any(name.endswith(".jpg") for name in local)
    for name in local:
        assert local[name] == remote[name], name
    # And a re-run on Ray skips what either engine finished.
    config = BatchConfig(engine="ray", workers=2)
    plan = plan_batch(folder, tmp_path / "local", config=config)
    assert [t.rel_path for t in plan.tasks] == ["sub/b.mp4"]
