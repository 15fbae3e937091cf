"""``codec-lens reselect``: re-run a stored run with changed options, from its cached decode."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from app.cli.common import (
    add_selection_options,
    add_store_options,
    fail_with,
    given_options,
    selector_from_args,
)
from app.cli.select import print_summary, summary_of


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``reselect`` on an argparse subparsers object."""
    res = subparsers.add_parser(
        "reselect",
        help="re-run a stored run with changed options, from its cached decode (--selector: another "
        "selector on the same video)",
    )
    res.add_argument("run_id")
    res.add_argument("--out", help="also write a cvp-style output directory")
    add_store_options(res, json_help="print the summary as one JSON object")
    add_selection_options(res)
    return res


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``reselect`` command: 0 when done, 2 with one error line on bad input."""
    from backend.cvp_format import write_output
    from backend.errors import CodecLensError
    from backend.runs import reselect
    from backend.selectors.presets import preset_values
    from backend.store import SessionStore

    t0 = time.perf_counter()
    changes = given_options(args)
    try:
        selector = selector_from_args(args) if (args.selector or args.preset) else None
        with SessionStore(args.session_db) as store:
            if args.preset is not None:
                parent = store.get_run(args.run_id)
                total = store.session_total_frames(parent.session_id)
                changes = preset_values(args.preset, changes, total_frames=total)
            run_id, result, how = reselect(store, args.run_id, changes, selector=selector)
        if how == "reused":
            print(f"reselect: run {run_id} was made with these options already; reopened it", file=sys.stderr)
        if args.out is not None:
            write_output(result, args.out)
    except (CodecLensError, ValueError) as exc:
        return fail_with(exc)
    from backend.selectors import selector_of

    summary = summary_of(
        result,
        result.options,
        time.perf_counter() - t0,
        out=args.out,
        run_id=run_id,
        parent_run_id=args.run_id,
        reused=how,
        changed=changes,
        selector=selector_of(result.options),
    )
    print_summary(summary, args.json)
    return 0
