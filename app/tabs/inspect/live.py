"""Live re-selection of the open run from its cached decode: the ``/lens/reselect`` route (registered by
app.server) and the handlers behind it."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import ui_error
from app.tabs.inspect.handlers import VIEW_OUTPUTS, LastViewed, legends_of, open_view, result_of
from app.tabs.inspect.routes import ViewSettings, info_fragment
from app.tabs.option_form import OptionLayout, opened_options_json, selection_options
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace
    from backend.store.runs import RunRow

# The grouping and selection options and the hard token budget: changing one re-selects from the
# cached decode at once.
LIVE_OPTIONS = (
    "token_budget",
    "stop_gain",
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
LIVE_KEEPS = ("slider", "frames", "frame", "info", "colour_legend")
"""What a live re-selection leaves to the page or as it was (the route sends no new value): the
candidates (slider, frames) do not change, the page moves the frame's image to the new run and
fetches its info line itself (window.__lens.show), and the colour legend names the layers."""

Finish = Callable[[], None]
"""What is left once the page has the answer: save the old run's viewer, close the session file."""


def frontend_value(block: gr.components.Component, value: Any) -> Any:
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


def live_changes(parent: RunRow, names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    """The live options of ``names`` = ``values`` that differ from run ``parent``'s (name → new value)."""
    current = {k: parent.config.get(k) for k in names}
    options = selection_options(names, values, base=parent.config)
    return {k: getattr(options, k) for k in names if getattr(options, k) != current[k]}


def reselect_live(
    ws: Workspace, names: list[str], run_id: str, row: float, view: ViewSettings, values: list[Any]
) -> tuple[Any, ...]:
    """Re-select the open run with the live options ``names`` = ``values`` from its cached decode
    (nothing decodes): the new run id, then the view outputs without the video path; the old
    run's viewer is saved. All :func:`gr.update` when no option changed.

    Raises ``gr.Error`` when the run has no cached decode to re-select from (then Run it again).
    """
    outputs, finish, _ = reselect_live_answer(ws, names, run_id, row, view, values)
    finish()
    return outputs


def reselect_live_answer(
    ws: Workspace,
    names: list[str],
    run_id: str,
    row: float,
    view: ViewSettings,
    values: list[Any],
    *,
    skip: tuple[str, ...] = (),
    marks: dict[str, float] | None = None,
) -> tuple[tuple[Any, ...], Finish, RunRow | None]:
    """:func:`reselect_live`'s outputs (those named in ``skip`` left unchanged, not drawn), what
    is left once the page has them (``finish``; until it runs the file stays open), and the new
    run's store row (None when no option changed)."""
    steps = reselect_live_steps(ws, names, run_id, row, view, values, skip=skip, marks=marks)
    outputs, new_row = next(steps)

    def finish() -> None:
        for _ in steps:
            pass

    return outputs, finish, new_row


def reselect_live_steps(
    ws: Workspace,
    names: list[str],
    run_id: str,
    row: float,
    view: ViewSettings,
    values: list[Any],
    *,
    skip: tuple[str, ...] = (),
    marks: dict[str, float] | None = None,
) -> Iterator[tuple[tuple[Any, ...], RunRow | None]]:
    """:func:`reselect_live` in two steps: yields the outputs (and the new run's store row) as
    soon as they are ready, and only then saves the old run's viewer and closes the session file
    (DuckDB writes its log into the file on close, 20-200 ms the page need not wait for).
    ``marks`` learns when each part ended (``open``, ``select``, ``view``: perf_counter seconds)."""
    from app.tabs.sessions import save_view
    from backend.runs import plan_reselection, run_plan

    result_of(ws, run_id)  # gr.Error when no run is open or it cannot open
    marks = {} if marks is None else marks
    with ws.store.held():  # one open of the file for this handler's calls (~20 ms each otherwise)
        marks["open"] = time.perf_counter()
        parent = ws.store.get_run(run_id)
        if parent.selector != "cvp":
            raise gr.Error(
                f"The live options re-select cvp runs; run {run_id} was made by the {parent.selector} "
                "selector: change its options in the Run tab."
            )
        changes = live_changes(parent, names, values)
        if not changes:
            yield (gr.update(),) * len(VIEW_OUTPUTS), None
            return
        try:
            plan = plan_reselection(ws.store, parent, changes, memory=ws.memory)
            # The live options are grouping and selection options: only an evicted cache decodes.
            if plan.decodes:
                raise gr.Error("This run's decode is no longer cached: run it again from the Run tab.")
            new_id, new_result, _how = run_plan(ws.store, plan, memory=ws.memory)
        except CodecLensError as exc:
            raise ui_error(exc) from exc
        ws.remember(new_id, new_result)
        marks["select"] = time.perf_counter()
        try:
            new_row = ws.store.get_run(new_id)
        except CodecLensError as exc:
            raise ui_error(exc) from exc
        # The candidates do not change: the viewer stays on the same row.
        shown = open_view(ws, new_id, int(row), view, skip=(*skip, "video_path"), stored=new_row)
        marks["view"] = time.perf_counter()
        yield (new_id, *shown[:-1]), new_row
        try:
            save_view(ws, run_id, row, view.layers, view.opacity, view.colormap)
        except CodecLensError as exc:
            raise ui_error(exc) from exc


@dataclass(frozen=True)
class LiveRoute:
    """What ``/lens/reselect`` answers for: the live options, the components its answer fills, in
    order (shown_run, run_id, the view outputs without those two and the video path, the Run
    tab's options box), the Run tab's option layout, and what learns the run shown."""

    names: tuple[str, ...]
    targets: tuple[gr.components.Component, ...]
    layout: OptionLayout
    viewed: LastViewed = field(default_factory=LastViewed)


def reselect_route(
    ws: Workspace, route: LiveRoute, body: dict[str, Any]
) -> tuple[dict[str, Any], Finish | None]:
    """``/lens/reselect``: ``{"outputs": [...]}`` (the page's values for ``route.targets``; none
    when no option changed) or ``{"error": message}``, and what to do once it is sent. An answer
    with outputs also holds ``timing``: ms of each part (``open`` the session file, ``select``,
    ``view``, ``outputs``, ``info``), which the server sends as its Server-Timing."""
    marks = {"start": time.perf_counter()}
    view = ViewSettings(body["layers"], body["opacity"], body["colormap"], body["scale"], body["heat"])
    asked = dict(body["options"])
    unknown = sorted(set(asked) - set(route.names))
    if unknown:
        supported = ", ".join(route.names)
        return {"error": f"Invalid live option ({unknown[0]}). Supported values are {supported}."}, None
    run = body["run"]
    try:
        out, finish, new_row = reselect_live_answer(
            ws, list(asked), run, body["row"], view, list(asked.values()), skip=LIVE_KEEPS, marks=marks
        )
    except gr.Error as exc:
        return {"error": exc.message}, None
    try:
        if not isinstance(out[0], str):
            return {"outputs": []}, finish
        answer: dict[str, Any] = {"outputs": _live_outputs(ws, route, run, view, out, new_row)}
        marks["outputs"] = time.perf_counter()
        # The new run's info line at the viewed row: the page shows the new frame with it, without
        # a second request whose answer waits for the page to apply this one (inspect_live.js).
        try:
            rows = int(ws.result(out[0]).candidates.frame_indices.size)
            answer["info"] = info_fragment(ws, out[0], min(max(int(body["row"]), 0), rows - 1))
        except (CodecLensError, ValueError):
            pass  # the page asks /lens/info for it
        marks["info"] = time.perf_counter()
        answer["timing"] = _parts_ms(marks)
        route.viewed.saw(out[0])
        return answer, finish
    except gr.Error as exc:
        finish()
        return {"error": exc.message}, None


def _parts_ms(marks: dict[str, float]) -> dict[str, float]:
    """ms from each mark to the next, named by the later one (in the order they were made)."""
    names = sorted(marks, key=marks.__getitem__)
    return {b: round((marks[b] - marks[a]) * 1000, 1) for a, b in itertools.pairwise(names)}


def _live_outputs(
    ws: Workspace,
    route: LiveRoute,
    run: str,
    view: ViewSettings,
    out: tuple[Any, ...],
    new_row: RunRow | None,
) -> list[Any]:
    """The page's values for ``route.targets`` from :func:`reselect_live_answer`'s outputs."""
    # Every component update costs the page 5-20 ms: what did not change is not sent.
    # (LIVE_KEEPS were not drawn; the heat legend is dropped when the scores did not change.)
    view_now = dict(zip(VIEW_OUTPUTS[:-1], out[1:], strict=True))
    if view_now["heat_legend"] == legends_of(ws, run, view)[1]:
        view_now["heat_legend"] = gr.update()
    # The same groups as the old run's (a change of images_per_group alone): the groups box and the
    # group picker stay as they are.
    old, new = ws.result(run).groups.specs, ws.result(out[0]).groups.specs
    if [(s.start, s.end, s.group_index) for s in old] == [(s.start, s.end, s.group_index) for s in new]:
        view_now["groups"] = gr.update()
        view_now["group_pick"] = gr.update()
    # shown_run goes first: Gradio applies an answer's outputs in order and starts run_id's change
    # events as it applies run_id, so they must already read the new shown_run (inspect_open_if_new.js).
    shown = view_now.pop("shown_run")
    values = (shown, out[0], *view_now.values(), opened_options_json(ws, out[0], route.layout, row=new_row))
    return [frontend_value(c, v) for c, v in zip(route.targets, values, strict=True)]
