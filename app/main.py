"""Gradio app composition: the inspector over one finished selection run."""

import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE_VIDEO = REPO / "sample_videos" / "flower_timelapse_cc0.mp4"

LAYER_CHOICES = (
    "heatmap",
    "patch grid",
    "block grid",
    "codec grid",
    "kept",
    "lost",
    "anchor badge",
    "bad frames",
)
DEFAULT_LAYERS = ["kept", "anchor badge", "bad frames"]

# Keys click hidden buttons; text inputs keep their keys. Plot clicks write the frame into
# a hidden textbox and press a hidden button. Gradio replaces the plotly div on every
# update, so a MutationObserver re-attaches the click handler.
KEY_JS = """
() => {
  const press = (id) => document.querySelector('#' + id)?.click();
  document.addEventListener('keydown', (e) => {
    const tag = (e.target && e.target.tagName) || '';
    if (['INPUT', 'TEXTAREA', 'SELECT'].includes(tag) && e.target.type !== 'range') return;
    const map = {
      ArrowLeft: e.shiftKey ? 'k_prev_key' : 'k_prev',
      ArrowRight: e.shiftKey ? 'k_next_key' : 'k_next',
      ',': 'k_prev', '.': 'k_next', '[': 'k_prev_group', ']': 'k_next_group',
      Home: 'k_home', End: 'k_end', '?': 'k_help',
    };
    const id = map[e.key];
    if (!id) return;
    e.preventDefault();
    e.stopPropagation();
    press(id);
  }, true);
  const attach = () => {
    const gd = document.querySelector('#timeline .js-plotly-plot');
    if (!gd || gd.__lensClick || !gd.on) return;
    gd.__lensClick = true;
    gd.on('plotly_click', (ev) => {
      const box = document.querySelector('#jump_frame textarea, #jump_frame input');
      if (!box || !ev.points.length) return;
      box.value = String(Math.round(ev.points[0].x));
      box.dispatchEvent(new Event('input', {bubbles: true}));
      setTimeout(() => press('jump_btn'), 50);
    });
  };
  new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
  attach();
}
"""


CURSOR_JS = """
(row) => {
  const frames = FRAMES;
  const gd = document.querySelector('#timeline .js-plotly-plot');
  if (!gd || !window.Plotly || !gd.layout || !gd.layout.shapes) return [];
  const i = gd.layout.shapes.findIndex((s) => s.name === 'cursor');
  const f = frames[Math.max(0, Math.min(frames.length - 1, Math.round(row)))];
  // A relayout redraws the plot (~60 ms on the main thread): debounce it so it never
  // delays the frame image while scrubbing.
  clearTimeout(window.__lensCursorTimer);
  window.__lensCursorTimer = setTimeout(() => {
    if (i >= 0) window.Plotly.relayout(gd, {[`shapes[${i}].x0`]: f, [`shapes[${i}].x1`]: f});
  }, 250);
  return [];
}
"""

# Hidden, not invisible: Gradio leaves visible=False components out of the page, and the
# key handler must be able to click them.
CSS = "#hidden_controls { display: none !important; }"
LAUNCH_KWARGS = {"js": KEY_JS, "css": CSS}


def _layer_options(layers: list[str], opacity: float, colormap: str, scale: str) -> Any:
    from views.frame_layers import LayerOptions

    chosen = set(layers or [])
    return LayerOptions(
        heatmap="heatmap" in chosen,
        opacity=float(opacity),
        colormap=colormap,
        scale=scale,
        patch_grid="patch grid" in chosen,
        block_grid="block grid" in chosen,
        codec_grid="codec grid" in chosen,
        kept="kept" in chosen,
        lost="lost" in chosen,
        anchor_badge="anchor badge" in chosen,
        bad_frames="bad frames" in chosen,
    )


def _info_markdown(info: dict[str, Any]) -> str:
    pts = "–" if info["pts_secs"] is None else f"{info['pts_secs']:.3f} s"
    moved = "" if info["moved_from"] is None else f" · moved from keyframe {info['moved_from']}"
    bad = "" if not info["bad_reason"] else f" · **bad frame: {info['bad_reason']}**"
    role = "anchor (whole frame kept)" if info["is_anchor"] else f"{info['kept_blocks']} kept blocks"
    return (
        f"candidate {info['candidate_row']} · frame {info['frame_index']} · {pts} · {info['pict_type']} · "
        f"{info['size_bytes']} bytes · group {info['group_index']} · {role}{moved}{bad}"
    )


def build_app(video: str | Path, options: Any = None):
    """Blocks for one finished run of ``video`` (``options``: SelectionOptions, default clean)."""
    import gradio as gr

    from backend.errors import CodecLensError
    from backend.pipeline import SelectionOptions, run
    from views import group_stepper, navigation, run_summary, timeline
    from views.frame_layers import COLORMAPS, SCALES, block_at, prepare_frame_layers

    try:
        result = run(video, options=options or SelectionOptions(profile="clean"))
    except CodecLensError as exc:
        raise SystemExit(f"codec-lens: error: {exc.one_line()}") from exc
    n = int(result.candidates.frame_indices.size)

    def render(row: float, layers: list[str], opacity: float, colormap: str, scale: str):
        try:
            view = prepare_frame_layers(result, int(row), _layer_options(layers, opacity, colormap, scale))
        except ValueError as exc:
            raise gr.Error(str(exc)) from exc
        return view.image, _info_markdown(view.info), view.legend

    def plot_cursor(row: float):
        return timeline.prepare_timeline(
            result, cursor_frame_index=int(result.candidates.frame_indices[int(row)])
        )

    first_image, first_info, first_legend = render(0, DEFAULT_LAYERS, 0.5, "turbo", "frame")
    with gr.Blocks(title="Codec Lens") as demo:
        gr.Markdown("# Codec Lens\nWhat the codec-native selector kept, and why. Press `?` for keys.")
        gr.Markdown(run_summary.prepare_summary(result), elem_id="summary")
        with gr.Row():
            with gr.Column(scale=3):
                frame = gr.Image(
                    value=first_image, format="jpeg", label="Frame", elem_id="frame", interactive=False
                )
                info = gr.Markdown(first_info, elem_id="frame_info")
                slider = gr.Slider(0, n - 1, value=0, step=1, label="Candidate", elem_id="frame_slider")
                block = gr.Markdown("Click a block to see its bitcost, score and rank.", elem_id="block_info")
            with gr.Column(scale=2):
                layers = gr.CheckboxGroup(
                    list(LAYER_CHOICES), value=DEFAULT_LAYERS, label="Layers", elem_id="layers"
                )
                opacity = gr.Slider(0, 1, value=0.5, step=0.05, label="Heatmap opacity", elem_id="opacity")
                colormap = gr.Dropdown(list(COLORMAPS), value="turbo", label="Colormap")
                scale = gr.Radio(list(SCALES), value="frame", label="Heatmap scale")
                legend = gr.Image(value=first_legend, label="Legend", interactive=False, height=80)
                keys = gr.Markdown(visible=False, elem_id="key_map")
        gr.Plot(value=plot_cursor(0), elem_id="timeline", label="Timeline (click a frame to jump)")
        with gr.Row(elem_id="hidden_controls"):
            buttons = {a: gr.Button(a, elem_id=f"k_{a}") for a in navigation.ACTIONS}
            help_btn = gr.Button("help", elem_id="k_help")
            jump_frame = gr.Textbox(elem_id="jump_frame")
            jump_btn = gr.Button("jump", elem_id="jump_btn")
        with gr.Row():
            table = group_stepper.prepare_group_table(result)
            gr.Dataframe(
                value=[list(r.values()) for r in table],
                headers=list(table[0]) if table else None,
                label="Groups",
                interactive=False,
            )
            with gr.Column():
                group_pick = gr.Dropdown(
                    [s.group_index for s in result.groups.specs],
                    label="Group",
                    value=result.groups.specs[0].group_index if result.groups.specs else None,
                )
                steps_plot = gr.Plot(label="Readiness trace")
        gr.Gallery(value=run_summary.prepare_gallery(result), label="Canvases", columns=4, format="jpeg")

        controls = [slider, layers, opacity, colormap, scale]
        # Stepping frames re-renders the frame only; the legend changes with the layer controls.
        slider.change(lambda *v: render(*v)[:2], controls, [frame, info], api_name=False)
        for c in controls[1:]:
            c.change(render, controls, [frame, info, legend], api_name=False)
        # The cursor moves in the browser: re-sending the whole figure per frame costs ~0.3 s.
        frames_js = json.dumps([int(f) for f in result.candidates.frame_indices])
        slider.change(None, slider, None, js=CURSOR_JS.replace("FRAMES", frames_js), api_name=False)
        for action, button in buttons.items():
            button.click(
                lambda r, a=action: navigation.navigate(result, int(r), a), slider, slider, api_name=False
            )
        help_btn.click(
            lambda: gr.update(visible=True, value="\n".join(f"- `{k}` {d}" for k, d in navigation.KEY_MAP)),
            None,
            keys,
            api_name=False,
        )
        jump_btn.click(
            lambda x: navigation.row_for_frame(result, float(x or 0)), jump_frame, slider, api_name=False
        )

        def pick_block(row: float, evt: gr.SelectData) -> str:
            x, y = evt.index
            b = block_at(result, int(row), int(x), int(y))
            where = (
                f"canvas {b['canvas_index']} at patch ({b['packed_row']}, {b['packed_col']})"
                if b["kept"]
                else "not kept"
            )
            return (
                f"block ({b['block_row']}, {b['block_col']}) · bitcost {b['bitcost']} · score "
                f"{b['score']:.3f} · rank {b['rank']} · {where}"
            )

        frame.select(pick_block, slider, block, api_name=False)

        def show_group(g: Any):
            if g is None:
                return None, gr.update()
            spec = next(s for s in result.groups.specs if s.group_index == int(g))
            return group_stepper.prepare_readiness_plot(result, int(g)), spec.start

        group_pick.change(show_group, group_pick, [steps_plot, slider], api_name=False)
        demo.load(
            lambda: group_stepper.prepare_readiness_plot(result, result.groups.specs[0].group_index),
            None,
            steps_plot,
            api_name=False,
        )
    return demo


def launch(*, video: str | None, host: str, port: int) -> int:
    """Build and serve the app (blocks until interrupted)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    demo = build_app(video or SAMPLE_VIDEO)
    demo.launch(server_name=host, server_port=port, share=False, **LAUNCH_KWARGS)
    return 0
