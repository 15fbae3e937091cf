"""The onevision selector: OneVision-Encoder's LLaVA-NeXT codec path (global top-K of fused motion energy).

What the reference does (``EvolvingLMMs-Lab/OneVision-Encoder``,
``llava_next/Compressed_Video_Reader/tool/offline_precompute_llava_codec_assets.py`` with
``stage1.py`` / ``stage2.py``; the static fallback from ``dataloader/ap_dataloader_dali_codec.py``):
sample ``seq_len_frames`` frames uniformly, fuse motion-vector and residual energy per pixel,
letterbox every frame into a ``square_size`` square, score ``patch_size`` patches, keep frame 0
whole (canvas 0) and fill the remaining ``num_images - 1`` canvases with the top-K patches of
the other frames, either globally or per time bucket; a nearly static video first takes a few
uniformly spaced frames. Positions are ``[t, h, w]`` over the sampled frames.

Here that is a recipe of the pipeline's own stages (probe, uniform sampling, a motion signal of
``backend.stages.signals`` standing in for the patched decoder's residual export, the quality
test, the block-raster packer with 1×1 blocks) around the three steps that are onevision's:
the letterbox geometry, the letterboxed patch scores and the top-K selection. It returns the
same records as cvp's pipeline, so the output folder, the store and every view take it.
``docs/selectors.md`` (section onevision) lists every deviation from the reference.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.config import Registry, Variant, param, validate_fields
from backend.errors import DecodeError, PipelineError
from backend.pipeline.registry import STAGES
from backend.pipeline.runner import RunResult
from backend.records import (
    Candidates,
    DecodedFrames,
    FrameQuality,
    Geometry,
    Groups,
    GroupSelection,
    GroupSpec,
    RunWarning,
    ScoreMaps,
    Selection,
    VideoInfo,
)
from backend.stages import keyframes as keyframes_mod
from backend.stages import pack as pack_mod
from backend.stages import probe as probe_mod
from backend.stages import quality as quality_mod
from backend.stages import sample as sample_mod
from backend.stages.decode import decoder_thread_count
from backend.stages.geometry import check_frame_size
from backend.stages.score import NORMALISERS, ScoreConfig, patch_and_block_sums, upsample
from backend.stages.signals import SIGNALS, SignalConfig, compute_signals

TOPK_MODES = ("global", "time_bucket")  # the names of TOPK below (the options' choices)
SIGNAL_CHOICES = ("mvres", "residual", "mv")
CANVAS_FORMATS = ("jpg", "png")
SELECTOR = "onevision"


@dataclass(frozen=True, kw_only=True)
class OnevisionOptions:
    """Options of the onevision selector, named as OneVision-Encoder's scripts name them.

    The field metadata is the single schema for validation, CLI flags and app controls.
    """

    seq_len_frames: int = param(
        64,
        label="Sampled frames",
        help="frames sampled uniformly over the video; positions' t runs over them",
        min=2,
        max=100000,
    )
    num_images: int = param(
        8,
        label="Canvases",
        help="canvases: frame 0 whole, then the top-K patches of the other frames",
        min=2,
        max=256,
    )
    square_size: int = param(
        576,
        label="Square size",
        help="side of the square every frame is letterboxed into (longer side scaled to it, centred)",
        min=16,
        max=4096,
    )
    patch_size: int = param(16, label="Patch", help="patch side in pixels", min=1, max=256)
    topk_mode: str = param(
        "global",
        label="Top-K mode",
        help="global: one top-K over every patch of frames 1…; time_bucket: the frames split in "
        "contiguous buckets, the top canvas-full of patches of each",
        choices=TOPK_MODES,
    )
    time_bucket_count: int = param(
        -1,
        label="Time buckets",
        help="time_bucket: number of buckets; -1 takes one per remaining canvas (num_images - 1)",
        min=-1,
        max=100000,
    )
    signal: str = param(
        "mvres",
        label="Signal",
        help="per-pixel energy standing in for the patched decoder's export: mvres (fused motion + "
        "residual, the reference's), residual or mv (backend.stages.signals)",
        choices=SIGNAL_CHOICES,
    )
    w_mv: float = param(1.0, label="Motion weight", help="mvres: weight of the motion term", min=0, max=100)
    w_res: float = param(
        1.0, label="Residual weight", help="mvres: weight of the residual term", min=0, max=100
    )
    pct: float = param(
        95.0,
        label="Percentile",
        help="mvres: the frame's percentile mapped to 1.0 (the reference's mv_pct and res_pct together)",
        min=1,
        max=100,
    )
    static_fallback: bool = param(
        True,
        label="Static fallback",
        help="a nearly static video first keeps static_uniform_frames uniformly spaced frames",
    )
    static_abs_thresh: float = param(
        2.0,
        label="Static level",
        help="static when the 95th percentile of patch mean energy (0–255) is below this, or below "
        "twice this with a flat distribution",
        min=0,
        max=255,
    )
    static_rel_thresh: float = param(
        0.15,
        label="Static contrast",
        help="flat distribution: (p95 − p50) / p95 below this",
        min=0,
        max=1,
    )
    static_uniform_frames: int = param(
        4, label="Static frames", help="frames the static fallback keeps first", min=1, max=1000
    )
    canvas_format: str = param(
        "jpg", label="Canvas format", help="jpg (quality 95) or png", choices=CANVAS_FORMATS
    )
    workers: int = param(
        2,
        label="Workers",
        help="threads for the bad-frame test; 1 also decodes on one thread (as a batch runs)",
        min=1,
        max=64,
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.square_size % self.patch_size:
            raise ValueError(
                f"Invalid square size ({self.square_size!r}). Supported values are multiples of the "
                f"patch size ({self.patch_size})."
            )
        if self.signal == "mvres" and self.w_mv + self.w_res <= 0:
            raise ValueError(
                f"Invalid w mv + w res ({self.w_mv + self.w_res!r}). Supported values are a sum above 0."
            )

    def replace(self, **changes: Any) -> OnevisionOptions:
        """A copy with some options changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The options by name, in field order (the store and meta.json name the selector apart,
        as for every selector; the Run tab fills its controls from these in order)."""
        return dataclasses.asdict(self)

    # -- the cvp option names the output folder and the views read --------------------------
    # One group of every sampled frame; frame 0 its anchor; clean profile; pixels from a
    # normal decode; no keyframe avoidance.

    @property
    def profile(self) -> str:
        return "clean"

    @property
    def images_per_group(self) -> int:
        return self.num_images

    @property
    def group_size(self) -> int:
        return self.seq_len_frames

    @property
    def min_group_frames(self) -> int:
        return self.seq_len_frames

    @property
    def max_group_frames(self) -> int:
        return self.seq_len_frames

    @property
    def grouping_mode(self) -> str:
        return "single"

    @property
    def readiness_sum_threshold_mode(self) -> str:
        return "none"

    @property
    def readiness_norm_sum_threshold(self) -> float:
        return 0.0

    @property
    def avoid_keyframes(self) -> bool:
        return False

    @property
    def pixel_source(self) -> str:
        return "full_decode"

    @property
    def score(self) -> str:
        return self.signal

    @property
    def bitcost_grid(self) -> str:
        return "none"

    @property
    def iframe_score_clip_mode(self) -> str:
        return "none"

    @property
    def iframe_score_clip_percentile(self) -> float:
        return 0.0


# --------------------------------------------------------------------------- geometry


@dataclass(frozen=True, kw_only=True)
class LetterboxConfig:
    """The square every frame is letterboxed into, and its patches."""

    square_size: int = param(576, label="Square size", help="side of the square", min=16, max=4096)
    patch_size: int = param(16, label="Patch", help="patch side in pixels", min=1, max=256)

    def __post_init__(self) -> None:
        validate_fields(self)


def letterbox_geometry(info: VideoInfo, *, config: LetterboxConfig) -> Geometry:
    """The letterbox: the longer side scaled to ``square_size``, the frame centred in the square.

    Returns
    -------
    Geometry with ``prepared_hw`` the scaled frame (Hn, Wn) = (round(H·s), round(W·s)),
    s = square_size / max(H, W) (Python's rounding, as the reference), ``processed_hw`` the
    square, 1×1 blocks (onevision selects patches).

    Examples
    --------
    >>> from backend.records import VideoInfo
    >>> e = np.zeros(0)
    >>> info = VideoInfo("v", 0, "mp4", "h264", 1280, 720, 30.0, 1, "header", 1.0, 0, 0, 0.0,
    ...                  e, e.astype(np.int64), e.astype(bool), None, False)
    >>> geo = letterbox_geometry(info, config=LetterboxConfig())
    >>> geo.prepared_hw, geo.processed_hw, letterbox_offsets(geo)
    ((324, 576), (576, 576), (126, 0))
    """
    h0, w0 = info.height, info.width
    check_frame_size(w0, h0, path=info.path)
    s = config.square_size
    scale = s / max(h0, w0)
    content = (max(1, round(h0 * scale)), max(1, round(w0 * scale)))
    return Geometry(
        orig_hw=(h0, w0), prepared_hw=content, processed_hw=(s, s), patch=config.patch_size, block_size=1
    )


def letterbox_offsets(geometry: Geometry) -> tuple[int, int]:
    """(pad_top, pad_left) of the scaled frame inside the square."""
    (hn, wn), (s, _) = geometry.prepared_hw, geometry.processed_hw
    return (s - hn) // 2, (s - wn) // 2


def picture_blocks(geometry: Geometry) -> tuple[int, int, int, int]:
    """``(r0, r1, c0, c1)``: the patch rows and columns that show the scaled frame, its edges
    rounded to the nearest patch boundary (a comparison with another selector maps these onto
    that selector's grid; the bars are not part of the picture).

    Examples
    --------
    >>> geo = Geometry(orig_hw=(720, 1280), prepared_hw=(324, 576), processed_hw=(576, 576),
    ...                patch=16, block_size=1)
    >>> picture_blocks(geo)  # rows 126…450 px: 7.875 → 8, 28.125 → 28
    (8, 28, 0, 36)
    """
    top, left = letterbox_offsets(geometry)
    hn, wn = geometry.prepared_hw
    p = geometry.patch * geometry.block_size
    rows, cols = geometry.block_grid_hw
    r0, c0 = min(rows - 1, round(top / p)), min(cols - 1, round(left / p))
    r1, c1 = max(r0 + 1, min(rows, round((top + hn) / p))), max(c0 + 1, min(cols, round((left + wn) / p)))
    return r0, r1, c0, c1


def valid_patches(geometry: Geometry) -> np.ndarray:
    """(rows, cols) bool: patches lying wholly inside the scaled frame (not on the padding)."""
    top, left = letterbox_offsets(geometry)
    hn, wn = geometry.prepared_hw
    p = geometry.patch
    rows, cols = geometry.grid_hw
    r = np.arange(rows) * p
    c = np.arange(cols) * p
    return ((r >= top) & (r + p <= top + hn))[:, None] & ((c >= left) & (c + p <= left + wn))[None, :]


def _pad(content: np.ndarray, geometry: Geometry) -> np.ndarray:
    """Place a (Hn, Wn, …) array in the square at the letterbox offset, zeros around it."""
    s = geometry.processed_hw[0]
    top, left = letterbox_offsets(geometry)
    out = np.zeros((s, s, *content.shape[2:]), content.dtype)
    out[top : top + content.shape[0], left : left + content.shape[1]] = content
    return out


# --------------------------------------------------------------------------- decode and score


def decode_letterboxed(
    info: VideoInfo, candidates: Candidates, geometry: Geometry, *, config: SignalConfig
) -> tuple[DecodedFrames, np.ndarray, str]:
    """The candidates' signal grids and letterboxed pixels, from one decode.

    Returns
    -------
    decoded : DecodedFrames with ``pixels`` (n, S, S, 3) letterboxed RGB and ``grids`` the raw
        signal grids (cells of the original frame) — :func:`score_letterboxed` turns them into
        patch grids of the square.
    content : (n, Hn, Wn, 3) RGB of the scaled frames alone (for the bad-frame test).
    exactness : the signal's exactness summary.
    """
    hn, wn = geometry.prepared_hw
    signals = compute_signals(info, candidates.frame_indices, config=config, pixels_hw=(hn, wn))
    if signals.pixels is None:
        raise DecodeError(f"the {config.kind} signal decoded no pixels", path=info.path, stage="decode")
    ids = candidates.frame_indices.astype(np.int32)
    pixels = np.zeros((ids.size, *geometry.processed_hw, 3), np.uint8)
    top, left = letterbox_offsets(geometry)
    pixels[:, top : top + hn, left : left + wn] = signals.pixels
    warnings = list(signals.warnings)
    warnings.append(
        RunWarning(
            "signal_stand_in",
            f"{config.kind} from FFmpeg's exported motion vectors and a rebuilt prediction "
            f"({signals.exactness}) stands in for OneVision-Encoder's patched-decoder motion and "
            "residual export",
        )
    )
    decoded = DecodedFrames(
        frame_indices=ids,
        pixels=pixels,
        grids=signals.grids,
        grid_key=config.kind,
        pict_types=signals.pict_types,
        bitcost_source=ids,
        pixel_source="full_decode",
        read_mode=f"signal {config.kind} ({signals.exactness}), letterboxed",
        warnings=tuple(warnings),
    )
    return decoded, signals.pixels, signals.exactness


def _letterboxed_patch_sums(grid: np.ndarray, geometry: Geometry) -> np.ndarray:
    """(rows, cols) float32 patch sums of a cell grid stretched over the scaled frame, in the square."""
    stretched = upsample(np.asarray(grid, np.float32), geometry.prepared_hw)
    patches, _ = patch_and_block_sums(_pad(stretched, geometry), patch=geometry.patch, block_size=1)
    return patches


def score_letterboxed(decoded: DecodedFrames, geometry: Geometry, *, normalisation: str) -> ScoreMaps:
    """Patch scores of the letterboxed frames: each normalised grid stretched over the scaled
    frame (nearest neighbour), padded into the square and summed per patch.

    Returns
    -------
    ScoreMaps whose ``grids`` are the (rows, cols) patch means of the normalised map (so a view
    that stretches them over the square draws them in place), ``patch_scores`` the sums
    (n, rows, cols) and ``block_scores`` the same sums flattened (1×1 blocks).
    """
    normaliser = NORMALISERS.lookup(normalisation)
    raw = [np.zeros((1, 1), np.float32) if g is None else g for g in decoded.grids]
    normalised = normaliser.function(raw, config=ScoreConfig(normalisation=normalisation))
    area = np.float32(geometry.patch * geometry.patch)
    cache: dict[int, np.ndarray] = {}
    sums = []
    for g in normalised:  # repeated candidates share one grid object
        if id(g) not in cache:
            cache[id(g)] = _letterboxed_patch_sums(g, geometry)
        sums.append(cache[id(g)])
    patch_scores = np.stack(sums) if sums else np.zeros((0, *geometry.grid_hw), np.float32)
    return ScoreMaps(
        grids=tuple(s / area for s in sums),
        processed_hw=geometry.processed_hw,
        patch_scores=patch_scores,
        block_scores=patch_scores.reshape(patch_scores.shape[0], -1),
        iframe_clip_cap=None,
        debug={"normalisation": normalisation, "letterbox_offsets": list(letterbox_offsets(geometry))},
    )


def letterboxed_raw_grids(decoded: DecodedFrames, geometry: Geometry) -> tuple[np.ndarray, ...]:
    """The raw signal as patch means over the square (the grid views look up under a block)."""
    area = np.float32(geometry.patch * geometry.patch)
    cache: dict[int, np.ndarray] = {}
    out = []
    for g in decoded.grids:
        key = id(g)
        if key not in cache:
            grid = np.zeros((1, 1), np.float32) if g is None else g
            cache[key] = _letterboxed_patch_sums(grid, geometry) / area
        out.append(cache[key])
    return tuple(out)


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True, kw_only=True)
class TopKConfig:
    """How the patches after frame 0 are chosen."""

    num_images: int = param(8, label="Canvases", help="canvases (frame 0 whole + the rest)", min=2, max=256)
    topk_mode: str = param("global", label="Top-K mode", help="global or time_bucket", choices=TOPK_MODES)
    time_bucket_count: int = param(-1, label="Time buckets", help="-1: num_images - 1", min=-1, max=100000)
    static_fallback: bool = param(True, label="Static fallback", help="uniform frames for static videos")
    static_abs_thresh: float = param(2.0, label="Static level", help="p95 level (0–255)", min=0, max=255)
    static_rel_thresh: float = param(0.15, label="Static contrast", help="(p95 − p50) / p95", min=0, max=1)
    static_uniform_frames: int = param(4, label="Static frames", help="uniform frames", min=1, max=1000)

    def __post_init__(self) -> None:
        validate_fields(self)


@dataclass(frozen=True)
class StaticCheck:
    """The static-video test on the patch mean energies (0–255) of frames 1…."""

    p95: float
    p50: float
    rel_contrast: float
    is_static: bool

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def static_check(patch_means: np.ndarray, *, config: TopKConfig) -> StaticCheck:
    """Whether the energy is nearly static: p95 < a, or p95 < 2a with (p95 − p50) / p95 < r.

    Parameters
    ----------
    patch_means : any shape, patch mean energies on a 0–255 scale.

    Examples
    --------
    >>> static_check(np.array([0.0, 1.0, 1.0, 1.5]), config=TopKConfig()).is_static  # p95 1.425 < 2
    True
    >>> static_check(np.array([0.0, 1.0, 10.0, 30.0]), config=TopKConfig()).is_static
    False
    """
    values = np.asarray(patch_means, np.float64).ravel()
    if values.size == 0:
        return StaticCheck(0.0, 0.0, 0.0, True)
    p95 = float(np.percentile(values, 95.0))
    p50 = float(np.percentile(values, 50.0))
    rel = (p95 - p50) / max(p95, 1e-6)
    a = config.static_abs_thresh
    return StaticCheck(p95, p50, rel, bool(p95 < a or (p95 < 2 * a and rel < config.static_rel_thresh)))


def uniform_patch_picks(ts: list[int], valid_flat: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """The static fallback's uniform part: whole frames when the budget allows, else the budget
    spread evenly over the frames and, within each, evenly over its valid patches.

    Parameters
    ----------
    ts : the frames (candidate positions) picked uniformly.
    valid_flat : (m,) int, the flat indices of a frame's valid patches, raster order.
    budget : patches available.

    Returns
    -------
    (t, flat patch) pairs, frame by frame.

    Examples
    --------
    >>> uniform_patch_picks([1, 3], np.arange(4), 8)
    [(1, 0), (1, 1), (1, 2), (1, 3), (3, 0), (3, 1), (3, 2), (3, 3)]
    >>> uniform_patch_picks([1, 3], np.arange(4), 3)
    [(1, 0), (1, 2), (3, 0)]
    """
    m = int(valid_flat.size)
    if not ts or m == 0 or budget <= 0:
        return []
    if budget >= len(ts) * m:
        return [(t, int(v)) for t in ts for v in valid_flat]
    out: list[tuple[int, int]] = []
    base, extra = divmod(budget, len(ts))
    for j, t in enumerate(ts):
        k = base + (1 if j < extra else 0)
        if k <= 0:
            continue
        if k >= m:
            picks = list(range(m))
        else:
            step = m / k
            picks = list(dict.fromkeys(min(m - 1, round(i * step)) for i in range(k)))
            for p in range(m):  # duplicates after rounding: fill with the first unused
                if len(picks) >= k:
                    break
                if p not in picks:
                    picks.append(p)
        out.extend((t, int(valid_flat[p])) for p in picks)
    return out


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first; ties keep the lower index (stable)."""
    if k <= 0:
        return np.zeros(0, np.int64)
    return np.argsort(-scores, kind="stable")[:k]


def topk_global(
    cand: np.ndarray, *, budget: int, s_valid: int, config: TopKConfig
) -> tuple[list[int], dict[str, Any]]:
    """One top-K over every valid patch of frames 1…: the ``budget`` best, best first.

    Parameters
    ----------
    cand : (n − 1, S) float32 scores of frames 1…, −inf on the bars.
    budget : patches to choose; s_valid : valid patches per frame.

    Returns
    -------
    Flat indices ``(t − 1) · S + patch`` in the order chosen, and nothing for the debug record.

    Examples
    --------
    >>> topk_global(np.array([[1.0, 5.0], [3.0, -np.inf]], np.float32), budget=2, s_valid=1,
    ...             config=TopKConfig())
    ([1, 2], {})
    """
    del config
    available = cand.shape[0] * s_valid
    return _top(cand.reshape(-1), min(budget, available)).tolist(), {}


def topk_time_bucket(
    cand: np.ndarray, *, budget: int, s_valid: int, config: TopKConfig
) -> tuple[list[int], dict[str, Any]]:
    """Frames 1… in ``time_bucket_count`` contiguous buckets (−1: ``num_images − 1``), the best
    canvas-full (S patches) of each in turn, the list cut at the budget.

    Returns
    -------
    Flat indices as :func:`topk_global`, and ``time_buckets`` (first and last frame of each).

    Examples
    --------
    >>> cand = np.array([[1.0, 5.0], [3.0, 0.0], [2.0, 4.0]], np.float32)
    >>> topk_time_bucket(cand, budget=4, s_valid=2, config=TopKConfig(num_images=3))
    ([1, 2, 5, 4], {'time_buckets': [[1, 2], [3, 3]]})
    """
    n_later, s_total = cand.shape
    later = np.arange(1, n_later + 1)
    count = config.time_bucket_count if config.time_bucket_count > 0 else config.num_images - 1
    count = max(1, min(count, max(1, n_later)))
    buckets = [b for b in np.array_split(later, count) if b.size]
    chosen: list[int] = []
    for b in buckets:
        part = cand[b - 1].reshape(-1)
        top = _top(part, min(s_total, b.size * s_valid))
        chosen += ((b[top // s_total] - 1) * s_total + top % s_total).tolist()
    return chosen[:budget], {"time_buckets": [[int(b[0]), int(b[-1])] for b in buckets]}


TOPK: Registry[Variant] = Registry(
    "topk mode",
    (
        Variant("global", topk_global, "one top-K over every valid patch of frames 1…"),
        Variant("time_bucket", topk_time_bucket, "the best canvas-full of patches of each stretch of time"),
    ),
)


def select_topk(
    candidates: Candidates,
    scores: ScoreMaps,
    geometry: Geometry,
    *,
    config: TopKConfig,
) -> tuple[Selection, Groups]:
    """Frame 0 whole; the remaining canvases' patches by global or per-bucket top-K.

    Parameters
    ----------
    candidates : (n,) sampled frames; position t is the positions' time index.
    scores : (n, rows·cols) patch scores of the letterboxed frames.
    geometry : the square's patch grid (1×1 blocks).
    config : canvases, top-K mode and the static fallback.

    Returns
    -------
    Selection of one group (every candidate; frame 0 its anchor) whose ``kept`` rows are
    [t, patch_row, patch_col] and ``ranked`` the choices in the order they were made, and the
    Groups record holding that group and the selection's figures.
    """
    n = int(candidates.frame_indices.size)
    rows, cols = geometry.grid_hw
    s_total = rows * cols
    valid = valid_patches(geometry).ravel()
    valid_flat = np.flatnonzero(valid)
    s_valid = int(valid_flat.size)
    budget = (config.num_images - 1) * s_total
    block = scores.block_scores.astype(np.float32, copy=False)
    # Candidate scores of frames 1…, padding patches excluded: index (t - 1) · S + flat.
    cand = block[1:].copy() if n > 1 else np.zeros((0, s_total), np.float32)
    cand[:, ~valid] = -np.inf
    flat_cand = cand.reshape(-1)
    available = (n - 1) * s_valid
    debug: dict[str, Any] = {
        "selector": SELECTOR,
        "topk_mode": config.topk_mode,
        "S_total": s_total,
        "S_valid": s_valid,
        "K_rem": budget,
        "letterbox_offsets": list(letterbox_offsets(geometry)),
    }
    area = float(geometry.patch * geometry.patch)
    check = static_check(
        block[:, valid] / area * 255.0 if n else np.zeros(0),
        config=config,
    )
    chosen: list[int] = []  # flat candidate indices, in the order they were chosen
    if config.static_fallback and check.is_static and n > 1:
        f_u = max(1, min(n - 1, config.static_uniform_frames))
        ts = list(dict.fromkeys(np.linspace(1, n - 1, f_u).astype(int).tolist()))
        for t in range(1, n):  # duplicates after rounding: fill with the first unused frames
            if len(ts) >= f_u:
                break
            if t not in ts:
                ts.append(t)
        picks = uniform_patch_picks(ts, valid_flat, budget)
        chosen = [(t - 1) * s_total + p for t, p in picks]
        rest = flat_cand.copy()
        rest[chosen] = -np.inf
        k = min(budget - len(chosen), available - len(chosen))
        chosen += _top(rest, k).tolist()
        debug["static_uniform_frames"] = ts
    else:
        chosen, extra = TOPK.lookup(config.topk_mode).function(
            cand, budget=budget, s_valid=s_valid, config=config
        )
        debug |= extra
    debug["static"] = check.as_dict() | {"fallback_on": config.static_fallback}
    order = np.asarray(chosen, np.int64)
    t_of = order // s_total + 1
    flat_of = order % s_total
    ranked = np.stack([t_of, flat_of], axis=1).astype(np.int32) if order.size else np.zeros((0, 2), np.int32)
    ranked_scores = flat_cand[order].astype(np.float32) if order.size else np.zeros(0, np.float32)
    by_pos = np.lexsort((flat_of, t_of)) if order.size else np.zeros(0, np.int64)
    kept = (
        np.stack([t_of[by_pos], flat_of[by_pos] // cols, flat_of[by_pos] % cols], axis=1).astype(np.int32)
        if order.size
        else np.zeros((0, 3), np.int32)
    )
    selection_group = GroupSelection(
        group_index=0,
        start=0,
        end=n,
        frame_indices=tuple(int(i) for i in candidates.frame_indices),
        anchor_swapped_with=None,
        kept=kept,
        kept_scores=ranked_scores[by_pos].astype(np.float32),
        ranked=ranked,
        ranked_scores=ranked_scores,
        candidate_count=available,
        budget=budget,
        cutoff_score=float(ranked_scores.min()) if order.size else float("-inf"),
    )
    warnings: list[RunWarning] = []
    if config.static_fallback and check.is_static:
        warnings.append(
            RunWarning(
                "static_fallback",
                f"nearly static video (p95 {check.p95:.2f}, contrast {check.rel_contrast:.2f}): "
                f"frames {debug['static_uniform_frames']} kept uniformly before the top-K",
            )
        )
    if kept.shape[0] < budget:
        warnings.append(
            RunWarning(
                "onevision_padded",
                f"{kept.shape[0]} of {budget} patches available after frame 0; the rest is padding",
            )
        )
    debug["selected"] = int(kept.shape[0])
    why = "onevision: one group of every sampled frame"
    spec = GroupSpec(group_index=0, start=0, end=n, stop_reason=why, readiness=debug)
    groups = Groups(specs=(spec,), threshold=0.0, threshold_debug={}, trace=(), dropped_tail=None)
    return Selection((selection_group,), (), tuple(warnings)), groups


# --------------------------------------------------------------------------- the recipe


def select_onevision(
    video: str | Path,
    *,
    options: OnevisionOptions,
    on_progress: Callable[[str, float], None] | None = None,
) -> RunResult:
    """Run the onevision selector on one video.

    Parameters
    ----------
    video : path of the video file.
    options : the selector's options.
    on_progress : called as ``on_progress(stage_name, fraction_done)`` after each step.

    Returns
    -------
    RunResult with the pipeline's records: candidates (``seq_len_frames`` uniform frames),
    a letterbox geometry (square ``processed_hw``, 1×1 blocks), the letterboxed pixels and
    signal grids, patch scores, one group, its selection, and ``num_images`` canvases with
    N×8 token rows (``src_patch_position`` = [frame_index, patch_row, patch_col] in the square).

    Raises
    ------
    InputError, UnsupportedVideoError, DecodeError, PipelineError.
    """
    steps = ("probe", "sample", "geometry", "decode", "quality", "score", "select", "pack")
    timings: dict[str, float] = {}
    t_start = time.perf_counter()

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        timings[name] = time.perf_counter() - t0
        if on_progress is not None:
            on_progress(name, (steps.index(name) + 1) / len(steps))
        return out

    o = options
    info: VideoInfo = timed(
        "probe", lambda: STAGES.lookup("probe").function(video, config=probe_mod.ProbeConfig(profile="clean"))
    )
    sample_cfg = sample_mod.SampleConfig(
        frame_sampling_mode="uniform_count", num_sampled_frames=o.seq_len_frames
    )
    keyframe_cfg = keyframes_mod.KeyframeConfig(avoid_keyframes=False, frame_sampling_mode="uniform_count")

    def sample() -> Candidates:
        sampled = STAGES.lookup("sample").function(info, config=sample_cfg)
        return STAGES.lookup("keyframes").function(sampled, info, config=keyframe_cfg)

    candidates: Candidates = timed("sample", sample)
    geometry: Geometry = timed(
        "geometry",
        lambda: letterbox_geometry(
            info, config=LetterboxConfig(square_size=o.square_size, patch_size=o.patch_size)
        ),
    )
    signal_cfg = SignalConfig(
        kind=o.signal,
        mv_weight=o.w_mv,
        residual_weight=o.w_res,
        percentile=o.pct,
        threads=decoder_thread_count(o.workers),
    )
    decoded, content, _exactness = timed(
        "decode", lambda: decode_letterboxed(info, candidates, geometry, config=signal_cfg)
    )

    def quality() -> FrameQuality:
        # The bad-frame test looks at the frames themselves, not at the letterbox's bars.
        bare = dataclasses.replace(decoded, pixels=content, warnings=())
        return quality_mod.assess_frames(bare, config=quality_mod.QualityConfig(threads=o.workers))

    frame_quality: FrameQuality = timed("quality", quality)
    normalisation = SIGNALS.lookup(o.signal).normalisation
    scores: ScoreMaps = timed(
        "score", lambda: score_letterboxed(decoded, geometry, normalisation=normalisation)
    )
    decoded = dataclasses.replace(decoded, grids=letterboxed_raw_grids(decoded, geometry))
    topk_cfg = TopKConfig(
        num_images=o.num_images,
        topk_mode=o.topk_mode,
        time_bucket_count=o.time_bucket_count,
        static_fallback=o.static_fallback,
        static_abs_thresh=o.static_abs_thresh,
        static_rel_thresh=o.static_rel_thresh,
        static_uniform_frames=o.static_uniform_frames,
    )
    selection, groups = timed("select", lambda: select_topk(candidates, scores, geometry, config=topk_cfg))
    if not selection.groups:
        raise PipelineError("no canvases produced", path=info.path, stage="select")
    canvases = timed(
        "pack",
        lambda: STAGES.lookup("pack").function(
            selection, decoded, geometry, config=pack_mod.PackConfig(images_per_group=o.num_images)
        ),
    )
    timings["total"] = time.perf_counter() - t_start
    warnings = candidates.warnings + decoded.warnings + groups.warnings + selection.warnings
    hn, wn = geometry.prepared_hw
    if hn * wn > info.width * info.height:
        upscaled = f"frames upscaled from {info.width}x{info.height} to {wn}x{hn}"
        warnings += (RunWarning("letterbox_upscaled", upscaled),)
    return RunResult(
        options=o,  # type: ignore[arg-type]  # the selector's own options (cvp names as properties)
        info=info,
        candidates=candidates,
        geometry=geometry,
        decoded=decoded,
        quality=frame_quality,
        scores=scores,
        groups=groups,
        selection=selection,
        canvases=canvases,
        warnings=warnings,
        timings_secs=timings,
    )
