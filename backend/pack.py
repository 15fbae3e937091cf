"""Packing stage: anchor frame + kept blocks → RGB canvases and token records."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.configbase import param, validate_fields
from backend.records import Canvases, DecodedFrames, Geometry, GroupSelection, Selection


@dataclass(frozen=True, kw_only=True)
class PackConfig:
    """Packing parameters."""

    images_per_group: int = param(4, label="Images per group", help="canvases per group", min=1, max=1024)

    def __post_init__(self) -> None:
        validate_fields(self)


def pack_group(
    sel: GroupSelection,
    pixels: np.ndarray,
    geometry: Geometry,
    *,
    images_per_group: int,
    first_canvas: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Canvases and token rows of one group.

    Parameters
    ----------
    sel : the group's anchor and kept blocks.
    pixels : (n, H, W, 3) uint8 RGB of all candidates.

    Returns
    -------
    images : (ipg, H, W, 3) uint8, canvas 0 is the anchor frame.
    tokens : (ipg·S, 8) int32 in canvas-raster order (see ``TOKEN_COLUMNS``).
    """
    p, b = geometry.patch, geometry.block_size
    f = p * b
    hb, wb = geometry.grid_hw
    bh_n, bw_n = geometry.block_grid_hw
    per_canvas = bh_n * bw_n
    h, w = geometry.processed_hw
    rows = sel.candidate_rows()
    images = np.zeros((images_per_group, h, w, 3), dtype=np.uint8)
    # Block-level layout: source (frame_index, block_row, block_col, t) per slot, −1 = padding.
    slots = np.full((images_per_group * per_canvas, 4), -1, dtype=np.int64)
    anchor_fid = sel.frame_indices[0]
    a_r, a_c = np.divmod(np.arange(per_canvas), bw_n)
    slots[:per_canvas] = np.stack([np.full(per_canvas, anchor_fid), a_r, a_c, np.zeros(per_canvas)], axis=1)
    if sel.kept.shape[0]:
        t = sel.kept[:, 0].astype(np.int64)
        fids = np.asarray(sel.frame_indices, dtype=np.int64)[t]
        # Stable sort by (frame, block row, block col); equal keys (repeated frames) keep t order.
        order = np.lexsort((sel.kept[:, 2], sel.kept[:, 1], fids))
        blocks = np.stack([fids, sel.kept[:, 1], sel.kept[:, 2], t], axis=1)[order]
        room = images_per_group * per_canvas - per_canvas
        blocks = blocks[:room]
        slots[per_canvas : per_canvas + blocks.shape[0]] = blocks
    images[0] = pixels[rows[0]]
    filled = slots[per_canvas:]
    n_fill = int(np.count_nonzero(filled[:, 0] >= 0))  # blocks fill a prefix; the rest is padding
    if n_fill:
        blk = filled[:n_fill]

        # Views with the block grid on the leading axes, (frame, block_row, block_col, f, f, 3):
        # one fancy index gathers every kept block (touching only those pixels, even when
        # the frames are memory-mapped) and one scatters them into their canvas slots.
        def as_blocks(a: np.ndarray) -> np.ndarray:
            return a.reshape(a.shape[0], bh_n, f, bw_n, f, 3).transpose(0, 1, 3, 2, 4, 5)

        gathered = as_blocks(pixels)[rows[blk[:, 3]], blk[:, 1], blk[:, 2]]
        dst_c, local = np.divmod(np.arange(per_canvas, per_canvas + n_fill), per_canvas)
        dst_r, dst_col = np.divmod(local, bw_n)
        as_blocks(images)[dst_c, dst_r, dst_col] = gathered
    # Token rows in canvas-raster order: canvas c, patch (ph, pw) sits in block slot
    # (ph // b, pw // b) at offset (ph % b, pw % b) of the source block.
    c_idx, ph, pw = np.meshgrid(np.arange(images_per_group), np.arange(hb), np.arange(wb), indexing="ij")
    c_idx, ph, pw = c_idx.ravel(), ph.ravel(), pw.ravel()
    slot = c_idx * per_canvas + (ph // b) * bw_n + (pw // b)
    src = slots[slot]
    valid = src[:, 0] >= 0
    tokens = np.empty((c_idx.size, 8), dtype=np.int32)
    tokens[:, 0] = np.where(valid, src[:, 0], -1)
    tokens[:, 1] = np.where(valid, src[:, 1] * b + ph % b, -1)
    tokens[:, 2] = np.where(valid, src[:, 2] * b + pw % b, -1)
    tokens[:, 3] = first_canvas + c_idx
    tokens[:, 4] = ph
    tokens[:, 5] = pw
    tokens[:, 6] = sel.group_index
    tokens[:, 7] = valid
    return images, tokens


def pack(selection: Selection, decoded: DecodedFrames, geometry: Geometry, *, config: PackConfig) -> Canvases:
    """Pack every processed group into ``images_per_group`` canvases.

    Parameters
    ----------
    selection : anchors and kept blocks per group.
    decoded : (n, H, W, 3) RGB pixels of the candidates.
    geometry : patch grid.
    config : images per group.

    Returns
    -------
    Canvases with images (C, H, W, 3) and tokens (C·S, 8), C = groups × ipg.
    """
    ipg = config.images_per_group
    h, w = geometry.processed_hw
    s = geometry.patches_per_canvas
    images = np.zeros((len(selection.groups) * ipg, h, w, 3), dtype=np.uint8)
    tokens = np.zeros((len(selection.groups) * ipg * s, 8), dtype=np.int32)
    canvas_group = np.zeros(len(selection.groups) * ipg, dtype=np.int32)
    for k, sel in enumerate(selection.groups):
        imgs, toks = pack_group(sel, decoded.pixels, geometry, images_per_group=ipg, first_canvas=k * ipg)
        images[k * ipg : (k + 1) * ipg] = imgs
        tokens[k * ipg * s : (k + 1) * ipg * s] = toks
        canvas_group[k * ipg : (k + 1) * ipg] = sel.group_index
    return Canvases(images=images, tokens=tokens, canvas_group_index=canvas_group)
