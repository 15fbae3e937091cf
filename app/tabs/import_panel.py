"""Import panel: bring a codec-video-prep output directory and its video in, then open the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.tabs.common import ui_error
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace


def _status_markdown(outcome: Any) -> str:
    lines = outcome.describe()
    verdict = "matches" if outcome.status == "match" else "differs from"
    text = (
        f"**Imported** run `{outcome.run_id}`: cvp's output {verdict} our parity recomputation.\n\n{lines[0]}"
    )
    if outcome.warnings:
        text += "\n\n" + "\n".join(f"- `{w.code}` {w.message}" for w in outcome.warnings)
    return text


def import_run(
    ws: Workspace, folder: str, source: str, *, on_progress: Callable[[str, float], None] | None = None
) -> tuple[str, str]:
    """Import cvp output ``folder`` made from ``source`` (paths inside the allowed folders).

    Returns the new run's id and the status markdown; errors are ``gr.Error`` in one line.
    """
    from backend.cvp_format import ImportConfig, import_cvp

    try:
        outcome = import_cvp(
            ws.input_path(folder),
            ws.input_path(source),
            ws.store,
            config=ImportConfig(),
            on_progress=on_progress,
        )
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc
    ws.remember(outcome.run_id, outcome.result)
    return outcome.run_id, _status_markdown(outcome)


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

    # Gradio injects the progress tracker through this default.
    def do_import(folder: str, source: str, progress: Any = gr.Progress()) -> tuple[str, str]:  # noqa: B008
        return import_run(
            ws, folder, source, on_progress=lambda stage, fraction: progress(fraction, desc=stage)
        )

    button.click(do_import, [cvp_dir, video], [run_id, status], api_name=False)
