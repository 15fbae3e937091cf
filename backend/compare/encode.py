"""The encode step: one decode of the source feeds every codec's encoder and a lossless reference."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import native
from backend.codecs import canonical_codec
from backend.compare.config import CODECS, CompareConfig, score_for
from backend.errors import DecodeError, InputError, UnsupportedVideoError
from backend.records import _ShapeRepr
from backend.stages.geometry import check_frame_size
from backend.stages.probe import ProbeConfig, check_input_file, probe
from backend.store import SessionStore

ENCODERS: dict[str, str] = {"h264": "libx264", "hevc": "libx265", "vp9": "libvpx-vp9", "av1": "libsvtav1"}
_SPEED_PRESETS: dict[str, dict[str, str]] = {
    "h264": {"fast": "veryfast", "medium": "medium", "slow": "slow"},
    "hevc": {"fast": "veryfast", "medium": "medium", "slow": "slow"},
    "vp9": {"fast": "6", "medium": "3", "slow": "1"},  # cpu-used with deadline=good
    "av1": {"fast": "10", "medium": "6", "slow": "4"},  # SVT-AV1 preset
}
REFERENCE_NAME = "reference.mp4"
# Lossless H.264 (qp 0 bypasses the transform and quantiser) keeps the exact yuv420p pictures
# every encoder was fed, so luma bias and PSNR measure each codec alone.
_REFERENCE_OPTIONS: dict[str, str] = {"qp": "0", "preset": "ultrafast"}


@dataclass(frozen=True, repr=False)
class Variant(_ShapeRepr):
    """One encoded (or given) version of the source, and the signal it is selected with."""

    variant_index: int
    label: str
    """e.g. ``h264 crf23``; unique within a comparison."""
    codec: str
    """h264, hevc, vp9, av1 (or the probed codec of a given file)."""
    encoder: str | None
    """PyAV encoder name; None for a pre-encoded file."""
    video_path: str
    encoder_options: dict[str, str]
    """Every option passed to the encoder (empty for a pre-encoded file)."""
    structure_note: str
    frame_count: int
    keyframe_indices: tuple[int, ...]
    size_bytes: int
    bitrate_kbps: float
    """Achieved: size × 8 / duration."""
    encode_secs: float
    score: str
    score_note: str


def encoder_options(codec: str, config: CompareConfig) -> tuple[dict[str, str], str]:
    """PyAV encoder options for one codec and a note on the frame structure they give.

    Every codec gets a keyframe every ``gop`` frames exactly (scene-cut detection off, closed
    GOPs) and the configured quality: CRF per codec, or one target bitrate for all.
    """
    if codec not in CODECS:
        raise ValueError(f"Invalid codec ({codec!r}). Supported values are {', '.join(CODECS)}.")
    g, bf = config.gop, config.bframes
    preset = _SPEED_PRESETS[codec][config.speed]
    rate = {"b": f"{config.bitrate_kbps}k"} if config.bitrate_kbps else None
    if codec == "h264":
        params = f"keyint={g}:min-keyint={g}:scenecut=0:bframes={bf}:b-adapt=0:b-pyramid=none:open-gop=0"
        opts = {"preset": preset, "x264-params": params}
        note = f"IDR every {g}; {bf} B-frames between references, fixed, not referenced"
        return opts | (rate or {"crf": str(config.crf_h264)}), note
    if codec == "hevc":
        params = (
            f"keyint={g}:min-keyint={g}:scenecut=0:bframes={bf}:b-adapt=0:b-pyramid=0:open-gop=0"
            ":log-level=error"
        )
        opts = {"preset": preset, "x265-params": params}
        note = f"IDR every {g}; {bf} B-frames between references, fixed, not referenced"
        return opts | (rate or {"crf": str(config.crf_hevc)}), note
    if codec == "vp9":
        # kf_min_dist = kf_max_dist places keyframes at the fixed interval only.
        opts = {
            "g": str(g),
            "keyint_min": str(g),
            "deadline": "good",
            "cpu-used": preset,
            "row-mt": "1",
            "auto-alt-ref": "1" if bf else "0",
            "lag-in-frames": "25" if bf else "0",
        }
        note = f"keyframe every {g}; VP9 has no B-frames: " + (
            "hidden alt-ref frames stand in" if bf else "no alt-ref frames (I P P …)"
        )
        return opts | (rate or {"crf": str(config.crf_vp9), "b": "0"}), note
    # AV1 (SVT-AV1): low delay (pred-struct 1) is I P P …; B-frames map to a random-access
    # hierarchy of 2^L frames per mini-GOP, L in 2..5 (SVT's supported range).
    if bf:
        levels = min(5, max(2, round(math.log2(bf + 1))))
        params = f"keyint={g}:scd=0:pred-struct=2:hierarchical-levels={levels}"
        exact = 2**levels == bf + 1
        note = f"keyframe every {g}; random-access hierarchy, mini-GOP {2**levels} " + (
            "(= bframes + 1)" if exact else f"(nearest to bframes + 1 = {bf + 1})"
        )
    else:
        params = f"keyint={g}:scd=0:pred-struct=1"
        note = f"keyframe every {g}; low delay (I P P …)"
    opts = {"preset": preset, "svtav1-params": params}
    return opts | (rate or {"crf": str(config.crf_av1)}), note


def output_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Encoded size: scaled so the longer side is at most ``max_side`` (0: unchanged), both even."""
    scale = min(1.0, max_side / max(width, height)) if max_side else 1.0
    w = max(2, int(width * scale / 2 + 0.5) * 2)  # half up: 961 → 962
    h = max(2, int(height * scale / 2 + 0.5) * 2)
    return w, h


def check_encode_size(
    source: Path, source_wh: tuple[int, int], encoded_wh: tuple[int, int], *, config: CompareConfig
) -> None:
    """Refuse, before any encoding, an output size no variant could be selected on or encoded at.

    Raises
    ------
    UnsupportedVideoError : the encoded size is outside what selection supports (a side under
        16 pixels, an aspect ratio beyond 200:1), or AV1 is asked for at a size SVT-AV1 stalls on.
    """
    width, height = encoded_wh
    scaled = ""
    if encoded_wh != source_wh:
        source_size = f"{source_wh[0]}x{source_wh[1]}"
        scaled = f" The {source_size} source is encoded at {width}x{height} (--max-side {config.max_side})."
    try:
        check_frame_size(width, height, path=source, stage="compare")
    except UnsupportedVideoError as exc:
        raise UnsupportedVideoError(exc.message + scaled, path=source, stage="compare") from None
    if "av1" in config.codecs and native.svt_av1_stalls(width, height):
        raise UnsupportedVideoError(
            f"SVT-AV1 stalls on frames under {native.SVT_AV1_MIN_SIDE} pixels on one side and over "
            f"{native.SVT_AV1_SMALL_FRAME} on the other ({width}x{height}). Supported AV1 sizes have "
            f"both sides at least {native.SVT_AV1_MIN_SIDE} pixels or both at most "
            f"{native.SVT_AV1_SMALL_FRAME}; leave av1 out of --codecs.{scaled}",
            path=source,
            stage="compare",
        )


def default_output_dir(store: SessionStore, comparison_id: str) -> Path:
    """Where a comparison's encoded files live: ``<db>.compare/<comparison_id>/`` next to the store."""
    return store.path.parent / f"{store.path.name}.compare" / comparison_id


def encode_variants(
    source: str | Path, out_dir: str | Path, *, config: CompareConfig
) -> tuple[tuple[Variant, ...], Path, dict[str, Any]]:
    """Encode the source once per configured codec (plus a lossless reference) in one decode pass.

    Parameters
    ----------
    source : video file.
    out_dir : folder receiving ``<codec>.mp4`` and ``reference.mp4``.
    config : codecs, GOP, B-frames, quality, speed, cut and downscale.

    Returns
    -------
    (variants in config order, path of the lossless reference, settings: source and output
    size, fps, frames, source pixel format, reference options, decode seconds).

    Raises
    ------
    InputError : unreadable source; DecodeError : an encoder or the decoder failed.
    """
    src = check_input_file(source)
    folder = Path(out_dir)
    try:
        src_w, src_h, _ = native.source_size(src)
    except RuntimeError as exc:
        raise InputError(str(exc), path=src, stage="compare") from exc
    width, height = output_size(src_w, src_h, config.max_side)
    check_encode_size(src, (src_w, src_h), (width, height), config=config)
    plans = [(codec, *encoder_options(codec, config)) for codec in config.codecs]
    targets = [native.EncodeTarget(folder / REFERENCE_NAME, "libx264", dict(_REFERENCE_OPTIONS))]
    targets += [
        native.EncodeTarget(folder / f"{codec}.mp4", ENCODERS[codec], opts) for codec, opts, _ in plans
    ]
    try:
        facts, outcomes = native.transcode(
            src, targets, width=width, height=height, max_frames=config.max_frames
        )
    except (RuntimeError, OSError) as exc:
        raise DecodeError(str(exc), path=src, stage="compare") from exc
    if facts.frames == 0:
        raise InputError("the source yields no frames", path=src, stage="compare")
    duration = facts.frames / float(facts.fps)
    variants = []
    for i, ((codec, opts, note), out) in enumerate(zip(plans, outcomes[1:], strict=True)):
        score, score_note = score_for(codec, config)
        quality = f"{config.bitrate_kbps}k" if config.bitrate_kbps else f"crf{config.crf(codec)}"
        info = probe(out.path, config=ProbeConfig())
        variants.append(
            Variant(
                variant_index=i,
                label=f"{codec} {quality}",
                codec=codec,
                encoder=ENCODERS[codec],
                video_path=out.path,
                encoder_options=opts,
                structure_note=note,
                frame_count=info.total_frames,
                keyframe_indices=info.keyframe_indices,
                size_bytes=out.size_bytes,
                bitrate_kbps=out.size_bytes * 8 / duration / 1000,
                encode_secs=out.encode_secs,
                score=score,
                score_note=score_note,
            )
        )
    settings = {
        "source_width": facts.source_width,
        "source_height": facts.source_height,
        "width": width,
        "height": height,
        "fps": str(facts.fps),
        "frames": facts.frames,
        "source_pix_fmt": facts.source_pix_fmt,
        "pix_fmt": "yuv420p",
        "scaling": "none" if (width, height) == (src_w, src_h) else "swscale area",
        "reference": {"encoder": "libx264", "options": dict(_REFERENCE_OPTIONS), "lossless": True},
        "reference_encode_secs": outcomes[0].encode_secs,
        "decode_secs": facts.decode_secs,
    }
    return tuple(variants), folder / REFERENCE_NAME, settings


def given_variants(paths: Sequence[str | Path], *, config: CompareConfig) -> tuple[Variant, ...]:
    """Variants from pre-encoded files (labels from the file names, signals from the probed codec)."""
    out = []
    for i, path in enumerate(paths):
        p = check_input_file(path)
        info = probe(p, config=ProbeConfig())
        codec = canonical_codec(info.codec_name)  # libdav1d → av1
        score, score_note = score_for(codec, config)
        duration = info.total_frames / info.fps if info.fps else info.duration_secs
        out.append(
            Variant(
                variant_index=i,
                label=f"{codec} {p.stem}",
                codec=codec,
                encoder=None,
                video_path=str(p),
                encoder_options={},
                structure_note="pre-encoded",
                frame_count=info.total_frames,
                keyframe_indices=info.keyframe_indices,
                size_bytes=info.size_bytes,
                bitrate_kbps=info.size_bytes * 8 / duration / 1000 if duration else 0.0,
                encode_secs=0.0,
                score=score,
                score_note=score_note,
            )
        )
    labels = [v.label for v in out]
    if len(set(labels)) != len(labels):
        out = [dataclasses.replace(v, label=f"{v.label} #{v.variant_index}") for v in out]
    return tuple(out)
