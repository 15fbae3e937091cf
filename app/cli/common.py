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
    """argparse with the project's one-line errors instead of its usage block, and no abbreviated
    flags: ``--heat`` must never be read as ``--heatmap-scale``.

    ``add_subparsers`` makes its sub-parsers of the parent's class, so every sub-command (and
    their own sub-commands) refuses abbreviations too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

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


def _selection_fields() -> dict[str, tuple[Any, list[str], str]]:
    """Every option of every selector: name → (its first field, the selectors that take it, the
    default as help shows it: one value, or one per selector where they differ)."""
    from backend.selectors import SELECTORS

    out: dict[str, tuple[Any, list[str], dict[str, Any]]] = {}
    for spec in SELECTORS.values():
        for field in dataclasses.fields(spec.options_cls):
            entry = out.setdefault(field.name, (field, [], {}))
            entry[1].append(spec.name)
            entry[2][spec.name] = field.default
    shown = {}
    for name, (field, owners, defaults) in out.items():
        values = set(map(repr, defaults.values()))
        text = str(field.default) if len(values) == 1 else ", ".join(f"{v} {k}" for k, v in defaults.items())
        shown[name] = (field, owners, text)
    return shown


_SWITCH_HELP = {"avoid_keyframes": ("shift sampled keyframes to neighbours", "keep sampled keyframes")}


def add_selection_options(parser: argparse.ArgumentParser, *, selector_flag: bool = True) -> None:
    """``--selector``, ``--preset`` and one option per field of every selector's options class,
    each unset (None) unless given; options_from_args refuses those the selector does not take."""
    from backend.selectors import SELECTORS
    from backend.selectors.presets import PRESETS

    if selector_flag:
        parser.add_argument(
            "--selector",
            choices=SELECTORS.names,
            default=None,
            help="; ".join(f"{s.name}: {s.help}" for s in SELECTORS.values()) + " (default: cvp)",
        )
    parser.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default=None,
        help="; ".join(f"{p.name}: {p.selector} with {p.help}" for p in PRESETS.values())
        + " (options given explicitly win; docs/selectors.md lists each value and its source)",
    )
    for name, (field, owners, default) in _selection_fields().items():
        meta = field.metadata
        where = "" if len(owners) == len(SELECTORS) else f" [{', '.join(owners)}]"
        if isinstance(field.default, bool):
            # A switch and its negation, unset unless given (reselect keeps its parent's value).
            on_help, off_help = _SWITCH_HELP.get(name, (meta["help"], f"not {name}"))
            group = parser.add_mutually_exclusive_group()
            group.add_argument(
                f"--{name}",
                dest=name,
                action="store_true",
                default=None,
                help=f"{on_help} (default: {default}){where}",
            )
            group.add_argument(f"--no_{name}", dest=name, action="store_false", help=off_help + where)
            continue
        kind = {int: int, float: float, str: str}[type(field.default)]
        # reselect inherits its parent's options; only the ones given change.
        parser.add_argument(
            f"--{name}",
            type=kind,
            default=None,
            choices=meta.get("choices"),
            help=f"{meta['help']} (default: {default}){where}",
        )


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The selection options given on the command line (name → value)."""
    return {
        name: getattr(args, name) for name in _selection_fields() if getattr(args, name, None) is not None
    }


def selector_from_args(args: argparse.Namespace) -> str:
    """``--selector``, else the preset's selector, else cvp; a preset of another selector is refused."""
    from backend.selectors.presets import preset

    chosen = getattr(args, "selector", None)
    name = getattr(args, "preset", None)
    if name is not None:
        p = preset(name)
        if chosen is not None and chosen != p.selector:
            raise ValueError(
                f"Invalid preset ({name!r}) for the {chosen} selector. Supported values are presets of "
                f"{chosen}; {name} is a {p.selector} preset."
            )
        return p.selector
    return chosen or "cvp"


def options_from_args(args: argparse.Namespace, *, total_frames: int | None = None) -> Any:
    """The options of the chosen selector from parsed arguments: unset options keep their defaults
    (or the preset's values); options of another selector are refused with one line.

    ``total_frames``: the video's frame count, for presets that cap their sample count at it.
    """
    from backend.selectors import check_options, options_for
    from backend.selectors.presets import preset_values

    selector = selector_from_args(args)
    given = given_options(args)
    check_options(selector, given)
    if getattr(args, "preset", None) is not None:
        given = preset_values(args.preset, given, total_frames=total_frames)
    return options_for(selector, given)


def add_fallback_option(parser: argparse.ArgumentParser, *, default_help: str) -> None:
    """``--fallback none|uniform|signal`` (backend.selectors.fallback; None when not given)."""
    from backend.selectors.fallback import FALLBACK_MODES

    parser.add_argument(
        "--fallback",
        choices=FALLBACK_MODES,
        default=None,
        help="when the scores cannot be trusted (no bitcost, too flat to rank, a damaged stream): none "
        "(the selector as asked, or its error), uniform (evenly spaced frames), signal (a decoder-side "
        f"signal where the codec has no bitcost, then uniform); default: {default_help} (docs/audit.md)",
    )
