"""Frame viewer layers: score heatmap, grids, kept/lost blocks, anchor badge, bad frames, block picking."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from backend.pipeline import RunResult

# The drawing core lives in the backend so exports can use it; these names stay importable here.
from backend.render import (
    ANCHOR_BORDER_PX,
    ANCHOR_RGB,
    BAD_TINT_ALPHA,
    BAD_TINT_RGB,
    BLOCK_GRID_RGB,
    CODEC_CELL_PX,
    CODEC_GRID_RGB,
    COLORMAPS,
    KEPT_BORDER_PX,
    KEPT_RGB,
    LOST_FRACTION,
    LOST_RGB,
    PATCH_GRID_RGB,
    SCALES,
    LayerOptions,
    OverlayPlan,
    cached_plan,
    check_row,
    codec_grid_lines,
    draw_frame,
    frame_facts,
    group_of_row,
    lost_blocks,
    score_map,
)

__all__ = [
    "ANCHOR_BORDER_PX",
    "ANCHOR_RGB",
    "BAD_TINT_ALPHA",
    "BAD_TINT_RGB",
    "BLOCK_GRID_RGB",
    "CODEC_CELL_PX",
    "CODEC_GRID_RGB",
    "COLORMAPS",
    "KEPT_BORDER_PX",
    "KEPT_RGB",
    "LOST_FRACTION",
    "LOST_RGB",
    "PATCH_GRID_RGB",
    "SCALES",
    "FrameLayers",
    "LayerOptions",
    "block_at",
    "codec_grid_lines",
    "frame_info",
    "lost_blocks",
    "prepare_frame_layers",
    "score_map",
]


@dataclass(frozen=True)
class FrameLayers:
    """One rendered candidate frame with its legend and info-panel fields."""

    image: np.ndarray
    """(H, W, 3) uint8 RGB at the processed size, overlays drawn in."""
    legend: np.ndarray | None
    """(40, 256, 3) uint8 RGB colour bar with min/max labels; None when the heatmap is off."""
    legend_stops: tuple[tuple[float, tuple[int, int, int]], ...]
    """(value, rgb) stops of the colour bar (empty when the heatmap is off)."""
    info: dict[str, Any]


def _spec_group_index(result: RunResult, row: int) -> int | None:
    # Skipped groups (parity) still have a spec, so the info panel can name them.
    for spec in result.groups.specs:
        if spec.start <= row < spec.end:
            return spec.group_index
    return None


def _info(result: RunResult, row: int, kept_count: int, is_anchor: bool) -> dict[str, Any]:
    info = result.info
    fid, time_secs, pict = frame_facts(result, row)
    in_packets = 0 <= fid < info.packet_size_bytes.size
    moved_from = next((a for a, b in result.candidates.moved if b == fid), None)
    reason = result.quality.reasons[row]
    return {
        "frame_index": fid,
        "time_secs": time_secs,
        "pict_type": pict,
        "size_bytes": int(info.packet_size_bytes[fid]) if in_packets else None,
        "candidate_row": row,
        "moved_from": None if moved_from is None else int(moved_from),
        "group_index": _spec_group_index(result, row),
        "is_anchor": is_anchor,
        "kept_blocks": kept_count,
        "bad_reason": reason or None,
    }


def prepare_frame_layers(result: RunResult, row: int, options: LayerOptions | None = None) -> FrameLayers:
    """Render a candidate frame with the chosen layers.

    Parameters
    ----------
    result : a finished run.
    row : candidate row, 0 ≤ row < n.
    options : layers to draw (defaults: kept outlines, anchor badge, bad frames).

    Returns
    -------
    FrameLayers with ``image`` (H, W, 3) uint8 RGB, a legend when the heatmap is on, and the
    info-panel dict (frame_index, time_secs (seconds from the first frame), pict_type, size_bytes,
    candidate_row, moved_from, group_index, is_anchor, kept_blocks, bad_reason).
    """
    check_row(result, row)
    plan = cached_plan(result, options or LayerOptions())
    image = draw_frame(result, row, plan)
    return FrameLayers(
        image=image, legend=plan.legend, legend_stops=plan.legend_stops, info=_plan_info(result, row, plan)
    )


def frame_info(result: RunResult, row: int, options: LayerOptions | None = None) -> dict[str, Any]:
    """The info-panel dict of :func:`prepare_frame_layers` without drawing the frame (the info
    line route answers every step, and a frame copy cost it up to 1 ms)."""
    check_row(result, row)
    return _plan_info(result, row, cached_plan(result, options or LayerOptions()))


def _plan_info(result: RunResult, row: int, plan: OverlayPlan) -> dict[str, Any]:
    kept = plan.kept.get(row)
    return _info(result, row, 0 if kept is None else int(kept.shape[0]), row in plan.anchors)


def _raw_cells(result: RunResult, row: int, y0: int, y1: int, x0: int, x1: int) -> list[tuple[int, int]]:
    """Raw-grid cells (grid_row, grid_col) whose nearest-neighbour stretch covers the pixel box."""
    grid = result.decoded.grids[row]
    assert grid is not None
    gh, gw = grid.shape
    h, w = result.geometry.processed_hw
    # Resize index ramps with the same call as backend.imaging.upsample, so the mapping matches
    # exactly; INTER_NEAREST is separable, so rows and columns can be mapped independently.
    row_of_y = cv2.resize(
        np.arange(gh, dtype=np.float32).reshape(gh, 1), (1, h), interpolation=cv2.INTER_NEAREST
    )
    col_of_x = cv2.resize(
        np.arange(gw, dtype=np.float32).reshape(1, gw), (w, 1), interpolation=cv2.INTER_NEAREST
    )
    rows = np.unique(row_of_y[y0:y1, 0].astype(int))
    cols = np.unique(col_of_x[0, x0:x1].astype(int))
    return [(int(r), int(c)) for r in rows for c in cols]


def block_at(result: RunResult, row: int, x: int, y: int) -> dict[str, Any]:
    """What the viewer knows about the block under processed-frame pixel (x, y).

    Parameters
    ----------
    result : a finished run.
    row : candidate row.
    x, y : pixel column and row on the processed frame (0 ≤ x < W, 0 ≤ y < H).

    Returns
    -------
    dict with ``block_row``, ``block_col``; ``bitcost`` (list of the raw grid values under the
    block, None when the frame has no grid) and ``bitcost_cells`` (their (grid_row, grid_col));
    ``score`` (block score); ``rank`` (1 = best among the group's candidate blocks, None for
    the anchor or frames that are not candidates); ``kept`` (True when the block's pixels are in
    a canvas, which holds for every block of an anchor); ``kept_as`` (``anchor``, ``block`` or
    None); ``canvas_index``, ``packed_row``, ``packed_col`` (canvas patch position of the
    block's top-left patch, None when not kept); ``group_index`` (the group holding the row, None
    outside every group), ``budget`` (the group's K, None without a selection), ``candidates``
    (blocks the group ranked), ``box`` (x, y, width, height of the block in processed pixels),
    ``cell_px`` (side of one raw-grid cell in source pixels) and ``decision`` (in words).
    """
    check_row(result, row)
    geo = result.geometry
    h, w = geo.processed_hw
    f = geo.patch * geo.block_size
    bh_n, bw_n = geo.block_grid_hw
    if not (0 <= x < bw_n * f and 0 <= y < bh_n * f):
        raise ValueError(
            f"Invalid pixel ({x}, {y}). Supported values are x 0 to {bw_n * f - 1}, y 0 to {bh_n * f - 1}."
        )
    block_row, block_col = int(y // f), int(x // f)
    y0, x0 = block_row * f, block_col * f
    flat = block_row * bw_n + block_col
    score = float(result.scores.block_scores[row, flat])
    grid = result.decoded.grids[row]
    cells = _raw_cells(result, row, y0, min(y0 + f, h), x0, min(x0 + f, w)) if grid is not None else None
    bitcost = [float(grid[r, c]) for r, c in cells] if grid is not None and cells is not None else None
    sel, t = group_of_row(result, row)
    rank: int | None = None
    kept_as: str | None = None
    if sel is not None and t is not None:
        if t == 0:
            kept_as = "anchor"
        else:
            rows = sel.candidate_rows()
            cand_rows = [int(rows[i]) for i in range(1, rows.size) if result.quality.good[rows[i]]]
            if row in cand_rows:
                cand = result.scores.block_scores[cand_rows].ravel()
                rank = int(np.count_nonzero(cand > np.float32(score))) + 1
            hit = (sel.kept[:, 0] == t) & (sel.kept[:, 1] == block_row) & (sel.kept[:, 2] == block_col)
            kept_as = "block" if bool(hit.any()) else None
    canvas_index = packed_row = packed_col = None
    if kept_as is not None and sel is not None:
        fid = int(result.candidates.frame_indices[row])
        tok = result.canvases.tokens
        b = geo.block_size
        # An anchor fills canvas 0 of its group; a kept block fills one slot of the others.
        match = (
            (tok[:, 0] == fid)
            & (tok[:, 1] == block_row * b)
            & (tok[:, 2] == block_col * b)
            & (tok[:, 6] == sel.group_index)
            & (tok[:, 7] == 1)
        )
        hits = np.flatnonzero(match)
        if kept_as == "block":
            hits = hits[~np.isin(tok[hits, 3], _anchor_canvases(result, sel.group_index))]
        if hits.size:
            canvas_index, packed_row, packed_col = (int(v) for v in tok[hits[0], 3:6])
    return {
        "block_row": block_row,
        "block_col": block_col,
        "box": (x0, y0, min(f, w - x0), min(f, h - y0)),
        "group_index": _spec_group_index(result, row),
        "budget": None if sel is None else int(sel.budget),
        "candidates": None if sel is None else int(sel.candidate_count),
        "cell_px": None if grid is None else result.geometry.orig_hw[1] / grid.shape[1],
        "decision": _decision(result, row, sel, t, rank, kept_as, canvas_index),
        "bitcost": bitcost,
        "bitcost_cells": cells,
        "score": score,
        "rank": rank,
        "kept": kept_as is not None,
        "kept_as": kept_as,
        "canvas_index": canvas_index,
        "packed_row": packed_row,
        "packed_col": packed_col,
    }


def _decision(
    result: RunResult,
    row: int,
    sel: Any,
    t: int | None,
    rank: int | None,
    kept_as: str | None,
    canvas_index: int | None,
) -> str:
    """Why the block was kept or not, in words ("kept: rank 12 ≤ K=40", "anchor frame", …)."""
    if sel is None:
        group = _spec_group_index(result, row)
        if group is not None and group in result.selection.skipped_group_indices:
            return f"not a candidate: group {group} was skipped (no selection made from it)"
        return "not a candidate: the frame is in no selected group"
    if t == 0:
        where = "" if canvas_index is None else f" (canvas {canvas_index})"
        return f"anchor frame: kept whole{where}"
    if not bool(result.quality.good[row]):
        return f"not a candidate: bad frame ({result.quality.reasons[row] or 'bad'})"
    k = int(sel.budget)
    if rank is None:
        return "not a candidate"
    if kept_as == "block":
        return f"kept: rank {rank} ≤ K={k}" if rank <= k else f"kept: rank {rank} (tie at the cut-off), K={k}"
    if rank > k:
        return f"lost: rank {rank} > K={k}"
    return f"lost: rank {rank} ≤ K={k}, a tie at the cut-off went to another block"


def _anchor_canvases(result: RunResult, group_index: int) -> np.ndarray:
    """Canvas index of the group's anchor canvas (its first canvas), as a (1,) array."""
    idx = np.flatnonzero(result.canvases.canvas_group_index == group_index)
    return idx[:1]
