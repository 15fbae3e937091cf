"""Record → row code of the runs domain: a finished run's table columns and its runs-row summary."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from backend.records import TOKEN_COLUMNS, ReadinessStep

if TYPE_CHECKING:  # the store reads a RunResult's records; it never runs the pipeline
    from backend.pipeline import RunResult

_STEP_COLUMNS = tuple(f.name for f in dataclasses.fields(ReadinessStep))


def _column(values: list[Any]) -> np.ndarray:
    """A column from Python values, typed as pandas would (text as objects, not fixed-width)."""
    arr = np.array(values)
    return arr.astype(object) if arr.dtype.kind == "U" else arr


def run_columns(result: RunResult, *, score_grids: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """The run's rows for the store, column by column: table → column name → (rows,) array.

    Tables: frames, groups, readiness_steps (when the grouping traced any), tokens and,
    with ``score_grids``, the per-candidate score grids. Missing values are NaN (numeric
    columns) or None (text); the store writes both as NULL.
    """
    info, cand, dec = result.info, result.candidates, result.decoded
    total = info.total_frames
    npk = info.packet_size_bytes.size
    ids = cand.frame_indices
    inside = ids < total
    candidate = np.zeros(total, bool)
    candidate[ids[inside]] = True
    moved_from = np.full(total, np.nan)
    for src, dst in cand.moved:
        if dst < total:
            moved_from[dst] = src
    group_of = np.full(total, np.nan)
    is_anchor = np.zeros(total, bool)
    kept = np.zeros(total, np.int64)
    bad = np.full(total, None, object)
    pict = np.full(total, None, object)
    for row, fid in enumerate(ids.tolist()):  # a repeated frame keeps its last row's values
        if fid < total:
            pict[fid] = dec.pict_types[row]
            bad[fid] = result.quality.reasons[row] or None
    for spec in result.groups.specs:
        gids = ids[spec.start : spec.end]
        group_of[gids[gids < total]] = spec.group_index
    for sel in result.selection.groups:
        is_anchor[sel.frame_indices[0]] = True
        fids = np.asarray(sel.frame_indices)[sel.kept[:, 0]] if sel.kept.size else np.zeros(0, int)
        np.add.at(kept, fids, 1)
    pad = max(0, total - npk)
    frames = {
        "frame_index": np.arange(total),
        "pts_secs": np.concatenate([info.packet_pts_secs, np.full(pad, np.nan)])[:total],
        "pict_type": pict,
        "size_bytes": np.concatenate([info.packet_size_bytes, np.full(pad, -1)])[:total],
        "is_keyframe": np.concatenate([info.packet_is_keyframe, np.zeros(pad, bool)])[:total],
        "candidate": candidate,
        "moved_from": moved_from,
        "group_index": group_of,
        "is_anchor": is_anchor,
        "kept_blocks": kept,
        "bad_reason": bad,
    }
    sel_by = {s.group_index: s for s in result.selection.groups}
    specs = result.groups.specs
    groups = {
        "group_index": np.array([s.group_index for s in specs], np.int64),
        "start": np.array([s.start for s in specs], np.int64),
        "end": np.array([s.end for s in specs], np.int64),
        "frame_count": np.array([s.frame_count for s in specs], np.int64),
        "stop_reason": np.array([s.stop_reason for s in specs], object),
        "threshold": np.full(len(specs), result.groups.threshold, np.float64),
        "anchor_frame_index": np.array(
            [sel_by[s.group_index].frame_indices[0] if s.group_index in sel_by else np.nan for s in specs],
            np.float64,
        ),
        "kept_blocks": np.array(
            [sel_by[s.group_index].kept.shape[0] if s.group_index in sel_by else 0 for s in specs], np.int64
        ),
        "skipped": np.array([s.group_index not in sel_by for s in specs], bool),
        "readiness_json": np.array([json.dumps(s.readiness) for s in specs], object),
    }
    tok = np.ascontiguousarray(result.canvases.tokens.T)  # one contiguous row per column
    tokens = {name: tok[i] for i, name in enumerate(TOKEN_COLUMNS[:-1])}
    tokens["valid"] = tok[7].astype(bool)
    out = {"frames": frames, "groups": groups}
    trace = result.groups.trace
    if trace:
        out["readiness_steps"] = {name: _column([getattr(t, name) for t in trace]) for name in _STEP_COLUMNS}
    out["tokens"] = tokens
    if score_grids:
        grids = result.scores.grids
        out["score_grids"] = {
            "candidate_row": np.arange(len(grids)),
            "frame_index": ids,
            "grid_rows": np.array([g.shape[0] for g in grids], np.int64),
            "grid_cols": np.array([g.shape[1] for g in grids], np.int64),
            "grid": np.array([np.ascontiguousarray(g, np.float32).tobytes() for g in grids], object),
        }
    return out


def run_summary(result: RunResult, key: str | None, scores_run_id: str | None) -> dict[str, Any]:
    """The ``summary`` that :meth:`SessionStore.finish_run` writes into a finished run's runs row.

    Parameters
    ----------
    result : the finished run.
    key : its decode-cache key, or None.
    scores_run_id : the run whose score grids it reuses, or None when it stores its own.

    Returns
    -------
    threshold, timings, warnings, processed_hw, patch, block_size, cache_key, scores_run_id and,
    under a hard token budget, token_budget, tokens_used and stop_reason (else None); after a
    declared fallback, selector_requested and fallback_reason, and when another selector or option
    set ran, the ``selector``, ``profile`` and ``config`` that did (the row then reopens as it ran).
    """
    budget = result.selection.budget
    fallback = result.fallback
    ran: dict[str, Any] = {}
    if fallback is not None and fallback.fallback_reason is not None:
        from backend.selectors import selector_of

        ran = {
            "selector": selector_of(result.options),
            "profile": result.options.profile,
            "config": result.options.as_dict(),
        }
    return ran | {
        "selector_requested": fallback.selector_requested if fallback is not None else None,
        "selector_used": fallback.selector_used if fallback is not None else None,
        "fallback_reason": fallback.fallback_reason if fallback is not None else None,
        "fallback_detail": fallback.detail if fallback is not None else None,
        "token_budget": budget.token_budget if budget is not None else None,
        "tokens_used": budget.tokens_used if budget is not None else None,
        "stop_reason": budget.stop_reason if budget is not None else None,
        "scores_run_id": scores_run_id,
        "threshold": result.groups.threshold,
        "timings": result.timings_secs,
        "warnings": [w.as_dict() for w in result.warnings],
        "processed_hw": result.geometry.processed_hw,
        "patch": result.geometry.patch,
        "block_size": result.geometry.block_size,
        "cache_key": key,
    }
