"""The frozen record of one frame read by cvp's patched reader: its bitcost grids and pixels."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, repr=False)
class BitcostFrame:
    """One frame as cvp's reader returned it (``read_bitcost``, ``read_segment``, ``SegmentReads``).

    Built in this package from the reader's plain dicts, so nothing above ``native/`` sees
    their keys.
    """

    frame_index: int
    """0-based presentation-order index of the frame (the reader's ``frame_idx``)."""
    pict_type: str
    """Picture type the decoder reported: ``I``, ``P``, ``B``, … (``?`` when it said nothing)."""
    width_px: int
    """Width of the decoded picture (the stream's own size, not the exported pixels')."""
    height_px: int
    """Height of the decoded picture."""
    codec_name: str
    """The reader's decoder name (``h264``, ``hevc``, ``vp9``)."""
    grids: Mapping[str, np.ndarray] | None = None
    """Bitcost grids by name (``mb_bit_cost`` (rows, cols) int32, ``sub_mb_bit_cost`` float32,
    ``ctu_bit_cost``), each 2-D as read (a row may carry the decoder's stride padding); None when
    the reader returned no map for this frame (not asked, or pruned). A split read keeps only the
    wanted names; when none of them was present it is empty and :attr:`grid_names` says what was."""
    grid_names: tuple[str, ...] = ()
    """Names of every grid the reader returned for the frame, before a split read kept some."""
    pixels_bgr: np.ndarray | None = None
    """(height, width, 3) uint8 **BGR** at the requested output size, or None without pixels."""
    frame_result: Any = None
    """What a split read's frame hook returned for this frame (None without a hook)."""

    def __post_init__(self) -> None:
        if self.frame_index < 0:
            raise ValueError(f"frame_index must be >= 0 ({self.frame_index = })")
        if self.pixels_bgr is not None:
            px = self.pixels_bgr
            if px.ndim != 3 or px.shape[2] != 3 or px.dtype != np.uint8:
                raise ValueError(f"pixels_bgr must be (H, W, 3) uint8 ({px.shape = }, {px.dtype = })")
        for name, grid in (self.grids or {}).items():
            if not isinstance(grid, np.ndarray):
                raise TypeError(f"grid {name!r} must be a numpy array ({type(grid) = })")

    def replace(self, **changes: Any) -> BitcostFrame:
        """A copy with ``changes`` applied (the record is frozen)."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        grids = (
            None
            if self.grids is None
            else "{" + ", ".join(f"{k}: {v.shape}" for k, v in self.grids.items()) + "}"
        )
        pixels = None if self.pixels_bgr is None else self.pixels_bgr.shape
        return (
            f"BitcostFrame(frame_index={self.frame_index}, pict_type={self.pict_type!r}, "
            f"size_px={self.width_px}x{self.height_px}, codec_name={self.codec_name!r}, grids={grids}, "
            f"pixels_bgr={pixels}, frame_result={'set' if self.frame_result is not None else None})"
        )


def frame_from_reader(item: Mapping[str, Any]) -> BitcostFrame:
    """The record of one dict of cvp's ``read_video_fast_selected*`` (its keys are read here only).

    The reader's map dict also carries the grids' integer sizes (``mb_width``, ``sub_stride``, …);
    the arrays' shapes say the same, so only the arrays are kept.
    """
    bitcost = item.get("bitcost")
    grids = None if bitcost is None else {k: v for k, v in bitcost.items() if isinstance(v, np.ndarray)}
    return BitcostFrame(
        frame_index=int(item["frame_idx"]),
        pict_type=str(item.get("pict_type", "?")),
        width_px=int(item.get("width", 0)),
        height_px=int(item.get("height", 0)),
        codec_name=str(item.get("codec_name", "")),
        grids=grids,
        grid_names=tuple(grids or ()),
        pixels_bgr=item.get("pixels"),
    )
