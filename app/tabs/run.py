"""Run tab: choose or upload a video, set the selection options, run (or re-select) it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import controls_wording, option_labels, reported, ui_error
from app.tabs.option_form import (
    OptionControl,
    OptionLayout,
    apply_options_js,
    option_controls,
    selection_options,
)
from app.tabs.sessions import SessionsPanel, build_sessions_panel, save_view
from app.workers import job_store, run_job, session_of
from app.workspace import store_upload, upload_name
from backend.errors import CodecLensError
from backend.isolation import Cleanup
from views.wording import plural

if TYPE_CHECKING:
    from app.tabs.inspect.layout import InspectTab
    from app.workspace import Workspace


def on_upload(ws: Workspace, file: Any, session: str = "") -> tuple[Any, Any]:
    """Store an uploaded video and probe it (in a worker): its path for the path box and a status line.

    A file that is not a usable video is removed again; the error names the upload.
    """
    from app import jobs

    if file is None:
        return gr.update(), gr.update()
    name = upload_name(file)
    try:
        dest = store_upload(ws, file)
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    try:
        info = run_job(
            ws.pool,
            jobs.probe_video,
            dest,
            session=session,
            subject=name,
            cleanup=Cleanup(then=lambda _reason: dest.unlink(missing_ok=True)),
        )
    except CodecLensError as exc:
        dest.unlink(missing_ok=True)
        raise gr.Error(exc.one_line().replace(str(dest), name)) from exc
    return str(dest), (
        f"Uploaded **{name}**: {info['codec_name']} {info['width']}×{info['height']}, "
        f"{info['total_frames']} frames. Press **Run**."
    )


def preset_controls(name: str | None, names: Sequence[str]) -> tuple[Any, ...]:
    """The selector choice and cvp's option controls after choosing preset ``name`` (unchanged for none)."""
    from backend.selectors.presets import preset

    if not name:
        return (gr.update(),) * (1 + len(names))
    p = preset(name)
    return (
        gr.update(value=p.selector),
        *(gr.update(value=p.values[n]) if n in p.values else gr.update() for n in names),
    )


def selector_groups(selector: str, selectors: Sequence[str]) -> list[Any]:
    """Show the option controls of ``selector``, hide the others'."""
    return [gr.update(visible=s == selector) for s in selectors]


def _select(
    ws: Workspace,
    run_id: str,
    video: Any,
    options: Any,
    on_progress: Callable[[str, float], None],
    session: str = "",
) -> tuple[str, Any, str]:
    """A new run of ``video``: re-selected from the open run's cache when it is the same video.

    What decodes runs in a worker (its run is stored there); a re-selection from the cache
    decodes nothing and runs here, on the decodes this process keeps in memory.
    """
    from app import jobs
    from backend.runs import plan_reselection, run_plan
    from backend.selectors import selector_of

    cleanup = Cleanup(store=ws.store)
    same = bool(run_id) and ws.store.get_run(run_id).video_path == str(video)
    if same and ws.store.get_run(run_id).selector == selector_of(options):
        parent = ws.store.get_run(run_id)
        base = parent.config
        changes = {k: v for k, v in options.as_dict().items() if base.get(k) != v}
        # What decodes (a front option changed, or the cached decode is gone) runs in a worker.
        plan = plan_reselection(ws.store, parent, changes, memory=ws.memory)
        if not plan.decodes:
            return run_plan(ws.store, plan, on_progress=on_progress, memory=ws.memory)
        done = run_job(
            ws.pool,
            jobs.reselect_run,
            job_store(ws),
            run_id,
            changes,
            session=session,
            subject=Path(video).name,
            cleanup=cleanup,
            on_progress=on_progress,
        )
    else:
        done = run_job(
            ws.pool,
            jobs.select_run,
            video,
            job_store(ws),
            options,
            session=session,
            subject=Path(video).name,
            cleanup=cleanup,
            on_progress=on_progress,
        )
    # The stored run, rebuilt from its decode cache, with the times of the run that made it.
    result = dataclasses.replace(ws.result(done["run_id"]), timings_secs=done["timings_secs"])
    return done["run_id"], result, done["how"]


def running_stage(finished: str) -> str:
    """The progress label after stage ``finished`` reported: the stage that runs now (the
    pipeline reports each stage when it ends)."""
    from backend.pipeline.registry import STAGES

    names = list(STAGES.names)
    if finished not in names:
        return finished
    i = names.index(finished)
    return names[i + 1] if i + 1 < len(names) else "storing the run"


def start_run(
    ws: Workspace,
    run_id: str,
    path_text: str,
    view: tuple[float, list[str], float, str],
    options: Any,
    progress: Callable[..., Any],
    session: str = "",
) -> tuple[str, str]:
    """Run (or re-select) the video at ``path_text`` with ``options``.

    ``view``: the open run's viewer (row, layers, opacity, colormap), saved so that reopening
    it finds it as it was left. ``progress(fraction, desc=stage)`` follows the run, named after
    the stage that runs. ``session``: the browser session, whose pending jobs the worker pool
    caps. Returns the new run id and the status line (the runs table and the stored-run choice
    follow the new run id: app.tabs.sessions).
    """
    from backend.selectors import selector_of

    t0 = time.perf_counter()
    try:
        video = ws.input_path(path_text or "")
        if video.is_dir():
            raise gr.Error(f"{path_text}: is a directory, not a video file")
        if not video.is_file():
            raise gr.Error(f"{path_text}: no such video file")
        progress(0.0, desc="probe")

        def on_progress(stage: str, fraction: float) -> None:
            progress(fraction, desc=running_stage(stage))

        new_id, result, how = _select(ws, run_id, video, options, on_progress, session)
    except CodecLensError as exc:
        # A fix the backend carries (AV1: another profile and score) names this tab's controls.
        labels = option_labels(selector_of(options))
        raise ui_error(exc, wording=lambda fix: controls_wording(fix, labels)) from exc
    ws.remember(new_id, result)
    save_view(ws, run_id, *view)
    note = {
        "full": "decoded",
        "reused": "this run was made with these options already: reopened, nothing stored",
    }.get(how, "re-selected from the cache, nothing decoded")
    status = (
        f"Run **{new_id}** done in {time.perf_counter() - t0:.2f} s ({note}): "
        f"{plural(len(result.selection.groups), 'group')}, "
        f"{plural(result.canvases.count, 'canvas', 'canvases')}, "
        f"{plural(result.canvases.tokens.shape[0], 'token')}."
    )
    return new_id, status


@dataclass
class RunTab:
    """The Run tab's components."""

    video_path: gr.Textbox
    upload: gr.File
    controls: dict[str, OptionControl]
    """cvp's option controls (name → control), which opening a cvp run fills."""
    run_btn: gr.Button
    run_status: gr.Markdown
    sessions: SessionsPanel
    selector: gr.Dropdown | None = None
    preset: gr.Dropdown | None = None
    selector_controls: dict[str, dict[str, OptionControl]] = field(default_factory=dict)
    """Every selector's option controls: selector → name → control (cvp's are ``controls``)."""
    selector_groups: dict[str, gr.Group] = field(default_factory=dict)


def build_run_tab(ws: Workspace, run_id: gr.Textbox) -> RunTab:
    """The video path and upload, the option controls, Run, and the sessions panel."""
    from backend.selectors import SELECTORS
    from backend.selectors.presets import PRESETS

    gr.Markdown(
        "Choose a video (a path inside the allowed folders, or an upload), a selector (or a preset), "
        "a profile and the selection options, then **Run**. Only grouping/selection options changed on "
        "the open video re-select from the cache without decoding."
    )
    with gr.Row():
        video_path = gr.Textbox(label="Video path", elem_id="video_path", scale=3)
        upload = gr.File(label="Upload a video", elem_id="upload", scale=2)
    with gr.Row():
        selector = gr.Dropdown(
            [(f"{s.name} — {s.help}", s.name) for s in SELECTORS.values()],
            value="cvp",
            label="Selector",
            elem_id="opt_selector",
            scale=3,
        )
        preset = gr.Dropdown(
            [("none", ""), *((f"{p.name} — {p.selector}: {p.help}", p.name) for p in PRESETS.values())],
            value="",
            label="Preset (fills the options; docs/selectors.md lists the sources)",
            elem_id="opt_preset",
            scale=2,
        )
    selector_controls: dict[str, dict[str, OptionControl]] = {}
    groups: dict[str, gr.Group] = {}
    with gr.Accordion("Selection options", open=True):
        for name in SELECTORS.names:
            with gr.Group(visible=name == "cvp", elem_id=f"opt_group_{name.replace('-', '_')}") as group:
                with gr.Row(equal_height=False):
                    selector_controls[name] = option_controls(name)
            groups[name] = group
    run_btn = gr.Button("Run", variant="primary", elem_id="run_btn")
    run_status = gr.Markdown("", elem_id="run_status")
    sessions = build_sessions_panel(ws, run_id)
    return RunTab(
        video_path,
        upload,
        selector_controls["cvp"],
        run_btn,
        run_status,
        sessions,
        selector=selector,
        preset=preset,
        selector_controls=selector_controls,
        selector_groups=groups,
    )


def wire_run_tab(
    ws: Workspace, run_id: gr.Textbox, tab: RunTab, inspect: InspectTab, run_options: gr.Textbox
) -> None:
    """Upload and Run; a run saves the viewer of ``inspect`` for the run it replaces. The option
    controls follow the open run through ``run_options`` (filled by the Inspect tab's ``on_run``)."""

    def upload(request: gr.Request, file: Any, current: str) -> tuple[Any, Any]:
        return on_upload(ws, file, session_of(request))

    # A refused input's reason stays in the status line; nothing else is marked (common.reported).
    tab.upload.upload(None, None, tab.run_status, js="() => ''", api_name=False).then(
        reported(upload, [tab.video_path, tab.run_status], tab.run_status),
        [tab.upload, run_id],
        [tab.video_path, tab.run_status],
        api_name=False,
        concurrency_limit=None,  # the worker pool bounds the work, per session and in all
    )
    selectors = list(tab.selector_controls)
    names = {s: list(c) for s, c in tab.selector_controls.items()}
    flat = [c for s in selectors for c in tab.selector_controls[s].values()]

    viewer = [inspect.slider, inspect.layers, inspect.opacity, inspect.colormap]

    # The inputs arrive as one dict keyed by component (a set of inputs); Gradio injects the
    # request and the progress tracker into the parameters after it.
    def run(
        given: dict[Any, Any],
        request: gr.Request,
        progress=gr.Progress(),  # noqa: B008 - Gradio's progress hook
    ) -> tuple[str, str]:
        chosen = given[tab.selector]
        if chosen not in tab.selector_controls:
            raise gr.Error(f"Invalid selector ({chosen!r}). Supported values are {', '.join(selectors)}.")
        controls = tab.selector_controls[chosen]
        options = selection_options(names[chosen], [given[c] for c in controls.values()], chosen)
        view = tuple(given[c] for c in viewer)
        return start_run(
            ws, given[run_id], given[tab.video_path], view, options, progress, session_of(request)
        )

    # A new attempt clears the last outcome first; only the status shows this run's error, and
    # the progress bar covers the status alone (not the sessions panel under it).
    tab.run_btn.click(None, None, tab.run_status, js="() => ''", api_name=False).then(
        reported(run, [run_id, tab.run_status], tab.run_status),
        {run_id, tab.video_path, *viewer, tab.selector, *flat},
        [run_id, tab.run_status],
        api_name=False,
        show_progress="full",
        show_progress_on=tab.run_status,
        concurrency_limit=None,
    )
    groups = [tab.selector_groups[s] for s in selectors]
    tab.selector.change(lambda s: selector_groups(s, selectors), tab.selector, groups, api_name=False)
    cvp_names = names["cvp"]
    tab.preset.change(
        lambda p: preset_controls(p, cvp_names),
        tab.preset,
        [tab.selector, *tab.selector_controls["cvp"].values()],
        api_name=False,
    )
    layout = OptionLayout.of(tab)
    run_options.change(None, run_options, layout.outputs(tab), js=apply_options_js(layout), api_name=False)
