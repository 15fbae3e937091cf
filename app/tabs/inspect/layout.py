"""Inspect tab layout: its components, built into the page and handed to the wiring as typed records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import gradio as gr

from app.tabs.export_panel import build_export_panel
from app.tabs.inspect.coverage_panel import build_coverage_panel
from app.tabs.inspect.fragments import TOOLS_HTML, frame_html, groups_table_html, info_html, key_map_html
from app.tabs.inspect.live import LIVE_OPTIONS
from app.tabs.inspect.routes import DEFAULT_HEAT
from app.tabs.option_form import OptionControl, option_controls

if TYPE_CHECKING:
    from app.workspace import Workspace

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
HEAT_CHOICES = (("2×2-block score (ranked)", "block"), ("signal per codec cell", "cell"))
PLOTS = ("timeline", "signal_plots", "readiness_plot")
"""The inspector's plots (each a view output and its gr.Plot's elem_id). The server sends each
figure as JSON text to a hidden box (``#<name>_fig``) and the page draws it (inspect_plot.js): Gradio
6 remounts a gr.Plot on every new value and draws it twice (two Plotly.newPlot plus two resizes:
Plotly ran 257 ms per live re-selection in a CPU profile, 100-150 ms since), while Plotly.react on
the same div draws once and keeps the div (its click handler stays attached)."""
PLOT_HEIGHT_PX = 450
"""The height a figure without its own is drawn at (Plotly's default; inspect_plot.js)."""
LATER_OUTPUTS = ("signal_plots",)
"""The plots below the viewer: the page draws them once the frame shows (inspect_plot.js)."""


@dataclass
class SharedControls:
    """The page's top: the open run's summary and the hidden controls the keys and clicks drive."""

    summary: gr.Markdown
    run_id: gr.Textbox
    frames: gr.Textbox
    groups: gr.Textbox
    follow_row: gr.Textbox
    shown_run: gr.Textbox
    key_buttons: dict[str, gr.Button]
    run_options: gr.Textbox
    figures: dict[str, gr.Textbox]
    """The hidden boxes the inspector's figures arrive in (view output → box)."""
    open_btn: gr.Button
    """Pressed by the page when run_id names a run the viewer does not show (inspect_open_if_new.js)."""
    live_error: gr.Textbox
    """Where the page puts an error of the re-selection route (inspect_live.js) for the server to show."""


def hidden_box(value: str, elem_id: str, *, label: str | None = None) -> gr.Textbox:
    """A hidden one-line text box the page and the server pass a value through. One line: a
    multi-line box measures its text to fit its height on every change, a forced layout (19 ms of
    page script per live re-selection in a sampled profile, the figure boxes' JSON mostly)."""
    return gr.Textbox(value=value, elem_id=elem_id, label=label, lines=1, max_lines=1)


def build_shared_controls() -> SharedControls:
    """The summary line and the hidden row (``#hidden_controls``) holding the open run's id."""
    from views.inspector import navigation

    summary = gr.Markdown("", elem_id="summary")
    with gr.Row(elem_id="hidden_controls"):
        run_id = hidden_box("", "run_id", label="run id")
        # The candidates' frame indices and keyframe rows, the group spans: the page navigates
        # with them itself (page.js, window.__lens.target).
        frames = hidden_box("[]", "frames_json")
        groups = hidden_box("[]", "groups_json")
        # "row n": the viewer entered another group (inspect_src.js); n makes every entry a change.
        follow_row = hidden_box("", "follow_row")
        shown_run = hidden_box("", "shown_run")
        key_buttons = {a: gr.Button(a, elem_id=f"k_{a}") for a in navigation.ACTIONS}
        # The open run's option values for the Run tab's controls, as one JSON text that the page
        # spreads over them (run_apply_options.js): see app.tabs.inspect.wiring.
        run_options = hidden_box("", "run_options")
        figures = {name: hidden_box("", f"{name}_fig") for name in PLOTS}
        open_btn = gr.Button("open", elem_id="open_run_btn")
        live_error = hidden_box("", "live_error")
    return SharedControls(
        summary,
        run_id,
        frames,
        groups,
        follow_row,
        shown_run,
        key_buttons,
        run_options,
        figures,
        open_btn,
        live_error,
    )


@dataclass
class InspectTab:
    """The Inspect tab's components."""

    frame: gr.HTML
    info: gr.HTML
    slider: gr.Slider
    steps: dict[str, gr.Button]
    block: gr.HTML
    pixel: gr.HTML
    colour_legend: gr.HTML
    heat_legend: gr.HTML
    layers: gr.CheckboxGroup
    codec: gr.CheckboxGroup
    heat: gr.Radio
    opacity: gr.Slider
    colormap: gr.Dropdown
    scale: gr.Radio
    live: dict[str, OptionControl]
    plot: gr.Plot
    signal_plot: gr.Plot
    groups_table: gr.HTML
    group_pick: gr.Dropdown
    steps_plot: gr.Plot

    @property
    def view_controls(self) -> list[gr.components.Component]:
        """The viewer's inputs: candidate row, layers, opacity, colormap, heatmap scale, heat source."""
        return [self.slider, self.layers, self.opacity, self.colormap, self.scale, self.heat]


def _build_viewer() -> tuple[gr.HTML, gr.HTML, gr.Slider, dict[str, gr.Button]]:
    """Left column: tools, the frame, its info line, the slider and the step buttons."""
    gr.HTML(TOOLS_HTML, elem_id="frame_tools_box", padding=False)
    frame = gr.HTML(frame_html(None), elem_id="frame", padding=False)
    info = gr.HTML(info_html("No run open."), elem_id="frame_info", padding=False)
    slider = gr.Slider(0, 1, value=0, step=1, label="Candidate", elem_id="frame_slider")
    with gr.Row(elem_id="step_buttons"):
        steps = {
            a: gr.Button(label, elem_id=f"step_{a}", size="sm", min_width=40) for a, label in STEP_BUTTONS
        }
    return frame, info, slider, steps


def build_inspect_tab(ws: Workspace, shared: SharedControls) -> InspectTab:
    """The viewer and its readouts, the layer controls, live re-selection, the Export panel, the
    per-frame plots, the timeline and the group stepper."""
    from backend.render import DEFAULT_LAYERS, LAYER_LABELS, LAYER_NAMES
    from views.inspector.codec_layers import CODEC_LAYER_LABELS, CODEC_LAYERS
    from views.inspector.frame_layers import COLORMAPS, SCALES

    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            frame, info, slider, steps = _build_viewer()
        with gr.Column(scale=2, elem_id="readout_col"):
            block = gr.HTML(
                "Hover a block for its signal, score and rank; click to pin it.", elem_id="block_info"
            )
            pixel = gr.HTML("", elem_id="pixel_info", padding=False)
            gr.HTML(key_map_html(), elem_id="key_map")
            colour_legend = gr.HTML("", elem_id="colour_legend", padding=False)
            layers = gr.CheckboxGroup(
                [(LAYER_LABELS[n], n) for n in LAYER_NAMES],
                value=list(DEFAULT_LAYERS),
                label="Layers",
                elem_id="layers",
            )
            codec = gr.CheckboxGroup(
                [(CODEC_LAYER_LABELS[n], n) for n in CODEC_LAYERS],
                value=[],
                label="Codec layers (decoded once per run in a worker)",
                elem_id="codec_layers",
            )
            with gr.Row():
                heat = gr.Radio(list(HEAT_CHOICES), value=DEFAULT_HEAT, label="Heatmap shows", elem_id="heat")
                scale = gr.Radio(list(SCALES), value="frame", label="Heatmap scale", elem_id="scale")
            heat_legend = gr.HTML("", elem_id="heat_legend", padding=False)
            with gr.Row():
                opacity = gr.Slider(0, 1, value=0.5, step=0.05, label="Heatmap opacity", elem_id="opacity")
                colormap = gr.Dropdown(list(COLORMAPS), value="turbo", label="Colormap", elem_id="colormap")
            with gr.Accordion(
                "Re-select live: token budget, grouping and selection options", open=False, elem_id="live_box"
            ):
                gr.Markdown(
                    "A change re-selects the open run from its cached decode (nothing decodes). "
                    "Token budget 0 keeps the selector's own budget; `codec-lens sweep` tabulates many."
                )
                with gr.Row(equal_height=False):
                    live = option_controls(names=LIVE_OPTIONS, prefix="live_")
    build_export_panel(ws, shared.run_id, slider)
    build_coverage_panel(ws, shared.run_id)
    signal_plot = gr.Plot(elem_id="signal_plots", label="Per-frame signals (click to jump)")
    plot = gr.Plot(elem_id="timeline", label="Timeline (click anywhere to jump)")
    with gr.Row():
        with gr.Column():
            gr.Markdown("**Groups**")
            groups_table = gr.HTML(groups_table_html([]), elem_id="groups_table", padding=False)
        with gr.Column():
            # Its choices follow the open run in the page (a live re-selection sets them without a
            # server event), so the server cannot check a pick against them: show_group does.
            group_pick = gr.Dropdown([], label="Group", elem_id="group_pick", allow_custom_value=True)
            steps_plot = gr.Plot(label="Readiness trace", elem_id="readiness_plot")
    return InspectTab(
        frame=frame,
        info=info,
        slider=slider,
        steps=steps,
        block=block,
        pixel=pixel,
        colour_legend=colour_legend,
        heat_legend=heat_legend,
        layers=layers,
        codec=codec,
        heat=heat,
        opacity=opacity,
        colormap=colormap,
        scale=scale,
        live=live,
        plot=plot,
        signal_plot=signal_plot,
        groups_table=groups_table,
        group_pick=group_pick,
        steps_plot=steps_plot,
    )
