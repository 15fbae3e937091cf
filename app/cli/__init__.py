"""Command-line entry point: ``codec-lens select|reselect|sessions|app|compare|export|import|luma-bias``.

Each sub-command is a module of this package with ``add_parser(subparsers)`` and ``run(args)``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from app.cli import app, reselect, select, sessions
from app.cli.common import EXIT_INTERRUPTED, Parser

CORE_COMMANDS = ("select", "reselect", "sessions", "app")
_CORE_MODULES = {"select": select, "reselect": reselect, "sessions": sessions, "app": app}
# Command → module of this package, in the order they are listed in --help.
TOOL_COMMANDS = {"luma-bias": "luma", "compare": "compare", "export": "export", "import": "importer"}


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
    for tool in [] if command in CORE_COMMANDS else TOOL_COMMANDS:
        _tool_module(tool).add_parser(sub)
    app.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's) and run its command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
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
    """
    # OpenBLAS starts a spinning worker thread per CPU at numpy import; our matrices are small,
    # and on two CPUs those threads took ~0.1 s of CPU per `select` from the decode workers.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Imports allocate enough to trigger ~60 cyclic-GC passes (~12 ms) that find nothing;
    # main() re-enables the collector once the parser has imported the pipeline.
    gc.disable()
    # A termination request takes the same path as Ctrl-C, so that it cleans up too.
    signal.signal(signal.SIGTERM, _interrupt)
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
