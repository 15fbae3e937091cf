"""``codec-lens reselect``: re-run a stored run with changed options, from its cached decode."""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

from app.cli.common import add_selection_options, add_store_options, fail_with
from app.cli.select import print_summary, summary_of


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``reselect`` on an argparse subparsers object."""
    res = subparsers.add_parser(
        "reselect", help="re-run a stored run with changed options, from its cached decode"
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
    from backend.pipeline import SelectionOptions
    from backend.runs import reselect
    from backend.store import SessionStore

    t0 = time.perf_counter()
    fields = {f.name for f in dataclasses.fields(SelectionOptions)}
    changes = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    try:
        with SessionStore(args.session_db) as store:
            run_id, result, how = reselect(store, args.run_id, changes)
        if args.out is not None:
            write_output(result, args.out)
    except (CodecLensError, ValueError) as exc:
        return fail_with(exc)
    summary = summary_of(
        result,
        result.options,
        time.perf_counter() - t0,
        out=args.out,
        run_id=run_id,
        parent_run_id=args.run_id,
        reused=how,
        changed=changes,
    )
    print_summary(summary, args.json)
    return 0
