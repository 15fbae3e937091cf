"""Export panel: the annotated clip (or frames, tables, YUView statistics) and figures of the open run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import ui_error
from app.workers import job_store, run_job, session_of
from backend.errors import CodecLensError
from backend.isolation import Cleanup

if TYPE_CHECKING:
    from app.tabs.inspect.routes import ViewSettings
    from app.workspace import Workspace
    from backend.render import LayerOptions

EXPORT_FOLDER = "exports"
"""Sub-folder of the workspace's output root that the panel writes into."""
EXTRAS = ("frame & block CSV", "YUView statistics")
FIGURES = ("timeline", "readiness", "coverage")  # views.export_figures.PLOTS
SIZES = ("source", "processed")  # backend.export.CLIP_SIZES


@dataclass(frozen=True, kw_only=True)
class ClipForm:
    """The Export form's values as the browser sends them (an emptied number box: None, "" or 0)."""

    layers: Sequence[str] | None
    """Names of ``backend.export.EXPORT_LAYERS`` to draw (None: none)."""
    start: float | None = None
    """First frame_index (empty: 0)."""
    stop: float | None = None
    """Exclusive end frame_index (empty or 0: the end)."""
    fmt: str
    """A clip format of ``backend.export.CLIP_FORMATS``, not ``none``."""
    extras: Sequence[str] | None = None
    """Which of :data:`EXTRAS` to write too (None: none)."""
    size: str = "source"
    """``source`` (the video's resolution, decoded again in the worker) or ``processed``."""
    size_factor: float | None = 1.0
    """Multiplies the size (empty: 1)."""
    width_px: float | None = None
    """Sets the width instead (empty or 0: unused)."""


def _range(start: float | None, stop: float | None) -> tuple[int, int | None] | None:
    """(start, stop) frame_index range from the two number boxes; None means every candidate.

    An empty stop box means the end; the browser sends an emptied number box as 0, and an
    exclusive stop of 0 could select nothing, so 0 means the end too.
    """
    if start in (None, "") and stop in (None, "", 0):
        return None
    lo = 0 if start in (None, "") else int(start)
    hi = None if stop in (None, "", 0) else int(stop)
    return lo, hi


def _stem(run_id: str, frames: tuple[int, int | None] | None) -> str:
    span = "all" if frames is None else f"{frames[0]}-{'' if frames[1] is None else frames[1]}"
    return f"{run_id}_{span}_{_now()}"


def _now() -> str:
    """The export's time in its name, to the millisecond: two exports of one view within a second
    (a frame as A, then as B) would otherwise write the same files."""
    now = time.time()
    return f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}-{int(now * 1000) % 1000:03d}"


@dataclass(frozen=True, kw_only=True)
class ViewExport:
    """What "Export this view" exports: the run the viewer shows, drawn exactly as it is drawn."""

    run_id: str
    """The run on screen: A's, or B's when the A/B flip shows B."""
    view: ViewSettings | LayerOptions
    """The viewer's settings (layers, heatmap mode, scale, colormap, opacity)."""
    frames: tuple[int, int | None] | None
    """(start, stop) frame_index range, stop exclusive; None: every candidate."""
    crop: Sequence[float] | None = None
    """The viewer's zoom: (x, y, width, height) in the run's processed-frame pixels; None: whole."""
    side: str = "A"
    """``A`` or ``B``: which side of the A/B flip was on screen (recorded in the sidecar)."""


def _config(
    ws: Workspace, run_id: str, form: ClipForm, frames: tuple[int, int | None] | None, **view: Any
) -> tuple[Any, Path, str]:
    """(ExportConfig, clip path, file stem) of an export of ``run_id`` under ``<output root>/exports/``:
    the form's format, size and extras, ``view`` (ExportConfig's view fields) over its defaults."""
    from backend.export import ExportConfig

    fmt, extras = form.fmt, form.extras or []
    name = _stem(run_id, frames) + ("" if fmt == "png" else f".{fmt}")
    out = ws.output_path(Path(EXPORT_FOLDER) / name)
    config = ExportConfig(
        out_path=out,
        allowed_roots=(ws.output_root,),
        format=fmt,
        frames=frames,
        size=form.size,
        size_factor=1.0 if form.size_factor in (None, "") else float(form.size_factor),
        width_px=None if form.width_px in (None, "", 0) else int(form.width_px),
        tables=EXTRAS[0] in extras,
        yuview=EXTRAS[1] in extras,
        **({"layers": tuple(form.layers or [])} | view),
    )
    return config, out, name if fmt == "png" else name.rsplit(".", 1)[0]


def export_clip(
    ws: Workspace,
    run_id: str,
    form: ClipForm,
    *,
    on_progress: Callable[[float], None] | None = None,
    session: str = "",
) -> list[str]:
    """Write an export of ``run_id`` as ``form`` says under ``<output root>/exports/`` (in a worker);
    the file paths. The heatmap mode, scale, colormap and opacity are the viewer's defaults.

    Raises the backend's errors (OutputError for paths, ValueError for names and ranges).
    """
    config, out, stem = _config(ws, run_id, form, _range(form.start, form.stop))
    return _write(ws, run_id, config, (out, stem), on_progress=on_progress, session=session)


def export_view(
    ws: Workspace,
    request: ViewExport,
    form: ClipForm,
    *,
    on_progress: Callable[[float], None] | None = None,
    session: str = "",
) -> list[str]:
    """Export the viewer's view: ``request.run_id`` over ``request.frames`` drawn with exactly
    ``request.view``'s settings, cut to ``request.crop``, in the form's format and size (its layer
    and range boxes are not used); the sidecar records the settings and the side. The file paths.

    Raises the backend's errors (OutputError for paths, ValueError for names, ranges, a crop).
    """
    from backend.render import layer_names

    opts = request.view.options() if hasattr(request.view, "options") else request.view
    config, out, stem = _config(
        ws,
        request.run_id,
        form,
        request.frames,
        layers=layer_names(opts),
        heat=opts.heat,
        scale=opts.scale,
        colormap=opts.colormap,
        opacity=float(opts.opacity),
        crop=None if request.crop is None else tuple(request.crop),
        side=request.side,
    )
    return _write(ws, request.run_id, config, (out, stem), on_progress=on_progress, session=session)


def _write(
    ws: Workspace,
    run_id: str,
    config: Any,
    where: tuple[Path, str],
    *,
    on_progress: Callable[[float], None] | None,
    session: str,
) -> list[str]:
    """Run the export job of ``config`` in a worker; ``where``: (clip path, file stem) for the clean-up."""
    from app import jobs

    out, stem = where
    # A worker rebuilds the run from the store; here, the run as the app shows it is at hand.
    shown = ws.result(run_id) if ws.pool is None or _is_imported(ws, run_id) else None
    files = run_job(
        ws.pool,
        jobs.export_run,
        job_store(ws),
        run_id,
        config,
        imported=shown is not None and _shows_stored_tokens(ws, run_id, shown),
        result=shown if ws.pool is None else None,
        session=session,
        subject=Path(ws.store.get_run(run_id).video_path).name,
        # Every file of an export starts with its stem; a clip is first written as .<stem>.…partial….
        cleanup=Cleanup(
            written_globs=((out.parent, f"{stem}*"),), partials=((out.parent, f".{stem}.*partial*"),)
        ),
        on_progress=None if on_progress is None else lambda _stage, fraction: on_progress(fraction),
    )
    return list(files)


def _is_imported(ws: Workspace, run_id: str) -> bool:
    from backend.cvp_format import IMPORT_KEY

    return IMPORT_KEY in ws.store.get_run(run_id).config


def _shows_stored_tokens(ws: Workspace, run_id: str, shown: Any) -> bool:
    """Whether the app shows imported run ``run_id`` with cvp's tokens (as right after the import)
    rather than with its recomputation's, so that a worker's export matches what is on screen."""
    import numpy as np

    from backend.cvp_format import imported_view

    return bool(np.array_equal(imported_view(ws.store, run_id, shown).canvases.tokens, shown.canvases.tokens))


def export_figure(
    ws: Workspace,
    run_id: str,
    *,
    figure: str,
    fmt: str,
    group_index: int | None = None,
    frames: tuple[int, int | None] | None = None,
) -> list[str]:
    """Write the run's timeline, a group's readiness figure or the run's coverage figure (with a
    sidecar); return the paths.

    Paper style, as the CLI's; the timeline and the coverage figure's time axes span ``frames``
    (None: the whole video).
    """
    from backend.export import ExportConfig, load_export_run, write_export
    from views.export_figures import prepare_export_figures

    if figure not in FIGURES:
        raise ValueError(f"Invalid figure ({figure!r}). Supported values are {', '.join(FIGURES)}.")
    result = ws.result(run_id)
    groups = None
    if figure == "readiness":
        groups = [group_index if group_index is not None else result.groups.specs[0].group_index]
    figures = prepare_export_figures([(run_id, result)], [figure], groups=groups, frames=frames)
    out = ws.output_path(Path(EXPORT_FOLDER) / f"{run_id}_{figure}_{_now()}")
    config = ExportConfig(
        out_path=out, allowed_roots=(ws.output_root,), format="none", plot_formats=(fmt,), frames=frames
    )
    run = load_export_run(ws.store, run_id, result=result)
    written = write_export([run], config=config, figures=figures)
    return [str(p) for p in written.files]


def _group_of_row(result: Any, row: int) -> int | None:
    for spec in result.groups.specs:
        if spec.start <= row < spec.end:
            return int(spec.group_index)
    return None


def export_files(
    ws: Workspace,
    run_id: str,
    form: ClipForm,
    *,
    on_progress: Callable[[float], None] | None = None,
    session: str = "",
) -> list[str]:
    """The Export button: :func:`export_clip` of the open run, errors as one-line ``gr.Error``."""
    if not run_id:
        raise gr.Error("No run is open: select or open a run first.")
    try:
        return export_clip(ws, run_id, form, on_progress=on_progress, session=session)
    except (CodecLensError, ValueError, OSError) as exc:
        raise ui_error(exc, single_line=True) from exc


def figure_files(
    ws: Workspace,
    run_id: str,
    figure: str,
    fmt: str,
    row: float | None = None,
    *,
    start: float | None = None,
    stop: float | None = None,
) -> list[str]:
    """The Export figure button; with ``row`` (the viewed candidate) the readiness figure is its group's.

    ``start``/``stop``: the panel's frame_index range, which the timeline spans.
    """
    if not run_id:
        raise gr.Error("No run is open: select or open a run first.")
    try:
        group = None if row is None else _group_of_row(ws.result(run_id), int(row))
        return export_figure(
            ws, run_id, figure=figure, fmt=fmt, group_index=group, frames=_range(start, stop)
        )
    except (CodecLensError, ValueError, OSError) as exc:
        raise ui_error(exc, single_line=True) from exc


def viewed_frame_index(ws: Workspace, run_id: str, row: float | None) -> Any:
    """The frame_index of the viewed candidate ``row`` (the range's new start)."""
    if not run_id:
        return gr.update()
    result = ws.result(run_id)
    return int(result.candidates.frame_indices[int(row or 0)])


VIEW_SCOPES = ("the viewed frame", "the From/To range")
"""What "Export this view" exports: the frame on screen, or the panel's frame_index range."""
VIEW_STATE_JS = """() => {
  const L = window.__lens || {};
  const state = L.params && L.shown ? {params: L.shown(), frame_index: L.frameIndex(),
    side: L.flipped && L.b ? 'B' : 'A', crop: L.viewCrop ? L.viewCrop() : null} : null;
  return state ? JSON.stringify(state) : '';
}"""
"""Gradio ``js=`` of "Export this view": the viewer's state as JSON (app/static/page.js keeps it in
``window.__lens``; no DOM call): the shown side's frame parameters (``L.shown()``: run, layers,
opacity, colormap, scale, heat), A's frame_index, the side, and the zoom crop in processed pixels
where the page provides ``L.viewCrop()``."""


def view_request(
    ws: Workspace, state: str, scope: str, start: float | None = None, stop: float | None = None
) -> ViewExport:
    """The :class:`ViewExport` of the page's view state (:data:`VIEW_STATE_JS`'s JSON): the shown
    run and settings, and the frame on screen (B's candidate nearest A's frame when flipped to
    B) or, for the range scope, the panel's From/To boxes.

    Raises
    ------
    ValueError : no view is shown, or a scope outside :data:`VIEW_SCOPES`.
    """
    import json

    from app.tabs.inspect.routes import ViewSettings
    from views.inspector.navigation import row_for_frame

    if scope not in VIEW_SCOPES:
        raise ValueError(f"Invalid scope ({scope!r}). Supported values are {', '.join(VIEW_SCOPES)}.")
    try:
        data = json.loads(state) if state else None
    except json.JSONDecodeError:
        data = None
    params = data.get("params") if isinstance(data, dict) else None
    if not isinstance(params, dict) or not params.get("run"):
        raise ValueError("Invalid view (none is shown). Supported values are a frame open in the viewer.")
    run_id = str(params["run"])
    view = ViewSettings(
        params.get("l") or "",
        float(params.get("o", 0.5)),
        str(params.get("c") or "turbo"),
        str(params.get("s") or "frame"),
        str(params.get("h") or "block"),
    )
    if scope == VIEW_SCOPES[0]:
        result = ws.result(run_id)
        fid = int(result.candidates.frame_indices[row_for_frame(result, data.get("frame_index"))])
        frames: tuple[int, int | None] | None = (fid, fid + 1)
    else:
        frames = _range(start, stop)
    side = "B" if data.get("side") == "B" else "A"
    return ViewExport(run_id=run_id, view=view, frames=frames, crop=data.get("crop"), side=side)


def export_view_files(
    ws: Workspace,
    state: str,
    scope: str,
    form: ClipForm,
    *,
    on_progress: Callable[[float], None] | None = None,
    session: str = "",
) -> list[str]:
    """The "Export this view" button: :func:`export_view` of the page's view state, errors as
    one-line ``gr.Error``."""
    try:
        return export_view(
            ws,
            view_request(ws, state, scope, form.start, form.stop),
            form,
            on_progress=on_progress,
            session=session,
        )
    except (CodecLensError, ValueError, OSError) as exc:
        raise ui_error(exc, single_line=True) from exc


def _size_controls() -> tuple[gr.Radio, gr.Number, gr.Number]:
    """The clip size: its base (source or processed), a scale, or a width."""
    size = gr.Radio(
        list(SIZES),
        value="source",
        label="Size (source: the video's own resolution; processed: the run's frames)",
        elem_id="export_size",
    )
    scale = gr.Number(value=1, minimum=0.1, maximum=8, label="× scale", elem_id="export_scale")
    # No minimum here: Gradio checks it against the empty box (read as 0) and refuses every export
    # that keeps the default size; ExportConfig refuses widths under 16 in one line.
    width = gr.Number(
        value=None,
        precision=0,
        label="or width px (empty: from the scale)",
        elem_id="export_width",
    )
    return size, scale, width


def _view_controls(*, visible: bool) -> tuple[gr.Radio, gr.Button, gr.Textbox]:
    """The "Export this view" row: what to export (:data:`VIEW_SCOPES`), its button and the hidden
    box the page's view state arrives in."""
    with gr.Row(visible=visible):
        view_scope = gr.Radio(
            list(VIEW_SCOPES),
            value=VIEW_SCOPES[0],
            label="Export this view: the viewer's layers, heatmap, zoom, A/B side (format, size above)",
            elem_id="export_view_scope",
        )
        view_btn = gr.Button("Export this view", elem_id="export_view_btn")
        view_state = gr.Textbox("", visible=False, elem_id="export_view_state")
    return view_scope, view_btn, view_state


def _wire_view_export(
    ws: Workspace,
    controls: tuple[gr.Radio, gr.Button, gr.Textbox],
    view_fields: dict[str, Any],
    files: gr.File,
) -> None:
    """The "Export this view" button: the page fills the hidden box with the viewer's state (a
    page-side function, :data:`VIEW_STATE_JS`), then the export reads it with the form
    (``view_fields``: ClipForm field → control, the layers excepted)."""
    view_scope, view_btn, view_state = controls

    def do_view_export(
        request: gr.Request,
        values: dict[Any, Any],
        progress: Any = gr.Progress(),  # noqa: B008
    ) -> list[str]:
        form = ClipForm(layers=None, **{name: values[control] for name, control in view_fields.items()})
        return export_view_files(
            ws,
            values[view_state],
            values[view_scope],
            form,
            on_progress=lambda fraction: progress(fraction, desc="encoding"),
            session=session_of(request),
        )

    view_btn.click(None, None, view_state, js=VIEW_STATE_JS, api_name=False).then(
        do_view_export,
        {view_scope, view_state, *view_fields.values()},
        files,
        api_name=False,
        concurrency_limit=None,
    )


def build_export_panel(ws: Workspace, run_id: gr.Textbox, frame_slider: gr.Slider | None = None) -> None:
    """An Export accordion in the caller's current Blocks context.

    Layers, a frame_index range, the clip format, its size (source or processed resolution, a
    scale or a width) and extras; an Export button that writes under
    ``ws.output_path('exports/…')`` and offers the files (clip, CSV, sidecar) for download; and a
    figure export (timeline or coverage over the range, or readiness, PNG/SVG/PDF/HTML). With
    ``frame_slider`` (the viewer's candidate row) the range can start at the viewed frame and
    the readiness figure is that frame's group. Errors show as ``gr.Error`` in one line.
    """
    from backend.export import CLIP_FORMATS, DEFAULT_LAYERS, EXPORT_LAYERS, FIGURE_FORMATS

    with gr.Accordion("Export", open=False, elem_id="export_panel"):
        with gr.Row():
            layers = gr.CheckboxGroup(
                list(EXPORT_LAYERS), value=list(DEFAULT_LAYERS), label="Layers", elem_id="export_layers"
            )
            fmt = gr.Radio(
                [f for f in CLIP_FORMATS if f != "none"], value="mp4", label="Format", elem_id="export_format"
            )
        with gr.Row():
            start = gr.Number(
                value=0, precision=0, minimum=0, label="From frame_index", elem_id="export_start"
            )
            stop = gr.Number(
                value=None,
                precision=0,
                minimum=0,
                label="To frame_index (exclusive; empty or 0: the end)",
                elem_id="export_stop",
            )
            extras = gr.CheckboxGroup(list(EXTRAS), value=[], label="Also write", elem_id="export_extras")
        with gr.Row():
            size, scale, width = _size_controls()
        with gr.Row():
            here = gr.Button(
                "Start at the viewed frame", elem_id="export_here", visible=frame_slider is not None
            )
            button = gr.Button("Export", variant="primary", elem_id="export_btn")
        view_controls = _view_controls(visible=frame_slider is not None)
        files = gr.File(
            label="Exported files", file_count="multiple", interactive=False, elem_id="export_files"
        )
        with gr.Row():
            figure = gr.Radio(list(FIGURES), value="timeline", label="Figure", elem_id="figure_pick")
            figure_fmt = gr.Radio(
                list(FIGURE_FORMATS), value="png", label="Figure format", elem_id="figure_format"
            )
            figure_btn = gr.Button("Export figure", elem_id="figure_btn")
        figure_out = gr.File(
            label="Exported figure", file_count="multiple", interactive=False, elem_id="figure_files"
        )

    # The ClipForm field each control fills.
    form_fields = {"layers": layers, "start": start, "stop": stop, "fmt": fmt, "extras": extras}
    form_fields |= {"size": size, "size_factor": scale, "width_px": width}

    # The form's values as one dict keyed by component; Gradio injects the request and the
    # progress tracker into the positional parameters around it.
    def do_export(
        request: gr.Request,
        values: dict[Any, Any],
        progress: Any = gr.Progress(),  # noqa: B008
    ) -> list[str]:
        form = ClipForm(**{name: values[control] for name, control in form_fields.items()})
        return export_files(
            ws,
            values[run_id],
            form,
            on_progress=lambda fraction: progress(fraction, desc="encoding"),
            session=session_of(request),
        )

    # The worker pool bounds the work, per session and in all.
    clip_inputs = {run_id, *form_fields.values()}
    button.click(do_export, clip_inputs, files, api_name=False, concurrency_limit=None)

    _wire_view_export(ws, view_controls, {n: c for n, c in form_fields.items() if n != "layers"}, files)
    figure_inputs = [run_id, figure, figure_fmt, start, stop]
    figure_inputs += [frame_slider] if frame_slider is not None else []
    figure_btn.click(
        lambda rid, which, kind, lo, hi, row=None: figure_files(ws, rid, which, kind, row, start=lo, stop=hi),
        figure_inputs,
        figure_out,
        api_name=False,
    )
    if frame_slider is not None:
        here.click(
            lambda rid, row: viewed_frame_index(ws, rid, row), [run_id, frame_slider], start, api_name=False
        )
