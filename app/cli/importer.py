"""``codec-lens import``: bring a codec-video-prep output directory and its video into a session store."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli.common import EXIT_OK, Parser, add_store_options, fail_with

_DESCRIPTION = """\
Import a codec-video-prep output directory (meta.json, frame_ids.npy, src_patch_position.npy,
canvas_NNN.jpg|png) together with the video it was made from. The options are read from
meta.json, the run is recomputed with the parity profile, our frame ids, positions and canvases
are compared with cvp's files, and the import is stored as a run (config key imported_from)
whose tokens are cvp's. Exit 0 on match or mismatch (see the status), 2 on bad input."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``import`` on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "import",
        help="import a codec-video-prep output directory with its source video as a stored run",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("cvp_dir", metavar="CVP_DIR", type=Path, help="a codec-video-prep output directory")
    parser.add_argument("video", metavar="VIDEO", type=Path, help="the video cvp read")
    add_store_options(parser, json_help="print the outcome as one JSON object")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``import`` command: 0 when stored (match or mismatch), 2 with one error line."""
    from backend.cvp_format import ImportConfig, import_cvp
    from backend.errors import CodecLensError
    from backend.store import SessionStore

    try:
        with SessionStore(args.session_db) as store:
            outcome = import_cvp(args.cvp_dir, args.video, store, config=ImportConfig())
    except (CodecLensError, ValueError) as exc:  # ValueError: invalid option values
        return fail_with(exc)
    if args.json:
        print(json.dumps(outcome.as_dict()))
    else:
        print("\n".join(outcome.describe()))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m app.cli.importer import ...`` (app.cli wires the same parser)."""
    parser = Parser(prog="codec-lens")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
