"""Per-frame and per-block CSV tables of an export, with their schema versions and columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

from backend.export.config import ExportRun
from backend.imaging import upsample
from backend.pipeline import RunResult
from backend.render import anchor_rows, frame_facts, group_of_row, kept_blocks_by_row, lost_blocks

FRAMES_CSV_SCHEMA_VERSION = 1
BLOCKS_CSV_SCHEMA_VERSION = 1
FRAMES_CSV_COLUMNS: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "candidate_row",
    "frame_index",
    "pts_secs",
    "pict_type",
    "size_bytes",
    "group_index",
    "is_anchor",
    "bad_reason",
    "kept_blocks",
    "lost_blocks",
    "block_rows",
    "block_cols",
    "score_sum",
    "score_max",
    "time_secs",
)
BLOCKS_CSV_COLUMNS: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "candidate_row",
    "frame_index",
    "block_row",
    "block_col",
    "x_px",
    "y_px",
    "size_px",
    "score",
    "raw_mean",
    "kept",
    "kept_as",
    "lost",
)


def kept_as_grids(result: RunResult, rows: np.ndarray) -> dict[int, np.ndarray]:
    """Row → (block_rows, block_cols) object array of ``anchor`` / ``block`` / ``''``."""
    bh_n, bw_n = result.geometry.block_grid_hw
    kept = kept_blocks_by_row(result)
    anchors = anchor_rows(result)
    out: dict[int, np.ndarray] = {}
    for row in rows.tolist():
        grid = np.full((bh_n, bw_n), "", object)
        if row in anchors:
            grid[:] = "anchor"
        elif row in kept:
            k = kept[row]
            grid[k[:, 0], k[:, 1]] = "block"
        out[row] = grid
    return out


def _raw_block_means(result: RunResult, row: int) -> np.ndarray:
    """(block_rows, block_cols) float64 mean of the stretched raw signal per block (NaN without one)."""
    geo = result.geometry
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    raw = result.decoded.grids[row]
    if raw is None:
        return np.full((bh_n, bw_n), np.nan)
    stretched = upsample(np.asarray(raw, np.float32), geo.processed_hw)[: bh_n * f, : bw_n * f]
    return stretched.reshape(bh_n, f, bw_n, f).mean(axis=(1, 3), dtype=np.float64)


def frames_table(run: ExportRun, rows: np.ndarray) -> pd.DataFrame:
    """One row per exported candidate row, columns :data:`FRAMES_CSV_COLUMNS`."""
    result = run.result
    info = result.info
    bh_n, bw_n = result.geometry.block_grid_hw
    kept = kept_blocks_by_row(result)
    anchors = anchor_rows(result)
    records = []
    for row in rows.tolist():
        fid, secs, pict = frame_facts(result, row)
        in_stream = 0 <= fid < info.packet_pts_secs.size
        sel, _t = group_of_row(result, row)
        scores = result.scores.block_scores[row]
        records.append(
            {
                "schema_version": FRAMES_CSV_SCHEMA_VERSION,
                "run_id": run.run_id,
                "candidate_row": row,
                "frame_index": fid,
                "pts_secs": float(info.packet_pts_secs[fid]) if in_stream else None,
                "pict_type": pict,
                "size_bytes": int(info.packet_size_bytes[fid])
                if 0 <= fid < info.packet_size_bytes.size
                else None,
                "group_index": None if sel is None else sel.group_index,
                "is_anchor": row in anchors,
                "bad_reason": result.quality.reasons[row],
                "kept_blocks": int(kept[row].shape[0]) if row in kept else 0,
                "lost_blocks": int(lost_blocks(result, row).sum()),
                "block_rows": bh_n,
                "block_cols": bw_n,
                "score_sum": float(scores.sum(dtype=np.float64)),
                "score_max": float(scores.max()) if scores.size else 0.0,
                "time_secs": secs,
            }
        )
    frame = pd.DataFrame.from_records(records, columns=list(FRAMES_CSV_COLUMNS))
    frame["group_index"] = frame["group_index"].astype("Int64")
    frame["size_bytes"] = frame["size_bytes"].astype("Int64")
    return frame


def blocks_table(run: ExportRun, rows: np.ndarray) -> pd.DataFrame:
    """One row per block of each exported candidate row, columns :data:`BLOCKS_CSV_COLUMNS`."""
    result = run.result
    geo = result.geometry
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    nb = bh_n * bw_n
    block_row = np.repeat(np.arange(bh_n), bw_n)
    block_col = np.tile(np.arange(bw_n), bh_n)
    kept_as = kept_as_grids(result, rows)
    parts = []
    for row in rows.tolist():
        fid = int(result.candidates.frame_indices[row])
        roles = kept_as[row].ravel()
        parts.append(
            pd.DataFrame(
                {
                    "schema_version": np.full(nb, BLOCKS_CSV_SCHEMA_VERSION),
                    "run_id": run.run_id,
                    "candidate_row": np.full(nb, row),
                    "frame_index": np.full(nb, fid),
                    "block_row": block_row,
                    "block_col": block_col,
                    "x_px": block_col * f,
                    "y_px": block_row * f,
                    "size_px": np.full(nb, f),
                    "score": result.scores.block_scores[row].astype(np.float64),
                    "raw_mean": _raw_block_means(result, row).ravel(),
                    "kept": (roles != "").astype(np.int8),
                    "kept_as": roles,
                    "lost": lost_blocks(result, row).ravel().astype(np.int8),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)[list(BLOCKS_CSV_COLUMNS)]
