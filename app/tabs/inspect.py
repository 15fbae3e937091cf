"""Inspect tab: the frame viewer with its layers and readouts, frame steps, plots, groups, re-selection."""

from __future__ import annotations

import functools
import html
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import gradio as gr

from app.browser_js import step_js
from app.tabs.common import ui_error
from app.tabs.export_panel import build_export_panel
from app.tabs.inspect_routes import (
    DEFAULT_HEAT,
    JPEG_CACHE_BYTES,
    info_fragment,
    layer_options,
    render_jpeg,
)
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.tabs.run import OptionLayout
    from app.workspace import Workspace
    from backend.pipeline import RunResult

__all__ = ["JPEG_CACHE_BYTES", "info_fragment", "render_jpeg"]

# The frame image is a plain <img> fed by the app's own JPEG route: the slider sets its src in the
# browser (app.browser_js, window.__lens.show), so a frame step costs one cached GET instead of a
# queued Gradio event plus a file copy (measured: bench/scrub.py).
SRC_JS = """
(row, run, layers, opacity, cmap, scale, heat, framesJson, codec, groupsJson) => {
  const L = window.__lens;
  if (L && L.show) L.show(row, run, layers, opacity, cmap, scale, heat, framesJson, codec);
  // The group stepper follows the viewer with one server event when the row enters another
  // group (groupsJson: [start, end, group_index] of each), not one per frame step, and only once
  // the viewer rests there 250 ms: while keys scrub through groups, a stepper redraw (~40 ms of
  // page time) at each boundary would hold up the next frame (as the plots' cursor, L.cursor).
  let group = null;
  try {
    for (const [s, e, g] of JSON.parse(groupsJson || '[]')) if (row >= s && row < e) { group = g; break; }
  } catch (err) { group = null; }
  // The groups table marks the viewed group's row.
  for (const tr of document.querySelectorAll('#groups_table tr[data-group]')) {
    tr.classList.toggle('lens-current', group !== null && Number(tr.dataset.group) === group);
  }
  const key = run + ':' + group;
  // Whatever opened another run drew its stepper: only a move within one run follows.
  const sameRun = window.__lensGroupRun === run;
  window.__lensGroupRun = run;
  if (!sameRun) window.__lensGroup = key;
  if (run && group !== null && window.__lensGroup !== key) {
    window.__lensGroup = key;
    window.__lensFollowRow = null;
  }
  if (!sameRun) window.__lensFollowRow = undefined;  // nothing pending for the run left behind
  if (window.__lensFollowRow !== undefined) {
    // Pending until the viewer rests: every step starts the wait again.
    window.__lensFollowRow = Math.round(row);
    clearTimeout(window.__lensFollowTimer);
    window.__lensFollowTimer = setTimeout(() => {
      const pending = window.__lensFollowRow;
      window.__lensFollowRow = undefined;
      if (pending === undefined || pending === null || window.__lensGroupRun !== run) return;
      window.__lensFollow = (window.__lensFollow || 0) + 1;
      const box = document.querySelector('#follow_row textarea, #follow_row input');
      if (box) {
        box.value = pending + ' ' + window.__lensFollow;  // always a new value: a change
        box.dispatchEvent(new Event('input', {bubbles: true}));
      }
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
HEAT_CHOICES = (("2×2-block score (ranked)", "block"), ("signal per codec cell", "signal"))
# The grouping and selection options: changing one re-selects from the cached decode at once.
LIVE_OPTIONS = (
    "grouping_mode",
    "group_size",
    "images_per_group",
    "min_group_frames",
    "max_group_frames",
    "readiness_sum_threshold_mode",
    "readiness_sum_threshold",
    "readiness_norm_sum_threshold",
    "iframe_score_clip_mode",
    "iframe_score_clip_percentile",
)
# What open_view returns, in order (the Run tab's video path last).
VIEW_OUTPUTS = (
    "summary",
    "slider",
    "frames",
    "groups",
    "frame",
    "info",
    "colour_legend",
    "heat_legend",
    "timeline",
    "signal_plots",
    "groups_table",
    "group_pick",
    "readiness_plot",
    "shown_run",
    "video_path",
)
LIVE_KEEPS = ("slider", "frames", "frame", "info", "colour_legend")
"""What a live re-selection leaves to the page or as it was (the route sends no new value): the
candidates (slider, frames) do not change, the page moves the frame's image to the new run and
fetches its info line itself (window.__lens.show), and the colour legend names the layers."""
LiveView = tuple[list[str], float, str, str, str]
"""The viewer a live re-selection keeps: layers, opacity, colormap, heatmap scale and source."""
LATER_OUTPUTS = ("signal_plots",)
"""The plots below the viewer: the page draws them once the frame shows (PLOT_JS)."""

PLOTS = ("timeline", "signal_plots", "readiness_plot")
"""The inspector's plots (each a view output and its gr.Plot's elem_id). The server sends each
figure as JSON text to a hidden box (``#<name>_fig``) and the page draws it (PLOT_JS): Gradio 6 remounts a
gr.Plot on every new value and draws it twice (two Plotly.newPlot plus two resizes: Plotly ran
257 ms per live re-selection in a CPU profile, 100-150 ms since), while Plotly.react on the same
div draws once and keeps the div (its click handler stays attached)."""

# The figure box's change: react on the plot's div. Until the gr.Plot has a div (its first figure)
# the figure goes to Gradio as the plot's value instead, which mounts it; Gradio's value then
# never changes again, so it never redraws over what the page drew.
PLOT_JS = """
(text) => {
  const gd = document.querySelector('#%s .js-plotly-plot');
  if (!text) return undefined;
  if (!gd || !window.Plotly) return {type: 'plotly', plot: text};
  const fig = JSON.parse(text);
  const layout = fig.layout || {};
  // As Gradio's plot component draws a figure (its label shown).
  layout.autosize = true;
  layout.margin = Object.assign({}, layout.margin || {}, {autoexpand: true});
  if (layout.title && (layout.title.text || typeof layout.title === 'string')) {
    layout.margin.t = Math.max(100, layout.margin.t || 0);
  }
  const config = Object.assign({}, fig.config || {}, {responsive: true});
  const draw = () => window.Plotly.react(gd, fig.data || [], layout, config);
  if (!%s) { draw(); return undefined; }
  // A plot below the viewer draws when it comes on screen (after the frame has shown), else once
  // the page has been idle a while: a draw costs the page 40-80 ms, which would hold up the
  // frame, the timeline and the stepper. Only the latest figure draws.
  gd.__lensPending = draw;
  const run = () => {
    if (gd.__lensPending !== draw) return;
    gd.__lensPending = null;
    draw();
    const L = window.__lens;
    if (L && L.cursor && L.frameIndex) L.cursor(L.frameIndex());  // the viewer may have moved on
  };
  const idle = () => (window.requestIdleCallback ? requestIdleCallback(run, {timeout: 1000}) : run());
  const afterFrame = () => {
    const img = document.querySelector('#frame_img');
    if (!img || (img.complete && img.naturalWidth)) idle();
    else img.addEventListener('load', idle, {once: true});
  };
  const seen = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) { seen.disconnect(); afterFrame(); }
  });
  seen.observe(gd);
  setTimeout(() => { seen.disconnect(); idle(); }, 1500);
  return undefined;
}
"""


OPEN_IF_NEW_JS = """
(run, shown) => {
  if (run && run !== shown) document.querySelector('#open_run_btn')?.click();
  return [];
}
"""


# A live option change: the page asks the app's own route (app.server, /lens/reselect) and hands
# the answer to Gradio as this frontend-only event's outputs. A backend event cost the page a
# queue round trip and, per answer, a pass over the loading status of every component any event
# ever updated (~100 ms of page CPU): re-selection took 357 ms p50 to show, this path 217-225 ms
# (docs/inspector.md). An error goes to #live_error, whose server event shows it as gr.Error.
LIVE_JS = """
async (run, row, layers, opacity, colormap, scale, heat, ...values) => {
  const names = %s;
  const options = Object.fromEntries(names.map((n, i) => [n, values[i]]));
  const seq = (window.__lensLive = (window.__lensLive || 0) + 1);
  let got = null;
  try {
    const r = await fetch('lens/reselect', {
      method: 'POST',
      headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({run, row, layers, opacity, colormap, scale, heat, options}),
    });
    const text = await r.text();
    try { got = JSON.parse(text); } catch (err) { got = null; }
    if (!r.ok && !(got && got.error)) {
      const why = 'HTTP ' + r.status + ': ' + text.slice(0, 200);
      got = {error: 'The server refused the re-selection (' + why + ').'};
    }
  } catch (err) {
    got = {error: 'The re-selection got no answer from the server (' + err + ').'};
  }
  if (seq !== window.__lensLive) return [];  // a later change is on its way: its answer draws
  const out = got.outputs || [];
  const L = window.__lens;
  if (!got.error && out.length && L && L.params && L.render) {
    // The frame first: it loads while Gradio applies the rest (SRC_JS then finds it shown).
    L.params = Object.assign({}, L.params, {run: out[1]});
    L.render();
  }
  if (out.length) {
    // The Run tab's option controls (hidden behind their tab) follow once the frame shows.
    const options = out[out.length - 1];
    out[out.length - 1] = undefined;
    const img = document.querySelector('#frame_img');
    const apply = () => {
      const box = document.querySelector('#run_options textarea, #run_options input');
      if (!box || seq !== window.__lensLive) return;
      box.value = options;
      box.dispatchEvent(new Event('input', {bubbles: true}));
    };
    const later = () => setTimeout(apply, 150);
    if (img && !img.complete) img.addEventListener('load', later, {once: true}); else later();
  }
  if (got.error) {
    const box = document.querySelector('#live_error textarea, #live_error input');
    if (box) {
      box.value = JSON.stringify([seq, got.error]);  // the sequence number: always a change
      box.dispatchEvent(new Event('input', {bubbles: true}));
    }
    return [];
  }
  return out;
}
"""


def frontend_value(block: Any, value: Any) -> Any:
    """``value`` (or a ``gr.update``) for output ``block`` as Gradio's server would send it to the
    page: postprocessed, an update's changed properties applied to a copy of the block first."""
    from gradio.blocks import postprocess_update_dict
    from gradio.data_classes import GradioModel, GradioRootModel

    if isinstance(value, dict) and value.get("__type__") == "update":
        props = {k: v for k, v in value.items() if k not in ("__type__", "value")}
        if props:
            block = type(block)(**{**block.constructor_args, **props, "render": False})
        return postprocess_update_dict(block, dict(value))
    out = block.postprocess(value)
    return out.model_dump() if isinstance(out, GradioModel | GradioRootModel) else out


def raise_live_error(text: str) -> None:
    """Show the error the page got from the re-selection route (``[sequence, message]`` JSON)."""
    try:
        message = str(json.loads(text)[1])
    except (ValueError, TypeError, IndexError):
        return
    raise gr.Error(message)


TOOLS_HTML = """
<div id="frame_tools">
  <button id="zoom_out_btn" title="zoom out (−)">−</button>
  <button id="zoom_in_btn" title="zoom in (+, wheel)">+</button>
  <button id="zoom_fit_btn" title="fit (0)">fit</button>
  <label id="native_toggle" title="decode the source frame at its own size when zoomed in">
    <input type="checkbox" checked> native pixels when zoomed</label>
  <span id="frame_mode"></span>
  <span class="lens-sep"></span>
  <button id="play_btn" title="play / pause (Space)">▶ play</button>
  <select id="play_rate" title="frames per second">
    <option>1</option><option>2</option><option selected>4</option>
    <option>8</option><option>15</option><option>30</option>
  </select> fps
  <span class="lens-sep"></span>
  <button id="set_b_btn" title="remember the current run and layers as B">set B</button>
  <button id="flip_btn" title="A/B flip (b)">A/B flip</button> <span id="b_label"></span>
</div>
"""


def frame_url(
    run_id: str,
    row: int,
    layers: list[str],
    opacity: float,
    colormap: str,
    scale: str,
    heat: str = DEFAULT_HEAT,
) -> str:
    """The app-relative URL of one rendered frame (the same one the browser builds)."""
    q = {"run": run_id, "row": str(int(row)), "l": ",".join(layers), "o": str(opacity), "c": colormap}
    q |= {"s": scale, "h": heat}
    return "lens/frame?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in q.items())


def frame_html(url: str | None, result: RunResult | None = None) -> str:
    """The viewer: the frame image in a zoomable stage, with the hover and pinned block outlines.

    The image carries the processed size (``data-pw/ph``), the source size (``data-nw/nh``)
    and the display aspect (``data-dar``: an anamorphic video is shown stretched to it).
    """
    if url is None or result is None:
        return '<div id="frame_empty">No run open. Choose a video in the Run tab.</div>'
    h, w = result.geometry.processed_hw
    info = result.info
    data = f'data-pw="{w}" data-ph="{h}" data-nw="{info.width}" data-nh="{info.height}"'
    data += f' data-dar="{info.display_aspect:.6f}"'
    return (
        '<div id="frame_stage" data-vh="0.46"><div id="frame_zoom">'
        f'<img id="frame_img" src="{html.escape(url)}" alt="frame" draggable="false" {data}>'
        '<div id="block_hover" class="lens-box"></div><div id="block_pin" class="lens-box lens-pin"></div>'
        "</div></div>"
    )


def info_html(inner: str) -> str:
    # The browser replaces #frame_info_text's content on every frame step (window.__lens.show).
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


def info_of(ws: Workspace, run_id: str, row: float) -> str:
    """The info panel of candidate ``row`` (clamped to the run)."""
    if not run_id:
        return info_html("No run open.")
    result = result_of(ws, run_id)
    row = min(max(int(row), 0), int(result.candidates.frame_indices.size) - 1)
    return info_html(info_fragment(ws, run_id, row))


def legends_of(
    ws: Workspace,
    run_id: str,
    layers: list[str],
    opacity: float,
    cmap: str,
    scale: str,
    heat: str,
    codec: list[str] | None = None,
) -> tuple[str, str]:
    """The colour legend of the chosen layers (and codec layers) and the heatmap's bar with its
    unit and range."""
    from backend.runs.source_frame import codec_layer_support
    from views.inspector.codec_layers import codec_layer_note, parse_codec_layers
    from views.inspector.legend import prepare_colour_legend, prepare_heat_legend

    try:
        opts = layer_options(layers or [], opacity, cmap, scale, heat)
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    kinds = parse_codec_layers(codec)
    if not run_id:
        return prepare_colour_legend(opts, kinds), ""
    result = result_of(ws, run_id)
    note = codec_layer_note(codec_layer_support(result.info.codec_name), result.info.codec_name, kinds)
    return prepare_colour_legend(opts, kinds, note), prepare_heat_legend(result, opts)


def summary_of(ws: Workspace, run_id: str, result: RunResult, stored_row: Any = None) -> str:
    """The run's summary with its stored pipeline time, and what reopening it cost when that differs
    (``stored_row``: the run's store row when the caller has it)."""
    from views.inspector import run_summary

    stored = (stored_row or ws.store.get_run(run_id)).timings.get("total")
    shown = result.timings_secs.get("total")
    reopen = shown if stored is not None and shown is not None and abs(shown - stored) > 1e-3 else None
    return run_summary.prepare_summary(result, pipeline_secs=stored, reopen_secs=reopen)


def _shown(value: Any) -> Any:
    """A table cell as read: floats to four significant digits, whole ones without decimals (a
    readiness threshold of 176242.20957880435 reads 176242; 0.5312 stays 0.5312)."""
    if not isinstance(value, float) or not math.isfinite(value) or value == 0:
        return value
    digits = max(0, 3 - math.floor(math.log10(abs(value))))
    return round(value) if digits == 0 else round(value, digits)


def groups_table_html(rows: list[dict[str, Any]], current: int | None = None) -> str:
    """The groups table (one row per group, numbers as :func:`_shown` reads them), the viewed
    group's row marked; the page moves the mark as the viewer moves (SRC_JS)."""
    if not rows:
        return '<div class="lens-groups">No groups.</div>'
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = ""
    for r in rows:
        mark = ' class="lens-current"' if r["group_index"] == current else ""
        cells = "".join(f"<td>{html.escape(str(_shown(v)))}</td>" for v in r.values())
        body += f'<tr data-group="{r["group_index"]}"{mark}>{cells}</tr>'
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="lens-groups">{table}</div>'


def open_view(
    ws: Workspace,
    run_id: str,
    row: int,
    layers: list[str],
    opacity: float,
    cmap: str,
    scale: str,
    heat: str = DEFAULT_HEAT,
    *,
    skip: tuple[str, ...] = (),
) -> tuple[Any, ...]:
    """Every output that depends on the open run (:data:`VIEW_OUTPUTS`); those named in ``skip``
    are left as they are (``gr.update()``, not drawn)."""
    from views.figure_style import figure_json
    from views.inspector import group_stepper, signal_plots, timeline
    from views.inspector.navigation import group_of_row

    result = result_of(ws, run_id)
    stored = ws.store.get_run(run_id)
    n = int(result.candidates.frame_indices.size)
    row = min(max(int(row), 0), n - 1)
    group = group_of_row(result, row)
    cursor = int(result.candidates.frame_indices[row])

    def table() -> str:
        return groups_table_html(group_stepper.prepare_group_table(result), group)

    @functools.cache
    def legends() -> tuple[str, str]:
        return legends_of(ws, run_id, layers, opacity, cmap, scale, heat)

    # Drawn only when not skipped (plots cost ~10 ms each).
    draw: dict[str, Any] = {
        "summary": lambda: summary_of(ws, run_id, result, stored),
        "slider": lambda: gr.update(maximum=n - 1, value=row),
        "frames": lambda: json.dumps([int(f) for f in result.candidates.frame_indices]),
        "groups": lambda: json.dumps([[s.start, s.end, s.group_index] for s in result.groups.specs]),
        "frame": lambda: frame_html(frame_url(run_id, row, layers, opacity, cmap, scale, heat), result),
        "info": lambda: info_of(ws, run_id, row),
        "colour_legend": lambda: legends()[0],
        "heat_legend": lambda: legends()[1],
        "timeline": lambda: figure_json(timeline.prepare_timeline(result, cursor_frame_index=cursor)),
        "signal_plots": lambda: figure_json(
            signal_plots.prepare_signal_plots(result, cursor_frame_index=cursor)
        ),
        "groups_table": table,
        "group_pick": lambda: gr.update(choices=[s.group_index for s in result.groups.specs], value=group),
        "readiness_plot": lambda: (
            "" if group is None else figure_json(group_stepper.prepare_readiness_plot(result, group))
        ),
        "shown_run": lambda: run_id,
        "video_path": lambda: gr.update(value=stored.video_path),
    }
    outputs = tuple(gr.update() if name in skip else draw[name]() for name in VIEW_OUTPUTS)
    if ws.warm_frame is not None:
        # The page asks for the frame only once this view is on screen (or, skipped, moves its
        # image to the run itself): start rendering it now.
        ws.warm_frame(run_id, row, layers, opacity, cmap, scale, heat)
    return outputs


def show_run(
    ws: Workspace,
    run_id: str,
    shown_run: str,
    row: float,
    layers: list[str],
    opacity: float,
    cmap: str,
    scale: str,
    heat: str = DEFAULT_HEAT,
) -> tuple[Any, ...]:
    """Show run ``run_id`` where its viewer was left last time (or at its first frame).

    Returns the view outputs, then the layers, opacity and colormap it was left with. When the
    viewer already shows ``run_id`` (``shown_run``: a live re-selection drew it) nothing changes.
    The Run tab's option controls follow the run through :func:`app.tabs.run.opened_options_json`.
    """
    from backend.render import LAYER_NAMES

    if not run_id or shown_run == run_id:
        return (gr.update(),) * (len(VIEW_OUTPUTS) + 3)
    try:
        view = ws.store.load_view(run_id) or {}
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    layers = [x for x in view.get("layers", layers) if x in LAYER_NAMES]
    opacity, cmap = float(view.get("opacity", opacity)), view.get("colormap", cmap)
    outputs = open_view(ws, run_id, int(view.get("row", 0)), layers, opacity, cmap, scale, heat)
    return (*outputs, layers, opacity, cmap)


def step(ws: Workspace, run_id: str, row: float, action: str) -> int:
    """The candidate row after navigation ``action`` (views.inspector.navigation.ACTIONS)."""
    from views.inspector import navigation

    return navigation.navigate(result_of(ws, run_id), int(row), action)


def key_map_html() -> str:
    """The key map (hidden until ``?``; a second ``?`` hides it again)."""
    from views.inspector import navigation

    items = "".join(f"<li><kbd>{html.escape(k)}</kbd> {html.escape(d)}</li>" for k, d in navigation.KEY_MAP)
    return f"<b>Keys</b> (press <kbd>?</kbd> again to hide)<ul>{items}</ul>"


def jump(ws: Workspace, run_id: str, frame: Any, row: float = 0) -> int:
    """The candidate row nearest frame ``frame`` (a click anywhere on a plot): never an error for
    a value that is not a frame number; the viewer then stays on ``row``."""
    from views.inspector import navigation

    try:
        current = int(row or 0)
    except (TypeError, ValueError):
        current = 0
    return navigation.row_for_frame(result_of(ws, run_id), frame, default_row=current)


def pick_block(ws: Workspace, run_id: str, row: float, xy: str) -> str:
    """The readout table of the block at processed pixel ``xy`` ("x,y") of candidate ``row``."""
    from views.inspector.readout import block_readout_html

    try:
        x, y = (int(v) for v in xy.split(","))
        return block_readout_html(result_of(ws, run_id), int(row), x, y)[0]
    except ValueError as exc:
        raise gr.Error(f"bad block position {xy!r}") from exc


def show_group(ws: Workspace, run_id: str, group: Any) -> tuple[Any, Any]:
    """The readiness plot of ``group`` (figure JSON) and its first candidate row (for the slider)."""
    from views.figure_style import figure_json
    from views.inspector import group_stepper

    if group is None or not run_id:
        return gr.update(), gr.update()
    result = result_of(ws, run_id)
    specs = {s.group_index: s for s in result.groups.specs}
    try:
        spec = specs[int(group)]
    except (KeyError, TypeError, ValueError) as exc:
        raise gr.Error(f"Run {run_id} has no group {group!r}: its groups are 0 to {len(specs) - 1}.") from exc
    return figure_json(group_stepper.prepare_readiness_plot(result, spec.group_index)), spec.start


def follow_group(ws: Workspace, run_id: str, row: float, shown_group: Any) -> tuple[Any, Any]:
    """The group stepper follows the viewer: the group of candidate ``row`` and its readiness
    plot (figure JSON), unchanged (nothing sent) while the row stays in ``shown_group``."""
    from views.figure_style import figure_json
    from views.inspector import group_stepper
    from views.inspector.navigation import group_of_row

    if not run_id:
        return gr.update(), gr.update()
    result = result_of(ws, run_id)
    n = int(result.candidates.frame_indices.size)
    group = group_of_row(result, min(max(int(row or 0), 0), n - 1))
    if group is None or str(shown_group) == str(group):
        return gr.update(), gr.update()
    return gr.update(value=group), figure_json(group_stepper.prepare_readiness_plot(result, group))


def reselect_live(
    ws: Workspace, names: list[str], run_id: str, row: float, view: LiveView, values: list[Any]
) -> tuple[Any, ...]:
    """Re-select the open run with the live options ``names`` = ``values`` from its cached decode
    (nothing decodes): the new run id, then :data:`VIEW_OUTPUTS` without the video path; the old
    run's viewer is saved. All :func:`gr.update` when no option changed.

    Raises ``gr.Error`` when the run has no cached decode to re-select from (then Run it again).
    """
    outputs, finish = reselect_live_answer(ws, names, run_id, row, view, values)
    finish()
    return outputs


def reselect_live_answer(
    ws: Workspace,
    names: list[str],
    run_id: str,
    row: float,
    view: LiveView,
    values: list[Any],
    *,
    skip: tuple[str, ...] = (),
) -> tuple[tuple[Any, ...], Callable[[], None]]:
    """:func:`reselect_live`'s outputs (those named in ``skip`` left unchanged, not drawn), and
    what is left once the page has them (``finish``: save the old run's viewer, close the session
    file). Until ``finish`` runs the file stays open."""
    steps = reselect_live_steps(ws, names, run_id, row, view, values, skip=skip)
    outputs = next(steps)

    def finish() -> None:
        for _ in steps:
            pass

    return outputs, finish


def reselect_live_steps(
    ws: Workspace,
    names: list[str],
    run_id: str,
    row: float,
    view: LiveView,
    values: list[Any],
    *,
    skip: tuple[str, ...] = (),
) -> Iterator[tuple[Any, ...]]:
    """:func:`reselect_live` in two steps: yields the outputs as soon as they are ready, and only
    then saves the old run's viewer and closes the session file (DuckDB writes its log into the
    file on close, 20-200 ms the page need not wait for)."""
    from app.tabs.run import selection_options
    from app.tabs.sessions import save_view
    from backend.runs import reselect

    result_of(ws, run_id)  # gr.Error when no run is open or it cannot open
    with ws.store.held():  # one open of the file for this handler's calls (~20 ms each otherwise)
        parent = ws.store.get_run(run_id)
        if parent.selector != "cvp":
            raise gr.Error(
                f"The live options re-select cvp runs; run {run_id} was made by the {parent.selector} "
                "selector: change its options in the Run tab."
            )
        current = {k: parent.config.get(k) for k in names}
        options = selection_options(names, values, base=parent.config)
        changes = {k: getattr(options, k) for k in names if getattr(options, k) != current[k]}
        if not changes:
            yield (gr.update(),) * len(VIEW_OUTPUTS)
            return
        key = parent.cache_key
        if not key or (key not in ws.memory and ws.store.cache_lookup(key) is None):
            raise gr.Error("This run's decode is no longer cached: run it again from the Run tab.")
        layers, opacity, cmap, scale, heat = view
        try:
            new_id, new_result, _how = reselect(ws.store, run_id, changes, memory=ws.memory, parent=parent)
        except CodecLensError as exc:
            raise ui_error(exc) from exc
        ws.remember(new_id, new_result)
        # The candidates do not change: the viewer stays on the same row.
        skipped = (*skip, "video_path")
        shown = open_view(ws, new_id, int(row), layers, opacity, cmap, scale, heat, skip=skipped)
        yield (new_id, *shown[:-1])
        try:
            save_view(ws, run_id, row, layers, opacity, cmap)
        except CodecLensError as exc:
            raise ui_error(exc) from exc


# -- components ----------------------------------------------------------------------------------


@dataclass
class SharedControls:
    """The page's top: the open run's summary and the hidden controls the keys and clicks drive."""

    summary: Any
    run_id: Any
    frames: Any
    groups: Any
    follow_row: Any
    shown_run: Any
    key_buttons: dict[str, Any]
    jump_frame: Any
    jump_btn: Any
    run_options: Any
    figures: dict[str, Any]
    """The hidden boxes the inspector's figures arrive in (view output → box)."""
    open_btn: Any
    """Pressed by the page when run_id names a run the viewer does not show (OPEN_IF_NEW_JS)."""
    live_error: Any
    """Where the page puts an error of the re-selection route (LIVE_JS) for the server to show."""


def hidden_box(value: str, elem_id: str, *, label: str | None = None) -> Any:
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
        frames = hidden_box("[]", "frames_json")
        groups = hidden_box("[]", "groups_json")
        # "row n": the viewer entered another group (SRC_JS); n makes every entry a change.
        follow_row = hidden_box("", "follow_row")
        shown_run = hidden_box("", "shown_run")
        key_buttons = {a: gr.Button(a, elem_id=f"k_{a}") for a in navigation.ACTIONS}
        jump_frame = hidden_box("", "jump_frame")
        jump_btn = gr.Button("jump", elem_id="jump_btn")
        # The open run's option values for the Run tab's controls, as one JSON text that the page
        # spreads over them (app.tabs.run.APPLY_OPTIONS_JS): see wire_inspect_tab.
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
        jump_frame,
        jump_btn,
        run_options,
        figures,
        open_btn,
        live_error,
    )


@dataclass
class InspectTab:
    """The Inspect tab's components."""

    frame: Any
    info: Any
    slider: Any
    steps: dict[str, Any]
    block: Any
    pixel: Any
    colour_legend: Any
    heat_legend: Any
    layers: Any
    codec: Any
    heat: Any
    opacity: Any
    colormap: Any
    scale: Any
    live: dict[str, Any]
    plot: Any
    signal_plot: Any
    groups_table: Any
    group_pick: Any
    steps_plot: Any

    @property
    def view_controls(self) -> list[Any]:
        """The viewer's inputs: candidate row, layers, opacity, colormap, heatmap scale, heat source."""
        return [self.slider, self.layers, self.opacity, self.colormap, self.scale, self.heat]


def _build_viewer() -> tuple[Any, ...]:
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
    from app.tabs.run import option_controls
    from backend.render import DEFAULT_LAYERS, LAYER_LABELS, LAYER_NAMES
    from views.inspector.codec_layers import CODEC_LAYER_LABELS, CODEC_LAYERS
    from views.inspector.frame_layers import COLORMAPS, SCALES

    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            frame, info, slider, steps = _build_viewer()
        with gr.Column(scale=2):
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
                "Re-select live: grouping and selection options", open=False, elem_id="live_box"
            ):
                gr.Markdown("A change re-selects the open run from its cached decode (nothing decodes).")
                with gr.Row(equal_height=False):
                    live = option_controls(names=LIVE_OPTIONS, prefix="live_")
    build_export_panel(ws, shared.run_id, slider)
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


def _view_outputs(shared: SharedControls, tab: InspectTab, video_path: Any) -> list[Any]:
    return [
        shared.summary,
        tab.slider,
        shared.frames,
        shared.groups,
        tab.frame,
        tab.info,
        tab.colour_legend,
        tab.heat_legend,
        shared.figures["timeline"],
        shared.figures["signal_plots"],
        tab.groups_table,
        tab.group_pick,
        shared.figures["readiness_plot"],
        shared.shown_run,
        video_path,
    ]


def wire_inspect_tab(
    ws: Workspace, shared: SharedControls, tab: InspectTab, video_path: Any, layout: OptionLayout
) -> Callable[[dict[str, Any]], tuple[dict[str, Any], Callable[[], None] | None]]:
    """Opening a run (which also fills the Run tab's ``video_path`` and, through
    ``shared.run_options``, the option controls ``layout`` lists), frame steps, keys, plot clicks,
    the group stepper, legends and live re-selection.

    Returns what the ``/lens/reselect`` route calls (app.server): a live option change is
    re-selected there, not in a Gradio event (LIVE_JS).
    """
    from app.tabs.run import opened_options_json

    rid = shared.run_id
    view_outputs = _view_outputs(shared, tab, video_path)

    # Every backend event costs the page a pass over the loading status of each component any
    # event ever updated (Gradio 6's update_loading_stati_state, a tree search per component):
    # the dozens of Run-tab controls are therefore filled by one JSON text and a page-side
    # function, not as outputs of this event, and a live re-selection (shown == r) changes none.
    def on_run(r, shown, row, lay, op, cm, sc, ht):
        if not r:
            return (gr.update(),) * (len(VIEW_OUTPUTS) + 4 + len(tab.live))
        with ws.store.held():  # one open of the file for all three
            out = show_run(ws, r, shown, row, lay, op, cm, sc, ht)
            config = ws.store.get_run(r).config
            options = opened_options_json(ws, r, layout)
        # A live re-selection (shown == r) drew the view and set the live controls itself.
        live = (gr.update(value=config[n]) if n in config and shown != r else gr.update() for n in tab.live)
        return (*out, options, *live)

    # Only a run the viewer does not show yet opens through the server: a live re-selection drew
    # its run itself, and a backend event costs the page a round trip and two status passes.
    shared.open_btn.click(
        on_run,
        [rid, shared.shown_run, *tab.view_controls],
        [*view_outputs, tab.layers, tab.opacity, tab.colormap, shared.run_options, *tab.live.values()],
        api_name=False,
    )
    rid.change(None, [rid, shared.shown_run], None, js=OPEN_IF_NEW_JS, api_name=False)
    plots = {"timeline": tab.plot, "signal_plots": tab.signal_plot, "readiness_plot": tab.steps_plot}
    for name, box in shared.figures.items():
        later = "true" if name in LATER_OUTPUTS else "false"
        box.change(None, box, plots[name], js=PLOT_JS % (name, later), api_name=False)
    src_inputs = [tab.slider, rid, tab.layers, tab.opacity, tab.colormap, tab.scale, tab.heat, shared.frames]
    src_inputs += [tab.codec, shared.groups]
    for c in [tab.slider, rid, *tab.view_controls[1:], tab.codec]:
        c.change(None, src_inputs, None, js=SRC_JS, api_name=False)
    for c in [*tab.view_controls[1:], tab.codec]:
        c.change(
            lambda r, lay, op, cm, sc, ht, k: legends_of(ws, r, lay, op, cm, sc, ht, k),
            [rid, tab.layers, tab.opacity, tab.colormap, tab.scale, tab.heat, tab.codec],
            [tab.colour_legend, tab.heat_legend],
            api_name=False,
            show_progress="hidden",
        )
    # Not on every slider change: frame steps make no Gradio event (SRC_JS fills follow_row
    # when the viewer enters another group).
    shared.follow_row.change(
        lambda r, text, g: follow_group(ws, r, (text or "0").split()[0], g),
        [rid, shared.follow_row, tab.group_pick],
        [tab.group_pick, shared.figures["readiness_plot"]],
        api_name=False,
        show_progress="hidden",
    )
    for action, button in [*shared.key_buttons.items(), *tab.steps.items()]:
        if action in STEP_JS:
            # One-frame steps and the ends need no server: the slider knows its range.
            button.click(None, tab.slider, tab.slider, js=STEP_JS[action], api_name=False)
        else:
            button.click(
                lambda r, row, a=action: step(ws, r, row, a), [rid, tab.slider], tab.slider, api_name=False
            )
    shared.jump_btn.click(
        lambda r, x, row: jump(ws, r, x, row),
        [rid, shared.jump_frame, tab.slider],
        tab.slider,
        api_name=False,
    )
    tab.group_pick.input(
        lambda r, g: show_group(ws, r, g),
        [rid, tab.group_pick],
        [shared.figures["readiness_plot"], tab.slider],
        api_name=False,
    )
    names = list(tab.live)
    # shown_run goes first: Gradio applies an answer's outputs in order and starts run_id's change
    # events as it applies run_id, so they must already read the new shown_run (OPEN_IF_NEW_JS).
    at = VIEW_OUTPUTS.index("shown_run")
    others = [c for name, c in zip(VIEW_OUTPUTS[:-1], view_outputs[:-1], strict=True) if name != "shown_run"]

    targets = [shared.shown_run, rid, *others, shared.run_options]

    def live_route(body: dict[str, Any]) -> tuple[dict[str, Any], Callable[[], None] | None]:
        """``/lens/reselect``: ``{"outputs": [...]}`` (the page's values for ``targets``; none when
        no option changed) or ``{"error": message}``, and what to do once it is sent."""
        view = (body["layers"], body["opacity"], body["colormap"], body["scale"], body["heat"])
        asked = dict(body["options"])
        unknown = sorted(set(asked) - set(names))
        if unknown:
            return {
                "error": f"Invalid live option ({unknown[0]}). Supported values are {', '.join(names)}."
            }, None
        run = body["run"]
        try:
            out, finish = reselect_live_answer(
                ws, list(asked), run, body["row"], view, list(asked.values()), skip=LIVE_KEEPS
            )
        except gr.Error as exc:
            return {"error": exc.message}, None
        try:
            if not isinstance(out[0], str):
                return {"outputs": []}, finish
            # Every component update costs the page 5-20 ms: what did not change is not sent.
            # (LIVE_KEEPS were not drawn; the heat legend is dropped when the scores did not change.)
            view_now = dict(zip(VIEW_OUTPUTS[:-1], out[1:], strict=True))
            if view_now["heat_legend"] == legends_of(ws, run, *view)[1]:
                view_now["heat_legend"] = gr.update()
            shown = tuple(view_now.values())
            options = opened_options_json(ws, out[0], layout)
            values = (shown[at], out[0], *shown[:at], *shown[at + 1 :], options)
            return {"outputs": [frontend_value(c, v) for c, v in zip(targets, values, strict=True)]}, finish
        except gr.Error as exc:
            finish()
            return {"error": exc.message}, None

    for control in tab.live.values():
        control.input(
            None,
            [rid, *tab.view_controls, *tab.live.values()],
            targets,
            js=LIVE_JS % json.dumps(names),
            api_name=False,
        )
    shared.live_error.change(
        raise_live_error, shared.live_error, None, api_name=False, show_progress="hidden"
    )
    return live_route
