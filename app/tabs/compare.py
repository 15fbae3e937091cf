"""Compare tab: comparisons of codecs, or of selectors on one video, in 2–4 synchronised panes."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gradio as gr
import numpy as np
from gradio.context import Context

from app.static import load_js, step_js
from app.tabs.common import reported, ui_error
from app.tabs.compare_layout import (
    DEFAULT_SELECTORS,
    KEY_BUTTONS,
    NUMBER_FIELDS,
    CompareTab,
    NewForm,
    PaneControls,
    build_layout,
    caption_html,
    pane_html,
)
from app.workers import job_store, run_job, session_of
from backend.errors import CodecLensError
from backend.isolation import Cleanup
from views import compare as cv

if TYPE_CHECKING:
    from app.workspace import Workspace

STEP_JS = step_js("cmp_slider")


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


def _layers(layers: Sequence[str] | None, opacity: float, colormap: str, scale: str) -> Any:
    from backend.render import layer_options

    # Every pane shows the ranked block score, as the Inspect viewer does; "all" (one scale across
    # the compared runs) rescales the raw cell signals before drawing, so it shows cells.
    shared = scale == "all"
    return layer_options(
        layers or [],
        opacity=opacity,
        colormap=colormap,
        scale="frame" if shared else scale,
        heat="cell" if shared else "block",
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


def _pane_options(opened: Comparisons, o: _Open, controls: PaneControls) -> tuple[cv.PaneOptions, Any]:
    """How every pane of comparison ``o`` is drawn under ``controls``, and the runs its shared
    heatmap scale draws from (None unless the heatmap is on the ``all`` scale). ValueError for a
    control value that is none."""
    c = controls
    opts = _layers(c.layers, c.opacity, c.colormap, c.scale)
    runs = opened.heatmap_runs(o, c.scale) if opts.heatmap and c.scale == "all" else None
    reference = int(c.reference) if c.difference and c.reference not in (None, "") else None
    options = cv.PaneOptions(
        layers=opts,
        scale=c.scale,
        difference_with=reference,
        labels=o.stored.labels,
        show_both=o.stored.kind == "selectors",
    )
    return options, runs


def _frame_at(o: _Open, position: float) -> tuple[int, int]:
    """The slider position clamped to comparison ``o`` and the frame every pane shows there."""
    position = min(max(int(position or 0), 0), int(o.positions.size) - 1)
    return position, int(o.positions[position])


def panes(opened: Comparisons, cid: str, pos: float, controls: PaneControls) -> list[Any]:
    """Images and captions of the four pane slots (unused slots unchanged), drawn as the pane
    route draws them (:class:`PaneRoutes`)."""
    if not cid:
        return [gr.update()] * (2 * cv.MAX_PANES)
    o = get(opened, cid)
    n = len(o.results)
    _, frame_index = _frame_at(o, pos)
    try:
        options, runs = _pane_options(opened, o, controls)
        views = [cv.prepare_pane(o.results, i, frame_index, options, heatmap_runs=runs) for i in range(n)]
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    images = [v.image for v in views] + [gr.update()] * (cv.MAX_PANES - n)
    captions = [v.caption for v in views] + [gr.update()] * (cv.MAX_PANES - n)
    return images + captions


PANE_CACHE_BYTES = 64 << 20


@dataclass(frozen=True)
class PaneRequest:
    """One pane the page asks for (``/lens/pane``), or every pane's caption (``/lens/pane_info``)."""

    comparison_id: str
    position: int
    """The slider position (clamped to the comparison)."""
    controls: PaneControls
    pane: int = 0


def _js_number(value: float) -> str:
    """A number as the page's ``String(x)`` writes it (1, 0.5; not 1.0)."""
    x = float(value)
    return str(int(x)) if x.is_integer() else repr(x)


def pane_url(request: PaneRequest) -> str:
    """The app-relative URL of one pane's image, as the page builds it (page.js, ``window.__cmp.show``)."""
    from urllib.parse import urlencode

    c = request.controls
    query = {"i": str(request.pane), "cmp": request.comparison_id, "pos": str(request.position)}
    query |= {"l": ",".join(c.layers or []), "o": _js_number(c.opacity), "c": c.colormap, "s": c.scale}
    query |= {"d": "1" if c.difference else "0", "r": "" if c.reference is None else str(c.reference)}
    return "lens/pane?" + urlencode(query)


class PaneRoutes:
    """The Compare tab's own routes (registered by app.server): a pane's frame as JPEG (``/lens/pane``:
    cached, the positions a step or jump leads to rendered ahead) and every pane's caption
    (``/lens/pane_info``). A step through them shows four cached images; through a Gradio event
    returning four images it took 270-550 ms (issue 27, item 12)."""

    def __init__(self, opened: Comparisons, cache: Any = None) -> None:
        from views.inspector.frame_cache import JpegCache

        self.opened = opened
        self.cache = cache if cache is not None else JpegCache(budget_bytes=PANE_CACHE_BYTES)

    def jpeg(self, request: PaneRequest) -> bytes:
        """JPEG bytes of one pane (the backend's errors, ValueError for a pane or control that is none)."""
        o = self.opened.get(request.comparison_id)
        data = self.cache.get(*self._job(o, request))
        self.cache.prefetch([self._job(o, r) for r in self._likely(o, request)])
        return data

    def captions(self, request: PaneRequest) -> list[str]:
        """Every pane's caption at ``request.position``, computed without drawing the panes."""
        o = self.opened.get(request.comparison_id)
        options, _ = _pane_options(self.opened, o, request.controls)
        _, frame_index = _frame_at(o, request.position)
        return [cv.prepare_pane_caption(o.results, i, frame_index, options) for i in range(len(o.results))]

    def warm(self, request: PaneRequest) -> None:
        """Start rendering every pane of ``request`` (a load names their URLs; the page asks next)."""
        o = self.opened.get(request.comparison_id)
        for i in range(len(o.results)):
            self.cache.warm(*self._job(o, dataclasses.replace(request, pane=i)))

    def _job(self, o: _Open, request: PaneRequest) -> tuple[Any, Any]:
        """The cache key of one pane and the function that draws it."""
        c = request.controls
        position, frame_index = _frame_at(o, request.position)
        key = (request.comparison_id, position, request.pane, tuple(c.layers or ()), float(c.opacity))
        key += (c.colormap, c.scale, bool(c.difference), "" if c.reference is None else str(c.reference))

        def render() -> np.ndarray:
            options, runs = _pane_options(self.opened, o, c)
            return cv.prepare_pane(o.results, request.pane, frame_index, options, heatmap_runs=runs).image

        return key, render

    def _likely(self, o: _Open, request: PaneRequest) -> list[PaneRequest]:
        """Every pane at the positions likeliest next: one on, the next keyframe and group, one
        back, the previous keyframe and group, two and three on."""
        p, _ = _frame_at(o, request.position)

        def jumps(*actions: str) -> list[int]:
            return [cv.navigate_position(o.results, o.positions, p, a) for a in actions]

        order = [p + 1, *jumps("next_key", "next_group"), p - 1, *jumps("prev_key", "prev_group")]
        order += [p + 2, p + 3]
        near = [q for q in dict.fromkeys(order) if 0 <= q < int(o.positions.size) and q != p]
        return [dataclasses.replace(request, position=q, pane=i) for q in near for i in range(len(o.results))]


def nav_json(cid: str, o: _Open) -> str:
    """What the page navigates comparison ``o`` with (page.js, ``window.__cmp``): its id, its
    panes, the slider positions' frames, and the reference pane's (the first) candidate frames,
    keyframe rows and group starts, from which views.compare.navigate_position jumps."""
    from views.inspector.navigation import group_start_rows, keyframe_rows

    ref = o.results[0]
    return json.dumps(
        {
            "comparison": cid,
            "panes": len(o.results),
            "positions": [int(f) for f in o.positions],
            "reference_frames": [int(f) for f in ref.candidates.frame_indices],
            "keyframe_rows": [int(r) for r in keyframe_rows(ref)],
            "group_starts": [int(r) for r in group_start_rows(ref)],
        }
    )


def legend(opened: Comparisons, cid: str, layers: Sequence[str] | None, cmap: str, scale: str) -> Any:
    """The heatmap legend with each pane's range (hidden without the heatmap layer)."""
    if not cid or "heatmap" not in (layers or []):
        return gr.update(visible=False)
    o = get(opened, cid)
    high = "; ".join(
        f"{label}: {cv.heatmap_range(o.results, i, scale, heat='block')}"
        for i, label in enumerate(o.stored.labels)
    )
    return gr.update(value=cv.prepare_legend(cmap, "0", "1"), label=f"Heatmap scale — {high}", visible=True)


def load(
    opened: Comparisons, cid: str, controls: PaneControls, *, routes: PaneRoutes | None = None
) -> list[Any]:
    """Every output that depends on the open comparison (see ``CompareTab.load_outputs``); the
    panes name their images' URLs, which ``routes`` starts rendering."""
    if not cid:
        empty = [gr.update()] * (2 * cv.MAX_PANES)
        nothing = [gr.update(), gr.update(), gr.update(), *[gr.update()] * cv.MAX_PANES, *empty]
        return [*nothing, None, None, None, None, None]
    o = get(opened, cid)
    n = len(o.results)
    labels = o.stored.labels
    columns = [gr.update(visible=i < n) for i in range(cv.MAX_PANES)]
    selectors = o.stored.kind == "selectors"
    vh, vr = cv.prepare_selector_table(o.stored) if selectors else cv.prepare_variant_table(o.stored)
    ph, pr = cv.prepare_pair_table(o.stored)
    ref_choices = [(label, str(i)) for i, label in enumerate(labels)]
    ref_value = controls.reference if controls.reference in {c[1] for c in ref_choices} else "0"
    shown = PaneRequest(cid, 0, dataclasses.replace(controls, reference=ref_value))
    try:
        options, _ = _pane_options(opened, o, shown.controls)
        if routes is not None:
            routes.warm(shown)
    except (CodecLensError, ValueError) as exc:
        raise gr.Error(str(exc)) from exc
    idle = [gr.update()] * (cv.MAX_PANES - n)
    images = [
        pane_html(pane_url(dataclasses.replace(shown, pane=i)), labels[i], _picture_hw(o.results[i]))
        for i in range(n)
    ]
    captions = [
        caption_html(cv.prepare_pane_caption(o.results, i, int(o.positions[0]), options)) for i in range(n)
    ]
    figure = cv.prepare_selector_metric_figure if selectors else cv.prepare_metric_figure
    settings = cv.prepare_selector_settings_markdown if selectors else cv.prepare_settings_markdown
    return [
        settings(o.stored),
        nav_json(cid, o),
        gr.update(maximum=max(1, int(o.positions.size) - 1), value=0),
        *columns,
        *images,
        *idle,
        *captions,
        *idle,
        figure(o.stored, o.positions, cursor_frame_index=int(o.positions[0])),
        gr.update(value=vr, headers=vh),
        gr.update(value=pr, headers=ph),
        gr.update(choices=ref_choices, value=ref_value),
        legend(opened, cid, controls.layers, controls.colormap, controls.scale),
    ]


def _picture_hw(result: Any) -> tuple[int, int]:
    """The size of the picture a pane shows (views.compare.picture_pixels)."""
    y0, y1, x0, x1 = cv.picture_pixels(result)
    return y1 - y0, x1 - x0


def codec_steps(codecs: Sequence[str]) -> dict[str, str]:
    """The progress label of a codec comparison's running step, by the step that reported last
    ('' before any: backend.compare reports a step when it ends)."""
    names = ", ".join(codecs)
    n = len(codecs)
    steps = {
        "": f"encoding {names} and a lossless reference (one decode pass)",
        "encode": f"selecting on the {codecs[0]} encode (1 of {n})" if n else "comparing what they keep",
    }
    for k, codec in enumerate(codecs):
        steps[f"select {codec}"] = (
            f"selecting on the {codecs[k + 1]} encode ({k + 2} of {n})"
            if k + 1 < n
            else "comparing what the encodes keep"
        )
    return steps | {
        "select": "measuring each encode's luma against the reference",
        "luma": "storing the comparison",
        "store": "opening the comparison",
    }


def selector_steps(labels: Sequence[str]) -> dict[str, str]:
    """The progress label of a selector comparison's running step, by the step that reported last
    ('' before any; ``select <label>`` after each selector's run)."""
    steps = {"": f"selecting with {labels[0]} (1 of {len(labels)})"}
    for k, label in enumerate(labels):
        following = labels[k + 1] if k + 1 < len(labels) else None
        steps[f"select {label}"] = (
            f"selecting with {following} ({k + 2} of {len(labels)})"
            if following is not None
            else "comparing the selections and storing them"
        )
    steps["store"] = "opening the comparison"
    return steps


def _labelled(on_progress: Any, steps: dict[str, str]) -> Any:
    """``on_progress(label, fraction)`` from the backend's ``(finished step, fraction)``, called
    once at the start so that the first step is named while it runs."""
    if on_progress is None:
        return None

    def report(finished: str, fraction: float) -> None:
        on_progress(steps.get(finished, finished), fraction)

    report("", 0.0)
    return report


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
        report = _labelled(on_progress, codec_steps(config.codecs))
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
            on_progress=report,
        )
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc) from exc
    status = (
        f"Comparison `{done['comparison_id']}`: {done['variants']} variants of {source.name} in "
        f"{done['total_secs']:.1f} s."
    )
    new_id = done["comparison_id"]
    return gr.update(choices=choices(ws), value=new_id), new_id, nonce(), status


def entries_wording(fix: Sequence[tuple[str, str]]) -> str:
    """A backend error's fix worded for the selector form: its Profile control, the rest as
    options in cvp's entry (``set Profile to clean and give cvp [score=residual] in Selectors``)."""
    profile = [value for name, value in fix if name == "profile"]
    others = ", ".join(f"{name}={value}" for name, value in fix if name != "profile")
    parts = ([f"set Profile to {profile[0]}"] if profile else []) + (
        [f"give cvp [{others}] in Selectors"] if others else []
    )
    return " and ".join(parts)


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
        # Refuse bad entries before any work.
        labels = [e.label for e in parse_entries(text, shared={"profile": profile})]
        comparison_id = uuid.uuid4().hex[:12]
        report = _labelled(on_progress, selector_steps(labels))
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
            on_progress=report,
        )
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, wording=entries_wording) from exc
    status = (
        f"Selector comparison `{done['comparison_id']}`: {done['entries']} selectors on {source.name} in "
        f"{done['total_secs']:.1f} s."
    )
    new_id = done["comparison_id"]
    return gr.update(choices=choices(ws), value=new_id), new_id, nonce(), status


def build_compare_tab(ws: Workspace) -> PaneRoutes:
    """Create the comparison components inside the caller's current ``gr.Tab`` context.

    Pick a stored comparison (or run a new one on a path inside ``ws``'s input folders); up to
    four panes show the same frame with the same layers; one slider, the step buttons and the
    app's keys (hidden buttons ``cmp_*`` in ``#compare_hidden``) drive them all; a difference
    mode tints blocks kept by the reference pane only and by this pane only; per-frame metric
    plots follow the panes with a cursor and jump them on click.

    Returns the pane routes, also set as ``lens_panes`` on the Blocks being built, where the
    server finds them (app.server, as it finds the inspector's ``lens_*`` routes).
    """
    opened = Comparisons(ws)
    routes = PaneRoutes(opened)
    tab = build_layout(choices(ws))
    _wire_tab(ws, opened, tab, routes)
    root = Context.root_block
    if root is not None:
        root.lens_panes = routes
    return routes


def _wire_tab(ws: Workspace, opened: Comparisons, tab: CompareTab, routes: PaneRoutes) -> None:
    """The tab's events: loading a comparison, the panes following the slider and the view
    controls in the page (compare_show.js), the legend, steps and jumps."""
    view, cid, slider, loaded, pick = tab.view, tab.cid, tab.slider, tab.loaded, tab.pick

    def on_load(values: dict[Any, Any]) -> list[Any]:
        return load(opened, values[cid], view.read(values), routes=routes)

    # One trigger loads a comparison: a new nonce in ``loaded``. The user's pick, a new
    # comparison and the page load set the id and the nonce together, so it loads once.
    pick.input(lambda v: (v or "", nonce()), pick, [cid, loaded], api_name=False)
    cid.change(None, cid, None, js=load_js("compare_remember"))
    tab.refresh.click(lambda: gr.update(choices=choices(ws)), None, pick, api_name=False)
    _wire_run_new(ws, tab.form, [pick, cid, loaded, tab.form.status])
    _wire_run_selectors(ws, tab.selector_form, [pick, cid, loaded, tab.selector_form.status])
    # The panes' images and captions come from the pane routes, set by the page: no server event.
    show_inputs = [cid, slider, *view.components, tab.nav]
    show_js = load_js("compare_show")
    for control in (slider, *view.components):
        control.change(None, show_inputs, None, js=show_js, api_name=False)
    slider.change(None, slider, None, js=load_js("compare_cursor"), api_name=False)
    for control in (view.layers, view.colormap, view.scale):
        control.change(
            lambda c, lay, cm, sc: legend(opened, c, lay, cm, sc),
            [cid, view.layers, view.colormap, view.scale],
            tab.legend_img,
            api_name=False,
        )
    _wire_steps(slider, tab.nav, tab.key_buttons, tab.visible_steps)

    # Page load (a reload too): the comparison this browser showed last, else the newest. Only
    # the page's load: ``triggers=None`` would also fire on every change of ``cid``, so a new
    # comparison loaded twice and the second load put back frame 0 under a step taken meanwhile.
    root = Context.root_block
    assert root is not None, "the Compare tab is built inside gr.Blocks"
    gr.on(
        triggers=[root.load],
        fn=lambda wanted: page_load(ws, wanted),
        inputs=[cid],
        outputs=[pick, cid, loaded],
        js=load_js("compare_recall"),
        api_name=False,
    )
    # A comparison that cannot open says why in the settings line, leaving the panes as they were.
    loaded.change(
        reported(on_load, tab.load_outputs, tab.settings_md),
        {cid, *view.components},
        tab.load_outputs,
        api_name=False,
    )


def _wire_steps(slider: Any, nav: Any, key_buttons: dict[str, Any], visible_steps: dict[str, Any]) -> None:
    """The step buttons and the hidden key buttons move the slider in the page: plain steps from
    its range, keyframe and group jumps from the reference pane's marks in ``nav``
    (compare_jump.js, as views.compare.navigate_position)."""
    for action in KEY_BUTTONS:
        for button in (key_buttons[action], visible_steps[action]):
            if action in STEP_JS:
                button.click(None, slider, slider, js=STEP_JS[action], api_name=False)
            else:
                js = load_js("compare_jump", action=action)
                button.click(None, [slider, nav], slider, js=js, api_name=False)


def _wire_run_new(ws: Workspace, form: NewForm, outputs: list[Any]) -> None:
    """The Encode button: ``outputs`` are the picker, the id, the load nonce and the status."""

    # The form's values as one dict keyed by component; Gradio injects the request and the
    # tracker into the positional parameters around it.
    def on_run(
        request: gr.Request,
        values: dict[Any, Any],
        progress=gr.Progress(),  # noqa: B008 - Gradio injects the tracker
    ):
        f = form.read(values)
        return run_new(
            ws,
            f["path"],
            f["codecs"],
            {name: f[name] for name in NUMBER_FIELDS},
            f["speed"],
            f["fallback"],
            on_progress=lambda label, fraction: progress(fraction, desc=label),
            session=session_of(request),
        )

    # The worker pool bounds the work, per session and in all. A refused input's reason stays
    # in the form's status line; nothing else is marked (common.reported).
    form.run_btn.click(
        reported(on_run, outputs, form.status),
        set(form.fields.values()),
        outputs,
        api_name=False,
        concurrency_limit=None,
    )


def _wire_run_selectors(ws: Workspace, form: NewForm, outputs: list[Any]) -> None:
    """The Run-the-selectors button, with the outputs of :func:`_wire_run_new`."""

    def on_run(
        request: gr.Request,
        values: dict[Any, Any],
        progress=gr.Progress(),  # noqa: B008 - Gradio injects the tracker
    ):
        f = form.read(values)
        return run_selectors(
            ws,
            f["path"],
            f["entries"],
            f["profile"],
            on_progress=lambda label, fraction: progress(fraction, desc=label),
            session=session_of(request),
        )

    form.run_btn.click(
        reported(on_run, outputs, form.status),
        set(form.fields.values()),
        outputs,
        api_name=False,
        concurrency_limit=None,
    )
