"""Compare tab: comparisons of codecs, or of selectors on one video, in 2–4 synchronised panes."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gradio as gr
import numpy as np

from app.browser_js import step_js
from app.tabs.common import ui_error
from app.workers import Cleanup, job_store, run_job, session_of
from backend.errors import CodecLensError
from views import compare as cv

if TYPE_CHECKING:
    from app.workspace import Workspace

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

# A click on the metric plot jumps every pane to that frame: the page's handler (app.browser_js)
# reads the x of a click anywhere on the plot. This older handler caught data points only; it
# stays for a tab mounted without the app's page script.
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


class Comparisons:
    """The few comparisons the tab has open, by id (each holds memory-mapped decodes)."""

    def __init__(self, ws: Workspace, keep: int = 2) -> None:
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
            for rid in stored.run_ids:
                self._ws.ensure_decoded(rid)
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


def choices(ws: Workspace) -> list[tuple[str, str]]:
    return cv.prepare_comparison_choices(ws.store.list_comparisons())


def get(opened: Comparisons, cid: str) -> _Open:
    """Open comparison ``cid`` (``gr.Error`` when none is picked or it cannot open)."""
    if not cid:
        raise gr.Error("No comparison is open. Pick a stored one or run a new one.")
    try:
        return opened.get(cid)
    except CodecLensError as exc:
        raise ui_error(exc) from exc


def panes(
    opened: Comparisons, cid: str, pos: float, layers, opacity, cmap, scale, diff: bool, ref: Any
) -> list[Any]:
    """Images and captions of the four pane slots (unused slots unchanged)."""
    if not cid:
        return [gr.update()] * (2 * cv.MAX_PANES)
    o = get(opened, cid)
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
                show_both=o.stored.kind == "selectors",
            )
            for i in range(n)
        ]
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    images = [v.image for v in views] + [gr.update()] * (cv.MAX_PANES - n)
    captions = [v.caption for v in views] + [gr.update()] * (cv.MAX_PANES - n)
    return images + captions


def legend(opened: Comparisons, cid: str, layers, cmap: str, scale: str) -> Any:
    """The heatmap legend with each pane's range (hidden without the heatmap layer)."""
    if not cid or "heatmap" not in (layers or []):
        return gr.update(visible=False)
    o = get(opened, cid)
    high = "; ".join(
        f"{label}: {cv.heatmap_range(o.results, i, scale)}" for i, label in enumerate(o.stored.labels)
    )
    return gr.update(value=cv.prepare_legend(cmap, "0", "1"), label=f"Heatmap scale — {high}", visible=True)


def load(opened: Comparisons, cid: str, layers, opacity, cmap, scale, diff, ref) -> list[Any]:
    """Every output that depends on the open comparison (see ``CompareTab.load_outputs``)."""
    if not cid:
        empty = [gr.update()] * (2 * cv.MAX_PANES)
        return [gr.update(), gr.update(), *[gr.update()] * cv.MAX_PANES, *empty, None, None, None, None, None]
    o = get(opened, cid)
    n = len(o.results)
    labels = o.stored.labels
    columns = [gr.update(visible=i < n) for i in range(cv.MAX_PANES)]
    selectors = o.stored.kind == "selectors"
    vh, vr = cv.prepare_selector_table(o.stored) if selectors else cv.prepare_variant_table(o.stored)
    ph, pr = cv.prepare_pair_table(o.stored)
    ref_choices = [(label, str(i)) for i, label in enumerate(labels)]
    ref_value = ref if ref in {c[1] for c in ref_choices} else "0"
    rendered = panes(opened, cid, 0, layers, opacity, cmap, scale, diff, ref_value)
    images = [
        gr.update(value=img, label=labels[i]) if i < n else gr.update()
        for i, img in enumerate(rendered[: cv.MAX_PANES])
    ]
    figure = cv.prepare_selector_metric_figure if selectors else cv.prepare_metric_figure
    settings = cv.prepare_selector_settings_markdown if selectors else cv.prepare_settings_markdown
    return [
        settings(o.stored),
        gr.update(maximum=max(1, int(o.positions.size) - 1), value=0),
        *columns,
        *images,
        *rendered[cv.MAX_PANES :],
        figure(o.stored, o.positions, cursor_frame_index=int(o.positions[0])),
        gr.update(value=vr, headers=vh),
        gr.update(value=pr, headers=ph),
        gr.update(choices=ref_choices, value=ref_value),
        legend(opened, cid, layers, cmap, scale),
    ]


def step(opened: Comparisons, cid: str, pos: float, action: str) -> int:
    """The slider position after navigation ``action`` (views.inspector.navigation.ACTIONS)."""
    if not cid:
        return int(pos or 0)
    o = get(opened, cid)
    return cv.navigate_position(o.results, o.positions, int(pos or 0), action)


def jump(opened: Comparisons, cid: str, frame: str, pos: float) -> int:
    """The slider position of frame ``frame`` (a metric-plot click)."""
    if not cid or not str(frame or "").strip():
        return int(pos or 0)
    try:
        return cv.position_of_frame(get(opened, cid).positions, float(frame))
    except ValueError as exc:
        raise gr.Error(f"Invalid frame ({frame!r}). Supported values are frame numbers.") from exc


def run_new(
    ws: Workspace,
    path: str,
    codecs: list[str] | None,
    numbers: dict[str, Any],
    speed: str,
    fallback: str,
    on_progress: Any = None,
    session: str = "",
) -> tuple[Any, str]:
    """Encode, select and compare ``path`` (in a worker); the refreshed picker (on the new one) and a
    status line.

    ``numbers``: the form's gop, bframes, crf_<codec>, bitrate, max_frames and max_side.
    """
    from app import jobs
    from backend.compare import CODECS, CompareConfig, default_output_dir
    from backend.pipeline import SelectionOptions

    try:
        source = ws.input_path(str(path or ""))
        config = CompareConfig(
            codecs=tuple(c for c in CODECS if c in (codecs or [])),
            gop=int(numbers["gop"]),
            bframes=int(numbers["bframes"]),
            crf_h264=int(numbers["crf_h264"]),
            crf_hevc=int(numbers["crf_hevc"]),
            crf_vp9=int(numbers["crf_vp9"]),
            crf_av1=int(numbers["crf_av1"]),
            bitrate_kbps=int(numbers["bitrate"] or 0),
            speed=speed,
            max_frames=int(numbers["max_frames"] or 0),
            max_side=int(numbers["max_side"] or 0),
            fallback_score=fallback,
        )
        # Named here, so that the encodes folder of a crashed comparison is known.
        comparison_id = uuid.uuid4().hex[:12]
        folder = default_output_dir(ws.store, comparison_id)
        done = run_job(
            ws.pool,
            jobs.compare_codecs,
            source,
            job_store(ws),
            config,
            SelectionOptions(frame_sampling_mode="all_frames"),
            comparison_id,
            session=session,
            subject=source.name,
            # As an interrupted comparison: stored as failed, its encodes removed.
            cleanup=Cleanup(
                written=(folder,),
                store=ws.store,
                then=lambda reason: ws.store.fail_comparison(
                    comparison_id, source_path=str(source), config=config.as_dict(), error=reason
                ),
            ),
            on_progress=on_progress,
        )
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc) from exc
    status = (
        f"Comparison `{done['comparison_id']}`: {done['variants']} variants of {source.name} in "
        f"{done['total_secs']:.1f} s."
    )
    new_id = done["comparison_id"]
    return gr.update(choices=choices(ws), value=new_id), new_id, nonce(), status


def nonce() -> str:
    """A new value for the hidden box whose change loads the picked comparison."""
    return str(time.time_ns())


def page_load(ws: Workspace, wanted: str | None = None) -> tuple[Any, str, str]:
    """What a new or reloaded page opens: ``wanted`` (the comparison this browser showed last,
    kept in its localStorage) when it still exists, else the newest; the picker, the open
    comparison's id and a nonce that fires its load (panes, slider range, tables, keys)."""
    found = choices(ws)
    ids = [v for _, v in found]
    chosen = wanted if wanted in ids else (ids[0] if ids else "")
    return gr.update(choices=found, value=chosen or None), chosen, nonce()


DEFAULT_SELECTORS = "cvp,llava-ov2,uniform"


def run_selectors(
    ws: Workspace, path: str, entries: str, profile: str, on_progress: Any = None, session: str = ""
) -> tuple[Any, str, str, str]:
    """Run 2–4 selectors on ``path`` and compare them (in a worker): the refreshed picker (on the new
    comparison), its id, a nonce that loads it and a status line. ``entries``: comma-separated
    selectors, presets or option sets."""
    from app import jobs
    from backend.compare import parse_entries

    try:
        source = ws.input_path(str(path or ""))
        text = str(entries or "").strip() or DEFAULT_SELECTORS
        parse_entries(text, shared={"profile": profile})  # refuse bad entries before any work
        comparison_id = uuid.uuid4().hex[:12]
        done = run_job(
            ws.pool,
            jobs.compare_selectors,
            source,
            job_store(ws),
            text,
            {"profile": profile},
            comparison_id,
            session=session,
            subject=source.name,
            cleanup=Cleanup(
                store=ws.store,
                then=lambda reason: ws.store.fail_comparison(
                    comparison_id, source_path=str(source), config={"kind": "selectors"}, error=reason
                ),
            ),
            on_progress=on_progress,
        )
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc) from exc
    status = (
        f"Selector comparison `{done['comparison_id']}`: {done['entries']} selectors on {source.name} in "
        f"{done['total_secs']:.1f} s."
    )
    new_id = done["comparison_id"]
    return gr.update(choices=choices(ws), value=new_id), new_id, nonce(), status


@dataclass
class _NewForm:
    """The new-comparison form; ``inputs`` in the order of ``_wire_run_new``'s handler."""

    inputs: list[Any]
    run_btn: Any
    status: Any


def _build_new_form(open_form: bool) -> _NewForm:
    from backend.compare import CODECS, FALLBACK_SCORES, SPEEDS, CompareConfig

    with gr.Accordion("New comparison", open=open_form):
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
    inputs = [path, codecs, gop, bframes, *crfs, bitrate, speed, max_frames, max_side, fallback]
    return _NewForm(inputs=inputs, run_btn=run_btn, status=status)


def _build_selector_form() -> _NewForm:
    """The new-selector-comparison form: video path, entries, profile."""
    from backend.config import PROFILES
    from backend.selectors import SELECTORS
    from backend.selectors.presets import PRESETS

    with gr.Accordion("New selector comparison", open=False):
        gr.Markdown(
            f"2–4 of {', '.join(SELECTORS.names)} or the presets {', '.join(PRESETS)}, comma-separated, "
            "each with optional options in brackets, e.g. "
            "`cvp,llava-ov2[gop_mode=bitcost],uniform[num_frames=16]`. "
            "AV1 has no bitcost: give cvp `[score=residual]` there."
        )
        with gr.Row():
            path = gr.Textbox(
                label="Video path (inside the allowed folders)", elem_id="cmp_sel_path", scale=3
            )
            entries = gr.Textbox(DEFAULT_SELECTORS, label="Selectors", elem_id="cmp_sel_entries", scale=3)
            profile = gr.Radio(list(PROFILES), value="clean", label="Profile", elem_id="cmp_sel_profile")
        run_btn = gr.Button("Run the selectors and compare", variant="primary", elem_id="cmp_sel_run")
        status = gr.Markdown("", elem_id="cmp_sel_status")
    return _NewForm(inputs=[path, entries, profile], run_btn=run_btn, status=status)


def _build_view_controls() -> list[Any]:
    """Layers, opacity, colormap, scale, difference mode and reference pane (the panes' inputs)."""
    from backend.render import DEFAULT_LAYERS, LAYER_LABELS, LAYER_NAMES
    from views.inspector.frame_layers import COLORMAPS

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
    return [layers, opacity, colormap, scale, diff, ref]


def _build_panes() -> tuple[list[Any], list[Any], list[Any]]:
    """The four pane slots (two visible until a comparison says otherwise): columns, images, captions."""
    pane_images, pane_infos, pane_columns = [], [], []
    with gr.Row(elem_id="compare_panes"):
        for i in range(cv.MAX_PANES):
            with gr.Column(visible=i < 2, min_width=240) as column:
                pane_images.append(
                    gr.Image(format="jpeg", label=f"pane {i + 1}", interactive=False, elem_id=f"cmp_pane_{i}")
                )
                pane_infos.append(gr.Markdown("", elem_id=f"cmp_info_{i}"))
            pane_columns.append(column)
    return pane_columns, pane_images, pane_infos


def build_compare_tab(ws: Workspace) -> None:
    """Create the comparison components inside the caller's current ``gr.Tab`` context.

    Pick a stored comparison (or run a new one on a path inside ``ws``'s input folders); up to
    four panes show the same frame with the same layers; one slider, the step buttons and the
    app's keys (hidden buttons ``cmp_*`` in ``#compare_hidden``) drive them all; a difference
    mode tints blocks kept by the reference pane only and by this pane only; per-frame metric
    plots follow the panes with a cursor and jump them on click.
    """
    opened = Comparisons(ws)
    existing = choices(ws)
    gr.HTML(
        "",
        html_template=f"<style>{CSS}</style>",
        elem_id="cmp_setup",
        padding=False,
    )
    gr.Markdown(
        "Encode one source in H.264, HEVC, VP9 and AV1 with matched GOP and B-frames, select on each and "
        "compare what they keep — or run several selectors (cvp, llava-ov2, uniform, presets) on one "
        "video and compare those. AV1 has no bitcost: its variant is selected with the fallback signal. "
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
    form = _build_new_form(open_form=not existing)
    selector_form = _build_selector_form()
    settings_md = gr.Markdown("", elem_id="cmp_settings")
    view = _build_view_controls()
    layers, colormap, scale, ref = view[0], view[2], view[3], view[5]
    gr.Markdown(
        f"Difference mode: <span style='color:rgb{cv.A_ONLY_RGB}'>■</span> kept only by the reference pane, "
        f"<span style='color:rgb{cv.B_ONLY_RGB}'>■</span> kept only by this pane (anchors count whole); "
        f"selector comparisons also outline <span style='color:rgb{cv.BOTH_RGB}'>□</span> kept by both."
    )
    legend_img = gr.Image(
        label="Heatmap scale", interactive=False, height=70, format="png", elem_id="cmp_legend"
    )
    pane_columns, pane_images, pane_infos = _build_panes()
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

    def on_load(c, lay, op, cm, sc, df, rf):
        return load(opened, c, lay, op, cm, sc, df, rf)

    def on_panes(c, p, lay, op, cm, sc, df, rf):
        return panes(opened, c, p, lay, op, cm, sc, df, rf)

    # One trigger loads a comparison: a new nonce in ``loaded``. The user's pick, a new
    # comparison and the page load set the id and the nonce together, so it loads once.
    pick.input(lambda v: (v or "", nonce()), pick, [cid, loaded], api_name=False)
    cid.change(None, cid, None, js="(c) => { if (c) localStorage.setItem('lensComparison', c); return []; }")
    refresh.click(lambda: gr.update(choices=choices(ws)), None, pick, api_name=False)
    _wire_run_new(ws, form, pick, cid, loaded)
    _wire_run_selectors(ws, selector_form, pick, cid, loaded)
    render_inputs = [cid, slider, *view]
    slider.change(on_panes, render_inputs, [*pane_images, *pane_infos], api_name=False)
    slider.change(None, slider, None, js=CURSOR_JS, api_name=False)
    for control in view:
        control.change(on_panes, render_inputs, [*pane_images, *pane_infos], api_name=False)
    for control in (layers, colormap, scale):
        control.change(
            lambda c, lay, cm, sc: legend(opened, c, lay, cm, sc),
            [cid, layers, colormap, scale],
            legend_img,
            api_name=False,
        )
    _wire_steps(opened, cid, slider, key_buttons, visible_steps)
    jump_btn.click(lambda c, f, p: jump(opened, c, f, p), [cid, jump_frame, slider], slider, api_name=False)

    # Page load (a reload too): the comparison this browser showed last, else the newest.
    gr.on(
        triggers=None,
        fn=lambda wanted: page_load(ws, wanted),
        inputs=[cid],
        outputs=[pick, cid, loaded],
        js="(c) => [localStorage.getItem('lensComparison') || c]",
        api_name=False,
    )
    loaded.change(on_load, [cid, *view], load_outputs, api_name=False)


def _wire_steps(
    opened: Comparisons, cid: Any, slider: Any, key_buttons: dict[str, Any], visible_steps: dict[str, Any]
) -> None:
    """The step buttons and the hidden key buttons: plain steps move the slider in the browser,
    group and keyframe steps ask the server."""
    for action in KEY_BUTTONS:
        for button in (key_buttons[action], visible_steps[action]):
            if action in STEP_JS:
                button.click(None, slider, slider, js=STEP_JS[action], api_name=False)
            else:
                button.click(
                    lambda c, p, a=action: step(opened, c, p, a), [cid, slider], slider, api_name=False
                )


def _wire_run_new(ws: Workspace, form: _NewForm, pick: Any, cid: Any, loaded: Any) -> None:
    # One parameter per input: Gradio injects the tracker only into a positional parameter.
    def on_run(
        request: gr.Request,
        path,
        codecs,
        gop,
        bframes,
        crf_h264,
        crf_hevc,
        crf_vp9,
        crf_av1,
        bitrate,
        speed,
        max_frames,
        max_side,
        fallback,
        progress=gr.Progress(),  # noqa: B008 - Gradio injects the tracker
    ):
        numbers = {"gop": gop, "bframes": bframes, "crf_h264": crf_h264, "crf_hevc": crf_hevc}
        numbers |= {"crf_vp9": crf_vp9, "crf_av1": crf_av1, "bitrate": bitrate}
        numbers |= {"max_frames": max_frames, "max_side": max_side}
        return run_new(
            ws,
            path,
            codecs,
            numbers,
            speed,
            fallback,
            on_progress=lambda stage, fraction: progress(fraction, desc=stage),
            session=session_of(request),
        )

    # The worker pool bounds the work, per session and in all.
    form.run_btn.click(
        on_run, form.inputs, [pick, cid, loaded, form.status], api_name=False, concurrency_limit=None
    )


def _wire_run_selectors(ws: Workspace, form: _NewForm, pick: Any, cid: Any, loaded: Any) -> None:
    def on_run(
        request: gr.Request,
        path,
        entries,
        profile,
        progress=gr.Progress(),  # noqa: B008 - Gradio injects the tracker
    ):
        return run_selectors(
            ws,
            path,
            entries,
            profile,
            on_progress=lambda stage, fraction: progress(fraction, desc=stage),
            session=session_of(request),
        )

    form.run_btn.click(
        on_run, form.inputs, [pick, cid, loaded, form.status], api_name=False, concurrency_limit=None
    )
