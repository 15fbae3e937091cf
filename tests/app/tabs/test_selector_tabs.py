"""The onevision selector through the app's handlers: the Run tab's generated controls (a checkbox
for its yes/no option) run it, its run opens in Inspect, Canvases and Export, and a selector
comparison with it renders its panes. A real workspace, a tiny H.264 clip, no browser."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
from helpers.clips import encode_clip

from app.tabs import canvases, compare, export_panel, inspect, option_form, run
from app.workspace import Workspace, make_workspace
from backend.config import field_help
from backend.pipeline import SelectionOptions
from backend.render import LAYER_NAMES
from backend.selectors import SELECTOR_NAMES, option_names
from views.inspector.frame_cache import JpegCache

pytestmark = [pytest.mark.needs_cvp, pytest.mark.slow]

VIEW = (0, ["kept"], 0.5, "turbo")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("selector_tabs")
    workspace = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    yield workspace
    workspace.close()


@pytest.fixture(scope="module")
def clip(ws: Workspace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 frames of 320×192 H.264 inside the workspace's input folders."""
    made = encode_clip(
        tmp_path_factory.mktemp("clip") / "h264", codec="h264", width=320, height=192, frames=24
    )
    return Path(shutil.copy(made, ws.output_root / made.name))


@pytest.fixture(scope="module")
def onevision_run(ws: Workspace, clip: Path) -> str:
    """A run made as the Run tab makes it: the onevision controls' values, numbers as Gradio sends them."""
    with gr.Blocks():
        controls = option_form.option_controls("onevision")
    assert isinstance(controls["static_fallback"], gr.Checkbox)
    assert isinstance(controls["topk_mode"], gr.Dropdown) and controls["num_images"].elem_id == (
        "opt_onevision_num_images"
    )
    chosen = {"seq_len_frames": 12.0, "num_images": 3.0, "square_size": 192.0, "static_fallback": False}
    names = list(controls)
    values = [chosen.get(n, c.value) for n, c in controls.items()]
    options = option_form.selection_options(names, values, "onevision")
    assert options.seq_len_frames == 12 and type(options.seq_len_frames) is int
    assert options.static_fallback is False
    stages: list[str] = []
    run_id, status = run.start_run(ws, "", str(clip), VIEW, options, lambda f, desc: stages.append(desc))
    assert "1 group, 3 canvases, 432 tokens" in status and "(decoded)" in status  # 3 × 12×12 patches
    assert stages[0] == "probe"
    return run_id


def test_the_run_tab_shows_onevisions_controls_and_reopens_its_run(ws: Workspace, onevision_run: str) -> None:
    assert ws.store.get_run(onevision_run).selector == "onevision"
    shown = run.selector_groups("onevision", SELECTOR_NAMES)
    assert [u["visible"] for u in shown] == [s == "onevision" for s in SELECTOR_NAMES]
    # Opening the run fills the selector choice and exactly its controls, in the Run tab's order
    # (the JSON text the page spreads over them: None leaves another selector's control alone).
    with gr.Blocks():
        tab = run.build_run_tab(ws, gr.Textbox())
    layout = option_form.OptionLayout.of(tab)
    counts = [len(option_names(s)) for s in SELECTOR_NAMES]
    assert len(layout.entries) == len(layout.outputs(tab)) == 1 + sum(counts)
    assert layout.outputs(tab)[0] is tab.selector
    out = json.loads(option_form.opened_options_json(ws, onevision_run, layout))
    assert out["run"] == onevision_run and out["values"][0] == "onevision"
    filled = {
        name: value
        for (selector, name, _), value in zip(layout.entries[1:], out["values"][1:], strict=True)
        if selector == "onevision"
    }
    assert tuple(filled) == tuple(option_names("onevision"))
    assert filled["num_images"] == 3 and filled["static_fallback"] is False
    others = [
        v
        for (selector, _, _), v in zip(layout.entries[1:], out["values"][1:], strict=True)
        if selector != "onevision"
    ]
    assert others and all(v is None for v in others)
    # Run again with one control changed: onevision does not resume, so it decodes again.
    options = option_form.selection_options(
        ["num_images"], [2.0], "onevision", base=ws.store.get_run(onevision_run).config
    )
    new_id, status = run.start_run(
        ws, onevision_run, str(ws.store.get_run(onevision_run).video_path), VIEW, options, _quiet
    )
    assert new_id != onevision_run and "2 canvases" in status and "(decoded)" in status
    assert ws.store.get_run(new_id).config["square_size"] == 192  # the rest from the open run


def _frame(run_id: str, row: int, layers: str) -> inspect.FrameRequest:
    return inspect.FrameRequest(run_id, row, inspect.ViewSettings(layers, 0.5, "turbo", "frame"))


def test_its_run_opens_in_inspect_canvases_and_export(ws: Workspace, onevision_run: str) -> None:
    defaults = {n: m["default"] for n, m in field_help(SelectionOptions).items()}
    out = inspect.show_run(ws, onevision_run, "", 0, inspect.ViewSettings(["kept"], 0.5, "turbo", "frame"))
    view = dict(zip(inspect.VIEW_OUTPUTS, out, strict=False))
    assert "12 candidates → 1 group → 3 canvases" in view["summary"]
    assert "signal_stand_in" in view["summary"] and "anchor (whole frame kept)" in view["info"]
    cache = JpegCache(budget_bytes=8 << 20)
    for layer in LAYER_NAMES:  # every layer draws on the letterboxed square, on the anchor and after
        for row in (0, 5):
            assert inspect.render_jpeg(ws, cache, _frame(onevision_run, row, layer))[:2] == b"\xff\xd8"
    # A patch of the picture reads out its score and its rank among the candidates: the 11 later
    # frames' patches wholly inside the 192×115 frame (rows 38…153 px: patch rows 3…8), 11 × 6 × 12.
    readout = inspect.pick_block(ws, onevision_run, 5, "100,100")
    assert "block score" in readout and " of 792 valid patches over candidates 1–11</td>" in readout
    views = canvases.CanvasViews(ws)
    assert len(canvases.refresh(views, onevision_run)) > 0
    # Its 16-pixel patches are not LLaVA-OneVision-2's: the prompt box says so instead of a prompt.
    assert "16-pixel patches" in canvases.canvas_prompt(views, onevision_run)
    files = export_panel.figure_files(ws, onevision_run, "timeline", "png")
    assert any(f.endswith(".png") for f in files)
    # The inspector's live options are cvp's: on another selector's run they say so in one line.
    names = list(inspect.LIVE_OPTIONS)
    values = [defaults[n] for n in names]
    with pytest.raises(gr.Error, match="made by the onevision selector"):
        inspect.reselect_live(
            ws,
            names,
            onevision_run,
            0,
            inspect.ViewSettings(["kept"], 0.5, "turbo", "frame", "block"),
            values,
        )


def test_a_selector_comparison_with_onevision_renders_its_panes(ws: Workspace, clip: Path) -> None:
    entries = "cvp[num_sampled_frames=12],onevision[seq_len_frames=12,num_images=3,square_size=192]"
    pick, cid, _nonce, status = compare.run_selectors(ws, str(clip), entries, "clean")
    assert "2 selectors" in status and pick["value"] == cid
    opened = compare.Comparisons(ws)
    loaded = compare.load(opened, cid, compare.PaneControls(layers=["kept"], difference=True, reference="0"))
    assert "onevision" in str(loaded[0])
    # onevision's pane shows its picture only: the 192×115 frame letterboxed into the 192 square
    # (rows 38…153 px) without its bars, so it has the video's aspect; the difference mode draws
    # cvp's blocks on it.
    plain = np.asarray(compare.panes(opened, cid, 3, compare.PaneControls(layers=[], reference="0"))[1])
    drawn = np.asarray(
        compare.panes(opened, cid, 3, compare.PaneControls(layers=[], difference=True, reference="0"))[1]
    )
    assert plain.shape == drawn.shape == (115, 192, 3)
    assert (drawn != plain).any()
    # Every pane shows the ranked block score, as the Inspect viewer does (one tile per block).
    assert compare._layers(["heatmap"], 0.5, "turbo", "frame").heat == "block"
    assert compare._layers(["heatmap"], 0.5, "turbo", "all").heat == "cell"  # the shared scale rescales cells


def _quiet(fraction: float, desc: str = "") -> None:
    del fraction, desc
