"""Encode small deterministic test clips (and deliberately bad inputs) with PyAV."""

from __future__ import annotations

import functools
import os
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import numpy as np

from native import encode_frame

Codec = Literal["h264", "hevc", "vp9", "av1", "mpeg4"]
Pattern = Literal["moving", "square", "static"]

# encoder name, container format, file suffix
_ENCODERS: dict[str, tuple[str, str, str]] = {
    "h264": ("libx264", "mp4", ".mp4"),
    "hevc": ("libx265", "mp4", ".mp4"),
    "vp9": ("libvpx-vp9", "webm", ".webm"),
    "av1": ("libsvtav1", "mp4", ".mp4"),
    "mpeg4": ("mpeg4", "mp4", ".mp4"),
}

# Quality used when crf is None: the encoder's own default where it has a sane one, otherwise a
# fixed quality so the clip does not depend on FFmpeg's 200 kb/s default bit rate.
_DEFAULT_QUALITY: dict[str, int] = {"h264": 23, "hevc": 28, "vp9": 32, "av1": 35, "mpeg4": 3}

# FFmpeg's FF_QP2LAMBDA: global_quality is a lambda, qscale × 118.
_QP2LAMBDA = 118


@functools.lru_cache(maxsize=8)
def _texture(height: int, width: int, seed: int = 1234) -> np.ndarray:
    """Colourful background with edges at several scales: gradients, a checkerboard, fixed noise."""
    # Cached (and read-only, so the cache cannot be corrupted): every frame of a clip reuses it.
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    red = 128 + 90 * np.sin(xx / 23.0) * np.cos(yy / 31.0)
    green = 110 + 70 * np.sin((xx + yy) / 17.0)
    blue = 120 + 80 * np.cos(xx / 11.0 - yy / 29.0)
    checker = (((xx // 8) + (yy // 8)) % 2) * 40 - 20
    noise = rng.integers(-12, 13, size=(height, width), dtype=np.int16).astype(np.float32)
    rgb = np.stack([red + checker, green - checker, blue + checker], axis=-1) + noise[..., None]
    # Keep green from dominating: cvp treats mostly-green frames as corruption (spec §18.18).
    texture = np.clip(rgb, 0, 255).astype(np.uint8)
    texture.setflags(write=False)
    return texture


def render_frame(index: int, *, width: int, height: int, pattern: Pattern = "moving") -> np.ndarray:
    """RGB uint8 frame ``index`` (H×W×3) of the given pattern; the same inputs give the same pixels.

    * ``moving``: the textured background scrolls 3 px right and 1 px down per frame (wrapping),
      and a bright square crosses it.
    * ``square``: static textured background, moving square.
    * ``static``: the textured background only.
    """
    frame = _texture(height, width)
    if pattern == "moving":
        frame = np.roll(frame, shift=(index, 3 * index), axis=(0, 1))
    else:
        frame = frame.copy()
    if pattern in ("moving", "square"):
        side = max(1, min(width, height) // 5)
        span_x = max(1, width - side)
        span_y = max(1, height - side)
        x0 = (5 * index) % span_x
        y0 = (2 * index) % span_y
        frame[y0 : y0 + side, x0 : x0 + side] = (250, 230, 40)
        # A dark inner square gives the moving object a texture of its own.
        inner = side // 3
        if inner:
            frame[y0 + inner : y0 + 2 * inner, x0 + inner : x0 + 2 * inner] = (20, 20, 90)
    return frame


def _encoder_options(codec: Codec, *, gop: int, bframes: int, quality: int) -> dict[str, str]:
    """Per-encoder options that fix the GOP and switch scene-cut detection off."""
    if codec == "h264":
        # mbtree=0: with macroblock-tree on, this libx264 build gives different bytes for the
        # same frames on repeated encodes in one process; clips should be byte-reproducible.
        params = f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:mbtree=0"
        return {"x264-params": params, "crf": str(quality)}
    if codec == "hevc":
        # open-gop=0 makes every I frame an IDR, so each one is a real random-access keyframe.
        params = f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:open-gop=0:log-level=error"
        return {"x265-params": params, "crf": str(quality)}
    if codec == "vp9":
        # kf_min_dist == kf_max_dist means libvpx places keyframes at a fixed interval only.
        # b=0 + crf is libvpx's constant-quality mode; cpu-used 5 keeps encoding fast.
        return {
            "g": str(gop),
            "keyint_min": str(gop),
            "crf": str(quality),
            "b": "0",
            "deadline": "good",
            "cpu-used": "5",
        }
    if codec == "av1":
        return {"svtav1-params": f"keyint={gop}:scd=0", "crf": str(quality), "preset": "10"}
    # mpeg4 (Part 2): a huge sc_threshold disables its scene-change I frames; fixed quantiser.
    return {
        "g": str(gop),
        "sc_threshold": "1000000000",
        "bf": "0",
        "flags": "+qscale",
        "global_quality": str(quality * _QP2LAMBDA),
    }


def encode_clip(
    path: Path | str,
    *,
    codec: Codec,
    width: int = 320,
    height: int = 240,
    frames: int = 48,
    fps: int = 24,
    gop: int = 24,
    bframes: int = 2,
    crf: int | None = None,
    pattern: Pattern = "moving",
    slow_after: int | None = None,
    faststart: bool = False,
) -> Path:
    """Encode a synthetic clip and return its path (the suffix is set by the codec's container).

    Recipe:
      * content: ``render_frame(i, width, height, pattern)`` for i in 0..frames-1, RGB converted
        to yuv420p by libswscale (BT.601), pts = i in time base 1/fps;
      * keyframes at exactly 0, gop, 2·gop, … (scene-cut detection off everywhere):
          - h264: libx264, x264-params ``keyint=G:min-keyint=G:scenecut=0:bframes=B``, .mp4;
          - hevc: libx265, x265-params ``keyint=G:min-keyint=G:scenecut=0:bframes=B:open-gop=0``,
            .mp4;
          - vp9: libvpx-vp9 with ``g=G keyint_min=G``, constant quality (``b=0``), .webm;
          - av1: libsvtav1 with svtav1-params ``keyint=G:scd=0``, preset 10, .mp4;
          - mpeg4: MPEG-4 Part 2 with ``g=G``, scene change off, no B-frames, .mp4;
      * ``bframes`` applies to h264 and hevc only;
      * ``crf`` None → h264 23, hevc 28, vp9 32, av1 35, mpeg4 qscale 3 (crf is used as qscale);
      * ``slow_after`` k: frames from index k on last 3 ticks instead of 1 (a variable frame
        rate, so duration × fps no longer counts the frames);
      * ``faststart``: MP4 with its moov index before the media data (``movflags +faststart``).
    """
    if codec not in _ENCODERS:
        raise ValueError(f"unknown codec {codec!r}; expected one of {sorted(_ENCODERS)}")
    encoder, container_format, suffix = _ENCODERS[codec]
    path = Path(path).with_suffix(suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    quality = _DEFAULT_QUALITY[codec] if crf is None else crf
    options = _encoder_options(codec, gop=gop, bframes=bframes, quality=quality)
    if codec == "av1":
        # SVT-AV1 prints its banner to stderr unless told otherwise; 1 = errors only.
        os.environ.setdefault("SVT_LOG", "1")

    # bitexact: Matroska/WebM would otherwise write random segment UIDs into every file.
    muxer_options = {"fflags": "+bitexact", **({"movflags": "+faststart"} if faststart else {})}
    with av.open(str(path), "w", format=container_format, container_options=muxer_options) as container:
        stream = container.add_stream(encoder, rate=fps, options=options)
        stream.width = width
        stream.height = height
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = Fraction(1, fps)
        pts = 0
        for index in range(frames):
            rgb = render_frame(index, width=width, height=height, pattern=pattern)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts = pts
            pts += 3 if slow_after is not None and index >= slow_after else 1
            frame.time_base = Fraction(1, fps)
            encode_frame(container, stream, frame)  # SVT-AV1 would leave this process real-time
        encode_frame(container, stream, None)
    return path


def encode_frames(
    path: Path | str,
    frames: list[np.ndarray],
    *,
    encoder: str,
    options: dict[str, str],
    container_format: str | None = None,
    fps: int = 30,
) -> Path:
    """Encode RGB frames (H×W×3 uint8, one size) with ``encoder`` at ``fps``, pts = frame index;
    ``container_format`` None lets the suffix of ``path`` choose."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format=container_format) as container:
        stream = container.add_stream(encoder, rate=fps, options=options)
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = Fraction(1, fps)
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            frame.pts = i
            encode_frame(container, stream, frame)
        encode_frame(container, stream, None)
    return path


def _encode_audio_only(path: Path, *, seconds: float = 1.0, rate: int = 48000) -> Path:
    """An AAC tone in an .m4a (MP4) container: a valid media file with no video stream."""
    samples_per_frame = 1024  # AAC's fixed frame size
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=rate)
        stream.layout = "mono"
        total = int(seconds * rate)
        t = np.arange(total, dtype=np.float32) / rate
        tone = (0.2 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
        for start in range(0, total, samples_per_frame):
            chunk = tone[start : start + samples_per_frame]
            frame = av.AudioFrame.from_ndarray(chunk[None, :], format="fltp", layout="mono")
            frame.sample_rate = rate
            frame.pts = start
            encode_frame(container, stream, frame)
        encode_frame(container, stream, None)
    return path


def make_bad_inputs(folder: Path | str) -> dict[str, Path]:
    """Write inputs the CLI must reject cleanly; keys are the file stems.

    * ``empty``: zero-byte ``empty.mp4``;
    * ``notes``: a text file named ``notes.mp4``;
    * ``cut``: an h264 .mp4 cut to its first 30 % of bytes. The MP4 muxer writes the moov index
      at the end, so the cut file has media data but no index and cannot be opened;
    * ``cut_front``: the same cut of a ``faststart`` .mp4, whose index comes first: it opens,
      and its header lists frames the file no longer holds (as the real clips here);
    * ``audio_only``: AAC in ``audio_only.m4a``, no video stream;
    * ``mpeg4``: an MPEG-4 Part 2 clip, for which the patched FFmpeg exports no bitcost;
    * ``tiny_2x2``: a 2×2 h264 clip. libx264 accepts 2×2 (it pads to one macroblock), so the
      size is the only thing wrong with it (libx265 and SVT-AV1 refuse sizes this small);
    * ``odd_642x362``: a valid 642×362 h264 clip; even, so yuv420p works, but not a multiple
      of 16, so codec block grids do not line up with the picture.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bad: dict[str, Path] = {}

    empty = folder / "empty.mp4"
    empty.write_bytes(b"")
    bad["empty"] = empty

    notes = folder / "notes.mp4"
    notes.write_text("This is a text file with a video extension.\n" * 20, encoding="utf-8")
    bad["notes"] = notes

    whole = encode_clip(folder / "whole_for_cut", codec="h264", frames=48, gop=24)
    data = whole.read_bytes()
    cut = folder / "cut.mp4"
    cut.write_bytes(data[: int(len(data) * 0.3)])
    whole.unlink()
    bad["cut"] = cut
    whole = encode_clip(folder / "whole_for_cut_front", codec="h264", frames=48, gop=24, faststart=True)
    data = whole.read_bytes()
    cut_front = folder / "cut_front.mp4"
    cut_front.write_bytes(data[: int(len(data) * 0.3)])
    whole.unlink()
    bad["cut_front"] = cut_front

    bad["audio_only"] = _encode_audio_only(folder / "audio_only.m4a")
    bad["mpeg4"] = encode_clip(folder / "mpeg4", codec="mpeg4", frames=48, gop=24)
    bad["tiny_2x2"] = encode_clip(folder / "tiny_2x2", codec="h264", width=2, height=2, frames=24, gop=12)
    bad["odd_642x362"] = encode_clip(
        folder / "odd_642x362", codec="h264", width=642, height=362, frames=48, gop=24
    )
    return bad


def transcode_clip(
    source: Path | str,
    path: Path | str,
    *,
    codec: Codec,
    frames: int = 48,
    width: int = 320,
    height: int = 240,
    gop: int = 24,
    bframes: int = 2,
    sample_aspect_ratio: Fraction | None = None,
) -> Path:
    """Re-encode the first ``frames`` frames of a real clip at ``width``×``height`` (real content in
    another codec, or with a sample aspect ratio), with ``encode_clip``'s encoder settings.

    Recipe: PyAV decodes ``source`` in order; each frame is scaled by libswscale (bicubic) to
    yuv420p at the new size; pts = i in time base 1/24; ``sample_aspect_ratio`` is set on the
    encoder (written to the bitstream's VUI by libx264 and to the container).
    """
    encoder, container_format, suffix = _ENCODERS[codec]
    path = Path(path).with_suffix(suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    options = _encoder_options(codec, gop=gop, bframes=bframes, quality=_DEFAULT_QUALITY[codec])
    muxer_options = {"fflags": "+bitexact"}
    with (
        av.open(str(source)) as src,
        av.open(str(path), "w", format=container_format, container_options=muxer_options) as container,
    ):
        stream = container.add_stream(encoder, rate=24, options=options)
        stream.width = width
        stream.height = height
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = Fraction(1, 24)
        if sample_aspect_ratio is not None:
            stream.codec_context.sample_aspect_ratio = sample_aspect_ratio
        for index, frame in enumerate(src.decode(video=0)):
            if index >= frames:
                break
            out = frame.reformat(width=width, height=height, format="yuv420p")
            out.pts = index
            out.time_base = Fraction(1, 24)
            encode_frame(container, stream, out)
        encode_frame(container, stream, None)
    return path
