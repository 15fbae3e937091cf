"""``codec-lens app``: launch the web app on a video or a stored run."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from app.cli.common import DEFAULT_SESSION_DB, EXIT_FAILED, fail_with

DEFAULT_MAX_UPLOAD_MB = 2048  # app.server.DEFAULT_MAX_UPLOAD_MB (not imported: it imports gradio)


def _megabytes(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


_megabytes.__name__ = "size in MB"  # argparse names the type in its error line


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
    app.add_argument(
        "--host",
        default="127.0.0.1",
        help="bind address (default 127.0.0.1); any other than 127.0.0.1, localhost or ::1 needs --auth-file",
    )
    app.add_argument("--port", type=int, default=7860)
    app.add_argument(
        "--auth-file",
        type=Path,
        default=None,
        help="file of user:password lines: the app asks for a login (required beyond 127.0.0.1)",
    )
    app.add_argument(
        "--max-upload-mb",
        type=_megabytes,
        default=DEFAULT_MAX_UPLOAD_MB,
        help=f"largest upload accepted, in MB (default {DEFAULT_MAX_UPLOAD_MB})",
    )
    app.add_argument(
        "--session-db", type=Path, default=DEFAULT_SESSION_DB, help=f"default {DEFAULT_SESSION_DB}"
    )
    return app


def run(args: argparse.Namespace) -> int:
    """Serve the app until interrupted.

    2 with one error line when it cannot serve as asked (a non-loopback host without
    ``--auth-file``, a bad auth file, a port in use, an unusable work folder); 1 when its first
    run cannot open.
    """
    # The app reads these before gradio is imported: no telemetry, no version checks.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from app.server import check_access, check_port, first_run, launch, make_app_workspace, read_auth_file
    from backend.errors import CodecLensError

    # What can be checked before the first run (which may take minutes) is checked first.
    try:
        auth = None if args.auth_file is None else read_auth_file(args.auth_file)
        check_access(args.host, auth)
        check_port(args.host, args.port)
        ws = make_app_workspace(
            video=args.video,
            session_db=args.session_db,
            input_dirs=tuple(args.allow_dir),
            output_dir=args.work_dir,
        )
    except CodecLensError as exc:
        return fail_with(exc)
    try:
        run_id = first_run(ws, video=args.video, run_id=args.run_id)
    except CodecLensError as exc:
        ws.close()
        return fail_with(exc, code=EXIT_FAILED)
    try:
        return launch(
            ws, run_id=run_id, host=args.host, port=args.port, auth=auth, max_upload_mb=args.max_upload_mb
        )
    except CodecLensError as exc:  # the port was taken while the first run ran
        return fail_with(exc)
