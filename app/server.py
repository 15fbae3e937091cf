"""The app's server: the frame and info routes beside Gradio's, serving and launching the app."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.browser_js import KEY_JS
from app.main import CSS, build_app
from app.workspace import SAMPLE_VIDEO, Workspace, ensure_run, make_workspace

LAUNCH_KWARGS = {"js": KEY_JS, "css": CSS}


def mount_frame_routes(
    app: Any, render_jpeg: Callable[..., bytes], info_fragment: Callable[[str, int], str]
) -> None:
    """``/lens/frame`` (a rendered frame as JPEG) and ``/lens/info`` (its info line) on ``app``."""
    from fastapi import Query
    from fastapi.responses import Response

    from backend.errors import CodecLensError

    def frame(
        run: str = Query(..., max_length=64),
        row: int = Query(..., ge=0),
        l: str = Query("", max_length=200),  # noqa: E741 - short query names keep URLs short
        o: float = Query(0.5, ge=0.0, le=1.0),
        c: str = Query("turbo", max_length=32),
        s: str = Query("frame", max_length=16),
    ) -> Response:
        t0 = time.perf_counter()
        try:
            data = render_jpeg(run, row, l, o, c, s)
        except (CodecLensError, ValueError) as exc:
            return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
        headers = {
            # A URL names one immutable frame of one stored run: let the browser keep it.
            "Cache-Control": "private, max-age=3600",
            # Render time, visible in the browser's resource timing (bench/scrub.py reads it).
            "Server-Timing": f"render;dur={(time.perf_counter() - t0) * 1000:.1f}",
        }
        return Response(data, media_type="image/jpeg", headers=headers)

    def info(run: str = Query(..., max_length=64), row: int = Query(..., ge=0)) -> Response:
        try:
            text = info_fragment(run, row)
        except (CodecLensError, ValueError) as exc:
            return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
        return Response(text, media_type="text/html", headers={"Cache-Control": "private, max-age=3600"})

    app.add_api_route("/lens/frame", frame, methods=["GET"])
    app.add_api_route("/lens/info", info, methods=["GET"])


def serve(demo: Any, ws: Workspace, *, host: str, port: int, block: bool = True) -> Any:
    """Launch ``demo`` with the frame routes; returns the server app (blocks unless told not to)."""
    from gradio.routes import App

    app = App()
    mount_frame_routes(app, demo.lens_render_jpeg, demo.lens_info)
    demo.launch(
        server_name=host,
        server_port=port,
        share=False,
        prevent_thread_lock=True,
        quiet=not block,
        allowed_paths=[str(ws.output_root)],
        _app=app,
        **LAUNCH_KWARGS,
    )
    if block:
        demo.block_thread()
    return app


def open_workspace(
    *,
    video: str | None,
    run_id: str | None = None,
    session_db: Path | None = None,
    input_dirs: tuple[Path, ...] = (),
    output_dir: Path | None = None,
) -> tuple[Workspace, str]:
    """The app's workspace and the run to open: stored ``run_id``, else a run of ``video`` (default
    the bundled sample), made if there is none. The current folder and the video's are allowed.

    Raises the backend's errors when the run cannot be made or opened.
    """
    dirs = tuple(input_dirs) + ((Path(video).expanduser().resolve().parent,) if video else ())
    ws = make_workspace(session_db=session_db, input_dirs=(*dirs, Path.cwd()), output_dir=output_dir)
    rid = run_id or ensure_run(ws, video or SAMPLE_VIDEO)
    ws.result(rid)
    return ws, rid


def launch(ws: Workspace, *, run_id: str, host: str, port: int) -> int:
    """Build and serve the app over ``ws`` on stored run ``run_id`` (blocks until interrupted)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    demo = build_app(ws, run_id=run_id)
    serve(demo, ws, host=host, port=port)
    return 0
