"""Geometry stage: the decoder output size and the processed patch grid."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from backend.config import PROFILES, Profile, param, validate_fields
from backend.errors import UnsupportedVideoError
from backend.quirks import quirk_on
from backend.records import Geometry, VideoInfo

MIN_FRAME_SIDE = 16  # one macroblock; below this no codec grid covers a patch
MAX_ASPECT_RATIO = 200  # longer side / shorter side; cvp's smart_resize refuses beyond it


@dataclass(frozen=True, kw_only=True)
class GeometryConfig:
    """Patch size and pixel budget (cvp option names)."""

    patch: int = param(14, label="Patch", help="patch side in pixels", min=1, max=256, step=1)
    block_size: int = param(2, label="Block size", help="patches per block side", min=1, max=16, step=1)
    max_pixels: int = param(
        153664, label="Max pixels", help="pixel budget of a processed frame", min=1, max=100_000_000
    )
    min_pixels: int = param(3136, label="Min pixels", help="smallest processed area", min=1, max=100_000_000)
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity resizes twice when rounding overshoots max_pixels (cvp quirk 13); "
        "clean rounds down once instead",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def smart_resize(
    height: int, width: int, *, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """Round (height, width) to multiples of ``factor`` within the pixel budget.

    Examples
    --------
    >>> smart_resize(360, 640, factor=28, min_pixels=3136, max_pixels=153664)
    (280, 504)
    >>> smart_resize(300, 500, factor=28, min_pixels=3136, max_pixels=153664)
    (308, 504)
    """
    if height <= 0 or width <= 0:
        return 0, 0
    if max(height, width) / max(1, min(height, width)) > MAX_ASPECT_RATIO:
        raise ValueError(_aspect_problem(width, height))
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if height * width > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = math.floor((height / beta) / factor) * factor
        w_bar = math.floor((width / beta) / factor) * factor
    elif height * width < min_pixels:
        beta = math.sqrt(min_pixels / max(1, height * width))
        h_bar = math.ceil((height * beta) / factor) * factor
        w_bar = math.ceil((width * beta) / factor) * factor
    return max(factor, h_bar), max(factor, w_bar)


def _aspect_problem(width: int, height: int) -> str:
    ratio = max(width, height) / max(1, min(width, height))
    return (
        f"aspect ratio {ratio:.0f}:1 is too extreme ({width}x{height}). "
        f"Supported aspect ratios are up to {MAX_ASPECT_RATIO}:1."
    )


def check_frame_size(width: int, height: int, *, path: str | Path | None, stage: str = "geometry") -> None:
    """Refuse a frame size the pipeline cannot select on, before anything is decoded.

    Raises
    ------
    UnsupportedVideoError : a side under 16 pixels, or an aspect ratio beyond 200:1, each as
        ``<file>: <problem> (WxH). Supported … .``
    """
    if height < MIN_FRAME_SIDE or width < MIN_FRAME_SIDE:
        raise UnsupportedVideoError(
            f"frame size is too small ({width}x{height}). "
            f"Supported sizes are at least {MIN_FRAME_SIDE}x{MIN_FRAME_SIDE}.",
            path=path,
            stage=stage,
        )
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise UnsupportedVideoError(_aspect_problem(width, height), path=path, stage=stage)


def resolve_geometry(info: VideoInfo, *, config: GeometryConfig) -> Geometry:
    """Decoder output size and processed size for a video.

    Parameters
    ----------
    info : probe result (width, height).
    config : patch, block size and pixel budget.

    Returns
    -------
    Geometry; ``processed_hw`` is a multiple of patch × block_size on both sides.

    Raises
    ------
    UnsupportedVideoError : frames smaller than 16×16 or an extreme aspect ratio.
    """
    h0, w0 = info.height, info.width
    check_frame_size(w0, h0, path=info.path)
    factor = config.patch * config.block_size
    kwargs = {"factor": factor, "min_pixels": config.min_pixels, "max_pixels": config.max_pixels}
    try:
        prepared = smart_resize(h0, w0, **kwargs)
        if quirk_on(config.profile, "double_resize"):
            processed = smart_resize(*prepared, **kwargs)
        else:
            if prepared[0] * prepared[1] > config.max_pixels and h0 * w0 <= config.max_pixels:
                prepared = (
                    max(factor, math.floor(h0 / factor) * factor),
                    max(factor, math.floor(w0 / factor) * factor),
                )
            processed = prepared
    except ValueError as exc:
        raise UnsupportedVideoError(str(exc), path=info.path, stage="geometry") from exc
    return Geometry(
        orig_hw=(h0, w0),
        prepared_hw=prepared,
        processed_hw=processed,
        patch=config.patch,
        block_size=config.block_size,
    )
