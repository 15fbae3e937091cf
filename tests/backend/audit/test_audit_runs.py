"""``codec-lens audit`` on every selector's real runs, on output folders and on cvp's own folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run_cli_forked
from helpers.clips import encode_clip
from helpers.selector_args import TINY_CLIP_ARGS

from backend.audit import AuditConfig, audit_output_dir, audit_stored_run
from backend.cvp_format import ImportConfig, import_cvp
from backend.records import TOKEN_COLUMNS
from backend.store import SessionStore

pytestmark = [pytest.mark.slow, pytest.mark.needs_cvp]

CONFIG = AuditConfig()
VALID = TOKEN_COLUMNS.index("valid")
CVP_CLI = Path(sys.executable).parent / "codec-video-prep"
SELECTORS = TINY_CLIP_ARGS


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 frames of 320×192 at 24 fps, keyframes at 0 and 24."""
    folder = tmp_path_factory.mktemp("audit_clip")
    return encode_clip(folder / "moving", codec="h264", width=320, height=192, frames=48, fps=24, gop=24)


@pytest.fixture(scope="module")
def runs(clip: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[str, Path]]]:
    """One stored run and output folder per selector: (session file, name → (run id, folder))."""
    folder = tmp_path_factory.mktemp("audit_runs")
    db = folder / "s.duckdb"
    made = {}
    for name, args in SELECTORS.items():
        out = folder / name
        done = run_cli_forked("select", clip, "--out", out, "--session-db", db, "--json", *args)
        assert done.returncode == 0, (name, done.stderr)
        made[name] = (json.loads(done.stdout)["run_id"], out)
    return db, made


@pytest.mark.parametrize("name", SELECTORS)
def test_every_selector_is_audited_from_its_run_and_its_folder(name: str, runs, tmp_path: Path) -> None:
    db, made = runs
    run_id, out = made[name]
    with SessionStore(db, read_only=True) as store:
        audit = audit_stored_run(store, run_id, config=CONFIG)
    positions = np.load(out / "src_patch_position.npy")
    seen = sorted({int(f) for f in positions[positions[:, 0] >= 0, 0]})
    assert audit.frames == 48
    assert np.flatnonzero(audit.frame_coverage > 0).tolist() == seen
    assert audit.observed_frames == len(seen)
    assert sum(g.tokens for g in audit.groups) == int((positions[:, 0] >= 0).sum())
    unseen = sorted(set(range(48)) - set(seen))
    assert [f for a, b in audit.never_observed_spans.tolist() for f in range(a, b + 1)] == unseen
    assert audit.never_observed_fraction == pytest.approx(len(unseen) / 48)
    if name == "onevision":  # the 320×192 frames letterboxed into a square: the bars are no picture
        bars = audit.staleness_map == -1
        assert bars.any() and bars.all(axis=1).sum() == bars.any(axis=1).sum()  # whole rows
        assert audit.video_max_staleness_frames < 48
    share = audit.kept_score_fraction
    assert share is None if name == "uniform" else 0 < share <= 1
    # The folder alone gives every number but the kept score (its dropped blocks' scores are not in it).
    folder = audit_output_dir(out, config=CONFIG).as_dict()
    ours = audit.as_dict()
    assert folder["kept_score_fraction"] is None
    for key in ours.keys() - {"kept_score_fraction", "groups"}:
        assert folder[key] == ours[key], key
    assert [{**g, "kept_score_fraction": None} for g in ours["groups"]] == folder["groups"]
    # And the CLI's --json is the same object.
    done = run_cli_forked("audit", run_id, "--session-db", db, "--json", "-")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(ours))


def test_whole_frames_are_fresh_and_the_rest_grows_stale(runs) -> None:
    db, made = runs
    with SessionStore(db, read_only=True) as store:
        uniform = audit_stored_run(store, made["uniform"][0], config=CONFIG)
        cvp = audit_stored_run(store, made["cvp"][0], config=CONFIG)
    # Uniform keeps 8 whole frames of 48: each is fully covered and resets every position.
    shown = np.flatnonzero(uniform.frame_coverage).tolist()
    assert len(shown) == 8 and (uniform.frame_coverage[shown] == 1).all()
    assert (uniform.max_staleness_frames[shown] == 0).all()
    gaps = np.diff([*shown, 48])
    assert uniform.video_max_staleness_frames == int(gaps.max()) - 1
    # cvp's anchors are whole frames too; its kept blocks cover the frames between only in part.
    assert (cvp.max_staleness_frames[cvp.frame_coverage == 1] == 0).all()
    partial = (cvp.frame_coverage > 0) & (cvp.frame_coverage < 1)
    assert partial.any() and (cvp.mean_staleness_frames[partial] > 0).all()


def test_text_report_and_json_file(runs, tmp_path: Path) -> None:
    db, made = runs
    run_id, out = made["cvp"]
    target = tmp_path / "audit.json"
    done = run_cli_forked("audit", run_id, "--session-db", db, "--json", target)
    assert done.returncode == 0, done.stderr
    data = json.loads(target.read_text())
    keys = {"frames", "patch_grid", "observed_frames", "frame_coverage", "never_observed_spans",
            "longest_never_observed_secs", "never_observed_fraction", "mean_staleness_frames",
            "max_staleness_frames", "video_max_staleness_frames", "groups"}  # fmt: skip
    assert keys <= data.keys() and len(data["frame_coverage"]) == data["frames"] == 48
    text = run_cli_forked("audit", out)
    assert text.returncode == 0, text.stderr
    first, second = text.stdout.splitlines()[:2]
    assert first.startswith(f"audit of {out}: 48 frames")
    assert second.startswith(f"observed frames: {data['observed_frames']} of 48")


def test_bad_targets_are_one_line_exit_2(runs, clip: Path, tmp_path: Path) -> None:
    db, _ = runs
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        "no-such-run": "no-such-run",
        str(empty): "meta.json",
        str(clip): "is not an output folder nor a run id",
        str(tmp_path / "missing" / "dir"): "is not an output folder nor a run id",
    }
    for target, said in cases.items():
        done = run_cli_forked("audit", target, "--session-db", db)
        assert done.returncode == 2, (target, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], (target, done.stderr)


@pytest.mark.needs_ffprobe
def test_a_cvp_folder_audits_as_our_parity_run(clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "cvp"
    cmd = [str(CVP_CLI), "--video", str(clip), "--out_dir", str(out), "--num_sampled_frames", "24"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with SessionStore(tmp_path / "s.duckdb") as store:
        imp = import_cvp(out, clip, store, config=ImportConfig())
        assert imp.status == "match", imp.describe()
        ours = audit_stored_run(store, imp.recomputed_run_id, config=CONFIG).as_dict()
        imported = audit_stored_run(store, imp.run_id, config=CONFIG).as_dict()
    folder = audit_output_dir(out, config=CONFIG).as_dict()
    assert imported == ours
    for key in ours.keys() - {"kept_score_fraction", "groups"}:
        assert folder[key] == ours[key], key
    assert ours["observed_frames"] < ours["frames"]  # 24 of 48 sampled: there is something to audit
