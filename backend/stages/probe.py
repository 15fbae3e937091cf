"""Probe stage: container and stream facts, packets and keyframes, without ffprobe."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# PyAV (through native) loads in probe(): the option classes import this module
# for ProbeConfig, and a batch re-run that skips everything must not load a decoder.
from backend.config import PROFILES, Profile, param, validate_fields
from backend.errors import InputError, ProbeError
from backend.quirks import quirk_on
from backend.records import VideoInfo

MP4_EXTENSIONS = (".mp4", ".m4v", ".mov", ".m4a", ".3gp", ".3g2")


@dataclass(frozen=True, kw_only=True)
class ProbeConfig:
    """How the probe derives the frame count."""

    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity guesses missing frame counts as round(fps × duration) like cvp; "
        "clean counts the packets",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def check_input_file(path: str | Path) -> Path:
    """Reject paths that cannot be a video before any decoder touches them."""
    p = Path(path)
    if not p.exists():
        raise InputError("file does not exist", path=p, stage="probe")
    if p.is_dir():
        raise InputError("is a directory, not a video file", path=p, stage="probe")
    if p.stat().st_size == 0:
        raise InputError("file is empty (0 bytes)", path=p, stage="probe")
    if not os.access(p, os.R_OK):
        raise InputError("file is not readable", path=p, stage="probe")
    try:
        str(p).encode("utf-8")
    except UnicodeEncodeError:  # the decoders take UTF-8 paths and could not open it
        raise InputError("file name is not valid UTF-8; rename the file", path=p, stage="probe") from None
    return p


def read_mp4_stss(path: str | Path) -> tuple[int, ...] | None:
    """0-based keyframe indices from the first video track's ``stss`` box.

    Returns None for other extensions, files without ``moov`` or tracks without
    ``stss`` (all-intra streams omit it). 0 is always included when a list exists.
    """
    p = Path(path)
    if p.suffix.lower() not in MP4_EXTENSIONS:
        return None
    try:
        data = p.read_bytes()
    except OSError:
        return None

    def boxes(buf: bytes, start: int, end: int):
        pos = start
        while pos + 8 <= end:
            size, kind = struct.unpack(">I4s", buf[pos : pos + 8])
            header = 8
            if size == 1:
                if pos + 16 > end:
                    return
                size = struct.unpack(">Q", buf[pos + 8 : pos + 16])[0]
                header = 16
            elif size == 0:
                size = end - pos
            if size < header:
                return
            yield kind, pos + header, min(pos + size, end)
            pos += size

    def child(buf: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
        for k, s, e in boxes(buf, start, end):
            if k == kind:
                return s, e
        return None

    moov = child(data, 0, len(data), b"moov")
    if moov is None:
        return None
    for kind, s, e in boxes(data, *moov):
        if kind != b"trak":
            continue
        mdia = child(data, s, e, b"mdia")
        if mdia is None:
            continue
        hdlr = child(data, *mdia, b"hdlr")
        if hdlr is None or data[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
            continue
        stss = None
        minf = child(data, *mdia, b"minf")
        stbl = child(data, *minf, b"stbl") if minf else None
        stss = child(data, *stbl, b"stss") if stbl else None
        if stss is None or stss[1] - stss[0] < 8:
            continue
        (count,) = struct.unpack(">I", data[stss[0] + 4 : stss[0] + 8])
        count = min(count, (stss[1] - stss[0] - 8) // 4)
        samples = struct.unpack(f">{count}I", data[stss[0] + 8 : stss[0] + 8 + 4 * count])
        ids = sorted({int(x) - 1 for x in samples})
        if not ids or ids[0] != 0:
            ids = [0, *ids]
        return tuple(ids)
    return None


def _presentation_pts(raw: Any) -> np.ndarray:
    """(P,) packet pts in the stream's time base, dts for packets without pts, in demux order."""
    return np.where(raw.packet_pts == -(2**62), raw.packet_dts, raw.packet_pts)


def _spans_duration(raw: Any, pts: np.ndarray) -> bool:
    """Whether the packets (``pts`` from :func:`_presentation_pts`) reach the end of the stream's
    duration (within one frame), so a header that counts more frames than packets lists dropped
    frames rather than a cut file."""
    if raw.duration_secs <= 0 or not raw.avg_frame_rate or pts.size == 0:
        return False
    frame_secs = 1.0 / float(raw.avg_frame_rate)
    end_secs = (float(pts.max()) - float(pts.min())) * float(raw.time_base) + frame_secs
    return end_secs >= raw.duration_secs - 1.5 * frame_secs


def probe(path: str | Path, *, config: ProbeConfig) -> VideoInfo:
    """Read a video's stream facts, packets (presentation order) and keyframes.

    Parameters
    ----------
    path : the video file.
    config : frame-count policy.

    Returns
    -------
    VideoInfo with per-packet arrays of shape (P,), P = packets of the video stream.

    Raises
    ------
    InputError, ProbeError : missing/empty/unreadable files, no video stream.
    """
    import native
    from native import FFmpegError

    p = check_input_file(path)
    try:
        raw = native.probe_container(p)
    except FFmpegError as exc:
        raise ProbeError(f"cannot read video ({exc.strerror or exc})", path=p, stage="probe") from exc
    except ValueError as exc:
        if "no video stream" in str(exc):
            raise ProbeError("no video stream in file", path=p, stage="probe") from exc
        raise ProbeError(f"cannot read video ({exc})", path=p, stage="probe") from exc
    if raw.width <= 0 or raw.height <= 0 or raw.packet_size_bytes.size == 0:
        raise ProbeError("cannot read video (no decodable video packets)", path=p, stage="probe")
    pts = _presentation_pts(raw)
    if raw.nb_frames > raw.packet_size_bytes.size and not _spans_duration(raw, pts):
        # An MP4 whose index sits before the media data still opens when cut short: its
        # header lists every frame, but the packets stop where the file does.
        raise ProbeError(
            f"file is truncated: its header lists {raw.nb_frames} frames, the file holds "
            f"{raw.packet_size_bytes.size}",
            path=p,
            stage="probe",
        )

    fps = float(raw.avg_frame_rate) if raw.avg_frame_rate else 0.0
    # Presentation order: packets sorted by pts (dts for packets without pts).
    order = np.argsort(pts, kind="stable")
    time_base = float(raw.time_base)
    pts_secs = pts[order].astype(np.float64) * time_base
    start = pts_secs[0] if pts_secs.size else 0.0

    if 0 < raw.nb_frames <= raw.packet_size_bytes.size:
        total, source = raw.nb_frames, "header"
    elif raw.nb_frames > 0:
        # The header counts frames the file does not hold although its packets reach the end: an
        # AVI's dropped (empty) frames. Only the packets decode.
        total, source = int(raw.packet_size_bytes.size), "counted"
    elif fps > 0 and raw.duration_secs > 0 and quirk_on(config.profile, "frame_count_estimated"):
        total, source = round(fps * raw.duration_secs), "duration_estimate"
    else:
        total, source = int(raw.packet_size_bytes.size), "counted"
    if total <= 0:
        raise ProbeError("cannot read video metadata (no frames)", path=p, stage="probe")

    return VideoInfo(
        path=str(p),
        size_bytes=p.stat().st_size,
        format_name=raw.format_name,
        codec_name=raw.codec_name,
        width=raw.width,
        height=raw.height,
        fps=fps,
        total_frames=int(total),
        frame_count_source=source,
        duration_secs=raw.duration_secs,
        stream_bit_rate=raw.stream_bit_rate,
        format_bit_rate=raw.format_bit_rate,
        start_pts_secs=float(start),
        packet_pts_secs=pts_secs,
        packet_size_bytes=raw.packet_size_bytes[order],
        packet_is_keyframe=raw.packet_is_keyframe[order],
        stss_keyframes=read_mp4_stss(p),
        has_programs=raw.format_name == "mpegts",
        sample_aspect_ratio=raw.sample_aspect_ratio,
    )
