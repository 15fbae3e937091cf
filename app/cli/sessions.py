"""``codec-lens sessions``: list, show or delete stored runs; prune the decode cache."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from app.cli.common import add_store_options, fail, fail_with
from views.wording import plural


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``sessions`` on an argparse subparsers object."""
    ses = subparsers.add_parser("sessions", help="list, show or delete stored runs; prune the decode cache")
    ses.add_argument("action", choices=("list", "show", "delete", "prune-cache"))
    ses.add_argument("run_id", nargs="?")
    ses.add_argument(
        "--max-gb",
        type=float,
        default=None,
        help="prune-cache: size the decode cache may keep, least recently used decodes go first "
        "(default: the 10 GiB a run keeps it under)",
    )
    add_store_options(ses)
    return ses


def _run_dict(r: Any) -> dict[str, Any]:
    return dataclasses.asdict(r)


def _list(store: Any, as_json: bool) -> None:
    from backend.runs.labels import change_labels

    rows = store.list_runs()
    changed = change_labels(rows)
    if as_json:
        print(json.dumps([_run_dict(r) | {"change": changed[r.run_id]} for r in rows], default=str))
        return
    for r in rows:
        warned = plural(len(r.warnings), "warning")
        origin = f", from {r.parent_run_id}: {changed[r.run_id]}" if r.parent_run_id else ""
        print(
            f"{r.run_id}  {r.status:7s} {r.selector:9s} {r.profile:6s} {r.created_at:%Y-%m-%d %H:%M:%S}  "
            f"{r.video_path}  ({warned}{origin})"
        )


def _show(store: Any, run_id: str, as_json: bool) -> None:
    r = store.get_run(run_id)
    info = _run_dict(r)
    if r.status == "done":
        groups = store.table("groups", r.run_id)
        info["groups"] = groups.drop(columns=["readiness_json"]).to_dict(orient="records")
    print(json.dumps(info, indent=None if as_json else 2, default=str))


def _prune(store: Any, max_gb: float | None, as_json: bool) -> None:
    from backend.runs import DEFAULT_CACHE_BUDGET_BYTES, prune_cache

    budget = DEFAULT_CACHE_BUDGET_BYTES if max_gb is None else int(max_gb * 2**30)
    removed = prune_cache(store, budget_bytes=budget)
    left = store.size_bytes()["cache"]
    if as_json:
        print(json.dumps({"removed": removed, "cache_bytes": left}))
    else:
        print(f"removed {len(removed)} cached decodes; cache now {left / 2**20:.1f} MiB")


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``sessions`` command: 0 when done, 2 with one error line on bad input."""
    from backend.errors import CodecLensError
    from backend.store import SessionStore

    if args.action in ("show", "delete") and not args.run_id:
        return fail(f"sessions {args.action} needs a RUN_ID")
    try:
        with SessionStore(args.session_db, read_only=args.action not in ("delete", "prune-cache")) as store:
            if args.action == "list":
                _list(store, args.json)
            elif args.action == "show":
                _show(store, args.run_id, args.json)
            elif args.action == "prune-cache":
                _prune(store, args.max_gb, args.json)
            else:
                store.delete_run(args.run_id)
                print(f"deleted {args.run_id}")
    except (CodecLensError, ValueError) as exc:
        return fail_with(exc, subject=args.session_db)
    return 0
