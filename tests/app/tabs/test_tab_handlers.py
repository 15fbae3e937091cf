"""The tabs' handlers called directly: a real workspace (DuckDB file), the bundled sample, no browser."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from app.tabs import export_panel, inspect, option_form, run, sessions
from app.tabs.inspect import ViewSettings as View
from app.tabs.inspect import fragments, live
from app.workspace import SAMPLE_VIDEO, Workspace, ensure_run, make_workspace
from views.inspector.frame_cache import JpegCache

pytestmark = [pytest.mark.needs_cvp]

LAYERS = ["kept", "anchor"]


def _frame(
    run_id: str, row: int, *view: Any, frame: str | None = None, codec: str = ""
) -> inspect.FrameRequest:
    """The frame the page asks for: ``view`` as the frame URL carries it (layers, opacity, colormap, …)."""
    return inspect.FrameRequest(run_id, row, View(*view), frame=frame, codec=codec)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("tabs")
    workspace = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    yield workspace
    workspace.close()


@pytest.fixture(scope="module")
def run_id(ws: Workspace) -> str:
    return ensure_run(ws, SAMPLE_VIDEO)


def _option_defaults() -> dict[str, Any]:
    from backend.config import field_help
    from backend.pipeline import SelectionOptions

    return {name: meta["default"] for name, meta in field_help(SelectionOptions).items()}


def test_opening_a_run_shows_its_first_frame_and_options(ws: Workspace, run_id: str) -> None:
    out = inspect.show_run(ws, run_id, "", 0, View(LAYERS, 0.5, "turbo", "frame"))
    assert len(out) == len(inspect.VIEW_OUTPUTS) + 3
    view = dict(zip(inspect.VIEW_OUTPUTS, out, strict=False))
    assert "flower_timelapse_cc0.mp4" in view["summary"] and "canvases" in view["summary"]
    assert "pipeline " in view["summary"] and view["shown_run"] == run_id
    assert view["slider"]["value"] == 0 and view["slider"]["maximum"] > 10
    assert f"lens/frame?run={run_id}&amp;row=0&amp;l=kept%2Canchor" in view["frame"]
    assert 'data-nw="960"' in view["frame"] and "data-dar=" in view["frame"]
    assert "candidate 0 · frame 0" in view["info"]
    assert view["group_pick"]["value"] == 0 and "kept" in view["colour_legend"]
    assert view["video_path"]["value"] == str(SAMPLE_VIDEO.resolve())
    layers, opacity, cmap = out[len(inspect.VIEW_OUTPUTS) :]
    assert (layers, opacity, cmap) == (LAYERS, 0.5, "turbo")
    # The Run tab's controls get the run's options (cvp's as stored, the control's default for
    # an option the run does not record); other selectors' controls are left alone.
    defaults = _option_defaults()
    layout = option_form.OptionLayout(
        (("", "selector", "cvp"), *(("cvp", n, d) for n, d in defaults.items()), ("uniform", "num_frames", 8))
    )
    values = json.loads(option_form.opened_options_json(ws, run_id, layout))["values"]
    assert values[0] == "cvp" and values[-1] is None
    assert values[1 + list(defaults).index("profile")] == "clean"
    # Without a run nothing changes.
    assert all(u == gr.update() for u in inspect.show_run(ws, "", "", 0, View(LAYERS, 0.5, "turbo", "frame")))
    # A run the viewer already shows (a live re-selection drew it): nothing changes.
    again = inspect.show_run(ws, run_id, run_id, 0, View(LAYERS, 0.5, "turbo", "frame"))
    assert all(u == gr.update() for u in again)


def test_changing_a_layer_changes_the_frame_and_the_legend(ws: Workspace, run_id: str) -> None:
    cache = JpegCache(budget_bytes=8 << 20)
    plain = inspect.render_jpeg(ws, cache, _frame(run_id, 2, "kept", 0.5, "turbo", "frame"))
    heat = inspect.render_jpeg(ws, cache, _frame(run_id, 2, "kept,heatmap", 0.5, "turbo", "frame"))
    assert plain[:2] == heat[:2] == b"\xff\xd8" and plain != heat
    signal = inspect.render_jpeg(
        ws, cache, _frame(run_id, 2, "kept,heatmap", 0.5, "turbo", "frame", "signal")
    )
    assert signal != heat  # the app's default is the ranked 2×2-block score, not the per-cell signal
    colour, bar = inspect.legends_of(ws, run_id, View(["kept"], 0.5, "turbo", "frame", "block"))
    assert bar == "" and "<img" not in colour and "anchor" in colour
    colour, bar = inspect.legends_of(ws, run_id, View(["kept", "heatmap"], 0.5, "turbo", "video", "signal"))
    assert "bits per" in bar and "the run's highest cell" in bar
    _, bar = inspect.legends_of(ws, run_id, View(["heatmap"], 0.5, "turbo", "frame", "block"))
    assert "2×2-block score" in bar and "this frame's highest block score" in bar
    with pytest.raises(ValueError, match=r"Invalid row \(9999\)"):
        inspect.render_jpeg(ws, cache, _frame(run_id, 9999, "kept", 0.5, "turbo", "frame"))
    assert inspect.info_fragment(ws, run_id, 2).startswith("candidate 2 · frame ")


def test_steps_jumps_blocks_and_groups(ws: Workspace, run_id: str) -> None:
    result = ws.result(run_id)
    second = result.groups.specs[1]
    assert inspect.step(ws, run_id, 0, "next_group") == second.start
    frame_index = int(result.candidates.frame_indices[5])
    assert inspect.jump(ws, run_id, str(frame_index)) == 5
    # A click anywhere on a plot: NaN, None, text or beyond the video never raise.
    assert inspect.jump(ws, run_id, "NaN", 7) == 7
    assert inspect.jump(ws, run_id, None, 3) == 3
    assert inspect.jump(ws, run_id, "1e30") == result.candidates.frame_indices.size - 1
    assert inspect.jump(ws, run_id, "-40.6") == 0
    table = inspect.pick_block(ws, run_id, 0, "3,3")
    assert "(0, 0)" in table and "bits per" in table and "anchor frame" in table
    table = inspect.pick_block(ws, run_id, 1, "3,3")
    assert "K=" in table and ("kept: rank" in table or "lost: rank" in table or "not a candidate" in table)
    assert inspect.follow_group(ws, run_id, second.start, 0)[0]["value"] == second.group_index
    assert inspect.follow_group(ws, run_id, second.start, second.group_index) == (gr.update(), gr.update())
    with pytest.raises(gr.Error, match="bad block position"):
        inspect.pick_block(ws, run_id, 0, "nowhere")
    plot, start = inspect.show_group(ws, run_id, second.group_index)
    title = json.loads(plot)["layout"]["title"]["text"]
    assert start == second.start and title == f"group {second.group_index}: readiness trace"
    with pytest.raises(gr.Error, match="No run is open"):
        inspect.step(ws, "", 0, "next_group")


def test_a_directory_is_called_a_directory_not_a_missing_file(ws: Workspace) -> None:
    from app.tabs import luma
    from backend.errors import InputError

    with pytest.raises(InputError, match="is a directory, not a video file"):
        luma.resolve_input(ws, str(ws.output_root), what="test")


def test_a_failing_run_is_an_error_and_stores_nothing(ws: Workspace, run_id: str, tmp_path: Path) -> None:
    before = [r.run_id for r in ws.store.list_runs()]
    values = list(_option_defaults().values())
    options = option_form.selection_options(list(_option_defaults()), values)
    view = (0, LAYERS, 0.5, "turbo")
    with pytest.raises(gr.Error, match="no such video file"):
        run.start_run(ws, run_id, str(ws.output_root / "missing.mp4"), view, options, _no_progress)
    with pytest.raises(gr.Error, match="is a directory, not a video file"):
        run.start_run(ws, run_id, str(ws.output_root), view, options, _no_progress)
    assert run.running_stage("geometry") == "decode" and run.running_stage("pack") == "storing the run"
    with pytest.raises(gr.Error, match="outside"):
        run.start_run(ws, run_id, str(tmp_path / "elsewhere.mp4"), view, options, _no_progress)
    names = list(_option_defaults())
    bad = [0 if name == "patch" else v for name, v in zip(names, values, strict=True)]
    with pytest.raises(gr.Error, match="patch"):
        option_form.selection_options(names, bad)
    assert [r.run_id for r in ws.store.list_runs()] == before


def test_a_changed_selection_option_reselects_from_the_cache(ws: Workspace, run_id: str) -> None:
    names = list(_option_defaults())
    values = [2 if name == "images_per_group" else v for name, v in _option_defaults().items()]
    options = option_form.selection_options(names, values)
    seen: list[str] = []
    new_id, status = run.start_run(
        ws, run_id, str(SAMPLE_VIDEO), (3, LAYERS, 0.4, "magma"), options, lambda f, desc: seen.append(desc)
    )
    assert new_id != run_id and "re-selected from the cache, nothing decoded" in status
    assert seen[0] == "probe"
    table, picks = sessions.sessions_update(ws, new_id)
    assert ws.store.get_run(new_id).parent_run_id == run_id
    assert ws.store.load_view(run_id) == {"row": 3, "layers": LAYERS, "opacity": 0.4, "colormap": "magma"}
    assert picks["value"] == new_id and new_id in {v for _, v in picks["choices"]}
    assert {r[0] for r in table["value"]} == {r.run_id for r in ws.store.list_runs()}
    row = next(r for r in table["value"] if r[0] == new_id)
    assert row[sessions.RUN_HEADERS.index("change")] == "images_per_group 4→2"
    label = next(label for label, v in picks["choices"] if v == new_id)
    assert label.startswith(new_id) and label.endswith(f"from {run_id}: images_per_group 4→2")


def test_live_reselection_redraws_the_view(ws: Workspace, run_id: str) -> None:
    names = list(inspect.LIVE_OPTIONS)
    config = ws.store.get_run(run_id).config
    values = [config[n] for n in names]
    view = View(LAYERS, 0.5, "turbo", "frame", "block")
    assert all(u == gr.update() for u in inspect.reselect_live(ws, names, run_id, 4, view, values))
    values[names.index("images_per_group")] = 3
    out = inspect.reselect_live(ws, names, run_id, 4, view, values)
    new_id, shown = out[0], dict(zip(inspect.VIEW_OUTPUTS, out[1:], strict=False))
    assert new_id != run_id and shown["shown_run"] == new_id
    assert ws.store.get_run(new_id).config["images_per_group"] == 3
    assert shown["slider"]["value"] == 4 and f"run={new_id}" in shown["frame"]
    assert ws.store.load_view(run_id)["row"] == 4


def test_reopening_a_stored_run_saves_the_viewer(ws: Workspace, run_id: str) -> None:
    with pytest.raises(gr.Error, match="Choose a stored run"):
        sessions.open_stored(ws, run_id, None, 0, LAYERS, 0.5, "turbo")
    with pytest.raises(gr.Error, match="no run with id 'nope'"):
        sessions.open_stored(ws, run_id, "nope", 0, LAYERS, 0.5, "turbo")
    assert sessions.open_stored(ws, run_id, run_id, 7, ["heatmap"], 0.3, "jet") == run_id
    assert ws.store.load_view(run_id)["row"] == 7
    first, table, picks = sessions.page_load(ws, run_id)
    assert run_id in [r[0] for r in table["value"]]
    assert first == run_id and picks["value"] == run_id


def test_uploads_are_stored_once_and_bad_ones_removed(ws: Workspace, tmp_path: Path) -> None:
    path, status = run.on_upload(ws, str(SAMPLE_VIDEO))
    assert Path(path) == ws.output_root / "uploads" / SAMPLE_VIDEO.name and Path(path).is_file()
    assert status.startswith(f"Uploaded **{SAMPLE_VIDEO.name}**: h264 ")
    notes = tmp_path / "notes.mp4"
    notes.write_text("not a video")
    with pytest.raises(gr.Error) as failed:
        run.on_upload(ws, str(notes))
    assert failed.value.message.startswith("notes.mp4: cannot read video")  # the upload, not its copy
    assert not (ws.output_root / "uploads" / "notes.mp4").exists()
    assert run.on_upload(ws, None) == (gr.update(), gr.update())


def test_export_handlers_need_a_run(ws: Workspace, run_id: str) -> None:
    with pytest.raises(gr.Error, match="No run is open"):
        export_panel.export_files(ws, "", export_panel.ClipForm(layers=["kept"], start=0, fmt="mp4"))
    with pytest.raises(gr.Error, match="Invalid figure"):
        export_panel.figure_files(ws, run_id, "nope", "html")
    result = ws.result(run_id)
    assert export_panel.viewed_frame_index(ws, run_id, 4) == int(result.candidates.frame_indices[4])


def test_export_panel_sizes_the_clip_and_ranges_the_figure(ws: Workspace, run_id: str) -> None:
    from PIL import Image

    def widths(files: list[str]) -> set[int]:
        return {Image.open(f).size[0] for f in files if f.endswith(".png")}

    # The sample is 960×540, processed at 504×280: the panel exports the source size by default.
    assert widths(
        export_panel.export_files(
            ws, run_id, export_panel.ClipForm(layers=["kept"], start=30, stop=34, fmt="png")
        )
    ) == {960}
    sized = export_panel.export_files(
        ws, run_id, export_panel.ClipForm(layers=["kept"], start=30, stop=34, fmt="png", width_px=320)
    )
    assert widths(sized) == {320}
    half = export_panel.export_files(
        ws,
        run_id,
        export_panel.ClipForm(
            layers=["kept"], start=30, stop=34, fmt="png", size="processed", size_factor=0.5
        ),
    )
    assert widths(half) == {252}
    (html, _) = export_panel.figure_files(ws, run_id, "timeline", "html", start=60, stop=90)
    assert '"range":[59.5,89.5]' in Path(html).read_text().replace(" ", "")


def test_the_export_panel_writes_the_coverage_figure(ws: Workspace, run_id: str) -> None:
    import re

    from views.coverage_figure import prepare_run_coverage_figure

    assert "coverage" in export_panel.FIGURES
    (html, sidecar) = export_panel.figure_files(ws, run_id, "coverage", "html", start=60, stop=90)
    assert Path(html).name.startswith(f"{run_id}_coverage_") and html.endswith(".coverage.html")
    assert Path(html).parent == ws.output_root / export_panel.EXPORT_FOLDER and sidecar.endswith(".json")
    # Its time axes span the panel's range, as the CLI's.
    x_range = prepare_run_coverage_figure(ws.result(run_id), frames=(60, 90), paper=True).layout.xaxis.range
    page = Path(html).read_text().replace(" ", "")
    ranges = {tuple(float(v) for v in m) for m in re.findall(r'"range":\[([-\d.e]+),([-\d.e]+)\]', page)}
    assert tuple(x_range) in ranges and '"name":"neverobserved"' in page


def _no_progress(fraction: float, desc: str = "") -> None:
    pass


def test_native_frames_and_the_block_readout_route(ws: Workspace, run_id: str) -> None:
    import io

    from PIL import Image

    cache = JpegCache(budget_bytes=8 << 20)
    sources = inspect.SourceFrames(ws)
    data = inspect.render_jpeg(
        ws, cache, _frame(run_id, 2, "kept,heatmap", 0.5, "turbo", "frame"), sources=sources
    )
    assert Image.open(io.BytesIO(data)).size == (960, 540)  # the source size, not the processed one
    result = ws.result(run_id)
    h, w = result.geometry.processed_hw
    out = inspect.block_fragment(ws, sources, run_id, 2, w // 2, h // 2, native=True)
    assert "decision" in out["html"] and out["pixel"].startswith(f"pixel ({480}, {270}) source")
    assert out["box"][2] == result.geometry.patch * result.geometry.block_size
    # The A/B flip asks for another run's frame by frame index.
    frame_index = int(result.candidates.frame_indices[9])
    view = ("kept", 0.5, "turbo", "frame", "block")
    flipped = inspect.render_jpeg(ws, cache, _frame(run_id, 0, *view, frame=str(frame_index)))
    assert flipped == inspect.render_jpeg(ws, cache, _frame(run_id, 9, *view))


def test_codec_layers_draw_vectors_and_qp(ws: Workspace, run_id: str) -> None:
    cache = JpegCache(budget_bytes=8 << 20)
    sides = inspect.CodecSides(ws)
    result = ws.result(run_id)
    # A P or B frame of the H.264 sample: it has vectors and a QP table.
    row = next(r for r, p in enumerate(result.decoded.pict_types) if p in ("P", "B"))
    side = sides.frame(run_id, int(result.candidates.frame_indices[row]))
    assert side is not None and side["mvs"].shape[1] == 8 and len(side["mvs"]) > 0 and side["qp"] is not None
    view = ("kept", 0.5, "turbo", "frame", "block")
    plain = inspect.render_jpeg(ws, cache, _frame(run_id, row, *view, codec=""))
    vectors = inspect.render_jpeg(ws, cache, _frame(run_id, row, *view, codec="mv"), sides=sides)
    qp = inspect.render_jpeg(ws, cache, _frame(run_id, row, *view, codec="qp"), sides=sides)
    assert len({plain, vectors, qp}) == 3
    colour, _ = inspect.legends_of(ws, run_id, View(["kept"], 0.5, "turbo", "frame", "block"), ["mv", "qp"])
    assert "motion vector" in colour and "block QP" in colour and "exports no" not in colour


@pytest.mark.parametrize(
    ("value", "shown"),
    [(176242.20957880435, 176242), (0.531249, 0.5312), (12.3456, 12.35), (3, 3), ("cut", "cut")],
)
def test_groups_table_numbers_read_at_four_significant_digits(value: Any, shown: Any) -> None:
    # Issue 15, defect 13: the threshold column printed 176242.20957880435.
    assert fragments._shown(value) == shown and type(fragments._shown(value)) is type(shown)


def test_the_groups_table_is_html_with_the_viewed_group_marked(ws: Workspace, run_id: str) -> None:
    from views.inspector import group_stepper

    rows = group_stepper.prepare_group_table(ws.result(run_id))
    text = fragments.groups_table_html(rows, current=1)
    assert text.count("<tr data-group=") == len(rows) and text.count("lens-current") == 1
    assert '<tr data-group="1" class="lens-current">' in text
    assert all(f'data-key="{name}"' in text for name in rows[0])
    assert "No groups" in fragments.groups_table_html([])


def test_frontend_values_are_what_gradio_would_send() -> None:
    pick = gr.Dropdown([], label="Group", render=False)
    got = live.frontend_value(pick, gr.update(choices=[0, 1, 2], value=1))
    assert got["__type__"] == "update" and got["value"] == 1
    assert [list(c) for c in got["choices"]] == [["0", 0], ["1", 1], ["2", 2]]
    assert pick.choices == []  # the app's own component is left as it was
    assert live.frontend_value(gr.Textbox(render=False), "run-1") == "run-1"
    assert live.frontend_value(gr.Textbox(render=False), gr.update()) == {"__type__": "update"}


def test_the_reselect_route_answers_and_lets_go_of_the_session_file(ws: Workspace, run_id: str) -> None:
    from app.main import build_app, stop_pool

    demo = build_app(ws, run_id=run_id)
    try:
        body = {"run": run_id, "row": 2, "layers": LAYERS, "opacity": 0.5, "colormap": "turbo"}
        body |= {"scale": "frame", "heat": "block"}
        ipg = ws.store.get_run(run_id).config["images_per_group"]
        runs = len(ws.store.list_runs())
        # Nothing changed: nothing to draw, no run stored.
        answer, finish = demo.lens_reselect(body | {"options": {"images_per_group": ipg}})
        assert answer == {"outputs": []} and finish is not None
        finish()
        assert len(ws.store.list_runs()) == runs
        # A refused value and an unknown option: one line each, the file not held.
        answer, finish = demo.lens_reselect(body | {"options": {"images_per_group": 0}})
        assert answer == {"error": "Invalid images per group (0). Supported values are between 1 and 1024."}
        assert finish is None and ws.store._con is None
        answer, _ = demo.lens_reselect(body | {"options": {"num_sampled_frames": 9}})
        assert answer["error"].startswith("Invalid live option (num_sampled_frames). Supported values are ")
        # A change: the page's values for shown_run, run_id, …, the Run tab's options JSON.
        answer, finish = demo.lens_reselect(body | {"options": {"images_per_group": ipg + 1}})
        new_id = answer["outputs"][1]
        assert answer["outputs"][0] == new_id != run_id
        assert ws.store._con is not None  # held until the answer is sent …
        assert finish is not None
        finish()
        assert ws.store._con is None  # … then closed, the old run's viewer saved
        assert ws.store.load_view(run_id)["row"] == 2
        assert json.loads(answer["outputs"][-1])["run"] == new_id
        assert ws.store.get_run(new_id).config["images_per_group"] == ipg + 1
        json.dumps(answer)  # all of it goes to the page as JSON
    finally:
        demo.close()
        stop_pool(ws)


def test_no_event_fires_on_the_page_load_and_on_a_change(ws: Workspace, run_id: str) -> None:
    """``gr.on(triggers=None)`` listens to the page load and to every input's change: the Compare
    tab's page load then re-fired whenever a new comparison set its id, loading it twice, and the
    second load put frame 0 back under a step taken in between (CI, stop 38)."""
    from app.main import build_app, stop_pool

    demo = build_app(ws, run_id=run_id)
    try:
        loads = [fn for fn in demo.fns.values() if any(event == "load" for _, event in fn.targets)]
        assert len(loads) >= 2  # the app's own and the Compare tab's
        for fn in loads:
            assert {event for _, event in fn.targets} == {"load"}, (fn.name, fn.targets)
    finally:
        demo.close()
        stop_pool(ws)


def test_the_coverage_panel_draws_the_open_runs_coverage_and_sweeps_its_budgets(
    ws: Workspace, run_id: str
) -> None:
    from app.tabs.inspect import coverage_panel as cp
    from backend.audit import AuditConfig, audit_coverage, audit_source_of_run

    fig = cp.coverage_figure(ws, run_id)
    audit = audit_coverage(audit_source_of_run(ws.result(run_id)), config=AuditConfig())
    drawn = next(t for t in fig.data if t.name == "coverage")
    assert len(drawn.y) >= audit.frames and max(drawn.y) == pytest.approx(audit.frame_coverage.max())
    plot, rows, status = cp.sweep(ws, run_id, "8000, 2000,4000")
    assert [r[0] for r in rows] == [2000, 4000, 8000, "own"]
    tokens = dict(zip(cp.SWEEP_COLUMNS, zip(*rows, strict=True), strict=True))["tokens"]
    assert all(t <= b for t, b in zip(tokens[:3], (2000, 4000, 8000), strict=True))
    observed = [r[cp.SWEEP_COLUMNS.index("observed_frames")] for r in rows[:3]]
    assert observed == sorted(observed) and status == f"Swept run {run_id} at 3 budgets."
    assert len([t for t in plot.data if t.mode == "lines+markers"]) == 4
    for bad, said in (
        ("0,100", "Invalid budgets (0,100)"),
        ("lots", "Invalid budgets (lots)"),
        ("10", "at least"),
    ):
        with pytest.raises(gr.Error, match=re.escape(said)):
            cp.sweep(ws, run_id, bad)
    with pytest.raises(gr.Error, match="No run is open"):
        cp.sweep(ws, "", "2000")
