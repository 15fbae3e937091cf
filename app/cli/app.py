"""``codec-lens app``: launch the web app on a video or a stored run."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from app.cli.common import DEFAULT_SESSION_DB, EXIT_FAILED, fail_with


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``app`` on an argparse subparsers object."""
    app = subparsers.add_parser("app", help="launch the web app")
    app.add_argument("video", nargs="?", help="video to open (default: the bundled sample)")
    app.add_argument("--run", dest="run_id", help="open this stored run instead of a video")
    app.add_argument(
        "--allow-dir",
        type=Path,
        action="append",
        default=[],
        help="a folder whose videos the app may open (repeatable; the current folder, the video's "
        "folder, the sample folder and the work folder are always allowed)",
    )
    app.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="folder the app writes uploads and exports into (default ~/.codec-lens/work)",
    )
    app.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    app.add_argument("--port", type=int, default=7860)
    app.add_argument(
        "--session-db", type=Path, default=DEFAULT_SESSION_DB, help=f"default {DEFAULT_SESSION_DB}"
    )
    return app


def run(args: argparse.Namespace) -> int:
    """Serve the app until interrupted; 1 with one error line when its first run cannot open."""
    # The app reads these before gradio is imported: no telemetry, no version checks.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from app.server import launch, open_workspace
    from backend.errors import CodecLensError

    try:
        ws, run_id = open_workspace(
            video=args.video,
            run_id=args.run_id,
            session_db=args.session_db,
            input_dirs=tuple(args.allow_dir),
            output_dir=args.work_dir,
        )
    except CodecLensError as exc:
        return fail_with(exc, code=EXIT_FAILED)
    return launch(ws, run_id=run_id, host=args.host, port=args.port)
