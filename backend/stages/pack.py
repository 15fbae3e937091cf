"""Packing stage: anchor frame + kept blocks → RGB canvases and token records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from backend.config import Registry, Variant, option_of, param, validate_fields
from backend.records import Canvases, DecodedFrames, Geometry, GroupSelection, Selection
from backend.stages.group import GroupConfig

Layout = Callable[[GroupSelection, np.ndarray, int, int], tuple[np.ndarray, np.ndarray]]
"""(selection, frame index of each kept block, blocks per canvas, canvases per group) →
(order into the kept blocks, slot of each within the group)."""


def _block_view(a: np.ndarray, block_grid_hw: tuple[int, int], f: int) -> np.ndarray:
    """(n, H, W, 3) → (n, block_row, block_col, f, f, 3) view (no copy)."""
    bh_n, bw_n = block_grid_hw
    return a.reshape(a.shape[0], bh_n, f, bw_n, f, 3).transpose(0, 1, 3, 2, 4, 5)


def _in_order(
    sel: GroupSelection, fids: np.ndarray, per_canvas: int, ipg: int
) -> tuple[np.ndarray, np.ndarray]:
    """block_raster's layout: kept blocks by (frame, block row, block col) from canvas 1 on.

    Returns (order into ``sel.kept``, slot of each within the group), at most the room left
    after the anchor canvas.
    """
    # Stable sort by (frame, block row, block col); equal keys (repeated frames) keep t order.
    order = np.lexsort((sel.kept[:, 2], sel.kept[:, 1], fids))[: (ipg - 1) * per_canvas]
    return order, per_canvas + np.arange(order.size)


def _by_canvas(
    sel: GroupSelection, fids: np.ndarray, per_canvas: int, ipg: int
) -> tuple[np.ndarray, np.ndarray]:
    """quota's layout: each block on the canvas ``sel.kept_canvas`` names, by (frame, block row,
    block col) within it; blocks past a canvas's room are left out."""
    if sel.kept_canvas is None:
        raise ValueError(
            f"Invalid selection for the quota packer: group {sel.group_index} has no kept_canvas. "
            "Supported values are selections that assign each block a canvas."
        )
    canvas = sel.kept_canvas.astype(np.int64)
    order = np.lexsort((sel.kept[:, 2], sel.kept[:, 1], fids, canvas))
    canvas = canvas[order]
    first = np.searchsorted(canvas, canvas, side="left")  # first position of each block's canvas
    local = np.arange(order.size) - first
    fits = (local < per_canvas) & (canvas >= 1) & (canvas < ipg)
    return order[fits], canvas[fits] * per_canvas + local[fits]


def _pack(
    selection: Selection, decoded: DecodedFrames, geometry: Geometry, ipg: int, layout: Layout
) -> Canvases:
    """Canvas 0 of each group is its anchor; ``layout`` places the kept blocks on the others."""
    b, f = geometry.block_size, geometry.patch * geometry.block_size
    hb, wb = geometry.grid_hw
    bh_n, bw_n = geometry.block_grid_hw
    per_canvas = bh_n * bw_n
    h, w = geometry.processed_hw
    groups = selection.groups
    n_g = len(groups)
    # Block-level layout of each group: source (frame_index, block_row, block_col, t) per
    # slot, −1 = padding. The anchor fills canvas 0.
    slots = np.full((n_g, ipg * per_canvas, 4), -1, dtype=np.int64)
    a_r, a_c = np.divmod(np.arange(per_canvas), bw_n)
    slots[:, :per_canvas, 1] = a_r
    slots[:, :per_canvas, 2] = a_c
    slots[:, :per_canvas, 3] = 0
    anchor_rows = np.zeros(n_g, dtype=np.int64)
    src_rows: list[np.ndarray] = []
    src_blocks: list[np.ndarray] = []
    dst_slots: list[np.ndarray] = []
    for k, sel in enumerate(groups):
        rows = sel.candidate_rows()
        anchor_rows[k] = rows[0]
        slots[k, :per_canvas, 0] = sel.frame_indices[0]
        if not sel.kept.shape[0]:
            continue
        t = sel.kept[:, 0].astype(np.int64)
        fids = np.asarray(sel.frame_indices, dtype=np.int64)[t]
        order, where = layout(sel, fids, per_canvas, ipg)
        blocks = np.stack([fids, sel.kept[:, 1], sel.kept[:, 2], t], axis=1)[order]
        slots[k, where] = blocks
        src_rows.append(rows[blocks[:, 3]])
        src_blocks.append(blocks[:, 1:3])
        dst_slots.append(k * ipg * per_canvas + where)
    images = np.zeros((n_g * ipg, h, w, 3), dtype=np.uint8)
    images[::ipg] = decoded.pixels[anchor_rows]
    if src_rows:
        # One fancy index over block-grid views gathers every kept block (touching only
        # those pixels, even when the frames are memory-mapped) and one scatters them.
        blk = np.concatenate(src_blocks)
        gathered = _block_view(decoded.pixels, (bh_n, bw_n), f)[
            np.concatenate(src_rows), blk[:, 0], blk[:, 1]
        ]
        dst_c, local = np.divmod(np.concatenate(dst_slots), per_canvas)
        dst_r, dst_col = np.divmod(local, bw_n)
        _block_view(images, (bh_n, bw_n), f)[dst_c, dst_r, dst_col] = gathered
    # Token rows in canvas-raster order: canvas c, patch (ph, pw) sits in block slot
    # (ph // b, pw // b) at offset (ph % b, pw % b) of the source block.
    c_idx, ph, pw = np.meshgrid(np.arange(ipg), np.arange(hb), np.arange(wb), indexing="ij")
    c_idx, ph, pw = c_idx.ravel(), ph.ravel(), pw.ravel()
    slot = c_idx * per_canvas + (ph // b) * bw_n + (pw // b)
    src = slots[:, slot].reshape(-1, 4)  # (n_g·ipg·S, 4)
    valid = src[:, 0] >= 0
    n_tok = c_idx.size
    tokens = np.empty((n_g * n_tok, 8), dtype=np.int32)
    tokens[:, 0] = np.where(valid, src[:, 0], -1)
    tokens[:, 1] = np.where(valid, src[:, 1] * b + np.tile(ph % b, n_g), -1)
    tokens[:, 2] = np.where(valid, src[:, 2] * b + np.tile(pw % b, n_g), -1)
    tokens[:, 3] = (np.arange(n_g)[:, None] * ipg + c_idx[None, :]).ravel()
    tokens[:, 4] = np.tile(ph, n_g)
    tokens[:, 5] = np.tile(pw, n_g)
    group_index = np.asarray([sel.group_index for sel in groups], dtype=np.int32)
    tokens[:, 6] = np.repeat(group_index, n_tok)
    tokens[:, 7] = valid
    return Canvases(images=images, tokens=tokens, canvas_group_index=np.repeat(group_index, ipg))


def pack_block_raster(
    selection: Selection, decoded: DecodedFrames, geometry: Geometry, *, config: PackConfig
) -> Canvases:
    """Pack every processed group into ``images_per_group`` canvases (cvp's layout, spec §12.5).

    Canvas 0 of a group is its anchor frame; the kept blocks follow in (frame, block
    row, block col) order, filling canvases 1… in block-raster order; the rest is black
    padding whose tokens are invalid.

    Parameters
    ----------
    selection : anchors and kept blocks per group.
    decoded : (n, H, W, 3) RGB pixels of the candidates (may be memory-mapped: only the
        anchors and the kept blocks are read).
    geometry : patch grid.
    config : images per group.

    Returns
    -------
    Canvases with images (C, H, W, 3) and tokens (C·S, 8), C = groups × ipg, tokens in
    canvas-raster order (see ``TOKEN_COLUMNS``).
    """
    return _pack(selection, decoded, geometry, config.images_per_group, _in_order)


def pack_quota(
    selection: Selection, decoded: DecodedFrames, geometry: Geometry, *, config: PackConfig
) -> Canvases:
    """Pack each group's anchor on canvas 0 and each kept block on the canvas its selection assigned.

    Within a canvas the blocks are laid in (frame, block row, block col) order in block-raster
    slots, the rest black padding (llava-ov2's P-canvases; ``GroupSelection.kept_canvas``).

    Returns
    -------
    Canvases as :func:`pack_block_raster`.
    """
    return _pack(selection, decoded, geometry, config.images_per_group, _by_canvas)


PACKERS: Registry[Variant] = Registry(
    "packer",
    (
        Variant(
            "block_raster",
            pack_block_raster,
            "anchor frame, then the kept blocks by (frame, block row, block col) in block-raster order",
        ),
        Variant(
            "quota",
            pack_quota,
            "anchor frame, then each kept block on the canvas its selection assigned (temporal quotas)",
        ),
    ),
)


@dataclass(frozen=True, kw_only=True)
class PackConfig:
    """Packing parameters."""

    images_per_group: int = option_of(GroupConfig, "images_per_group")
    packer: str = param(
        "block_raster",
        label="Packer",
        help="how kept blocks are laid out on the canvases",
        choices=PACKERS.names,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def pack(selection: Selection, decoded: DecodedFrames, geometry: Geometry, *, config: PackConfig) -> Canvases:
    """Pack every processed group into canvases with the packer ``config.packer`` names.

    Parameters
    ----------
    selection : anchors and kept blocks per group.
    decoded : the candidates' pixels.
    geometry : patch grid.
    config : images per group and packer.

    Returns
    -------
    Canvases with images (C, H, W, 3) and tokens (C·S, 8) (see :func:`pack_block_raster`).
    """
    return PACKERS.lookup(config.packer).function(selection, decoded, geometry, config=config)
