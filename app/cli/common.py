"""Shared pieces of the sub-commands: exit codes, store and selection options, error lines."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, NoReturn

from backend.errors import CodecLensError

EXIT_OK = 0
EXIT_FAILED = 1  # ``app`` could not open its first run
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # the shell's code for a run ended by Ctrl-C

DEFAULT_SESSION_DB = Path.home() / ".codec-lens" / "sessions.duckdb"


def fail(message: str, *, code: int = EXIT_BAD_INPUT) -> int:
    """Print one error line (``codec-lens: error: …``) and return ``code`` (bad input by default)."""
    print(f"codec-lens: error: {message}".replace("\n", " "), file=sys.stderr)
    return code


def error_line(exc: BaseException, *, subject: str | Path | None = None) -> str:
    """The one-line message of an error a command expects.

    Backend errors (``backend.errors.CodecLensError``) name their own path; a builtin
    ``OSError`` names its file (else ``subject``); a builtin ``ValueError`` (an invalid option
    value) is prefixed with ``subject`` when one is given.
    """
    # First: OutputError is an OSError and InputError a ValueError, and they carry their path.
    if isinstance(exc, CodecLensError):
        return exc.one_line()
    if isinstance(exc, OSError):
        text = f"{exc.filename or subject or ''}: {exc.strerror or exc}"
        return text if subject is not None else text.lstrip(": ")
    return str(exc) if subject is None else f"{subject}: {exc}"


def fail_with(
    exc: BaseException, *, subject: str | Path | None = None, note: str = "", code: int = EXIT_BAD_INPUT
) -> int:
    """Print ``exc`` as one error line (:func:`error_line`, then ``note``) and return its exit code."""
    return fail(error_line(exc, subject=subject) + note, code=code)


class Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors instead of its usage block."""

    def error(self, message: str) -> NoReturn:
        sys.exit(fail(f"{message} (see {self.prog} --help)"))


def add_store_options(
    parser: argparse.ArgumentParser, *, json_help: str = "print the result as one JSON object"
) -> None:
    """``--session-db`` (default :data:`DEFAULT_SESSION_DB`) and ``--json`` of the stored commands."""
    parser.add_argument(
        "--session-db", type=Path, default=DEFAULT_SESSION_DB, help=f"default {DEFAULT_SESSION_DB}"
    )
    parser.add_argument("--json", action="store_true", help=json_help)


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """One option per SelectionOptions field, each unset (None) unless given."""
    from backend.pipeline import SelectionOptions

    for field in dataclasses.fields(SelectionOptions):
        meta = field.metadata
        if field.name == "avoid_keyframes":
            group = parser.add_mutually_exclusive_group()
            group.add_argument(
                "--avoid_keyframes",
                dest="avoid_keyframes",
                action="store_true",
                default=None,
                help="shift sampled keyframes to neighbours (default)",
            )
            group.add_argument(
                "--no_avoid_keyframes",
                dest="avoid_keyframes",
                action="store_false",
                help="keep sampled keyframes",
            )
            continue
        kind = {int: int, float: float, str: str}[type(field.default)]
        # reselect inherits its parent's options; only the ones given change.
        parser.add_argument(
            f"--{field.name}",
            type=kind,
            default=None,
            choices=meta.get("choices"),
            help=f"{meta['help']} (default: {field.default})",
        )


def options_from_args(args: argparse.Namespace) -> Any:
    """SelectionOptions from parsed arguments; unset options keep their defaults."""
    from backend.pipeline import SelectionOptions

    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(SelectionOptions)
        if getattr(args, f.name, None) is not None
    }
    return SelectionOptions(**given)
