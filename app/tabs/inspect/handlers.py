"""Inspect tab handlers: plain functions of the workspace the tab's events call (tested by calling them)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

import gradio as gr

from app.tabs.common import ui_error
from app.tabs.inspect.fragments import frame_html, frame_url, groups_table_html, info_html
from app.tabs.inspect.routes import ViewSettings, info_fragment
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace
    from backend.pipeline import RunResult
    from backend.store.runs import RunRow

T = TypeVar("T")

APP_STARTED_AT = datetime.now(timezone.utc).replace(tzinfo=None)
"""When this app's process started, in UTC without a zone (as the store's timestamps): a run
created since was computed while it ran, not a stored run it reopened."""


class ViewOutputs(NamedTuple, Generic[T]):
    """Every output that depends on the open run, by name: the components (app.tabs.inspect.wiring)
    or the values :func:`open_view` gives them, in the same order (the Run tab's video path last)."""

    summary: T
    slider: T
    frames: T
    groups: T
    frame: T
    info: T
    colour_legend: T
    heat_legend: T
    timeline: T
    signal_plots: T
    groups_table: T
    group_pick: T
    readiness_plot: T
    shown_run: T
    video_path: T


VIEW_OUTPUTS: tuple[str, ...] = ViewOutputs._fields
"""The names of :class:`ViewOutputs`, in order."""


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
    ws: Workspace, run_id: str, view: ViewSettings, codec: list[str] | None = None
) -> tuple[str, str]:
    """The colour legend of the chosen layers (and codec layers) and the heatmap's bar with its
    unit and range."""
    from backend.runs.source_frame import codec_layer_support
    from views.inspector.codec_layers import codec_layer_note, parse_codec_layers
    from views.inspector.legend import prepare_colour_legend, prepare_heat_legend

    try:
        opts = ViewSettings(view.layers or [], view.opacity, view.colormap, view.scale, view.heat).options()
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    kinds = parse_codec_layers(codec)
    if not run_id:
        return prepare_colour_legend(opts, kinds), ""
    result = result_of(ws, run_id)
    note = codec_layer_note(codec_layer_support(result.info.codec_name), result.info.codec_name, kinds)
    return prepare_colour_legend(opts, kinds, note), prepare_heat_legend(result, opts)


def summary_of(
    ws: Workspace,
    run_id: str,
    result: RunResult,
    stored_row: RunRow | None = None,
    *,
    app_started_at: datetime | None = None,
) -> str:
    """The run's summary with its stored pipeline time and where the run comes from: computed
    since this app started (``app_started_at``, default :data:`APP_STARTED_AT`), or a stored run
    reopened from the cache, with what reopening it cost (``stored_row``: the run's store row
    when the caller has it)."""
    from views.inspector import run_summary

    row = stored_row or ws.store.get_run(run_id)
    stored = row.timings.get("total")
    note = provenance_note(row, result, app_started_at or APP_STARTED_AT)
    return run_summary.prepare_summary(result, pipeline_secs=stored, provenance=note)


def provenance_note(row: RunRow, result: RunResult, app_started_at: datetime) -> str:
    """Where the run on screen comes from, in words: ``computed at HH:MM:SS UTC`` for a run
    created since ``app_started_at``, else ``stored run computed <date>, reopened from the cache
    in N s`` (a worker computes a new run and the app then opens it from the cache too, which is
    not a reopened run); '' without a creation time."""
    created = row.created_at
    if created is None:
        return ""
    if created >= app_started_at:
        return f"computed at {created:%H:%M:%S} UTC"
    stored, shown = row.timings.get("total"), result.timings_secs.get("total")
    note = f"stored run computed {created:%Y-%m-%d %H:%M} UTC"
    if stored is not None and shown is not None and abs(shown - stored) > 1e-3:
        note += f", reopened from the cache in {shown:.2f} s"
    return note


@dataclass
class LastViewed:
    """The run a page of this app showed last: a new page opens it (``fallback``, the run the
    app started on, until a page showed one)."""

    fallback: str | None = None
    run_id: str | None = None

    def saw(self, run_id: str) -> None:
        """A page now shows run ``run_id``."""
        if run_id:
            self.run_id = run_id

    def to_open(self, ws: Workspace) -> str | None:
        """The run a new page opens: the last one shown while it is still stored, else ``fallback``."""
        if self.run_id:
            try:
                if ws.store.get_run(self.run_id).status == "done":
                    return self.run_id
            except CodecLensError:
                pass  # gone from the store (another session file, a deleted run): the fallback
        return self.fallback


def _view_drawers(
    ws: Workspace, run_id: str, result: RunResult, row: int, view: ViewSettings, stored: RunRow | None
) -> ViewOutputs[Callable[[], Any]]:
    """How to draw each of :class:`ViewOutputs` for run ``run_id`` (``result``, store row ``stored``
    or None to read it) at candidate ``row``."""
    from views.figure_style import figure_json
    from views.inspector import group_stepper, signal_plots, timeline
    from views.inspector.navigation import group_of_row, keyframe_rows

    if stored is None or stored.run_id != run_id:
        stored = ws.store.get_run(run_id)
    group = group_of_row(result, row)
    cursor = int(result.candidates.frame_indices[row])
    legends = functools.cache(lambda: legends_of(ws, run_id, view))
    specs = result.groups.specs
    return ViewOutputs(
        summary=lambda: summary_of(ws, run_id, result, stored),
        slider=lambda: gr.update(maximum=int(result.candidates.frame_indices.size) - 1, value=row),
        frames=lambda: json.dumps(
            {
                "frames": [int(f) for f in result.candidates.frame_indices],
                "keyframe_rows": [int(r) for r in keyframe_rows(result)],
            }
        ),
        groups=lambda: json.dumps([[s.start, s.end, s.group_index] for s in specs]),
        frame=lambda: frame_html(frame_url(run_id, row, view), result),
        info=lambda: info_of(ws, run_id, row),
        colour_legend=lambda: legends()[0],
        heat_legend=lambda: legends()[1],
        timeline=lambda: figure_json(timeline.timeline_dicts(result, cursor_frame_index=cursor)),
        signal_plots=lambda: figure_json(signal_plots.signal_plot_dicts(result, cursor_frame_index=cursor)),
        groups_table=lambda: groups_table_html(group_stepper.prepare_group_table(result), group),
        group_pick=lambda: gr.update(choices=[s.group_index for s in specs], value=group),
        readiness_plot=lambda: (
            "" if group is None else figure_json(group_stepper.readiness_dicts(result, group, viewed_row=row))
        ),
        shown_run=lambda: run_id,
        video_path=lambda: gr.update(value=stored.video_path),
    )


def open_view(
    ws: Workspace,
    run_id: str,
    row: int,
    view: ViewSettings,
    *,
    skip: tuple[str, ...] = (),
    stored: RunRow | None = None,
) -> ViewOutputs[Any]:
    """Every output that depends on the open run (:class:`ViewOutputs`); those named in ``skip``
    are left as they are (``gr.update()``, not drawn: plots cost ~10 ms each). ``stored``: the
    run's store row, when the caller has just read it."""
    result = result_of(ws, run_id)
    n = int(result.candidates.frame_indices.size)
    row = min(max(int(row), 0), n - 1)
    draw = _view_drawers(ws, run_id, result, row, view, stored)
    outputs = ViewOutputs(
        *(gr.update() if name in skip else d() for name, d in zip(VIEW_OUTPUTS, draw, strict=True))
    )
    if ws.warm_frame is not None:
        # The page asks for the frame only once this view is on screen (or, skipped, moves its
        # image to the run itself): start rendering it now.
        ws.warm_frame(run_id, row, view)
    return outputs


def show_run(ws: Workspace, run_id: str, shown_run: str, row: float, view: ViewSettings) -> tuple[Any, ...]:
    """Show run ``run_id`` where its viewer was left last time (or at its first frame).

    Returns the view outputs, then the layers, opacity and colormap it was left with. When the
    viewer already shows ``run_id`` (``shown_run``: a live re-selection drew it) nothing changes.
    The Run tab's option controls follow the run through
    :func:`app.tabs.option_form.opened_options_json`.
    """
    from backend.render import LAYER_NAMES

    if not run_id or shown_run == run_id:
        return (gr.update(),) * (len(VIEW_OUTPUTS) + 3)
    try:
        saved = ws.store.load_view(run_id) or {}
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    layers = [x for x in saved.get("layers", view.layers) if x in LAYER_NAMES]
    opacity, cmap = float(saved.get("opacity", view.opacity)), saved.get("colormap", view.colormap)
    left = ViewSettings(layers, opacity, cmap, view.scale, view.heat)
    outputs = open_view(ws, run_id, int(saved.get("row", 0)), left)
    return (*outputs, layers, opacity, cmap)


def step(ws: Workspace, run_id: str, row: float, action: str) -> int:
    """The candidate row after navigation ``action`` (views.inspector.navigation.ACTIONS): what the
    page computes itself from the frames and groups boxes (page.js, ``window.__lens.target``)."""
    from views.inspector import navigation

    return navigation.navigate(result_of(ws, run_id), int(row), action)


def jump(ws: Workspace, run_id: str, frame: Any, row: float = 0) -> int:
    """The candidate row nearest frame ``frame`` (a click anywhere on a plot, which the page
    computes itself: page.js, ``window.__lens.jumpToFrame``): never an error for a value that is
    not a frame number; the viewer then stays on ``row``."""
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
    plot = group_stepper.readiness_dicts(result, spec.group_index, viewed_row=spec.start)
    return figure_json(plot), spec.start


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
    viewed = min(max(int(row or 0), 0), n - 1)
    group = group_of_row(result, viewed)
    if group is None or str(shown_group) == str(group):
        return gr.update(), gr.update()
    plot = group_stepper.readiness_dicts(result, group, viewed_row=viewed)
    return gr.update(value=group), figure_json(plot)
