"""``codec-lens sweep``: what each hard token budget buys on one video — coverage, spans, staleness."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    DEFAULT_SESSION_DB,
    EXIT_OK,
    add_selection_options,
    fail,
    fail_with,
    options_from_args,
)

if TYPE_CHECKING:
    from backend.audit.sweep import BudgetSweep
    from backend.pipeline import RunResult

_DESCRIPTION = """\
Select once, then re-select under each hard token budget (no second decode) and audit every
selection: tokens kept, canvases, observed frames, the longest never-observed span, mean staleness
and kept score mass, beside the selector's own run. TARGET is a video (selected with the options
given) or a stored run id. Under the controller a larger budget keeps a superset of a smaller one's
tokens, so coverage never shrinks; a budget where it does is named. Exit 0 when swept, 2 on bad input."""

PLOT_FORMATS = ("html", "png", "svg", "pdf")


def _budget_list(text: str) -> tuple[int, ...]:
    """``2000,4000`` → (2000, 4000); anything but positive integers is refused by argparse."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"Invalid budgets ({text}). Supported values are comma-separated positive integers."
        )
    return values


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``sweep`` on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "sweep",
        help="re-select one video under several token budgets and audit each (what a budget buys)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="VIDEO|RUN_ID", help="a video file or a stored run id")
    parser.add_argument(
        "--budgets",
        type=_budget_list,
        default=(2000, 4000, 8000, 16000),
        help="comma-separated token budgets (default: 2000,4000,8000,16000)",
    )
    parser.add_argument(
        "--json", metavar="FILE", type=Path, help="write the rows as one JSON list (- for standard output)"
    )
    parser.add_argument(
        "--plot",
        metavar="FILE",
        type=Path,
        help=f"write the sweep figure ({', '.join(PLOT_FORMATS)} by suffix)",
    )
    parser.add_argument(
        "--session-db",
        type=Path,
        default=DEFAULT_SESSION_DB,
        help=f"for a run id; default {DEFAULT_SESSION_DB}",
    )
    add_selection_options(parser)
    return parser


def describe(sweep: BudgetSweep, subject: str) -> list[str]:
    """The sweep as a table, the selector's own run last."""
    head = f"{'budget':>9} {'tokens':>8} {'canvases':>8} {'stop':>9} {'observed':>8} {'longest gap s':>13} "
    head += f"{'staleness':>9} {'kept score':>10}"
    lines = [f"budget sweep of {subject}", head]
    for row in (*sweep.rows, sweep.own):
        share = "unknown" if row.kept_score_fraction is None else f"{row.kept_score_fraction:.1%}"
        budget = "own" if row.budget == 0 else str(row.budget)
        lines.append(
            f"{budget:>9} {row.tokens:>8} {row.canvases:>8} {row.stop_reason:>9} {row.observed_frames:>8} "
            f"{row.longest_never_observed_secs:>13.3f} {row.mean_staleness_frames:>9.1f} {share:>10}"
        )
    if sweep.shrinks:
        lines.append("coverage shrinks at budgets " + ", ".join(map(str, sweep.shrinks)))
    return lines


def _base_run(args: argparse.Namespace) -> tuple[RunResult, str]:
    """The run the sweep re-selects: a video selected with the options given, or a stored run
    (one that ran under a hard budget is selected again with its selector's own)."""
    from backend.errors import InputError

    path = Path(args.target).expanduser()
    if path.is_file():
        from backend.selectors import select

        options = options_from_args(args)
        return select(path, options=options.replace(token_budget=0)), str(path)
    if path.exists() or "/" in args.target:
        raise InputError("is not a video file nor a run id", path=args.target, stage="sweep")
    from backend.runs import open_run
    from backend.selectors import select
    from backend.store import SessionStore

    with SessionStore(args.session_db) as store:
        result = open_run(store, args.target)
    if result.options.budgeted:
        result = select(result.info.path, options=result.options.replace(token_budget=0))
    return result, f"run {args.target}"


def _write_plot(sweep: BudgetSweep, subject: str, path: Path) -> None:
    from backend.errors import OutputError
    from backend.export.config import DEFAULT_CHROMIUM
    from backend.export.figures import write_figures
    from views.sweep import prepare_sweep_figure

    fmt = path.suffix.lstrip(".").lower()
    if fmt not in PLOT_FORMATS:
        raise OutputError(
            f"Invalid plot format ({path.suffix or 'none'}). Supported values are {', '.join(PLOT_FORMATS)}",
            path=path,
            stage="sweep",
        )
    fig = prepare_sweep_figure(sweep, title=f"Budget sweep: {subject}", paper=fmt != "html")
    with tempfile.TemporaryDirectory() as scratch:
        (written,) = write_figures(
            {"sweep": fig}, Path(scratch) / "f", formats=[fmt], chromium_path=DEFAULT_CHROMIUM
        )
        shutil.move(str(written), path)


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``sweep`` command: 0 when swept, 2 with one error line on bad input."""
    from backend.audit import AuditConfig
    from backend.audit.sweep import SweepConfig, sweep_budgets
    from backend.errors import CodecLensError, InputError

    if getattr(args, "token_budget", None):
        return fail("give the budgets with --budgets; --token_budget is the sweep's to set")
    try:
        gain = {} if args.stop_gain is None else {"stop_gain": args.stop_gain}
        config = SweepConfig(budgets=tuple(sorted(set(args.budgets))), **gain)
        result, subject = _base_run(args)
        try:
            sweep = sweep_budgets(result, config=config, audit=AuditConfig())
        except ValueError as exc:  # a budget below this video's anchor frame
            raise InputError(str(exc), path=result.info.path, stage="sweep") from exc
        if args.plot is not None:
            _write_plot(sweep, subject, args.plot)
        if args.json is not None and str(args.json) != "-":
            args.json.write_text(json.dumps([r.as_dict() for r in sweep.rows]) + "\n", encoding="utf-8")
    except OSError as exc:
        return fail_with(exc, subject=args.json)
    except (CodecLensError, ValueError) as exc:
        return fail_with(exc)
    if args.json is not None and str(args.json) == "-":
        print(json.dumps([r.as_dict() for r in sweep.rows]))
        return EXIT_OK
    print("\n".join(describe(sweep, subject)))
    return EXIT_OK
