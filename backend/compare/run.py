"""Codec comparison: encode one source in H.264/HEVC/VP9/AV1, select on each, measure agreement."""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from backend import __version__
from backend.config import param, validate_fields
from backend.errors import CodecLensError, DecodeError, InputError, StoreError
from backend.luma import MeasureConfig, Prefetch, measure_frames
from backend.pipeline import RunResult, SelectionOptions
from backend.records import _check, _ShapeRepr
from backend.runs import content_sha256, select_and_store
from backend.stages.decode import SCORE_SIGNALS
from backend.stages.probe import ProbeConfig, check_input_file, probe
from backend.stages.signals import canonical_codec
from backend.store import SessionStore
from native import encode as encode_mod
from native import gateway

CODECS: tuple[str, ...] = ("h264", "hevc", "vp9", "av1")
ENCODERS: dict[str, str] = {"h264": "libx264", "hevc": "libx265", "vp9": "libvpx-vp9", "av1": "libsvtav1"}
CRF_RANGES: dict[str, tuple[int, int]] = {"h264": (0, 51), "hevc": (0, 51), "vp9": (0, 63), "av1": (1, 63)}
SPEEDS: tuple[str, ...] = ("fast", "medium", "slow")
FALLBACK_SCORES: tuple[str, ...] = ("mv", "residual", "mvres", "pkt_energy")
HEATMAP_SCALES: tuple[str, ...] = ("frame", "video", "all")
"""``frame``: each frame's stored normalised map; ``video``: log1p(raw) over the run's maximum;
``all``: log1p(raw per pixel) over the maximum of every compared run with the same signal
(see :class:`HeatmapNormaliser`)."""
DECODERS: tuple[str, ...] = ("full_decode", "fast_reader")

# Signals each codec can give exactly or at all (docs/signals.md): bitcost needs cvp's patched
# reader, qp needs exported QP tables; the flow/frame-difference signals work everywhere.
_SCORE_CODECS: dict[str, tuple[str, ...]] = {
    "bitcost": gateway.BITCOST_CODECS,
    "qp": ("h264", "vp9"),
}
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

ProgressCallback = Callable[[str, float], None]


# --------------------------------------------------------------------------- config


@dataclass(frozen=True, kw_only=True)
class CompareConfig:
    """How the variants are encoded and which signal each one is selected with."""

    codecs: tuple[str, ...] = param(
        CODECS, label="Codecs", help="variants to encode: h264 (libx264), hevc (libx265), vp9, av1 (SVT)"
    )
    gop: int = param(
        32, label="GOP", help="frames from one keyframe to the next, every codec", min=1, max=100000
    )
    bframes: int = param(
        0,
        label="B-frames",
        help="B-frames between references (h264, hevc); VP9 gets alt-ref frames, AV1 a hierarchy",
        min=0,
        max=16,
    )
    crf_h264: int = param(23, label="CRF h264", help="libx264 constant rate factor", min=0, max=51)
    crf_hevc: int = param(28, label="CRF hevc", help="libx265 constant rate factor", min=0, max=51)
    crf_vp9: int = param(32, label="CRF vp9", help="libvpx-vp9 constant quality level", min=0, max=63)
    crf_av1: int = param(35, label="CRF av1", help="SVT-AV1 constant rate factor", min=1, max=63)
    bitrate_kbps: int = param(
        0,
        label="Target bitrate (kb/s)",
        help="0: constant quality (CRF); else one target for all",
        min=0,
        max=1_000_000,
    )
    speed: str = param("fast", label="Speed", help="encoder preset tier", choices=SPEEDS)
    max_frames: int = param(
        0, label="Max frames", help="encode only the first N frames (0: all)", min=0, max=10_000_000
    )
    max_side: int = param(
        0,
        label="Max side",
        help="downscale so the longer side is at most this (0: source size)",
        min=0,
        max=16384,
    )
    score: str = param(
        "bitcost", label="Score", help="selection signal where the codec has it", choices=SCORE_SIGNALS
    )
    fallback_score: str = param(
        "residual",
        label="Fallback score",
        help="signal for codecs without the score (AV1 has no bitcost)",
        choices=FALLBACK_SCORES,
    )
    measure_reader: bool = param(
        True, label="Measure fast reader", help="also measure cvp's fast reader (h264, hevc, vp9)"
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        codecs = self.codecs
        if (
            not isinstance(codecs, tuple)
            or not 1 <= len(codecs) <= 4
            or len(set(codecs)) != len(codecs)
            or any(c not in CODECS for c in codecs)
        ):
            raise ValueError(
                f"Invalid codecs ({codecs!r}). Supported values are 1 to 4 distinct names of "
                f"{', '.join(repr(c) for c in CODECS)}."
            )
        if 0 < self.max_side < 16:
            raise ValueError(
                f"Invalid max side ({self.max_side}). Supported values are 0 (source size) or 16 to 16384."
            )

    def crf(self, codec: str) -> int:
        """The quality setting of one codec."""
        return int(getattr(self, f"crf_{codec}"))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"codecs": list(self.codecs)}


def parse_crf(text: str, *, codecs: Sequence[str] = CODECS) -> dict[str, int]:
    """``"23"`` (every codec) or ``"h264=23,av1=35"`` → {``crf_h264``: 23, …} for CompareConfig.

    Raises
    ------
    ValueError : an unknown codec name or a value that is not an integer.
    """
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        targets = [name.strip()] if sep else list(codecs)
        raw = value if sep else name
        for codec in targets:
            if codec not in CODECS:
                raise ValueError(f"Invalid codec ({codec!r}). Supported values are {', '.join(CODECS)}.")
            try:
                out[f"crf_{codec}"] = int(raw)
            except ValueError:
                raise ValueError(f"Invalid crf ({raw.strip()!r}). Supported values are integers.") from None
    return out


def score_for(codec: str, config: CompareConfig) -> tuple[str, str]:
    """The selection signal a codec's variant uses, and why.

    Returns
    -------
    (score name, note): the configured score where the codec has it, otherwise the fallback;
    e.g. ``("residual", "bitcost unavailable for av1 …; residual stands in")``.
    """
    supported = _SCORE_CODECS.get(config.score)
    if config.score == "bitcost" and not gateway.bitcost_reader_available():
        supported = ()
    if supported is None or codec in supported:
        return config.score, f"{config.score} (as configured)"
    why = (
        "cvp's patched reader is not installed"
        if config.score == "bitcost" and not gateway.bitcost_reader_available()
        else f"{config.score} exists for {', '.join(supported)} only"
    )
    return (
        config.fallback_score,
        f"{config.score} unavailable for {codec} ({why}); {config.fallback_score} stands in",
    )


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


def default_output_dir(store: SessionStore, comparison_id: str) -> Path:
    """Where a comparison's encoded files live: ``<db>.compare/<comparison_id>/`` next to the store."""
    return store.path.parent / f"{store.path.name}.compare" / comparison_id


# --------------------------------------------------------------------------- records


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


@dataclass(frozen=True, repr=False)
class VariantMetrics(_ShapeRepr):
    """Selection and decode figures of one variant."""

    variant_index: int
    run_id: str
    run_decoder: str
    """Decode the selection's pixels came from: ``fast_reader`` or ``full_decode``."""
    total_frames: int
    candidates: int
    groups: int
    canvases: int
    tokens: int
    valid_tokens: int
    duration_secs: float
    canvases_per_sec: float
    tokens_per_sec: float
    """Valid tokens per second of video."""
    time_covered_share: float
    """Share of the video's frames (equal durations) with at least one block in a canvas."""
    kept_block_share: float
    """Blocks in canvases over all blocks of all frames."""
    luma_bias_mean: float | None
    """Mean over frames of meanY(full decode) − meanY(source), levels."""
    luma_abs_bias_mean: float | None
    psnr_y_db: float | None
    """Y-PSNR of the full decode from the mean MSE over frames."""
    psnr_y_min_db: float | None
    reader_luma_bias_mean: float | None
    """The same for cvp's fast reader (None: codec not read by it, or not measured)."""
    reader_psnr_y_db: float | None


@dataclass(frozen=True, repr=False)
class PairMetrics(_ShapeRepr):
    """Agreement of two variants' selections, per frame and overall."""

    variant_a: int
    variant_b: int
    frame_index: np.ndarray
    """(k,) int64, frames that are candidates in either run, ascending."""
    jaccard: np.ndarray
    """(k,) float64, |A ∩ B| / |A ∪ B| of the blocks in canvases; NaN where both are empty."""
    spearman: np.ndarray
    """(k,) float64, rank correlation of the block scores; NaN unless a candidate in both with
    non-constant scores."""
    kept_a: np.ndarray
    """(k,) int64 blocks of the frame in A's canvases (all blocks of an anchor)."""
    kept_b: np.ndarray
    kept_both: np.ndarray

    def __post_init__(self) -> None:
        k = self.frame_index.shape
        for name in ("jaccard", "spearman", "kept_a", "kept_b", "kept_both"):
            _check(getattr(self, name).shape == k, f"{name} shape {getattr(self, name).shape} != {k}")

    def summary(self) -> dict[str, Any]:
        """Overall Jaccard (pooled over frames), mean per-frame Jaccard, Spearman mean/median."""
        union = self.kept_a + self.kept_b - self.kept_both
        pooled = float(self.kept_both.sum() / union.sum()) if union.sum() else math.nan
        sp = self.spearman[np.isfinite(self.spearman)]
        jf = self.jaccard[np.isfinite(self.jaccard)]
        return {
            "variant_a": self.variant_a,
            "variant_b": self.variant_b,
            "jaccard": pooled,
            "jaccard_frame_mean": float(jf.mean()) if jf.size else math.nan,
            "spearman_mean": float(sp.mean()) if sp.size else math.nan,
            "spearman_median": float(np.median(sp)) if sp.size else math.nan,
            "frames_compared": int(self.frame_index.size),
            "spearman_frames": int(sp.size),
        }


@dataclass(frozen=True, repr=False)
class LumaSeries(_ShapeRepr):
    """Per-frame luma bias and Y-PSNR of one decode of one variant against the source."""

    variant_index: int
    decoder: str
    """``full_decode`` (FFmpeg, deblocked, BT.601 conversion on both sides) or ``fast_reader``
    (cvp's reader, loop filter skipped, swscale conversion on both sides)."""
    frame_index: np.ndarray
    """(n,) int64."""
    luma_bias: np.ndarray
    """(n,) float64, meanY(variant) − meanY(source), levels."""
    psnr_y_db: np.ndarray
    """(n,) float64 (inf for identical frames)."""
    y_mse: np.ndarray
    """(n,) float64."""

    def __post_init__(self) -> None:
        n = self.frame_index.shape
        _check(
            self.luma_bias.shape == n and self.psnr_y_db.shape == n and self.y_mse.shape == n,
            f"{self.luma_bias.shape = }, {self.psnr_y_db.shape = }, {n = }",
        )


@dataclass(frozen=True, repr=False)
class CodecComparison(_ShapeRepr):
    """A finished comparison: the variants, their runs and every metric."""

    comparison_id: str
    source_path: str
    reference_path: str
    width: int
    height: int
    fps: float
    frame_count: int
    config: CompareConfig
    options: SelectionOptions
    variants: tuple[Variant, ...]
    metrics: tuple[VariantMetrics, ...]
    pairs: tuple[PairMetrics, ...]
    luma: tuple[LumaSeries, ...]
    settings: dict[str, Any]
    """Source facts, encode and reference settings, versions."""
    timings_secs: dict[str, float]


# --------------------------------------------------------------------------- encode


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
        src_w, src_h, _ = encode_mod.source_size(src)
    except RuntimeError as exc:
        raise InputError(str(exc), path=src, stage="compare") from exc
    width, height = output_size(src_w, src_h, config.max_side)
    plans = [(codec, *encoder_options(codec, config)) for codec in config.codecs]
    targets = [encode_mod.EncodeTarget(folder / REFERENCE_NAME, "libx264", dict(_REFERENCE_OPTIONS))]
    targets += [
        encode_mod.EncodeTarget(folder / f"{codec}.mp4", ENCODERS[codec], opts) for codec, opts, _ in plans
    ]
    try:
        facts, outcomes = encode_mod.transcode(
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


# --------------------------------------------------------------------------- metrics


def kept_masks(result: RunResult) -> np.ndarray:
    """Blocks whose pixels reach a canvas, per frame.

    Parameters
    ----------
    result : a finished run.

    Returns
    -------
    (total_frames, block_rows, block_cols) bool; every block of an anchor frame is set.
    """
    bh, bw = result.geometry.block_grid_hw
    b = result.geometry.block_size
    tok = result.canvases.tokens
    valid = tok[:, 7] == 1
    fid, r, c = tok[valid, 0], tok[valid, 1] // b, tok[valid, 2] // b
    inside = (r < bh) & (c < bw)  # patches past the last whole block row/column belong to no block
    total = max(int(result.info.total_frames), int(result.candidates.frame_indices.max(initial=-1)) + 1)
    mask = np.zeros((total, bh, bw), bool)
    mask[fid[inside], r[inside], c[inside]] = True
    return mask


def kept_mask_at(result: RunResult, frame_index: int) -> np.ndarray:
    """Blocks of one frame whose pixels reach a canvas, (block_rows, block_cols) bool."""
    bh, bw = result.geometry.block_grid_hw
    b = result.geometry.block_size
    tok = result.canvases.tokens
    hit = tok[(tok[:, 0] == int(frame_index)) & (tok[:, 7] == 1)]
    r, c = hit[:, 1] // b, hit[:, 2] // b
    inside = (r < bh) & (c < bw)
    mask = np.zeros((bh, bw), bool)
    mask[r[inside], c[inside]] = True
    return mask


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..m−1 with ties given their mean rank, (m,) float64."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + ends - 1) / 2.0)[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation of two (m,) vectors (ties averaged); NaN if either is constant.

    Examples
    --------
    >>> spearman(np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 25.0]))
    1.0
    """
    ra, rb = _average_ranks(np.asarray(a).ravel()), _average_ranks(np.asarray(b).ravel())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return float(ra @ rb / den) if den > 0 else math.nan


def _first_rows(result: RunResult) -> dict[int, int]:
    rows: dict[int, int] = {}
    for row, fid in enumerate(result.candidates.frame_indices.tolist()):
        rows.setdefault(int(fid), row)
    return rows


def _check_grids(results: Sequence[RunResult], labels: Sequence[str]) -> None:
    grids = {tuple(r.geometry.block_grid_hw) for r in results}
    if len(grids) > 1:
        described = ", ".join(
            f"{lab} {r.geometry.block_grid_hw}" for lab, r in zip(labels, results, strict=True)
        )
        raise InputError(
            f"block grids differ ({described}); compare variants of one source at one size", stage="compare"
        )


def pair_metrics(a: RunResult, b: RunResult, *, variant_a: int = 0, variant_b: int = 1) -> PairMetrics:
    """Kept-set Jaccard and block-score Spearman of two runs, frame by frame.

    Frames align by ``frame_index`` (decoded presentation order); both runs must share the
    block grid (same processed size, patch and block size).

    Returns
    -------
    PairMetrics over the frames that are candidates in either run.
    """
    _check_grids([a, b], [str(variant_a), str(variant_b)])
    ma, mb = kept_masks(a), kept_masks(b)
    total = max(ma.shape[0], mb.shape[0])
    if ma.shape[0] < total:
        ma = np.concatenate([ma, np.zeros((total - ma.shape[0], *ma.shape[1:]), bool)])
    if mb.shape[0] < total:
        mb = np.concatenate([mb, np.zeros((total - mb.shape[0], *mb.shape[1:]), bool)])
    rows_a, rows_b = _first_rows(a), _first_rows(b)
    frames = np.asarray(sorted(set(rows_a) | set(rows_b)), dtype=np.int64)
    fa, fb = ma[frames].reshape(frames.size, -1), mb[frames].reshape(frames.size, -1)
    kept_a = fa.sum(axis=1).astype(np.int64)
    kept_b = fb.sum(axis=1).astype(np.int64)
    both = (fa & fb).sum(axis=1).astype(np.int64)
    union = kept_a + kept_b - both
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, both / np.maximum(union, 1), np.nan)
    rho = np.full(frames.size, np.nan)
    for k, fid in enumerate(frames.tolist()):
        if fid in rows_a and fid in rows_b:
            rho[k] = spearman(a.scores.block_scores[rows_a[fid]], b.scores.block_scores[rows_b[fid]])
    return PairMetrics(
        variant_a=variant_a,
        variant_b=variant_b,
        frame_index=frames,
        jaccard=jac.astype(np.float64),
        spearman=rho,
        kept_a=kept_a,
        kept_b=kept_b,
        kept_both=both,
    )


def run_figures(result: RunResult) -> dict[str, Any]:
    """Canvases and tokens per second, time and block coverage of one run (VariantMetrics fields)."""
    info = result.info
    mask = kept_masks(result)[: max(1, info.total_frames)]
    duration = info.total_frames / info.fps if info.fps else info.duration_secs
    canvases = int(result.canvases.images.shape[0])
    valid = int(result.canvases.tokens[:, 7].sum())
    per = (lambda x: x / duration) if duration > 0 else (lambda x: math.nan)
    return {
        "total_frames": int(info.total_frames),
        "candidates": int(result.candidates.frame_indices.size),
        "groups": len(result.selection.groups),
        "canvases": canvases,
        "tokens": int(result.canvases.tokens.shape[0]),
        "valid_tokens": valid,
        "duration_secs": float(duration),
        "canvases_per_sec": float(per(canvases)),
        "tokens_per_sec": float(per(valid)),
        "time_covered_share": float(mask.reshape(mask.shape[0], -1).any(axis=1).mean()),
        "kept_block_share": float(mask.mean()),
    }


def compare_runs(
    results: Sequence[RunResult], *, labels: Sequence[str] | None = None
) -> tuple[PairMetrics, ...]:
    """Pair metrics of every pair (i < j) of runs, in (0,1), (0,2), …, order."""
    labels = list(labels or [str(i) for i in range(len(results))])
    _check_grids(results, labels)
    return tuple(
        pair_metrics(results[i], results[j], variant_a=i, variant_b=j)
        for i in range(len(results))
        for j in range(i + 1, len(results))
    )


def measure_luma(
    reference: str | Path, variants: Sequence[Variant], *, decoder: str = "full_decode"
) -> tuple[LumaSeries, ...]:
    """Per-frame luma bias and Y-PSNR of each variant's decode against the reference.

    One pass: the reference is decoded once and every variant's decode is measured against
    it (``backend.luma.measure.measure_frames`` with the reference as the test side; the bias is
    negated to read variant − source). Both sides use the same RGB conversion, so the bias
    is the codec's (and, for ``fast_reader``, the skipped loop filter's) alone. Counts that
    differ (pre-encoded variants) are truncated to the shortest.

    Returns
    -------
    One LumaSeries per variant, in the given order.
    """
    if decoder not in DECODERS:
        raise ValueError(f"Invalid decoder ({decoder!r}). Supported values are {', '.join(DECODERS)}.")
    if not variants:
        return ()
    conversion = "swscale" if decoder == "fast_reader" else "bt601"
    streams = [Prefetch(encode_mod.frames_rgb(reference, conversion=conversion))]
    streams += [
        Prefetch(encode_mod.frames_rgb(v.video_path, reader=decoder, conversion=conversion)) for v in variants
    ]
    try:
        measured = measure_frames(
            streams[0],
            streams[1:],
            config=MeasureConfig(truncate=True),
            test_name=str(reference),
            reference_names=[v.video_path for v in variants],
            reference_labels=[v.label for v in variants],
        )
    except RuntimeError as exc:
        raise DecodeError(str(exc), path=str(reference), stage="compare") from exc
    finally:
        for s in streams:
            s.close()
    return tuple(
        LumaSeries(
            variant_index=v.variant_index,
            decoder=decoder,
            frame_index=m.frame_index.astype(np.int64),
            luma_bias=-m.bias,
            psnr_y_db=m.psnr_db,
            y_mse=m.y_mse,
        )
        for v, m in zip(variants, measured, strict=True)
    )


def _luma_summary(series: LumaSeries | None) -> tuple[float | None, float | None, float | None, float | None]:
    if series is None or series.frame_index.size == 0:
        return None, None, None, None
    with np.errstate(divide="ignore"):
        psnr = (
            10.0 * math.log10(255.0**2 / float(series.y_mse.mean())) if series.y_mse.mean() > 0 else math.inf
        )
    return (
        float(series.luma_bias.mean()),
        float(np.abs(series.luma_bias).mean()),
        psnr,
        float(series.psnr_y_db.min()),
    )


# --------------------------------------------------------------------------- heatmap scale


@dataclass(frozen=True)
class HeatmapNormaliser:
    """Maps each compared run's raw signal grid to [0, 1] under one scale mode.

    * ``frame``: the stored per-frame normalised grid (the score stage's own normalisation).
    * ``video``: log1p(raw) / max over the run's candidate frames (the viewer's video scale).
    * ``all``: log1p(raw per pixel) / max over every compared run with the same signal
      (:func:`signal_family`: all bitcost grids share one scale; a stand-in signal such as
      AV1's residual has its own, since bits/px and luma levels share no unit). Bitcost grids
      hold bits per coding cell (16 px macroblocks, 64 px CTUs, 4 px sub-blocks), so they are
      divided by the cell's pixel area first; the other signals are per-pixel means already.
    """

    mode: str
    log_max: tuple[float, ...]
    """Per run, the divisor of the ``video`` / ``all`` modes (unused for ``frame``)."""

    def grid(self, results: Sequence[RunResult], index: int, row: int) -> np.ndarray:
        """(grid_rows, grid_cols) float32 in [0, 1] for candidate ``row`` of run ``index``."""
        result = results[index]
        raw = result.decoded.grids[row]
        if self.mode == "frame" or raw is None:
            return np.asarray(result.scores.grids[row], np.float32)
        values = np.maximum(np.asarray(raw, np.float32), 0)
        if self.mode == "all":
            values = values / np.float32(cell_area_px(result, raw.shape))
        top = max(self.log_max[index], 1e-6)
        return np.clip(np.log1p(values) / np.float32(top), 0, 1).astype(np.float32)


def cell_area_px(result: RunResult, grid_shape: tuple[int, ...]) -> float:
    """Pixel area of one raw-grid cell of a bitcost grid (1 for per-pixel signals).

    The cell side is the smallest power of two whose grid covers the original frame (grids of
    64 px CTUs and superblocks are padded past the frame edge).
    """
    if not result.decoded.grid_key.endswith("bit_cost"):
        return 1.0
    (oh, ow), (gh, gw) = result.geometry.orig_hw, grid_shape[:2]
    side = 2 ** math.ceil(math.log2(max(oh / gh, ow / gw, 1.0)))
    return float(side * side)


def heatmap_normaliser(results: Sequence[RunResult], *, mode: str) -> HeatmapNormaliser:
    """The shared normaliser of a set of compared runs (see :class:`HeatmapNormaliser`)."""
    if mode not in HEATMAP_SCALES:
        raise ValueError(f"Invalid scale ({mode!r}). Supported values are {', '.join(HEATMAP_SCALES)}.")
    if mode == "frame":
        return HeatmapNormaliser(mode=mode, log_max=tuple(0.0 for _ in results))
    tops = []
    for r in results:
        top = 0.0
        for g in r.decoded.grids:
            if g is None:
                continue
            peak = max(float(np.max(g)), 0.0)
            if mode == "all":
                peak /= cell_area_px(r, g.shape)
            top = max(top, math.log1p(peak))
        tops.append(top)
    if mode == "all":
        # Runs share a scale only with runs of the same signal: bits/px and residual levels
        # have no common unit.
        family = [signal_family(r) for r in results]
        tops = [max(t for t, f in zip(tops, family, strict=True) if f == mine) for mine in family]
    return HeatmapNormaliser(mode=mode, log_max=tuple(tops))


def signal_family(result: RunResult) -> str:
    """``bitcost`` for every bitcost grid (mb, ctu, sub), else the signal's name."""
    key = result.decoded.grid_key
    return "bitcost" if key.endswith("bit_cost") else key


# --------------------------------------------------------------------------- the whole comparison


def _metrics_for(
    variant: Variant, run_id: str, result: RunResult, full: LumaSeries | None, reader: LumaSeries | None
) -> VariantMetrics:
    bias, abs_bias, psnr, psnr_min = _luma_summary(full)
    r_bias, _, r_psnr, _ = _luma_summary(reader)
    return VariantMetrics(
        variant_index=variant.variant_index,
        run_id=run_id,
        run_decoder=result.decoded.pixel_source,
        **run_figures(result),
        luma_bias_mean=bias,
        luma_abs_bias_mean=abs_bias,
        psnr_y_db=psnr,
        psnr_y_min_db=psnr_min,
        reader_luma_bias_mean=r_bias,
        reader_psnr_y_db=r_psnr,
    )


def _check_profile(
    options: SelectionOptions, config: CompareConfig, planned: Sequence[tuple[str, Any]]
) -> None:
    """Parity selects with bitcost only: refuse a variant that needs another signal before encoding."""
    if options.profile != "parity":
        return
    for codec, name in planned:
        score, _ = score_for(codec, config)
        if score != "bitcost":
            raise ValueError(
                f"Invalid profile ('parity') for {name}: {codec} is selected with {score}, and parity "
                "supports bitcost only. Supported values are 'clean'."
            )


def compare(
    source: str | Path,
    store: SessionStore,
    *,
    config: CompareConfig,
    options: SelectionOptions,
    out_dir: str | Path | None = None,
    encoded: Sequence[str | Path] | None = None,
    on_progress: ProgressCallback | None = None,
) -> CodecComparison:
    """Encode (or take) variants of a source, select on each, measure and store everything.

    Parameters
    ----------
    source : the source video; with ``encoded`` it is the luma reference of the given files.
    store : session store receiving the runs and the comparison tables.
    config : encoding and signal choice.
    options : selection options shared by every run (``score`` is set per variant).
    out_dir : folder for the encodes (default :func:`default_output_dir`).
    encoded : pre-encoded variants of ``source`` (then nothing is encoded).
    on_progress : ``on_progress(step, fraction)`` after each step.

    Returns
    -------
    The CodecComparison, already stored under ``comparison_id`` (a failure is stored as ``failed``).
    """
    comparison_id = uuid.uuid4().hex[:12]
    timings: dict[str, float] = {}
    src = check_input_file(source)
    folder = Path(out_dir) if out_dir is not None else default_output_dir(store, comparison_id)
    steps = 4

    def step(name: str, k: int) -> None:
        if on_progress is not None:
            on_progress(name, k / steps)

    started = time.perf_counter()
    try:
        planned = (
            [(canonical_codec(probe(p, config=ProbeConfig()).codec_name), p) for p in encoded]
            if encoded
            else [(codec, codec) for codec in config.codecs]
        )
        _check_profile(options, config, planned)
        t0 = time.perf_counter()
        if encoded:
            variants = given_variants(encoded, config=config)
            reference = src
            info = probe(src, config=ProbeConfig())
            settings: dict[str, Any] = {
                "source_width": info.width,
                "source_height": info.height,
                "width": info.width,
                "height": info.height,
                "fps": info.fps,
                "frames": info.total_frames,
                "reference": {"encoder": None, "lossless": None, "note": "the source itself"},
            }
        else:
            variants, reference, settings = encode_variants(src, folder, config=config)
        timings["encode"] = time.perf_counter() - t0
        step("encode", 1)
        t0 = time.perf_counter()
        runs: list[tuple[str, RunResult]] = []
        for v in variants:
            runs.append(select_and_store(v.video_path, store, options=options.replace(score=v.score)))
        timings["select"] = time.perf_counter() - t0
        step("select", 2)
        t0 = time.perf_counter()
        results = [r for _, r in runs]
        pairs = compare_runs(results, labels=[v.label for v in variants])
        timings["metrics"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        full = measure_luma(reference, variants, decoder="full_decode")
        readable = [v for v in variants if v.codec in gateway.BITCOST_CODECS]
        reader = (
            measure_luma(reference, readable, decoder="fast_reader")
            if config.measure_reader and readable and gateway.bitcost_reader_available()
            else ()
        )
        timings["luma"] = time.perf_counter() - t0
        step("luma", 3)
        by_reader = {s.variant_index: s for s in reader}
        metrics = tuple(
            _metrics_for(v, run_id, result, full[i], by_reader.get(v.variant_index))
            for i, (v, (run_id, result)) in enumerate(zip(variants, runs, strict=True))
        )
        timings["total"] = time.perf_counter() - started
        first = results[0]
        comparison = CodecComparison(
            comparison_id=comparison_id,
            source_path=str(src),
            reference_path=str(reference),
            width=int(settings["width"]),
            height=int(settings["height"]),
            fps=float(Fraction(str(settings["fps"]))) if settings.get("fps") else float(first.info.fps),
            frame_count=int(settings["frames"]),
            config=config,
            options=options,
            variants=variants,
            metrics=metrics,
            pairs=pairs,
            luma=full + reader,
            settings=settings | {"versions": {"codec_lens": __version__, **gateway.versions()}},
            timings_secs=timings,
        )
        store.insert_comparison(
            comparison_id,
            row=comparison_row(comparison, content_sha256(src)),
            tables=comparison_tables(comparison),
        )
        step("store", 4)
        return comparison
    except (CodecLensError, ValueError, OSError, RuntimeError) as exc:
        message = exc.one_line() if isinstance(exc, CodecLensError) else str(exc)
        store.fail_comparison(comparison_id, source_path=str(src), config=config.as_dict(), error=message)
        raise


# --------------------------------------------------------------------------- store rows


def _record_rows(records: Sequence[Any], *, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    rows = []
    for rec in records:
        row = {}
        for f in dataclasses.fields(rec):
            if f.name in drop:
                continue
            value = getattr(rec, f.name)
            if isinstance(value, (dict, tuple, list)):
                value = json.dumps(value)
            row[f.name] = value
        rows.append(row)
    return pd.DataFrame(rows)


def comparison_row(comparison: CodecComparison, source_sha256: str) -> dict[str, Any]:
    """The ``comparisons`` row of a finished comparison."""
    return {
        "source_path": comparison.source_path,
        "source_sha256": source_sha256,
        "reference_path": comparison.reference_path,
        "width": comparison.width,
        "height": comparison.height,
        "fps": comparison.fps,
        "frame_count": comparison.frame_count,
        "config_json": json.dumps(comparison.config.as_dict()),
        "options_json": json.dumps(comparison.options.as_dict()),
        "settings_json": json.dumps(comparison.settings, default=str),
        "timings_json": json.dumps(comparison.timings_secs),
    }


def comparison_tables(comparison: CodecComparison) -> dict[str, pd.DataFrame]:
    """Rows of the comparison tables: variants, metrics, pairs, per-frame pair and luma series."""
    variants = _record_rows(comparison.variants)
    variants = variants.rename(
        columns={"encoder_options": "encoder_options_json", "keyframe_indices": "keyframe_indices_json"}
    )
    pairs = pd.DataFrame([p.summary() for p in comparison.pairs]) if comparison.pairs else None
    pair_frames = (
        pd.concat(
            [
                pd.DataFrame(
                    {
                        "variant_a": p.variant_a,
                        "variant_b": p.variant_b,
                        "frame_index": p.frame_index,
                        "jaccard": p.jaccard,
                        "spearman": p.spearman,
                        "kept_a": p.kept_a,
                        "kept_b": p.kept_b,
                        "kept_both": p.kept_both,
                    }
                )
                for p in comparison.pairs
            ],
            ignore_index=True,
        )
        if comparison.pairs
        else None
    )
    luma = pd.concat(
        [
            pd.DataFrame(
                {
                    "variant_index": s.variant_index,
                    "decoder": s.decoder,
                    "frame_index": s.frame_index,
                    "luma_bias": s.luma_bias,
                    "psnr_y_db": s.psnr_y_db,
                    "y_mse": s.y_mse,
                }
            )
            for s in comparison.luma
        ],
        ignore_index=True,
    )
    out = {
        "comparison_variants": variants,
        "comparison_metrics": _record_rows(comparison.metrics),
        "comparison_luma": luma,
    }
    if pairs is not None and pair_frames is not None:
        out["comparison_pairs"] = pairs
        out["comparison_pair_frames"] = pair_frames
    return out


@dataclass(frozen=True)
class StoredComparison:
    """A comparison read back from the store, as tables (column names = record fields)."""

    comparison_id: str
    row: dict[str, Any]
    variants: pd.DataFrame
    metrics: pd.DataFrame
    pairs: pd.DataFrame
    pair_frames: pd.DataFrame
    luma: pd.DataFrame

    @property
    def run_ids(self) -> list[str]:
        return [str(r) for r in self.metrics.sort_values("variant_index")["run_id"]]

    @property
    def labels(self) -> list[str]:
        return [str(r) for r in self.variants.sort_values("variant_index")["label"]]


def load_comparison(store: SessionStore, comparison_id: str) -> StoredComparison:
    """A stored, finished comparison and all its tables.

    Raises
    ------
    StoreError : unknown id, or the comparison failed.
    """
    row = store.get_comparison(comparison_id)
    if row["status"] != "done":
        raise StoreError(
            f"comparison {comparison_id} is {row['status']}: {row.get('error') or 'no error recorded'}",
            path=store.path,
            stage="compare",
        )
    tables = {name: store.comparison_table(name, comparison_id) for name in COMPARISON_TABLES}
    return StoredComparison(
        comparison_id=comparison_id,
        row=row,
        variants=tables["comparison_variants"],
        metrics=tables["comparison_metrics"],
        pairs=tables["comparison_pairs"],
        pair_frames=tables["comparison_pair_frames"],
        luma=tables["comparison_luma"],
    )


COMPARISON_TABLES: tuple[str, ...] = (
    "comparison_variants",
    "comparison_metrics",
    "comparison_pairs",
    "comparison_pair_frames",
    "comparison_luma",
)
