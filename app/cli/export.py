"""``codec-lens export``: annotated clips, figures, CSV tables and YUView statistics of stored runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli.common import EXIT_OK, Parser, add_store_options, fail_with

# views.export_figures.PLOTS (not imported: start-up stays light)
PLOTS = ("timeline", "readiness", "coverage")
MAX_COMPARE = 3
HEATMAP_SCALES = ("frame", "video")  # backend.render.SCALES

_DESCRIPTION = """\
Export a stored run: the annotated clip (chosen layers, frame index and timestamp drawn in),
optionally side by side with up to three other runs; per-frame and per-block CSV; per-block
statistics for YUView; timeline, readiness and coverage figures. Every export writes <clip>.json, a
sidecar with the run config, versions, frame range and the sha256 of inputs and outputs.

Layers: heatmap, kept, lost, grid (block grid), patch_grid, codec_grid, anchor, bad.
The view settings are the Inspect tab's, with its defaults: --layers kept,anchor,bad, --heat block
(the ranked 2x2-block score; cell: the signal per codec cell), --heatmap-scale frame, --colormap
turbo, --opacity 0.5, and --crop for its zoom; the frames are drawn by the viewer's renderer, so
the same settings give the viewer's pixels. The sidecar records them under "view".
The clip is the video's own resolution by default (its frames decoded again, overlays drawn at
that size); --scale N or --width W change it, --size processed uses the run's processed frames.
Every figure follows --frames. Files go wherever --out says."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``export`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "export",
        help="export annotated clips, figures, CSV and YUView statistics of stored runs",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_id")
    p.add_argument("--out", required=True, help="clip file (png: a folder, or a .png for one frame)")
    p.add_argument("--compare", nargs="+", default=[], metavar="RUN_ID", help="runs to put beside it (≤ 3)")
    p.add_argument(
        "--frames", help="frame_index range A:B (B exclusive), A: or :B (default: every candidate)"
    )
    # Names are checked by the backend (not argparse choices), so a bad one is one line listing them.
    p.add_argument("--layers", default="kept,anchor,bad", help="comma-separated (default kept,anchor,bad)")
    p.add_argument(
        "--heat",
        default="block",
        help="what the heatmap layer shows: block (the ranked 2x2-block score, default) or cell "
        "(the signal per codec cell)",
    )
    p.add_argument(
        "--crop",
        metavar="X,Y,W,H",
        help="the viewer's zoom: x, y, width, height in processed-frame pixels, cut out of each frame "
        "after drawing at the clip's size (default: the whole frame)",
    )
    p.add_argument("--format", help="mp4, webm, gif, png or none (default: from --out, else mp4)")
    p.add_argument("--opacity", type=float, default=0.5, help="heatmap opacity (default 0.5)")
    p.add_argument("--colormap", default="turbo", help="turbo, viridis, magma, jet or inferno")
    p.add_argument(
        "--size",
        default="source",
        help="source: the video's own resolution, decoded again (default); processed: the run's frames",
    )
    p.add_argument(
        "--scale",
        help="clip size × N, e.g. 2 (frame or video, the old heatmap meaning, still work: --heatmap-scale)",
    )
    p.add_argument("--width", type=int, help="clip width in pixels, the aspect ratio kept (not with --scale)")
    p.add_argument("--heatmap-scale", default="frame", help="heatmap scale: frame or video (default frame)")
    p.add_argument("--fps", type=float, help="clip frame rate (default: the video's)")
    p.add_argument("--crf", type=int, default=18, help="mp4/webm constant quality, lower is better (18)")
    p.add_argument("--no-stamp", action="store_true", help="no frame index/timestamp footer")
    p.add_argument("--tables", action="store_true", help="also write <stem>.frames.csv and <stem>.blocks.csv")
    p.add_argument("--yuview", action="store_true", help="also write <stem>.yuview.csv (YUView statistics)")
    p.add_argument(
        "--yuview-coordinates", default="source", help="source (original video pixels) or processed"
    )
    p.add_argument(
        "--plots",
        default="",
        help="figures to write, comma-separated: timeline, readiness, coverage (the coverage audit)",
    )
    p.add_argument("--plot-format", default="png", help="comma-separated: png, svg, pdf, html (default png)")
    p.add_argument(
        "--group", type=int, action="append", help="readiness figure of this group only (repeatable)"
    )
    p.add_argument("--chromium", default="/usr/bin/chromium", help="browser for png/svg/pdf figures")
    p.add_argument(
        "--allow-dir",
        type=Path,
        action="append",
        default=[],
        help="ignored (deprecated): the CLI writes wherever --out says; only the app keeps a folder sandbox",
    )
    add_store_options(p, json_help="print the result as one JSON object")
    return p


def _format(args: argparse.Namespace) -> str:
    from backend.export import CLIP_FORMATS

    if args.format:
        return str(args.format)
    suffix = Path(args.out).suffix.lower().lstrip(".")
    return suffix if suffix in CLIP_FORMATS and suffix != "none" else "mp4"


def _size_options(args: argparse.Namespace) -> tuple[float, str]:
    """(clip size factor, heatmap scale) from ``--scale`` and ``--heatmap-scale``.

    ``--scale`` once named the heatmap scale: ``frame`` and ``video`` still mean that.
    """
    if args.scale is None:
        return 1.0, args.heatmap_scale
    if args.scale in HEATMAP_SCALES:
        return 1.0, args.scale
    try:
        return float(args.scale), args.heatmap_scale
    except ValueError:
        raise ValueError(
            f"Invalid scale ({args.scale!r}). Supported values are a size factor such as 2 "
            "(the heatmap's frame or video scale is --heatmap-scale)."
        ) from None


def _crop(text: str | None) -> tuple[float, ...] | None:
    """``X,Y,W,H`` → four floats (checked by ExportConfig); None or empty: no crop."""
    if text is None or not text.strip():
        return None
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(
            f"Invalid crop ({text!r}). Supported values are X,Y,W,H in processed-frame pixels."
        ) from None


def _export(args: argparse.Namespace) -> dict[str, Any]:
    from backend.config import parse_names
    from backend.export import ExportConfig, load_export_run, parse_frame_range, write_export
    from backend.store import SessionStore
    from views.export_figures import prepare_export_figures

    if len(args.compare) > MAX_COMPARE:
        raise ValueError(
            f"Invalid compare count ({len(args.compare)}). Supported values are 0 to {MAX_COMPARE}."
        )
    plots = parse_names(args.plots, PLOTS, what="plot")
    size_factor, heatmap_scale = _size_options(args)
    frames = parse_frame_range(args.frames)
    crop = _crop(args.crop)
    config = ExportConfig(
        out_path=args.out,
        allowed_roots=None,  # the user's own shell: write where told (the app keeps its sandbox)
        format=_format(args),
        frames=frames,
        size=args.size,
        size_factor=size_factor,
        width_px=args.width,
        layers=tuple(args.layers.split(",")),
        heat=args.heat,
        crop=crop,
        opacity=args.opacity,
        colormap=args.colormap,
        scale=heatmap_scale,
        fps=args.fps,
        crf=args.crf,
        stamp=not args.no_stamp,
        tables=args.tables,
        yuview=args.yuview,
        yuview_coordinates=args.yuview_coordinates,
        plot_formats=tuple(args.plot_format.split(",")),
        chromium_path=args.chromium,
    )
    with SessionStore(args.session_db, read_only=True) as store:
        runs = [load_export_run(store, run_id) for run_id in (args.run_id, *args.compare)]
    figures = prepare_export_figures(
        [(r.run_id, r.result) for r in runs], plots, groups=args.group, frames=frames
    )
    result = write_export(runs, config=config, figures=figures)
    return {
        "run_ids": [r.run_id for r in runs],
        "frames": len(result.frame_indices),
        "frame_size": None if result.frame_size is None else list(result.frame_size),
        "files": [str(p) for p in result.files],
        "sidecar": str(result.sidecar),
        "seconds": round(result.timings_secs.get("total", 0.0), 3),
    }


def run(args: argparse.Namespace) -> int:
    """Entry point of ``codec-lens export`` (returns the exit code)."""
    from backend.errors import CodecLensError

    try:
        summary = _export(args)
    except (CodecLensError, ValueError, OSError) as exc:  # ValueError: invalid names, ranges, options
        return fail_with(exc)
    if args.json:
        print(json.dumps(summary))
    else:
        size = "" if summary["frame_size"] is None else " ({1}x{0})".format(*summary["frame_size"])
        print(
            f"exported {summary['frames']} frames of {', '.join(summary['run_ids'])}{size}: "
            f"{len(summary['files'])} files in {summary['seconds']:.2f} s → {summary['sidecar']}"
        )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="codec-lens")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    return run(parser.parse_args(["export", *(argv or sys.argv[1:])]))


if __name__ == "__main__":
    sys.exit(main())
