"""``codec-lens luma-bias``: per-frame luma bias, decoder pairs, batches, fitted correction."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli.common import EXIT_OK, Parser, fail, fail_with

ACTIONS = ("analyze", "fit", "apply", "fast-reader", "roundtrip", "batch")

_DESCRIPTION = """\
Measure the per-frame luma bias of a decoder output against a reference (spec: luma-bias.md).

  luma-bias [analyze] --reference R --test T [--official O] [--geometry h3|gop] [--offset N]
                      [--truncate] [--json OUT] [--plot OUT.html] [--session-db DB]
  luma-bias fit --references DIR --train T... [--test T...] --out coeffs.json [--json OUT]
  luma-bias apply COEFFS --test T --out corrected.mp4 [--reference R] [--lossless] [--json OUT]
  luma-bias fast-reader VIDEO [--json OUT] [--plot OUT.html]
  luma-bias roundtrip VIDEO --out-dir DIR [--codec C ...] [--frames N] [--json OUT]
  luma-bias batch --references DIR --tests DIR [--json OUT]

Options of an action come after its name. --json - prints the JSON to stdout."""


_SESSION_DB_HELP = "store the analysis in this session database (DuckDB) and print its id"


def _add_geometry_options(parser: argparse.ArgumentParser, *, default: str) -> None:
    group = parser.add_argument_group("geometry")
    # Validated by the backend (not argparse choices) so a bad name is one error line listing them.
    group.add_argument("--geometry", default=default, help=f"h3 (latent window) or gop (default: {default})")
    group.add_argument("--temporal-compression", type=int, help="h3: frames per latent (default 4)")
    group.add_argument("--latents-per-chunk", type=int, help="h3: latents per chunk L (default 5)")
    group.add_argument("--window", type=int, help="h3: window W in latents (default 7)")
    group.add_argument("--stride", type=int, help="h3: stride S in latents (default 5)")
    group.add_argument(
        "--gop-every",
        type=int,
        help="gop: a boundary every N frames (default: at the test video's keyframes)",
    )


def _add_measure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--offset", type=int, default=0, help="pair test frame t with reference frame t + N (default 0)"
    )
    parser.add_argument(
        "--truncate",
        action="store_true",
        help="compare the first min(test, reference) frames when counts differ",
    )
    parser.add_argument(
        "--cell", type=int, default=64, help="cell side of the gain analysis and fit (default 64)"
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``luma-bias`` (and its actions) on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "luma-bias",
        help="per-frame luma bias of a decoder output; decoder pairs; fitted correction",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--reference", type=Path, help="the video the test should match")
    parser.add_argument("--test", type=Path, help="the decoder output under study")
    parser.add_argument("--official", type=Path, help="a second reference (e.g. the official decode)")
    parser.add_argument("--json", help="write the results as JSON to this file (- for stdout)")
    parser.add_argument("--plot", type=Path, help="write a self-contained plotly HTML report")
    parser.add_argument("--session-db", type=Path, help=_SESSION_DB_HELP)
    _add_measure_options(parser)
    _add_geometry_options(parser, default="h3")
    actions = parser.add_subparsers(dest="luma_action", metavar="ACTION", title="actions (default: analyze)")

    ana = actions.add_parser("analyze", help="the default action; same options as luma-bias itself")
    ana.add_argument("--reference", type=Path, required=True)
    ana.add_argument("--test", type=Path, required=True)
    ana.add_argument("--official", type=Path)
    ana.add_argument("--json")
    ana.add_argument("--plot", type=Path)
    ana.add_argument("--session-db", type=Path, help=_SESSION_DB_HELP)
    _add_measure_options(ana)
    _add_geometry_options(ana, default="h3")

    fit = actions.add_parser(
        "fit", help="fit the linear correction on training clips, evaluate on held-out clips"
    )
    fit.add_argument(
        "--references", type=Path, required=True, help="folder of references, paired with tests by file name"
    )
    fit.add_argument(
        "--train", type=Path, nargs="+", required=True, help="training test outputs (files or folders)"
    )
    fit.add_argument(
        "--test", type=Path, nargs="*", default=[], help="held-out test outputs (files or folders)"
    )
    fit.add_argument("--out", type=Path, required=True, help="coefficients JSON file to write")
    fit.add_argument("--json", help="write the fit report (held-out residuals) as JSON")
    fit.add_argument("--min-cells", type=int, default=8, help="fewer cells than this → constant-only key")
    _add_measure_options(fit)
    _add_geometry_options(fit, default="h3")

    app = actions.add_parser("apply", help="write a corrected copy of a test video")
    app.add_argument("coefficients", type=Path, help="coefficients JSON from luma-bias fit")
    app.add_argument("--test", type=Path, required=True)
    app.add_argument("--out", type=Path, required=True, help="corrected video to write")
    app.add_argument("--reference", type=Path, help="re-measure before/after against this reference")
    app.add_argument("--lossless", action="store_true", help="libx264rgb qp 0 instead of libx264 crf 12")
    app.add_argument("--json", help="write the before/after summaries as JSON")

    fast = actions.add_parser("fast-reader", help="cvp's fast reader (no loop filter) vs a full decode")
    fast.add_argument("video", type=Path)
    fast.add_argument("--json")
    fast.add_argument("--plot", type=Path)
    _add_measure_options(fast)
    _add_geometry_options(fast, default="gop")

    rt = actions.add_parser("roundtrip", help="encode/decode round trips against the source")
    rt.add_argument("video", type=Path)
    rt.add_argument("--out-dir", type=Path, required=True, help="folder for the encoded files")
    rt.add_argument(
        "--codec",
        nargs="+",
        default=["libx264", "libx265", "libvpx-vp9", "libsvtav1"],
        help="encoders (default: all four)",
    )
    rt.add_argument("--frames", type=int, help="only the first N frames")
    rt.add_argument("--json")
    _add_measure_options(rt)
    _add_geometry_options(rt, default="gop")

    bat = actions.add_parser("batch", help="a folder of test outputs against a folder of references")
    bat.add_argument("--references", type=Path, required=True)
    bat.add_argument("--tests", type=Path, required=True)
    bat.add_argument("--json")
    _add_measure_options(bat)
    _add_geometry_options(bat, default="h3")
    return parser


# --------------------------------------------------------------------------- helpers


def _geometry(args: argparse.Namespace) -> Any:
    from backend.luma import make_geometry

    name = args.geometry
    if name == "h3":
        params = {
            k: getattr(args, k)
            for k in ("temporal_compression", "latents_per_chunk", "window", "stride")
            if getattr(args, k, None) is not None
        }
        return make_geometry(name, **params)
    if name == "gop":
        return make_geometry(name, **({"every": args.gop_every} if args.gop_every is not None else {}))
    return make_geometry(name)  # raises, listing the choices


def _measure(args: argparse.Namespace) -> Any:
    from backend.luma import MeasureConfig

    return MeasureConfig(offset=args.offset, truncate=args.truncate, cell=args.cell)


def _write_json(target: str | None, data: dict[str, Any]) -> None:
    if not target:
        return
    text = json.dumps(data, indent=1)
    if target == "-":
        print(text)
        return
    Path(target).write_text(text + "\n", encoding="utf-8")


def _fmt(value: Any, spec: str = "+.3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _print_analysis(analysis: Any, out: Any) -> None:
    for report in analysis.reports:
        s = report.summary()
        print(
            f"{report.frames.test_name} vs {report.frames.reference_label} {report.frames.reference_name}: "
            f"{s['frames']} frames, mean bias {_fmt(s['mean_bias'])}, p95 all {_fmt(s['p95_all'], '.3f')}, "
            f"p95 steady {_fmt(s['p95_steady'], '.3f')}, jump 0→1 {_fmt(s['jump_0_1'])}, "
            f"Y-PSNR {'inf' if s['y_psnr_db'] is None else format(s['y_psnr_db'], '.2f')} dB",
            file=out,
        )
        rows = report.slots.rows()
        cells = [f"{r['slot']}: {_fmt(r['mean'])} (n={r['count']})" for r in rows]
        if len(cells) > 12:  # long GOPs: the ends show the drift
            cells = [*cells[:4], "…", *cells[-4:]]
        slots = "  ".join(cells)
        print(f"  per-slot mean bias (steady state): {slots}", file=out)


def _info_stream(args: argparse.Namespace) -> Any:
    # With --json - the JSON owns stdout; the human summary goes to stderr.
    return sys.stderr if getattr(args, "json", None) == "-" else sys.stdout


# --------------------------------------------------------------------------- actions


def _cmd_analyze(args: argparse.Namespace) -> int:
    from backend.luma import analyze_videos

    if args.reference is None or args.test is None:
        return fail("luma-bias needs --reference and --test (or an action: " + ", ".join(ACTIONS[1:]) + ")")
    analysis = analyze_videos(
        args.test, args.reference, official=args.official, geometry=_geometry(args), config=_measure(args)
    )
    _print_analysis(analysis, _info_stream(args))
    if args.session_db is not None:
        from backend.luma import store_analysis
        from backend.store import SessionStore

        with SessionStore(args.session_db) as store:
            analysis_id = store_analysis(store, analysis, config=_measure(args))
        print(f"analysis id: {analysis_id} (stored in {args.session_db})", file=_info_stream(args))
    _write_json(args.json, analysis.to_json())
    if args.plot:
        write_plot(analysis, args.plot)
    return EXIT_OK


def _cmd_fast_reader(args: argparse.Namespace) -> int:
    from backend.luma import fast_reader_pair

    analysis = fast_reader_pair(args.video, geometry=_geometry(args), config=_measure(args))
    _print_analysis(analysis, _info_stream(args))
    if analysis.keyframes:
        print(f"  keyframes: {list(analysis.keyframes)}", file=_info_stream(args))
    for warning in analysis.warnings:
        print(f"  warning {warning.code}: {warning.message}", file=_info_stream(args))
    _write_json(args.json, analysis.to_json())
    if args.plot:
        write_plot(analysis, args.plot)
    return EXIT_OK


def _cmd_roundtrip(args: argparse.Namespace) -> int:
    from backend.luma import roundtrip_pair

    results = []
    for codec in args.codec:
        analysis, encoded = roundtrip_pair(
            args.video,
            codec,
            args.out_dir,
            frames=args.frames,
            geometry=_geometry(args),
            config=_measure(args),
        )
        _print_analysis(analysis, _info_stream(args))
        results.append({"codec": codec, "encoded": str(encoded), **analysis.to_json()})
    _write_json(args.json, {"kind": "codec-lens/luma-roundtrip", "results": results})
    return EXIT_OK


def _cmd_batch(args: argparse.Namespace) -> int:
    from backend.luma import BATCH_COLUMNS, analyze_batch

    out = _info_stream(args)
    result = analyze_batch(
        args.tests,
        args.references,
        geometry=_geometry(args),
        config=_measure(args),
        on_clip=lambda i, n, p: print(f"[{i + 1}/{n}] {p}", file=sys.stderr),
    )
    header = ["clip", *BATCH_COLUMNS]
    print("\t".join(header), file=out)
    for clip, row in zip(result.clip, result.values, strict=True):
        print("\t".join([Path(clip).name, *(f"{v:.4g}" for v in row)]), file=out)
    print("\t".join(["median", *(f"{v:.4g}" for v in result.medians.values())]), file=out)
    for test in result.unmatched:
        print(f"no reference for {test}", file=sys.stderr)
    _write_json(args.json, result.to_json())
    if result.failures:
        details = "; ".join(e for _, e in result.failures)
        return fail(
            f"{len(result.failures)} of {len(result.failures) + len(result.clip)} clips failed: {details}"
        )
    return EXIT_OK


def _cmd_fit(args: argparse.Namespace) -> int:
    from backend.luma import FitConfig, analyze_pairs, fit_and_evaluate, pair_by_name, save_model

    geometry = _geometry(args)
    config = _measure(args)
    fit_config = FitConfig(min_cells=args.min_cells)
    sets = []
    for label, items in (("train", args.train), ("test", args.test)):
        if not items:
            sets.append([])
            continue
        pairs, missing = pair_by_name(items, args.references)
        if missing:
            names = ", ".join(str(m) for m in missing)
            return fail(f"{label} clips without a reference in {args.references}: {names}")
        analyses, failures = analyze_pairs(
            pairs,
            geometry=geometry,
            config=config,
            on_clip=lambda i, n, p, label=label: print(f"[{label} {i + 1}/{n}] {p}", file=sys.stderr),
        )
        if failures:
            return fail("; ".join(e for _, e in failures))
        sets.append([a.report for a in analyses])
    result = fit_and_evaluate(sets[0], sets[1], geometry=geometry, config=fit_config)
    save_model(result.model, args.out)
    out = _info_stream(args)
    print(
        f"fitted {result.model.coefficient_count} coefficients on {len(result.train)} clips → {args.out}",
        file=out,
    )
    if result.evaluation is not None:
        print("held-out RMS residual (levels) per group: before → after (constant-only)", file=out)
        for row in result.evaluation.rows():
            print(
                f"  {row['group']:<14} {_fmt(row['rms_before'], '.3f')} → {_fmt(row['rms_after'], '.3f')} "
                f"({_fmt(row['rms_constant'], '.3f')}), cut {_fmt(row['reduction'], '.0%')}",
                file=out,
            )
    _write_json(args.json, result.to_json())
    return EXIT_OK


def _cmd_apply(args: argparse.Namespace) -> int:
    from backend.luma import analyze_videos, apply_correction, load_model, video_keyframes

    model = load_model(args.coefficients)
    out_path = apply_correction(model, args.test, args.out, lossless=args.lossless)
    out = _info_stream(args)
    print(f"wrote {out_path}", file=out)
    data: dict[str, Any] = {"kind": "codec-lens/luma-apply", "corrected": str(out_path)}
    if args.reference is not None:
        # The GOP model keeps the original test's keyframes: the corrected file was re-encoded.
        keyframes = video_keyframes(args.test) if model.geometry.name == "gop" else None
        before = analyze_videos(args.test, args.reference, geometry=model.geometry, keyframes=keyframes)
        after = analyze_videos(out_path, args.reference, geometry=model.geometry, keyframes=keyframes)
        print("before:", file=out)
        _print_analysis(before, out)
        print("after:", file=out)
        _print_analysis(after, out)
        data |= {"before": before.to_json(), "after": after.to_json()}
    _write_json(args.json, data)
    return EXIT_OK


_COMMANDS = {
    None: _cmd_analyze,
    "analyze": _cmd_analyze,
    "fit": _cmd_fit,
    "apply": _cmd_apply,
    "fast-reader": _cmd_fast_reader,
    "roundtrip": _cmd_roundtrip,
    "batch": _cmd_batch,
}


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``luma-bias`` command: 0 when done, 2 with one error line on bad input."""
    from backend.errors import CodecLensError

    try:
        return _COMMANDS[getattr(args, "luma_action", None)](args)
    # ValueError: invalid option values; OSError: e.g. a --json path that cannot be written.
    except (CodecLensError, ValueError, OSError) as exc:
        return fail_with(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m app.cli.luma luma-bias ...`` (app.cli wires the same parser)."""
    parser = Parser(prog="codec-lens")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    return run(parser.parse_args(argv))


# --------------------------------------------------------------------------- plot


def write_plot(analysis: Any, path: str | Path) -> Path:
    """A self-contained HTML report: bias(t) by slot with token boundaries, and the stacked chunk view."""
    html = plot_html(analysis)
    p = Path(path)
    p.write_text(html, encoding="utf-8")
    return p


def plot_html(analysis: Any) -> str:
    """HTML with plotly.js inlined (works offline): bias(t), the stacked chunks and the per-slot table."""
    from views.luma import prepare_bias_plot, prepare_stacked_plot

    report = analysis.report
    bias_fig = prepare_bias_plot(analysis)
    stack_fig = prepare_stacked_plot(report)
    rows = "".join(
        f"<tr><td>{r['slot']}</td><td>{r['count']}</td><td>{_fmt(r['mean'])}</td>"
        f"<td>{_fmt(r['std'], '.3f')}</td></tr>"
        for r in report.slots.rows()
    )
    table = (
        "<h3>Per-slot bias (steady state)</h3><table border=1 cellpadding=4>"
        f"<tr><th>slot</th><th>frames</th><th>mean</th><th>std</th></tr>{rows}</table>"
    )
    title = f"Luma bias: {analysis.test_name}"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_escape(title)}</title></head><body>"
        f"<h2>{_escape(title)}</h2>"
        + bias_fig.to_html(full_html=False, include_plotlyjs=True)
        + stack_fig.to_html(full_html=False, include_plotlyjs=False)
        + table
        + "</body></html>"
    )


def _escape(text: str) -> str:
    import html

    return html.escape(text)


if __name__ == "__main__":
    sys.exit(main())
