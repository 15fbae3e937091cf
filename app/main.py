"""Gradio app composition: run the pipeline on a video and show the run summary view."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE_VIDEO = REPO / "sample_videos" / "flower_timelapse_cc0.mp4"


def build_app(video: str | Path):
    """Blocks for one finished run of ``video`` (clean profile)."""
    import gradio as gr

    from backend.errors import CodecLensError
    from backend.pipeline import SelectionOptions, run
    from views import run_summary

    try:
        result = run(video, options=SelectionOptions(profile="clean"))
    except CodecLensError as exc:
        raise SystemExit(f"codec-lens: error: {exc.one_line()}") from exc
    n = int(result.candidates.frame_indices.size)
    first = run_summary.prepare_frame(result, 0)

    def show(row: float) -> tuple[object, str]:
        try:
            view = run_summary.prepare_frame(result, int(row))
        except ValueError as exc:
            raise gr.Error(str(exc)) from exc
        return view.image, view.caption

    with gr.Blocks(title="Codec Lens") as demo:
        gr.Markdown("# Codec Lens\nWhat the codec-native selector kept, and why.")
        gr.Markdown(run_summary.prepare_summary(result), elem_id="summary")
        with gr.Row():
            with gr.Column(scale=3):
                frame = gr.Image(
                    value=first.image,
                    format="jpeg",
                    label="Frame",
                    elem_id="frame",
                    interactive=False,
                )
                caption = gr.Markdown(first.caption, elem_id="frame_info")
                slider = gr.Slider(0, n - 1, value=0, step=1, label="Candidate", elem_id="frame_slider")
            with gr.Column(scale=2):
                gr.Dataframe(
                    value=run_summary.prepare_group_rows(result),
                    headers=run_summary.GROUP_HEADERS,
                    label="Groups",
                    interactive=False,
                )
        gr.Gallery(value=run_summary.prepare_gallery(result), label="Canvases", columns=4, format="jpeg")
        slider.change(show, slider, [frame, caption], api_name="frame")
    return demo


def launch(*, video: str | None, host: str, port: int) -> int:
    """Build and serve the app (blocks until interrupted)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    demo = build_app(video or SAMPLE_VIDEO)
    demo.launch(server_name=host, server_port=port, share=False)
    return 0
