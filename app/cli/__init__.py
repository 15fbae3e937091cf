"""Command-line entry point: ``codec-lens select|reselect|sessions|app|compare|export|import|luma-bias|…``.

The tool commands: compare, export, import, luma-bias, payload, batch.

Each sub-command is a module of this package with ``add_parser(subparsers)`` and ``run(args)``.
The commands that run native decoders or encoders run in a forked child (:func:`entry`), so
that a decoder's crash is one error line and exit code 2, never a core-dump exit.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from app.cli import app, reselect, select, sessions
from app.cli.common import EXIT_INTERRUPTED, Parser, fail

if TYPE_CHECKING:
    from backend.isolation import ChildDeath

CORE_COMMANDS = ("select", "reselect", "sessions", "app")
_CORE_MODULES = {"select": select, "reselect": reselect, "sessions": sessions, "app": app}
# Command → module of this package, in the order they are listed in --help.
TOOL_COMMANDS = {
    "luma-bias": "luma",
    "compare": "compare",
    "export": "export",
    "import": "importer",
    "payload": "payload",
    "batch": "batch",
    "audit": "audit",
    "sweep": "sweep",
}
NATIVE_COMMANDS = ("select", "reselect", "compare", "luma-bias", "export", "import", "audit", "sweep")
"""The commands that reach compiled decoders or encoders: :func:`entry` runs them in a child.
``batch`` is not one: its own process only lists files, and each video runs in a worker
process of its engine, whose crash is that video's row (backend.batch.local, ray_engine)."""


def _tool_module(command: str) -> ModuleType:
    return importlib.import_module(f"app.cli.{TOOL_COMMANDS[command]}")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; for a core command in ``argv`` the tool sub-commands are left out, because
    importing them (comparison, export: pandas and more) would add about half a second to
    every ``codec-lens select``."""
    parser = Parser(
        prog="codec-lens",
        description="Codec Lens: inspect and reproduce codec-native video token selection.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("select", "reselect", "sessions"):
        _CORE_MODULES[name].add_parser(sub)
    command = next((a for a in (argv or []) if not a.startswith("-")), None)
    # A tool command builds its own parser only (a batch re-run that skips everything is
    # mostly start-up); no command, or an unknown one, lists them all.
    tools = [command] if command in TOOL_COMMANDS else [] if command in CORE_COMMANDS else TOOL_COMMANDS
    for tool in tools:
        _tool_module(tool).add_parser(sub)
    app.add_parser(sub)
    return parser


def main(
    argv: Sequence[str] | None = None, *, on_parsed: Callable[[argparse.Namespace], None] | None = None
) -> int:
    """Parse ``argv`` (default: the process's) and run its command; returns the exit code.

    ``on_parsed(args)`` is called once the arguments are parsed (the crash record of :func:`entry`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    if on_parsed is not None:
        on_parsed(args)
    if not gc.isenabled():  # disabled by entry() for the start-up imports
        gc.freeze()  # the imported modules' objects: never garbage, never rescanned
        gc.enable()
    try:
        if args.command in _CORE_MODULES:
            return _CORE_MODULES[args.command].run(args)
        return _tool_module(args.command).run(args)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM (see entry): the commands' finally blocks have closed stores,
        # marked stored runs failed, removed partial folders and ended reader processes.
        print("codec-lens: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def entry() -> None:
    """Console-script entry: run one command, then leave without the interpreter's teardown.

    By the time ``main`` returns every store, file and worker of the command is closed
    (context managers, joined pools); unloading numpy, OpenCV and PyAV afterwards only costs
    time (~70 ms per run, a tenth of a short ``select``). Errors take the normal path.
    A command of :data:`NATIVE_COMMANDS` runs in a forked child (:func:`_run_isolated`).
    """
    # OpenBLAS starts a spinning worker thread per CPU at numpy import; our matrices are small,
    # and on two CPUs those threads took ~0.1 s of CPU per `select` from the decode workers.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Imports allocate enough to trigger ~60 cyclic-GC passes (~12 ms) that find nothing;
    # main() re-enables the collector once the parser has imported the pipeline.
    gc.disable()
    # A termination request takes the same path as Ctrl-C, so that it cleans up too.
    signal.signal(signal.SIGTERM, _interrupt)
    argv = sys.argv[1:]
    command = next((a for a in argv if not a.startswith("-")), None)
    # Fork here, single-threaded and before any import of numpy or the pipeline (~1 ms).
    code = _run_isolated(argv) if command in NATIVE_COMMANDS and hasattr(os, "fork") else main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


# -- crash isolation --------------------------------------------------------------------------------


def _run_isolated(argv: list[str]) -> int:
    """Run the command in a forked child (:func:`backend.isolation.run_forked`) and wait: its exit
    code, or, when it died by a signal (a decoder's SIGSEGV or SIGABRT), one error line after
    cleaning up what it left, and 2.

    Ctrl-C and SIGTERM sent to this process are passed on to the child, which stops as always
    (exit 130). The child records what it works on after parsing (:func:`_crash_record`) and
    faulthandler's dump of its Python frames names the stage.
    """
    from backend.isolation import run_forked  # here: the other commands never need it

    outcome = run_forked(lambda record: _child(argv, record))
    if outcome.death is not None:
        return _after_crash(outcome.death)
    if outcome.interrupted:
        print("codec-lens: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return outcome.exit_code


def _child(argv: list[str], record: Callable[[bytes], None]) -> int:
    """The forked child: the command's exit code, as the process itself would have exited."""

    def parsed(args: argparse.Namespace) -> None:
        record(_crash_record(args))

    try:
        code: Any = main(argv, on_parsed=parsed)
    except SystemExit as exc:  # argparse's --help and errors
        code = exc.code
    except KeyboardInterrupt:  # before the command's own handling started
        print("codec-lens: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except BaseException:  # a bug: its traceback, then the exit code Python gives it
        import traceback

        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code or 0


def _crash_record(args: argparse.Namespace) -> bytes:
    """What the parent needs should this child die: the file it works on, its session file and
    the outputs it may leave half-written (see :func:`_after_crash`)."""
    given = {k: getattr(args, k, None) for k in ("video", "test", "tests", "cvp_dir", "run_id", "out")}
    subject = next((str(given[k]) for k in ("video", "test", "tests", "cvp_dir") if given[k]), "")
    if not subject and given["run_id"]:
        subject = f"run {given['run_id']}"
    record: dict[str, Any] = {
        "subject": subject,
        "session_db": None,
        "written": [],
        "globs": [],
        "partials": [],
    }
    db = getattr(args, "session_db", None)
    if db is not None:
        record["session_db"] = str(Path(db).expanduser())
    out = Path(given["out"]).expanduser() if given["out"] else None
    if out is not None and args.command in ("select", "reselect"):
        # backend.cvp_format.write_output: a hidden sibling, renamed into place when complete.
        record["partials"].append([str(out.parent), f".{out.name}.partial-*"])
        record["old"] = [str(out.parent / f".{out.name}.old-{os.getpid()}"), str(out)]
    elif out is not None and args.command == "export":
        stem = out.stem if out.suffix else out.name
        record["globs"].append([str(out.parent), f"{stem}*"])
        record["partials"].append([str(out.parent), f".{stem}.*partial*"])
    elif out is not None:
        record["written"].append(str(out))
    if args.command == "compare" and getattr(args, "out_dir", None) is None:
        # Named here, so that the encodes folder (next to the session file) is known.
        args.comparison_id = record["comparison_id"] = os.urandom(6).hex()  # as compare's own ids
    for extra in ("json", "plot"):
        value = getattr(args, extra, None)
        if isinstance(value, (str, Path)) and str(value) != "-":
            record["written"].append(str(value))
    return json.dumps(record).encode()


def _after_crash(death: ChildDeath) -> int:
    """The child died by a signal: remove its half-written outputs, mark its stored runs failed,
    print one line (naming the file and the stage) and return 2."""
    from backend.isolation import Cleanup, describe_death

    record = json.loads(death.record or b"{}")
    store = None
    try:
        db = record.get("session_db")
        if db and Path(db).is_file():
            from backend.store import SessionStore

            store = SessionStore(db)
        cleanup = Cleanup(
            written=tuple(Path(p) for p in record.get("written", ())),
            written_globs=tuple((Path(d), g) for d, g in record.get("globs", ())),
            partials=tuple((Path(d), g) for d, g in record.get("partials", ())),
            store=store,
        )
        if store is not None and record.get("comparison_id"):
            from backend.compare import default_output_dir

            # As an interrupted comparison: its encodes removed (it was not stored yet).
            cleanup = dataclasses.replace(
                cleanup, written=(*cleanup.written, default_output_dir(store, record["comparison_id"]))
            )
        cleanup.apply(death.started_epoch_secs, "")
        old, out = record.get("old") or (None, None)
        if old and Path(old).is_dir() and not Path(out).exists():
            Path(old).rename(out)  # it died while replacing an earlier output: put that back
    except (OSError, ValueError, RuntimeError) as exc:  # StoreError is a ValueError
        print(f"codec-lens: cleaning up after the crash failed: {exc}", file=sys.stderr)
    finally:
        if store is not None:
            store.close()
    what = describe_death(-death.signal, death.stage, killed="the run was killed")
    subject = record.get("subject")
    return fail((f"{subject}: " if subject else "") + what)
