"""Bad-frame stage: flag black, solid-colour and green-corrupted frames."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.configbase import param, validate_fields
from backend.records import DecodedFrames, FrameQuality


@dataclass(frozen=True, kw_only=True)
class QualityConfig:
    """Thresholds of the bad-frame rule (cvp defaults)."""

    black_mean: float = param(8.0, label="Black mean Y", help="mean luma at or below → black", min=0, max=255)
    black_std: float = param(6.0, label="Black std Y", help="luma std at or below → black", min=0, max=255)
    solid_std: float = param(4.0, label="Solid std", help="per-channel std at or below → solid", min=0, max=255)
    solid_range: int = param(12, label="Solid range", help="per-channel max−min at or below → solid", min=0, max=255)
    green_fraction: float = param(
        0.35, label="Green fraction", help="share of G≥180, R≤90, B≤90 pixels → green corruption", min=0, max=1
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def luma(rgb: np.ndarray) -> np.ndarray:
    """OpenCV's integer BT.601 luma of an RGB image, (H, W) uint8."""
    r = rgb[..., 0].astype(np.int32)
    g = rgb[..., 1].astype(np.int32)
    b = rgb[..., 2].astype(np.int32)
    return ((4899 * r + 9617 * g + 1868 * b + 8192) >> 14).astype(np.uint8)


def frame_bad_reason(rgb: np.ndarray, config: QualityConfig) -> str:
    """'' for a usable frame, else ``black``, ``solid`` or ``green``."""
    if rgb.size == 0:
        return "empty"
    y = luma(rgb)
    y_mean, y_std = float(y.mean()), float(y.std())
    if y_mean <= config.black_mean and y_std <= config.black_std:
        return "black"
    if y_std <= config.solid_std:
        channels = [rgb[..., c] for c in (2, 1, 0)]
        if all(float(c.std()) <= config.solid_std for c in channels) and all(
            int(c.max()) - int(c.min()) <= config.solid_range for c in channels
        ):
            return "solid"
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    green = (g >= 180) & (r <= 90) & (b <= 90)
    if float(green.mean()) >= config.green_fraction:
        return "green"
    g_mean = float(g.mean())
    if g_mean > 120 and g_mean - max(float(r.mean()), float(b.mean())) > 80 and float(g.std()) < 50:
        return "green"
    return ""


def assess_frames(decoded: DecodedFrames, *, config: QualityConfig) -> FrameQuality:
    """Bad-frame mask of the decoded candidates.

    Parameters
    ----------
    decoded : (n, H, W, 3) RGB pixels.
    config : thresholds.

    Returns
    -------
    FrameQuality with ``good`` (n,) bool and a reason per frame.
    """
    reasons = tuple(frame_bad_reason(frame, config) for frame in decoded.pixels)
    good = np.asarray([not r for r in reasons], dtype=bool)
    return FrameQuality(good=good, reasons=reasons)
