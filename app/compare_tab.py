"""Compare-codecs tab: stored or new comparisons in 2–4 synchronised panes with metric plots."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from app.browser_js import step_js

if TYPE_CHECKING:
    import app.workspace

SCALE_CHOICES = (
    ("per frame", "frame"),
    ("per video", "video"),
    ("across compared runs", "all"),
)
# Buttons the app's key handler presses while #compare_panes is on screen
# (views.inspector.navigation.ACTIONS).
KEY_BUTTONS: dict[str, str] = {
    a: f"cmp_{a}" for a in ("prev", "next", "prev_key", "next_key", "prev_group", "next_group", "home", "end")
}
STEP_LABELS = {
    "home": "first",
    "prev_group": "◀ group",
    "prev_key": "◀ key",
    "prev": "◀",
    "next": "▶",
    "next_key": "key ▶",
    "next_group": "group ▶",
    "end": "last",
}
# Hidden, not invisible: Gradio leaves visible=False components out of the page, and the
# key handler must be able to click them. The app's CSS hides the row too; this keeps the tab
# self-contained when mounted elsewhere.
CSS = "#compare_hidden { display: none !important; }"

STEP_JS = step_js("cmp_slider")

# The cursor moves in the browser: the figure carries the positions' frame indices in
# layout.meta.frames. Debounced so a relayout never delays the pane images while scrubbing.
CURSOR_JS = """
(pos) => {
  const gd = document.querySelector('#cmp_metrics .js-plotly-plot');
  if (!gd || !window.Plotly || !gd.layout || !gd.layout.shapes) return [];
  const frames = (gd.layout.meta && gd.layout.meta.frames) || [];
  if (!frames.length) return [];
  const f = frames[Math.max(0, Math.min(frames.length - 1, Math.round(pos)))];
  const i = gd.layout.shapes.findIndex((s) => s.name === 'cursor');
  clearTimeout(window.__cmpCursorTimer);
  window.__cmpCursorTimer = setTimeout(() => {
    if (i >= 0) window.Plotly.relayout(gd, {[`shapes[${i}].x0`]: f, [`shapes[${i}].x1`]: f});
  }, 200);
  return [];
}
"""

# A click on the metric plot jumps every pane to that frame. Gradio replaces the plotly div on
# every update, so a MutationObserver re-attaches the handler.
PLOT_CLICK_JS = """
const attach = () => {
  const gd = document.querySelector('#cmp_metrics .js-plotly-plot');
  if (!gd || gd.__cmpClick || !gd.on) return;
  gd.__cmpClick = true;
  gd.on('plotly_click', (ev) => {
    if (!ev.points.length) return;
    const box = document.querySelector('#cmp_jump_frame textarea, #cmp_jump_frame input');
    if (!box) return;
    box.value = String(Math.round(ev.points[0].x));
    box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(() => document.querySelector('#cmp_jump_btn')?.click(), 50);
  });
};
new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
attach();
"""


@dataclass
class _Open:
    """A comparison opened for viewing: its tables, runs, slider positions and shared heatmap runs."""

    stored: Any
    results: list[Any]
    positions: np.ndarray
    heatmap_runs: dict[str, tuple[Any, ...]] = field(default_factory=dict)


class _Comparisons:
    """The few comparisons the tab has open, by id (each holds memory-mapped decodes)."""

    def __init__(self, ws: app.workspace.Workspace, keep: int = 2) -> None:
        self._ws = ws
        self._keep = keep
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, comparison_id: str) -> _Open:
        from backend.compare import load_comparison
        from backend.runs import open_run
        from views.compare import prepare_positions

        with self._lock:
            hit = self._open.get(comparison_id)
            if hit is not None:
                self._open.move_to_end(comparison_id)
                return hit
            stored = load_comparison(self._ws.store, comparison_id)
            # Not through ws.result: four runs at once would evict the inspector's, and the
            # decodes stay memory-mapped here.
            results = [open_run(self._ws.store, rid) for rid in stored.run_ids]
            opened = _Open(stored=stored, results=results, positions=prepare_positions(results))
            self._open[comparison_id] = opened
            while len(self._open) > self._keep:
                self._open.popitem(last=False)
            return opened

    def heatmap_runs(self, opened: _Open, scale: str) -> tuple[Any, ...]:
        from views.compare import prepare_heatmap_runs

        with self._lock:
            if scale not in opened.heatmap_runs:
                opened.heatmap_runs[scale] = prepare_heatmap_runs(opened.results, scale)
            return opened.heatmap_runs[scale]


def _layers(layers: list[str] | None, opacity: float, colormap: str, scale: str) -> Any:
    from backend.render import layer_options

    # "all" (one scale across the compared runs) is applied to the maps before drawing.
    return layer_options(
        layers or [], opacity=opacity, colormap=colormap, scale="frame" if scale == "all" else scale
    )


def build_compare_tab(ws: app.workspace.Workspace) -> None:
    """Create the comparison components inside the caller's current ``gr.Tab`` context.

    Pick a stored comparison (or run a new one on a path inside ``ws``'s input folders); up to
    four panes show the same frame with the same layers; one slider, the step buttons and the
    app's keys (hidden buttons ``cmp_*`` in ``#compare_hidden``) drive them all; a difference
    mode tints blocks kept by the reference pane only and by this pane only; per-frame metric
    plots follow the panes with a cursor and jump them on click.
    """
    import gradio as gr

    from backend.compare import CODECS, FALLBACK_SCORES, SPEEDS, CompareConfig, compare
    from backend.errors import CodecLensError
    from backend.pipeline import SelectionOptions
    from backend.render import DEFAULT_LAYERS, LAYER_LABELS, LAYER_NAMES
    from views import compare as cv
    from views.inspector.frame_layers import COLORMAPS

    opened = _Comparisons(ws)

    def choices() -> list[tuple[str, str]]:
        return cv.prepare_comparison_choices(ws.store.list_comparisons())

    def get(cid: str) -> _Open:
        if not cid:
            raise gr.Error("No comparison is open. Pick a stored one or run a new one.")
        try:
            return opened.get(cid)
        except CodecLensError as exc:
            raise gr.Error(exc.one_line()) from exc

    def panes(cid: str, pos: float, layers, opacity, cmap, scale, diff: bool, ref: Any) -> list[Any]:
        """Images and captions of the four pane slots (unused slots unchanged)."""
        if not cid:
            return [gr.update()] * (2 * cv.MAX_PANES)
        o = get(cid)
        n = len(o.results)
        position = min(max(int(pos or 0), 0), int(o.positions.size) - 1)
        frame_index = int(o.positions[position])
        try:
            opts = _layers(layers, opacity, cmap, scale)
            runs = opened.heatmap_runs(o, scale) if opts.heatmap and scale == "all" else None
            reference = int(ref) if diff and ref not in (None, "") else None
            views = [
                cv.prepare_pane(
                    o.results,
                    i,
                    frame_index,
                    layers=opts,
                    scale=scale,
                    heatmap_runs=runs,
                    difference_with=reference,
                    labels=o.stored.labels,
                )
                for i in range(n)
            ]
        except ValueError as exc:
            raise gr.Error(str(exc)) from exc
        images = [v.image for v in views] + [gr.update()] * (cv.MAX_PANES - n)
        captions = [v.caption for v in views] + [gr.update()] * (cv.MAX_PANES - n)
        return images + captions

    def legend(cid: str, layers, cmap: str, scale: str) -> Any:
        if not cid or "heatmap" not in (layers or []):
            return gr.update(visible=False)
        o = get(cid)
        high = "; ".join(
            f"{label}: {cv.heatmap_range(o.results, i, scale)}" for i, label in enumerate(o.stored.labels)
        )
        return gr.update(
            value=cv.prepare_legend(cmap, "0", "1"), label=f"Heatmap scale — {high}", visible=True
        )

    def load(cid: str, layers, opacity, cmap, scale, diff, ref):
        """Every output that depends on the open comparison."""
        if not cid:
            empty = [gr.update()] * (2 * cv.MAX_PANES)
            return [
                gr.update(),
                gr.update(),
                *[gr.update()] * cv.MAX_PANES,
                *empty,
                None,
                None,
                None,
                None,
                None,
            ]
        o = get(cid)
        n = len(o.results)
        labels = o.stored.labels
        columns = [gr.update(visible=i < n) for i in range(cv.MAX_PANES)]
        vh, vr = cv.prepare_variant_table(o.stored)
        ph, pr = cv.prepare_pair_table(o.stored)
        ref_choices = [(label, str(i)) for i, label in enumerate(labels)]
        ref_value = ref if ref in {c[1] for c in ref_choices} else "0"
        rendered = panes(cid, 0, layers, opacity, cmap, scale, diff, ref_value)
        images = [
            gr.update(value=img, label=labels[i]) if i < n else gr.update()
            for i, img in enumerate(rendered[: cv.MAX_PANES])
        ]
        return [
            cv.prepare_settings_markdown(o.stored),
            gr.update(maximum=max(1, int(o.positions.size) - 1), value=0),
            *columns,
            *images,
            *rendered[cv.MAX_PANES :],
            cv.prepare_metric_figure(o.stored, o.positions, cursor_frame_index=int(o.positions[0])),
            gr.update(value=vr, headers=vh),
            gr.update(value=pr, headers=ph),
            gr.update(choices=ref_choices, value=ref_value),
            legend(cid, layers, cmap, scale),
        ]

    def step(cid: str, pos: float, action: str) -> int:
        if not cid:
            return int(pos or 0)
        o = get(cid)
        return cv.navigate_position(o.results, o.positions, int(pos or 0), action)

    def jump(cid: str, frame: str, pos: float) -> int:
        if not cid or not str(frame or "").strip():
            return int(pos or 0)
        try:
            return cv.position_of_frame(get(cid).positions, float(frame))
        except ValueError as exc:
            raise gr.Error(f"Invalid frame ({frame!r}). Supported values are frame numbers.") from exc

    def run_new(
        path,
        codecs,
        gop,
        bframes,
        crf264,
        crf265,
        crfvp9,
        crfav1,
        bitrate,
        speed,
        max_frames,
        max_side,
        fallback,
        progress=gr.Progress(),  # noqa: B008 - Gradio injects the tracker
    ):
        try:
            source = ws.input_path(str(path or ""))
            config = CompareConfig(
                codecs=tuple(c for c in CODECS if c in (codecs or [])),
                gop=int(gop),
                bframes=int(bframes),
                crf_h264=int(crf264),
                crf_hevc=int(crf265),
                crf_vp9=int(crfvp9),
                crf_av1=int(crfav1),
                bitrate_kbps=int(bitrate or 0),
                speed=speed,
                max_frames=int(max_frames or 0),
                max_side=int(max_side or 0),
                fallback_score=fallback,
            )
            result = compare(
                source,
                ws.store,
                config=config,
                options=SelectionOptions(frame_sampling_mode="all_frames"),
                on_progress=lambda stage, fraction: progress(fraction, desc=stage),
            )
        except CodecLensError as exc:
            raise gr.Error(exc.one_line()) from exc
        except ValueError as exc:
            raise gr.Error(str(exc)) from exc
        status = (
            f"Comparison `{result.comparison_id}`: {len(result.variants)} variants of {source.name} in "
            f"{result.timings_secs['total']:.1f} s."
        )
        return gr.update(choices=choices(), value=result.comparison_id), status

    existing = choices()
    gr.HTML(
        "",
        html_template=f"<style>{CSS}</style>",
        js_on_load=PLOT_CLICK_JS,
        elem_id="cmp_setup",
        padding=False,
    )
    gr.Markdown(
        "Encode one source in H.264, HEVC, VP9 and AV1 with matched GOP and B-frames, select on each and "
        "compare what they keep. AV1 has no bitcost: its variant is selected with the fallback signal. "
        "Keys and the step buttons move every pane."
    )
    with gr.Row():
        pick = gr.Dropdown(
            existing,
            value=existing[0][1] if existing else None,
            label="Stored comparison",
            elem_id="cmp_pick",
            scale=4,
        )
        refresh = gr.Button("Refresh", elem_id="cmp_refresh", scale=1)
    with gr.Accordion("New comparison", open=not existing):
        with gr.Row():
            path = gr.Textbox(label="Video path (inside the allowed folders)", elem_id="cmp_path", scale=3)
            codecs = gr.CheckboxGroup(list(CODECS), value=list(CODECS), label="Codecs", elem_id="cmp_codecs")
        defaults = CompareConfig()
        with gr.Row():
            gop = gr.Number(defaults.gop, label="GOP (frames)", precision=0, minimum=1)
            bframes = gr.Number(defaults.bframes, label="B-frames", precision=0, minimum=0, maximum=16)
            crfs = [
                gr.Number(defaults.crf(c), label=f"CRF {c}", precision=0, minimum=0, maximum=63)
                for c in CODECS
            ]
            bitrate = gr.Number(0, label="Target kb/s (0: CRF)", precision=0, minimum=0)
        with gr.Row():
            speed = gr.Radio(list(SPEEDS), value=defaults.speed, label="Speed")
            max_frames = gr.Number(0, label="Max frames (0: all)", precision=0, minimum=0)
            max_side = gr.Number(0, label="Max side px (0: source)", precision=0, minimum=0)
            fallback = gr.Dropdown(list(FALLBACK_SCORES), value=defaults.fallback_score, label="AV1 signal")
        run_btn = gr.Button("Encode, select and compare", variant="primary", elem_id="cmp_run")
        status = gr.Markdown("", elem_id="cmp_status")
    settings_md = gr.Markdown("", elem_id="cmp_settings")
    with gr.Row():
        layers = gr.CheckboxGroup(
            [(LAYER_LABELS[n], n) for n in LAYER_NAMES],
            value=list(DEFAULT_LAYERS),
            label="Layers",
            elem_id="cmp_layers",
        )
        with gr.Column():
            opacity = gr.Slider(0, 1, value=0.5, step=0.05, label="Heatmap opacity", elem_id="cmp_opacity")
            colormap = gr.Dropdown(list(COLORMAPS), value="turbo", label="Colormap", elem_id="cmp_colormap")
        scale = gr.Radio(list(SCALE_CHOICES), value="frame", label="Heatmap scale", elem_id="cmp_scale")
        with gr.Column():
            diff = gr.Checkbox(False, label="Difference vs reference pane", elem_id="cmp_diff")
            ref = gr.Dropdown([], label="Reference pane (A)", elem_id="cmp_diff_ref")
    gr.Markdown(
        f"Difference mode: <span style='color:rgb{cv.A_ONLY_RGB}'>■</span> kept only by the reference pane, "
        f"<span style='color:rgb{cv.B_ONLY_RGB}'>■</span> kept only by this pane (anchors count whole)."
    )
    legend_img = gr.Image(
        label="Heatmap scale", interactive=False, height=70, format="png", elem_id="cmp_legend"
    )
    pane_images, pane_infos, pane_columns = [], [], []
    with gr.Row(elem_id="compare_panes"):
        for i in range(cv.MAX_PANES):
            with gr.Column(visible=i < 2, min_width=240) as column:
                pane_images.append(
                    gr.Image(format="jpeg", label=f"pane {i + 1}", interactive=False, elem_id=f"cmp_pane_{i}")
                )
                pane_infos.append(gr.Markdown("", elem_id=f"cmp_info_{i}"))
            pane_columns.append(column)
    slider = gr.Slider(0, 1, value=0, step=1, label="Frame position (all panes)", elem_id="cmp_slider")
    with gr.Row(elem_id="cmp_steps"):
        visible_steps = {
            a: gr.Button(label, elem_id=f"cmp_step_{a}", size="sm", min_width=60)
            for a, label in STEP_LABELS.items()
        }
    plot = gr.Plot(elem_id="cmp_metrics", label="Per-frame metrics (click a frame to jump)")
    with gr.Row():
        variants_table = gr.Dataframe(label="Variants", interactive=False, elem_id="cmp_variants")
        pairs_table = gr.Dataframe(label="Pairs", interactive=False, elem_id="cmp_pairs")
    with gr.Row(elem_id="compare_hidden"):
        cid = gr.Textbox(value=pick.value or "", elem_id="cmp_id", label="comparison id")
        key_buttons = {a: gr.Button(a, elem_id=elem) for a, elem in KEY_BUTTONS.items()}
        jump_frame = gr.Textbox(elem_id="cmp_jump_frame")
        jump_btn = gr.Button("jump", elem_id="cmp_jump_btn")
        loaded = gr.Textbox("", elem_id="cmp_loaded")

    view = [layers, opacity, colormap, scale, diff, ref]
    load_outputs = [
        settings_md,
        slider,
        *pane_columns,
        *pane_images,
        *pane_infos,
        plot,
        variants_table,
        pairs_table,
        ref,
        legend_img,
    ]
    pick.change(lambda v: v or "", pick, cid, api_name=False)
    cid.change(load, [cid, *view], load_outputs, api_name=False)
    refresh.click(lambda: gr.update(choices=choices()), None, pick, api_name=False)
    run_btn.click(
        run_new,
        [path, codecs, gop, bframes, *crfs, bitrate, speed, max_frames, max_side, fallback],
        [pick, status],
        api_name=False,
    )
    render_inputs = [cid, slider, *view]
    slider.change(panes, render_inputs, [*pane_images, *pane_infos], api_name=False)
    slider.change(None, slider, None, js=CURSOR_JS, api_name=False)
    for control in view:
        control.change(panes, render_inputs, [*pane_images, *pane_infos], api_name=False)
    for control in (layers, colormap, scale):
        control.change(legend, [cid, layers, colormap, scale], legend_img, api_name=False)
    for action in KEY_BUTTONS:
        for button in (key_buttons[action], visible_steps[action]):
            if action in STEP_JS:
                button.click(None, slider, slider, js=STEP_JS[action], api_name=False)
            else:
                button.click(lambda c, p, a=action: step(c, p, a), [cid, slider], slider, api_name=False)
    jump_btn.click(jump, [cid, jump_frame, slider], slider, api_name=False)

    # Page load: fresh choices, then open the picked comparison (a new nonce fires the change).
    gr.on(
        triggers=None,
        fn=lambda: (gr.update(choices=choices()), str(time.time_ns())),
        inputs=None,
        outputs=[pick, loaded],
        api_name=False,
    )
    loaded.change(load, [cid, *view], load_outputs, api_name=False)
