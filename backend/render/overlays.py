"""Overlay layers: which layers to draw and their per-run plan (drawn by :mod:`backend.render.frame`)."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.codecs import canonical_codec
from backend.config import parse_names
from backend.pipeline import RunResult
from backend.render.colors import BLOCK_GRID_RGB, CODEC_GRID_RGB, COLORMAPS, PATCH_GRID_RGB
from backend.render.facts import anchor_rows, kept_blocks_by_row
from backend.render.heatmap import (
    SCALES,
    canonical_heat,
    legend,
    legend_stops,
    video_block_max,
    video_log_max,
    video_raw_max,
)
from backend.render.staleness import video_staleness_top
from backend.selectors import picture_of

KEPT_BORDER_PX = 2
ANCHOR_BORDER_PX = 4

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
    staleness: bool = False
    """Blend each patch position's staleness (frames since a valid token last covered it,
    :func:`backend.audit.staleness_at_frame`) over the picture, on the video's fixed scale, with the
    heatmap's opacity and colormap; drawn over the score heatmap when both are on."""
    opacity: float = 0.5
    """Heatmap weight in [0, 1]; 0 shows the plain frame."""
    colormap: str = "turbo"
    """One of :data:`COLORMAPS`."""
    scale: str = "frame"
    """``frame``: the stored per-frame normalised map; ``video``: the raw signal (log1p) divided
    by its maximum over all candidate frames, so frames are comparable to each other."""
    heat: str = "cell"
    """What the heatmap shows (:data:`HEAT_SOURCES`; ``signal`` is read as ``cell``): ``cell``, the
    score map per codec cell; ``block``, the 2×2-block score the selection ranks (on the ``frame``
    scale divided by the frame's highest block score, on the ``video`` scale by the run's). The
    viewer, exports and the CLI default to ``block`` (:data:`DEFAULT_HEAT`); this default stays
    ``cell`` for the comparison panes, whose shared scale rescales the cell maps."""
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
        # One stored value per mode: an alias becomes its canonical name (equal options, one cache key).
        object.__setattr__(self, "heat", canonical_heat(self.heat))


LAYER_NAMES: tuple[str, ...] = (
    "heatmap",
    "staleness",
    "kept",
    "lost",
    "grid",
    "patch_grid",
    "codec_grid",
    "anchor",
    "bad",
)
"""Layer names shared by the app, exports and the CLI: ``grid`` is the block grid, ``anchor`` the
anchor badge, ``bad`` the bad-frame tint and label, ``staleness`` the staleness heat layer."""
LAYER_LABELS: dict[str, str] = {
    "heatmap": "heatmap",
    "staleness": "staleness",
    "kept": "kept",
    "lost": "lost",
    "grid": "block grid",
    "patch_grid": "patch grid",
    "codec_grid": "codec grid",
    "anchor": "anchor badge",
    "bad": "bad frames",
}
"""How the app labels each layer."""
DEFAULT_LAYERS: tuple[str, ...] = ("kept", "anchor", "bad")


def layer_options(
    layers: str | Sequence[str],
    *,
    opacity: float = 0.5,
    colormap: str = "turbo",
    scale: str = "frame",
    heat: str = "cell",
) -> LayerOptions:
    """LayerOptions for layer names (a sequence, or ``a,b,c``); unknown names list the choices."""
    chosen = set(parse_names(layers, LAYER_NAMES, what="layer"))
    return LayerOptions(
        heatmap="heatmap" in chosen,
        staleness="staleness" in chosen,
        opacity=float(opacity),
        colormap=colormap,
        scale=scale,
        heat=heat,
        patch_grid="patch_grid" in chosen,
        block_grid="grid" in chosen,
        codec_grid="codec_grid" in chosen,
        kept="kept" in chosen,
        lost="lost" in chosen,
        anchor_badge="anchor" in chosen,
        bad_frames="bad" in chosen,
    )


_LAYER_FLAGS: dict[str, str] = {
    "heatmap": "heatmap",
    "staleness": "staleness",
    "kept": "kept",
    "lost": "lost",
    "grid": "block_grid",
    "patch_grid": "patch_grid",
    "codec_grid": "codec_grid",
    "anchor": "anchor_badge",
    "bad": "bad_frames",
}
"""Layer name → the LayerOptions switch it turns on."""


def layer_names(options: LayerOptions) -> tuple[str, ...]:
    """The layer names (in :data:`LAYER_NAMES` order) whose switches ``options`` turns on: the
    inverse of :func:`layer_options`."""
    return tuple(name for name in LAYER_NAMES if getattr(options, _LAYER_FLAGS[name]))


def codec_grid_lines(result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """Pixel rows and columns of the codec grid lines on the processed frame.

    Returns
    -------
    ys : (a,) int, rows ``round(k · cell_h)`` for k ≥ 1 inside the frame.
    xs : (b,) int, columns ``round(k · cell_w)``.
    """
    # PyAV names the decoder (libdav1d for AV1), the table the codec.
    cell = CODEC_CELL_PX.get(canonical_codec(result.info.codec_name), 16)
    (oh, ow), (h, w) = result.geometry.orig_hw, result.geometry.processed_hw
    cell_h, cell_w = cell * h / oh, cell * w / ow
    ys = np.round(np.arange(1, int(h / cell_h) + 1) * cell_h).astype(int)
    xs = np.round(np.arange(1, int(w / cell_w) + 1) * cell_w).astype(int)
    return ys[ys < h], xs[xs < w]


# -- drawing -----------------------------------------------------------------------------------


def outline_blocks(
    image: np.ndarray, block_rc: np.ndarray, block_px: int, border_px: int, rgb: tuple[int, int, int]
) -> None:
    """Draw a ``border_px`` outline around each block, in place.

    Parameters
    ----------
    image : (H, W, 3) uint8, written in place.
    block_rc : (m, 2) int [block_row, block_col].
    block_px : block side in pixels.
    """
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


@dataclass(frozen=True)
class OverlayPlan:
    """Everything about a run's overlays that does not change from frame to frame."""

    options: LayerOptions
    block_px: int
    grid_lines: tuple[tuple[slice | np.ndarray, slice | np.ndarray, tuple[int, int, int]], ...]
    """(rows, cols, rgb) per grid layer that is on, drawn in this order: slices for the evenly
    spaced patch and block grids, index arrays for the codec grid."""
    kept: dict[int, np.ndarray]
    """Candidate row → (m, 2) kept [block_row, block_col]."""
    anchors: frozenset[int]
    log_max: float
    """The ``video`` scale's 1.0 (0 when the heatmap is off or on the frame scale): log1p of the
    largest raw signal, or the largest block score with ``heat="block"``."""
    legend: np.ndarray | None
    """(40, 256, 3) colour bar (None when the heatmap is off)."""
    legend_stops: tuple[tuple[float, tuple[int, int, int]], ...]
    legend_labels: tuple[str, str]
    picture_blocks: tuple[int, int, int, int] | None = None
    """``(r0, r1, c0, c1)`` block rows and columns showing the picture when the selector adds bars
    (onevision's letterbox), so the heatmap leaves the bars alone; None: the whole frame."""
    staleness_top: int | None = None
    """The staleness layer's fixed scale: the video's highest staleness in frames, the colour bar's
    top (None when the layer is off)."""


def plan_overlays(result: RunResult, *, options: LayerOptions) -> OverlayPlan:
    """Precompute a run's static overlay parts: grid lines, kept blocks, anchors, video max, legend."""
    geo = result.geometry
    f = geo.patch * geo.block_size
    lines: list[tuple[slice | np.ndarray, slice | np.ndarray, tuple[int, int, int]]] = []
    if options.patch_grid:
        lines.append((slice(None, None, geo.patch), slice(None, None, geo.patch), PATCH_GRID_RGB))
    if options.block_grid:
        lines.append((slice(None, None, f), slice(None, None, f), BLOCK_GRID_RGB))
    if options.codec_grid:
        ys, xs = codec_grid_lines(result)
        lines.append((ys, xs, CODEC_GRID_RGB))
    leg: np.ndarray | None = None
    stops: tuple[tuple[float, tuple[int, int, int]], ...] = ()
    labels = ("", "")
    log_max = 0.0
    if options.heatmap and options.heat == "block":
        if options.scale == "video":
            log_max = video_block_max(result)
            labels = ("0", f"{log_max:.1f} (run max block score)")
            high = log_max
        else:
            labels = ("0", "1 (frame max block score)")
            high = 1.0
        leg = legend(options.colormap, *labels)
        stops = legend_stops(options.colormap, high, log=False)
    elif options.heatmap:
        if options.scale == "video":
            log_max = video_log_max(result)
            high = video_raw_max(result)
            labels = ("0", f"{high:g} (video max, log)")
        else:
            high = 1.0
            labels = ("0", "1 (frame p99)")
        leg = legend(options.colormap, *labels)
        stops = legend_stops(options.colormap, high, log=options.scale == "video")
    box = picture_of(result.options, geo)
    whole = box == (0, geo.block_grid_hw[0], 0, geo.block_grid_hw[1])
    return OverlayPlan(
        picture_blocks=None if whole else box,
        staleness_top=video_staleness_top(result) if options.staleness else None,
        options=options,
        block_px=f,
        grid_lines=tuple(lines),
        kept=kept_blocks_by_row(result),
        anchors=anchor_rows(result),
        log_max=log_max,
        legend=leg,
        legend_stops=stops,
        legend_labels=labels,
    )


_PLANS: OrderedDict[tuple[int, LayerOptions], tuple[weakref.ref[Any], OverlayPlan]] = OrderedDict()
_PLANS_LOCK = threading.Lock()


def cached_plan(result: RunResult, options: LayerOptions) -> OverlayPlan:
    """:func:`plan_overlays`, remembered for the last few (run, options) pairs.

    Runs are keyed by identity (records hold arrays, so they are not hashable); a weak
    reference makes sure a recycled id never returns another run's plan.
    """
    key = (id(result), options)
    with _PLANS_LOCK:
        hit = _PLANS.get(key)
        if hit is not None and hit[0]() is result:
            _PLANS.move_to_end(key)
            return hit[1]
    plan = plan_overlays(result, options=options)
    with _PLANS_LOCK:
        _PLANS[key] = (weakref.ref(result), plan)
        while len(_PLANS) > 16:
            _PLANS.popitem(last=False)
    return plan
