"""One batch unit: one video → its output folder and its summary row; the selector seam of ``batch``.

Everything that depends on which selector runs goes through the functions of the "selector
seam" section, which look the selector, its options class and its presets up in
``backend.selectors`` (the table every other entry point uses too).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.errors import CodecLensError, InputError

DEFAULT_SELECTOR = "cvp"
UNIT_RECORD = "codec_lens_batch.json"
"""Written into a video's output folder after the folder is complete: how it was made."""
UNIT_FORMAT = 1
StageCallback = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class UnitOptions:
    """A selector, its preset and its resolved options, with the key that identifies them."""

    selector: str
    preset: str | None
    options: Any
    """The selector's frozen options (SelectionOptions for ``cvp``), ``workers`` = 1."""
    key: str
    """Digest of the selector, every option value and the fallback: equal keys make equal outputs."""
    fallback: str = "signal"
    """The declared fallback's mode (backend.selectors.fallback.FALLBACK_MODES)."""
    cap_sampled_frames: bool = False
    """The preset caps ``num_sampled_frames`` at each video's frame count (not given explicitly)."""

    def as_dict(self) -> dict[str, Any]:
        out = {"selector": self.selector, "preset": self.preset, "options": self.options.as_dict()}
        return out | {"fallback": self.fallback}

    def fallback_config(self) -> Any:
        from backend.selectors.fallback import FallbackConfig

        return FallbackConfig(mode=self.fallback)


@dataclass(frozen=True, kw_only=True)
class UnitTask:
    """One video of a batch: where it is, where its output goes and how it is selected."""

    path: str
    """The video, absolute."""
    rel_path: str
    """Its name relative to the batch input (the output folder's path under ``videos/``)."""
    out_dir: str
    """Its output folder, absolute."""
    unit: UnitOptions
    session_db: str | None = None
    """Also store the run in this session file (``select_and_store``)."""
    rehash: bool = False
    """Hash the content even when size and modification time match the earlier run's."""


# -- the selector seam: look-ups in backend/selectors/ ---------------------------------------------


def _check_selector(selector: str, preset: str | None) -> None:
    from backend.selectors import SELECTORS as TABLE
    from backend.selectors.presets import preset as preset_named

    TABLE.lookup(selector)  # ValueError naming the selectors there are
    if preset is not None and preset_named(preset).selector != selector:
        raise ValueError(
            f"Invalid preset ({preset!r}) for selector {selector}: it sets options of "
            f"{preset_named(preset).selector}. Supported values are "
            f"{', '.join(p for p, v in _presets().items() if v.selector == selector) or 'none'}."
        )


def _presets() -> Mapping[str, Any]:
    from backend.selectors.presets import PRESETS as TABLE

    return TABLE


def _options_class(selector: str) -> Any:
    """The frozen options dataclass of ``selector`` (its fields are its options)."""
    from backend.selectors import SELECTORS as TABLE

    return TABLE.lookup(selector).options_cls


def _preset_values(selector: str, preset: str | None) -> dict[str, Any]:
    """The option values ``preset`` sets for ``selector`` (none without a preset); a sample count
    the release caps at the frame count is capped per video, in :func:`_select`."""
    from backend.selectors.presets import preset_values

    return {} if preset is None else preset_values(preset, {})


def _capped(task: UnitTask) -> Any:
    """The task's options with a capping preset's sample count capped at the video's frame count
    (unless the count was given explicitly), as ``codec-lens select --preset`` does."""
    from backend.selectors.presets import preset as preset_named

    unit = task.unit
    if unit.preset is None or not unit.cap_sampled_frames or not preset_named(unit.preset).cap_sampled_frames:
        return unit.options
    from backend.stages.probe import ProbeConfig, probe

    total = probe(task.path, config=ProbeConfig()).total_frames
    wanted = int(unit.options.num_sampled_frames)
    return dataclasses.replace(unit.options, num_sampled_frames=max(1, min(wanted, int(total))))


def _select(
    task: UnitTask, content: str, on_progress: Callable[[str, float], None]
) -> tuple[Any, str | None]:
    """Run the task's selector on its video (and store the run): (RunResult, run id or None)."""
    _check_selector(task.unit.selector, task.unit.preset)
    options = _capped(task)
    if task.session_db is not None:
        from backend.runs import select_and_store
        from backend.store import SessionStore

        with SessionStore(task.session_db) as store:
            run_id, result = select_and_store(
                task.path,
                store,
                options=options,
                on_progress=on_progress,
                content=content,
                fallback=task.unit.fallback_config(),
            )
        return result, run_id
    from backend.selectors.fallback import select_with_fallback

    config = task.unit.fallback_config()
    return select_with_fallback(task.path, options=options, config=config, on_progress=on_progress), None


# -- options ---------------------------------------------------------------------------------------


def option_names(selector: str) -> tuple[str, ...]:
    """The option names of ``selector`` (manifest columns with these names are per-video options)."""
    _check_selector(selector, None)
    return tuple(f.name for f in dataclasses.fields(_options_class(selector)))


def _coerce(value: Any, kind: type, name: str) -> Any:
    """A manifest cell (CSV text or a JSON value) as the option's type."""
    if not isinstance(value, str) or kind is str:
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
    text = value.strip()
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError
        return kind(text)
    except ValueError:
        raise ValueError(
            f"Invalid {name} ({value!r}). Supported values are {kind.__name__} values."
        ) from None


def options_key(selector: str, options: Any, fallback: str | None = None) -> str:
    """Digest of ``selector``, every option value but ``workers`` (which changes no output) and a
    fallback other than the options' default (so outputs made before fallbacks keep their key)."""
    from backend.selectors.fallback import default_fallback

    values = {k: v for k, v in options.as_dict().items() if k != "workers"}
    made = {"selector": selector, "options": values}
    if fallback is not None and fallback != default_fallback(options).mode:
        made["fallback"] = fallback
    blob = json.dumps(made, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resolve_options(
    selector: str = DEFAULT_SELECTOR,
    preset: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    fallback: str | None = None,
) -> UnitOptions:
    """The options one batch unit runs with: ``selector``'s defaults, then ``preset``'s values,
    then ``overrides`` (CLI flags, then a manifest row's cells; text is converted to each
    option's type). ``workers`` (where the selector has it) is always 1: a batch runs one
    single-threaded video per process. ``fallback``: the declared fallback's mode (None: the
    default, ``signal`` but ``none`` for the parity profile).

    Raises
    ------
    ValueError : unknown or unavailable selector or preset, unknown option, invalid value.
    """
    _check_selector(selector, preset)
    cls = _options_class(selector)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    given = {**_preset_values(selector, preset), **(overrides or {})}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ValueError(
            f"Invalid option ({', '.join(unknown)}) for selector {selector}. "
            f"Supported values are {', '.join(fields)}."
        )
    values = {}
    for name, value in given.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue  # an empty manifest cell: the default
        values[name] = _coerce(value, type(fields[name].default), name)
    if "workers" in fields:
        values["workers"] = 1
    options = cls(**values)
    cap = preset is not None and "num_sampled_frames" not in (overrides or {})
    from backend.selectors.fallback import FallbackConfig, default_fallback

    mode = FallbackConfig(mode=fallback).mode if fallback is not None else default_fallback(options).mode
    return UnitOptions(
        selector=selector,
        preset=preset,
        options=options,
        key=options_key(selector, options, mode),
        fallback=mode,
        cap_sampled_frames=cap,
    )


# -- the summary row ---------------------------------------------------------------------------------


def temporal_coverage(tokens: np.ndarray, total_frames: int) -> float:
    """Share of the video's frames with at least one valid token in a canvas.

    Parameters
    ----------
    tokens : (N, 8) int32 token records (``backend.records.TOKEN_COLUMNS``: frame_index
        first, valid last).
    total_frames : frames of the video (≥ 1 counts; 0 gives 0.0).
    """
    if total_frames <= 0:
        return 0.0
    frames = np.unique(tokens[tokens[:, 7] == 1, 0])
    return float(np.count_nonzero(frames < total_frames)) / float(total_frames)


def failed_row(
    task: UnitTask, error: str, *, seconds: float = 0.0, content: str | None = None
) -> dict[str, Any]:
    """The summary row of a video that produced no output."""
    return {
        "path": task.path,
        "rel_path": task.rel_path,
        "content_sha256": content,
        "status": "failed",
        "error": error.replace("\n", " "),
        "selector": task.unit.selector,
        "seconds": round(seconds, 3),
        "options_key": task.unit.key,
    }


def done_row(
    task: UnitTask, result: Any, *, content: str, seconds: float, run_id: str | None, output_dir: str
) -> dict[str, Any]:
    """The summary row of a finished video."""
    info, tokens = result.info, result.canvases.tokens
    return {
        "path": task.path,
        "rel_path": task.rel_path,
        "content_sha256": content,
        "status": "done",
        "error": None,
        **_fallback_columns(task, result),
        "codec_name": info.codec_name,
        "width": int(info.width),
        "height": int(info.height),
        "duration_secs": float(info.duration_secs) if info.duration_secs is not None else None,
        "total_frames": int(info.total_frames),
        "frames": int(result.candidates.frame_indices.size),
        "groups": len(result.selection.groups),
        "canvases": int(result.canvases.count),
        "tokens": int(tokens.shape[0]),
        "valid_tokens": int(tokens[:, 7].sum()),
        "temporal_coverage": round(temporal_coverage(tokens, int(info.total_frames)), 6),
        **_audit_figures(result),
        "warnings": len(result.warnings),
        "warning_codes": ",".join(sorted({w.code for w in result.warnings})),
        "seconds": round(seconds, 3),
        "output_dir": output_dir,
        "options_key": task.unit.key,
        "run_id": run_id,
    }


def _fallback_columns(task: UnitTask, result: Any) -> dict[str, Any]:
    """The selector that ran (``selector``), the one asked for and why they differ."""
    from backend.selectors import selector_of

    fallback = result.fallback
    return {
        "selector": selector_of(result.options),
        "selector_requested": fallback.selector_requested if fallback is not None else task.unit.selector,
        "selector_used": fallback.selector_used if fallback is not None else task.unit.selector,
        "fallback_reason": fallback.fallback_reason if fallback is not None else None,
    }


def _audit_figures(result: Any) -> dict[str, Any]:
    """The coverage audit's summary columns of a finished run (docs/audit.md)."""
    from backend.audit import AuditConfig, audit_coverage, audit_source_of_run

    return audit_coverage(audit_source_of_run(result), config=AuditConfig()).summary()


def one_line(exc: BaseException, path: str) -> str:
    """The one-line error of a unit: ours name their file; a builtin's gets the video's path."""
    if isinstance(exc, CodecLensError):
        return exc.one_line()
    if isinstance(exc, OSError):
        return f"{exc.filename or path}: {exc.strerror or exc}"
    return f"{path}: {exc}".replace("\n", " ")


# -- the record that makes a re-run skip -----------------------------------------------------------------


def _stat_key(path: str) -> dict[str, int]:
    st = os.stat(path)
    return {"size_bytes": int(st.st_size), "mtime_ns": int(st.st_mtime_ns)}


def read_record(out_dir: str | Path) -> dict[str, Any] | None:
    """The unit record of a complete output folder (None: missing, unreadable or incomplete)."""
    folder = Path(out_dir)
    try:
        if not (folder / "codec_lens.json").is_file():  # cvp_format.write_output's done marker
            return None
        record = json.loads((folder / UNIT_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != UNIT_FORMAT or "row" not in record:
        return None
    return record


def _write_record(
    out_dir: str,
    row: dict[str, Any],
    stat: dict[str, int],
    session_db: str | None,
    options: dict[str, Any] | None,
) -> None:
    """Write the unit record (``options``: the selector, preset and option values the run used)."""
    folder = Path(out_dir)
    tmp = folder / f".{UNIT_RECORD}.partial"
    record = {"format": UNIT_FORMAT, "row": row, "stat": stat, "session_db": session_db, "options": options}
    tmp.write_text(json.dumps(record, default=str))
    os.replace(tmp, folder / UNIT_RECORD)


def skipped_row(
    task: UnitTask, record: dict[str, Any] | None, *, verify_runs: Callable[[str], bool] | None = None
) -> dict[str, Any] | None:
    """The ``skipped`` row of a video whose earlier output still holds, judged without hashing:
    a complete folder made with the same options from a file of the same size and modification
    time (and, with a session file, whose run is stored there). None: it must be looked at.
    """
    if record is None or task.rehash:
        return None
    row = record["row"]
    if row.get("options_key") != task.unit.key or row.get("status") != "done":
        return None
    try:
        if record.get("stat") != _stat_key(task.path):
            return None
    except OSError:
        return None
    if task.session_db is not None and (verify_runs is None or not verify_runs(row.get("run_id") or "")):
        return None
    return {**row, "path": task.path, "rel_path": task.rel_path, "status": "skipped"}


def _stored(session_db: str) -> Callable[[str], bool]:
    def check(run_id: str) -> bool:
        from backend.store import SessionStore

        with SessionStore(session_db) as store:
            return bool(store.done_runs([run_id]))

    return check


def remove_partials(task: UnitTask) -> None:
    """Undo what a unit killed mid-way left: ``write_output``'s hidden partial folder, and the
    earlier output it had moved aside (put back). Also run as a unit starts, for what a killed
    batch process left."""
    import shutil

    out = Path(task.out_dir)
    with contextlib.suppress(OSError):
        for partial in out.parent.glob(f".{out.name}.partial-*"):
            shutil.rmtree(partial, ignore_errors=True)
        for old in out.parent.glob(f".{out.name}.old-*"):
            if not out.exists():
                old.rename(out)
            else:
                shutil.rmtree(old, ignore_errors=True)


def run_unit(task: UnitTask, *, on_stage: StageCallback | None = None) -> dict[str, Any]:
    """Process one video: its output folder (cvp layout + :data:`UNIT_RECORD`) and its summary row.

    A video whose complete output was made from the same content (sha256) with the same
    options is skipped: its earlier row comes back with status ``skipped``. An error of the
    video (missing, not a video, unsupported, undecodable, unwritable output) is a ``failed``
    row with one line; the output folder is then left as it was.

    Parameters
    ----------
    task : the video, its output folder, options and session file.
    on_stage : called with each stage's name as it starts (a crash is reported in it).

    Returns
    -------
    The summary row (``backend.store.SUMMARY_COLUMNS``).
    """
    from backend.cvp_format import write_output
    from backend.runs import content_sha256

    stage = on_stage or (lambda name: None)
    t0 = time.perf_counter()
    content: str | None = None
    try:
        remove_partials(task)
        record = read_record(task.out_dir)
        stage("hash")
        stat = _stat_key(task.path)
        if Path(task.path).is_dir():
            raise InputError("is a directory, not a video", path=task.path, stage="batch")
        content = content_sha256(task.path)
        if record is not None and record["row"].get("content_sha256") == content:
            verify = _stored(task.session_db) if task.session_db is not None else None
            same = skipped_row(
                dataclasses.replace(task, rehash=False), {**record, "stat": stat}, verify_runs=verify
            )
            if same is not None:
                _write_record(  # the new stat
                    task.out_dir, record["row"], stat, record.get("session_db"), record.get("options")
                )
                return same
        from backend.pipeline import STAGES

        names = list(STAGES.names)
        stage(names[0])

        def progress(name: str, fraction: float) -> None:
            index = names.index(name) if name in names else -1
            stage(names[index + 1] if 0 <= index < len(names) - 1 else "output")

        result, run_id = _select(task, content, progress)
        stage("output")
        write_output(result, task.out_dir, workers=1)
        seconds = time.perf_counter() - t0
        output_dir = str(Path("videos") / task.rel_path)
        row = done_row(task, result, content=content, seconds=seconds, run_id=run_id, output_dir=output_dir)
        used = {
            "selector": task.unit.selector,
            "preset": task.unit.preset,
            "options": result.options.as_dict(),
        }
        _write_record(task.out_dir, row, stat, task.session_db, used)
        return row
    except (CodecLensError, ValueError, OSError) as exc:  # RuntimeErrors of ours are CodecLensErrors
        return failed_row(task, one_line(exc, task.path), seconds=time.perf_counter() - t0, content=content)
