"""Command-line entry point: ``codec-lens select|app ...``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

EXIT_BAD_INPUT = 2


def _add_selection_options(parser: argparse.ArgumentParser) -> None:
    from backend.pipeline import SelectionOptions

    for field in dataclasses.fields(SelectionOptions):
        meta = field.metadata
        if field.name == "avoid_keyframes":
            group = parser.add_mutually_exclusive_group()
            group.add_argument(
                "--avoid_keyframes",
                dest="avoid_keyframes",
                action="store_true",
                default=None,
                help="shift sampled keyframes to neighbours (default)",
            )
            group.add_argument(
                "--no_avoid_keyframes",
                dest="avoid_keyframes",
                action="store_false",
                help="keep sampled keyframes",
            )
            continue
        kind = {int: int, float: float, str: str}[type(field.default)]
        parser.add_argument(
            f"--{field.name}",
            type=kind,
            default=None,
            choices=meta.get("choices"),
            help=f"{meta['help']} (default: {field.default})",
        )


def options_from_args(args: argparse.Namespace) -> Any:
    """SelectionOptions from parsed arguments; unset options keep their defaults."""
    from backend.pipeline import SelectionOptions

    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(SelectionOptions)
        if getattr(args, f.name, None) is not None
    }
    return SelectionOptions(**given)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codec-lens",
        description="Codec Lens: inspect and reproduce codec-native video token selection.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sel = sub.add_parser(
        "select", help="run the selection pipeline on a video and write a cvp-style directory"
    )
    sel.add_argument("video", help="input video file")
    sel.add_argument(
        "--out", required=True, help="output directory (replaced atomically when the run succeeds)"
    )
    sel.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    _add_selection_options(sel)
    app = sub.add_parser("app", help="launch the web app")
    app.add_argument("video", nargs="?", help="video to open (default: the bundled sample)")
    app.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    app.add_argument("--port", type=int, default=7860)
    return parser


def _fail(message: str) -> int:
    print(f"codec-lens: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_select(args: argparse.Namespace) -> int:
    from backend.errors import CodecLensError
    from backend.output import write_output
    from backend.pipeline import run

    t0 = time.perf_counter()
    try:
        options = options_from_args(args)
        result = run(args.video, options=options)
        write_output(result, args.out)
    except CodecLensError as exc:
        return _fail(exc.one_line())
    except ValueError as exc:  # invalid option values
        return _fail(str(exc).replace("\n", " "))
    seconds = time.perf_counter() - t0
    summary = {
        "video": result.info.path,
        "out": str(args.out),
        "profile": options.profile,
        "frames": int(result.candidates.frame_indices.size),
        "total_frames": result.info.total_frames,
        "groups": len(result.selection.groups),
        "canvases": int(result.canvases.images.shape[0]),
        "tokens": int(result.canvases.tokens.shape[0]),
        "valid_tokens": int(result.canvases.tokens[:, 7].sum()),
        "seconds": round(seconds, 3),
        "read_mode": result.decoded.read_mode,
        "stage_seconds": {k: round(v, 4) for k, v in result.timings_secs.items()},
        "warnings": [w.as_dict() for w in result.warnings],
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['video']}: {summary['frames']} frames → {summary['groups']} groups, "
            f"{summary['canvases']} canvases, {summary['tokens']} tokens in {seconds:.2f} s "
            f"({options.profile}, {len(summary['warnings'])} warnings) → {args.out}"
        )
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    # The app reads these before gradio is imported: no telemetry, no version checks.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from app.main import launch

    return launch(video=args.video, host=args.host, port=args.port)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "select":
        return cmd_select(args)
    return cmd_app(args)


if __name__ == "__main__":
    sys.exit(main())
