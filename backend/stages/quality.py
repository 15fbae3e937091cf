"""Bad-frame stage: flag black, solid-colour and green-corrupted frames."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

# OpenCV loads in the functions that use it: the option classes import this module for
# QualityConfig, and a batch re-run that skips everything must not load it.
from backend.config import param, validate_fields
from backend.records import DecodedFrames, FrameQuality
from native import PixelStats


@dataclass(frozen=True, kw_only=True)
class QualityConfig:
    """Thresholds of the bad-frame rule (cvp defaults)."""

    black_mean: float = param(8.0, label="Black mean Y", help="mean luma at or below → black", min=0, max=255)
    black_std: float = param(6.0, label="Black std Y", help="luma std at or below → black", min=0, max=255)
    solid_std: float = param(
        4.0, label="Solid std", help="per-channel std at or below → solid", min=0, max=255
    )
    solid_range: int = param(
        12, label="Solid range", help="per-channel max−min at or below → solid", min=0, max=255
    )
    green_fraction: float = param(
        0.35,
        label="Green fraction",
        help="share of G≥180, R≤90, B≤90 pixels → green corruption",
        min=0,
        max=1,
    )
    threads: int = param(2, label="Threads", help="threads for the per-frame statistics", min=1, max=64)

    def __post_init__(self) -> None:
        validate_fields(self)


def luma(rgb: np.ndarray) -> np.ndarray:
    """OpenCV's integer BT.601 luma, (4899·R + 9617·G + 1868·B + 8192) >> 14, (H, W) uint8."""
    import cv2

    return cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2YUV)[:, :, 0]


# luma()'s weights sum to 1 and each pixel's luma is its weighted RGB rounded, so a frame's
# mean luma lies within ±0.5 of the weighted channel means (checked over all 2^24 colours).
_LUMA_WEIGHTS = np.array([4899, 9617, 1868], dtype=np.float64) / 16384


def frame_bad_reason(rgb: np.ndarray, config: QualityConfig, *, stats: PixelStats | None = None) -> str:
    """'' for a usable frame, else ``black``, ``solid`` or ``green``.

    The decisions equal numpy float64 mean/std comparisons (cvp's rule). Every channel's
    mean and std (from ``stats`` when the decode worker's kernel gathered them, else one
    OpenCV pass) rule out each verdict whose necessary condition clearly fails (black
    needs a dark mean, solid a flat channel), so luma and the exact numpy figures are
    computed only near a threshold.

    Parameters
    ----------
    rgb : (H, W, 3) uint8 RGB frame.
    config : thresholds.
    stats : exact sums of exactly these pixels (:class:`native.PixelStats`).
    """
    import cv2

    if rgb.size == 0:
        return "empty"
    rgb = np.ascontiguousarray(rgb)
    if stats is not None:
        means, stds = stats.means(), stats.stds()
    else:
        means, stds = (v.ravel() for v in cv2.meanStdDev(rgb))
    r_approx, g_approx, b_approx = (float(v) for v in means)

    def near_or_below(approx: float, limit: float) -> bool:
        return approx <= limit + 1e-6 * max(1.0, abs(limit))

    def near_or_above(approx: float, limit: float) -> bool:
        return approx >= limit - 1e-6 * max(1.0, abs(limit))

    maybe_black = near_or_below(float(_LUMA_WEIGHTS @ means) - 0.5, config.black_mean)
    # Solid needs every channel's std at or below the limit (checked exactly below).
    maybe_solid = all(near_or_below(float(s), config.solid_std) for s in stds)
    if maybe_black or maybe_solid:
        y = luma(rgb)
        y_mean_approx, y_std_approx = (float(v[0, 0]) for v in cv2.meanStdDev(y))
        if near_or_below(y_mean_approx, config.black_mean) and near_or_below(y_std_approx, config.black_std):
            if float(y.mean()) <= config.black_mean and float(y.std()) <= config.black_std:
                return "black"
        if near_or_below(y_std_approx, config.solid_std) and float(y.std()) <= config.solid_std:
            channels = [rgb[..., c] for c in (2, 1, 0)]
            if all(float(c.std()) <= config.solid_std for c in channels) and all(
                int(c.max()) - int(c.min()) <= config.solid_range for c in channels
            ):
                return "solid"
    count = rgb.shape[0] * rgb.shape[1]
    if stats is not None:
        green = stats.green
    else:
        green = cv2.countNonZero(cv2.inRange(rgb, (0, 180, 0), (90, 255, 90)))
    if green / count >= config.green_fraction:  # exact: integer count / N, as numpy's mean
        return "green"
    if near_or_above(g_approx, 120) and near_or_above(g_approx - max(r_approx, b_approx), 80):
        r_mean, g_mean, b_mean = (float(rgb[..., c].mean()) for c in range(3))
        if g_mean > 120 and g_mean - max(r_mean, b_mean) > 80 and float(rgb[..., 1].std()) < 50:
            return "green"
    return ""


def assess_frames(
    decoded: DecodedFrames, *, config: QualityConfig, precomputed: Mapping[int, str] | None = None
) -> FrameQuality:
    """Bad-frame mask of the decoded candidates.

    Parameters
    ----------
    decoded : (n, H, W, 3) RGB pixels.
    config : thresholds.
    precomputed : ``frame_bad_reason(pixels, config)`` already computed for some source
        frames (keyed by ``decoded.bitcost_source`` values, on exactly those pixels with
        this config), e.g. by the decode workers; the others are computed here.

    Returns
    -------
    FrameQuality with ``good`` (n,) bool and a reason per frame.
    """
    # Rows that share a source (repeated candidates, parity backfill) share pixels.
    first_row: dict[int, int] = {}
    for row, key in enumerate(decoded.bitcost_source.tolist()):
        first_row.setdefault(key, row)
    verdicts = {k: precomputed[k] for k in first_row if k in precomputed} if precomputed else {}
    todo = [k for k in first_row if k not in verdicts]
    if todo:
        # OpenCV releases the GIL, so threads overlap the per-frame statistics.
        with ThreadPoolExecutor(max_workers=config.threads) as pool:
            found = pool.map(lambda k: frame_bad_reason(decoded.pixels[first_row[k]], config), todo)
            verdicts.update(zip(todo, found, strict=True))
    reasons = tuple(verdicts[key] for key in decoded.bitcost_source.tolist())
    good = np.asarray([not r for r in reasons], dtype=bool)
    return FrameQuality(good=good, reasons=reasons)
