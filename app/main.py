"""Gradio app composition: inspector, run panel and sessions over one Workspace."""

import html
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from app.browser_js import step_js

REPO = Path(__file__).resolve().parents[1]
SAMPLE_VIDEO = REPO / "sample_videos" / "flower_timelapse_cc0.mp4"
DEFAULT_HOME = Path.home() / ".codec-lens"

PREFETCH_AHEAD = 4
PREFETCH_BEHIND = 2

# Keys click hidden buttons; text inputs keep their keys. While the codec comparison panes
# are on screen the same keys drive them (buttons cmp_*). Plot clicks and frame clicks
# write into hidden textboxes and press hidden buttons. Gradio replaces the plotly div on
# every update, so a MutationObserver re-attaches the click handler.
KEY_JS = """
() => {
  const press = (id) => document.querySelector('#' + id)?.click();
  const visible = (sel) => { const el = document.querySelector(sel); return !!(el && el.offsetParent); };
  const fill = (sel, value) => {
    const box = document.querySelector(sel + ' textarea, ' + sel + ' input');
    if (!box) return false;
    box.value = value;
    box.dispatchEvent(new Event('input', {bubbles: true}));
    return true;
  };
  document.addEventListener('keydown', (e) => {
    const tag = (e.target && e.target.tagName) || '';
    if (['INPUT', 'TEXTAREA', 'SELECT'].includes(tag) && e.target.type !== 'range') return;
    const map = {
      ArrowLeft: e.shiftKey ? 'prev_key' : 'prev',
      ArrowRight: e.shiftKey ? 'next_key' : 'next',
      ',': 'prev', '.': 'next', '[': 'prev_group', ']': 'next_group',
      Home: 'home', End: 'end', '?': 'help',
    };
    const action = map[e.key];
    if (!action) return;
    const compare = visible('#compare_panes') && !visible('#frame_img');
    const id = action === 'help' ? 'k_help' : (compare ? 'cmp_' : 'k_') + action;
    if (!document.querySelector('#' + id)) return;
    e.preventDefault();
    e.stopPropagation();
    press(id);
  }, true);
  document.addEventListener('click', (e) => {
    const img = e.target;
    if (!img || img.id !== 'frame_img' || !img.naturalWidth) return;
    const r = img.getBoundingClientRect();
    const x = Math.floor((e.clientX - r.left) * img.naturalWidth / r.width);
    const y = Math.floor((e.clientY - r.top) * img.naturalHeight / r.height);
    if (fill('#block_xy', x + ',' + y)) setTimeout(() => press('block_btn'), 30);
  });
  const attach = () => {
    const gd = document.querySelector('#timeline .js-plotly-plot');
    if (!gd || gd.__lensClick || !gd.on) return;
    gd.__lensClick = true;
    gd.on('plotly_click', (ev) => {
      if (!ev.points.length) return;
      if (fill('#jump_frame', String(Math.round(ev.points[0].x)))) setTimeout(() => press('jump_btn'), 50);
    });
  };
  new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
  attach();
}
"""

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

# Hidden, not invisible: Gradio leaves visible=False components out of the page, and the
# key handler must be able to click them.
CSS = (
    "#hidden_controls, #compare_hidden { display: none !important; }"
    " #frame_img { width: 100%; height: auto; cursor: crosshair; display: block; }"
)
LAUNCH_KWARGS = {"js": KEY_JS, "css": CSS}


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


def make_workspace(
    *,
    session_db: Path | None = None,
    input_dirs: tuple[Path, ...] = (),
    output_dir: Path | None = None,
) -> Any:
    """A Workspace with the app's default folders: inputs from the sample folder, the given
    folders and the uploads folder; everything written under ``output_dir``."""
    from app.workspace import Workspace

    output_root = Path(output_dir or DEFAULT_HOME / "work").expanduser().resolve()
    (output_root / "uploads").mkdir(parents=True, exist_ok=True)
    roots = (output_root, SAMPLE_VIDEO.parent, *input_dirs)
    return Workspace(
        store_path=Path(session_db or DEFAULT_HOME / "sessions.duckdb").expanduser(),
        input_roots=tuple(Path(r).expanduser().resolve() for r in roots),
        output_root=output_root,
    )


def ensure_run(ws: Any, video: str | Path, options: Any = None) -> str:
    """The id of a finished run of ``video`` with ``options`` (default clean), running it if needed."""
    from backend.pipeline import SelectionOptions
    from backend.runs import select_and_store

    options = options or SelectionOptions(profile="clean")
    path = ws.input_path(video)
    wanted = options.as_dict()
    for row in ws.store.list_runs(status="done"):
        if row.video_path == str(path) and all(row.config.get(k) == v for k, v in wanted.items()):
            return row.run_id
    run_id, result = select_and_store(path, ws.store, options=options)
    ws.remember(run_id, result)
    return run_id


def _option_controls(gr: Any) -> dict[str, Any]:
    """One control per SelectionOptions field, generated from the field metadata."""
    from backend.config import field_help
    from backend.pipeline import SelectionOptions

    controls: dict[str, Any] = {}
    for name, meta in field_help(SelectionOptions).items():
        label, info, default = meta["label"], meta["help"], meta["default"]
        elem_id = f"opt_{name}"
        if meta["choices"]:
            controls[name] = gr.Dropdown(
                list(meta["choices"]), value=default, label=label, info=info, elem_id=elem_id
            )
        elif isinstance(default, bool):
            controls[name] = gr.Checkbox(value=default, label=label, info=info, elem_id=elem_id)
        else:
            controls[name] = gr.Number(
                value=default,
                label=label,
                info=info,
                minimum=meta["min"],
                maximum=meta["max"],
                precision=0 if isinstance(default, int) else None,
                elem_id=elem_id,
            )
    return controls


def _runs_table(ws: Any) -> list[list[Any]]:
    rows = []
    for r in ws.store.list_runs():
        rows.append(
            [
                r.run_id,
                Path(r.video_path).name,
                r.profile,
                r.status,
                f"{r.created_at:%Y-%m-%d %H:%M:%S}",
                r.parent_run_id or "",
                len(r.warnings),
            ]
        )
    return rows


RUN_HEADERS = ["run_id", "video", "profile", "status", "created", "parent", "warnings"]


def build_app(ws: Any, *, run_id: str | None = None) -> Any:
    """Blocks for the whole app over ``ws``, opened on stored run ``run_id`` (or empty)."""
    import gradio as gr

    from app.canvas_tab import build_canvas_tab
    from app.compare_tab import build_compare_tab
    from app.export_panel import build_export_panel
    from app.import_panel import build_import_panel
    from app.luma_tab import build_luma_tab
    from backend.errors import CodecLensError
    from backend.pipeline import SelectionOptions
    from backend.render import DEFAULT_LAYERS, LAYER_LABELS, LAYER_NAMES
    from backend.runs import reselect, select_and_store
    from backend.stages.probe import ProbeConfig, probe
    from views.inspector import group_stepper, navigation, run_summary, timeline
    from views.inspector.frame_cache import JpegCache
    from views.inspector.frame_layers import COLORMAPS, SCALES, block_at, prepare_frame_layers

    cache = JpegCache(budget_bytes=128 << 20)
    no_layers = layer_options([], 0.5, "turbo", "frame")

    def result_of(rid: str) -> Any:
        if not rid:
            raise gr.Error("No run is open. Choose a video in the Run tab.")
        try:
            return ws.result(rid)
        except CodecLensError as exc:
            raise gr.Error(exc.one_line()) from exc

    def render_jpeg(rid: str, row: int, layers: str, opacity: float, cmap: str, scale: str) -> bytes:
        """JPEG bytes for the frame route; neighbours go to the prefetcher."""
        result = ws.result(rid)
        n = int(result.candidates.frame_indices.size)
        if not 0 <= row < n:
            raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}")
        opts = layer_options(layers, opacity, cmap, scale)

        def job(r: int) -> tuple[Any, Any]:
            key = (rid, r, opts)
            return key, lambda: prepare_frame_layers(result, r, opts).image

        data = cache.get(*job(row))
        near = [row + d for d in range(1, PREFETCH_AHEAD + 1)] + [
            row - d for d in range(1, PREFETCH_BEHIND + 1)
        ]
        cache.prefetch([job(r) for r in near if 0 <= r < n])
        return data

    def view_of(rid: str, row: int, layers: list[str], opacity: float, cmap: str, scale: str):
        result = result_of(rid)
        try:
            v = prepare_frame_layers(result, int(row), layer_options(layers, opacity, cmap, scale))
        except ValueError as exc:
            raise gr.Error(str(exc)) from exc
        return result, v

    def info_fragment(rid: str, row: int) -> str:
        """The info line of one frame (also served at /lens/info for the browser's frame steps)."""
        result = ws.result(rid)
        n = int(result.candidates.frame_indices.size)
        if not 0 <= row < n:
            raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}")
        return info_text_html(prepare_frame_layers(result, row, no_layers).info)

    def info_of(rid: str, row: float) -> str:
        if not rid:
            return info_html("No run open.")
        result = result_of(rid)
        row = min(max(int(row), 0), int(result.candidates.frame_indices.size) - 1)
        return info_html(info_fragment(rid, row))

    def legend_of(rid: str, row: float, layers, opacity, cmap, scale):
        if not rid:
            return None
        return view_of(rid, row, layers, opacity, cmap, scale)[1].legend

    def open_view(rid: str, row: int, layers: list[str], opacity: float, cmap: str, scale: str):
        """Every output that depends on the open run."""
        result = result_of(rid)
        n = int(result.candidates.frame_indices.size)
        row = min(max(int(row), 0), n - 1)
        table = group_stepper.prepare_group_table(result)
        first_group = result.groups.specs[0].group_index if result.groups.specs else None
        frames = json.dumps([int(f) for f in result.candidates.frame_indices])
        return (
            run_summary.prepare_summary(result),
            gr.update(maximum=n - 1, value=row),
            frames,
            frame_html(frame_url(rid, row, layers, opacity, cmap, scale)),
            info_of(rid, row),
            legend_of(rid, row, layers, opacity, cmap, scale),
            timeline.prepare_timeline(result, cursor_frame_index=int(result.candidates.frame_indices[row])),
            gr.update(
                value=[list(r.values()) for r in table], headers=list(table[0]) if table else RUN_HEADERS
            ),
            gr.update(choices=[s.group_index for s in result.groups.specs], value=first_group),
            group_stepper.prepare_readiness_plot(result, first_group) if first_group is not None else None,
            gr.update(value=_video_path_of(rid)),
        )

    def _video_path_of(rid: str) -> str:
        return ws.store.get_run(rid).video_path if rid else ""

    initial_options = SelectionOptions(profile="clean")
    with gr.Blocks(title="Codec Lens", delete_cache=(600, 1200)) as demo:
        gr.Markdown("# Codec Lens\nWhat the codec-native selector kept, and why. Press `?` for keys.")
        summary = gr.Markdown("", elem_id="summary")
        with gr.Row(elem_id="hidden_controls"):
            run_box = gr.Textbox(value="", elem_id="run_id", label="run id")
            frames_box = gr.Textbox(value="[]", elem_id="frames_json")
            buttons = {a: gr.Button(a, elem_id=f"k_{a}") for a in navigation.ACTIONS}
            help_btn = gr.Button("help", elem_id="k_help")
            jump_frame = gr.Textbox(elem_id="jump_frame")
            jump_btn = gr.Button("jump", elem_id="jump_btn")
            block_xy = gr.Textbox(elem_id="block_xy")
            block_btn = gr.Button("block", elem_id="block_btn")
        with gr.Tabs():
            with gr.Tab("Inspect", id="inspect"):
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
                        block = gr.Markdown(
                            "Click a block to see its bitcost, score and rank.", elem_id="block_info"
                        )
                    with gr.Column(scale=2):
                        layers = gr.CheckboxGroup(
                            [(LAYER_LABELS[n], n) for n in LAYER_NAMES],
                            value=list(DEFAULT_LAYERS),
                            label="Layers",
                            elem_id="layers",
                        )
                        opacity = gr.Slider(
                            0, 1, value=0.5, step=0.05, label="Heatmap opacity", elem_id="opacity"
                        )
                        colormap = gr.Dropdown(list(COLORMAPS), value="turbo", label="Colormap")
                        scale = gr.Radio(list(SCALES), value="frame", label="Heatmap scale")
                        legend = gr.Image(label="Legend", interactive=False, height=80, format="png")
                        keys = gr.Markdown(visible=False, elem_id="key_map")
                build_export_panel(ws, run_box, slider)
                plot = gr.Plot(elem_id="timeline", label="Timeline (click a frame to jump)")
                with gr.Row():
                    groups_table = gr.Dataframe(label="Groups", interactive=False, elem_id="groups_table")
                    with gr.Column():
                        group_pick = gr.Dropdown([], label="Group", elem_id="group_pick")
                        steps_plot = gr.Plot(label="Readiness trace", elem_id="readiness_plot")
            with gr.Tab("Canvases", id="canvases"):
                build_canvas_tab(ws, run_box)
            with gr.Tab("Compare codecs", id="compare"):
                build_compare_tab(ws)
            with gr.Tab("Luma bias", id="luma"):
                build_luma_tab(ws)
            with gr.Tab("Run", id="run"):
                gr.Markdown(
                    "Choose a video (a path inside the allowed folders, or an upload), a profile and "
                    "the selection options, then **Run**. Only grouping/selection options changed on "
                    "the open video re-select from the cache without decoding."
                )
                with gr.Row():
                    video_path = gr.Textbox(label="Video path", elem_id="video_path", scale=3)
                    upload = gr.File(label="Upload a video", elem_id="upload", scale=2)
                with gr.Accordion("Selection options", open=True):
                    with gr.Row(equal_height=False):
                        controls = _option_controls(gr)
                run_btn = gr.Button("Run", variant="primary", elem_id="run_btn")
                run_status = gr.Markdown("", elem_id="run_status")
                gr.Markdown("### Sessions")
                with gr.Row():
                    open_pick = gr.Dropdown([], label="Stored run", elem_id="open_pick", scale=3)
                    open_btn = gr.Button("Open", elem_id="open_btn", scale=1)
                    refresh_btn = gr.Button("Refresh", elem_id="refresh_btn", scale=1)
                with gr.Accordion("Import a codec-video-prep output directory", open=False):
                    build_import_panel(ws, run_box)
                runs = gr.Dataframe(
                    headers=RUN_HEADERS, label="Runs", interactive=False, elem_id="runs_table"
                )

        view_controls = [slider, layers, opacity, colormap, scale]
        view_outputs = [
            summary,
            slider,
            frames_box,
            frame,
            info,
            legend,
            plot,
            groups_table,
            group_pick,
            steps_plot,
            video_path,
        ]

        def on_run_change(rid: str, row: float, lay, op, cm, sc):
            """Show run ``rid`` where its viewer was left last time (or at its first frame)."""
            if not rid:
                return (gr.update(),) * (len(view_outputs) + 3 + len(controls))
            try:
                view = ws.store.load_view(rid) or {}
                config = ws.store.get_run(rid).config
            except CodecLensError as exc:
                raise gr.Error(exc.one_line()) from exc
            lay = [x for x in view.get("layers", lay) if x in LAYER_NAMES]
            op, cm = float(view.get("opacity", op)), view.get("colormap", cm)
            # The run panel shows the open run's options, ready to be tweaked and run again.
            option_values = [gr.update(value=config.get(name, c.value)) for name, c in controls.items()]
            return (*open_view(rid, int(view.get("row", 0)), lay, op, cm, sc), lay, op, cm, *option_values)

        run_box.change(
            on_run_change,
            [run_box, *view_controls],
            [*view_outputs, layers, opacity, colormap, *controls.values()],
            api_name=False,
        )
        src_inputs = [slider, run_box, layers, opacity, colormap, scale, frames_box]
        slider.change(None, src_inputs, None, js=SRC_JS, api_name=False)
        for c in view_controls[1:]:
            c.change(None, src_inputs, None, js=SRC_JS, api_name=False)
            c.change(legend_of, [run_box, *view_controls], legend, api_name=False)

        def go(rid: str, row: float, action: str) -> int:
            return navigation.navigate(result_of(rid), int(row), action)

        for action, button in [*buttons.items(), *steps.items()]:
            if action in STEP_JS:
                # One-frame steps and the ends need no server: the slider knows its range.
                button.click(None, slider, slider, js=STEP_JS[action], api_name=False)
            else:
                button.click(
                    lambda rid, r, a=action: go(rid, r, a), [run_box, slider], slider, api_name=False
                )
        help_btn.click(
            lambda: gr.update(visible=True, value="\n".join(f"- `{k}` {d}" for k, d in navigation.KEY_MAP)),
            None,
            keys,
            api_name=False,
        )
        jump_btn.click(
            lambda rid, x: navigation.row_for_frame(result_of(rid), float(x or 0)),
            [run_box, jump_frame],
            slider,
            api_name=False,
        )

        def pick_block(rid: str, row: float, xy: str) -> str:
            try:
                x, y = (int(v) for v in xy.split(","))
            except ValueError as exc:
                raise gr.Error(f"bad block position {xy!r}") from exc
            b = block_at(result_of(rid), int(row), x, y)
            where = (
                f"canvas {b['canvas_index']} at patch ({b['packed_row']}, {b['packed_col']})"
                if b["kept"]
                else "not kept"
            )
            return (
                f"block ({b['block_row']}, {b['block_col']}) · bitcost {b['bitcost']} · score "
                f"{b['score']:.3f} · rank {b['rank']} · {where}"
            )

        block_btn.click(pick_block, [run_box, slider, block_xy], block, api_name=False)

        def show_group(rid: str, g: Any):
            if g is None or not rid:
                return None, gr.update()
            result = result_of(rid)
            spec = next(s for s in result.groups.specs if s.group_index == int(g))
            return group_stepper.prepare_readiness_plot(result, int(g)), spec.start

        group_pick.input(show_group, [run_box, group_pick], [steps_plot, slider], api_name=False)

        # -- run panel and sessions ------------------------------------------------------------

        def sessions_update(selected: str | None = None):
            table = _runs_table(ws)
            done = [(f"{r[0]} · {r[1]} · {r[2]} · {r[4]}", r[0]) for r in table if r[3] == "done"]
            value = selected if selected in {v for _, v in done} else None
            return gr.update(value=table), gr.update(choices=done, value=value)

        def on_upload(file: Any, current: str):
            if file is None:
                return gr.update(), gr.update()
            src = Path(file if isinstance(file, str) else file.name)
            dest_dir = ws.output_path("uploads")
            dest = dest_dir / src.name
            try:
                shutil.copyfile(src, dest)
                info = probe(dest, config=ProbeConfig(profile="clean"))
            except CodecLensError as exc:
                dest.unlink(missing_ok=True)
                raise gr.Error(exc.one_line().replace(str(dest), src.name)) from exc
            except OSError as exc:
                dest.unlink(missing_ok=True)
                raise gr.Error(f"{src.name}: cannot store the upload ({exc.strerror})") from exc
            return str(dest), (
                f"Uploaded **{src.name}**: {info.codec_name} {info.width}×{info.height}, "
                f"{info.total_frames} frames. Press **Run**."
            )

        upload.upload(on_upload, [upload, run_box], [video_path, run_status], api_name=False)

        names = list(controls)

        def save_view(rid: str, row: float, lay: list[str], op: float, cm: str) -> None:
            if rid:
                ws.store.save_view(rid, {"row": int(row), "layers": lay, "opacity": op, "colormap": cm})

        def start_run(rid: str, path_text: str, row, lay, op, cm, *values: Any, progress=gr.Progress()):  # noqa: B008 - Gradio's progress hook
            t0 = time.perf_counter()
            try:
                raw = dict(zip(names, values, strict=True))
                for name, value in raw.items():
                    default = getattr(initial_options, name)
                    if isinstance(default, int) and not isinstance(default, bool) and value is not None:
                        raw[name] = int(value)
                options = SelectionOptions(**raw)
            except (ValueError, TypeError) as exc:
                raise gr.Error(str(exc)) from exc
            try:
                video = ws.input_path(path_text or "")
                if not video.is_file():
                    raise gr.Error(f"{path_text}: no such video file")
                progress(0.0, desc="starting")

                def on_progress(stage: str, fraction: float) -> None:
                    progress(fraction, desc=stage)

                same_video = bool(rid) and ws.store.get_run(rid).video_path == str(video)
                if same_video:
                    base = ws.store.get_run(rid).config
                    changes = {k: v for k, v in options.as_dict().items() if base.get(k) != v}
                    new_id, result, how = reselect(
                        ws.store, rid, changes, on_progress=on_progress, memory=ws.memory
                    )
                else:
                    new_id, result = select_and_store(
                        video, ws.store, options=options, on_progress=on_progress
                    )
                    how = "full"
            except CodecLensError as exc:
                raise gr.Error(exc.one_line()) from exc
            ws.remember(new_id, result)
            save_view(rid, row, lay, op, cm)  # so reopening the previous run finds it as it was left
            front_changed = how == "full"
            note = "decoded" if front_changed else "re-selected from the cache, nothing decoded"
            status = (
                f"Run **{new_id}** done in {time.perf_counter() - t0:.2f} s ({note}): "
                f"{len(result.selection.groups)} groups, {result.canvases.images.shape[0]} canvases, "
                f"{result.canvases.tokens.shape[0]} tokens."
            )
            table, picks = sessions_update(new_id)
            return new_id, status, table, picks

        run_btn.click(
            start_run,
            [run_box, video_path, slider, layers, opacity, colormap, *controls.values()],
            [run_box, run_status, runs, open_pick],
            api_name=False,
            show_progress="full",
        )
        refresh_btn.click(lambda rid: sessions_update(rid), run_box, [runs, open_pick], api_name=False)

        def open_stored(current: str, chosen: str | None, row: float, lay, op, cm) -> str:
            """Remember where the open run's viewer is, then switch to ``chosen``."""
            if not chosen:
                raise gr.Error("Choose a stored run to open.")
            try:
                save_view(current, row, lay, op, cm)
                ws.result(chosen)  # fails here, with the previous run still shown, if it cannot open
            except CodecLensError as exc:
                raise gr.Error(exc.one_line()) from exc
            return chosen

        open_btn.click(open_stored, [run_box, open_pick, *view_controls[:-1]], run_box, api_name=False)

        def initial():
            return (run_id or "", *sessions_update(run_id))

        demo.load(initial, None, [run_box, runs, open_pick], api_name=False)
        demo.lens_render_jpeg = render_jpeg  # served by serve(); kept on the Blocks for benches
        demo.lens_info = info_fragment
        demo.lens_cache = cache
    return demo


def _mount_frame_route(app: Any, render_jpeg: Any, info_fragment: Any) -> None:
    from fastapi import Query
    from fastapi.responses import Response

    from backend.errors import CodecLensError

    def frame(
        run: str = Query(..., max_length=64),
        row: int = Query(..., ge=0),
        l: str = Query("", max_length=200),  # noqa: E741 - short query names keep URLs short
        o: float = Query(0.5, ge=0.0, le=1.0),
        c: str = Query("turbo", max_length=32),
        s: str = Query("frame", max_length=16),
    ) -> Response:
        t0 = time.perf_counter()
        try:
            data = render_jpeg(run, row, l, o, c, s)
        except (CodecLensError, ValueError) as exc:
            return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
        headers = {
            # A URL names one immutable frame of one stored run: let the browser keep it.
            "Cache-Control": "private, max-age=3600",
            # Render time, visible in the browser's resource timing (bench/scrub.py reads it).
            "Server-Timing": f"render;dur={(time.perf_counter() - t0) * 1000:.1f}",
        }
        return Response(data, media_type="image/jpeg", headers=headers)

    def info(run: str = Query(..., max_length=64), row: int = Query(..., ge=0)) -> Response:
        try:
            text = info_fragment(run, row)
        except (CodecLensError, ValueError) as exc:
            return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
        return Response(text, media_type="text/html", headers={"Cache-Control": "private, max-age=3600"})

    app.add_api_route("/lens/frame", frame, methods=["GET"])
    app.add_api_route("/lens/info", info, methods=["GET"])


def serve(demo: Any, ws: Any, *, host: str, port: int, block: bool = True) -> Any:
    """Launch ``demo`` with the frame route; returns the server app (blocks unless told not to)."""
    from gradio.routes import App

    app = App()
    _mount_frame_route(app, demo.lens_render_jpeg, demo.lens_info)
    demo.launch(
        server_name=host,
        server_port=port,
        share=False,
        prevent_thread_lock=True,
        quiet=not block,
        allowed_paths=[str(ws.output_root)],
        _app=app,
        **LAUNCH_KWARGS,
    )
    if block:
        demo.block_thread()
    return app


def launch(
    *,
    video: str | None,
    run_id: str | None = None,
    host: str,
    port: int,
    session_db: Path | None = None,
    input_dirs: tuple[Path, ...] = (),
    output_dir: Path | None = None,
) -> int:
    """Build and serve the app on ``video`` or stored ``run_id`` (blocks until interrupted)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from backend.errors import CodecLensError

    dirs = tuple(input_dirs) + ((Path(video).expanduser().resolve().parent,) if video else ())
    ws = make_workspace(session_db=session_db, input_dirs=(*dirs, Path.cwd()), output_dir=output_dir)
    try:
        rid = run_id or ensure_run(ws, video or SAMPLE_VIDEO)
        ws.result(rid)
    except CodecLensError as exc:
        raise SystemExit(f"codec-lens: error: {exc.one_line()}") from exc
    demo = build_app(ws, run_id=rid)
    serve(demo, ws, host=host, port=port)
    return 0
