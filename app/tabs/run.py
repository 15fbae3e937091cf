"""Run tab: choose or upload a video, set the selection options, run (or re-select) it."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import ui_error
from app.tabs.sessions import SessionsPanel, build_sessions_panel, save_view
from app.workers import Cleanup, job_store, run_job, session_of
from app.workspace import store_upload, upload_name
from backend.errors import CodecLensError
from views.wording import plural

if TYPE_CHECKING:
    from app.tabs.inspect import InspectTab
    from app.workspace import Workspace


def option_controls(
    selector: str = "cvp", *, names: Sequence[str] | None = None, prefix: str | None = None
) -> dict[str, Any]:
    """One control per field of ``selector``'s options class (or per field of ``names``), generated
    from the field metadata.

    cvp's controls are ``#opt_<name>``; another selector's ``#opt_<selector>_<name>``; ``prefix``
    replaces ``opt_`` (the inspector's live controls use ``live_``).
    """
    from backend.config import field_help
    from backend.selectors import SELECTORS

    controls: dict[str, Any] = {}
    if prefix is None:
        prefix = "opt_" if selector == "cvp" else f"opt_{selector.replace('-', '_')}_"
    for name, meta in field_help(SELECTORS.lookup(selector).options_cls).items():
        if names is not None and name not in names:
            continue
        label, info, default = meta["label"], meta["help"], meta["default"]
        elem_id = f"{prefix}{name}"
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


def selection_options(
    names: Sequence[str],
    values: Sequence[Any],
    selector: str = "cvp",
    *,
    base: dict[str, Any] | None = None,
) -> Any:
    """The options of ``selector`` from its option controls' values (numbers arrive as floats); the
    other options from ``base`` (a run's config) or their defaults."""
    from backend.selectors import options_for

    defaults = options_for(selector)
    fields = set(defaults.as_dict())
    try:
        raw = {k: v for k, v in (base or {}).items() if k in fields}
        raw |= dict(zip(names, values, strict=True))
        for name, value in raw.items():
            default = getattr(defaults, name)
            if isinstance(default, int) and not isinstance(default, bool) and value is not None:
                raw[name] = int(value)
        return options_for(selector, raw)
    except (ValueError, TypeError) as exc:
        raise gr.Error(str(exc)) from exc


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


def _decodes(ws: Workspace, parent: Any, options: Any) -> bool:
    """Whether re-selecting ``parent`` with ``options`` must decode (reselect's own test): a
    changed decode option, another selector, or no cached decode to reuse."""
    from backend.selectors import options_for, spec_of

    spec = spec_of(options)
    if spec.name != parent.selector or not spec.resumable:
        return True
    base = options_for(parent.selector, parent.config)
    if not all(getattr(options, k) == getattr(base, k) for k in spec.front_options):
        return True
    key = parent.cache_key
    return not key or (key not in ws.memory and ws.store.cache_lookup(key) is None)


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
    from backend.runs import reselect
    from backend.selectors import selector_of

    cleanup = Cleanup(store=ws.store)
    same = bool(run_id) and ws.store.get_run(run_id).video_path == str(video)
    if same and ws.store.get_run(run_id).selector == selector_of(options):
        parent = ws.store.get_run(run_id)
        base = parent.config
        changes = {k: v for k, v in options.as_dict().items() if base.get(k) != v}
        if not _decodes(ws, parent, options):
            return reselect(ws.store, run_id, changes, on_progress=on_progress, memory=ws.memory)
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
        raise ui_error(exc) from exc
    ws.remember(new_id, result)
    save_view(ws, run_id, *view)
    note = "decoded" if how == "full" else "re-selected from the cache, nothing decoded"
    status = (
        f"Run **{new_id}** done in {time.perf_counter() - t0:.2f} s ({note}): "
        f"{plural(len(result.selection.groups), 'group')}, "
        f"{plural(result.canvases.images.shape[0], 'canvas', 'canvases')}, "
        f"{plural(result.canvases.tokens.shape[0], 'token')}."
    )
    return new_id, status


@dataclass
class RunTab:
    """The Run tab's components."""

    video_path: Any
    upload: Any
    controls: dict[str, Any]
    """cvp's option controls (name → control), which opening a cvp run fills."""
    run_btn: Any
    run_status: Any
    sessions: SessionsPanel
    selector: Any = None
    preset: Any = None
    selector_controls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every selector's option controls: selector → name → control (cvp's are ``controls``)."""
    selector_groups: dict[str, Any] = field(default_factory=dict)


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
    selector_controls: dict[str, dict[str, Any]] = {}
    groups: dict[str, Any] = {}
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


@dataclass(frozen=True)
class OptionLayout:
    """The Run tab's selector choice and option controls in output order: ``entries`` holds one
    ``(selector, name, default)`` per control, the selector choice first as ``("", "selector", "cvp")``."""

    entries: tuple[tuple[str, str, Any], ...]

    @classmethod
    def of(cls, tab: RunTab) -> OptionLayout:
        """The layout of ``tab``'s controls: its selector choice, then every selector's controls."""
        controls = [(s, n, c.value) for s, named in tab.selector_controls.items() for n, c in named.items()]
        return cls((("", "selector", tab.selector.value), *controls))

    def outputs(self, tab: RunTab) -> list[Any]:
        """``tab``'s components in the order of ``entries``."""
        return [tab.selector, *(tab.selector_controls[s][n] for s, n, _ in self.entries[1:])]


def opened_options(ws: Workspace, run_id: str, layout: OptionLayout) -> list[Any]:
    """The value each control of ``layout`` takes for stored run ``run_id``: the run's selector,
    then its option values; None leaves a control as it is (another selector's)."""
    from backend.selectors import options_for

    try:
        row = ws.store.get_run(run_id)
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    # cvp's options read as they were stored (a run made before an option existed keeps the
    # control's default); another selector's through its options class.
    values = {} if row.selector == "cvp" else options_for(row.selector, row.config).as_dict()
    out: list[Any] = [row.selector]
    for selector, name, default in layout.entries[1:]:
        if selector != row.selector:
            out.append(None)
        else:
            out.append(row.config.get(name, default) if selector == "cvp" else values[name])
    return out


def opened_options_json(ws: Workspace, run_id: str, layout: OptionLayout) -> str:
    """:func:`opened_options` as the JSON text the page spreads over the controls (APPLY_OPTIONS_JS)."""
    return json.dumps({"run": run_id, "values": opened_options(ws, run_id, layout)}, default=str)


# Spreads the open run's options (one JSON text) over the Run tab's controls in the page: a
# frontend-only event, so the controls never become outputs of a backend event (see
# inspect.wire_inspect_tab on why that matters). undefined leaves a control as it is.
APPLY_OPTIONS_JS = """
(text) => {
  let got = null;
  try { got = JSON.parse(text || 'null'); } catch (err) { got = null; }
  const n = %d;
  if (!got || !Array.isArray(got.values) || got.values.length !== n) return Array(n).fill(undefined);
  return got.values.map((v) => (v === null ? undefined : v));
}
"""


def wire_run_tab(
    ws: Workspace, run_id: gr.Textbox, tab: RunTab, inspect: InspectTab, run_options: gr.Textbox
) -> None:
    """Upload and Run; a run saves the viewer of ``inspect`` for the run it replaces. The option
    controls follow the open run through ``run_options`` (filled by the Inspect tab's ``on_run``)."""

    def upload(request: gr.Request, file: Any, current: str) -> tuple[Any, Any]:
        return on_upload(ws, file, session_of(request))

    tab.upload.upload(None, None, tab.run_status, js="() => ''", api_name=False).then(
        upload,
        [tab.upload, run_id],
        [tab.video_path, tab.run_status],
        api_name=False,
        concurrency_limit=None,  # the worker pool bounds the work, per session and in all
    )
    selectors = list(tab.selector_controls)
    names = {s: list(c) for s, c in tab.selector_controls.items()}
    flat = [c for s in selectors for c in tab.selector_controls[s].values()]

    # Gradio injects the request and the progress tracker only into positional parameters.
    def run(
        request: gr.Request,
        rid: str,
        path_text: str,
        row,
        lay,
        op,
        cm,
        chosen,
        progress=gr.Progress(),  # noqa: B008 - Gradio's progress hook
        *values: Any,
    ):
        start = 0
        for s in selectors:
            if s == chosen:
                options = selection_options(names[s], values[start : start + len(names[s])], s)
                break
            start += len(names[s])
        else:
            raise gr.Error(f"Invalid selector ({chosen!r}). Supported values are {', '.join(selectors)}.")
        return start_run(ws, rid, path_text, (row, lay, op, cm), options, progress, session_of(request))

    viewer = [inspect.slider, inspect.layers, inspect.opacity, inspect.colormap]
    # A new attempt clears the last outcome first; only the status shows this run's error, and
    # the progress bar covers the status alone (not the sessions panel under it).
    tab.run_btn.click(None, None, tab.run_status, js="() => ''", api_name=False).then(
        run,
        [run_id, tab.video_path, *viewer, tab.selector, *flat],
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
    run_options.change(
        None, run_options, layout.outputs(tab), js=APPLY_OPTIONS_JS % len(layout.entries), api_name=False
    )
