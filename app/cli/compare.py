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

from app.cli.common import Parser, add_selection_options, add_store_options, fail_with, given_options

_DESCRIPTION = """\
Encode VIDEO in H.264, HEVC, VP9 and AV1 with matched settings (same GOP, same B-frame structure
where the codec allows, CRF per codec or one target bitrate), run the selection on each variant
and store the comparison: kept-set Jaccard and block-score Spearman per pair, canvases and tokens
per second, time covered, luma bias and Y-PSNR of every decode against the source.

AV1 has no bitcost: its variant is selected with --fallback-score (residual by default).
Sampling defaults to all_frames here, so every frame can be compared across codecs.
With --encoded, the given files are the variants and VIDEO is their luma reference.

With --selectors, VIDEO is not encoded: 2 to 4 selectors, presets or option sets run on it
(e.g. --selectors "cvp,llava-ov2[score_mode=mvwarp],uniform[num_frames=16]") and the comparison
stores each run's tokens, canvases, temporal and spatial coverage and the kept-set Jaccard of
every pair, frame by frame. Selection options given as flags apply to every entry whose
selector takes them (docs/selectors.md)."""


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
        "--selectors",
        help="compare selectors instead of codecs: 2 to 4 comma-separated selector or preset names, each "
        "with optional [option=value,…] (e.g. cvp,llava-ov2[gop_mode=bitcost],mage-vl)",
    )
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
    # Its own dest: llava-ov2's selection option --max_frames would otherwise share "max_frames".
    parser.add_argument(
        "--max-frames", dest="encode_max_frames", type=int, default=0, help="encode only the first N frames"
    )
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
    add_selection_options(parser, selector_flag=False)
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
        max_frames=args.encode_max_frames,
        max_side=args.max_side,
        score=args.score or "bitcost",
        fallback_score=args.fallback_score,
        measure_reader=not args.no_reader,
        **parse_crf(args.crf, codecs=codecs),
    )


def _options(args: argparse.Namespace) -> Any:
    from backend.selectors import check_options, options_for
    from backend.selectors.presets import preset, preset_values

    given = {k: v for k, v in given_options(args).items() if k != "score"}
    check_options("cvp", given)  # the codec variants are selected by cvp
    if args.preset is not None:
        if preset(args.preset).selector != "cvp":
            raise ValueError(
                f"Invalid preset ({args.preset!r}) for a codec comparison. Supported values are cvp presets."
            )
        given = preset_values(args.preset, given)
    given.setdefault("frame_sampling_mode", "all_frames")
    return options_for("cvp", given)


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


def selector_summary(comparison: Any) -> dict[str, Any]:
    """A selector comparison as one JSON-ready dict: entries with their run figures, pairs, timings."""
    cover = {c.variant_index: dataclasses.asdict(c) for c in comparison.coverage}
    entries = []
    for k, entry in enumerate(comparison.entries):
        c = cover[k]
        entries.append(
            {
                "label": entry.label,
                "selector": entry.selector,
                "run_id": comparison.run_ids[k],
                "options": entry.options.as_dict(),
            }
            | {key: _num(v) for key, v in c.items() if key not in ("variant_index", "selector")}
        )
    labels = [e.label for e in comparison.entries]
    return {
        "comparison_id": comparison.comparison_id,
        "kind": "selectors",
        "video": comparison.source_path,
        "frames": comparison.frame_count,
        "grid_hw": list(comparison.grid_hw),
        "entries": entries,
        "pairs": [
            {k: _num(v) for k, v in p.summary().items() if not k.startswith("spearman")}
            | {"a": labels[p.variant_a], "b": labels[p.variant_b]}
            for p in comparison.pairs
        ],
        "seconds": {k: round(v, 3) for k, v in comparison.timings_secs.items()},
    }


def _print_selectors(s: dict[str, Any]) -> None:
    print(
        f"{s['video']}: {s['frames']} frames, {len(s['entries'])} selectors → comparison "
        f"{s['comparison_id']} "
        f"in {s['seconds']['total']:.1f} s (blocks compared on a {s['grid_hw'][0]}x{s['grid_hw'][1]} grid)"
    )
    print(f"{'selector':30s} {'canv':>5s} {'tokens':>7s} {'time%':>6s} {'gap s':>6s} {'space%':>6s}  run")
    for e in s["entries"]:
        print(
            f"{e['label'][:30]:30s} {e['canvases']:5d} {e['valid_tokens']:7d} "
            f"{100 * e['temporal_coverage']:6.1f} "
            f"{e['longest_gap_secs']:6.2f} {100 * e['spatial_coverage']:6.1f}  {e['run_id']}"
        )
    for p in s["pairs"]:
        jac = "–" if p["jaccard"] is None else f"{p['jaccard']:.3f}"
        mean = "–" if p["jaccard_frame_mean"] is None else f"{p['jaccard_frame_mean']:.3f}"
        print(f"  {p['a']} vs {p['b']}: Jaccard {jac} (frame mean {mean})")


def run_selectors(args: argparse.Namespace) -> int:
    """``compare VIDEO --selectors …``: 0 when done, 2 with one error line on bad input."""
    from backend.compare import compare_selectors, parse_entries
    from backend.compare.selectors import probe_frames
    from backend.errors import CodecLensError
    from backend.selectors.presets import PRESETS
    from backend.store import SessionStore

    t0 = time.perf_counter()
    try:
        if args.preset is not None:
            raise ValueError(
                "Invalid option (--preset) with --selectors. Supported values name presets among the "
                "selectors."
            )
        names = args.selectors
        capped = any(
            n.split("[")[0].strip() in PRESETS and PRESETS[n.split("[")[0].strip()].cap_sampled_frames
            for n in names.split(",")
        )
        entries = parse_entries(
            names, shared=given_options(args), total_frames=probe_frames(args.video) if capped else None
        )
        with SessionStore(args.session_db) as store:
            comparison = compare_selectors(
                args.video, store, entries=entries, comparison_id=getattr(args, "comparison_id", None)
            )
    except (CodecLensError, ValueError, OSError) as exc:
        return fail_with(exc, subject=args.video)
    s = selector_summary(comparison)
    s["seconds"]["wall"] = round(time.perf_counter() - t0, 3)
    if args.json:
        print(json.dumps(s))
    else:
        _print_selectors(s)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``compare`` command: 0 when done, 2 with one error line on bad input."""
    if args.selectors:
        return run_selectors(args)
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
    parser = Parser(prog="codec-lens")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
