"""Grouping stage: fixed-size or readiness groups, with a trace of every readiness step."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from backend.config import PROFILES, Profile, Registry, Variant, param, validate_fields
from backend.errors import PipelineError
from backend.quirks import quirk, quirk_on, quirk_warning
from backend.records import (
    Candidates,
    Geometry,
    Groups,
    GroupSpec,
    ReadinessStep,
    RunWarning,
    ScoreMaps,
    VideoInfo,
)

MIN_GROUP_FRAMES = 4
"""cvp's floor on the frames of a readiness group (spec §11.1)."""


def block_budget(geometry: Geometry, images_per_group: int) -> int:
    """Blocks that fill the non-anchor canvases: (ipg·S − S) // b²."""
    hb, wb = geometry.grid_hw
    b = geometry.block_size
    if hb % b or wb % b:
        raise PipelineError(f"patch grid {hb}x{wb} is not divisible by block size {b}", stage="group")
    s = hb * wb
    return max(0, (images_per_group * s - s) // (b * b))


@functools.lru_cache(maxsize=1024)
def _first_bin(g: int, nbins: int) -> np.ndarray:
    """Bin of each window position t (−1 for none): the first i with lo_i ≤ t < hi_i.

    Edges are ``linspace_int(1, max(2, G), bins + 1)``; an empty bin [lo, lo) is widened
    to [lo, lo + 1), and a frame counts for its first matching bin only (cvp).
    """
    edges = np.linspace(1, max(2, g), nbins + 1, dtype=np.int32).tolist()
    out = np.full(g, -1, dtype=np.int64)
    for t in range(g):
        for i in range(nbins):
            lo, hi = int(edges[i]), int(edges[i + 1])
            if hi <= lo:
                hi = lo + 1
            if lo <= t < hi:
                out[t] = i
                break
    out.flags.writeable = False  # shared by the cache
    return out


def window_stats(block_scores: np.ndarray, *, budget: int, bins: int) -> dict[str, Any]:
    """Top-K statistics of a would-be group (row 0 is the anchor, rows 1… candidates).

    Parameters
    ----------
    block_scores : (G, nblocks) float32.

    Returns
    -------
    dict with the top-K sum, covered time bins and selected frames (cvp's keys).
    """
    g = block_scores.shape[0]
    zero = {
        "candidate_block_count": 0,
        "topk_candidate_block_score_sum": 0.0,
        "topk_candidate_block_score_mean": 0.0,
        "topk_candidate_block_score_density": 0.0,
        "selected_time_bins": 0,
        "selected_time_bin_ratio": 0.0,
        "selected_unique_frames": 0,
        "selected_unique_frame_ratio": 0.0,
        "block_budget": int(budget),
        "selected_t_rel": [],
    }
    if g == 0:
        return zero
    nb = block_scores.shape[1]
    scores = np.ascontiguousarray(block_scores[1:], dtype=np.float32).reshape(-1)
    if scores.size == 0 or budget <= 0:
        return zero | {"candidate_block_count": int(scores.size)}
    k = min(budget, scores.size)
    if k < scores.size:
        idx = np.argpartition(-scores, kth=k - 1)[:k]
        idx = idx[np.argsort(-scores[idx])]
    else:
        idx = np.arange(scores.size, dtype=np.int32)
    chosen = scores[idx]
    total = float(chosen.sum())
    present = np.zeros(g, dtype=bool)
    present[idx // nb + 1] = True
    frames_arr = np.flatnonzero(present)
    frames = frames_arr.tolist()
    nbins = max(1, bins)
    bin_of = _first_bin(g, nbins)
    hit = bin_of[frames_arr]
    covered = int(np.unique(hit[hit >= 0]).size)
    return {
        "candidate_block_count": int(scores.size),
        "topk_candidate_block_score_sum": total,
        "topk_candidate_block_score_mean": float(chosen.mean()),
        "topk_candidate_block_score_density": total / float(max(1, g)),
        "selected_time_bins": covered,
        "selected_time_bin_ratio": covered / float(nbins),
        "selected_unique_frames": len(frames),
        "selected_unique_frame_ratio": len(frames) / float(max(1, g - 1)),
        "block_budget": int(budget),
        "selected_t_rel": frames,
    }


class _Sorted(NamedTuple):
    """Candidate values at or above a floor, descending, with their window rows."""

    vals: np.ndarray  # (M,) float32, descending
    neg: np.ndarray  # (M,) float32, −vals (ascending, for searchsorted)
    rows: np.ndarray  # (M,) int64, window-relative row of each value (1 … G−1)


class _GrowingWindow:
    """Top-K statistics of the windows [start, end) of one group start, for growing ends.

    The top K of a window [start, end) are the K largest values among rows start+1 …
    end−1. Windows only grow, so the K-th largest value of one window is a floor for
    every longer one: only the values at or above it are sorted (descending), and the
    top K of a window are the first K sorted values whose row is below ``end``. The
    top-K sum and mean (summed in descending order, as cvp's argsort leaves them)
    follow without selecting again, and so do the frames they come from whenever no tie
    straddles the K-th place. Only then does membership depend on numpy's introselect:
    :meth:`scan` takes the covered bins from the two extreme tie outcomes when they
    agree, and otherwise (as :meth:`stats` always does for such a window) recomputes
    the window exactly with :func:`window_stats`.
    """

    def __init__(
        self, block_scores: np.ndarray, start: int, *, budget: int, bins: int, stop: int | None = None
    ) -> None:
        self._blocks = block_scores
        self._start = start
        self._k = budget
        self._bins = bins
        self._nbins = max(1, bins)
        self._nb = block_scores.shape[1]
        self._stop = block_scores.shape[0] if stop is None else stop
        # Candidate values of the longest window in row-major order: window row t holds
        # positions (t − 1)·nb … t·nb − 1.
        self._vals = np.ascontiguousarray(block_scores[start + 1 : self._stop], dtype=np.float32).reshape(-1)
        # NaN or inf order is introselect's business: such windows are always recomputed.
        self._finite = bool(np.isfinite(self._vals).all())
        # The last values :meth:`scan` sorted and the window lengths they serve, for stats().
        self._reuse: tuple[int, int, _Sorted] = (
            0,
            -1,
            _Sorted(np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64)),
        )

    def _sorted_path(self, end: int) -> bool:
        """Whether the window [start, end) has more candidates than K and sortable values."""
        g = end - self._start
        return self._k > 0 and self._finite and end <= self._stop and (g - 1) * self._nb > self._k

    def _sort(self, g_hi: int, floor: float | None, g: int) -> _Sorted:
        """The values at or above ``floor`` among the rows of windows up to ``g_hi`` long.

        ``floor`` None: the k-th largest value of the window ``g`` long, a floor for
        every window at least that long.
        """
        if floor is None:
            n0 = (g - 1) * self._nb
            floor = np.partition(self._vals[:n0], n0 - self._k)[n0 - self._k]
        head = self._vals[: (g_hi - 1) * self._nb]
        keep = np.flatnonzero(head >= floor)
        vals = head[keep]
        order = np.argsort(-vals)
        vals = vals[order]
        return _Sorted(vals, -vals, keep[order] // self._nb + 1)

    def _exact(self, end: int) -> dict[str, Any]:
        return window_stats(self._blocks[self._start : end], budget=self._k, bins=self._bins)

    def _top(self, srt: _Sorted, g: int, width: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Sorted positions of the window's eligible values (within ``width``), its top K, tie?"""
        k = self._k
        elig = np.flatnonzero(srt.rows[:width] < g)  # at least k: the floor is some window's k-th
        chosen = srt.vals[elig[:k]]
        tie = elig.size > k and bool(srt.vals[elig[k]] == chosen[-1])
        return elig, chosen, tie

    def stats(self, end: int) -> dict[str, Any]:
        """Statistics of the window [start, end), equal to ``window_stats`` on it."""
        if not self._sorted_path(end):
            return self._exact(end)
        g, k = end - self._start, self._k
        g_lo, g_hi, srt = self._reuse
        if not g_lo <= g <= g_hi:
            srt = self._sort(g, None, g)
        elig, chosen, tie = self._top(srt, g, srt.vals.size)
        if tie:
            return self._exact(end)  # which tied frames are in is introselect's choice
        total = float(chosen.sum())
        frames_arr = np.unique(srt.rows[elig[:k]])
        hit = _first_bin(g, self._nbins)[frames_arr]
        covered = int(np.unique(hit[hit >= 0]).size)
        return {
            "candidate_block_count": int((g - 1) * self._nb),
            "topk_candidate_block_score_sum": total,
            "topk_candidate_block_score_mean": float(chosen.mean()),
            "topk_candidate_block_score_density": total / float(max(1, g)),
            "selected_time_bins": covered,
            "selected_time_bin_ratio": covered / float(self._nbins),
            "selected_unique_frames": int(frames_arr.size),
            "selected_unique_frame_ratio": frames_arr.size / float(max(1, g - 1)),
            "block_budget": int(k),
            "selected_t_rel": frames_arr.tolist(),
        }

    def scan(self, ends: range) -> Iterator[tuple[int, float, int]]:
        """(end, top-K sum, covered time bins) for each end in increasing order, lazily.

        Equal to ``window_stats``' sum and ``selected_time_bins`` on each window. The
        sorted values cover a doubling range of rows, so stopping early stays cheap.
        """
        k, start, nbins = self._k, self._start, self._nbins
        srt: _Sorted | None = None
        g_hi = width = 0
        floor: float | None = None
        for end in ends:
            if not self._sorted_path(end):
                st = self._exact(end)
                yield end, st["topk_candidate_block_score_sum"], st["selected_time_bins"]
                continue
            g = end - start
            if srt is None or g > g_hi:
                g_hi = min(self._stop - start, max(2 * g, g + 8))
                srt = self._sort(g_hi, floor, g)
                width = srt.vals.size
                self._reuse = (g, g_hi, srt)
            # Positions (in descending order) of the window's values; the first k are its top K.
            elig = (srt.rows[:width] < g).nonzero()[0]
            top = elig[:k]
            chosen = srt.vals[top]
            # Summed on its own: a contiguous descending float32 array sums as window_stats' does.
            total = float(np.add.reduce(chosen))
            kth = chosen[-1]
            hi = int(srt.neg.searchsorted(-kth, "right"))
            if elig.size <= k or srt.vals[elig[k]] != kth:
                covered = _bin_count(_bin_bits(g, nbins)[srt.rows[top]])
            else:
                # A tie straddles the k-th place: every value above it is in, and of those
                # equal to it introselect picks; settle it when both extremes agree.
                lo = int(srt.neg.searchsorted(-kth, "left"))
                bits = _bin_bits(g, nbins)
                low = _bin_count(bits[srt.rows[elig[elig < lo]]])
                high = _bin_count(bits[srt.rows[elig[elig < hi]]])
                covered = low if low == high else self._exact(end)["selected_time_bins"]
            # Longer windows have a k-th value at least this one: smaller values never matter.
            floor, width = kth, hi
            yield end, total, covered


@functools.lru_cache(maxsize=1024)
def _bin_bits(g: int, nbins: int) -> np.ndarray:
    """Per window row, ``1 << bin`` (0 for no bin): OR-ing a set of rows gives its covered bins."""
    fb = _first_bin(g, nbins)
    out = np.where(fb >= 0, np.left_shift(np.uint64(1), np.maximum(fb, 0).astype(np.uint64)), np.uint64(0))
    out.flags.writeable = False  # shared by the cache
    return out


def _bin_count(bits: np.ndarray) -> int:
    """Number of distinct bins in an array of ``1 << bin`` values."""
    return int(np.bitwise_or.reduce(bits)).bit_count() if bits.size else 0


# --------------------------------------------------------------------------- thresholds


class Threshold(NamedTuple):
    """A readiness threshold and where it came from."""

    value: float
    source: str


def _bits_per_pixel(info: VideoInfo, config: GroupConfig) -> dict[str, Any]:
    """Bits per frame and per pixel per frame, clamped, and the threshold factor from them."""
    fps_safe = info.fps or 1.0
    bit_rate = info.bit_rate
    bits_per_frame = bit_rate / max(fps_safe, 1e-6) if bit_rate > 0 else 0.0
    bpppf = bits_per_frame / max(1, info.width * info.height) if bit_rate > 0 else 0.0
    clamped = bpppf
    if config.bpppf_clamp_min > 0:
        clamped = max(clamped, config.bpppf_clamp_min)
    if config.bpppf_clamp_max > 0:
        clamped = min(clamped, config.bpppf_clamp_max)
    factor = math.sqrt(clamped) if clamped > 1e-12 else 1.0
    return {
        "bits_per_frame": bits_per_frame,
        "bits_per_pixel_per_frame": bpppf,
        "bits_per_pixel_per_frame_clamped": clamped,
        "readiness_threshold_norm_factor": factor,
        "threshold_source": "",
    }


def given_threshold(
    scores: ScoreMaps, bits: dict[str, Any], *, budget: int, config: GroupConfig
) -> Threshold:
    """``readiness_sum_threshold`` as given (0: only the coverage decides)."""
    return Threshold(float(config.readiness_sum_threshold), "given")


def estimated_threshold(
    scores: ScoreMaps, bits: dict[str, Any], *, budget: int, config: GroupConfig
) -> Threshold:
    """The mean top-K sum over consecutive chunks of ``group_size`` candidates (short chunks skipped)."""
    chunk = max(1, config.group_size)
    min_len = max(4, config.readiness_coverage_bins + 1)
    sums = []
    n = scores.block_scores.shape[0]
    for lo in range(0, n, chunk):
        window = scores.block_scores[lo : min(n, lo + chunk)]
        if window.shape[0] < min_len:
            continue
        sums.append(
            window_stats(window, budget=budget, bins=config.readiness_coverage_bins)[
                "topk_candidate_block_score_sum"
            ]
        )
    value = float(np.mean(np.asarray(sums, dtype=np.float64))) if sums else 0.0
    return Threshold(value, f"mean top-K sum of {len(sums)} chunks of {chunk}")


def legacy_threshold(
    scores: ScoreMaps, bits: dict[str, Any], *, budget: int, config: GroupConfig
) -> Threshold:
    """The given threshold when it is above 0, else the estimate."""
    if config.readiness_sum_threshold > 0:
        return given_threshold(scores, bits, budget=budget, config=config)
    return estimated_threshold(scores, bits, budget=budget, config=config)


def bpppf_threshold(
    scores: ScoreMaps, bits: dict[str, Any], *, budget: int, config: GroupConfig
) -> Threshold:
    """``readiness_norm_sum_threshold`` × sqrt(clamped bits per pixel per frame)."""
    value = config.readiness_norm_sum_threshold * bits["readiness_threshold_norm_factor"]
    return Threshold(value, "norm threshold × sqrt(clamped bpppf)")


THRESHOLDS: Registry[Variant] = Registry(
    "readiness sum threshold mode",
    (
        Variant("legacy", legacy_threshold, "the given threshold if above 0, else the estimate"),
        Variant("auto", estimated_threshold, "the mean top-K sum of group_size chunks"),
        Variant("fixed", given_threshold, "the given threshold"),
        Variant("clamped_sqrt_bpppf", bpppf_threshold, "norm threshold × sqrt(clamped bpppf)"),
    ),
)
THRESHOLD_MODES = THRESHOLDS.names


def resolve_threshold(
    info: VideoInfo, scores: ScoreMaps, *, budget: int, config: GroupConfig
) -> tuple[float, dict[str, Any]]:
    """The readiness threshold and the bits-per-pixel figures behind it."""
    debug = _bits_per_pixel(info, config)
    mode = THRESHOLDS.lookup(config.readiness_sum_threshold_mode)
    threshold, debug["threshold_source"] = mode.function(scores, debug, budget=budget, config=config)
    return threshold, debug


# --------------------------------------------------------------------------- the groupers


def _describe(ok: bool, s: float, thr: float, cov: int, need: int) -> str:
    if ok:
        return f"sum {s:.1f} ≥ threshold {thr:.1f} and {cov}/{need} bins covered"
    if s < thr:
        return f"sum {s:.1f} < threshold {thr:.1f}"
    return f"only {cov} of {need} time bins covered"


def fixed_groups(
    info: VideoInfo,
    candidates: Candidates,
    scores: ScoreMaps,
    geometry: Geometry,
    *,
    config: GroupConfig,
) -> Groups:
    """Consecutive groups of ``group_size`` candidates (the last may be shorter); no threshold."""
    n = scores.block_scores.shape[0]
    budget = block_budget(geometry, config.images_per_group)
    debug = _bits_per_pixel(info, config)
    debug |= {
        "bits_per_pixel_per_frame_clamped": debug["bits_per_pixel_per_frame"],
        "readiness_threshold_norm_factor": 1.0,
    }
    debug["threshold_source"] = "not used (fixed grouping)"
    debug["block_budget"] = budget
    size = max(1, config.group_size)
    specs = [
        GroupSpec(k, lo, min(n, lo + size), "fixed_group_size", {}) for k, lo in enumerate(range(0, n, size))
    ]
    return Groups(tuple(specs), float(config.readiness_sum_threshold), debug, (), None, ())


def _raised_limit_warnings(config: GroupConfig) -> list[RunWarning]:
    """The ``group_limits_raised`` warning when the run's frame limits differ from the given ones."""
    mn, mx = config.frame_limits
    raised = [
        f"{name} {given} ran as {used}"
        for name, given, used in (
            ("min_group_frames", config.min_group_frames, mn),
            ("max_group_frames", config.max_group_frames, mx),
        )
        if given != used
    ]
    if raised:  # only where the quirk is on: other profiles refuse such limits
        cite = quirk("group_limits_raised").cite
        return [quirk_warning("group_limits_raised", f"{'; '.join(raised)} ({cite})")]
    return []


def _close_tail(
    specs: list[GroupSpec],
    start: int,
    ids: np.ndarray,
    block_scores: np.ndarray,
    *,
    minimum: int,
    budget: int,
    bins: int,
    profile: str,
) -> tuple[tuple[int, int] | None, RunWarning | None]:
    """The candidates from ``start`` on, fewer than ``minimum``: where the ``tail_dropped`` quirk is
    on they are dropped ((start, n) and its warning returned), else merged into the last group of
    ``specs`` (or made its only group)."""
    n = block_scores.shape[0]
    if quirk_on(profile, "tail_dropped"):
        return (start, n), quirk_warning(
            "tail_dropped",
            f"candidates {start}–{n - 1} (frames {int(ids[start])}–{int(ids[n - 1])}) dropped: "
            f"{n - start} left, fewer than {minimum} needed for a group",
        )
    if specs:
        last = specs.pop()
        stats = window_stats(block_scores[last.start : n], budget=budget, bins=bins)
        specs.append(GroupSpec(last.group_index, last.start, n, "tail_merged", stats))
    else:
        stats = window_stats(block_scores[start:n], budget=budget, bins=bins)
        specs.append(GroupSpec(0, start, n, "tail_flush", stats))
    return None, None


def readiness_groups(
    info: VideoInfo,
    candidates: Candidates,
    scores: ScoreMaps,
    geometry: Geometry,
    *,
    config: GroupConfig,
) -> Groups:
    """Grow each group until its top-K blocks reach the threshold and cover the time bins.

    The trace has one step per window end the scan evaluated. A tail shorter than the
    minimum is dropped where the ``tail_dropped`` quirk is on, else merged into the last group.
    """
    n = scores.block_scores.shape[0]
    budget = block_budget(geometry, config.images_per_group)
    threshold, debug = resolve_threshold(info, scores, budget=budget, config=config)
    debug["block_budget"] = budget
    bins = config.readiness_coverage_bins
    specs: list[GroupSpec] = []
    trace: list[ReadinessStep] = []
    warnings = _raised_limit_warnings(config)
    dropped: tuple[int, int] | None = None
    ids = candidates.frame_indices

    mn, mx = config.frame_limits
    need = min(bins, config.images_per_group - 1)
    start = 0
    while start < n:
        if n - start < max(4, mn):
            dropped, warning = _close_tail(
                specs,
                start,
                ids,
                scores.block_scores,
                minimum=max(4, mn),
                budget=budget,
                bins=bins,
                profile=config.profile,
            )
            if warning is not None:
                warnings.append(warning)
            break
        gi = len(specs)
        min_end, max_end = min(n, start + max(1, mn)), min(n, start + max(1, mx))
        prev: float | None = None
        chosen: int | None = None
        chosen_stats: dict[str, Any] = {}
        reason = "max_group_frames"
        growing = _GrowingWindow(scores.block_scores, start, budget=budget, bins=bins, stop=max_end)
        for end, s, covered in growing.scan(range(min_end, max_end + 1)):
            ok = s >= threshold and covered >= need
            ratio = 1.0 if prev is None else (s - prev) / max(abs(prev), 1e-6)
            stop = False
            if ok:
                chosen, reason = end, "readiness_threshold"
                if prev is not None and ratio < config.readiness_delta_ratio:
                    reason, stop = "readiness_threshold_low_gain", True
            why = _describe(ok, s, threshold, covered, need)
            if stop:
                why += f"; gain {ratio:.1%} < {config.readiness_delta_ratio:.0%}: stop"
            elif ok:
                why += f"; gain {ratio:.1%}: keep growing"
            trace.append(
                ReadinessStep(
                    group_index=gi,
                    start=start,
                    end=end,
                    frame_index_added=int(ids[end - 1]),
                    topk_sum=s,
                    threshold=threshold,
                    covered_bins=covered,
                    needed_bins=need,
                    marginal_gain=ratio,
                    passed=ok,
                    decision="stop" if stop else "continue",
                    reason=why,
                )
            )
            prev = s
            if stop:
                break
        if chosen is None:
            chosen = max_end
            chosen_stats = window_stats(scores.block_scores[start:max_end], budget=budget, bins=bins)
            if max_end >= n:
                reason = "tail_flush"
        else:
            chosen_stats = growing.stats(chosen)
        specs.append(GroupSpec(gi, start, chosen, reason, chosen_stats))
        start = chosen
    return Groups(tuple(specs), threshold, debug, tuple(trace), dropped, tuple(warnings))


GROUPERS: Registry[Variant] = Registry(
    "grouping mode",
    (
        Variant("readiness", readiness_groups, "grow each group until its top-K blocks are ready"),
        Variant("fixed", fixed_groups, "consecutive groups of group_size candidates"),
    ),
)
GROUPING_MODES = GROUPERS.names


@dataclass(frozen=True, kw_only=True)
class GroupConfig:
    """Grouping parameters (cvp option names)."""

    grouping_mode: str = param(
        "readiness", label="Grouping", help="readiness or fixed-size groups", choices=GROUPERS.names
    )
    group_size: int = param(
        32,
        label="Group size",
        help="fixed group length; chunk for threshold estimation",
        min=1,
        max=100000,
    )
    images_per_group: int = param(
        4,
        label="Images per group",
        help="canvases per group (1 anchor + rest blocks)",
        min=1,
        max=1024,
    )
    min_group_frames: int = param(
        8, label="Min group frames", help="smallest readiness group (at least 4)", min=1, max=100000
    )
    max_group_frames: int = param(
        64, label="Max group frames", help="largest readiness group", min=1, max=100000
    )
    readiness_sum_threshold_mode: str = param(
        "legacy",
        label="Threshold mode",
        help="legacy: estimate unless a threshold is given; auto: estimate; fixed: as given; "
        "clamped_sqrt_bpppf: norm threshold × sqrt(clamped bits per pixel per frame)",
        choices=THRESHOLDS.names,
    )
    readiness_sum_threshold: float = param(
        0.0, label="Threshold", help="top-K sum a group must reach", min=0.0, max=1e12
    )
    readiness_norm_sum_threshold: float = param(
        2250000.0, label="Norm threshold", help="for clamped_sqrt_bpppf", min=0.0, max=1e12
    )
    bpppf_clamp_min: float = param(
        0.015, label="bpppf min", help="lower clamp of bits per pixel per frame", min=0.0, max=100.0
    )
    bpppf_clamp_max: float = param(
        0.09, label="bpppf max", help="upper clamp of bits per pixel per frame", min=0.0, max=100.0
    )
    readiness_coverage_bins: int = param(
        3, label="Coverage bins", help="time bins the top-K must touch", min=1, max=64
    )
    readiness_delta_ratio: float = param(
        0.05, label="Gain ratio", help="stop when the top-K sum gains less", min=0.0, max=10.0
    )
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity drops a short readiness tail like cvp; clean merges it into the last group",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        if quirk_on(self.profile, "group_limits_raised"):
            return  # cvp accepts any limits and raises them (spec §11.1); the grouper warns
        if self.min_group_frames < MIN_GROUP_FRAMES:
            raise ValueError(
                f"Invalid min group frames ({self.min_group_frames!r}) for the {self.profile} profile. "
                f"Supported values are at least {MIN_GROUP_FRAMES}."
            )
        if self.max_group_frames < self.min_group_frames:
            raise ValueError(
                f"Invalid max group frames ({self.max_group_frames!r}) for the {self.profile} profile. "
                f"Supported values are at least min group frames ({self.min_group_frames})."
            )

    @property
    def frame_limits(self) -> tuple[int, int]:
        """(min_frames, max_frames) after cvp's floors."""
        mn = max(MIN_GROUP_FRAMES, self.min_group_frames)
        return mn, max(mn, self.max_group_frames)


def build_groups(
    info: VideoInfo,
    candidates: Candidates,
    scores: ScoreMaps,
    geometry: Geometry,
    *,
    config: GroupConfig,
) -> Groups:
    """Split the candidates into groups with the grouper ``config.grouping_mode`` names.

    Parameters
    ----------
    info : probe result (bit rate, size, fps for the threshold).
    candidates : (n,) frame indices.
    scores : (n, nblocks) block scores.
    geometry : patch grid (for the block budget).
    config : mode, limits and threshold.

    Returns
    -------
    Groups whose specs cover [0, n) except, in parity, a dropped readiness tail; the
    trace has one step per window end the readiness scan evaluated.
    """
    grouper = GROUPERS.lookup(config.grouping_mode)
    return grouper.function(info, candidates, scores, geometry, config=config)
