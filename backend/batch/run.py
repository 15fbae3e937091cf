"""A batch: plan the videos of an input (what to run, what to skip), run them on an engine, summarise."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

from backend.batch.inputs import Listing, list_input
from backend.batch.local import run_local
from backend.batch.unit import (
    DEFAULT_SELECTOR,
    UnitOptions,
    UnitTask,
    failed_row,
    option_names,
    read_record,
    resolve_options,
    skipped_row,
)
from backend.errors import OutputError

ENGINES = ("local", "ray")
SUMMARY_FILE = "batch.parquet"
VIDEOS_FOLDER = "videos"
CHECKPOINT_SECS = 60.0
"""How often the summary is rewritten while a batch runs, so a killed batch leaves a recent one."""


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True, kw_only=True)
class BatchConfig:
    """How a batch runs: engine, processes, selector and options, session file."""

    engine: str = "local"
    workers: int = field(default_factory=default_workers)
    """Worker processes (local engine) or CPUs of the private local Ray; each runs one video
    at a time on one thread, so at most this many cores are busy."""
    ray_address: str | None = None
    selector: str = DEFAULT_SELECTOR
    preset: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """Option values for every video (a manifest row's own values win)."""
    session_db: Path | None = None
    rehash: bool = False
    fallback: str | None = None
    """The declared fallback's mode for every video (None: ``signal``, ``none`` for parity)."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"Invalid engine ({self.engine!r}). Supported values are {', '.join(ENGINES)}.")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"Invalid workers ({self.workers!r}). Supported values are integers ≥ 1.")
        if self.ray_address is not None and self.engine != "ray":
            raise ValueError(
                f"Invalid ray address ({self.ray_address!r}) for engine {self.engine}: use --engine ray."
            )
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))


@dataclass(frozen=True)
class BatchPlan:
    """What a batch will do: the videos to run, and the rows already known (skipped, failed)."""

    source: Path
    out_dir: Path
    listing: Listing
    base: UnitOptions
    tasks: tuple[UnitTask, ...]
    task_indices: tuple[int, ...]
    """Each task's position in ``listing.entries``."""
    known_rows: tuple[tuple[int, dict[str, Any]], ...]
    """(position, row) decided without running: ``skipped`` (unchanged) and ``failed`` (unusable)."""


@dataclass(frozen=True)
class BatchReport:
    """What a batch did."""

    plan: BatchPlan
    rows: tuple[dict[str, Any], ...]
    """One per video, in input order."""
    seconds: float
    interrupted: bool
    summary_path: Path
    dataset_id: str | None

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r["status"] == status)


def output_folder(out_dir: Path, rel_path: str) -> Path:
    """A video's output folder: ``<out_dir>/videos/<rel_path>`` (unique, as relative paths are)."""
    return out_dir / VIDEOS_FOLDER / Path(*PurePosixPath(rel_path).parts)


def _check_out_dir(out_dir: Path) -> Path:
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError("exists and is not a folder", path=out_dir, stage="batch")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the output folder ({exc.strerror or exc})", path=out_dir) from exc
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise OutputError("is not writable", path=out_dir, stage="batch")
    return out_dir.resolve()


def plan_batch(source: str | Path, out_dir: str | Path, *, config: BatchConfig) -> BatchPlan:
    """List the input and decide, per video, whether to run it, skip it or fail it now.

    A video is skipped when its output folder is complete and was made with the same options
    from a file of the same size and modification time (with ``rehash``, or when those
    differ, the worker compares content hashes instead and may still skip it); with a session
    file, its stored run must also be there.

    Raises
    ------
    InputError : the input cannot be listed. OutputError : the output folder is unusable.
    ValueError : invalid selector, preset or option values given for every video.
    """
    base = resolve_options(config.selector, config.preset, config.overrides, config.fallback)
    out = _check_out_dir(Path(out_dir).expanduser())
    listing = list_input(source, option_names=option_names(config.selector), skip=out)
    session_db = str(Path(config.session_db).expanduser().resolve()) if config.session_db else None
    tasks: list[UnitTask] = []
    known: dict[int, dict[str, Any]] = {}
    records: dict[int, dict[str, Any]] = {}
    for index, entry in enumerate(listing.entries):
        folder = output_folder(out, entry.rel_path)
        if entry.error is None and (entry.overrides or entry.selector or entry.preset):
            try:
                unit = resolve_options(
                    entry.selector or config.selector,
                    entry.preset or config.preset,
                    {**config.overrides, **entry.overrides},
                    config.fallback,
                )
            except ValueError as exc:
                entry = type(entry)(entry.path, entry.rel_path, error=f"{entry.path}: {exc}")
                unit = base
        else:
            unit = base
        task = UnitTask(
            path=entry.path,
            rel_path=entry.rel_path,
            out_dir=str(folder),
            unit=unit,
            session_db=session_db,
            rehash=config.rehash,
        )
        if entry.error is not None:
            known[index] = failed_row(task, entry.error)
            continue
        tasks.append(task)
        record = read_record(folder)
        if record is not None:
            records[len(tasks) - 1] = record
    stored: set[str] = set()
    if session_db is not None:
        from backend.store import SessionStore

        # Opened here first: it creates (or migrates) the file before workers open it at once.
        with SessionStore(session_db) as store:
            stored = store.done_runs(r["row"].get("run_id") or "" for r in records.values())
    to_run, to_run_indices = [], []
    order = [i for i in range(len(listing.entries)) if i not in known]
    for position, task in enumerate(tasks):
        row = skipped_row(task, records.get(position), verify_runs=stored.__contains__)
        if row is None:
            to_run.append(task)
            to_run_indices.append(order[position])
        else:
            known[order[position]] = row
    known_rows = tuple(sorted(known.items()))
    return BatchPlan(Path(source), out, listing, base, tuple(to_run), tuple(to_run_indices), known_rows)


def run_batch(
    plan: BatchPlan,
    *,
    config: BatchConfig,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> BatchReport:
    """Run the plan's videos on the configured engine; write ``batch.parquet`` (and the dataset
    rows of the session file) when done, every :data:`CHECKPOINT_SECS` meanwhile, and when
    interrupted (Ctrl-C: the videos in flight are lost, everything finished is kept).

    ``on_row(row)`` is called as each video finishes (progress).
    """
    from backend.store import write_summary_parquet

    t0 = time.perf_counter()
    finished: dict[str, dict[str, Any]] = {}
    last_checkpoint = [time.monotonic()]
    summary_path = plan.out_dir / SUMMARY_FILE

    index_of = {task.path: i for task, i in zip(plan.tasks, plan.task_indices, strict=True)}
    known = dict(plan.known_rows)

    def rows_in_order() -> list[dict[str, Any]]:
        rows = known | {index_of[path]: row for path, row in finished.items()}
        return [rows[i] for i in sorted(rows)]

    def collect(row: dict[str, Any]) -> None:
        finished[row["path"]] = row
        if on_row is not None:
            on_row(row)
        if time.monotonic() - last_checkpoint[0] > CHECKPOINT_SECS:
            last_checkpoint[0] = time.monotonic()
            write_summary_parquet(rows_in_order(), summary_path)

    interrupted = False
    try:
        if plan.tasks:
            if config.engine == "ray":
                from backend.batch.ray_engine import run_ray

                run_ray(
                    plan.tasks,
                    workers=config.workers,
                    address=config.ray_address,
                    on_row=collect,
                )
            else:
                run_local(plan.tasks, workers=config.workers, on_row=collect)
    except KeyboardInterrupt:
        interrupted = True
    rows = tuple(rows_in_order())
    write_summary_parquet(rows, summary_path)
    dataset_id = None
    if config.session_db is not None:
        from backend.store import SessionStore

        with SessionStore(Path(config.session_db).expanduser()) as store:
            store.fail_orphaned_runs()  # runs begun by a worker that died or was ended
            dataset = {
                "out_dir": str(plan.out_dir),
                "input_path": str(Path(plan.source).expanduser().resolve()),
                "selector": plan.base.selector,
                "preset": plan.base.preset,
                "options": plan.base.options.as_dict(),
                "engine": config.engine,
            }
            dataset_id = store.save_dataset(dataset, rows)
    report = BatchReport(plan, rows, time.perf_counter() - t0, interrupted, summary_path, dataset_id)
    if interrupted:
        raise BatchInterrupted(report)
    return report


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a batch, after its summary was written: ``report`` says what was done."""

    def __init__(self, report: BatchReport) -> None:
        super().__init__("interrupted")
        self.report = report
