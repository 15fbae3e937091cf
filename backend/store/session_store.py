"""Session store: every SQL statement of Codec Lens, over one DuckDB file."""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from backend.errors import StoreError

SCHEMA_VERSION = 4
DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of every DuckDB database file


# Version 1 lacked the run's warnings and the per-frame bad-frame reason; the
# migration below adds them. Tables are keyed by run_id; column names equal the
# record field names (frame_index, pts_secs, size_bytes, …).
_SCHEMA_V1 = [
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    """CREATE TABLE sessions (
        session_id VARCHAR PRIMARY KEY, video_path VARCHAR NOT NULL, content_sha256 VARCHAR NOT NULL,
        size_bytes BIGINT, codec_name VARCHAR, width INTEGER, height INTEGER, fps DOUBLE,
        total_frames INTEGER, frame_count_source VARCHAR, duration_secs DOUBLE, created_at TIMESTAMP)""",
    """CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, parent_run_id VARCHAR, profile VARCHAR,
        config_json JSON, versions_json JSON, timings_json JSON, status VARCHAR NOT NULL, error VARCHAR,
        threshold DOUBLE, processed_h INTEGER, processed_w INTEGER, patch INTEGER, block_size INTEGER,
        cache_key VARCHAR, created_at TIMESTAMP, finished_at TIMESTAMP)""",
    """CREATE TABLE frames (
        run_id VARCHAR NOT NULL, frame_index INTEGER NOT NULL, pts_secs DOUBLE, pict_type VARCHAR,
        size_bytes BIGINT, is_keyframe BOOLEAN, candidate BOOLEAN, moved_from INTEGER,
        group_index INTEGER, is_anchor BOOLEAN, kept_blocks INTEGER)""",
    """CREATE TABLE groups (
        run_id VARCHAR NOT NULL, group_index INTEGER NOT NULL, start INTEGER, "end" INTEGER,
        frame_count INTEGER, stop_reason VARCHAR, threshold DOUBLE, anchor_frame_index INTEGER,
        kept_blocks INTEGER, skipped BOOLEAN, readiness_json JSON)""",
    """CREATE TABLE readiness_steps (
        run_id VARCHAR NOT NULL, group_index INTEGER, start INTEGER, "end" INTEGER,
        frame_index_added INTEGER, topk_sum DOUBLE, threshold DOUBLE, covered_bins INTEGER,
        needed_bins INTEGER, marginal_gain DOUBLE, passed BOOLEAN, decision VARCHAR, reason VARCHAR)""",
    """CREATE TABLE tokens (
        run_id VARCHAR NOT NULL, frame_index INTEGER, patch_row INTEGER, patch_col INTEGER,
        canvas_index INTEGER, packed_row INTEGER, packed_col INTEGER, group_index INTEGER, valid BOOLEAN)""",
    """CREATE TABLE score_grids (
        run_id VARCHAR NOT NULL, candidate_row INTEGER NOT NULL, frame_index INTEGER,
        grid_rows INTEGER, grid_cols INTEGER, grid BLOB)""",
    """CREATE TABLE signal_cache (
        cache_key VARCHAR PRIMARY KEY, content_sha256 VARCHAR, decoder VARCHAR, decoder_version VARCHAR,
        geometry_json JSON, signal_kind VARCHAR, folder VARCHAR, size_bytes BIGINT, created_at TIMESTAMP)""",
]
_MIGRATIONS = {
    2: [
        "ALTER TABLE runs ADD COLUMN warnings_json JSON",
        "ALTER TABLE frames ADD COLUMN bad_reason VARCHAR",
        # Re-selections that reuse score maps point at the run that stored them.
        "ALTER TABLE runs ADD COLUMN scores_run_id VARCHAR",
    ],
    # Version 3 adds the luma-bias analyses and the codec comparisons (new tables only).
    3: [
        # Where the viewer was left on each run, so reopening restores it.
        """CREATE TABLE view_states (
            run_id VARCHAR PRIMARY KEY, view_json JSON, updated_at TIMESTAMP)""",
        # -- luma-bias tables (issue 5) --
        """CREATE TABLE luma_analyses (
            analysis_id VARCHAR PRIMARY KEY, source VARCHAR NOT NULL, test_path VARCHAR NOT NULL,
            test_sha256 VARCHAR, reference_path VARCHAR NOT NULL, reference_sha256 VARCHAR,
            official_path VARCHAR, official_sha256 VARCHAR, geometry_json JSON, keyframes_json JSON,
            config_json JSON,
            width INTEGER, height INTEGER, cell INTEGER, "offset" INTEGER, truncated BOOLEAN, frames INTEGER,
            p95_all DOUBLE, p95_steady DOUBLE, jump_0_1 DOUBLE, mean_bias DOUBLE, mean_abs_bias DOUBLE,
            y_psnr_db DOUBLE, summaries_json JSON, versions_json JSON, fit_id VARCHAR,
            created_at TIMESTAMP)""",
        """CREATE TABLE luma_frames (
            analysis_id VARCHAR NOT NULL, reference_label VARCHAR NOT NULL, frame_index INTEGER NOT NULL,
            reference_index INTEGER, bias DOUBLE, psnr_db DOUBLE, y_mse DOUBLE, test_mean_rgb DOUBLE[3],
            reference_mean_rgb DOUBLE[3], slot INTEGER, position INTEGER, latent INTEGER, chunk INTEGER,
            in_chunk INTEGER, is_boundary BOOLEAN, is_steady BOOLEAN, test_cells BLOB, diff_cells BLOB)""",
        """CREATE TABLE luma_slots (
            analysis_id VARCHAR NOT NULL, reference_label VARCHAR NOT NULL, slot INTEGER, position INTEGER,
            count BIGINT, mean DOUBLE, std DOUBLE)""",
        """CREATE TABLE luma_gains (
            analysis_id VARCHAR NOT NULL, reference_label VARCHAR NOT NULL, slot INTEGER, a DOUBLE, b DOUBLE,
            cells BIGINT, rms_residual DOUBLE)""",
        """CREATE TABLE luma_fits (
            fit_id VARCHAR PRIMARY KEY, coeffs_format VARCHAR, coeffs_version INTEGER, coeffs_path VARCHAR,
            coeffs_json JSON, coefficient_count INTEGER, geometry_json JSON, cell INTEGER,
            train_json JSON, test_json JSON, evaluation_json JSON, versions_json JSON,
            created_at TIMESTAMP)""",
        # -- codec comparison tables (issue 6) --
        """CREATE TABLE comparisons (
            comparison_id VARCHAR PRIMARY KEY, status VARCHAR NOT NULL, error VARCHAR, source_path VARCHAR,
            source_sha256 VARCHAR, reference_path VARCHAR, width INTEGER, height INTEGER, fps DOUBLE,
            frame_count INTEGER, config_json JSON, options_json JSON, settings_json JSON, timings_json JSON,
            created_at TIMESTAMP)""",
        """CREATE TABLE comparison_variants (
            comparison_id VARCHAR NOT NULL, variant_index INTEGER NOT NULL, label VARCHAR, codec VARCHAR,
            encoder VARCHAR, video_path VARCHAR, encoder_options_json JSON, structure_note VARCHAR,
            frame_count INTEGER, keyframe_indices_json JSON, size_bytes BIGINT, bitrate_kbps DOUBLE,
            encode_secs DOUBLE, score VARCHAR, score_note VARCHAR)""",
        """CREATE TABLE comparison_metrics (
            comparison_id VARCHAR NOT NULL, variant_index INTEGER NOT NULL, run_id VARCHAR,
            run_decoder VARCHAR, total_frames INTEGER, candidates INTEGER, groups INTEGER, canvases INTEGER,
            tokens INTEGER, valid_tokens INTEGER, duration_secs DOUBLE, canvases_per_sec DOUBLE,
            tokens_per_sec DOUBLE, time_covered_share DOUBLE, kept_block_share DOUBLE, luma_bias_mean DOUBLE,
            luma_abs_bias_mean DOUBLE, psnr_y_db DOUBLE, psnr_y_min_db DOUBLE,
            reader_luma_bias_mean DOUBLE, reader_psnr_y_db DOUBLE)""",
        """CREATE TABLE comparison_pairs (
            comparison_id VARCHAR NOT NULL, variant_a INTEGER, variant_b INTEGER, jaccard DOUBLE,
            jaccard_frame_mean DOUBLE, spearman_mean DOUBLE, spearman_median DOUBLE,
            frames_compared INTEGER, spearman_frames INTEGER)""",
        """CREATE TABLE comparison_pair_frames (
            comparison_id VARCHAR NOT NULL, variant_a INTEGER, variant_b INTEGER, frame_index INTEGER,
            jaccard DOUBLE, spearman DOUBLE, kept_a INTEGER, kept_b INTEGER, kept_both INTEGER)""",
        """CREATE TABLE comparison_luma (
            comparison_id VARCHAR NOT NULL, variant_index INTEGER, decoder VARCHAR, frame_index INTEGER,
            luma_bias DOUBLE, psnr_y_db DOUBLE, y_mse DOUBLE)""",
    ],
    # Version 4: which process runs a ``running`` run (host:pid:start), so that a run whose
    # process was killed is marked failed when the store is next opened.
    4: ["ALTER TABLE runs ADD COLUMN owner VARCHAR"],
}


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


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _check_file(path: Path) -> None:
    """Refuse anything that is not a DuckDB file before DuckDB can overwrite it."""
    if path.is_dir():
        raise StoreError("is a directory, not a session database", path=path, stage="store")
    if not path.exists() or path.stat().st_size == 0:
        if path.exists():
            raise StoreError("is an empty file, not a session database", path=path, stage="store")
        return
    with path.open("rb") as fh:
        head = fh.read(16)
    if head[8:12] != DUCKDB_MAGIC:
        raise StoreError("is not a DuckDB database (refusing to touch it)", path=path, stage="store")


def _write_schema(cur: duckdb.DuckDBPyConnection, version: int) -> None:
    """Create every table as of schema ``version`` (v1, then each migration)."""
    for stmt in _SCHEMA_V1:
        cur.execute(stmt)
    cur.execute("INSERT INTO schema_version VALUES (1)")
    for v in range(2, version + 1):
        for stmt in _MIGRATIONS[v]:
            cur.execute(stmt)
        cur.execute("INSERT INTO schema_version VALUES (?)", [v])


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
)


class SessionStore:
    """All persistent state: sessions, runs and their per-frame/group/token rows.

    One DuckDB connection per store; every call takes its own cursor, so handlers on
    several threads can read while one writes (DuckDB's MVCC isolates them).
    Large arrays (decoded pixels for re-selection) live in files next to the
    database under ``<name>.cache/``; the tables hold their paths.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser()
        _check_file(self.path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open session database ({exc})", path=self.path, stage="store") from exc
        self._write_lock = threading.Lock()
        self.cache_dir = self.path.parent / f"{self.path.name}.cache"
        try:
            self._prepare_schema(read_only)
            if not read_only:
                self._fail_orphaned_runs()
        except BaseException:
            self._con.close()
            raise

    # -- schema -----------------------------------------------------------------------------

    def _tables(self) -> set[str]:
        rows = self._con.cursor().execute("SELECT table_name FROM information_schema.tables").fetchall()
        return {r[0] for r in rows}

    def schema_version(self) -> int:
        row = self._con.cursor().execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _prepare_schema(self, read_only: bool) -> None:
        tables = self._tables()
        if not tables:
            if read_only:
                raise StoreError("is an empty database", path=self.path, stage="store")
            self._create(SCHEMA_VERSION)
            return
        if "schema_version" not in tables:
            raise StoreError(
                "is a DuckDB database but not a Codec Lens session store (refusing to touch it)",
                path=self.path,
                stage="store",
            )
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"was written by a newer Codec Lens (schema {version}; this version reads up to "
                f"{SCHEMA_VERSION}); upgrade codec-lens to open it",
                path=self.path,
                stage="store",
            )
        if version < SCHEMA_VERSION and not read_only:
            self.migrate(version)

    def _fail_orphaned_runs(self) -> None:
        """Mark failed the ``running`` runs whose process ended without finishing them
        (killed, or crashed in a decoder): otherwise they would show as running for ever."""
        cur = self._con.cursor()
        rows = cur.execute("SELECT run_id, owner FROM runs WHERE status = 'running' AND owner IS NOT NULL")
        for run_id, owner in rows.fetchall():
            if _owner_gone(owner):
                pid = owner.rsplit(":", 2)[1]
                cur.execute(
                    "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE run_id = ?",
                    [f"interrupted: its process (pid {pid}) ended before the run finished", _now(), run_id],
                )

    def _create(self, version: int) -> None:
        cur = self._con.cursor()
        cur.execute("BEGIN TRANSACTION")
        _write_schema(cur, version)
        cur.execute("COMMIT")

    def migrate(self, from_version: int) -> None:
        """Apply every migration after ``from_version`` in one transaction."""
        cur = self._con.cursor()
        with self._write_lock:
            cur.execute("BEGIN TRANSACTION")
            try:
                for v in range(from_version + 1, SCHEMA_VERSION + 1):
                    for stmt in _MIGRATIONS[v]:
                        cur.execute(stmt)
                    cur.execute("INSERT INTO schema_version VALUES (?)", [v])
                cur.execute("COMMIT")
            except duckdb.Error:
                cur.execute("ROLLBACK")
                raise

    @classmethod
    def create_version(cls, path: str | Path, version: int) -> None:
        """Write an empty store at an older (or current) schema version (tests, tools)."""
        con = duckdb.connect(str(Path(path)))
        try:
            _write_schema(con.cursor(), version)
        finally:
            con.close()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        cur = self._con.cursor()
        with self._write_lock:
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    # -- sessions and runs ------------------------------------------------------------------

    def ensure_session(self, info: Any, content_sha256: str) -> str:
        """The session id for this video content and path, created on first use."""
        cur = self._con.cursor()
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
                    _now(),
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
    ) -> str:
        """Insert a run with status ``running`` and return its id."""
        run_id = uuid.uuid4().hex[:12]
        with self._transaction() as tx:
            self._insert_run(tx, run_id, session_id, profile, config, versions, parent_run_id)
        return run_id

    @staticmethod
    def _insert_run(
        tx: duckdb.DuckDBPyConnection,
        run_id: str,
        session_id: str,
        profile: str,
        config: dict[str, Any],
        versions: dict[str, Any],
        parent_run_id: str | None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        """Insert a run row: ``running``, or with a summary already ``done`` (one statement)."""
        now = _now()
        head = [run_id, session_id, parent_run_id, profile, json.dumps(config), json.dumps(versions), now]
        if summary is None:
            tx.execute(
                """INSERT INTO runs (run_id, session_id, parent_run_id, profile, config_json, versions_json,
                   created_at, status, owner) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?)""",
                [*head, _this_owner()],
            )
            return
        tx.execute(
            f"""INSERT INTO runs (run_id, session_id, parent_run_id, profile, config_json, versions_json,
               created_at, status, finished_at, {", ".join(_SUMMARY_COLUMNS)})
               VALUES (?, ?, ?, ?, ?, ?, ?, 'done', ?, {", ".join("?" * len(_SUMMARY_COLUMNS))})""",
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
    ) -> str:
        """Insert a run, its tables and status ``done`` in one transaction; return its id."""
        run_id = uuid.uuid4().hex[:12]
        with self._transaction() as tx:
            self._insert_run(tx, run_id, session_id, profile, config, versions, parent_run_id, summary)
            self._insert_tables(tx, run_id, tables)
        return run_id

    def fail_run(self, run_id: str, error: str) -> None:
        """Mark a run failed; any rows it wrote were rolled back with its transaction."""
        with self._transaction() as tx:
            tx.execute(
                "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE run_id = ?",
                [error, _now(), run_id],
            )

    def finish_run(self, run_id: str, tables: Mapping[str, RunTable], summary: dict[str, Any]) -> None:
        """Insert every table of a finished run and mark it ``done``, atomically.

        Parameters
        ----------
        tables : table name → that table's columns minus run_id, as a DataFrame or as a
            mapping of column name → (rows,) array (NaN and None are written as NULL).
        summary : threshold, timings, warnings, geometry and cache key of the run.
        """
        with self._transaction() as tx:
            self._insert_tables(tx, run_id, tables)
            tx.execute(
                f"""UPDATE runs SET status = 'done', finished_at = ?,
                   {", ".join(f"{c} = ?" for c in _SUMMARY_COLUMNS)} WHERE run_id = ?""",
                [_now(), *_summary_values(summary), run_id],
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
        )

    _RUN_SELECT = (
        "SELECT "
        + ", ".join("s.video_path" if c == "video_path" else f"r.{c}" for c in _RUN_COLUMNS)
        + " FROM runs r JOIN sessions s USING (session_id)"
    )

    def get_run(self, run_id: str) -> RunRow:
        """One run by id (any status)."""
        row = self._con.cursor().execute(self._RUN_SELECT + " WHERE r.run_id = ?", [run_id]).fetchone()
        if row is None:
            raise StoreError(f"no run with id {run_id!r}", path=self.path, stage="store")
        return self._run_row(row)

    def list_runs(self, *, status: str | None = None) -> list[RunRow]:
        """Runs newest first, optionally only those with a status."""
        sql = self._RUN_SELECT + (" WHERE r.status = ?" if status else "") + " ORDER BY r.created_at DESC"
        rows = self._con.cursor().execute(sql, [status] if status else []).fetchall()
        return [self._run_row(r) for r in rows]

    def table(self, name: str, run_id: str, *, done_only: bool = True) -> pd.DataFrame:
        """A run's rows of one table, as a DataFrame ordered as written.

        With ``done_only`` (default) rows of runs that are not ``done`` never show up.
        """
        if name not in _RUN_TABLES:
            raise ValueError(f"Invalid table ({name!r}). Supported values are {', '.join(_RUN_TABLES)}.")
        where = "t.run_id = ?" + (" AND r.status = 'done'" if done_only else "")
        sql = f"SELECT t.* EXCLUDE (run_id) FROM {name} t JOIN runs r USING (run_id) WHERE {where}"
        return self._con.cursor().execute(sql, [run_id]).fetchdf()

    def score_grid(self, run_id: str, candidate_row: int) -> np.ndarray:
        """One candidate's normalised score grid, (rows, cols) float32."""
        row = (
            self._con.cursor()
            .execute(
                "SELECT grid_rows, grid_cols, grid FROM score_grids WHERE run_id = ? AND candidate_row = ?",
                [run_id, candidate_row],
            )
            .fetchone()
        )
        if row is None:
            raise StoreError(f"run {run_id} has no score grid for candidate {candidate_row}", stage="store")
        return np.frombuffer(row[2], dtype=np.float32).reshape(row[0], row[1])

    def query(self, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
        """Read-only SQL for researchers (``codec-lens sessions sql``)."""
        cur = self._con.cursor()
        return cur.execute(sql, params or []).fetchdf()

    # -- signal cache -----------------------------------------------------------------------

    def cache_lookup(self, cache_key: str) -> Path | None:
        """The folder holding a cached decode, or None."""
        row = (
            self._con.cursor()
            .execute("SELECT folder FROM signal_cache WHERE cache_key = ?", [cache_key])
            .fetchone()
        )
        if row is None:
            return None
        folder = Path(row[0])
        return folder if folder.is_dir() else None

    def cache_entries(self) -> list[tuple[str, Path, int]]:
        """Every registered cached decode: (cache key, folder, size in bytes)."""
        rows = self._con.cursor().execute("SELECT cache_key, folder, size_bytes FROM signal_cache").fetchall()
        return [(key, Path(folder), int(size or 0)) for key, folder, size in rows]

    def cache_forget(self, cache_key: str) -> None:
        """Unregister a cached decode (the caller removes its folder)."""
        with self._transaction() as tx:
            tx.execute("DELETE FROM signal_cache WHERE cache_key = ?", [cache_key])

    def cache_register(self, cache_key: str, folder: Path, meta: dict[str, Any]) -> None:
        """Record a finished cache folder (written by the caller) under its key."""
        size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
        with self._transaction() as tx:
            tx.execute("DELETE FROM signal_cache WHERE cache_key = ?", [cache_key])
            tx.execute(
                "INSERT INTO signal_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    cache_key,
                    meta["content_sha256"],
                    meta["decoder"],
                    meta["decoder_version"],
                    json.dumps(meta["geometry"]),
                    meta["signal_kind"],
                    str(folder),
                    size,
                    _now(),
                ],
            )

    def size_bytes(self) -> dict[str, int]:
        """Bytes on disk: the database file (+WAL) and the cache folder."""
        db = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}.wal")) if p.exists())
        cache = (
            sum(f.stat().st_size for f in self.cache_dir.rglob("*") if f.is_file())
            if self.cache_dir.exists()
            else 0
        )
        return {"database": db, "cache": cache}

    # -- viewer state -----------------------------------------------------------------------

    def save_view(self, run_id: str, view: dict[str, Any]) -> None:
        """Remember the viewer state of a run (row, layers, …) for the next time it opens."""
        with self._transaction() as cur:
            cur.execute("DELETE FROM view_states WHERE run_id = ?", [run_id])
            cur.execute(
                "INSERT INTO view_states VALUES (?, ?, ?)", [run_id, json.dumps(view, default=str), _now()]
            )

    def load_view(self, run_id: str) -> dict[str, Any] | None:
        """The viewer state saved for ``run_id``, or None."""
        row = (
            self._con.cursor()
            .execute("SELECT view_json FROM view_states WHERE run_id = ?", [run_id])
            .fetchone()
        )
        return None if row is None else json.loads(row[0])

    # -- codec comparison (issue 6) ---------------------------------------------------------

    def insert_comparison(
        self, comparison_id: str, *, row: dict[str, Any], tables: dict[str, pd.DataFrame]
    ) -> None:
        """Insert a finished comparison (status ``done``) and its tables in one transaction.

        Parameters
        ----------
        row : the ``comparisons`` columns other than id, status, error and created_at.
        tables : table name → DataFrame whose columns are that table's columns minus comparison_id.
        """
        cols = ["comparison_id", "status", *row, "created_at"]
        with self._transaction() as tx:
            tx.execute(
                f"INSERT INTO comparisons ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [comparison_id, "done", *row.values(), _now()],
            )
            for name, frame in tables.items():
                if name not in _COMPARISON_TABLES:
                    choices = ", ".join(_COMPARISON_TABLES)
                    raise ValueError(f"Invalid table ({name!r}). Supported values are {choices}.")
                tx.register("incoming", frame)
                names = ", ".join(f'"{c}"' for c in frame.columns)
                tx.execute(
                    f"INSERT INTO {name} (comparison_id, {names}) SELECT ?, {names} FROM incoming",
                    [comparison_id],
                )
                tx.unregister("incoming")

    def fail_comparison(
        self, comparison_id: str, *, source_path: str, config: dict[str, Any], error: str
    ) -> None:
        """Record a comparison that failed (no metric rows)."""
        with self._transaction() as tx:
            tx.execute(
                """INSERT INTO comparisons (comparison_id, status, error, source_path, config_json,
                   created_at) VALUES (?, 'failed', ?, ?, ?, ?)""",
                [comparison_id, error, source_path, json.dumps(config), _now()],
            )

    def get_comparison(self, comparison_id: str) -> dict[str, Any]:
        """One ``comparisons`` row as a dict (JSON columns decoded, without the ``_json`` suffix)."""
        df = (
            self._con.cursor()
            .execute("SELECT * FROM comparisons WHERE comparison_id = ?", [comparison_id])
            .fetchdf()
        )
        if df.empty:
            raise StoreError(f"no comparison with id {comparison_id!r}", path=self.path, stage="store")
        return _decode_json_columns(df.iloc[0].to_dict())

    def list_comparisons(self) -> list[dict[str, Any]]:
        """Comparisons newest first, each with its variant labels (``labels``)."""
        sql = """SELECT c.*, (SELECT list(v.label ORDER BY v.variant_index) FROM comparison_variants v
                   WHERE v.comparison_id = c.comparison_id) AS labels
                 FROM comparisons c ORDER BY c.created_at DESC"""
        df = self._con.cursor().execute(sql).fetchdf()
        return [_decode_json_columns(r) for r in df.to_dict(orient="records")]

    def comparison_table(self, name: str, comparison_id: str) -> pd.DataFrame:
        """One comparison table's rows for a comparison (without comparison_id), in a stable order."""
        if name not in _COMPARISON_TABLES:
            choices = ", ".join(_COMPARISON_TABLES)
            raise ValueError(f"Invalid table ({name!r}). Supported values are {choices}.")
        order = {
            "comparison_variants": "variant_index",
            "comparison_metrics": "variant_index",
            "comparison_pairs": "variant_a, variant_b",
            "comparison_pair_frames": "variant_a, variant_b, frame_index",
            "comparison_luma": "variant_index, decoder, frame_index",
        }[name]
        sql = f"SELECT * EXCLUDE (comparison_id) FROM {name} WHERE comparison_id = ? ORDER BY {order}"
        return self._con.cursor().execute(sql, [comparison_id]).fetchdf()

    def delete_comparison(self, comparison_id: str) -> None:
        """Remove a comparison and its rows (its runs stay; delete them with ``delete_run``)."""
        self.get_comparison(comparison_id)
        with self._transaction() as tx:
            for name in _COMPARISON_TABLES:
                tx.execute(f"DELETE FROM {name} WHERE comparison_id = ?", [comparison_id])
            tx.execute("DELETE FROM comparisons WHERE comparison_id = ?", [comparison_id])

    # -- luma-bias analyses and fits (issue 5) ---------------------------------------------

    def insert_luma_analysis(self, row: dict[str, Any], tables: dict[str, pd.DataFrame]) -> str:
        """Insert a luma-bias analysis and its rows in one transaction; return its id.

        Parameters
        ----------
        row : ``luma_analyses`` columns other than analysis_id and created_at; values of
            ``*_json`` columns are Python objects (dumped here).
        tables : ``luma_frames`` / ``luma_slots`` / ``luma_gains`` → DataFrame whose columns are
            that table's columns minus analysis_id.
        """
        analysis_id = uuid.uuid4().hex[:12]
        values = {k: json.dumps(v) if k.endswith("_json") else v for k, v in row.items()}
        cols = ["analysis_id", *values, "created_at"]
        with self._transaction() as tx:
            tx.execute(
                f"INSERT INTO luma_analyses ({_quoted(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [analysis_id, *values.values(), _now()],
            )
            for name, frame in tables.items():
                _check_luma_table(name)
                tx.register("incoming_luma", frame)
                names = _quoted(frame.columns)
                tx.execute(
                    f"INSERT INTO {name} (analysis_id, {names}) SELECT ?, {names} FROM incoming_luma",
                    [analysis_id],
                )
                tx.unregister("incoming_luma")
        return analysis_id

    def luma_analysis(self, analysis_id: str) -> dict[str, Any]:
        """One ``luma_analyses`` row as a dict; ``x_json`` columns come back decoded as ``x``."""
        df = (
            self._con.cursor()
            .execute("SELECT * FROM luma_analyses WHERE analysis_id = ?", [analysis_id])
            .fetchdf()
        )
        if df.empty:
            raise StoreError(f"no luma-bias analysis with id {analysis_id!r}", path=self.path, stage="store")
        return _luma_row(df.iloc[0].to_dict())

    def list_luma_analyses(self) -> list[dict[str, Any]]:
        """Every luma-bias analysis, newest first (rows as :meth:`luma_analysis` returns them)."""
        df = self._con.cursor().execute("SELECT * FROM luma_analyses ORDER BY created_at DESC").fetchdf()
        return [_luma_row(r) for r in df.to_dict(orient="records")]

    def luma_table(self, name: str, analysis_id: str) -> pd.DataFrame:
        """One analysis's rows of a luma table (without analysis_id), ordered by reference and key."""
        _check_luma_table(name)
        order = {
            "luma_frames": "reference_label, frame_index",
            "luma_slots": "reference_label, slot, position",
            "luma_gains": "reference_label, slot",
        }[name]
        sql = f"SELECT * EXCLUDE (analysis_id) FROM {name} WHERE analysis_id = ? ORDER BY {order}"
        return self._con.cursor().execute(sql, [analysis_id]).fetchdf()

    def delete_luma_analysis(self, analysis_id: str) -> None:
        """Remove an analysis and its rows (fits that used it keep their coefficients)."""
        self.luma_analysis(analysis_id)
        with self._transaction() as tx:
            for name in _LUMA_TABLES:
                tx.execute(f"DELETE FROM {name} WHERE analysis_id = ?", [analysis_id])
            tx.execute("DELETE FROM luma_analyses WHERE analysis_id = ?", [analysis_id])

    def insert_luma_fit(self, row: dict[str, Any]) -> str:
        """Insert a fitted correction (``luma_fits`` columns but fit_id and created_at); return its id."""
        fit_id = uuid.uuid4().hex[:12]
        values = {k: json.dumps(v) if k.endswith("_json") else v for k, v in row.items()}
        cols = ["fit_id", *values, "created_at"]
        with self._transaction() as tx:
            tx.execute(
                f"INSERT INTO luma_fits ({_quoted(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [fit_id, *values.values(), _now()],
            )
        return fit_id

    def luma_fit(self, fit_id: str) -> dict[str, Any]:
        """One ``luma_fits`` row as a dict (``x_json`` decoded as ``x``)."""
        df = self._con.cursor().execute("SELECT * FROM luma_fits WHERE fit_id = ?", [fit_id]).fetchdf()
        if df.empty:
            raise StoreError(f"no luma-bias fit with id {fit_id!r}", path=self.path, stage="store")
        return _luma_row(df.iloc[0].to_dict())

    def list_luma_fits(self) -> list[dict[str, Any]]:
        """Every stored fit, newest first."""
        df = self._con.cursor().execute("SELECT * FROM luma_fits ORDER BY created_at DESC").fetchdf()
        return [_luma_row(r) for r in df.to_dict(orient="records")]


_LUMA_TABLES = ("luma_frames", "luma_slots", "luma_gains")


def _check_luma_table(name: str) -> None:
    if name not in _LUMA_TABLES:
        raise ValueError(f"Invalid table ({name!r}). Supported values are {', '.join(_LUMA_TABLES)}.")


def _quoted(columns: Any) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _luma_row(row: dict[str, Any]) -> dict[str, Any]:
    """A fetched luma row: ``x_json`` text → ``x``; NaN/NaT → None; timestamps as datetime."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, float) and np.isnan(value):
            value = None
        elif value is pd.NaT or value is None:
            value = None
        elif isinstance(value, pd.Timestamp):
            value = value.to_pydatetime()
        if key.endswith("_json"):
            out[key[: -len("_json")]] = json.loads(value) if isinstance(value, str) else value
        else:
            out[key] = value
    return out


_RUN_TABLES = ("frames", "groups", "readiness_steps", "tokens", "score_grids")
# A run table's rows: a DataFrame, or column name → (rows,) array.
RunTable = pd.DataFrame | Mapping[str, np.ndarray]
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
    ]


_COMPARISON_TABLES = (
    "comparison_variants",
    "comparison_metrics",
    "comparison_pairs",
    "comparison_pair_frames",
    "comparison_luma",
)


def _decode_json_columns(row: dict[str, Any]) -> dict[str, Any]:
    """``x_json`` text columns → ``x`` Python values; NaN/NaT → None."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, float) and np.isnan(value):
            value = None
        elif value is pd.NaT:
            value = None
        if key.endswith("_json"):
            out[key[: -len("_json")]] = json.loads(value) if isinstance(value, str) else value
        else:
            out[key] = value
    return out
