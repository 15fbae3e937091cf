"""``codec-lens select``: run the selection pipeline on a video (cvp-style output and/or a session)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from app.cli.common import add_fallback_option, add_selection_options, fail, fail_with, options_from_args
from views.wording import plural


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``select`` on an argparse subparsers object."""
    sel = subparsers.add_parser(
        "select", help="run the selection pipeline on a video (cvp-style output and/or a session)"
    )
    sel.add_argument("video", help="input video file")
    sel.add_argument(
        "--out", help="output directory: new, empty or an earlier output (replaced when the run succeeds)"
    )
    sel.add_argument(
        "--session-db", type=Path, help="store the run in this DuckDB session file and print its id"
    )
    sel.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_selection_options(sel)
    add_fallback_option(sel, default_help="none (the app and batch: signal, none for parity)")
    return sel


def summary_of(result: Any, options: Any, seconds: float, **extra: Any) -> dict[str, Any]:
    """The run summary ``select`` and ``reselect`` print (``extra`` keys appended)."""
    return {
        "video": result.info.path,
        "profile": options.profile,
        "frames": int(result.candidates.frame_indices.size),
        "total_frames": result.info.total_frames,
        "groups": len(result.selection.groups),
        "canvases": int(result.canvases.count),
        "tokens": int(result.canvases.tokens.shape[0]),
        "valid_tokens": int(result.canvases.tokens[:, 7].sum()),
        "seconds": round(seconds, 3),
        "read_mode": result.decoded.read_mode,
        "stage_seconds": {k: round(v, 4) for k, v in result.timings_secs.items()},
        "warnings": [w.as_dict() for w in result.warnings],
    } | extra


def print_summary(summary: dict[str, Any], as_json: bool) -> None:
    """One JSON object, or one line naming the output folder and/or the stored run."""
    if as_json:
        print(json.dumps(summary))
        return
    where = " → ".join(str(summary[k]) for k in ("out", "run_id") if summary.get(k))
    counts = (
        f"{plural(summary['groups'], 'group')}, {plural(summary['canvases'], 'canvas', 'canvases')}, "
        f"{plural(summary['tokens'], 'token')}"
    )
    warned = plural(len(summary["warnings"]), "warning")
    print(
        f"{summary['video']}: {plural(summary['frames'], 'frame')} → {counts} in {summary['seconds']:.2f} s "
        f"({summary['profile']}, {warned})" + (f" → {where}" if where else "")
    )
    if summary.get("fallback_reason"):
        print(
            f"fell back from {summary['selector_requested']} to {summary['selector_used']} "
            f"({summary['fallback_reason']}: {summary['detail']})"
        )


def _frames_for_preset(args: argparse.Namespace) -> int | None:
    """The video's frame count when its preset caps the sample count at it (a probe, no decode)."""
    from backend.selectors.presets import preset

    if getattr(args, "preset", None) is None or not preset(args.preset).cap_sampled_frames:
        return None
    from backend.stages.probe import ProbeConfig, probe

    return probe(args.video, config=ProbeConfig()).total_frames


def _fallback(args: argparse.Namespace) -> Any:
    """The declared fallback ``--fallback`` asks for (None: none, the selector as asked)."""
    if getattr(args, "fallback", None) in (None, "none"):
        return None
    from backend.selectors.fallback import FallbackConfig

    return FallbackConfig(mode=args.fallback)


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``select`` command: 0 when done, 2 with one error line on bad input."""
    from backend.cvp_format import check_out_dir, write_output
    from backend.errors import CodecLensError
    from backend.selectors import select, selector_of

    if args.out is None and args.session_db is None:
        return fail("give --out DIR, --session-db PATH or both")
    t0 = time.perf_counter()
    run_id = None
    try:
        options = options_from_args(args, total_frames=_frames_for_preset(args))
        fallback = _fallback(args)
        if args.out is not None:
            check_out_dir(args.out)  # before the run, not after it has been stored
        if args.session_db is not None:
            from backend.runs import select_and_store
            from backend.store import SessionStore

            with SessionStore(args.session_db) as store:
                run_id, result = select_and_store(args.video, store, options=options, fallback=fallback)
        elif fallback is not None:
            from backend.selectors.fallback import select_with_fallback

            result = select_with_fallback(args.video, options=options, config=fallback)
        else:
            result = select(args.video, options=options)
        if args.out is not None:
            # Canvases are packed when first asked for: the output needs every one, and their
            # packing counts as the pipeline's (stage_seconds ``pack_pixels``, in the total).
            t_pack = time.perf_counter()
            result.canvases.images  # noqa: B018 (packs them)
            packing = time.perf_counter() - t_pack
            result.timings_secs["pack_pixels"] = packing
            result.timings_secs["total"] = result.timings_secs.get("total", 0.0) + packing
            write_output(result, args.out)
    except (CodecLensError, ValueError) as exc:  # ValueError: invalid option values
        stored = run_id is not None and isinstance(exc, CodecLensError)
        return fail_with(exc, note=f" (the run is stored as {run_id})" if stored else "")
    ran = result.fallback.as_dict() if result.fallback is not None else {}
    summary = summary_of(
        result,
        result.options,
        time.perf_counter() - t0,
        out=args.out,
        run_id=run_id,
        selector=selector_of(result.options),
        **ran,
    )
    print_summary(summary, args.json)
    return 0
