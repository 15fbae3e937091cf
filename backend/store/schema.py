"""The session database's schema: every table's DDL, the schema version and the migrations."""

from __future__ import annotations

from pathlib import Path

import duckdb

from backend.errors import StoreError
from backend.store.base import StoreBase
from backend.store.summary import AUDIT_SUMMARY_COLUMNS, FALLBACK_SUMMARY_COLUMNS

SCHEMA_VERSION = 7


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
    # Version 5 (issue 16, selectors): which selector made a run (earlier runs were all cvp's);
    # comparisons of selectors next to comparisons of codecs, with each run's coverage figures.
    5: [
        "ALTER TABLE runs ADD COLUMN selector VARCHAR DEFAULT 'cvp'",
        "ALTER TABLE comparisons ADD COLUMN kind VARCHAR DEFAULT 'codecs'",
        """CREATE TABLE comparison_coverage (
            comparison_id VARCHAR NOT NULL, variant_index INTEGER NOT NULL, selector VARCHAR,
            canvases INTEGER, tokens INTEGER, valid_tokens INTEGER, kept_blocks BIGINT, bin_secs DOUBLE,
            bins INTEGER, covered_bins INTEGER, temporal_coverage DOUBLE, longest_gap_secs DOUBLE,
            spatial_coverage DOUBLE)""",
    ],
    # -- datasets (issue 17): one step of new tables only, nothing else changed, so that it could
    # be renumbered as a whole (it was 5 on its branch; selectors took 5). ``datasets`` is one
    # batch output folder; ``dataset_videos`` its summary rows (the columns of batch.parquet,
    # backend.store.datasets.SUMMARY_COLUMNS), whose run_id joins the runs table.
    6: [
        """CREATE TABLE datasets (
            dataset_id VARCHAR PRIMARY KEY, out_dir VARCHAR NOT NULL, input_path VARCHAR, selector VARCHAR,
            preset VARCHAR, options_json JSON, engine VARCHAR, videos INTEGER, done INTEGER, failed INTEGER,
            skipped INTEGER, created_at TIMESTAMP, updated_at TIMESTAMP)""",
        """CREATE TABLE dataset_videos (
            dataset_id VARCHAR NOT NULL, path VARCHAR NOT NULL, rel_path VARCHAR, content_sha256 VARCHAR,
            status VARCHAR NOT NULL, error VARCHAR, selector VARCHAR, codec_name VARCHAR, width INTEGER,
            height INTEGER, duration_secs DOUBLE, total_frames INTEGER, frames INTEGER, "groups" INTEGER,
            canvases INTEGER, tokens INTEGER, valid_tokens INTEGER, temporal_coverage DOUBLE,
            warnings INTEGER, warning_codes VARCHAR, seconds DOUBLE, output_dir VARCHAR, options_key VARCHAR,
            run_id VARCHAR)""",
    ],
    # Version 7 (issue 29): each dataset video's coverage audit (backend.store.summary).
    # And each run's hard token budget (what it allowed, used, why it stopped) and declared fallback
    # (the selector asked for, why another ran; the selector column names the one that ran).
    7: [
        *(f"ALTER TABLE dataset_videos ADD COLUMN {name} {kind}" for name, kind in AUDIT_SUMMARY_COLUMNS),
        *(f"ALTER TABLE dataset_videos ADD COLUMN {name} {kind}" for name, kind in FALLBACK_SUMMARY_COLUMNS),
        "ALTER TABLE runs ADD COLUMN token_budget INTEGER",
        "ALTER TABLE runs ADD COLUMN tokens_used INTEGER",
        "ALTER TABLE runs ADD COLUMN stop_reason VARCHAR",
        "ALTER TABLE runs ADD COLUMN selector_requested VARCHAR",
        "ALTER TABLE runs ADD COLUMN selector_used VARCHAR",
        "ALTER TABLE runs ADD COLUMN fallback_reason VARCHAR",
        "ALTER TABLE runs ADD COLUMN fallback_detail VARCHAR",
    ],
}


def write_schema(cur: duckdb.DuckDBPyConnection, version: int) -> None:
    """Create every table as of schema ``version`` (v1, then each migration)."""
    for stmt in _SCHEMA_V1:
        cur.execute(stmt)
    cur.execute("INSERT INTO schema_version VALUES (1)")
    for v in range(2, version + 1):
        for stmt in _MIGRATIONS[v]:
            cur.execute(stmt)
        cur.execute("INSERT INTO schema_version VALUES (?)", [v])


class SchemaMixin(StoreBase):
    """Creating, checking and migrating the schema of a store's database."""

    def _tables(self) -> set[str]:
        sql = "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()"
        rows = self._cursor().execute(sql).fetchall()
        return {r[0] for r in rows}

    def schema_version(self) -> int:
        row = self._cursor().execute("SELECT max(version) FROM schema_version").fetchone()
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

    def _create(self, version: int) -> None:
        cur = self._cursor()
        cur.execute("BEGIN TRANSACTION")
        write_schema(cur, version)
        cur.execute("COMMIT")

    def migrate(self, from_version: int) -> None:
        """Apply every migration after ``from_version`` in one transaction."""
        cur = self._cursor()
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
            write_schema(con.cursor(), version)
        finally:
            con.close()
