"""llava-ov2 scoring: per-pixel residuals of consecutive sampled frames, block sums, packet-size weights.

The residual of sampled frame t against frame t − 1 does not depend on the GOP partition, so
it is computed while the frames stream in (only the previous frame is kept); the packet-size
weight, min-max normalised within a GOP, is applied once the GOPs are known. Arithmetic is
float32 in the reference's order (luma as ((0.299 R + 0.587 G) + 0.114 B), block sums added
pixel by pixel in row-major order, as torch's avg_pool2d does), so the block scores equal the
reference's exactly for framediff and mvwarp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import native
from backend.config import Registry, Variant, param, validate_fields

_F32 = np.float32


def luma(rgb: np.ndarray) -> np.ndarray:
    """(H, W) float32 luma 0.299 R + 0.587 G + 0.114 B of (H, W, 3) RGB, in the reference's float32 order."""
    if rgb.dtype == np.uint8:
        return native.luma(rgb)
    f = np.asarray(rgb, _F32)
    return (f[..., 0] * _F32(0.299) + f[..., 1] * _F32(0.587)) + f[..., 2] * _F32(0.114)


block_sums = native.block_sums


def patch_sums(values: np.ndarray, patch: int) -> np.ndarray:
    """(H // patch, W // patch) float32 patch sums of an (H, W) map, for display (not bit-exact)."""
    h, w = values.shape
    hp, wp = h // patch, w // patch
    v = values[: hp * patch, : wp * patch].reshape(hp, patch, wp, patch)
    return v.sum(axis=(1, 3), dtype=np.float64).astype(_F32)


_SOBEL_X = ((0, 0, -1), (0, 2, 1), (1, 0, -2), (1, 2, 2), (2, 0, -1), (2, 2, 1))
_SOBEL_Y = ((0, 0, -1), (0, 1, -2), (0, 2, -1), (2, 0, 1), (2, 1, 2), (2, 2, 1))
"""The Sobel kernels' non-zero taps (row, column, weight), in row-major order."""


def sobel_weight(y: np.ndarray, edge_weight: float) -> np.ndarray:
    """(1 − w) + w × |Sobel(Y)| / (max + 1e-6), per pixel, float32 (zero padding at the border).

    The taps are added in row-major order, as torch's convolution adds them; the zero taps are
    left out (adding ±0 changes at most the sign of a zero, which the magnitude squares away)
    and the ±1, ±2 products are exact in float32.
    """
    h, w = y.shape
    p = np.zeros((h + 2, w + 2), _F32)
    p[1:-1, 1:-1] = y
    grads = []
    for taps in (_SOBEL_X, _SOBEL_Y):
        g = np.zeros((h, w), _F32)
        for i, j, k in taps:
            tap = p[i : i + h, j : j + w]
            if k == 1:
                g += tap
            elif k == -1:
                g -= tap
            else:
                g += tap * _F32(k)
        grads.append(g)
    gx, gy = grads
    np.multiply(gx, gx, out=gx)
    np.multiply(gy, gy, out=gy)
    mag = np.sqrt(gx + gy)
    mag /= mag.max() + _F32(1e-6)
    mag *= _F32(edge_weight)
    mag += _F32(1.0 - edge_weight)
    return mag


# --------------------------------------------------------------------------- motion fields


motion_field = native.motion_field


def resize_field(field: np.ndarray, out_hw: tuple[int, int], *, torch_threads: int) -> np.ndarray:
    """A motion field resized to the canvas with the reference's bilinear, vectors scaled to its pixels."""
    h, w = out_hw
    fh, fw = field.shape[:2]
    if (fh, fw) == (h, w):
        return field
    out = native.bilinear(field, out_hw, torch_threads=torch_threads)
    out[..., 0] *= _F32(float(w) / float(fw))
    out[..., 1] *= _F32(float(h) / float(fh))
    return out


def warp_previous(previous: np.ndarray, field: np.ndarray) -> np.ndarray:
    """The previous frame sampled at pixel + (dx, dy) (bilinear, border padding), (H, W, 3) float32."""
    return native.warp(np.asarray(previous, _F32), field)


# --------------------------------------------------------------------------- residuals


@dataclass(frozen=True)
class FramePair:
    """What a residual needs of a sampled frame and the one before it (canvas size)."""

    current: np.ndarray
    """(H, W, 3) uint8."""
    previous: np.ndarray
    """(H, W, 3) uint8."""
    current_luma: np.ndarray
    previous_luma: np.ndarray
    field: np.ndarray | None
    """(H, W, 2) float32 motion field of the current frame at canvas size (mvwarp modes)."""


def framediff(pair: FramePair, *, config: ScoreConfig) -> np.ndarray:
    """|Y_t − Y_t−1| per pixel, (H, W) float32."""
    return np.abs((pair.current_luma - pair.previous_luma).astype(_F32))


def mvwarp(pair: FramePair, *, config: ScoreConfig) -> np.ndarray:
    """|Y_t − Y(previous warped by the current motion field)|; framediff where the field is all zero."""
    if pair.field is None or not np.any(pair.field):
        return framediff(pair, config=config)
    warped = warp_previous(pair.previous, pair.field)
    return np.abs((pair.current_luma - luma(warped)).astype(_F32))


def mvwarp_edge(pair: FramePair, *, config: ScoreConfig) -> np.ndarray:
    """The mvwarp residual times the Sobel edge weight of the current frame."""
    return (mvwarp(pair, config=config) * sobel_weight(pair.current_luma, config.mv_edge_weight)).astype(_F32)


@dataclass(frozen=True)
class ScoreMode(Variant):
    """A score mode: its residual function and whether it needs motion vectors."""

    motion_vectors: bool = False


SCORE_MODES: Registry[ScoreMode] = Registry(
    "score mode",
    (
        ScoreMode("framediff", framediff, "frame difference |Y_t − Y_t−1|"),
        ScoreMode(
            "mvwarp",
            mvwarp,
            "residual after warping the previous frame by the codec's motion vectors",
            motion_vectors=True,
        ),
        ScoreMode(
            "mvwarp_edge",
            mvwarp_edge,
            "mvwarp residual weighted towards edges (Sobel of the current frame)",
            motion_vectors=True,
        ),
    ),
)


# --------------------------------------------------------------------------- packet-size weights


def additive(bc: np.ndarray, alpha: float) -> np.ndarray:
    """1 + α·bc."""
    return (_F32(1.0) + (_F32(alpha) * bc).astype(_F32)).astype(_F32)


def multiplicative(bc: np.ndarray, alpha: float) -> np.ndarray:
    """(bc + 1e-6)^α."""
    return np.power((bc + _F32(1e-6)).astype(_F32), _F32(alpha)).astype(_F32)


def no_weight(bc: np.ndarray, alpha: float) -> None:
    """No weight (``off``)."""
    return None


BITCOST_WEIGHTS: Registry[Variant] = Registry(
    "bitcost score mode",
    (
        Variant("additive", additive, "block scores × (1 + α·normalised packet size)"),
        Variant("multiplicative", multiplicative, "block scores × (normalised packet size + 1e-6)^α"),
        Variant("off", no_weight, "no packet-size weight"),
    ),
)


@dataclass(frozen=True, kw_only=True)
class ScoreConfig:
    """Score mode and the packet-size weight (lmms-video-utils' names)."""

    score_mode: str = param(
        "framediff",
        label="Score mode",
        help="framediff; mvwarp (motion-compensated residual, H.264/MPEG motion vectors); "
        "mvwarp_edge (mvwarp weighted towards edges)",
        choices=SCORE_MODES.names,
    )
    mv_edge_weight: float = param(
        0.5, label="Edge weight", help="Sobel weighting strength of mvwarp_edge", min=0.0, max=1.0
    )
    bitcost_score_weight: float = param(
        0.5,
        label="Bitcost weight α",
        help="strength of the packet-size weight (mvwarp modes)",
        min=0.0,
        max=100.0,
    )
    bitcost_score_mode: str = param(
        "additive",
        label="Bitcost weighting",
        help="additive: ×(1 + α·bc); multiplicative: ×(bc + 1e-6)^α; off (mvwarp modes only)",
        choices=BITCOST_WEIGHTS.names,
    )

    def __post_init__(self) -> None:
        validate_fields(self)

    @property
    def residual(self) -> Callable[..., np.ndarray]:
        return SCORE_MODES.lookup(self.score_mode).function

    @property
    def weighted(self) -> bool:
        """Whether block scores get the packet-size weight (mvwarp modes, mode not off)."""
        return SCORE_MODES.lookup(self.score_mode).motion_vectors and self.bitcost_score_mode != "off"


def gop_weights(packet_sizes: np.ndarray, *, config: ScoreConfig) -> np.ndarray | None:
    """Per-row weights of one GOP's score rows (frames 1 … n_g − 1), or None without weighting.

    ``packet_sizes`` are the GOP's frames' sizes (n_g,); they are min-max normalised over
    frames 1 … n_g − 1 (denominator at least 1e-8) and turned into weights by the mode.
    """
    if not config.weighted:
        return None
    bc = np.asarray(packet_sizes, _F32)[1:]
    if bc.size == 0:
        return bc
    lo, hi = bc.min(), bc.max()
    denom = max(_F32(hi - lo), _F32(1e-8))
    norm = ((bc - lo).astype(_F32) / denom).astype(_F32)
    return BITCOST_WEIGHTS.lookup(config.bitcost_score_mode).function(norm, config.bitcost_score_weight)
