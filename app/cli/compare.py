"""``codec-lens compare``: encode a source in several codecs, select on each, store the comparison."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli.common import add_selection_options, add_store_options, fail_with

_DESCRIPTION = """\
Encode VIDEO in H.264, HEVC, VP9 and AV1 with matched settings (same GOP, same B-frame structure
where the codec allows, CRF per codec or one target bitrate), run the selection on each variant
and store the comparison: kept-set Jaccard and block-score Spearman per pair, canvases and tokens
per second, time covered, luma bias and Y-PSNR of every decode against the source.

AV1 has no bitcost: its variant is selected with --fallback-score (residual by default).
Sampling defaults to all_frames here, so every frame can be compared across codecs.
With --encoded, the given files are the variants and VIDEO is their luma reference."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``compare`` on an argparse subparsers object."""
    from backend.compare import CODECS, FALLBACK_SCORES, SPEEDS

    parser = subparsers.add_parser(
        "compare",
        help="encode a video in H.264/HEVC/VP9/AV1, select on each, store and print the comparison",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("video", help="source video")
    parser.add_argument(
        "--codecs",
        default=",".join(CODECS),
        help=f"comma-separated, 1 to 4 of {','.join(CODECS)} (default: all)",
    )
    parser.add_argument(
        "--crf",
        default="",
        help="one value for every codec, or codec=value pairs (default: h264=23,hevc=28,vp9=32,av1=35)",
    )
    parser.add_argument("--bitrate", type=int, default=0, help="target kb/s for every codec instead of CRF")
    parser.add_argument("--gop", type=int, default=32, help="keyframe interval in frames (default 32)")
    parser.add_argument("--bframes", type=int, default=0, help="B-frames between references (default 0)")
    parser.add_argument(
        "--speed", default="fast", help=f"encoder presets: {', '.join(SPEEDS)} (default fast)"
    )
    parser.add_argument("--max-frames", type=int, default=0, help="encode only the first N frames")
    parser.add_argument("--max-side", type=int, default=0, help="downscale the longer side to at most N px")
    parser.add_argument(
        "--fallback-score",
        default="residual",
        help=f"signal for codecs without --score: {', '.join(FALLBACK_SCORES)} (default residual)",
    )
    parser.add_argument("--no-reader", action="store_true", help="skip measuring cvp's fast reader")
    parser.add_argument(
        "--encoded", nargs="+", type=Path, help="pre-encoded variants of VIDEO (nothing is encoded)"
    )
    parser.add_argument(
        "--out-dir", type=Path, help="folder for the encodes (default: next to the session db)"
    )
    add_store_options(parser, json_help="print the comparison as one JSON object")
    add_selection_options(parser)
    return parser


def _config(args: argparse.Namespace) -> Any:
    from backend.compare import CompareConfig, parse_crf

    codecs = tuple(c.strip() for c in args.codecs.split(",") if c.strip())
    return CompareConfig(
        codecs=codecs,
        gop=args.gop,
        bframes=args.bframes,
        bitrate_kbps=args.bitrate,
        speed=args.speed,
        max_frames=args.max_frames,
        max_side=args.max_side,
        score=args.score or "bitcost",
        fallback_score=args.fallback_score,
        measure_reader=not args.no_reader,
        **parse_crf(args.crf, codecs=codecs),
    )


def _options(args: argparse.Namespace) -> Any:
    from backend.pipeline import SelectionOptions

    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(SelectionOptions)
        if getattr(args, f.name, None) is not None and f.name != "score"
    }
    given.setdefault("frame_sampling_mode", "all_frames")
    return SelectionOptions(**given)


def _num(value: Any, digits: int = 4) -> Any:
    if isinstance(value, float):
        return round(value, digits) if math.isfinite(value) else None
    return value


def summary(comparison: Any) -> dict[str, Any]:
    """The comparison as one JSON-ready dict: settings, variants with metrics, pairs, timings."""
    metrics = {m.variant_index: m for m in comparison.metrics}
    variants = []
    for v in comparison.variants:
        m = dataclasses.asdict(metrics[v.variant_index])
        row = {k: _num(val) for k, val in dataclasses.asdict(v).items()}
        row["keyframe_indices"] = list(v.keyframe_indices)
        variants.append(row | {k: _num(val) for k, val in m.items() if k != "variant_index"})
    return {
        "comparison_id": comparison.comparison_id,
        "source": comparison.source_path,
        "reference": comparison.reference_path,
        "width": comparison.width,
        "height": comparison.height,
        "fps": _num(comparison.fps),
        "frames": comparison.frame_count,
        "config": comparison.config.as_dict(),
        "selection_options": comparison.options.as_dict(),
        "variants": variants,
        "pairs": [
            {k: _num(val) for k, val in p.summary().items()}
            | {"a": comparison.variants[p.variant_a].label, "b": comparison.variants[p.variant_b].label}
            for p in comparison.pairs
        ],
        "seconds": {k: round(val, 3) for k, val in comparison.timings_secs.items()},
    }


TABLE_LEGEND: tuple[str, ...] = (
    "kb/s: achieved bit rate · canv: canvases made · tok/s: valid tokens per second of video",
    "time%: share of frames with a block in a canvas · blk%: kept blocks of all blocks of all frames",
    "bias, PSNR: mean luma bias (levels) and Y-PSNR (dB) of the full decode against the source",
    "rd bias, rd PSNR: the same for cvp's fast reader (loop filter skipped; – without one)",
)
"""What the abbreviated columns of the text table mean, printed under it (docs/compare.md too)."""


def _print_text(s: dict[str, Any]) -> None:
    print(
        f"{s['source']}: {s['frames']} frames at {s['width']}x{s['height']} → comparison "
        f"{s['comparison_id']} in {s['seconds']['total']:.1f} s"
    )
    head = f"{'variant':14s} {'score':9s} {'kb/s':>7s} {'canv':>5s} {'tok/s':>8s} {'time%':>6s} {'blk%':>6s}"
    print(head + f" {'bias':>7s} {'PSNR':>6s} {'rd bias':>7s} {'rd PSNR':>7s}")

    def f(value: Any, spec: str) -> str:
        return "–" if value is None else format(value, spec)

    for v in s["variants"]:
        print(
            f"{v['label']:14s} {v['score']:9s} {v['bitrate_kbps']:7.1f} {v['canvases']:5d} "
            f"{v['tokens_per_sec']:8.1f} {100 * v['time_covered_share']:6.1f} "
            f"{100 * v['kept_block_share']:6.1f} "
            f"{f(v['luma_bias_mean'], '7.3f')} {f(v['psnr_y_db'], '6.2f')} "
            f"{f(v['reader_luma_bias_mean'], '7.3f')} {f(v['reader_psnr_y_db'], '7.2f')}"
        )
    for line in TABLE_LEGEND:
        print(f"  {line}")
    for p in s["pairs"]:
        print(
            f"  {p['a']} vs {p['b']}: Jaccard {f(p['jaccard'], '.3f')} "
            f"(frame mean {f(p['jaccard_frame_mean'], '.3f')}), Spearman mean {f(p['spearman_mean'], '.3f')}"
        )


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``compare`` command: 0 when done, 2 with one error line on bad input."""
    from backend.compare import compare
    from backend.errors import CodecLensError
    from backend.store import SessionStore

    t0 = time.perf_counter()
    try:
        config, options = _config(args), _options(args)
        with SessionStore(args.session_db) as store:
            comparison = compare(
                args.video,
                store,
                config=config,
                options=options,
                out_dir=args.out_dir,
                encoded=args.encoded,
                comparison_id=getattr(args, "comparison_id", None),  # named by app.cli's crash record
            )
    except (CodecLensError, ValueError, OSError) as exc:  # ValueError: invalid option values
        return fail_with(exc, subject=args.video)
    s = summary(comparison)
    s["seconds"]["wall"] = round(time.perf_counter() - t0, 3)
    if args.json:
        print(json.dumps(s))
    else:
        _print_text(s)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m app.cli.compare compare ...`` (app.cli wires the same parser)."""
    parser = argparse.ArgumentParser(prog="codec-lens")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
