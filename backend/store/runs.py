"""Store domain of runs: the sessions, runs, frames, groups, readiness_steps, tokens and score_grids rows."""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from backend.errors import StoreError
from backend.records import FallbackOutcome
from backend.store.base import StoreBase, utc_now

_RUN_TABLES = ("frames", "groups", "readiness_steps", "tokens", "score_grids")
# A run table's rows: a DataFrame, or column name → (rows,) array.
RunTable = pd.DataFrame | Mapping[str, np.ndarray]


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks (/proc), '' where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name before ")" may hold spaces


def _this_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def _owner_gone(owner: str) -> bool:
    """True when ``owner`` (host:pid:start) is a process of this host that no longer runs."""
    host, pid_text, start = owner.rsplit(":", 2)
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's run: nothing to tell from here
    pid = int(pid_text)
    if start:  # the pid may have been reused by a newer process
        return _start_ticks(pid) != start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass(frozen=True, kw_only=True)
class _NewRun:
    """The columns a new row of the runs table starts with, whatever its status."""

    run_id: str
    session_id: str
    profile: str
    config: dict[str, Any]
    """Stored as ``config_json``."""
    versions: dict[str, Any]
    """Stored as ``versions_json``."""
    parent_run_id: str | None
    selector: str = "cvp"


@dataclass(frozen=True)
class RunRow:
    """One row of the runs table, decoded."""

    run_id: str
    session_id: str
    parent_run_id: str | None
    video_path: str
    profile: str
    status: str
    config: dict[str, Any]
    versions: dict[str, Any]
    timings: dict[str, float]
    warnings: list[dict[str, str]]
    error: str | None
    threshold: float | None
    cache_key: str | None
    scores_run_id: str | None
    created_at: datetime | None
    selector: str = "cvp"
    """The selector that made the run (``backend.selectors.SELECTORS``); ``config`` holds its options."""
    fallback: FallbackOutcome | None = None
    """The declared fallback's record (None for a run made without one)."""


_RUN_COLUMNS = (
    "run_id",
    "session_id",
    "parent_run_id",
    "video_path",
    "profile",
    "status",
    "config_json",
    "versions_json",
    "timings_json",
    "warnings_json",
    "error",
    "threshold",
    "cache_key",
    "scores_run_id",
    "created_at",
    "selector",
    "selector_requested",
    "selector_used",
    "fallback_reason",
    "fallback_detail",
)


# runs columns written from a finished run's summary, in _summary_values order.
_SUMMARY_COLUMNS = (
    "threshold",
    "timings_json",
    "warnings_json",
    "processed_h",
    "processed_w",
    "patch",
    "block_size",
    "cache_key",
    "scores_run_id",
    "token_budget",
    "tokens_used",
    "stop_reason",
    "selector_requested",
    "selector_used",
    "fallback_reason",
    "fallback_detail",
)


def _summary_values(summary: dict[str, Any]) -> list[Any]:
    return [
        summary["threshold"],
        json.dumps(summary["timings"]),
        json.dumps(summary["warnings"]),
        summary["processed_hw"][0],
        summary["processed_hw"][1],
        summary["patch"],
        summary["block_size"],
        summary.get("cache_key"),
        summary.get("scores_run_id"),
        summary.get("token_budget"),
        summary.get("tokens_used"),
        summary.get("stop_reason"),
        summary.get("selector_requested"),
        summary.get("selector_used"),
        summary.get("fallback_reason"),
        summary.get("fallback_detail"),
    ]


def _fallback_of(row: Mapping[str, Any]) -> FallbackOutcome | None:
    if row["selector_requested"] is None:
        return None
    return FallbackOutcome(
        row["selector_requested"], row["selector_used"], row["fallback_reason"], row["fallback_detail"] or ""
    )


def _ran_as(summary: dict[str, Any]) -> dict[str, Any]:
    """The selector, profile and options a declared fallback ran instead (run_rows.run_summary)."""
    out = {k: summary[k] for k in ("selector", "profile") if k in summary}
    if "config" in summary:
        out["config_json"] = json.dumps(summary["config"])
    return out


class RunsMixin(StoreBase):
    """Sessions, runs and each run's per-frame, group, readiness, token and score-grid rows."""

    def fail_orphaned_runs(self) -> list[str]:
        """Mark failed the ``running`` runs whose process has ended (as opening the store for
        writing does), e.g. right after a worker died; returns their ids."""
        return self._fail_orphaned_runs()

    def _fail_orphaned_runs(self) -> list[str]:
        """Mark failed the ``running`` runs whose process ended without finishing them
        (killed, or crashed in a decoder): otherwise they would show as running for ever."""
        cur = self._cursor()
        rows = cur.execute("SELECT run_id, owner FROM runs WHERE status = 'running' AND owner IS NOT NULL")
        failed = []
        for run_id, owner in rows.fetchall():
            if _owner_gone(owner):
                failed.append(run_id)
                pid = owner.rsplit(":", 2)[1]
                cur.execute(
                    "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE run_id = ?",
                    [
                        f"interrupted: its process (pid {pid}) ended before the run finished",
                        utc_now(),
                        run_id,
                    ],
                )
        return failed

    def ensure_session(self, info: Any, content_sha256: str) -> str:
        """The session id for this video content and path, created on first use."""
        cur = self._cursor()
        row = cur.execute(
            "SELECT session_id FROM sessions WHERE content_sha256 = ? AND video_path = ?",
            [content_sha256, info.path],
        ).fetchone()
        if row:
            return str(row[0])
        session_id = uuid.uuid4().hex[:12]
        with self._transaction() as tx:
            tx.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    session_id,
                    info.path,
                    content_sha256,
                    info.size_bytes,
                    info.codec_name,
                    info.width,
                    info.height,
                    info.fps,
                    info.total_frames,
                    info.frame_count_source,
                    info.duration_secs,
                    utc_now(),
                ],
            )
        return session_id

    def begin_run(
        self,
        session_id: str,
        *,
        profile: str,
        config: dict[str, Any],
        versions: dict[str, Any],
        parent_run_id: str | None = None,
        selector: str = "cvp",
    ) -> str:
        """Insert a run with status ``running`` and return its id."""
        run_id = uuid.uuid4().hex[:12]
        with self._transaction() as tx:
            run = _NewRun(
                run_id=run_id,
                session_id=session_id,
                profile=profile,
                config=config,
                versions=versions,
                parent_run_id=parent_run_id,
                selector=selector,
            )
            self._insert_run(tx, run)
        return run_id

    @staticmethod
    def _insert_run(
        tx: duckdb.DuckDBPyConnection, run: _NewRun, summary: dict[str, Any] | None = None
    ) -> None:
        """Insert a run row: ``running``, or with a summary already ``done`` (one statement)."""
        now = utc_now()
        head = [
            run.run_id,
            run.session_id,
            run.parent_run_id,
            run.profile,
            json.dumps(run.config),
            json.dumps(run.versions),
            now,
            run.selector,
        ]
        if summary is None:
            tx.execute(
                """INSERT INTO runs (run_id, session_id, parent_run_id, profile, config_json, versions_json,
                   created_at, selector, status, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)""",
                [*head, _this_owner()],
            )
            return
        tx.execute(
            f"""INSERT INTO runs (run_id, session_id, parent_run_id, profile, config_json, versions_json,
               created_at, selector, status, finished_at, {", ".join(_SUMMARY_COLUMNS)})
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'done', ?, {", ".join("?" * len(_SUMMARY_COLUMNS))})""",
            [*head, now, *_summary_values(summary)],
        )

    def insert_finished_run(
        self,
        session_id: str,
        *,
        profile: str,
        config: dict[str, Any],
        versions: dict[str, Any],
        parent_run_id: str | None,
        tables: Mapping[str, RunTable],
        summary: dict[str, Any],
        selector: str = "cvp",
    ) -> str:
        """Insert a run, its tables and status ``done`` in one transaction; return its id."""
        run_id = uuid.uuid4().hex[:12]
        with self._transaction() as tx:
            run = _NewRun(
                run_id=run_id,
                session_id=session_id,
                profile=profile,
                config=config,
                versions=versions,
                parent_run_id=parent_run_id,
                selector=selector,
            )
            self._insert_run(tx, run, summary)
            self._insert_tables(tx, run_id, tables)
        return run_id

    def fail_run(self, run_id: str, error: str) -> None:
        """Mark a run failed; any rows it wrote were rolled back with its transaction."""
        with self._transaction() as tx:
            tx.execute(
                "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE run_id = ?",
                [error, utc_now(), run_id],
            )

    def finish_run(self, run_id: str, tables: Mapping[str, RunTable], summary: dict[str, Any]) -> None:
        """Insert every table of a finished run and mark it ``done``, atomically.

        Parameters
        ----------
        tables : table name → that table's columns minus run_id, as a DataFrame or as a
            mapping of column name → (rows,) array (NaN and None are written as NULL).
        summary : threshold, timings, warnings, geometry and cache key of the run.
        """
        ran = _ran_as(summary)
        columns = (*_SUMMARY_COLUMNS, *ran)
        with self._transaction() as tx:
            self._insert_tables(tx, run_id, tables)
            tx.execute(
                f"""UPDATE runs SET status = 'done', finished_at = ?,
                   {", ".join(f"{c} = ?" for c in columns)} WHERE run_id = ?""",
                [utc_now(), *_summary_values(summary), *ran.values(), run_id],
            )

    @staticmethod
    def _insert_tables(tx: duckdb.DuckDBPyConnection, run_id: str, tables: Mapping[str, RunTable]) -> None:
        for name, table in tables.items():
            if name not in _RUN_TABLES:
                raise ValueError(f"Invalid table ({name!r}). Supported values are {', '.join(_RUN_TABLES)}.")
            cols = ", ".join(f'"{c}"' for c in table.keys())
            # DuckDB reads the rows from this local variable by name (its replacement scan),
            # which skips a register/unregister pair per table; run_id goes in as a
            # parameter rather than as a column of repeated strings.
            incoming_run_rows = table  # noqa: F841
            tx.execute(
                f"INSERT INTO {name} (run_id, {cols}) SELECT ?, {cols} FROM incoming_run_rows", [run_id]
            )

    def delete_run(self, run_id: str) -> None:
        """Remove a run and all its rows."""
        self.get_run(run_id)
        with self._transaction() as tx:
            for name in _RUN_TABLES:
                tx.execute(f"DELETE FROM {name} WHERE run_id = ?", [run_id])
            tx.execute("DELETE FROM view_states WHERE run_id = ?", [run_id])
            tx.execute("DELETE FROM runs WHERE run_id = ?", [run_id])

    def _run_row(self, row: tuple[Any, ...]) -> RunRow:
        r = dict(zip(_RUN_COLUMNS, row, strict=True))
        return RunRow(
            run_id=r["run_id"],
            session_id=r["session_id"],
            parent_run_id=r["parent_run_id"],
            video_path=r["video_path"],
            profile=r["profile"],
            status=r["status"],
            config=json.loads(r["config_json"]) if r["config_json"] else {},
            versions=json.loads(r["versions_json"]) if r["versions_json"] else {},
            timings=json.loads(r["timings_json"]) if r["timings_json"] else {},
            warnings=json.loads(r["warnings_json"]) if r["warnings_json"] else [],
            error=r["error"],
            threshold=r["threshold"],
            cache_key=r["cache_key"],
            scores_run_id=r["scores_run_id"],
            created_at=r["created_at"],
            selector=r["selector"] or "cvp",
            fallback=_fallback_of(r),
        )

    _RUN_SELECT = (
        "SELECT "
        + ", ".join("s.video_path" if c == "video_path" else f"r.{c}" for c in _RUN_COLUMNS)
        + " FROM runs r JOIN sessions s USING (session_id)"
    )

    def session_total_frames(self, session_id: str) -> int:
        """The frame count stored for a session's video."""
        row = (
            self._cursor()
            .execute("SELECT total_frames FROM sessions WHERE session_id = ?", [session_id])
            .fetchone()
        )
        if row is None:
            raise StoreError(f"no session with id {session_id!r}", path=self.path, stage="store")
        return int(row[0])

    def get_run(self, run_id: str) -> RunRow:
        """One run by id (any status)."""
        row = self._cursor().execute(self._RUN_SELECT + " WHERE r.run_id = ?", [run_id]).fetchone()
        if row is None:
            raise StoreError(f"no run with id {run_id!r}", path=self.path, stage="store")
        return self._run_row(row)

    def list_runs(self, *, status: str | None = None) -> list[RunRow]:
        """Runs newest first, optionally only those with a status."""
        sql = self._RUN_SELECT + (" WHERE r.status = ?" if status else "") + " ORDER BY r.created_at DESC"
        rows = self._cursor().execute(sql, [status] if status else []).fetchall()
        return [self._run_row(r) for r in rows]

    def session_runs(self, session_id: str, *, selector: str) -> list[RunRow]:
        """The finished runs of one session (video) made by ``selector``, newest first."""
        sql = self._RUN_SELECT + (
            " WHERE r.session_id = ? AND r.selector = ? AND r.status = 'done' ORDER BY r.created_at DESC"
        )
        rows = self._cursor().execute(sql, [session_id, selector]).fetchall()
        return [self._run_row(r) for r in rows]

    def table(self, name: str, run_id: str, *, done_only: bool = True) -> pd.DataFrame:
        """A run's rows of one table, as a DataFrame ordered as written.

        With ``done_only`` (default) rows of runs that are not ``done`` never show up.
        """
        if name not in _RUN_TABLES:
            raise ValueError(f"Invalid table ({name!r}). Supported values are {', '.join(_RUN_TABLES)}.")
        where = "t.run_id = ?" + (" AND r.status = 'done'" if done_only else "")
        sql = f"SELECT t.* EXCLUDE (run_id) FROM {name} t JOIN runs r USING (run_id) WHERE {where}"
        return self._cursor().execute(sql, [run_id]).fetchdf()

    def score_grid(self, run_id: str, candidate_row: int) -> np.ndarray:
        """One candidate's normalised score grid, (rows, cols) float32."""
        row = (
            self._cursor()
            .execute(
                "SELECT grid_rows, grid_cols, grid FROM score_grids WHERE run_id = ? AND candidate_row = ?",
                [run_id, candidate_row],
            )
            .fetchone()
        )
        if row is None:
            raise StoreError(f"run {run_id} has no score grid for candidate {candidate_row}", stage="store")
        return np.frombuffer(row[2], dtype=np.float32).reshape(row[0], row[1])
