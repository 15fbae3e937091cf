"""Multi-encoder transcoding through PyAV: one source decode feeds every codec variant at once."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from native.bitcost_reader import iter_reader_rgb
from native.encoding import encode_frame
from native.pyav_decode import iter_rgb

# SVT-AV1 prints a banner and its settings to stderr on every encoder open; 1 = errors only.
os.environ.setdefault("SVT_LOG", "1")


@dataclass(frozen=True)
class EncodeTarget:
    """One output: a file, the PyAV encoder writing it and that encoder's options."""

    path: Path
    encoder: str
    """libx264, libx265, libvpx-vp9, libsvtav1 (any PyAV encoder name)."""
    options: dict[str, str] = field(default_factory=dict)
    """Encoder options exactly as passed to PyAV (``crf``, ``x264-params``, ``b``, …)."""


@dataclass(frozen=True)
class EncodeOutcome:
    """What one encoder wrote."""

    path: str
    encoder: str
    frames: int
    encode_secs: float
    """Time spent inside this encoder's calls (its own threads included), not the shared decode."""
    size_bytes: int


@dataclass(frozen=True)
class TranscodeFacts:
    """The source as the encoders saw it."""

    source_width: int
    source_height: int
    width: int
    height: int
    fps: Fraction
    source_pix_fmt: str
    frames: int
    decode_secs: float
    """Source decode and scaling/conversion to yuv420p (shared by every output)."""


def _fps_of(stream: av.video.stream.VideoStream) -> Fraction:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    return Fraction(rate) if rate else Fraction(25)


def _open_outputs(
    targets: Sequence[EncodeTarget],
    fps: Fraction,
    size: tuple[int, int],
    outputs: list[tuple[av.container.OutputContainer, av.video.stream.VideoStream]],
) -> None:
    """Open each target's container and yuv420p stream of ``size`` (width, height) into ``outputs``.

    Appended one by one, so that when a later one fails the caller still closes those already open.
    """
    for target in targets:
        opts = {"movflags": "+faststart"} if target.path.suffix.lower() in (".mp4", ".mov") else {}
        target.path.parent.mkdir(parents=True, exist_ok=True)
        container = av.open(str(target.path), "w", options=opts)
        out = container.add_stream(target.encoder, rate=fps, options=dict(target.options))
        out.width, out.height, out.pix_fmt = size[0], size[1], "yuv420p"
        outputs.append((container, out))


def transcode(
    source: str | Path,
    targets: Sequence[EncodeTarget],
    *,
    width: int,
    height: int,
    max_frames: int = 0,
) -> tuple[TranscodeFacts, list[EncodeOutcome]]:
    """Decode ``source`` once and encode its frames with every target's encoder.

    Frames go to the encoders as yuv420p at ``width`` × ``height`` (area scaling when the size
    differs); no RGB round trip, so every encoder and a lossless reference get identical
    pictures. Timestamps are 0, 1, 2, … in a time base of 1/fps; containers get
    ``+faststart`` (MP4/MOV).

    Parameters
    ----------
    source : video file.
    targets : outputs, each with its own encoder and options.
    width, height : output size, both even.
    max_frames : encode only the first ``max_frames`` frames (0 = all).

    Returns
    -------
    (facts about the source and the shared decode, one outcome per target in order).

    Raises
    ------
    RuntimeError : the decoder or an encoder failed (the FFmpeg message is kept).
    """
    if width % 2 or height % 2:
        raise ValueError(f"Invalid size ({width}x{height}). Supported values are even widths and heights.")
    t_decode = 0.0
    secs = [0.0] * len(targets)
    counts = [0] * len(targets)
    outputs: list[tuple[av.container.OutputContainer, av.video.stream.VideoStream]] = []
    try:
        with av.open(str(source), metadata_errors="ignore") as src:
            stream = src.streams.video[0]
            stream.thread_type = "AUTO"
            fps = _fps_of(stream)
            src_w, src_h = int(stream.codec_context.width), int(stream.codec_context.height)
            src_fmt = str(stream.codec_context.pix_fmt or "")
            _open_outputs(targets, fps, (width, height), outputs)
            time_base = 1 / fps
            n = 0
            t0 = time.perf_counter()
            for frame in src.decode(stream):
                if max_frames and n >= max_frames:
                    break
                picture = frame.reformat(width=width, height=height, format="yuv420p", interpolation="AREA")
                picture.pts, picture.time_base = n, time_base
                t_decode += time.perf_counter() - t0
                for i, (container, out) in enumerate(outputs):
                    t1 = time.perf_counter()
                    encode_frame(container, out, picture)
                    secs[i] += time.perf_counter() - t1
                    counts[i] += 1
                n += 1
                t0 = time.perf_counter()
            for i, (container, out) in enumerate(outputs):
                t1 = time.perf_counter()
                encode_frame(container, out, None)
                container.close()
                secs[i] += time.perf_counter() - t1
    except av.FFmpegError as exc:
        raise RuntimeError(f"transcoding failed ({exc.strerror or exc})") from exc
    finally:
        for container, _ in outputs:
            try:
                container.close()
            except av.FFmpegError:
                pass  # already reporting the first failure
    facts = TranscodeFacts(
        source_width=src_w,
        source_height=src_h,
        width=width,
        height=height,
        fps=fps,
        source_pix_fmt=src_fmt,
        frames=n,
        decode_secs=t_decode,
    )
    outcomes = [
        EncodeOutcome(
            path=str(t.path),
            encoder=t.encoder,
            frames=counts[i],
            encode_secs=secs[i],
            # A muxer that received no packet (nothing decoded) may not have created its file.
            size_bytes=t.path.stat().st_size if t.path.exists() else 0,
        )
        for i, t in enumerate(targets)
    ]
    return facts, outcomes


def source_size(path: str | Path) -> tuple[int, int, Fraction]:
    """(width, height, fps) of the first video stream, from the header."""
    try:
        with av.open(str(path), metadata_errors="ignore") as src:
            if not src.streams.video:
                raise RuntimeError("no video stream in file")
            stream = src.streams.video[0]
            if stream.codec_context is None:  # a damaged header can name a codec no decoder knows
                raise RuntimeError("cannot read video (no decoder for the video stream's codec)")
            return int(stream.codec_context.width), int(stream.codec_context.height), _fps_of(stream)
    except av.FFmpegError as exc:
        raise RuntimeError(f"cannot read video ({exc.strerror or exc})") from exc


def frames_rgb(
    path: str | Path, *, reader: str = "full_decode", conversion: str = "bt601"
) -> Iterator[np.ndarray]:
    """Every frame as (H, W, 3) uint8 RGB, with decoder failures raised as RuntimeError.

    ``reader``: ``full_decode`` (FFmpeg through PyAV, deblocked; ``conversion`` bt601 or swscale)
    or ``fast_reader`` (cvp's reader, loop filter skipped, swscale conversion).
    """
    if reader not in ("full_decode", "fast_reader"):
        raise ValueError(f"Invalid reader ({reader!r}). Supported values are 'full_decode', 'fast_reader'.")
    try:
        if reader == "fast_reader":
            yield from iter_reader_rgb(path)
        else:
            yield from iter_rgb(path, conversion=conversion)
    except av.FFmpegError as exc:
        raise RuntimeError(f"decoding failed ({exc.strerror or exc})") from exc
