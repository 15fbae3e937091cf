"""Canvases tab: gallery, patch sources on hover, reconstruction, sparse video, coverage, round trip."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.static import press_if_shown_js
from app.tabs.common import reported, ui_error
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace
    from backend.pipeline import RunResult

DEFAULT_DIM = 0.25
DEFAULT_FPS = 4  # cvp's mask videos play at its sample rate, 4 fps (spec §13.5)
SPARSE_DIR = "sparse_videos"


def _round_trip_dir(ws: Workspace, run_id: str) -> Path | None:
    """cvp's directory of an imported run when it is still there and inside the allowed folders."""
    from backend.cvp_format import IMPORT_KEY
    from backend.errors import InputError

    source = ws.store.get_run(run_id).config.get(IMPORT_KEY)
    if not source:
        return None
    try:
        folder = ws.input_path(source)
    except InputError:
        return None
    return folder if folder.is_dir() else None


def _recon_markdown(recon: Any, result: RunResult) -> str:
    hb, wb = result.geometry.grid_hw
    kept = int(recon.patch_mask.sum())
    return (
        f"frame {recon.frame_index}: {kept} of {hb * wb} patches kept ({recon.coverage:.1%}) shown as the "
        "canvases carry them; the rest is dimmed"
    )


class CanvasViews:
    """What the tab shows of each open run: imported runs show cvp's tokens and the import's warnings."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._lock = threading.Lock()
        self._viewed: dict[str, tuple[Any, Any]] = {}  # run_id → (what ws.result gave, what the tab shows)

    def current(self, run_id: str) -> RunResult:
        """The result the tab shows for ``run_id`` (``gr.Error`` when none is open or it cannot open)."""
        from backend.cvp_format import imported_view

        ws = self.ws
        if not run_id:
            raise gr.Error("No run is open: run a video or reopen a session first.")
        try:
            base = ws.result(run_id)
            with self._lock:
                seen = self._viewed.get(run_id)
            if seen is not None and (base is seen[0] or base is seen[1]):
                return seen[1]
            # Imported runs show cvp's tokens (authoritative) and the import's warnings.
            shown = imported_view(ws.store, run_id, base)
        except CodecLensError as exc:
            raise ui_error(exc) from exc
        with self._lock:
            self._viewed[run_id] = (base, shown)
            while len(self._viewed) > max(1, ws.max_open_runs):
                self._viewed.pop(next(iter(self._viewed)))
        if shown is not base:
            ws.remember(run_id, shown)  # other tabs then see the same canvases
        return shown


def summary_markdown(result: RunResult, run_id: str) -> str:
    c, g = result.canvases, result.geometry
    return (
        f"Run `{run_id}`: {c.count} canvases of {c.pixels.shape[2]}×{c.pixels.shape[1]} "
        f"({g.grid_hw[0]}×{g.grid_hw[1]} patches of {g.patch} px), "
        f"{int(c.tokens[:, 7].sum())} of {c.tokens.shape[0]} tokens carry a source patch. "
        "Select a canvas, then hover its patches."
    )


def draw_frame(result: RunResult, frame: int, dim: float) -> tuple[Any, str]:
    """The reconstruction of candidate frame ``frame`` and its caption."""
    from views import canvases as canvas_views

    try:
        recon = canvas_views.prepare_reconstruction(result, int(frame), dim=float(dim))
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    return recon.image, _recon_markdown(recon, result)


def refresh(views: CanvasViews, run_id: str, frame_index: int | None = None) -> tuple[Any, ...]:
    """Every output of the tab for run ``run_id`` (header, gallery, hover, frame pick, reconstruction,
    its caption, coverage, round trip, sparse video); the reconstruction shows ``frame_index`` (the
    frame the viewer shows) when it is a candidate, else a partly kept one."""
    from views import canvases as canvas_views
    from views.inspector import run_summary

    if not run_id:
        return ("No run is open.", [], None, gr.update(choices=[], value=None), None, "", None, "", None)
    result = views.current(run_id)
    candidates = set(result.candidates.frame_indices.tolist())
    frame = int(frame_index) if frame_index in candidates else canvas_views.default_frame(result)
    image, info = draw_frame(result, frame, DEFAULT_DIM)
    try:
        check = canvas_views.round_trip_check(result, canvas_dir=_round_trip_dir(views.ws, run_id))
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    return (
        summary_markdown(result, run_id),
        run_summary.prepare_gallery(result),
        canvas_views.prepare_canvas_figure(result, 0),
        gr.update(choices=canvas_views.frame_choices(result), value=frame),
        image,
        info,
        canvas_views.prepare_coverage_figure(result, frame_index=frame),
        canvas_views.round_trip_markdown(check),
        None,
    )


def viewed_frame(views: CanvasViews, run_id: str, row: Any) -> int | None:
    """The frame index the inspector shows at candidate ``row`` (None without a run)."""
    if not run_id or row is None:
        return None
    result = views.current(run_id)
    n = int(result.candidates.frame_indices.size)
    return int(result.candidates.frame_indices[min(max(int(row), 0), n - 1)])


def follow(views: CanvasViews, run_id: str, row: Any, drawn: str) -> tuple[Any, ...]:
    """On opening the tab: redraw for the open run and the viewer's frame, unless it shows them
    already (``drawn``: the ``run_id:frame`` it last drew); the prompt, then the new ``drawn``
    last (11 outputs)."""
    if not run_id:  # the page has not opened its run yet; the run's arrival redraws
        return (*(gr.update(),) * 10, drawn)
    frame = viewed_frame(views, run_id, row)
    key = f"{run_id}:{frame}"
    if key == drawn:
        return (*(gr.update(),) * 10, drawn)
    return (*refresh(views, run_id, frame), canvas_prompt(views, run_id), key)


def canvas_prompt(views: CanvasViews, run_id: str) -> str:
    """The LLaVA-OneVision-2 prompt of run ``run_id``'s canvases, image pads counted ('' with no run)."""
    from backend.payload import prompt_for_result

    return prompt_for_result(views.current(run_id), compact=True) if run_id else ""


def pick_canvas(views: CanvasViews, run_id: str, index: Any) -> tuple[Any, Any]:
    """The patch-source figure of gallery item ``index`` and its dominant source frame."""
    from views import canvases as canvas_views

    result = views.current(run_id)
    index = int(index if not isinstance(index, (list, tuple)) else index[0])
    try:
        figure = canvas_views.prepare_canvas_figure(result, index)
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    source = canvas_views.dominant_source_frame(result, index)
    return figure, gr.update() if source is None else gr.update(value=source)


def show_frame(views: CanvasViews, run_id: str, frame: Any, dim: float) -> tuple[Any, str, Any]:
    """Reconstruction, caption and coverage figure of candidate frame ``frame``."""
    from views import canvases as canvas_views

    if not run_id or frame is None:
        return None, "", gr.update()
    result = views.current(run_id)
    image, info = draw_frame(result, int(frame), dim)
    return image, info, canvas_views.prepare_coverage_figure(result, frame_index=int(frame))


def sparse_video(
    views: CanvasViews, run_id: str, dim: float, fps: float, progress: Any = None, session: str = ""
) -> str:
    """The sparse video's path, written under the output folder the first time it is asked for
    (encoded in a worker process: app.jobs.sparse_video)."""
    from app import jobs
    from app.workers import job_store, run_job
    from backend.cvp_format import IMPORT_KEY
    from backend.isolation import Cleanup

    ws = views.ws
    views.current(run_id)  # a run that cannot open says so here
    try:
        path = ws.output_path(f"{SPARSE_DIR}/{run_id}_dim{float(dim):.2f}_fps{int(fps)}.mp4")
        if not path.is_file():  # runs never change, so a written video stays valid
            imported = bool(ws.store.get_run(run_id).config.get(IMPORT_KEY))

            def report(stage: str, fraction: float) -> None:
                if progress is not None:
                    progress(fraction, desc="encoding the sparse video")

            run_job(
                ws.pool,
                jobs.sparse_video,
                job_store(ws),
                run_id,
                str(path),
                float(dim),
                int(fps),
                imported=imported,
                session=session,
                subject=path.name,
                cleanup=Cleanup(partials=((path.parent, f".{path.stem}*"),)),
                on_progress=report,
            )
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    except OSError as exc:
        raise gr.Error(f"{exc.filename or 'sparse video'}: {exc.strerror or exc}") from exc
    return str(path)


# Gradio finds the gr.SelectData parameter of a handler through its type hints, which are
# resolved in this module's globals: gradio is imported at module level for that.
def _wire_follow(
    views: CanvasViews,
    run_id: gr.Textbox,
    outputs: list[gr.components.Component],
    prompt: gr.Textbox,
    tab: gr.Tab | None,
    viewer_row: gr.Slider | None,
    drawn_key: str,
) -> None:
    """The tab follows ``run_id``: on every change without ``tab``, else when ``tab`` is opened on
    another run or viewer frame than ``drawn_key`` (``run:frame`` drawn last) or the run changes
    while it is open."""
    # A run that cannot be drawn says why in the header (outputs[0]), the rest left as it was.
    if tab is None:
        run_id.change(
            reported(lambda rid: refresh(views, rid), outputs, outputs[0]), run_id, outputs, api_name=False
        )
        run_id.change(lambda rid: canvas_prompt(views, rid), run_id, prompt, api_name=False)
    else:
        # The prompt is drawn with the rest only while the tab is open: a re-selection in the
        # inspector sends no event here otherwise.
        drawn = gr.State(drawn_key)
        row_input = viewer_row if viewer_row is not None else gr.State(None)
        # Opening the tab draws it; a run that arrives while it is open redraws it (the page
        # presses a hidden button then, and only then).
        follow_btn = gr.Button("follow", elem_id="canvas_follow")
        followed = [*outputs, prompt, drawn]
        for event in (tab.select, follow_btn.click):
            event(
                reported(lambda rid, row, d: follow(views, rid, row, d), followed, outputs[0]),
                [run_id, row_input, drawn],
                followed,
                api_name=False,
            )
        run_id.change(
            None, None, None, js=press_if_shown_js("#canvas_gallery", "#canvas_follow"), api_name=False
        )


def build_canvas_tab(ws: Workspace, run_id: gr.Textbox, tab: Any = None, viewer_row: Any = None) -> None:
    """Build the canvases view inside the caller's current ``gr.Tab`` (``tab``); it follows ``run_id``.

    ``run_id`` holds a stored run's id. The tab draws at build time when the box already holds
    one, and then when it is opened (``tab.select``) on another run or another viewer frame
    (``viewer_row``: the inspector's candidate row), so a re-selection elsewhere never waits for
    the gallery; a run that arrives while the tab is open (a page still loading when the tab was
    clicked) redraws it. Without ``tab`` it redraws on every ``run_id.change``.
    """
    views = CanvasViews(ws)
    initial = refresh(views, run_id.value) if run_id.value else None

    def first(i: int, default: Any = None) -> Any:
        return default if initial is None else initial[i]

    header = gr.Markdown(first(0, "No run is open."), elem_id="canvas_summary")
    gallery = gr.Gallery(
        value=first(1),
        label="Canvases (select one)",
        format="jpeg",
        columns=6,
        height=260,
        allow_preview=False,
        elem_id="canvas_gallery",
    )
    prompt = gr.Textbox(
        value=canvas_prompt(views, run_id.value) if run_id.value else "",
        label="LLaVA-OneVision-2 prompt of these canvases (codec-lens payload writes it in full)",
        lines=3,
        max_lines=10,
        interactive=False,
        elem_id="canvas_prompt",
    )
    with gr.Row():
        with gr.Column(scale=1):
            hover = gr.Plot(value=first(2), label="Selected canvas: patch sources", elem_id="canvas_hover")
        with gr.Column(scale=1):
            frame_update = first(3, {})
            frame_pick = gr.Dropdown(
                choices=frame_update.get("choices", []),
                value=frame_update.get("value"),
                label="Source frame to reconstruct",
                elem_id="recon_frame",
                filterable=True,
            )
            dim = gr.Slider(0.0, 1.0, value=DEFAULT_DIM, step=0.05, label="Dim patches no canvas carries")
            recon = gr.Image(
                value=first(4),
                format="jpeg",
                label="Reconstruction from the canvases",
                interactive=False,
                elem_id="canvas_recon",
            )
            recon_info = gr.Markdown(first(5, ""), elem_id="recon_info")
    with gr.Row():
        fps = gr.Slider(1, 30, value=DEFAULT_FPS, step=1, label="Sparse video fps", elem_id="sparse_fps")
        play = gr.Button("Play sparse video", elem_id="sparse_btn")
    sparse = gr.Video(label="Sparse video: every candidate rebuilt from the canvases", elem_id="sparse_video")
    coverage = gr.Plot(value=first(6), label="Coverage per frame", elem_id="canvas_coverage")
    round_trip = gr.Markdown(first(7, ""), elem_id="canvas_roundtrip")

    outputs = [header, gallery, hover, frame_pick, recon, recon_info, coverage, round_trip, sparse]
    _wire_follow(
        views, run_id, outputs, prompt, tab, viewer_row, f"{run_id.value}:{first(3, {}).get('value')}"
    )

    def on_select(rid: str, evt: gr.SelectData) -> tuple[Any, Any]:
        return pick_canvas(views, rid, evt.index)

    gallery.select(on_select, run_id, [hover, frame_pick], api_name=False)

    def show(rid: str, frame: Any, dim_value: float) -> tuple[Any, str, Any]:
        return show_frame(views, rid, frame, dim_value)

    # A frame that cannot be rebuilt says why under the reconstruction (recon_info).
    rebuilt = [recon, recon_info, coverage]
    frame_pick.change(reported(show, rebuilt, recon_info), [run_id, frame_pick, dim], rebuilt, api_name=False)
    dim.release(reported(show, rebuilt, recon_info), [run_id, frame_pick, dim], rebuilt, api_name=False)

    # Gradio injects the progress tracker through this default.
    def play_video(
        rid: str,
        dim_value: float,
        fps_value: float,
        request: gr.Request,
        progress: Any = gr.Progress(),  # noqa: B008
    ) -> str:
        from app.workers import session_of

        return sparse_video(views, rid, dim_value, fps_value, progress=progress, session=session_of(request))

    play.click(play_video, [run_id, dim, fps], sparse, api_name=False)
