"""Export panel: the annotated clip (or frames, tables, YUView statistics) and figures of the open run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import ui_error
from app.workers import Cleanup, job_store, run_job, session_of
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace

EXPORT_FOLDER = "exports"
"""Sub-folder of the workspace's output root that the panel writes into."""
EXTRAS = ("frame & block CSV", "YUView statistics")
FIGURES = ("timeline", "readiness")
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
    return f"{run_id}_{span}_{time.strftime('%Y%m%d-%H%M%S')}"


def export_clip(
    ws: Workspace,
    run_id: str,
    form: ClipForm,
    *,
    on_progress: Callable[[float], None] | None = None,
    session: str = "",
) -> list[str]:
    """Write an export of ``run_id`` as ``form`` says under ``<output root>/exports/`` (in a worker);
    the file paths.

    Raises the backend's errors (OutputError for paths, ValueError for names and ranges).
    """
    from app import jobs
    from backend.export import ExportConfig

    fmt, extras = form.fmt, form.extras or []
    frames = _range(form.start, form.stop)
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
        layers=tuple(form.layers or []),
        tables=EXTRAS[0] in extras,
        yuview=EXTRAS[1] in extras,
    )
    stem = name if fmt == "png" else name.rsplit(".", 1)[0]
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
    """Write the run's timeline or a group's readiness figure (with a sidecar); return the paths.

    Paper style, as the CLI's; the timeline spans ``frames`` (None: the whole video).
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
    out = ws.output_path(Path(EXPORT_FOLDER) / f"{run_id}_{figure}_{time.strftime('%Y%m%d-%H%M%S')}")
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


def build_export_panel(ws: Workspace, run_id: gr.Textbox, frame_slider: gr.Slider | None = None) -> None:
    """An Export accordion in the caller's current Blocks context.

    Layers, a frame_index range, the clip format, its size (source or processed resolution, a
    scale or a width) and extras; an Export button that writes under
    ``ws.output_path('exports/…')`` and offers the files (clip, CSV, sidecar) for download; and a
    figure export (timeline over the range, or readiness, PNG/SVG/PDF/HTML). With
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
