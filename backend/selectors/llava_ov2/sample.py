"""llava-ov2 sampling stage: the sample count from the canvas budget or a rate, and the sampled frames."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from backend.config import param, validate_fields
from backend.records import Candidates, RunWarning, VideoInfo

FALLBACK_FPS = 30.0
"""The rate lmms-video-utils assumes for a stream that states none."""


@dataclass(frozen=True, kw_only=True)
class LlavaSampleConfig:
    """How many frames to sample and from which time range (lmms-video-utils' CodecConfig names)."""

    target_canvas: int = param(
        32,
        label="Target canvases",
        help="canvas budget; target_canvas // images_per_group is the number of GOPs",
        min=1,
        max=100000,
        step=1,
    )
    group_size: int = param(
        32,
        label="Group size",
        help="sampled frames per GOP of the budget; the sample count is rounded down to a multiple of it",
        min=1,
        max=100000,
        step=1,
    )
    images_per_group: int = param(
        4,
        label="Images per group",
        help="canvases per GOP: one I-canvas plus images_per_group - 1 P-canvases",
        min=1,
        max=64,
        step=1,
    )
    start_time: float = param(
        0.0, label="Start (s)", help="first second of the range (0: the start)", min=0.0, max=1e7
    )
    end_time: float = param(
        0.0, label="End (s)", help="end of the range in seconds (0: the end)", min=0.0, max=1e7
    )
    target_fps: float = param(
        0.0,
        label="Target fps",
        help="> 0: sample this many frames per second instead of the canvas budget",
        min=0.0,
        max=1000.0,
    )
    max_frames: int = param(
        0, label="Max frames", help="cap on the sample count (0: none)", min=0, max=10_000_000
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.target_canvas % self.images_per_group:
            raise ValueError(
                f"Invalid target canvas ({self.target_canvas}). Supported values are multiples of "
                f"images_per_group ({self.images_per_group})."
            )
        if self.group_size % self.images_per_group:
            raise ValueError(
                f"Invalid group size ({self.group_size}). Supported values are multiples of "
                f"images_per_group ({self.images_per_group})."
            )
        if self.end_time > 0 and self.start_time >= self.end_time:
            raise ValueError(
                f"Invalid start time ({self.start_time}). Supported values are below end_time "
                f"({self.end_time})."
            )


def sample_count(duration_secs: float, config: LlavaSampleConfig) -> tuple[int, tuple[RunWarning, ...]]:
    """The number of frames to sample (spec §2).

    ``target_fps`` > 0: round((end − start) × target_fps), end defaulting to ``duration_secs``;
    otherwise (target_canvas // images_per_group) × group_size. Capped by ``max_frames``, then
    rounded down to a multiple of group_size and raised to at least group_size.

    Examples
    --------
    >>> sample_count(10.0, LlavaSampleConfig())[0]
    256
    >>> sample_count(10.0, LlavaSampleConfig(target_fps=2.5))[0]  # 25 → 0 → at least group_size
    32
    >>> sample_count(30.0, LlavaSampleConfig(target_fps=2.0))[0]
    32
    """
    if config.target_fps > 0:
        end = config.end_time if config.end_time > 0 else duration_secs
        n = round(max(0.0, end - config.start_time) * config.target_fps)
    else:
        n = (config.target_canvas // config.images_per_group) * config.group_size
    if config.max_frames > 0:
        n = min(n, config.max_frames)
    rounded = (n // config.group_size) * config.group_size
    warnings: tuple[RunWarning, ...] = ()
    if rounded < n:
        warnings = (
            RunWarning(
                "sample_count_rounded",
                f"{n} frames to sample rounded down to {max(rounded, config.group_size)}, a multiple of "
                f"group_size {config.group_size}",
            ),
        )
    return max(rounded, config.group_size), warnings


def sample_indices(
    total: int, fps: float, n: int, config: LlavaSampleConfig
) -> tuple[np.ndarray, tuple[RunWarning, ...]]:
    """The sampled frame indices within the time range (spec §3).

    Parameters
    ----------
    total : frames the video has.
    fps : its frame rate (the sub-range is cut at round(seconds × fps)).
    n : frames wanted.

    Returns
    -------
    ((m,) int32 ascending indices, warnings); m = n unless the range holds fewer frames.

    Raises
    ------
    ValueError : the range is empty or starts past the end.

    Examples
    --------
    >>> sample_indices(10, 30.0, 4, LlavaSampleConfig())[0].tolist()
    [0, 3, 6, 9]
    >>> sample_indices(8, 30.0, 3, LlavaSampleConfig())[0].tolist()
    [0, 4, 7]
    """
    s = max(0, round(config.start_time * fps))
    e = min(total, round(config.end_time * fps)) if config.end_time > 0 else total
    if s >= total:
        raise ValueError(
            f"Invalid start time ({config.start_time}). Supported values are before the end of the video "
            f"({total / fps:.3f} s)."
        )
    if e <= s:
        raise ValueError(
            f"Invalid time range ({config.start_time}–{config.end_time} s). Supported values hold at "
            "least one frame."
        )
    available = e - s
    warnings: tuple[RunWarning, ...] = ()
    if n > available:
        warnings = (RunWarning("sample_count_clamped", f"{n} frames wanted, the range holds {available}"),)
        n = available
    if n >= available:
        ids = np.arange(s, e)
    else:  # numpy's round: half to even, as the reference
        ids = np.round(np.linspace(s, e - 1, n)).astype(np.int64)
    return ids.astype(np.int32), warnings


def stream_fps(average_rate: float | None, base_rate: float | None) -> float:
    """The stream's average rate, else its base rate, else 30 (the reference's rule)."""
    for rate in (average_rate, base_rate):
        if rate and math.isfinite(rate) and rate > 0:
            return float(rate)
    return FALLBACK_FPS


def sample(info: VideoInfo, fps: float, *, config: LlavaSampleConfig) -> Candidates:
    """Candidates of a llava-ov2 run: the frames lmms-video-utils samples.

    Parameters
    ----------
    info : probe result (frame count, container duration).
    fps : the stream rate from :func:`stream_fps`.
    config : budget, rate and range.

    Returns
    -------
    Candidates with ``frame_indices`` (m,) int32 ascending and no keyframe handling.
    """
    duration = info.duration_secs if info.duration_secs > 0 else info.total_frames / fps
    n, count_warnings = sample_count(duration, config)
    ids, range_warnings = sample_indices(info.total_frames, fps, n, config)
    debug = {"sampled_frames": int(ids.size), "requested_frames": int(n), "fps": fps}
    return Candidates(
        frame_indices=ids,
        sampled_frame_indices=ids.copy(),
        keyframe_indices=(),
        moved=(),
        debug=debug,
        warnings=count_warnings + range_warnings,
    )
