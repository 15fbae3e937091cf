"""llava-ov2 geometry stage: the canvas block grid, and (clean) the crop that keeps the aspect ratio."""

from __future__ import annotations

import math
from dataclasses import dataclass

from backend.config import PROFILES, Profile, param, validate_fields
from backend.records import Geometry, RunWarning, VideoInfo
from backend.selectors.llava_ov2.quirks import cite, quirk_on, quirk_warning
from backend.stages.geometry import check_frame_size


@dataclass(frozen=True, kw_only=True)
class CanvasConfig:
    """Patch, block and pixel budget of the canvases (lmms-video-utils' names)."""

    patch: int = param(14, label="Patch", help="ViT patch side in pixels", min=1, max=256, step=1)
    block: int = param(2, label="Block", help="patches per block side (2: 2×2 blocks)", min=1, max=16, step=1)
    max_pixels: int = param(
        150000, label="Max pixels", help="canvas area budget in pixels", min=1, max=100_000_000, step=1
    )
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity rounds the stored aspect ratio and stretches (lmms-video-utils); clean fits the "
        "display aspect ratio and crops the sliver the grid cannot hold",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)

    @property
    def block_px(self) -> int:
        return self.patch * self.block


def block_grid(max_pixels: int, block_px: int, ratio: float) -> tuple[int, int]:
    """(hp, wp) blocks of a canvas for a width/height ``ratio`` (spec §4).

    Examples
    --------
    >>> block_grid(150000, 28, 16 / 9)
    (10, 18)
    >>> block_grid(150000, 28, 4 / 3)
    (12, 15)
    """
    target = max(1, max_pixels // (block_px * block_px))
    hp = max(1, round(math.sqrt(target / ratio)))
    wp = max(1, round(hp * ratio))
    while hp * wp > target and wp > 1:
        wp -= 1
    while hp * wp > target and hp > 1:
        hp -= 1
    return hp, wp


@dataclass(frozen=True)
class CanvasGeometry:
    """The canvas geometry and the source region resized onto it."""

    geometry: Geometry
    crop: tuple[int, int, int, int]
    """(top, left, height, width) of the stored frame that is resized (the whole frame in parity)."""
    warnings: tuple[RunWarning, ...]


def canvas_geometry(
    info: VideoInfo, sample_aspect_ratio: float | None, *, config: CanvasConfig
) -> CanvasGeometry:
    """The canvas size for a video.

    Parity: the grid of the stored width/height, every frame stretched onto it. Clean: the grid
    of the display aspect ratio (width × SAR / height), and a centred crop of the stored frame to
    the grid's aspect ratio, so nothing is stretched.

    Returns
    -------
    CanvasGeometry whose ``geometry.processed_hw`` is (hp × block_px, wp × block_px).
    """
    check_frame_size(info.width, info.height, path=info.path)
    h0, w0 = info.height, info.width
    sar = sample_aspect_ratio if sample_aspect_ratio and sample_aspect_ratio > 0 else 1.0
    warnings: list[RunWarning] = []
    bp = config.block_px
    if quirk_on(config.profile, "aspect_bent"):
        hp, wp = block_grid(config.max_pixels, bp, w0 / h0)
        crop = (0, 0, h0, w0)
        bent = (wp / hp) / (w0 * sar / h0)
        if sar != 1.0 or abs(bent - 1) > 0.005:
            warnings.append(
                quirk_warning(
                    "aspect_bent",
                    f"{w0}x{h0}"
                    + (f" with sample aspect ratio {sar:.4g}" if sar != 1.0 else "")
                    + f" shown at {wp * bp}x{hp * bp}: stretched ×{bent:.3f} horizontally "
                    f"({cite('aspect_bent')})",
                )
            )
    else:
        dar = w0 * sar / h0
        hp, wp = block_grid(config.max_pixels, bp, dar)
        # The stored-pixel region whose display aspect equals the grid's: crop the longer side.
        want = (wp / hp) / sar  # stored width / height of the region
        if w0 / h0 > want:
            cw = max(1, min(w0, round(h0 * want)))
            crop = (0, (w0 - cw) // 2, h0, cw)
        else:
            ch = max(1, min(h0, round(w0 / want)))
            crop = ((h0 - ch) // 2, 0, ch, w0)
    geometry = Geometry(
        orig_hw=(h0, w0),
        prepared_hw=(hp * bp, wp * bp),
        processed_hw=(hp * bp, wp * bp),
        patch=config.patch,
        block_size=config.block,
    )
    return CanvasGeometry(geometry=geometry, crop=crop, warnings=tuple(warnings))
