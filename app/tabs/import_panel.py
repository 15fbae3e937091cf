"""Import panel: bring a codec-video-prep output directory and its video in, then open the run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import reported, ui_error
from app.workers import job_store, run_job, session_of
from backend.errors import CodecLensError
from backend.isolation import Cleanup

if TYPE_CHECKING:
    from app.workspace import Workspace


def _status_markdown(outcome: dict[str, Any]) -> str:
    """The import's verdict (the summary :func:`app.jobs.import_cvp_dir` returns) as markdown."""
    lines = outcome["lines"]
    verdict = "matches" if outcome["status"] == "match" else "differs from"
    text = (
        f"**Imported** run `{outcome['run_id']}`: cvp's output {verdict} our parity recomputation.\n\n"
        f"{lines[0]}"
    )
    if outcome["warnings"]:
        text += "\n\n" + "\n".join(f"- `{code}` {message}" for code, message in outcome["warnings"])
    return text


def import_run(
    ws: Workspace,
    folder: str,
    source: str,
    *,
    on_progress: Callable[[str, float], None] | None = None,
    session: str = "",
) -> tuple[str, str]:
    """Import cvp output ``folder`` made from ``source`` (paths inside the allowed folders; in a worker).

    Returns the new run's id and the status markdown; errors are ``gr.Error`` in one line.
    """
    from app import jobs
    from backend.cvp_format import imported_view

    try:
        cvp_dir, video = ws.input_path(folder), ws.input_path(source)
        outcome = run_job(
            ws.pool,
            jobs.import_cvp_dir,
            cvp_dir,
            video,
            job_store(ws),
            session=session,
            subject=video.name,
            cleanup=Cleanup(store=ws.store),
            on_progress=on_progress,
        )
        # Shown with cvp's tokens and the stored warnings, and the times of the import's run.
        run_id = outcome["run_id"]
        shown = imported_view(ws.store, run_id, ws.result(run_id))
        ws.remember(run_id, dataclasses.replace(shown, timings_secs=outcome["timings_secs"]))
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc
    return run_id, _status_markdown(outcome)


def build_import_panel(ws: Workspace, run_id: gr.Textbox) -> None:
    """Two path boxes (resolved inside the allowed folders) and an Import button.

    On success the new run's id goes into ``run_id`` (so every tab opens it); errors show as
    ``gr.Error`` with one line naming the file.
    """
    with gr.Group():
        gr.Markdown("**Import a codec-video-prep output** with the video it was made from.")
        with gr.Row():
            cvp_dir = gr.Textbox(
                label="cvp output directory", placeholder="folder with meta.json", elem_id="import_dir"
            )
            video = gr.Textbox(label="Source video", placeholder="the video cvp read", elem_id="import_video")
        button = gr.Button("Import", variant="primary", elem_id="import_btn")
        status = gr.Markdown(elem_id="import_status")

    # Gradio injects the request and the progress tracker through these parameters.
    def do_import(
        request: gr.Request,
        folder: str,
        source: str,
        progress: Any = gr.Progress(),  # noqa: B008
    ) -> tuple[str, str]:
        return import_run(
            ws,
            folder,
            source,
            on_progress=lambda stage, fraction: progress(fraction, desc=stage),
            session=session_of(request),
        )

    # The worker pool bounds the work, per session and in all.
    # A new attempt clears the last verdict first; the error shows in the status alone.
    button.click(None, None, status, js="() => ''", api_name=False).then(
        reported(do_import, [run_id, status], status),
        [cvp_dir, video],
        [run_id, status],
        api_name=False,
        concurrency_limit=None,
        show_progress_on=status,
    )
