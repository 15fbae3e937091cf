"""``codec-lens batch``: select tokens for every video of a folder, list or manifest, resumably."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from app.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    add_fallback_option,
    add_selection_options,
    fail_with,
    given_options,
    selector_from_args,
)

SHOWN_SKIPPED = 20
"""Skipped videos named one a line; beyond that, a count (every one is in batch.parquet)."""
_PLAIN_PROGRESS_SECS = 10.0  # a progress line this often when stderr is not a terminal


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``batch`` on an argparse subparsers object."""
    from backend.batch import ENGINES

    # "resolve": this command's --workers (processes) replaces the per-run option of that name.
    sub = subparsers.add_parser(
        "batch",
        help="run the selection on every video of a folder, list or manifest (resumable)",
        conflict_handler="resolve",
        description=(
            "One output folder per video (DIR/videos/<path relative to INPUT>) and DIR/batch.parquet with "
            "one row per video. A re-run skips the videos whose output is complete and whose content and "
            "options are unchanged. Exit code 0: every video done or skipped; 1: some failed (see the "
            "summary); 2: nothing run (bad arguments or input); 130: interrupted."
        ),
    )
    sub.add_argument(
        "input",
        help="a folder (searched recursively; videos recognised by their content), a text file of paths "
        "(one a line), or a .jsonl/.csv manifest with a 'path' column and optional per-video option columns",
    )
    sub.add_argument("--out", required=True, type=Path, help="output folder of the batch")
    sub.add_argument(
        "--session-db", type=Path, help="also store every run and the dataset in this DuckDB session file"
    )
    sub.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    add_selection_options(sub)
    sub.add_argument(
        "--workers",
        dest="batch_workers",
        type=int,
        default=None,
        help="worker processes (local) or CPUs of the private local Ray, each running one video at a "
        "time on one thread (default: all cores)",
    )
    sub.add_argument("--engine", choices=ENGINES, default="local", help="local process pool or Ray")
    sub.add_argument(
        "--ray-address",
        help="join this Ray cluster (e.g. ray://head:10001, or auto) instead of starting a local Ray; "
        "--out must then be on storage every node sees (a `ray start` cluster wants RAY_AUTH_MODE=token "
        "and its token: docs/batch.md)",
    )
    sub.add_argument(
        "--rehash",
        action="store_true",
        help="hash every video's content to decide what to skip, even when size and time are unchanged",
    )
    add_fallback_option(sub, default_help="signal, but none with --profile parity")
    return sub


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The per-run options given on the command line, of any selector (``workers`` is the
    batch's own; an option the chosen selector does not take is refused when resolved)."""
    return {k: v for k, v in given_options(args).items() if k != "workers"}


def _duration(secs: float) -> str:
    secs = max(0, round(secs))
    if secs >= 3600:
        return f"{secs // 3600}h{secs % 3600 // 60:02d}m"
    return f"{secs // 60}m{secs % 60:02d}s" if secs >= 60 else f"{secs}s"


class Progress:
    """The progress bar on stderr: done, failed, videos per minute and the time left."""

    def __init__(self, total: int, stream: TextIO = sys.stderr) -> None:
        self.total = total
        self.stream = stream
        self.tty = stream.isatty()
        self.done = self.failed = self.skipped = 0
        self.started = time.monotonic()
        self.last_plain = 0.0

    def line(self) -> str:
        finished = self.done + self.failed + self.skipped
        elapsed = time.monotonic() - self.started
        rate = finished / elapsed * 60.0 if elapsed > 0 and finished else 0.0
        eta = (self.total - finished) / (rate / 60.0) if rate > 0 else None
        width = 24
        filled = int(width * finished / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        return (
            f"[{bar}] {finished}/{self.total} · done {self.done} · failed {self.failed}"
            + (f" · skipped {self.skipped}" if self.skipped else "")
            + f" · {rate:.1f} videos/min · ETA {_duration(eta) if eta is not None else '?'}"
        )

    def row(self, row: dict[str, Any]) -> None:
        status = row["status"]
        if status == "done":
            self.done += 1
        elif status == "skipped":
            self.skipped += 1
        else:
            self.failed += 1
            self.note(f"failed: {row['error']}")
        self.draw()

    def note(self, text: str) -> None:
        """A line above the bar."""
        self.stream.write(("\r\x1b[2K" if self.tty else "") + text + "\n")
        self.draw(force=True)

    def draw(self, *, force: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line())
        elif force or time.monotonic() - self.last_plain >= _PLAIN_PROGRESS_SECS or self._finished():
            self.last_plain = time.monotonic()
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _finished(self) -> bool:
        return self.done + self.failed + self.skipped >= self.total

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _summary(report: Any, args: argparse.Namespace) -> dict[str, Any]:
    rows = report.rows
    processed = [r for r in rows if r["status"] != "skipped"]
    seconds = report.seconds
    return {
        "input": str(Path(args.input).expanduser().resolve()),
        "out": str(report.plan.out_dir),
        "summary": str(report.summary_path),
        "dataset_id": report.dataset_id,
        "engine": args.engine,
        "workers": args.batch_workers,
        "videos": len(rows),
        "done": report.count("done"),
        "failed": report.count("failed"),
        "skipped": report.count("skipped"),
        "interrupted": report.interrupted,
        "seconds": round(seconds, 3),
        "videos_per_min": round(len(processed) / seconds * 60.0, 2) if seconds > 0 else None,
        "ignored_files": report.plan.listing.ignored_files,
        "ignored_columns": list(report.plan.listing.ignored_columns),
        "skipped_paths": [r["path"] for r in rows if r["status"] == "skipped"],
        "failures": [{"path": r["path"], "error": r["error"]} for r in rows if r["status"] == "failed"],
    }


def _print_plan(plan: Any, config: Any, stream: TextIO) -> None:
    listing = plan.listing
    known = [row for _, row in plan.known_rows]
    skipped = [r for r in known if r["status"] == "skipped"]
    failed = [r for r in known if r["status"] == "failed"]
    where = "local workers" if config.engine == "local" else "Ray CPUs"
    parts = [f"{len(plan.tasks)} to run on {config.workers} {where}"]
    if config.engine == "ray" and config.ray_address:
        parts[0] = f"{len(plan.tasks)} to run on the Ray cluster at {config.ray_address}"
    if skipped:
        parts.append(f"{len(skipped)} skipped (output complete, content and options unchanged)")
    if failed:
        parts.append(f"{len(failed)} unusable")
    ignored = f"; {listing.ignored_files} other files ignored" if listing.ignored_files else ""
    if listing.ignored_columns:
        ignored += f"; manifest columns ignored (not options): {', '.join(listing.ignored_columns)}"
    head = f"batch: {len(listing.entries)} videos in {plan.source} ({listing.kind})"
    stream.write(f"{head}: {', '.join(parts)}{ignored}\n")
    for row in skipped[:SHOWN_SKIPPED]:
        stream.write(f"skipped: {row['path']}\n")
    if len(skipped) > SHOWN_SKIPPED:
        more = len(skipped) - SHOWN_SKIPPED
        stream.write(f"skipped: … and {more} more (status 'skipped' in batch.parquet)\n")
    for row in failed:
        stream.write(f"failed: {row['error']}\n")
    stream.flush()


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``batch`` command (exit codes in the command's description)."""
    from backend.batch import BatchConfig, BatchInterrupted, default_workers, plan_batch, run_batch
    from backend.errors import CodecLensError

    if args.batch_workers is None:
        args.batch_workers = default_workers()
    try:
        config = BatchConfig(
            engine=args.engine,
            workers=args.batch_workers,
            ray_address=args.ray_address,
            selector=selector_from_args(args),
            preset=args.preset,
            overrides=_overrides(args),
            session_db=args.session_db,
            rehash=args.rehash,
            fallback=args.fallback,
        )
        plan = plan_batch(args.input, args.out, config=config)
    except (CodecLensError, ValueError) as exc:  # ValueError: invalid options, selector or preset
        return fail_with(exc)
    if args.engine == "ray":
        # Ray would otherwise report usage to its makers (a network call at run time).
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    _print_plan(plan, config, sys.stderr)
    progress = Progress(len(plan.tasks))
    if plan.tasks:
        progress.draw(force=True)
    interrupted = False
    try:
        report = run_batch(plan, config=config, on_row=progress.row)
    except BatchInterrupted as stop:
        report, interrupted = stop.report, True
    except (CodecLensError, ValueError) as exc:  # e.g. Ray missing, the session file unusable
        progress.close()
        return fail_with(exc)
    progress.close()
    summary = _summary(report, args)
    if args.json:
        print(json.dumps(summary))
    rate = f" ({summary['videos_per_min']:.1f} videos/min)" if summary["videos_per_min"] else ""
    dataset = f", dataset {report.dataset_id} in {args.session_db}" if report.dataset_id else ""
    print(
        f"batch: {summary['videos']} videos → {summary['done']} done, {summary['failed']} failed, "
        f"{summary['skipped']} skipped in {summary['seconds']:.1f} s{rate} → {report.summary_path}{dataset}"
        + (" (interrupted: the videos in flight were not finished)" if interrupted else ""),
        file=sys.stderr,
    )
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if summary["failed"] else 0
