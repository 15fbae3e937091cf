"""Refused inputs as the tabs report them: kept in a status line, worded for the app, folders the
session wrote readable again, and the comparison's progress naming its steps."""

from __future__ import annotations

import pickle
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import gradio as gr
import pytest
from helpers.cli import run_cli
from helpers.clips import encode_clip

from app.tabs import common, compare, dataset, luma, option_form, run
from app.workspace import Workspace, make_workspace
from backend.errors import InputError
from backend.store import write_summary_parquet


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = make_workspace(session_db=tmp_path / "sessions.duckdb", output_dir=tmp_path / "work")
    yield workspace
    workspace.close()


def test_a_refused_input_goes_to_the_status_line_and_leaves_the_other_outputs() -> None:
    status, table, plot = object(), object(), object()

    def refuse(text: str) -> tuple[str, str, str]:
        raise gr.Error(f"{text}: is outside the allowed folders (/w)")

    wrapped = common.reported(refuse, [table, status, plot], status, on_error={plot: None})
    with warnings.catch_warnings(record=True) as toasts:  # gr.Warning outside a page: a warning
        warnings.simplefilter("always")
        out = wrapped("/etc/my_file.mp4")
    assert out[0] == gr.update() and out[2] is None
    assert out[1] == r"**Error:** /etc/my\_file.mp4: is outside the allowed folders (/w)"
    assert [str(t.message) for t in toasts] == ["/etc/my_file.mp4: is outside the allowed folders (/w)"]
    # What it returns when nothing is refused, and bugs, pass through.
    assert common.reported(lambda: (1, 2, 3), [table, status, plot], status)() == (1, 2, 3)
    with pytest.raises(KeyError):
        common.reported(lambda: {}["x"], [status], status)()


def test_a_where_before_any_batch_says_so_without_quotes(ws: Workspace) -> None:
    """The Dataset tab's WHERE on no opened batch: the status line's text is the message itself
    (a gr.Error is a ValueError, and re-raised through str() it came back as its repr, quoted)."""
    status = object()
    apply = common.reported(lambda: dataset.show(ws, "", "tokens <", None, False), [status], status)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        line = apply()
    assert line == "**Error:** Open a batch first: its batch.parquet, or a stored dataset."


@pytest.mark.needs_cvp  # the Run tab's default score is bitcost: the check needs the reader present
def test_av1_with_default_options_names_the_run_tabs_controls_and_the_cli_its_flags(
    ws: Workspace, tmp_path: Path
) -> None:
    av1 = encode_clip(ws.output_root / "av1", codec="av1", width=160, height=96, frames=8, gop=4)
    defaults = option_form.selection_options([], [])
    assert (defaults.profile, defaults.score) == ("clean", "bitcost")
    # The Run tab's default declares a fallback (signal, then uniform): the run is made, and says so.
    runs = len(ws.store.list_runs())
    run.start_run(ws, "", str(av1), (0, [], 0.5, "turbo"), defaults, lambda *a, **k: None)
    made = ws.store.list_runs()
    assert len(made) == runs + 1
    newest = max(made, key=lambda r: r.created_at)
    assert newest.fallback.selector_requested == "cvp"
    assert newest.fallback.fallback_reason in {"no_bitcost", "flat_scores"}
    # The parity profile reproduces the reference, so it falls back to nothing: the error names the fix.
    parity = defaults.replace(profile="parity")
    with pytest.raises(gr.Error) as refused:
        run.start_run(ws, "", str(av1), (0, [], 0.5, "turbo"), parity, lambda *a, **k: None)
    message = str(refused.value.message)
    assert "this codec has no bitcost (av1)" in message
    assert "set Profile to clean and Score to residual (or mv, mvres or pkt_energy)" in message
    assert "--" not in message
    # The CLI's wording is today's, flags and all.
    res = run_cli("select", av1, "--out", tmp_path / "out")
    assert res.returncode == 2
    assert "for av1 use --profile clean --score residual (or mv, mvres or pkt_energy) (docs/signals.md)." in (
        res.stderr
    )
    assert "set Profile" not in res.stderr


def test_a_fix_survives_the_worker_and_each_form_words_it() -> None:
    from backend.stages.decode import OptionFixError

    err = OptionFixError(
        "no bitcost; use --profile clean --score residual.",
        problem="no bitcost;",
        fix=(("profile", "clean"), ("score", "residual")),
        fix_note=".",
        path="/v/a.mp4",
        stage="decode",
    )
    back = pickle.loads(pickle.dumps(err))  # how a worker process hands it to the app
    assert back.one_line() == "/v/a.mp4: no bitcost; use --profile clean --score residual."
    assert common.error_line(back) == "/v/a.mp4: no bitcost; set Profile to clean and Score to residual."
    selectors = common.error_line(back, wording=compare.entries_wording)
    assert (
        selectors == "/v/a.mp4: no bitcost; set Profile to clean and give cvp [score=residual] in Selectors."
    )


def test_the_comparisons_progress_names_its_steps() -> None:
    steps = compare.codec_steps(["h264", "av1"])
    assert steps[""].startswith("encoding h264, av1")
    assert steps["encode"] == "selecting on the h264 encode (1 of 2)"
    assert steps["select h264"] == "selecting on the av1 encode (2 of 2)"
    assert steps["select av1"].startswith("comparing")
    assert "luma" in steps["select"] and "storing" in steps["luma"]
    labels = compare.selector_steps(["cvp", "uniform[num_frames=4]"])
    assert labels[""] == "selecting with cvp (1 of 2)"
    assert labels["select cvp"] == "selecting with uniform[num_frames=4] (2 of 2)"
    assert labels["select uniform[num_frames=4]"].startswith("comparing")


@pytest.mark.needs_cvp  # selects on H.264 with bitcost
def test_a_comparison_reports_its_steps_and_its_encodes_read_back_in_luma(ws: Workspace) -> None:
    clip = encode_clip(ws.output_root / "src", codec="h264", width=160, height=96, frames=12, gop=6)
    numbers = {name: 0 for name in ("bitrate", "max_frames", "max_side")} | {"gop": 6, "bframes": 0}
    numbers |= {f"crf_{c}": 30 for c in ("h264", "hevc", "vp9", "av1")}
    seen: list[tuple[str, float]] = []
    _, comparison_id, _, status = compare.run_new(
        ws,
        str(clip),
        ["h264", "av1"],
        numbers,
        "fast",
        "residual",
        on_progress=lambda d, f: seen.append((d, f)),
    )
    assert "2 variants" in status
    labels = [d for d, _ in seen]
    # Named while they run, first the encode (the 25 s a user saw as "processing").
    assert labels[0].startswith("encoding h264, av1") and seen[0][1] == 0.0
    # One label per variant's selection, in order.
    assert [d for d in labels if d.startswith("selecting on")] == [
        "selecting on the h264 encode (1 of 2)",
        "selecting on the av1 encode (2 of 2)",
    ]
    assert any("luma" in d for d in labels) and any(d.startswith("storing") for d in labels)
    # The encodes went under <session>.compare/, outside every input folder, and read back.
    encoded = ws.store.comparison_table("comparison_variants", comparison_id)["video_path"].tolist()
    h264 = Path(next(p for p in encoded if p.endswith("h264.mp4")))
    assert not any(root in h264.parents for root in ws.input_roots)
    assert luma.resolve_input(ws, str(h264), what="test") == h264.resolve()
    # A file outside both stays refused, and a relative path never reaches a recorded folder.
    stray = encode_clip(ws.store_path.parent / "stray", codec="h264", width=64, height=64, frames=2)
    with pytest.raises(InputError, match="is outside the allowed folders"):
        luma.resolve_input(ws, str(stray), what="test")
    with pytest.raises(InputError, match="is outside the allowed folders"):
        ws.input_path(f"../sessions.duckdb.compare/{comparison_id}/h264.mp4")


def test_a_batch_stored_in_the_session_opens_in_the_dataset_tab(ws: Workspace, tmp_path: Path) -> None:
    out_dir = tmp_path / "batch_out"  # a batch folder written by `codec-lens batch --session-db`
    out_dir.mkdir()
    rows = [{"path": "/d/a.mp4", "rel_path": "a.mp4", "status": "done", "valid_tokens": 10}]
    write_summary_parquet(rows, out_dir / "batch.parquet")
    with pytest.raises(gr.Error, match="is outside the allowed folders"):
        dataset.open_parquet(ws, str(out_dir))  # not recorded yet
    ws.store.save_dataset({"out_dir": str(out_dir), "input_path": "/d", "selector": "cvp"}, rows)
    source = dataset.open_parquet(ws, str(out_dir))
    assert source == f"parquet:{out_dir.resolve() / 'batch.parquet'}"
    status, table, _, _ = dataset.show(ws, source, "", None, False)
    assert table["rel_path"].tolist() == ["a.mp4"] and "1 video" in status


def test_a_refused_filter_clears_the_views(ws: Workspace) -> None:
    write_summary_parquet(
        [{"path": "/d/a.mp4", "rel_path": "a.mp4", "status": "done"}], ws.output_root / "b.parquet"
    )
    source = dataset.open_parquet(ws, "b.parquet")
    status, table, hist, failures = (object() for _ in range(4))
    cleared = dict(zip([table, hist, failures], dataset.cleared_views(), strict=True))
    render = common.reported(
        lambda w: dataset.show(ws, source, w, None, False),
        [status, table, hist, failures],
        status,
        on_error=cleared,
    )
    with warnings.catch_warnings(record=True) as toasts:
        warnings.simplefilter("always")
        line, rows, plot, failed = render("tokens > (SELECT count(*) FROM runs)")
    assert re.match(r"\*\*Error:\*\* Invalid filter .*only the summary table", line)
    assert rows.empty and list(rows.columns) == list(dataset.dv.TABLE_COLUMNS)
    assert plot is None and failed.empty and len(toasts) == 1


def test_the_allowed_folders_are_named_once(tmp_path: Path) -> None:
    from app.workspace import make_workspace

    videos = tmp_path / "videos"
    videos.mkdir()
    # --allow-dir given twice and the video's folder: one folder, named once in every refusal.
    ws = make_workspace(
        session_db=tmp_path / "s.duckdb", input_dirs=(videos, videos / "."), output_dir=tmp_path / "w"
    )
    try:
        assert ws.input_roots.count(videos.resolve()) == 1
        with pytest.raises(InputError) as refused:
            ws.input_path("/etc/passwd")
        assert str(refused.value).count(str(videos.resolve())) == 1
    finally:
        ws.close()
