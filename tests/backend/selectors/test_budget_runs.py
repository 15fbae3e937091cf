"""A hard token budget on every selector's real runs: in process, re-selected, stored and from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run_cli_forked
from helpers.clips import encode_clip

from backend.records import TOKEN_COLUMNS
from backend.runs import reselect, select_and_store
from backend.selectors import options_for, select
from backend.stages.budget import DEFAULT_STOP_GAIN
from backend.store import SessionStore

pytestmark = [pytest.mark.slow, pytest.mark.needs_cvp]

VALID = TOKEN_COLUMNS.index("valid")
# Every selector, sized for a 48-frame clip (as in tests/backend/selectors/test_selector_runs.py).
OPTIONS = {
    "cvp": {"num_sampled_frames": 24},
    "llava-ov2": {"target_canvas": 8, "score_mode": "mvwarp"},
    "uniform": {"num_frames": 8},
    "onevision": {"seq_len_frames": 16, "num_images": 3, "square_size": 192},
}


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """48 frames of 320×192 at 24 fps, keyframes at 0 and 24: a scrolling texture and a still one."""
    folder = tmp_path_factory.mktemp("budget_clips")
    shape = {"codec": "h264", "width": 320, "height": 192, "frames": 48, "fps": 24, "gop": 24}
    return {p: encode_clip(folder / p, pattern=p, **shape) for p in ("moving", "static")}


def _tokens(result) -> np.ndarray:
    """(k, 3) frame_index, patch_row, patch_col of the run's valid tokens."""
    t = result.canvases.tokens
    return t[t[:, VALID] > 0][:, :3]


def _as_set(tokens: np.ndarray) -> set[tuple[int, int, int]]:
    return set(map(tuple, tokens.tolist()))


@pytest.mark.parametrize("name", OPTIONS)
def test_every_selector_keeps_at_most_n_tokens_in_a_nested_order(name: str, clips) -> None:
    own = select(clips["moving"], options=options_for(name, OPTIONS[name]))
    anchor = own.geometry.patches_per_canvas
    groups = len(own.selection.groups)
    budgets = [anchor, 2 * anchor + 4 * 5, groups * anchor + 4 * 7, groups * anchor + 4 * 100, 10**7]
    previous: set[tuple[int, int, int]] = set()
    for n in sorted(budgets):
        got = select(clips["moving"], options=options_for(name, {**OPTIONS[name], "token_budget": n}))
        tokens = _tokens(got)
        assert len(tokens) <= n, (name, n)
        assert len(tokens) == got.selection.budget.tokens_used, (name, n)
        assert previous <= _as_set(tokens), (name, n)
        assert "budget" in got.timings_secs
        previous = _as_set(tokens)
    # One anchor: the first group's whole frame and nothing else.
    first = select(clips["moving"], options=options_for(name, {**OPTIONS[name], "token_budget": anchor}))
    assert len(_tokens(first)) == anchor
    assert first.selection.budget.stop_reason == "budget"
    assert got.selection.budget.stop_reason in {"video_end", "content"}


@pytest.mark.parametrize("name", ["cvp", "llava-ov2", "onevision"])
def test_a_still_clip_stops_by_content_below_the_budget_a_busy_one_uses_it(name: str, clips) -> None:
    options = {**OPTIONS[name], "token_budget": 10**7}
    busy = select(clips["moving"], options=options_for(name, options)).selection.budget
    still = select(clips["static"], options=options_for(name, options)).selection.budget
    free = select(clips["static"], options=options_for(name, {**options, "stop_gain": 0.0})).selection.budget
    assert still.stop_reason == "content" and free.stop_reason == "video_end"
    assert still.tokens_used < free.tokens_used
    # The scrolling texture changes everywhere: more of its blocks are worth their tokens.
    busy_free = select(clips["moving"], options=options_for(name, {**options, "stop_gain": 0.0}))
    assert busy.tokens_used / busy_free.selection.budget.tokens_used > still.tokens_used / free.tokens_used


def test_uniform_has_no_scores_so_no_content_stop(clips) -> None:
    got = select(clips["static"], options=options_for("uniform", {"num_frames": 8, "token_budget": 10**7}))
    assert got.selection.budget.stop_reason == "video_end"
    assert got.selection.budget.gain_unit_bytes == 0.0


def test_a_stored_run_re_selects_under_a_budget_and_the_row_records_it(clips, tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, own = select_and_store(clips["moving"], store, options=options_for("cvp", OPTIONS["cvp"]))
        n = len(own.selection.groups) * own.geometry.patches_per_canvas + 4 * 30
        new_id, got, _ = reselect(store, run_id, {"token_budget": n})
        assert len(_tokens(got)) == n
        rows = store.query(
            "SELECT run_id, token_budget, tokens_used, stop_reason FROM runs WHERE run_id IN (?, ?)",
            [run_id, new_id],
        ).set_index("run_id")
        assert rows.loc[new_id].tolist() == [n, n, "budget"]
        assert rows.loc[run_id].isna().all()


def test_the_cli_writes_the_budget_into_meta_and_refuses_bad_values(clips, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli_forked(
        "select",
        clips["moving"],
        "--out",
        out,
        "--json",
        "--num_sampled_frames",
        "24",
        "--token_budget",
        "3000",
    )
    assert done.returncode == 0, done.stderr
    positions = np.load(out / "src_patch_position.npy")
    assert int((positions[:, 0] >= 0).sum()) <= 3000
    meta = json.loads((out / "meta.json").read_text())["codec_lens"]
    assert meta["token_budget"] == 3000 and meta["stop_gain"] == pytest.approx(DEFAULT_STOP_GAIN)
    assert meta["tokens_used"] == int((positions[:, 0] >= 0).sum())
    assert meta["stop_reason"] in {"budget", "content", "video_end"}
    for flag, value, message in (
        ("--token_budget", "-5", "Invalid token budget (-5)"),
        ("--token_budget", "100", "Invalid token budget (100)"),
        ("--stop_gain", "200", "Invalid stop gain (200"),
    ):
        bad = run_cli_forked("select", clips["moving"], "--out", tmp_path / "bad", flag, value)
        assert bad.returncode == 2, (flag, value, bad.stderr)
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (flag, value, bad.stderr)
        assert not (tmp_path / "bad" / "meta.json").exists()


@pytest.mark.parametrize("name", ["cvp", "llava-ov2", "onevision"])
def test_a_busy_clip_spends_the_whole_budget(name: str, clips) -> None:
    free = select(clips["moving"], options=options_for(name, {**OPTIONS[name], "token_budget": 10**7}))
    outcome = free.selection.budget
    anchors = outcome.anchors * free.geometry.patches_per_canvas
    n = anchors + (outcome.tokens_used - anchors) // 2 + 2  # half its blocks, between two blocks
    got = select(clips["moving"], options=options_for(name, {**OPTIONS[name], "token_budget": n}))
    assert got.selection.budget.stop_reason == "budget"
    assert n - 4 < got.selection.budget.tokens_used <= n


@pytest.mark.parametrize("name", OPTIONS)
def test_sweep_rows_equal_whole_runs_at_each_budget(name: str, clips) -> None:
    from backend.audit import AuditConfig, audit_coverage, audit_source_of_run
    from backend.audit.sweep import SweepConfig, sweep_budgets

    own = select(clips["moving"], options=options_for(name, OPTIONS[name]))
    anchor = own.geometry.patches_per_canvas
    budgets = (anchor, 2 * anchor + 40, 3 * anchor + 400)
    sweep = sweep_budgets(own, config=SweepConfig(budgets=budgets), audit=AuditConfig())
    assert sweep.shrinks == ()
    for row in sweep.rows:
        whole = select(
            clips["moving"], options=options_for(name, {**OPTIONS[name], "token_budget": row.budget})
        )
        audit = audit_coverage(audit_source_of_run(whole), config=AuditConfig())
        assert row.tokens == len(_tokens(whole)), (name, row)
        assert row.observed_frames == audit.observed_frames, (name, row)
        assert row.canvases == int(whole.canvases.canvas_group_index.size), (name, row)
        assert row.mean_staleness_frames == pytest.approx(audit.summary()["mean_staleness_frames"]), (
            name,
            row,
        )


def test_the_sweep_command_on_a_video_and_on_a_stored_run(clips, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    done = run_cli_forked(
        "select",
        clips["moving"],
        "--session-db",
        db,
        "--json",
        "--num_sampled_frames",
        "24",
        "--token_budget",
        "2000",
    )
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    keys = {"budget", "tokens", "canvases", "observed_frames", "longest_never_observed_secs"}
    keys |= {"mean_staleness_frames", "kept_score_fraction"}
    out = tmp_path / "rows.json"
    done = run_cli_forked(
        "sweep", clips["moving"], "--budgets", "1000,400,2000", "--num_sampled_frames", "24", "--json", out
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [r["budget"] for r in rows] == [400, 1000, 2000] and all(keys <= set(r) for r in rows)
    assert all(r["tokens"] <= r["budget"] for r in rows)
    assert "budget sweep of" in done.stdout and "own" in done.stdout
    # The stored run ran under a budget: the sweep starts from its selector's own selection.
    plot = tmp_path / "sweep.html"
    done = run_cli_forked(
        "sweep", run_id, "--session-db", db, "--budgets", "400,1000,2000", "--json", "-", "--plot", plot
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == rows
    assert "Budget sweep" in plot.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budgets", "0,2000"], "Invalid budgets (0,2000)"),
        (["--budgets", "abc"], "Invalid budgets (abc)"),
        (["--budgets", "2000,-4"], "Invalid budgets (2000,-4)"),
        (["--budgets", "10"], "Invalid token budget (10)"),
        (["--stop_gain", "200"], "Invalid stop gain (200"),
        (["--plot", "x.gif"], "Invalid plot format (.gif)"),
    ],
)
def test_the_sweep_command_refuses_bad_values_in_one_line(args, message: str, clips, tmp_path: Path) -> None:
    bad = run_cli_forked("sweep", clips["moving"], "--num_sampled_frames", "24", *args)
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1 and message in lines[0], bad.stderr


def test_the_sweep_command_refuses_an_unknown_run(tmp_path: Path) -> None:
    bad = run_cli_forked("sweep", "nosuchrun", "--session-db", tmp_path / "s.duckdb")
    assert bad.returncode == 2 and "no run with id 'nosuchrun'" in bad.stderr


def test_a_selector_comparison_sets_a_budget_beside_the_selectors_own(clips, tmp_path: Path) -> None:
    from backend.compare import compare_selectors, load_comparison, parse_entries

    small = "seq_len_frames=16,num_images=3,square_size=192"
    text = "llava-ov2[target_canvas=8],llava-ov2[target_canvas=8,token_budget=1200],"
    text += f"onevision[{small},token_budget=900]"
    entries = parse_entries(text)
    with SessionStore(tmp_path / "s.duckdb") as store:
        done = compare_selectors(clips["moving"], store, entries=entries)
        stored = load_comparison(store, done.comparison_id)
        assert stored.labels == [e.label for e in entries]
        rows = store.query(
            "SELECT run_id, token_budget, tokens_used FROM runs WHERE run_id IN (?, ?, ?)",
            list(stored.run_ids),
        ).set_index("run_id")
        own, capped, onevision = (rows.loc[r] for r in stored.run_ids)
        assert own.isna().all() and int(capped.token_budget) == 1200 and int(onevision.token_budget) == 900
        assert int(capped.tokens_used) <= 1200 and int(onevision.tokens_used) <= 900
