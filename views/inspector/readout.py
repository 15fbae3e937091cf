"""Block and pixel readout of the frame viewer: what the block under the cursor is, as a small table."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from backend.pipeline import RunResult
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
    budget = "–" if b["budget"] is None else str(b["budget"])
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
        ("rank in group", rank),
        ("group · budget K", f"{group} · K={budget}"),
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
