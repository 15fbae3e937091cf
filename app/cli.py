"""Command-line entry point: ``codec-lens select|app ...``."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # the shell's code for a run ended by Ctrl-C


def add_store_options(
    parser: argparse.ArgumentParser, *, json_help: str = "print the result as one JSON object"
) -> None:
    """``--session-db`` (default :data:`DEFAULT_SESSION_DB`) and ``--json`` of the stored commands."""
    parser.add_argument(
        "--session-db", type=Path, default=DEFAULT_SESSION_DB, help=f"default {DEFAULT_SESSION_DB}"
    )
    parser.add_argument("--json", action="store_true", help=json_help)


def add_selection_options(parser: argparse.ArgumentParser) -> None:
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


DEFAULT_SESSION_DB = Path.home() / ".codec-lens" / "sessions.duckdb"


def _tool_modules() -> list[Any]:
    """The sub-command modules beside this one (each has add_parser(sub) and run(args))."""
    from app import compare_cli, export_cli, import_cli, luma_cli

    return [luma_cli, compare_cli, export_cli, import_cli]


CORE_COMMANDS = ("select", "reselect", "sessions", "app")


class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors instead of its usage block."""

    def error(self, message: str) -> NoReturn:
        sys.exit(fail(f"{message} (see {self.prog} --help)"))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; for a core command in ``argv`` the tool sub-commands are left out, because
    importing them (comparison, export: pandas and more) would add about half a second to
    every ``codec-lens select``."""
    parser = _Parser(
        prog="codec-lens",
        description="Codec Lens: inspect and reproduce codec-native video token selection.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sel = sub.add_parser(
        "select", help="run the selection pipeline on a video (cvp-style output and/or a session)"
    )
    sel.add_argument("video", help="input video file")
    sel.add_argument(
        "--out", help="output directory: new, empty or an earlier output (replaced when the run succeeds)"
    )
    sel.add_argument(
        "--session-db", type=Path, help="store the run in this DuckDB session file and print its id"
    )
    sel.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_selection_options(sel)

    res = sub.add_parser("reselect", help="re-run a stored run with changed options, from its cached decode")
    res.add_argument("run_id")
    res.add_argument("--out", help="also write a cvp-style output directory")
    add_store_options(res, json_help="print the summary as one JSON object")
    add_selection_options(res)

    ses = sub.add_parser("sessions", help="list, show or delete stored runs; prune the decode cache")
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

    command = next((a for a in (argv or []) if not a.startswith("-")), None)
    for module in [] if command in CORE_COMMANDS else _tool_modules():
        module.add_parser(sub)

    app = sub.add_parser("app", help="launch the web app")
    app.add_argument("video", nargs="?", help="video to open (default: the bundled sample)")
    app.add_argument("--run", dest="run_id", help="open this stored run instead of a video")
    app.add_argument(
        "--allow-dir",
        type=Path,
        action="append",
        default=[],
        help="a folder whose videos the app may open (repeatable; the current folder, the video's "
        "folder, the sample folder and the work folder are always allowed)",
    )
    app.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="folder the app writes uploads and exports into (default ~/.codec-lens/work)",
    )
    app.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    app.add_argument("--port", type=int, default=7860)
    app.add_argument(
        "--session-db", type=Path, default=DEFAULT_SESSION_DB, help=f"default {DEFAULT_SESSION_DB}"
    )
    return parser


def fail(message: str) -> int:
    """Print one error line (``codec-lens: error: …``) and return the bad-input exit code."""
    print(f"codec-lens: error: {message}".replace("\n", " "), file=sys.stderr)
    return EXIT_BAD_INPUT


def _summary(result: Any, options: Any, seconds: float, **extra: Any) -> dict[str, Any]:
    return {
        "video": result.info.path,
        "profile": options.profile,
        "frames": int(result.candidates.frame_indices.size),
        "total_frames": result.info.total_frames,
        "groups": len(result.selection.groups),
        "canvases": int(result.canvases.images.shape[0]),
        "tokens": int(result.canvases.tokens.shape[0]),
        "valid_tokens": int(result.canvases.tokens[:, 7].sum()),
        "seconds": round(seconds, 3),
        "read_mode": result.decoded.read_mode,
        "stage_seconds": {k: round(v, 4) for k, v in result.timings_secs.items()},
        "warnings": [w.as_dict() for w in result.warnings],
    } | extra


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary))
        return
    where = " → ".join(str(summary[k]) for k in ("out", "run_id") if summary.get(k))
    print(
        f"{summary['video']}: {summary['frames']} frames → {summary['groups']} groups, "
        f"{summary['canvases']} canvases, {summary['tokens']} tokens in {summary['seconds']:.2f} s "
        f"({summary['profile']}, {len(summary['warnings'])} warnings)" + (f" → {where}" if where else "")
    )


def cmd_select(args: argparse.Namespace) -> int:
    from backend.cvp_format import check_out_dir, write_output
    from backend.errors import CodecLensError
    from backend.pipeline import run

    if args.out is None and args.session_db is None:
        return fail("give --out DIR, --session-db PATH or both")
    t0 = time.perf_counter()
    run_id = None
    try:
        options = options_from_args(args)
        if args.out is not None:
            check_out_dir(args.out)  # before the run, not after it has been stored
        if args.session_db is not None:
            from backend.runs import select_and_store
            from backend.store import SessionStore

            with SessionStore(args.session_db) as store:
                run_id, result = select_and_store(args.video, store, options=options)
        else:
            result = run(args.video, options=options)
        if args.out is not None:
            write_output(result, args.out)
    except CodecLensError as exc:
        stored = f" (the run is stored as {run_id})" if run_id is not None else ""
        return fail(exc.one_line() + stored)
    except ValueError as exc:  # invalid option values
        return fail(str(exc))
    summary = _summary(result, options, time.perf_counter() - t0, out=args.out, run_id=run_id)
    _print_summary(summary, args.json)
    return 0


def cmd_reselect(args: argparse.Namespace) -> int:
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
    except CodecLensError as exc:
        return fail(exc.one_line())
    except ValueError as exc:
        return fail(str(exc))
    summary = _summary(
        result,
        result.options,
        time.perf_counter() - t0,
        out=args.out,
        run_id=run_id,
        parent_run_id=args.run_id,
        reused=how,
        changed=changes,
    )
    _print_summary(summary, args.json)
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from backend.errors import CodecLensError
    from backend.store import SessionStore

    if args.action in ("show", "delete") and not args.run_id:
        return fail(f"sessions {args.action} needs a RUN_ID")
    try:
        with SessionStore(args.session_db, read_only=args.action not in ("delete", "prune-cache")) as store:
            if args.action == "list":
                rows = store.list_runs()
                if args.json:
                    print(json.dumps([_run_dict(r) for r in rows], default=str))
                for r in rows if not args.json else []:
                    n_warn = len(r.warnings)
                    print(
                        f"{r.run_id}  {r.status:7s} {r.profile:6s} {r.created_at:%Y-%m-%d %H:%M:%S}  "
                        f"{r.video_path}  ({n_warn} warnings"
                        + (f", from {r.parent_run_id})" if r.parent_run_id else ")")
                    )
            elif args.action == "show":
                r = store.get_run(args.run_id)
                info = _run_dict(r)
                if r.status == "done":
                    groups = store.table("groups", r.run_id)
                    info["groups"] = groups.drop(columns=["readiness_json"]).to_dict(orient="records")
                print(json.dumps(info, indent=None if args.json else 2, default=str))
            elif args.action == "prune-cache":
                from backend.runs import DEFAULT_CACHE_BUDGET_BYTES, prune_cache

                budget = DEFAULT_CACHE_BUDGET_BYTES if args.max_gb is None else int(args.max_gb * 2**30)
                removed = prune_cache(store, budget_bytes=budget)
                left = store.size_bytes()["cache"]
                if args.json:
                    print(json.dumps({"removed": removed, "cache_bytes": left}))
                else:
                    print(f"removed {len(removed)} cached decodes; cache now {left / 2**20:.1f} MiB")
            else:
                store.delete_run(args.run_id)
                print(f"deleted {args.run_id}")
    except (CodecLensError, ValueError) as exc:
        return fail(exc.one_line() if isinstance(exc, CodecLensError) else f"{args.session_db}: {exc}")
    return 0


def _run_dict(r: Any) -> dict[str, Any]:
    return dataclasses.asdict(r)


def cmd_app(args: argparse.Namespace) -> int:
    # The app reads these before gradio is imported: no telemetry, no version checks.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from app.main import launch

    return launch(
        video=args.video,
        run_id=args.run_id,
        host=args.host,
        port=args.port,
        session_db=args.session_db,
        input_dirs=tuple(args.allow_dir),
        output_dir=args.work_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    if not gc.isenabled():  # disabled by entry() for the start-up imports
        gc.freeze()  # the imported modules' objects: never garbage, never rescanned
        gc.enable()
    core = {"select": cmd_select, "reselect": cmd_reselect, "sessions": cmd_sessions, "app": cmd_app}
    try:
        if args.command in core:
            return core[args.command](args)
        tools = {m.__name__.rsplit(".", 1)[1]: m for m in _tool_modules()}
        commands = {
            "luma-bias": tools["luma_cli"].run,
            "compare": tools["compare_cli"].run,
            "export": tools["export_cli"].run,
            "import": tools["import_cli"].run,
        }
        return commands[args.command](args)
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


if __name__ == "__main__":
    entry()
