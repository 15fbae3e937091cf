"""Overlay drawing core: heatmap, grids, kept/lost outlines, anchor badge, bad-frame tint, legend, text."""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from backend.config import parse_names
from backend.pipeline import RunResult
from backend.records import GroupSelection
from backend.stages.score import upsample
from backend.stages.signals import canonical_codec

COLORMAPS: dict[str, int] = {
    "turbo": cv2.COLORMAP_TURBO,
    "viridis": cv2.COLORMAP_VIRIDIS,
    "magma": cv2.COLORMAP_MAGMA,
    "jet": cv2.COLORMAP_JET,
    "inferno": cv2.COLORMAP_INFERNO,
}
SCALES: tuple[str, ...] = ("frame", "video")

KEPT_RGB = (255, 64, 32)
ANCHOR_RGB = (32, 200, 255)
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


LAYER_NAMES: tuple[str, ...] = (
    "heatmap",
    "kept",
    "lost",
    "grid",
    "patch_grid",
    "codec_grid",
    "anchor",
    "bad",
)
"""Layer names shared by the app, exports and the CLI: ``grid`` is the block grid, ``anchor`` the
anchor badge, ``bad`` the bad-frame tint and label."""
LAYER_LABELS: dict[str, str] = {
    "heatmap": "heatmap",
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
    layers: str | Sequence[str], *, opacity: float = 0.5, colormap: str = "turbo", scale: str = "frame"
) -> LayerOptions:
    """LayerOptions for layer names (a sequence, or ``a,b,c``); unknown names list the choices."""
    chosen = set(parse_names(layers, LAYER_NAMES, what="layer"))
    return LayerOptions(
        heatmap="heatmap" in chosen,
        opacity=float(opacity),
        colormap=colormap,
        scale=scale,
        patch_grid="patch_grid" in chosen,
        block_grid="grid" in chosen,
        codec_grid="codec_grid" in chosen,
        kept="kept" in chosen,
        lost="lost" in chosen,
        anchor_badge="anchor" in chosen,
        bad_frames="bad" in chosen,
    )


# -- run facts ---------------------------------------------------------------------------------


def check_row(result: RunResult, row: int) -> None:
    """Refuse a candidate row outside 0 … n−1 (ValueError listing the range)."""
    n = int(result.candidates.frame_indices.size)
    if not 0 <= row < n:
        raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}.")


def kept_blocks_by_row(result: RunResult) -> dict[int, np.ndarray]:
    """Candidate row → kept blocks as an (m, 2) int64 array of [block_row, block_col]."""
    out: dict[int, list[np.ndarray]] = {}
    for sel in result.selection.groups:
        rows = sel.candidate_rows()
        for t in np.unique(sel.kept[:, 0]).tolist():
            out.setdefault(int(rows[t]), []).append(sel.kept[sel.kept[:, 0] == t, 1:].astype(np.int64))
    return {row: np.concatenate(parts) for row, parts in out.items()}


def anchor_rows(result: RunResult) -> frozenset[int]:
    """Candidate rows that are group anchors (kept whole)."""
    return frozenset(int(sel.candidate_rows()[0]) for sel in result.selection.groups)


def group_of_row(result: RunResult, row: int) -> tuple[GroupSelection | None, int | None]:
    """The selection holding candidate ``row`` and its group position t (after the anchor swap)."""
    for sel in result.selection.groups:
        if sel.start <= row < sel.end:
            t = int(np.flatnonzero(sel.candidate_rows() == row)[0])
            return sel, t
    return None, None


def frame_facts(result: RunResult, row: int) -> tuple[int, float | None, str]:
    """(frame_index, pts_secs or None, pict_type) of a candidate row.

    Packets are in presentation order, so frame_index indexes them when the packet count
    equals the frame count; otherwise the time comes from the frame rate.
    """
    info = result.info
    fid = int(result.candidates.frame_indices[row])
    if 0 <= fid < info.packet_pts_secs.size:
        pts: float | None = float(info.packet_pts_secs[fid])
    else:
        pts = fid / info.fps if info.fps else None
    return fid, pts, result.decoded.pict_types[row]


def video_log_max(result: RunResult) -> float:
    """Largest log1p(raw signal) over all candidate frames (the ``video`` scale's 1.0)."""
    tops = [float(np.log1p(max(float(np.max(g)), 0.0))) for g in result.decoded.grids if g is not None]
    return max(tops, default=0.0)


def video_raw_max(result: RunResult) -> float:
    """Largest raw signal value over all candidate frames."""
    return max((float(np.max(g)) for g in result.decoded.grids if g is not None), default=0.0)


def score_grid(
    result: RunResult, row: int, *, scale: str = "frame", log_max: float | None = None
) -> np.ndarray:
    """The score grid of a candidate frame before upsampling.

    Parameters
    ----------
    result : a finished run.
    row : candidate row.
    scale : ``frame`` (stored per-frame normalised grid) or ``video`` (raw grid, log1p, divided
        by ``log_max``, the run's :func:`video_log_max`, computed when not given).

    Returns
    -------
    (gh, gw) float32 in [0, 1], the codec grid's shape.
    """
    check_row(result, row)
    if scale not in SCALES:
        raise ValueError(f"Invalid scale ({scale!r}). Supported values are {', '.join(SCALES)}.")
    raw = result.decoded.grids[row]
    if scale == "frame" or raw is None:
        return np.asarray(result.scores.grids[row], np.float32)
    # The stored grids are each normalised to their own percentile, so all frames peak at
    # 1.0; comparing frames needs the raw signal against one run-wide maximum.
    top = max(video_log_max(result) if log_max is None else log_max, 1e-6)
    grid = np.log1p(np.maximum(np.asarray(raw, np.float32), 0)) / np.float32(top)
    return grid.astype(np.float32)


def score_map(result: RunResult, row: int, *, scale: str = "frame") -> np.ndarray:
    """The score map of a candidate frame at the processed size.

    Returns
    -------
    (H, W) float32 in [0, 1]: :func:`score_grid` stretched by nearest neighbour.
    """
    return upsample(score_grid(result, row, scale=scale), result.geometry.processed_hw)


def lost_blocks(result: RunResult, row: int) -> np.ndarray:
    """Blocks of a candidate frame that scored high but lost to the budget.

    Returns
    -------
    (block_rows, block_cols) bool mask; see :data:`LOST_FRACTION` for the definition.
    """
    check_row(result, row)
    bh_n, bw_n = result.geometry.block_grid_hw
    mask = np.zeros((bh_n, bw_n), bool)
    sel, t = group_of_row(result, row)
    if sel is None or t == 0 or not result.quality.good[row] or not np.isfinite(sel.cutoff_score):
        return mask
    scores = result.scores.block_scores[row].reshape(bh_n, bw_n)
    mask = scores >= np.float32(LOST_FRACTION * sel.cutoff_score)
    kept = sel.kept[sel.kept[:, 0] == t]
    mask[kept[:, 1], kept[:, 2]] = False
    return mask


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


# -- colour ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def colormap_lut(colormap: str) -> np.ndarray:
    """(256, 3) uint8 RGB colour of each level 0 … 255 (read-only)."""
    if colormap not in COLORMAPS:
        raise ValueError(f"Invalid colormap ({colormap!r}). Supported values are {', '.join(COLORMAPS)}.")
    bgr = cv2.applyColorMap(np.arange(256, dtype=np.uint8).reshape(1, 256), COLORMAPS[colormap])
    lut = np.ascontiguousarray(bgr[0, :, ::-1])
    lut.setflags(write=False)
    return lut


def heatmap_rgb(grid: np.ndarray, processed_hw: tuple[int, int], colormap: str) -> np.ndarray:
    """Colour a score grid and stretch it over the processed frame.

    Colouring the small grid first and then stretching by nearest neighbour gives the same
    pixels as stretching first (nearest copies values), at a fraction of the work.

    Parameters
    ----------
    grid : (gh, gw) float32 in [0, 1].
    processed_hw : (H, W).

    Returns
    -------
    (H, W, 3) uint8 RGB.
    """
    levels = cv2.convertScaleAbs(grid, alpha=255.0)  # rounds and saturates in one pass
    small = colormap_lut(colormap)[levels]
    h, w = processed_hw
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_NEAREST)


@functools.lru_cache(maxsize=64)
def legend(colormap: str, low_label: str, high_label: str) -> np.ndarray:
    """(40, 256, 3) uint8 RGB colour bar with the two labels under it (read-only)."""
    image = np.full((40, 256, 3), 255, np.uint8)
    image[:18] = colormap_lut(colormap)[None, :, :]
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(image, low_label, (2, 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    (w, _), _ = cv2.getTextSize(high_label, font, 0.4, 1)
    cv2.putText(image, high_label, (254 - w, 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    image.setflags(write=False)
    return image


def legend_stops(
    colormap: str, high_value: float, *, log: bool
) -> tuple[tuple[float, tuple[int, int, int]], ...]:
    """Five (value, rgb) stops of the colour bar, 0 … ``high_value``.

    The video scale colours log1p(raw) / log1p(max), so with ``log`` the stops are raw
    values on that curve.
    """
    rgb = colormap_lut(colormap)[np.linspace(0, 255, 5).astype(np.uint8)]
    fractions = np.linspace(0.0, 1.0, 5)
    values = np.expm1(fractions * np.log1p(high_value)) if log else fractions * high_value
    return tuple((float(v), (int(c[0]), int(c[1]), int(c[2]))) for v, c in zip(values, rgb, strict=True))


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
    """The ``video`` scale's 1.0 (0 when the heatmap is off or on the frame scale)."""
    legend: np.ndarray | None
    """(40, 256, 3) colour bar (None when the heatmap is off)."""
    legend_stops: tuple[tuple[float, tuple[int, int, int]], ...]
    legend_labels: tuple[str, str]


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
    if options.heatmap:
        if options.scale == "video":
            log_max = video_log_max(result)
            high = video_raw_max(result)
            labels = ("0", f"{high:g} (video max, log)")
        else:
            high = 1.0
            labels = ("0", "1 (frame p99)")
        leg = legend(options.colormap, *labels)
        stops = legend_stops(options.colormap, high, log=options.scale == "video")
    return OverlayPlan(
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


def draw_overlays(result: RunResult, row: int, plan: OverlayPlan) -> np.ndarray:
    """Draw the planned layers over a candidate frame.

    Parameters
    ----------
    result : the run the plan was made for.
    row : candidate row.
    plan : from :func:`plan_overlays`.

    Returns
    -------
    (H, W, 3) uint8 RGB at the processed size; the run's pixels are not modified.
    """
    check_row(result, row)
    opts = plan.options
    frame = result.decoded.pixels[row]
    h = frame.shape[0]
    if opts.heatmap:
        grid = score_grid(result, row, scale=opts.scale, log_max=plan.log_max)
        colour = heatmap_rgb(grid, result.geometry.processed_hw, opts.colormap)
        image = cv2.addWeighted(colour, float(opts.opacity), frame, 1.0 - float(opts.opacity), 0.0)
    else:
        image = np.array(frame, copy=True)
    bad = not bool(result.quality.good[row])
    if opts.bad_frames and bad:
        tint = np.empty_like(image)
        tint[:] = BAD_TINT_RGB
        image = cv2.addWeighted(tint, BAD_TINT_ALPHA, image, 1.0 - BAD_TINT_ALPHA, 0.0)
    # Grid lines are row and column writes from the plan: no per-pixel loop. Columns go through
    # the transposed view, where each index picks a whole column (3x faster than image[:, xs]).
    columns = image.transpose(1, 0, 2)
    for ys, xs, rgb in plan.grid_lines:
        image[ys], columns[xs] = rgb, rgb
    f = plan.block_px
    if opts.lost:
        outline_blocks(image, np.argwhere(lost_blocks(result, row)), f, KEPT_BORDER_PX, LOST_RGB)
    kept = plan.kept.get(row)
    if opts.kept and kept is not None and kept.size:
        outline_blocks(image, kept, f, KEPT_BORDER_PX, KEPT_RGB)
    if opts.anchor_badge and row in plan.anchors:
        b = ANCHOR_BORDER_PX
        image[:b], image[-b:], image[:, :b], image[:, -b:] = ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB, ANCHOR_RGB
        cv2.rectangle(image, (b, b), (b + 62, b + 16), ANCHOR_RGB, thickness=-1)
        cv2.putText(
            image, "ANCHOR", (b + 3, b + 12), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1, cv2.LINE_AA
        )
    if opts.bad_frames and bad:
        label = f"BAD: {result.quality.reasons[row] or 'bad'}"
        cv2.putText(image, label, (8, h - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2, cv2.LINE_AA)
    return image


# -- text --------------------------------------------------------------------------------------


class GlyphFont:
    """A tiny bitmap font: each character is rendered once with Pillow's bundled font, then reused.

    Pillow ships its default font inside the package (no download); drawing a label is a few
    NumPy blends of cached glyph masks.
    """

    def __init__(self, size_px: int) -> None:
        from PIL import ImageFont

        self.size_px = int(size_px)
        self._font = ImageFont.load_default(size=self.size_px)
        ascent, descent = self._font.getmetrics()
        self.height_px = int(ascent + descent)
        self._glyphs: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def glyph(self, char: str) -> np.ndarray:
        """(height_px, advance) float32 coverage in [0, 1] of one character."""
        with self._lock:
            hit = self._glyphs.get(char)
            if hit is not None:
                return hit
        from PIL import Image, ImageDraw

        advance = max(1, round(self._font.getlength(char)))
        canvas = Image.new("L", (advance, self.height_px), 0)
        ImageDraw.Draw(canvas).text((0, 0), char, font=self._font, fill=255)
        mask = np.asarray(canvas, np.float32) / 255.0
        mask.setflags(write=False)
        with self._lock:
            self._glyphs[char] = mask
        return mask

    def width_px(self, text: str) -> int:
        return sum(self.glyph(c).shape[1] for c in text)

    def draw(self, image: np.ndarray, text: str, x: int, y: int, rgb: tuple[int, int, int]) -> int:
        """Blend ``text`` into ``image`` (H, W, 3) uint8 with its top-left at (x, y), clipped.

        Returns
        -------
        The x just after the last character.
        """
        colour = np.asarray(rgb, np.float32)
        h_img, w_img = image.shape[:2]
        for char in text:
            mask = self.glyph(char)
            gh, gw = mask.shape
            x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + gw, w_img), min(y + gh, h_img)
            if x0 < x1 and y0 < y1 and char != " ":
                a = mask[y0 - y : y1 - y, x0 - x : x1 - x, None]
                region = image[y0:y1, x0:x1].astype(np.float32)
                image[y0:y1, x0:x1] = (region + a * (colour - region) + 0.5).astype(np.uint8)
            x += gw
        return x


@functools.lru_cache(maxsize=8)
def glyph_font(size_px: int) -> GlyphFont:
    """A shared :class:`GlyphFont` per pixel size."""
    return GlyphFont(size_px)
