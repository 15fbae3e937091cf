"""``codec-lens audit``: what a run's tokens left unseen — never-observed spans, staleness, coverage."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import DEFAULT_SESSION_DB, EXIT_OK, fail_with

if TYPE_CHECKING:
    from backend.audit import CoverageAudit

_DESCRIPTION = """\
Audit what a selection showed the model: per frame the share of patch positions covered by a
valid token, the spans of frames no token comes from, and how many frames each patch position
had gone unseen (staleness). TARGET is a stored run id or an output folder (codec-video-prep's,
or `select --out`). Definitions: docs/audit.md. Exit 0 when audited, 2 on bad input."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``audit`` on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "audit",
        help="coverage audit of a run or output folder: never-observed spans, staleness, kept score",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="RUN_ID|OUTPUT_DIR", help="a stored run id or an output folder")
    parser.add_argument(
        "--json", metavar="FILE", type=Path, help="write the audit as one JSON object (- for standard output)"
    )
    parser.add_argument(
        "--session-db",
        type=Path,
        default=DEFAULT_SESSION_DB,
        help=f"for a run id; default {DEFAULT_SESSION_DB}",
    )
    return parser


def describe(audit: CoverageAudit, subject: str) -> list[str]:
    """The audit as a few lines of text."""
    hp, wp = audit.patch_grid
    spans = audit.never_observed_spans
    lines = [
        f"audit of {subject}: {audit.frames} frames, patch grid {hp}x{wp}",
        f"observed frames: {audit.observed_frames} of {audit.frames} "
        f"(mean coverage {audit.frame_coverage.mean():.1%} of the patch positions)",
    ]
    if spans.size:
        longest = int(audit.span_secs.argmax())
        a, b = spans[longest].tolist()
        lines.append(
            f"never observed: {len(spans)} spans, {audit.never_observed_fraction:.1%} of the duration; "
            f"longest {audit.longest_never_observed_secs:.3f} s (frames {a}-{b})"
        )
    else:
        lines.append("never observed: no frame is left without a token")
    lines.append(
        f"staleness: max {audit.video_max_staleness_frames} frames; "
        f"mean over frames {audit.mean_staleness_frames.mean():.1f}"
    )
    share = audit.kept_score_fraction
    lines.append("kept score mass: " + ("unknown (no score maps)" if share is None else f"{share:.1%}"))
    for g in audit.groups:
        kept = "" if g.kept_score_fraction is None else f", kept score {g.kept_score_fraction:.1%}"
        lines.append(f"  group {g.group_index}: {g.tokens} tokens from {g.covered_frames} frames{kept}")
    return lines


def _audit(target: str, session_db: Path) -> tuple[CoverageAudit, str]:
    from backend.audit import AuditConfig, audit_output_dir, audit_stored_run

    config = AuditConfig()
    path = Path(target).expanduser()
    if path.is_dir():
        return audit_output_dir(path, config=config), str(path)
    if path.exists() or "/" in target:
        from backend.errors import InputError

        raise InputError("is not an output folder nor a run id", path=target, stage="audit")
    from backend.store import SessionStore

    with SessionStore(session_db) as store:
        return audit_stored_run(store, target, config=config), f"run {target}"


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``audit`` command: 0 when audited, 2 with one error line on bad input."""
    from backend.errors import CodecLensError

    try:
        audit, subject = _audit(args.target, args.session_db)
    except (CodecLensError, ValueError) as exc:
        return fail_with(exc)
    if args.json is not None:
        text = json.dumps(audit.as_dict())
        if str(args.json) == "-":
            print(text)
            return EXIT_OK
        try:
            args.json.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            return fail_with(exc, subject=args.json)
    print("\n".join(describe(audit, subject)))
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (app.cli wires the same parser)."""
    from app.cli.common import Parser

    parser = Parser(prog="codec-lens")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
