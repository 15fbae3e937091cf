"""Comparison metrics: kept masks, Jaccard and Spearman of run pairs, run figures, luma series, heatmaps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import native
from backend.compare.encode import Variant
from backend.errors import DecodeError, InputError
from backend.imaging import psnr_db
from backend.luma import MeasureConfig, Prefetch, measure_frames
from backend.pipeline import RunResult
from backend.records import _check, _ShapeRepr

HEATMAP_SCALES: tuple[str, ...] = ("frame", "video", "all")
"""``frame``: each frame's stored normalised map; ``video``: log1p(raw) over the run's maximum;
``all``: log1p(raw per pixel) over the maximum of every compared run with the same signal
(see :class:`HeatmapNormaliser`)."""
DECODERS: tuple[str, ...] = ("full_decode", "fast_reader")


# --------------------------------------------------------------------------- records


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


def first_rows(result: RunResult) -> dict[int, int]:
    """Each candidate frame index's first row in ``result``'s candidates."""
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
    rows_a, rows_b = first_rows(a), first_rows(b)
    frames = np.asarray(sorted(set(rows_a) | set(rows_b)), dtype=np.int64)
    masks = (kept_masks(a), kept_masks(b))
    return pair_from_masks(
        a, b, *masks, frames, spearman_rows=(rows_a, rows_b), variants=(variant_a, variant_b)
    )


def pair_from_masks(
    a: RunResult,
    b: RunResult,
    masks_a: np.ndarray,
    masks_b: np.ndarray,
    frames: np.ndarray,
    *,
    spearman_rows: tuple[dict[int, int], dict[int, int]] | None,
    variants: tuple[int, int],
) -> PairMetrics:
    """Jaccard of two runs' kept masks at ``frames``, and their block-score Spearman.

    Parameters
    ----------
    masks_a, masks_b : (frames_a, H, W) and (frames_b, H, W) bool
        Kept blocks per ``frame_index`` on one grid; the shorter is padded with nothing kept.
    frames : (n,) int64
        The frame indices compared.
    spearman_rows : each run's candidate row per frame index, or None
        Where both runs have a row, the Spearman of their block scores; NaN elsewhere or with None.
    variants : the two variants' indices, recorded in the metrics.
    """
    total = max(masks_a.shape[0], masks_b.shape[0], int(frames.max()) + 1 if frames.size else 0)
    ma = np.concatenate([masks_a, np.zeros((total - masks_a.shape[0], *masks_a.shape[1:]), bool)])
    mb = np.concatenate([masks_b, np.zeros((total - masks_b.shape[0], *masks_b.shape[1:]), bool)])
    fa, fb = ma[frames].reshape(frames.size, -1), mb[frames].reshape(frames.size, -1)
    kept_a = fa.sum(axis=1).astype(np.int64)
    kept_b = fb.sum(axis=1).astype(np.int64)
    both = (fa & fb).sum(axis=1).astype(np.int64)
    union = kept_a + kept_b - both
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, both / np.maximum(union, 1), np.nan)
    rho = np.full(frames.size, np.nan)
    if spearman_rows is not None:
        rows_a, rows_b = spearman_rows
        for k, fid in enumerate(frames.tolist()):
            if fid in rows_a and fid in rows_b:
                rho[k] = spearman(a.scores.block_scores[rows_a[fid]], b.scores.block_scores[rows_b[fid]])
    return PairMetrics(
        variant_a=variants[0],
        variant_b=variants[1],
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
    canvases = int(result.canvases.count)
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
    streams = [Prefetch(native.frames_rgb(reference, conversion=conversion))]
    streams += [
        Prefetch(native.frames_rgb(v.video_path, reader=decoder, conversion=conversion)) for v in variants
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
    psnr = psnr_db(float(series.y_mse.mean()))
    return (
        float(series.luma_bias.mean()),
        float(np.abs(series.luma_bias).mean()),
        psnr,
        float(series.psnr_y_db.min()),
    )


def variant_metrics(
    variant: Variant, run_id: str, result: RunResult, full: LumaSeries | None, reader: LumaSeries | None
) -> VariantMetrics:
    """Selection, decode and luma figures of one variant.

    Parameters
    ----------
    variant : the variant the run selected on.
    run_id, result : its stored run.
    full, reader : its luma series of the full decode and of cvp's fast reader (None: not measured).

    Returns
    -------
    VariantMetrics with the run figures and the luma bias and Y-PSNR summaries.
    """
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
