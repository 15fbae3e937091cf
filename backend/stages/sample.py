"""Sampling stage: which frames become candidates (uniform, fps, packet-size peaks)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.config import PROFILES, Profile, Registry, Variant, param, validate_fields
from backend.quirks import quirk_on
from backend.records import VideoInfo


@dataclass(frozen=True)
class Sampled:
    """Sampler output before keyframe handling."""

    frame_indices: np.ndarray
    """(m,) int32."""
    debug: dict[str, Any]


def linspace_int(start: int, stop: int, count: int) -> np.ndarray:
    """numpy ``linspace(start, stop, count, dtype=int32)``: truncation, last = stop."""
    return np.linspace(start, stop, count, dtype=np.int32)


def _fps_ids(total: int, fps: float, sample_fps: float) -> np.ndarray:
    fps_use = fps if fps > 0 else 30.0
    rate = sample_fps if sample_fps > 0 else 4.0
    count = max(1, math.ceil((max(1, total) / fps_use) * rate))
    ids = [min(max(round((i / rate) * fps_use), 0), total - 1) for i in range(count)]
    return np.asarray(ids, dtype=np.int32)


# --------------------------------------------------------------------------- the samplers
# Each takes the probe and the stage config and returns its frame indices with its own debug
# entries; :func:`sample` adds the mode and the count.


def sample_uniform(info: VideoInfo, *, config: SampleConfig) -> Sampled:
    """N evenly spaced frames, truncated like numpy's integer linspace (repeats when N > frames)."""
    t1, n1 = max(1, info.total_frames), max(1, config.num_sampled_frames)
    ids = np.zeros(n1, dtype=np.int32) if t1 == 1 else np.clip(linspace_int(0, t1 - 1, n1), 0, t1 - 1)
    return Sampled(frame_indices=ids, debug={})


def sample_all(info: VideoInfo, *, config: SampleConfig) -> Sampled:
    """Every frame."""
    return Sampled(frame_indices=np.arange(max(1, info.total_frames), dtype=np.int32), debug={})


def sample_at_fps(info: VideoInfo, *, config: SampleConfig) -> Sampled:
    """``sample_fps`` frames per second of video."""
    return Sampled(frame_indices=_fps_ids(info.total_frames, info.fps, config.sample_fps), debug={})


def sample_packet_peaks(info: VideoInfo, *, config: SampleConfig) -> Sampled:
    """Frames at the peaks of binned packet energy; fps sampling when the stream has none."""
    peaks = packet_peak_frame_indices(info, config)
    if peaks.size == 0:
        return Sampled(_fps_ids(info.total_frames, info.fps, config.sample_fps), debug={"fallback": "fps"})
    return Sampled(frame_indices=peaks, debug={})


def sample_fps_and_packet_peaks(info: VideoInfo, *, config: SampleConfig) -> Sampled:
    """The fps frames and the packet-size peaks, sorted and unique; fps sampling without peaks."""
    peaks = packet_peak_frame_indices(info, config)
    fps_ids = _fps_ids(info.total_frames, info.fps, config.sample_fps)
    if peaks.size == 0:
        return Sampled(frame_indices=fps_ids, debug={"fallback": "fps"})
    return Sampled(frame_indices=np.unique(np.concatenate([fps_ids, peaks])).astype(np.int32), debug={})


SAMPLERS: Registry[Variant] = Registry(
    "frame sampling mode",
    (
        Variant("uniform_count", sample_uniform, "N evenly spaced frames"),
        Variant("all_frames", sample_all, "every frame (no keyframe avoidance)"),
        Variant("fps", sample_at_fps, "sample_fps frames per second"),
        Variant("pkt_size_peak", sample_packet_peaks, "packet-size peaks"),
        Variant("fps_plus_pkt_size_peak", sample_fps_and_packet_peaks, "fps frames plus packet-size peaks"),
        # Dispatched through SampleConfig.effective_mode: pkt_size_peak, or fps in parity.
        Variant("pkt_peak", sample_packet_peaks, "alias of pkt_size_peak; parity runs fps (cvp quirk 3)"),
    ),
)
SAMPLING_MODES = SAMPLERS.names


@dataclass(frozen=True, kw_only=True)
class SampleConfig:
    """Frame sampling parameters (cvp option names)."""

    frame_sampling_mode: str = param(
        "uniform_count",
        label="Sampling mode",
        help="uniform_count: N evenly spaced frames; fps: sample_fps per second; "
        "pkt_size_peak: packet-size peaks; pkt_peak is an alias (cvp runs fps for it)",
        choices=SAMPLING_MODES,
    )
    num_sampled_frames: int = param(
        1024, label="Sampled frames", help="N for uniform_count", min=1, max=100000, step=1
    )
    sample_fps: float = param(
        4.0, label="Sample fps", help="frames per second for fps mode", min=0.01, max=1000.0
    )
    pkt_peak_bin_secs: float = param(
        0.5, label="Peak bin (s)", help="packet-energy bin width", min=0.01, max=60.0
    )
    pkt_peak_cap: int = param(128, label="Peak cap", help="maximum number of peaks", min=1, max=100000)
    pkt_peak_per_sec: float = param(
        1.0, label="Peaks per second", help="peaks per second of video", min=0.0, max=1000.0
    )
    pkt_peak_neighbor: int = param(
        0, label="Peak neighbours", help="frames added each side of a peak", min=0, max=1000
    )
    pkt_peak_smooth_bins: int = param(
        1, label="Peak smoothing", help="moving-mean half-width in bins", min=0, max=1000
    )
    profile: Profile = param(
        "clean", label="Profile", help="parity treats pkt_peak as fps like cvp", choices=PROFILES
    )

    def __post_init__(self) -> None:
        validate_fields(self)

    @property
    def effective_mode(self) -> str:
        """The mode actually run (cvp's CLI silently runs fps for ``pkt_peak``)."""
        if self.frame_sampling_mode == "pkt_peak":
            return "fps" if quirk_on(self.profile, "pkt_peak_is_fps") else "pkt_size_peak"
        return self.frame_sampling_mode


def packet_peak_frame_indices(info: VideoInfo, config: SampleConfig) -> np.ndarray:
    """Frames at the peaks of binned non-keyframe packet energy (log1p of size).

    Returns
    -------
    (k,) int32 sorted unique frame indices; empty when the stream has no usable packets.
    """
    keep = (~info.packet_is_keyframe) & (info.packet_pts_secs >= 0) & (info.packet_size_bytes >= 0)
    times = info.packet_pts_secs[keep]
    if times.size == 0:
        return np.zeros(0, dtype=np.int32)
    energy_per_packet = np.log1p(info.packet_size_bytes[keep].astype(np.float64))
    bin_secs = config.pkt_peak_bin_secs
    nbins = max(1, math.ceil((float(times.max()) + 1e-9) / bin_secs))
    bins = np.minimum(nbins - 1, np.floor(times / bin_secs).astype(np.int64))
    energy = np.zeros(nbins, dtype=np.float64)
    np.add.at(energy, bins, energy_per_packet)
    smooth = config.pkt_peak_smooth_bins
    if smooth > 0 and nbins > 1:
        energy = np.array(
            [energy[max(0, i - smooth) : min(nbins, i + smooth + 1)].mean() for i in range(nbins)]
        )
    centres = (np.arange(nbins) + 0.5) * bin_secs
    fps_use = info.fps if info.fps > 0 else 30.0
    duration = info.total_frames / fps_use
    k = max(1, round(duration * config.pkt_peak_per_sec))
    k = min(config.pkt_peak_cap, k, nbins)
    peaks = np.argsort(-energy)[:k]  # quicksort like cvp: tie order is numpy's
    last = info.total_frames - 1
    out: set[int] = set()
    for b in peaks:
        centre = min(max(round(float(centres[b]) * fps_use), 0), last)
        for d in range(-config.pkt_peak_neighbor, config.pkt_peak_neighbor + 1):
            out.add(min(max(centre + d, 0), last))
    return np.asarray(sorted(out), dtype=np.int32)


def sample(info: VideoInfo, *, config: SampleConfig) -> Sampled:
    """Pick candidate frame indices.

    Parameters
    ----------
    info : probe result (uses total_frames, fps and packets).
    config : sampling mode and its parameters.

    Returns
    -------
    Sampled with ``frame_indices`` (m,) int32 in sampler order; uniform_count keeps
    repeats when N exceeds the frame count (as cvp does).

    Examples
    --------
    >>> linspace_int(0, 239, 5).tolist()
    [0, 59, 119, 179, 239]
    """
    sampled = SAMPLERS.lookup(config.effective_mode).function(info, config=config)
    ids = sampled.frame_indices
    debug: dict[str, Any] = {"frame_sampling_mode": config.frame_sampling_mode, **sampled.debug}
    debug["sampled_frames"] = int(ids.size)
    return Sampled(frame_indices=ids.astype(np.int32), debug=debug)
