"""Container facts through PyAV: the first video stream's header and every packet, no ffprobe binary."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np


@dataclass(frozen=True)
class ContainerProbe:
    """Plain facts read from a container with PyAV (no ffprobe binary involved)."""

    format_name: str
    codec_name: str
    width: int
    height: int
    avg_frame_rate: Fraction | None
    nb_frames: int
    duration_secs: float
    stream_bit_rate: int
    format_bit_rate: int
    time_base: Fraction
    start_pts: int | None
    packet_pts: np.ndarray
    packet_dts: np.ndarray
    packet_size_bytes: np.ndarray
    packet_is_keyframe: np.ndarray
    sample_aspect_ratio: tuple[int, int] = (1, 1)
    """(num, den) of the stream's SAR; (1, 1) when square or unset."""


def probe_container(path: str | Path) -> ContainerProbe:
    """Demux the first video stream and read its header facts and every packet.

    Raises
    ------
    av.FFmpegError, ValueError : the backend turns these into ``ProbeError``.
    """
    with av.open(str(path), metadata_errors="ignore") as container:
        if not container.streams.video:
            raise ValueError("no video stream")
        stream = container.streams.video[0]
        ctx = stream.codec_context
        if ctx is None:  # a damaged header can name a codec that no decoder knows
            raise ValueError("no decoder for the video stream's codec")
        pts: list[int] = []
        dts: list[int] = []
        sizes: list[int] = []
        keys: list[bool] = []
        missing = -(2**62)
        for packet in container.demux(stream):
            if packet.size <= 0:
                continue  # flush packets carry no frame
            pts.append(missing if packet.pts is None else int(packet.pts))
            dts.append(missing if packet.dts is None else int(packet.dts))
            sizes.append(int(packet.size))
            keys.append(bool(packet.is_keyframe))
        return ContainerProbe(
            format_name=str(container.format.name),
            codec_name=str(ctx.name or "").lower(),
            width=int(ctx.width or 0),
            height=int(ctx.height or 0),
            avg_frame_rate=None if stream.average_rate is None else Fraction(stream.average_rate),
            nb_frames=int(stream.frames or 0),
            duration_secs=(container.duration or 0) / 1_000_000,
            stream_bit_rate=int(stream.bit_rate or 0),
            format_bit_rate=int(container.bit_rate or 0),
            time_base=Fraction(stream.time_base or Fraction(1, 90000)),
            start_pts=None if stream.start_time is None else int(stream.start_time),
            packet_pts=np.asarray(pts, dtype=np.int64),
            packet_dts=np.asarray(dts, dtype=np.int64),
            packet_size_bytes=np.asarray(sizes, dtype=np.int64),
            packet_is_keyframe=np.asarray(keys, dtype=bool),
            sample_aspect_ratio=_sar(stream),
        )


def _sar(stream: Any) -> tuple[int, int]:
    """The stream's sample aspect ratio as (num, den), (1, 1) when unset or nonsense."""
    sar = stream.sample_aspect_ratio or getattr(stream.codec_context, "sample_aspect_ratio", None)
    if not sar or sar.numerator <= 0 or sar.denominator <= 0:
        return (1, 1)
    return (int(sar.numerator), int(sar.denominator))


@functools.lru_cache(maxsize=64)
def stream_size(path: str, mtime_ns: int, size_bytes: int) -> tuple[int, int]:
    """(width, height) of the first video stream, from the header only (cached per file version)."""
    with av.open(path, metadata_errors="ignore") as container:
        ctx = container.streams.video[0].codec_context
        return int(ctx.width or 0), int(ctx.height or 0)
