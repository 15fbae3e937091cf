"""Block and pixel readout of the frame viewer: what the block under the cursor is, as a small table."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from backend.pipeline import RunResult
from backend.selectors import selector_of
from backend.selectors.onevision import valid_patches
from views.inspector.frame_layers import block_at

SIGNAL_UNITS: dict[str, str] = {
    "mv": "px/frame of motion",
    "residual": "luma levels |Y − prediction|",
    "qp": "QP_max − QP",
    "mvres": "fused motion+residual, 0–1",
    "pkt_energy": "log packet bytes above neighbours",
}
"""Unit of each non-bitcost signal's raw cells (docs/signals.md)."""


def signal_unit(result: RunResult, cell_px: float | None) -> str:
    """The unit of the run's raw signal cells, e.g. ``bits per 16×16 px cell``."""
    key = result.decoded.grid_key
    if key in SIGNAL_UNITS:
        return SIGNAL_UNITS[key]
    size = "" if cell_px is None else f" per {cell_px:.0f}×{cell_px:.0f} px cell"
    return f"bits{size}" if "bit" in key or key == "bitcost" else f"{key}{size}"


def heat_unit(result: RunResult, *, per_px: bool = False) -> str:
    """The unit of the run's raw heatmap signal: per grid cell (``bits per 16×16 px cell``), or,
    with ``per_px``, per pixel as the compare tab's ``all`` scale divides it (``bits/px``). The
    signals other than bitcost are per-pixel means already (:data:`SIGNAL_UNITS`)."""
    key = result.decoded.grid_key
    if key in SIGNAL_UNITS:
        return SIGNAL_UNITS[key]
    bits = "bit" in key or key == "bitcost"
    if per_px:
        return "bits/px" if bits else f"{key} per px"
    grid = next((g for g in result.decoded.grids if g is not None), None)
    return signal_unit(result, None if grid is None else result.geometry.orig_hw[1] / grid.shape[1])


def _cells_table(block: dict[str, Any]) -> str:
    """The raw grid values under the block, laid out as they sit on the frame."""
    cells, values = block["bitcost_cells"], block["bitcost"]
    if not cells or values is None:
        return "<i>no signal grid for this frame</i>"
    rows = sorted({r for r, _ in cells})
    cols = sorted({c for _, c in cells})
    value = {rc: v for rc, v in zip(cells, values, strict=True)}
    body = "".join("<tr>" + "".join(f"<td>{value[(r, c)]:.4g}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<table class="lens-cells">{body}</table>'


def _rank_words(rank: int, k: int, kept: bool) -> str:
    """The decision of a ranked block in words, against the budget K it was ranked for."""
    if kept:
        return f"kept: rank {rank} ≤ K={k}" if rank <= k else f"kept: rank {rank} (tie at the cut-off), K={k}"
    if rank > k:
        return f"lost: rank {rank} > K={k}"
    return f"lost: rank {rank} ≤ K={k}, a tie at the cut-off went to another patch"


def pooled_rank(result: RunResult, row: int, block: dict[str, Any]) -> dict[str, Any] | None:
    """Rank, pool and budget of a block for onevision, which ranks one pool over many frames.

    onevision keeps frame 0 whole and fills its other canvases with one top-K over every valid
    patch (off the letterbox bars) of frames 1… (``global``: K = (canvases − 1) · patches per
    canvas), or with the best canvas-full of each stretch of time (``time_bucket``); bad frames
    are ranked too. :func:`block_at` ranks within a cvp group of good frames, which misdescribes
    that budget (a rank above the pool size, a bad frame called "not a candidate").

    Returns
    -------
    None for other selectors and for frame 0; else ``rank`` (None on the bars), ``pool`` (the
    patches it was ranked among, in words), ``budget`` (K, in words) and ``decision``.
    """
    if selector_of(result.options) != "onevision" or row == 0 or not result.selection.groups:
        return None
    geo = result.geometry
    valid = valid_patches(geo)
    s_total, n = valid.size, int(result.candidates.frame_indices.size)
    k_all = int(result.selection.groups[0].budget)
    if not valid[block["block_row"], block["block_col"]]:
        return {
            "rank": None,
            "pool": "–",
            "budget": f"K={k_all} over candidates 1–{n - 1}",
            "decision": "not a candidate: on the letterbox bars (outside the picture)",
        }
    frames = np.arange(1, n)
    budget, where = k_all, f"over candidates 1–{n - 1}"
    if getattr(result.options, "topk_mode", "global") == "time_bucket":
        count = result.options.time_bucket_count
        count = max(1, min(count if count > 0 else result.options.num_images - 1, n - 1))
        frames = next(b for b in np.array_split(np.arange(1, n), count) if b[0] <= row <= b[-1])
        budget = min(s_total, int(frames.size) * int(valid.sum()))
        where = f"in the time bucket of candidates {frames[0]}–{frames[-1]}"
    pool = result.scores.block_scores[frames][:, valid.ravel()]
    rank = int(np.count_nonzero(pool > np.float32(block["score"]))) + 1
    kept = block["kept_as"] == "block"
    uniform = result.groups.specs[0].readiness.get("static_uniform_frames") or []
    if kept and row in uniform:
        decision = "kept: a uniform frame of the static fallback (before the top-K)"
    else:
        decision = _rank_words(rank, budget, kept)
    return {
        "rank": rank,
        "pool": f"{pool.size} valid patches {where}",
        "budget": f"K={budget} {where}",
        "decision": decision,
    }


def block_readout_html(result: RunResult, row: int, x: int, y: int) -> tuple[str, dict[str, Any]]:
    """The readout of the block under processed pixel (x, y) of candidate ``row``.

    Returns
    -------
    (html, block) : an HTML table (signal cells with their unit, block score, rank in the group,
    the group's budget K and the decision in words) and :func:`block_at`'s dict.
    """
    b = block_at(result, row, x, y)
    unit = signal_unit(result, b["cell_px"])
    group = "–" if b["group_index"] is None else str(b["group_index"])
    rank = "–" if b["rank"] is None else f"{b['rank']} of {b['candidates']}"
    budget = "K=–" if b["budget"] is None else f"K={b['budget']}"
    rank_label = "rank in group"
    pooled = pooled_rank(result, row, b)
    if pooled is not None:
        rank_label = "rank"
        rank = "–" if pooled["rank"] is None else f"{pooled['rank']} of {pooled['pool']}"
        budget = pooled["budget"]
        b = b | {"rank": pooled["rank"], "decision": pooled["decision"]}
    geo = result.geometry
    side = geo.patch * geo.block_size
    decision = html.escape(b["decision"])
    kind = (
        "kept"
        if decision.startswith(("kept", "anchor"))
        else "lost"
        if decision.startswith("lost")
        else "none"
    )
    rows = [
        ("block", f"({b['block_row']}, {b['block_col']}) · {side}×{side} px processed"),
        (f"signal ({html.escape(unit)})", _cells_table(b)),
        ("block score", f"{b['score']:.1f} <small>(normalised signal summed over the block)</small>"),
        (rank_label, rank),
        ("group · budget K", f"{group} · {budget}"),
        ("decision", f'<b class="lens-{kind}">{decision}</b>'),
    ]
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="lens-readout">{body}</table>', b


def pixel_readout_html(rgb: np.ndarray, x: int, y: int, *, native: bool) -> str:
    """RGB and luma (BT.601) of one pixel; ``native`` says which frame it was read from."""
    r, g, b = (int(v) for v in rgb)
    luma = 0.299 * r + 0.587 * g + 0.114 * b
    where = "source" if native else "processed"
    return (
        f"pixel ({x}, {y}) {where} · RGB <b>{r} {g} {b}</b> · Y <b>{luma:.1f}</b> "
        f'<span class="lens-swatch" style="background: rgb({r},{g},{b})"></span>'
    )
