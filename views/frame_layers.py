"""Frame viewer layers: score heatmap, grids, kept/lost blocks, anchor badge, bad frames, block picking."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from backend.pipeline import RunResult
from backend.records import GroupSelection
from backend.score import upsample
from views.run_summary import ANCHOR_RGB, KEPT_RGB, anchor_rows, kept_blocks_by_row

COLORMAPS: dict[str, int] = {
    "turbo": cv2.COLORMAP_TURBO,
    "viridis": cv2.COLORMAP_VIRIDIS,
    "magma": cv2.COLORMAP_MAGMA,
    "jet": cv2.COLORMAP_JET,
    "inferno": cv2.COLORMAP_INFERNO,
}
SCALES: tuple[str, ...] = ("frame", "video")

LOST_RGB = (255, 220, 0)
PATCH_GRID_RGB = (160, 160, 160)
BLOCK_GRID_RGB = (255, 255, 255)
CODEC_GRID_RGB = (255, 0, 255)
BAD_TINT_RGB = (255, 0, 0)
BAD_TINT_ALPHA = 0.35
KEPT_BORDER_PX = 2
ANCHOR_BORDER_PX = 4

LOST_FRACTION = 0.9
"""A block is *lost* when it was a selection candidate (a good, non-anchor frame of a
processed group), was not kept, and its block score is ≥ ``LOST_FRACTION · cutoff_score``
of its group, where ``cutoff_score`` is the lowest kept score. These are the blocks that
scored close to the winners but did not fit the budget. Groups that kept nothing
(``cutoff_score = −inf``) have no lost blocks."""

# Codec coding-unit size in original-frame pixels: H.264/MPEG macroblocks are 16 px;
# HEVC CTUs and VP9/AV1 superblocks are 64 px by default in the encoders we ship with.
CODEC_CELL_PX: dict[str, int] = {
    "h264": 16,
    "mpeg2video": 16,
    "mpeg4": 16,
    "hevc": 64,
    "vp9": 64,
    "av1": 64,
}


@dataclass(frozen=True, kw_only=True)
class LayerOptions:
    """Which overlays the frame viewer draws, and how."""

    heatmap: bool = False
    """Blend the score map over the frame."""
    opacity: float = 0.5
    """Heatmap weight in [0, 1]; 0 shows the plain frame."""
    colormap: str = "turbo"
    """One of :data:`COLORMAPS`."""
    scale: str = "frame"
    """``frame``: the stored per-frame normalised map; ``video``: the raw signal (log1p) divided
    by its maximum over all candidate frames, so frames are comparable to each other."""
    patch_grid: bool = False
    block_grid: bool = False
    codec_grid: bool = False
    """Macroblock (16 px) or CTU/superblock (64 px) grid, scaled from original to processed size."""
    kept: bool = True
    """Outline kept blocks."""
    lost: bool = False
    """Outline blocks that scored high but lost to the budget (see :data:`LOST_FRACTION`)."""
    anchor_badge: bool = True
    bad_frames: bool = True
    """Tint and label frames the quality stage marked bad."""

    def __post_init__(self) -> None:
        if not isinstance(self.opacity, (int, float)) or not 0.0 <= float(self.opacity) <= 1.0:
            raise ValueError(f"Invalid opacity ({self.opacity!r}). Supported values are 0.0 to 1.0.")
        if self.colormap not in COLORMAPS:
            raise ValueError(
                f"Invalid colormap ({self.colormap!r}). Supported values are {', '.join(COLORMAPS)}."
            )
        if self.scale not in SCALES:
            raise ValueError(f"Invalid scale ({self.scale!r}). Supported values are {', '.join(SCALES)}.")


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


def _check_row(result: RunResult, row: int) -> None:
    n = int(result.candidates.frame_indices.size)
    if not 0 <= row < n:
        raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}.")


def _group_of_row(result: RunResult, row: int) -> tuple[GroupSelection | None, int | None]:
    """The selection holding candidate ``row`` and its group position t (after the anchor swap)."""
    for sel in result.selection.groups:
        if sel.start <= row < sel.end:
            t = int(np.flatnonzero(sel.candidate_rows() == row)[0])
            return sel, t
    return None, None


def _spec_group_index(result: RunResult, row: int) -> int | None:
    # Skipped groups (parity) still have a spec, so the info panel can name them.
    for spec in result.groups.specs:
        if spec.start <= row < spec.end:
            return spec.group_index
    return None


def _video_log_max(result: RunResult) -> float:
    """Largest log1p(raw signal) over all candidate frames (the ``video`` scale's 1.0)."""
    tops = [float(np.log1p(max(float(np.max(g)), 0.0))) for g in result.decoded.grids if g is not None]
    return max(tops, default=0.0)


def _video_raw_max(result: RunResult) -> float:
    return max((float(np.max(g)) for g in result.decoded.grids if g is not None), default=0.0)


def score_map(result: RunResult, row: int, *, scale: str = "frame") -> np.ndarray:
    """The score map of a candidate frame at the processed size.

    Parameters
    ----------
    result : a finished run.
    row : candidate row, 0 ≤ row < n.
    scale : ``frame`` (stored per-frame normalised grid) or ``video`` (raw grid, log1p,
        divided by the run's maximum).

    Returns
    -------
    (H, W) float32 in [0, 1].
    """
    _check_row(result, row)
    if scale not in SCALES:
        raise ValueError(f"Invalid scale ({scale!r}). Supported values are {', '.join(SCALES)}.")
    hw = result.geometry.processed_hw
    raw = result.decoded.grids[row]
    if scale == "frame" or raw is None:
        return upsample(result.scores.grids[row], hw)
    # The stored grids are each normalised to their own percentile, so all frames peak at
    # 1.0; comparing frames needs the raw signal against one run-wide maximum.
    top = max(_video_log_max(result), 1e-6)
    grid = np.log1p(np.maximum(np.asarray(raw, np.float32), 0)) / np.float32(top)
    return upsample(grid.astype(np.float32), hw)


@functools.lru_cache(maxsize=64)
def _legend(colormap: str, low_label: str, high_label: str) -> np.ndarray:
    bar = cv2.applyColorMap(np.arange(256, dtype=np.uint8).reshape(1, 256), COLORMAPS[colormap])
    image = np.full((40, 256, 3), 255, np.uint8)
    image[:18] = cv2.cvtColor(bar, cv2.COLOR_BGR2RGB)
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(image, low_label, (2, 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    (w, _), _ = cv2.getTextSize(high_label, font, 0.4, 1)
    cv2.putText(image, high_label, (254 - w, 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    image.setflags(write=False)
    return image


def _legend_stops(
    colormap: str, high_value: float, *, log: bool
) -> tuple[tuple[float, tuple[int, int, int]], ...]:
    levels = np.linspace(0, 255, 5).astype(np.uint8).reshape(1, 5)
    rgb = cv2.cvtColor(cv2.applyColorMap(levels, COLORMAPS[colormap]), cv2.COLOR_BGR2RGB)[0]
    fractions = np.linspace(0.0, 1.0, 5)
    # The video scale colours log1p(raw) / log1p(max), so its stops are raw values on that curve.
    values = np.expm1(fractions * np.log1p(high_value)) if log else fractions * high_value
    return tuple((float(v), (int(c[0]), int(c[1]), int(c[2]))) for v, c in zip(values, rgb, strict=True))


def _outline_blocks(
    image: np.ndarray, block_rc: np.ndarray, block_px: int, border_px: int, rgb: tuple[int, int, int]
) -> None:
    """Draw a ``border_px`` outline around each (block_row, block_col) of ``block_rc`` (m, 2), in place."""
    if block_rc.size == 0:
        return
    bh_n, bw_n = image.shape[0] // block_px, image.shape[1] // block_px
    s0, s1, s2 = image.strides
    # A (block_rows, f, block_cols, f, 3) view of the frame: four fancy-indexed writes draw every
    # outline at once, with no per-block Python loop and no full-frame mask.
    v = np.lib.stride_tricks.as_strided(
        image, (bh_n, block_px, bw_n, block_px, 3), (block_px * s0, s0, block_px * s1, s1, s2)
    )
    br, bc = block_rc[:, 0], block_rc[:, 1]
    colour = np.asarray(rgb, np.uint8)
    v[br, :border_px, bc] = colour
    v[br, block_px - border_px :, bc] = colour
    v[br, :, bc, :border_px] = colour
    v[br, :, bc, block_px - border_px :] = colour


def lost_blocks(result: RunResult, row: int) -> np.ndarray:
    """Blocks of a candidate frame that scored high but lost to the budget.

    Parameters
    ----------
    result : a finished run.
    row : candidate row.

    Returns
    -------
    (block_rows, block_cols) bool mask; see :data:`LOST_FRACTION` for the definition.
    """
    _check_row(result, row)
    bh_n, bw_n = result.geometry.block_grid_hw
    mask = np.zeros((bh_n, bw_n), bool)
    sel, t = _group_of_row(result, row)
    if sel is None or t == 0 or not result.quality.good[row] or not np.isfinite(sel.cutoff_score):
        return mask
    scores = result.scores.block_scores[row].reshape(bh_n, bw_n)
    mask = scores >= np.float32(LOST_FRACTION * sel.cutoff_score)
    kept = sel.kept[sel.kept[:, 0] == t]
    mask[kept[:, 1], kept[:, 2]] = False
    return mask


def _codec_cell_px(result: RunResult) -> tuple[float, float]:
    """Codec cell (height, width) in processed pixels."""
    cell = CODEC_CELL_PX.get(result.info.codec_name, 16)
    (oh, ow), (ph, pw) = result.geometry.orig_hw, result.geometry.processed_hw
    return cell * ph / oh, cell * pw / ow


def codec_grid_lines(result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """Pixel rows and columns of the codec grid lines on the processed frame.

    Returns
    -------
    ys : (a,) int, rows ``round(k · cell_h)`` for k ≥ 1 inside the frame.
    xs : (b,) int, columns ``round(k · cell_w)``.
    """
    cell_h, cell_w = _codec_cell_px(result)
    h, w = result.geometry.processed_hw
    ys = np.round(np.arange(1, int(h / cell_h) + 1) * cell_h).astype(int)
    xs = np.round(np.arange(1, int(w / cell_w) + 1) * cell_w).astype(int)
    return ys[ys < h], xs[xs < w]


def _info(result: RunResult, row: int, kept_count: int) -> dict[str, Any]:
    info = result.info
    fid = int(result.candidates.frame_indices[row])
    in_packets = 0 <= fid < info.packet_size_bytes.size
    moved_from = next((a for a, b in result.candidates.moved if b == fid), None)
    reason = result.quality.reasons[row]
    # Packets are in presentation order, so frame_index indexes them when P == frame count.
    pts_secs = float(info.packet_pts_secs[fid]) if in_packets else (fid / info.fps if info.fps else None)
    return {
        "frame_index": fid,
        "pts_secs": pts_secs,
        "pict_type": result.decoded.pict_types[row],
        "size_bytes": int(info.packet_size_bytes[fid]) if in_packets else None,
        "candidate_row": row,
        "moved_from": None if moved_from is None else int(moved_from),
        "group_index": _spec_group_index(result, row),
        "is_anchor": row in anchor_rows(result),
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
    info-panel dict (frame_index, pts_secs, pict_type, size_bytes, candidate_row, moved_from,
    group_index, is_anchor, kept_blocks, bad_reason).
    """
    _check_row(result, row)
    opts = options or LayerOptions()
    geo = result.geometry
    h = geo.processed_hw[0]
    f = geo.patch * geo.block_size
    frame = result.decoded.pixels[row]
    legend: np.ndarray | None = None
    stops: tuple[tuple[float, tuple[int, int, int]], ...] = ()
    if opts.heatmap:
        smap = score_map(result, row, scale=opts.scale)
        levels = cv2.convertScaleAbs(smap, alpha=255.0)  # rounds and saturates in one pass
        colour = cv2.cvtColor(cv2.applyColorMap(levels, COLORMAPS[opts.colormap]), cv2.COLOR_BGR2RGB)
        image = cv2.addWeighted(colour, float(opts.opacity), frame, 1.0 - float(opts.opacity), 0.0)
        if opts.scale == "video":
            high = _video_raw_max(result)
            legend = _legend(opts.colormap, "0", f"{high:g} (video max, log)")
        else:
            high = 1.0
            legend = _legend(opts.colormap, "0", "1 (frame p99)")
        stops = _legend_stops(opts.colormap, high, log=opts.scale == "video")
    else:
        image = frame.copy()
    bad = not bool(result.quality.good[row])
    if opts.bad_frames and bad:
        tint = np.empty_like(image)
        tint[:] = BAD_TINT_RGB
        image = cv2.addWeighted(tint, BAD_TINT_ALPHA, image, 1.0 - BAD_TINT_ALPHA, 0.0)
    # Grid lines are plain slice assignments: one strided write per grid, no per-pixel loop.
    if opts.patch_grid:
        image[:: geo.patch], image[:, :: geo.patch] = PATCH_GRID_RGB, PATCH_GRID_RGB
    if opts.block_grid:
        image[::f], image[:, ::f] = BLOCK_GRID_RGB, BLOCK_GRID_RGB
    if opts.codec_grid:
        ys, xs = codec_grid_lines(result)
        image[ys], image[:, xs] = CODEC_GRID_RGB, CODEC_GRID_RGB
    kept = kept_blocks_by_row(result).get(row, [])
    if opts.lost:
        _outline_blocks(image, np.argwhere(lost_blocks(result, row)), f, KEPT_BORDER_PX, LOST_RGB)
    if opts.kept and kept:
        _outline_blocks(image, np.asarray(kept, dtype=np.int64), f, KEPT_BORDER_PX, KEPT_RGB)
    info = _info(result, row, len(kept))
    if opts.anchor_badge and info["is_anchor"]:
        b = ANCHOR_BORDER_PX
        image[:b], image[-b:], image[:, :b], image[:, -b:] = ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB
        cv2.rectangle(image, (b, b), (b + 62, b + 16), ANCHOR_RGB, thickness=-1)
        cv2.putText(
            image, "ANCHOR", (b + 3, b + 12), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1, cv2.LINE_AA
        )
    if opts.bad_frames and bad:
        label = f"BAD: {info['bad_reason'] or 'bad'}"
        cv2.putText(image, label, (8, h - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2, cv2.LINE_AA)
    return FrameLayers(image=image, legend=legend, legend_stops=stops, info=info)


def _raw_cells(result: RunResult, row: int, y0: int, y1: int, x0: int, x1: int) -> list[tuple[int, int]]:
    """Raw-grid cells (grid_row, grid_col) whose nearest-neighbour stretch covers the pixel box."""
    grid = result.decoded.grids[row]
    assert grid is not None
    gh, gw = grid.shape
    h, w = result.geometry.processed_hw
    # Resize index ramps with the same call as backend.score.upsample, so the mapping matches
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
    None); and ``canvas_index``, ``packed_row``, ``packed_col`` (canvas patch position of the
    block's top-left patch, None when not kept).
    """
    _check_row(result, row)
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
    sel, t = _group_of_row(result, row)
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


def _anchor_canvases(result: RunResult, group_index: int) -> np.ndarray:
    """Canvas index of the group's anchor canvas (its first canvas), as a (1,) array."""
    idx = np.flatnonzero(result.canvases.canvas_group_index == group_index)
    return idx[:1]
