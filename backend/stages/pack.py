"""Packing stage: anchor frame + kept blocks → RGB canvases and token records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from backend.config import Registry, Variant, option_of, param, validate_fields
from backend.records import Canvases, CanvasPixels, DecodedFrames, Geometry, GroupSelection, Selection
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


class PackedPixels(CanvasPixels):
    """Canvas pixels packed from the decoded frames when first asked for: a re-selection that
    shows one canvas packs that one, and ``all()`` packs every canvas once (then keeps them).

    ``anchor_rows`` (G,): the candidate row of each group's anchor (its canvas 0);
    ``src_rows`` (m,), ``src_blocks`` (m, 2) [block_row, block_col] and ``dst_slots`` (m,): each
    kept block's source and its block slot counted over all canvases (canvas · S + slot).
    """

    def __init__(
        self,
        frames: np.ndarray,
        geometry: Geometry,
        anchor_rows: np.ndarray,
        ipg: int,
        src_rows: np.ndarray,
        src_blocks: np.ndarray,
        dst_slots: np.ndarray,
    ) -> None:
        h, w = geometry.processed_hw
        self._frames, self._geometry, self._anchor_rows, self._ipg = frames, geometry, anchor_rows, ipg
        self._shape = (int(anchor_rows.size) * ipg, h, w, 3)
        per_canvas = int(np.prod(geometry.block_grid_hw))
        # Kept blocks sorted by their canvas (stable: the order within a canvas as packed).
        order = np.argsort(dst_slots // per_canvas, kind="stable")
        self._src_rows, self._src_blocks, self._dst_slots = (
            src_rows[order],
            src_blocks[order],
            dst_slots[order],
        )
        self._bounds = np.searchsorted(self._dst_slots // per_canvas, np.arange(self._shape[0] + 1))
        self._images: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self._shape  # type: ignore[return-value]

    @property
    def packed(self) -> bool:
        return self._images is not None

    def canvas(self, canvas_index: int) -> np.ndarray:
        if self._images is not None:
            return self._images[canvas_index]
        out = np.zeros((1, *self._shape[1:]), dtype=np.uint8)
        group, k = divmod(int(canvas_index), self._ipg)
        if k == 0:
            out[0] = self._frames[self._anchor_rows[group]]
        lo, hi = self._bounds[canvas_index], self._bounds[canvas_index + 1]
        self._scatter(
            out, slice(lo, hi), first_slot=int(canvas_index) * int(np.prod(self._geometry.block_grid_hw))
        )
        return out[0]

    def all(self) -> np.ndarray:
        if self._images is None:
            images = np.zeros(self._shape, dtype=np.uint8)
            images[:: self._ipg] = self._frames[self._anchor_rows]
            self._scatter(images, slice(None), first_slot=0)
            self._images = images
        return self._images

    def _scatter(self, images: np.ndarray, kept: slice, *, first_slot: int) -> None:
        """Copy the kept blocks ``kept`` into ``images``, whose canvas 0 is slot ``first_slot``'s."""
        src_rows, blk, dst = self._src_rows[kept], self._src_blocks[kept], self._dst_slots[kept] - first_slot
        if not src_rows.size:
            return
        grid = self._geometry.block_grid_hw
        f = self._geometry.patch * self._geometry.block_size
        # One fancy index over block-grid views gathers every kept block (touching only those
        # pixels, even when the frames are memory-mapped) and one scatters them.
        gathered = _block_view(self._frames, grid, f)[src_rows, blk[:, 0], blk[:, 1]]
        dst_c, local = np.divmod(dst, grid[0] * grid[1])
        dst_r, dst_col = np.divmod(local, grid[1])
        _block_view(images, grid, f)[dst_c, dst_r, dst_col] = gathered


def _pack(
    selection: Selection, decoded: DecodedFrames, geometry: Geometry, ipg: int, layout: Layout
) -> Canvases:
    """Canvas 0 of each group is its anchor; ``layout`` places the kept blocks on the others."""
    b = geometry.block_size
    hb, wb = geometry.grid_hw
    bh_n, bw_n = geometry.block_grid_hw
    per_canvas = bh_n * bw_n
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
    pixels = PackedPixels(
        decoded.pixels,
        geometry,
        anchor_rows,
        ipg,
        np.concatenate(src_rows) if src_rows else np.zeros(0, np.int64),
        np.concatenate(src_blocks) if src_blocks else np.zeros((0, 2), np.int64),
        np.concatenate(dst_slots) if dst_slots else np.zeros(0, np.int64),
    )
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
    return Canvases(pixels=pixels, tokens=tokens, canvas_group_index=np.repeat(group_index, ipg))


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
