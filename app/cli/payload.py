"""``codec-lens payload``: an output folder made into the inputs of LLaVA-OneVision-2 or OV-Encoder."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli.common import EXIT_OK, Parser, fail_with

_DESCRIPTION = """\
Read a codec-lens (or codec-video-prep) output folder -- meta.json, src_patch_position.npy, the
canvases and tokens.npy when present -- and write what a model takes into DIR:

  --model llava-ov2          positions.npy (the rows LLaVA-OneVision-2's processor consumes:
                             all-padding canvases dropped, each canvas's positions in 2x2 block
                             order), prompt.txt (the timestamp prompt, one <|image_pad|> per merged
                             token) and manifest.json (canvas files in order, fps, the processor's
                             max_pixels); a half-padded canvas is an error naming it.
  --model onevision-encoder  positions_thw.npy ([t, h, w] per canvas token, t the position among
                             the sampled frames) and visible_indices.npy (t*H*W + h*W + w), as
                             OneVision-Encoder's offline precompute writes them, and manifest.json.

The canvases the model takes are copied into DIR. Exit 0 when written, 2 with one error line."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``payload`` on an argparse subparsers object."""
    from backend.payload import MODELS

    parser = subparsers.add_parser(
        "payload",
        help="write a model's inputs (positions, prompt, manifest) from an output folder",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "output_dir", metavar="OUTPUT_DIR", type=Path, help="a codec-lens or cvp output folder"
    )
    parser.add_argument("--model", required=True, choices=MODELS.names, help="the model the payload is for")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="the payload folder to write")
    parser.add_argument("--json", action="store_true", help="print the manifest as one JSON object")
    return parser


def describe(files: Any, out: Path) -> str:
    """One line saying what was written."""
    m = files.manifest
    if files.model == "llava-ov2":
        dropped = len(m["dropped_canvases"])
        return (
            f"{out}: llava-ov2 payload of {len(m['canvas_files'])} canvases ({dropped} all-padding dropped), "
            f"{m['image_pad_tokens']} <|image_pad|> tokens, max_pixels {m['max_pixels']}, fps {m['fps']:g}"
        )
    rows = len(m["canvas_files"]) * m["tokens_per_canvas"]
    return (
        f"{out}: onevision-encoder payload of {len(m['canvas_files'])} canvases, {rows} positions over "
        f"{m['seq_len_frames']} sampled frames ({m['padded_rows']} padding rows repeat the last position)"
    )


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``payload`` command: 0 when written, 2 with one error line."""
    from backend.errors import CodecLensError
    from backend.payload import write_payload

    try:
        files = write_payload(args.output_dir, args.out, model=args.model)
    except (CodecLensError, ValueError) as exc:
        return fail_with(exc)
    print(json.dumps(files.manifest) if args.json else describe(files, args.out))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m app.cli.payload payload ...`` (app.cli wires the same parser)."""
    parser = Parser(prog="codec-lens")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
