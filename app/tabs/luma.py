"""Luma-bias tab: analyse a decoder output against references, reopen stored analyses, fit and apply."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import reported, ui_error
from app.workers import job_store, run_job, session_of
from app.workspace import UPLOADS_DIR, store_upload
from backend.errors import CodecLensError
from backend.isolation import Cleanup
from views import luma as luma_view

if TYPE_CHECKING:
    from app.workspace import Workspace

LUMA_DIR = "luma"
"""Coefficients files and corrected videos are written here, under the output folder."""
GEOMETRIES = ("h3", "gop")


def resolve_input(ws: Workspace, text: str | None, *, what: str) -> Path:
    """A typed or uploaded input path: inside the allowed folders (or the uploads folder), existing.

    Raises
    ------
    InputError : empty, outside the allowed folders, or not a file.
    """
    from backend.errors import InputError
    from backend.paths import resolve_within

    if not text or not str(text).strip():
        raise InputError(f"choose a {what} video (type a path or upload one)")
    try:
        path = ws.input_path(text)
    except InputError:
        try:  # the app's own uploads folder is always readable
            path = resolve_within(text, (ws.output_root / UPLOADS_DIR,), kind="input")
        except InputError:
            path = None
        if path is None:
            raise
    if path.is_dir():
        raise InputError("is a directory, not a video file", path=text)
    if not path.is_file():
        raise InputError(f"no such {what} video file", path=text)
    return path


def _safe_stem(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "video"


def analysis_choices(ws: Workspace) -> list[tuple[str, str]]:
    return luma_view.prepare_analysis_choices(ws.store.list_luma_analyses())


def fit_choices(ws: Workspace) -> list[tuple[str, str]]:
    return luma_view.prepare_fit_choices(ws.store.list_luma_fits())


def views_of(ws: Workspace, stored_id: str) -> list[Any]:
    """Summary, bias plot, stacked chunks, slot tables and gain scatter of a stored analysis."""
    from backend.luma import open_analysis

    stored = open_analysis(ws.store, stored_id)
    a = stored.analysis
    return [
        luma_view.prepare_summary(a, analysis_id=stored_id),
        luma_view.prepare_bias_plot(a),
        luma_view.prepare_stacked_plot(a.report),
        luma_view.prepare_slot_table(a),
        luma_view.prepare_slot_table(a, by_position=True),
        luma_view.prepare_gain_scatter(a.report),
    ]


def refreshed(ws: Workspace, selected: str | None) -> list[Any]:
    """Fresh choices for the four analysis pickers, ``selected`` in the first."""
    choices = analysis_choices(ws)
    return [gr.update(choices=choices, value=selected), *[gr.update(choices=choices)] * 3]


def analyze(
    ws: Workspace,
    ref_text: str,
    test_text: str,
    official_text: str,
    geo: str,
    off: float,
    trunc: bool,
    session: str = "",
) -> list[Any]:
    """Analyse (in a worker) and store a test video against its reference; the views, the refreshed
    pickers and the status line."""
    from app import jobs

    try:
        ref_path = resolve_input(ws, ref_text, what="reference")
        test_path = resolve_input(ws, test_text, what="test")
        official_path = (
            resolve_input(ws, official_text, what="official") if (official_text or "").strip() else None
        )
        analysis_id = run_job(
            ws.pool,
            jobs.luma_analyze,
            job_store(ws),
            test_path,
            ref_path,
            official_path,
            geo,
            int(off or 0),
            bool(trunc),
            session=session,
            subject=test_path.name,
        )
        status = f"Analysed **{test_path.name}** against **{ref_path.name}**: analysis `{analysis_id}`."
        return [*views_of(ws, analysis_id), *refreshed(ws, analysis_id), status]
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc


def upload(ws: Workspace, file: Any) -> tuple[Any, Any]:
    """The stored copy's path for a path box and the status line (both unchanged without a file)."""
    if file is None:
        return gr.update(), gr.update()
    try:
        stored = store_upload(ws, file)
    except CodecLensError as exc:
        raise ui_error(exc, single_line=True) from exc
    return str(stored), f"Uploaded **{stored.name}**."


def reopen(ws: Workspace, stored_id: str | None) -> list[Any]:
    """The views of stored analysis ``stored_id`` and the status line."""
    if not stored_id:
        raise gr.Error("Choose a stored analysis to reopen.")
    try:
        return [*views_of(ws, stored_id), f"Reopened analysis `{stored_id}`."]
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc


def refresh_lists(ws: Workspace, selected: str | None, fit_selected: str | None) -> list[Any]:
    """Fresh analysis and fit choices, keeping the selections that still exist."""
    fits = fit_choices(ws)
    fit_value = fit_selected if fit_selected in {v for _, v in fits} else None
    return [*refreshed(ws, selected), gr.update(choices=fits, value=fit_value)]


def fit(
    ws: Workspace, train_ids: list[str] | None, test_ids: list[str] | None, session: str = ""
) -> tuple[Any, ...]:
    """Fit a correction (in a worker) on the ``train_ids`` analyses, evaluated on ``test_ids``."""
    from app import jobs

    try:
        folder = ws.output_path(LUMA_DIR)
        folder.mkdir(parents=True, exist_ok=True)
        coeffs = folder / f"coeffs_{uuid.uuid4().hex[:8]}.json"
        fit_id, result = run_job(
            ws.pool,
            jobs.luma_fit,
            job_store(ws),
            list(train_ids or []),
            list(test_ids or []),
            coeffs,
            session=session,
            subject=coeffs.name,
            cleanup=Cleanup(written=(coeffs,)),
        )
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc
    info = (
        f"Fit **{fit_id}**: {result.model.coefficient_count} coefficients "
        f"({result.model.geometry.name}) on {len(result.train)} clip(s) → `{coeffs}`"
    )
    return (
        info,
        luma_view.prepare_fit_plot(result),
        luma_view.prepare_fit_table(result),
        gr.update(choices=fit_choices(ws), value=fit_id),
    )


def apply(
    ws: Workspace, fit_id: str | None, analysis_id: str | None, lossless_rgb: bool, session: str = ""
) -> list[Any]:
    """Correct the test video of a stored analysis with a stored fit and re-measure it (in a worker)."""
    from app import jobs

    if not fit_id or not analysis_id:
        raise gr.Error("Choose a fit and a stored analysis to correct.")
    try:
        row = ws.store.luma_analysis(analysis_id)
        test_path = resolve_input(ws, row["test_path"], what="test")
        ref_path = resolve_input(ws, row["reference_path"], what="reference")
        official_path = (
            resolve_input(ws, row["official_path"], what="official") if row["official_path"] else None
        )
        out = ws.output_path(f"{LUMA_DIR}/{_safe_stem(test_path.stem)}.fit_{fit_id}.corrected.mp4")
        out.parent.mkdir(parents=True, exist_ok=True)
        applied = run_job(
            ws.pool,
            jobs.luma_apply,
            job_store(ws),
            jobs.LumaApplyRequest(
                fit_id, analysis_id, test_path, ref_path, official_path, out, lossless=bool(lossless_rgb)
            ),
            session=session,
            subject=test_path.name,
            cleanup=Cleanup(written=(out,)),
        )
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc
    b, a = applied.before.report.summary(), applied.after.report.summary()
    info = (
        f"Wrote `{applied.corrected}`; re-measured as analysis **{applied.after_id}**. "
        f"mean |bias| {b['mean_abs_bias']:.3f} → {a['mean_abs_bias']:.3f}"
    )
    return [
        info,
        luma_view.prepare_before_after_plot(applied.before, applied.after),
        luma_view.prepare_before_after_slots(applied.before, applied.after),
        str(applied.corrected),
        *refreshed(ws, applied.after_id),
    ]


def build_luma_tab(ws: Workspace) -> None:
    """Build the luma-bias view inside the caller's current ``gr.Blocks`` / ``gr.Tab`` context.

    Every analysis the tab runs is stored in ``ws.store``; stored analyses can be reopened,
    used to fit a correction (train/test split by clip) and corrected (the corrected video is
    written under ``ws.output_path("luma")`` and re-measured).
    """
    gr.Markdown(
        "Per-frame luma bias of a decoder output against a reference (and optionally the official "
        "decode), by window slot. Paths must lie inside the allowed folders; uploads are copied into "
        "the work folder. Every analysis is stored and can be reopened, fitted and corrected below."
    )
    boxes, uploads = [], []
    with gr.Row():
        for key, label, button in (
            ("reference", "Reference video", "Upload reference"),
            ("test", "Test video (decoder output)", "Upload test"),
            ("official", "Official decode (optional)", "Upload official"),
        ):
            with gr.Column():
                boxes.append(gr.Textbox(label=label, elem_id=f"luma_{key}", max_lines=1))
                uploads.append(gr.UploadButton(button, size="sm", elem_id=f"luma_{key}_upload"))
    with gr.Row():
        geometry = gr.Radio(list(GEOMETRIES), value="h3", label="Geometry", elem_id="luma_geometry")
        offset = gr.Number(
            value=0, precision=0, label="Offset (test t ↔ reference t + N)", elem_id="luma_offset"
        )
        truncate = gr.Checkbox(value=False, label="Truncate to the shorter input", elem_id="luma_truncate")
        analyze_btn = gr.Button("Analyze", variant="primary", elem_id="luma_analyze")
    # The analysis section's status line: what the last Analyze, Reopen or upload did, or why not.
    status = gr.Markdown("", elem_id="luma_status")
    outputs = _build_analysis_views()
    with gr.Row():
        stored = gr.Dropdown(
            choices=analysis_choices(ws), label="Stored analyses", elem_id="luma_stored", scale=4
        )
        open_btn = gr.Button("Reopen", elem_id="luma_open", scale=1)
        refresh_btn = gr.Button("Refresh lists", elem_id="luma_refresh", scale=1)
    train, held_out, fit_btn, fit_outputs = _build_fit_section(ws)
    fit_pick, apply_pick, lossless, apply_btn, apply_outputs = _build_apply_section(ws)
    choice_boxes = [stored, train, held_out, apply_pick]

    def on_analyze(request: gr.Request, ref, test, official, geo, off, trunc) -> list[Any]:
        return analyze(ws, ref, test, official, geo, off, trunc, session_of(request))

    def on_fit(request: gr.Request, train_ids, test_ids) -> tuple[Any, ...]:
        return fit(ws, train_ids, test_ids, session_of(request))

    def on_apply(request: gr.Request, fit_id, analysis_id, lossless_rgb) -> list[Any]:
        return apply(ws, fit_id, analysis_id, lossless_rgb, session_of(request))

    # A refused input's reason stays in its section's status line (the first output of Fit and
    # Apply), shown once as a toast; no other output is touched (common.reported).
    analyzed = [*outputs, *choice_boxes, status]
    # The worker pool bounds the work of these three, per session and in all.
    analyze_btn.click(
        reported(on_analyze, analyzed, status),
        [*boxes, geometry, offset, truncate],
        analyzed,
        api_name=False,
        concurrency_limit=None,
    )
    for button, box in zip(uploads, boxes, strict=True):
        button.upload(
            reported(lambda file: upload(ws, file), [box, status], status),
            button,
            [box, status],
            api_name=False,
        )
    open_btn.click(
        reported(lambda stored_id: reopen(ws, stored_id), [*outputs, status], status),
        stored,
        [*outputs, status],
        api_name=False,
    )
    refresh_btn.click(
        lambda selected, fit_selected: refresh_lists(ws, selected, fit_selected),
        [stored, fit_pick],
        [*choice_boxes, fit_pick],
        api_name=False,
    )
    fitted = [*fit_outputs, fit_pick]
    fit_btn.click(
        reported(on_fit, fitted, fit_outputs[0]),
        [train, held_out],
        fitted,
        api_name=False,
        concurrency_limit=None,
    )
    applied = [*apply_outputs, *choice_boxes]
    apply_btn.click(
        reported(on_apply, applied, apply_outputs[0]),
        [fit_pick, apply_pick, lossless],
        applied,
        api_name=False,
        concurrency_limit=None,
    )


def _build_analysis_views() -> list[Any]:
    """Summary, plots and tables of one analysis; returned in :func:`views_of`'s order."""
    summary = gr.Markdown("No analysis yet.", elem_id="luma_summary")
    bias_plot = gr.Plot(label="bias(t) by slot", elem_id="luma_bias_plot")
    with gr.Row():
        stacked_plot = gr.Plot(label="Stacked chunks", elem_id="luma_stacked_plot")
        gain_plot = gr.Plot(label="Cell gain per slot", elem_id="luma_gain_plot")
    slot_table = gr.Dataframe(
        headers=list(luma_view.SLOT_COLUMNS),
        label="Per-slot bias (steady state)",
        interactive=False,
        elem_id="luma_slot_table",
    )
    with gr.Accordion("Per slot and position in the latent", open=False):
        position_table = gr.Dataframe(
            headers=list(luma_view.SLOT_POSITION_COLUMNS), interactive=False, elem_id="luma_position_table"
        )
    return [summary, bias_plot, stacked_plot, slot_table, position_table, gain_plot]


def _build_fit_section(ws: Workspace) -> tuple[Any, Any, Any, list[Any]]:
    """Train and held-out pickers, the Fit button and its outputs (info, plot, table)."""
    gr.Markdown("### Fit a correction\nChoose stored analyses to train on and held-out ones to test on.")
    with gr.Row():
        train = gr.Dropdown(
            choices=analysis_choices(ws), multiselect=True, label="Train", elem_id="luma_train"
        )
        held_out = gr.Dropdown(
            choices=analysis_choices(ws), multiselect=True, label="Test (held out)", elem_id="luma_heldout"
        )
        fit_btn = gr.Button("Fit", elem_id="luma_fit_btn")
    fit_info = gr.Markdown(elem_id="luma_fit_info")
    with gr.Row():
        fit_plot = gr.Plot(label="Held-out residual before / after", elem_id="luma_fit_plot")
        fit_table = gr.Dataframe(
            headers=list(luma_view.FIT_COLUMNS), interactive=False, elem_id="luma_fit_table"
        )
    return train, held_out, fit_btn, [fit_info, fit_plot, fit_table]


def _build_apply_section(ws: Workspace) -> tuple[Any, Any, Any, Any, list[Any]]:
    """Fit and analysis pickers, the lossless box, the Apply button and its outputs."""
    gr.Markdown("### Apply a fit\nCorrects the test video of a stored analysis and re-measures it.")
    with gr.Row():
        fit_pick = gr.Dropdown(choices=fit_choices(ws), label="Fit", elem_id="luma_fit_pick")
        apply_pick = gr.Dropdown(
            choices=analysis_choices(ws), label="Analysis to correct", elem_id="luma_apply_pick"
        )
        lossless = gr.Checkbox(value=False, label="Lossless RGB output (libx264rgb)", elem_id="luma_lossless")
        apply_btn = gr.Button("Apply", elem_id="luma_apply_btn")
    apply_info = gr.Markdown(elem_id="luma_apply_info")
    with gr.Row():
        before_after = gr.Plot(label="bias(t) before / after", elem_id="luma_before_after")
        before_after_slots = gr.Plot(label="Per-slot bias before / after", elem_id="luma_before_after_slots")
    corrected_file = gr.File(label="Corrected video", interactive=False, elem_id="luma_corrected")
    outputs = [apply_info, before_after, before_after_slots, corrected_file]
    return fit_pick, apply_pick, lossless, apply_btn, outputs
