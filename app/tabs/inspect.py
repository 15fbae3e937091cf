"""Inspect tab: the frame viewer with its layers, frame steps, blocks, timeline and group stepper."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import gradio as gr

from app.browser_js import step_js
from app.tabs.common import ui_error
from app.tabs.export_panel import build_export_panel
from app.tabs.sessions import RUN_HEADERS
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace
    from backend.pipeline import RunResult
    from views.inspector.frame_cache import JpegCache

JPEG_CACHE_BYTES = 128 << 20
PREFETCH_AHEAD = 4
PREFETCH_BEHIND = 2

# The frame image is a plain <img> fed by the app's own JPEG route: the slider sets its src
# in the browser, so a frame step costs one cached GET instead of a queued Gradio event plus
# a file copy (measured: bench/scrub.py).
SRC_JS = """
(row, run, layers, opacity, cmap, scale, framesJson) => {
  const img = document.querySelector('#frame_img');
  if (img && run) {
    const q = new URLSearchParams({run: run, row: String(Math.round(row)), l: (layers || []).join(','),
      o: String(opacity), c: cmap, s: scale});
    img.src = 'lens/frame?' + q.toString();
    // The info line comes from the app's own route too: a Gradio event per frame step would
    // queue behind the image and cost the page a re-render (measured: bench/scrub.py).
    const seq = (window.__lensInfoSeq = (window.__lensInfoSeq || 0) + 1);
    const iq = new URLSearchParams({run: run, row: String(Math.round(row))});
    fetch('lens/info?' + iq.toString())
      .then((r) => (r.ok ? r.text() : null))
      .then((t) => {
        const el = document.querySelector('#frame_info_text');
        if (t !== null && el && seq === window.__lensInfoSeq) el.innerHTML = t;
      })
      .catch(() => {});
  }
  const gd = document.querySelector('#timeline .js-plotly-plot');
  let frames = [];
  try { frames = JSON.parse(framesJson || '[]'); } catch (err) { frames = []; }
  if (gd && window.Plotly && gd.layout && gd.layout.shapes && frames.length) {
    const i = gd.layout.shapes.findIndex((s) => s.name === 'cursor');
    const f = frames[Math.max(0, Math.min(frames.length - 1, Math.round(row)))];
    // A relayout redraws the plot (~60 ms on the main thread): debounce it so it never
    // delays the frame image while scrubbing.
    clearTimeout(window.__lensCursorTimer);
    window.__lensCursorTimer = setTimeout(() => {
      if (i >= 0) window.Plotly.relayout(gd, {[`shapes[${i}].x0`]: f, [`shapes[${i}].x1`]: f});
    }, 250);
  }
  return [];
}
"""

# The visible step buttons, in the order they sit under the slider (the keys press hidden twins).
STEP_BUTTONS = (
    ("home", "|◀ first"),
    ("prev_group", "◀◀ group"),
    ("prev_key", "◀ keyframe"),
    ("prev", "◀ frame"),
    ("next", "frame ▶"),
    ("next_key", "keyframe ▶"),
    ("next_group", "group ▶▶"),
    ("end", "last ▶|"),
)
STEP_JS = step_js("frame_slider")
# What open_view returns, in order (the Run tab's video path last).
VIEW_OUTPUTS = (
    "summary",
    "slider",
    "frames",
    "frame",
    "info",
    "legend",
    "timeline",
    "groups_table",
    "group_pick",
    "readiness_plot",
    "video_path",
)


def layer_options(layers: list[str] | str, opacity: float, colormap: str, scale: str) -> Any:
    """LayerOptions from the layer controls (layer names as a list, or comma-separated)."""
    from backend.render import layer_options as options_for

    return options_for(layers, opacity=opacity, colormap=colormap, scale=scale)


def frame_url(run_id: str, row: int, layers: list[str], opacity: float, colormap: str, scale: str) -> str:
    """The app-relative URL of one rendered frame (the same one SRC_JS builds)."""
    q = {"run": run_id, "row": str(int(row)), "l": ",".join(layers), "o": str(opacity), "c": colormap}
    q["s"] = scale
    return "lens/frame?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in q.items())


def frame_html(url: str | None) -> str:
    if url is None:
        return '<div id="frame_empty">No run open. Choose a video in the Run tab.</div>'
    return f'<img id="frame_img" src="{url}" alt="frame">'


def info_text_html(info: dict[str, Any]) -> str:
    """The info panel's line for one frame, as an HTML fragment."""
    pts = "–" if info["pts_secs"] is None else f"{info['pts_secs']:.3f} s"
    moved = "" if info["moved_from"] is None else f" · moved from keyframe {info['moved_from']}"
    bad = "" if not info["bad_reason"] else f" · <b>bad frame: {html.escape(str(info['bad_reason']))}</b>"
    role = "anchor (whole frame kept)" if info["is_anchor"] else f"{info['kept_blocks']} kept blocks"
    return (
        f"candidate {info['candidate_row']} · frame {info['frame_index']} · {pts} · "
        f"{html.escape(str(info['pict_type']))} · {info['size_bytes']} bytes · group {info['group_index']} · "
        f"{role}{moved}{bad}"
    )


def info_html(inner: str) -> str:
    # The browser replaces #frame_info_text's content on every frame step (SRC_JS).
    return f'<div id="frame_info_text">{inner}</div>'


# -- handlers ------------------------------------------------------------------------------------


def result_of(ws: Workspace, run_id: str) -> RunResult:
    """The open run's result (``gr.Error`` when none is open or it cannot open)."""
    if not run_id:
        raise gr.Error("No run is open. Choose a video in the Run tab.")
    try:
        return ws.result(run_id)
    except CodecLensError as exc:
        raise ui_error(exc) from exc


def _checked_row(result: RunResult, row: int) -> None:
    n = int(result.candidates.frame_indices.size)
    if not 0 <= row < n:
        raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}")


def render_jpeg(
    ws: Workspace, cache: JpegCache, run_id: str, row: int, layers: str, opacity: float, cmap: str, scale: str
) -> bytes:
    """JPEG bytes of one frame for the frame route; its neighbours go to the prefetcher.

    Raises the backend's errors, and ValueError for a row outside the run.
    """
    from views.inspector.frame_layers import prepare_frame_layers

    result = ws.result(run_id)
    _checked_row(result, row)
    n = int(result.candidates.frame_indices.size)
    opts = layer_options(layers, opacity, cmap, scale)

    def job(r: int) -> tuple[Any, Any]:
        key = (run_id, r, opts)
        return key, lambda: prepare_frame_layers(result, r, opts).image

    data = cache.get(*job(row))
    near = [row + d for d in range(1, PREFETCH_AHEAD + 1)] + [row - d for d in range(1, PREFETCH_BEHIND + 1)]
    cache.prefetch([job(r) for r in near if 0 <= r < n])
    return data


def info_fragment(ws: Workspace, run_id: str, row: int) -> str:
    """The info line of one frame (also served at /lens/info for the browser's frame steps)."""
    from views.inspector.frame_layers import prepare_frame_layers

    result = ws.result(run_id)
    _checked_row(result, row)
    no_layers = layer_options([], 0.5, "turbo", "frame")
    return info_text_html(prepare_frame_layers(result, row, no_layers).info)


def info_of(ws: Workspace, run_id: str, row: float) -> str:
    """The info panel of candidate ``row`` (clamped to the run)."""
    if not run_id:
        return info_html("No run open.")
    result = result_of(ws, run_id)
    row = min(max(int(row), 0), int(result.candidates.frame_indices.size) - 1)
    return info_html(info_fragment(ws, run_id, row))


def legend_of(
    ws: Workspace, run_id: str, row: float, layers: list[str], opacity: float, cmap: str, scale: str
) -> Any:
    """The legend image of the chosen layers at candidate ``row`` (None without a run)."""
    from views.inspector.frame_layers import prepare_frame_layers

    if not run_id:
        return None
    result = result_of(ws, run_id)
    try:
        view = prepare_frame_layers(result, int(row), layer_options(layers, opacity, cmap, scale))
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    return view.legend


def open_view(
    ws: Workspace, run_id: str, row: int, layers: list[str], opacity: float, cmap: str, scale: str
) -> tuple[Any, ...]:
    """Every output that depends on the open run (:data:`VIEW_OUTPUTS`)."""
    from views.inspector import group_stepper, run_summary, timeline

    result = result_of(ws, run_id)
    n = int(result.candidates.frame_indices.size)
    row = min(max(int(row), 0), n - 1)
    table = group_stepper.prepare_group_table(result)
    first_group = result.groups.specs[0].group_index if result.groups.specs else None
    frames = json.dumps([int(f) for f in result.candidates.frame_indices])
    return (
        run_summary.prepare_summary(result),
        gr.update(maximum=n - 1, value=row),
        frames,
        frame_html(frame_url(run_id, row, layers, opacity, cmap, scale)),
        info_of(ws, run_id, row),
        legend_of(ws, run_id, row, layers, opacity, cmap, scale),
        timeline.prepare_timeline(result, cursor_frame_index=int(result.candidates.frame_indices[row])),
        gr.update(value=[list(r.values()) for r in table], headers=list(table[0]) if table else RUN_HEADERS),
        gr.update(choices=[s.group_index for s in result.groups.specs], value=first_group),
        group_stepper.prepare_readiness_plot(result, first_group) if first_group is not None else None,
        gr.update(value=ws.store.get_run(run_id).video_path if run_id else ""),
    )


def show_run(
    ws: Workspace,
    option_defaults: dict[str, Any],
    run_id: str,
    row: float,
    layers: list[str],
    opacity: float,
    cmap: str,
    scale: str,
) -> tuple[Any, ...]:
    """Show run ``run_id`` where its viewer was left last time (or at its first frame).

    Returns the view outputs, then the layers, opacity and colormap it was left with, then the
    run's value of each selection option (``option_defaults``: name → value when unset).
    """
    from backend.render import LAYER_NAMES

    if not run_id:
        return (gr.update(),) * (len(VIEW_OUTPUTS) + 3 + len(option_defaults))
    try:
        view = ws.store.load_view(run_id) or {}
        config = ws.store.get_run(run_id).config
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    layers = [x for x in view.get("layers", layers) if x in LAYER_NAMES]
    opacity, cmap = float(view.get("opacity", opacity)), view.get("colormap", cmap)
    # The run panel shows the open run's options, ready to be tweaked and run again.
    options = [gr.update(value=config.get(name, default)) for name, default in option_defaults.items()]
    outputs = open_view(ws, run_id, int(view.get("row", 0)), layers, opacity, cmap, scale)
    return (*outputs, layers, opacity, cmap, *options)


def step(ws: Workspace, run_id: str, row: float, action: str) -> int:
    """The candidate row after navigation ``action`` (views.inspector.navigation.ACTIONS)."""
    from views.inspector import navigation

    return navigation.navigate(result_of(ws, run_id), int(row), action)


def key_help() -> Any:
    """The key map, shown."""
    from views.inspector import navigation

    return gr.update(visible=True, value="\n".join(f"- `{k}` {d}" for k, d in navigation.KEY_MAP))


def jump(ws: Workspace, run_id: str, frame: Any) -> int:
    """The candidate row nearest frame ``frame`` (a timeline click)."""
    from views.inspector import navigation

    return navigation.row_for_frame(result_of(ws, run_id), float(frame or 0))


def pick_block(ws: Workspace, run_id: str, row: float, xy: str) -> str:
    """What the block at image pixel ``xy`` ("x,y") of candidate ``row`` is: bitcost, score, rank, fate."""
    from views.inspector.frame_layers import block_at

    try:
        x, y = (int(v) for v in xy.split(","))
    except ValueError as exc:
        raise gr.Error(f"bad block position {xy!r}") from exc
    b = block_at(result_of(ws, run_id), int(row), x, y)
    where = (
        f"canvas {b['canvas_index']} at patch ({b['packed_row']}, {b['packed_col']})"
        if b["kept"]
        else "not kept"
    )
    return (
        f"block ({b['block_row']}, {b['block_col']}) · bitcost {b['bitcost']} · score "
        f"{b['score']:.3f} · rank {b['rank']} · {where}"
    )


def show_group(ws: Workspace, run_id: str, group: Any) -> tuple[Any, Any]:
    """The readiness plot of ``group`` and its first candidate row (for the slider)."""
    from views.inspector import group_stepper

    if group is None or not run_id:
        return None, gr.update()
    result = result_of(ws, run_id)
    spec = next(s for s in result.groups.specs if s.group_index == int(group))
    return group_stepper.prepare_readiness_plot(result, int(group)), spec.start


# -- components ----------------------------------------------------------------------------------


@dataclass
class SharedControls:
    """The page's top: the open run's summary and the hidden controls the keys and clicks drive."""

    summary: Any
    run_id: Any
    frames: Any
    key_buttons: dict[str, Any]
    help_btn: Any
    jump_frame: Any
    jump_btn: Any
    block_xy: Any
    block_btn: Any


def build_shared_controls() -> SharedControls:
    """The summary line and the hidden row (``#hidden_controls``) holding the open run's id."""
    from views.inspector import navigation

    summary = gr.Markdown("", elem_id="summary")
    with gr.Row(elem_id="hidden_controls"):
        run_id = gr.Textbox(value="", elem_id="run_id", label="run id")
        frames = gr.Textbox(value="[]", elem_id="frames_json")
        key_buttons = {a: gr.Button(a, elem_id=f"k_{a}") for a in navigation.ACTIONS}
        help_btn = gr.Button("help", elem_id="k_help")
        jump_frame = gr.Textbox(elem_id="jump_frame")
        jump_btn = gr.Button("jump", elem_id="jump_btn")
        block_xy = gr.Textbox(elem_id="block_xy")
        block_btn = gr.Button("block", elem_id="block_btn")
    return SharedControls(
        summary, run_id, frames, key_buttons, help_btn, jump_frame, jump_btn, block_xy, block_btn
    )


@dataclass
class InspectTab:
    """The Inspect tab's components."""

    frame: Any
    info: Any
    slider: Any
    steps: dict[str, Any]
    block: Any
    layers: Any
    opacity: Any
    colormap: Any
    scale: Any
    legend: Any
    keys: Any
    plot: Any
    groups_table: Any
    group_pick: Any
    steps_plot: Any

    @property
    def view_controls(self) -> list[Any]:
        """The viewer's inputs: candidate row, layers, opacity, colormap, heatmap scale."""
        return [self.slider, self.layers, self.opacity, self.colormap, self.scale]


def build_inspect_tab(ws: Workspace, shared: SharedControls) -> InspectTab:
    """The viewer, its layer controls, the Export panel, the timeline and the group stepper."""
    from backend.render import DEFAULT_LAYERS, LAYER_LABELS, LAYER_NAMES
    from views.inspector.frame_layers import COLORMAPS, SCALES

    with gr.Row():
        with gr.Column(scale=3):
            frame = gr.HTML(frame_html(None), elem_id="frame")
            info = gr.HTML(info_html("No run open."), elem_id="frame_info")
            slider = gr.Slider(0, 1, value=0, step=1, label="Candidate", elem_id="frame_slider")
            with gr.Row(elem_id="step_buttons"):
                steps = {
                    a: gr.Button(label, elem_id=f"step_{a}", size="sm", min_width=40)
                    for a, label in STEP_BUTTONS
                }
            block = gr.Markdown("Click a block to see its bitcost, score and rank.", elem_id="block_info")
        with gr.Column(scale=2):
            layers = gr.CheckboxGroup(
                [(LAYER_LABELS[n], n) for n in LAYER_NAMES],
                value=list(DEFAULT_LAYERS),
                label="Layers",
                elem_id="layers",
            )
            opacity = gr.Slider(0, 1, value=0.5, step=0.05, label="Heatmap opacity", elem_id="opacity")
            colormap = gr.Dropdown(list(COLORMAPS), value="turbo", label="Colormap")
            scale = gr.Radio(list(SCALES), value="frame", label="Heatmap scale")
            legend = gr.Image(label="Legend", interactive=False, height=80, format="png")
            keys = gr.Markdown(visible=False, elem_id="key_map")
    build_export_panel(ws, shared.run_id, slider)
    plot = gr.Plot(elem_id="timeline", label="Timeline (click a frame to jump)")
    with gr.Row():
        groups_table = gr.Dataframe(label="Groups", interactive=False, elem_id="groups_table")
        with gr.Column():
            group_pick = gr.Dropdown([], label="Group", elem_id="group_pick")
            steps_plot = gr.Plot(label="Readiness trace", elem_id="readiness_plot")
    return InspectTab(
        frame=frame,
        info=info,
        slider=slider,
        steps=steps,
        block=block,
        layers=layers,
        opacity=opacity,
        colormap=colormap,
        scale=scale,
        legend=legend,
        keys=keys,
        plot=plot,
        groups_table=groups_table,
        group_pick=group_pick,
        steps_plot=steps_plot,
    )


def wire_inspect_tab(
    ws: Workspace, shared: SharedControls, tab: InspectTab, video_path: Any, option_controls: dict[str, Any]
) -> None:
    """Opening a run (which also fills the Run tab's ``video_path`` and ``option_controls``),
    frame steps, keys, timeline and frame clicks, and the group stepper."""
    rid = shared.run_id
    view_outputs = [
        shared.summary,
        tab.slider,
        shared.frames,
        tab.frame,
        tab.info,
        tab.legend,
        tab.plot,
        tab.groups_table,
        tab.group_pick,
        tab.steps_plot,
        video_path,
    ]
    defaults = {name: c.value for name, c in option_controls.items()}
    rid.change(
        lambda r, row, lay, op, cm, sc: show_run(ws, defaults, r, row, lay, op, cm, sc),
        [rid, *tab.view_controls],
        [*view_outputs, tab.layers, tab.opacity, tab.colormap, *option_controls.values()],
        api_name=False,
    )
    src_inputs = [tab.slider, rid, tab.layers, tab.opacity, tab.colormap, tab.scale, shared.frames]
    tab.slider.change(None, src_inputs, None, js=SRC_JS, api_name=False)
    for c in tab.view_controls[1:]:
        c.change(None, src_inputs, None, js=SRC_JS, api_name=False)
        c.change(
            lambda r, row, lay, op, cm, sc: legend_of(ws, r, row, lay, op, cm, sc),
            [rid, *tab.view_controls],
            tab.legend,
            api_name=False,
        )
    for action, button in [*shared.key_buttons.items(), *tab.steps.items()]:
        if action in STEP_JS:
            # One-frame steps and the ends need no server: the slider knows its range.
            button.click(None, tab.slider, tab.slider, js=STEP_JS[action], api_name=False)
        else:
            button.click(
                lambda r, row, a=action: step(ws, r, row, a), [rid, tab.slider], tab.slider, api_name=False
            )
    shared.help_btn.click(key_help, None, tab.keys, api_name=False)
    shared.jump_btn.click(lambda r, x: jump(ws, r, x), [rid, shared.jump_frame], tab.slider, api_name=False)
    shared.block_btn.click(
        lambda r, row, xy: pick_block(ws, r, row, xy),
        [rid, tab.slider, shared.block_xy],
        tab.block,
        api_name=False,
    )
    tab.group_pick.input(
        lambda r, g: show_group(ws, r, g), [rid, tab.group_pick], [tab.steps_plot, tab.slider], api_name=False
    )
