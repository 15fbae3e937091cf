"""llava-ov2 grouping stage: logical GOPs over the sampled frames, uniform or by packet energy."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.config import PROFILES, Profile, Registry, Variant, option_of, param, validate_fields
from backend.records import Groups, GroupSpec, RunWarning
from backend.selectors.llava_ov2.quirks import cite, quirk_on, quirk_warning
from backend.selectors.llava_ov2.sample import LlavaSampleConfig


def uniform_bounds(n: int, k: int, max_len: int) -> list[tuple[int, int]]:
    """GOP g has n // k + (g < n % k) frames, clipped to [1, max_len], laid end to end (spec §6).

    Examples
    --------
    >>> uniform_bounds(10, 3, 64)
    [(0, 4), (4, 7), (7, 10)]
    >>> uniform_bounds(10, 2, 3)  # frames 6… are past the last GOP
    [(0, 3), (3, 6)]
    """
    if n <= 0 or k <= 0:
        return []
    base, rem = divmod(n, k)
    out: list[tuple[int, int]] = []
    start = 0
    for g in range(k):
        size = base + (1 if g < rem else 0)
        if size <= 0:
            continue
        end = min(n, start + max(1, min(size, max_len)))
        out.append((start, end))
        start = end
        if start >= n:
            break
    return out


def bitcost_bounds(
    energy: np.ndarray, k: int, min_len: int, max_len: int
) -> list[tuple[int, int, dict[str, Any]]]:
    """Packet-energy GOPs with the valley search (spec §6), each with how its cut was found.

    Parameters
    ----------
    energy : (n,) packet size of each sampled frame, 0 for I frames.
    k : GOPs the budget asks for (θ = Σ energy / k).

    Returns
    -------
    (start, end, facts) per GOP; ``facts`` holds ``stop`` (``energy``, ``max length`` or ``end``),
    ``i_k`` (where the accumulation stopped), ``cut`` and the accumulated energy.

    Examples
    --------
    >>> e = np.array([0, 5, 5, 5, 1, 5, 5, 5, 5, 5])  # θ = 20.5; stops at 5, cuts at the valley 4
    >>> [(s, t) for s, t, _ in bitcost_bounds(e, 2, 2, 8)]
    [(0, 5), (5, 10)]
    """
    n = int(energy.size)
    e = [int(v) for v in energy]
    total = sum(e)
    theta = total / float(max(1, k))
    lo_len = max(1, int(min_len))
    hi_len = max(lo_len, int(max_len))
    half = max(1, lo_len // 2)
    out: list[tuple[int, int, dict[str, Any]]] = []
    s = 0
    while s < n:
        acc = 0
        stop: int | None = None
        why = "end"
        for i in range(s, n):
            acc += e[i]
            length = i - s + 1
            if length >= hi_len:
                stop, why = i, "max length"
                break
            if length >= lo_len and acc >= theta:
                stop, why = i, "energy"
                break
        if stop is None:
            out.append((s, n, {"stop": "end", "energy": acc, "theta": theta}))
            break
        lo = max(s + lo_len - 1, stop - half, s)
        hi = min(s + hi_len - 1, stop + half, n - 1)
        if hi < lo:
            cut = stop
        else:
            # The valley: least energy, then nearest to the stop; the first such frame wins.
            cut = min(range(lo, hi + 1), key=lambda b: (e[b], abs(b - stop)))
        out.append((s, cut + 1, {"stop": why, "i_k": stop, "cut": cut, "energy": acc, "theta": theta}))
        s = cut + 1
    return out


@dataclass(frozen=True)
class GopInputs:
    """What the GOP partition reads of the sampled frames."""

    packet_sizes: np.ndarray
    """(n,) int64 packet size per sampled frame (attributed as the profile says)."""
    pict_types: tuple[str, ...]


def gop_uniform(inputs: GopInputs, *, config: GopConfig) -> Groups:
    """K equal GOPs; parity clips them to max_group_frames and drops the rest (defect 3)."""
    n = int(inputs.packet_sizes.size)
    k = config.gop_count
    warnings: list[RunWarning] = []
    dropped = None
    if quirk_on(config.profile, "uniform_gops_drop_frames"):
        bounds = uniform_bounds(n, k, config.max_group_frames)
        end = bounds[-1][1] if bounds else 0
        if end < n:
            dropped = (end, n)
            warnings.append(
                quirk_warning(
                    "uniform_gops_drop_frames",
                    f"sampled frames {end}–{n - 1} ({n - end} of {n}) are past the last of {k} GOPs of at "
                    f"most {config.max_group_frames} frames and are never used "
                    f"({cite('uniform_gops_drop_frames')})",
                )
            )
    else:
        k_all = max(k, math.ceil(n / config.max_group_frames))
        bounds = uniform_bounds(n, k_all, config.max_group_frames)
        if k_all > k:
            warnings.append(
                RunWarning(
                    "gop_count_raised",
                    f"{n} sampled frames need {k_all} GOPs of at most {config.max_group_frames} frames "
                    f"(the budget asks for {k}); {(k_all - k) * config.images_per_group} canvases more",
                )
            )
    facts = [{"stop": "uniform"} for _ in bounds]
    return _groups(bounds, facts, 0.0, dropped, warnings, config)


def gop_bitcost(inputs: GopInputs, *, config: GopConfig) -> Groups:
    """GOPs cut where the P/B packet energy reaches Σ/K, at the nearest energy valley."""
    sizes = np.asarray(inputs.packet_sizes, np.int64)
    energy = np.where(np.asarray([p == "I" for p in inputs.pict_types], bool), 0, sizes)
    if int(energy.sum()) <= 0:
        groups = gop_uniform(inputs, config=config)
        note = RunWarning("gop_energy_missing", "no P/B packet energy among the sampled frames: uniform GOPs")
        return Groups(
            groups.specs,
            groups.threshold,
            groups.threshold_debug,
            (),
            groups.dropped_tail,
            (note, *groups.warnings),
        )
    found = bitcost_bounds(energy, config.gop_count, config.min_group_frames, config.max_group_frames)
    bounds = [(s, e) for s, e, _ in found]
    facts = [f for _, _, f in found]
    theta = float(facts[0]["theta"]) if facts else 0.0
    return _groups(bounds, facts, theta, None, [], config, energy=energy)


def _groups(
    bounds: list[tuple[int, int]],
    facts: list[dict[str, Any]],
    theta: float,
    dropped: tuple[int, int] | None,
    warnings: list[RunWarning],
    config: GopConfig,
    *,
    energy: np.ndarray | None = None,
) -> Groups:
    """Groups from GOP bounds; clean merges one-frame GOPs into a neighbour first."""
    bounds, facts = list(bounds), [dict(f) for f in facts]
    if not quirk_on(config.profile, "short_gops_vanish") and len(bounds) > 1:
        k = 0
        while k < len(bounds):
            s, e = bounds[k]
            if e - s >= 2 or len(bounds) == 1:
                k += 1
                continue
            into = k - 1 if k > 0 else k + 1  # the previous GOP, else the next
            lo, hi = min(bounds[into][0], s), max(bounds[into][1], e)
            bounds[into] = (lo, hi)
            facts[into]["merged_one_frame_gop"] = s
            del bounds[k], facts[k]
    specs = []
    for g, ((s, e), f) in enumerate(zip(bounds, facts, strict=True)):
        readiness = dict(f)
        if energy is not None:
            readiness["gop_energy"] = int(energy[s:e].sum())
        specs.append(
            GroupSpec(group_index=g, start=s, end=e, stop_reason=str(f.get("stop", "")), readiness=readiness)
        )
    debug = {"gop_mode": config.gop_mode, "gop_count_target": config.gop_count, "theta": theta}
    return Groups(tuple(specs), theta, debug, (), dropped, tuple(warnings))


GOP_MODES: Registry[Variant] = Registry(
    "gop mode",
    (
        Variant("uniform", gop_uniform, "K = target_canvas // images_per_group equal GOPs"),
        Variant(
            "bitcost", gop_bitcost, "GOPs by P/B packet energy with a valley search (LLaVA-OneVision-2 §3)"
        ),
    ),
)


@dataclass(frozen=True, kw_only=True)
class GopConfig:
    """GOP partition parameters (lmms-video-utils' names)."""

    gop_mode: str = param(
        "uniform",
        label="GOP mode",
        help="uniform: equal GOPs; bitcost: cut where P/B packet energy reaches its share, at a valley",
        choices=GOP_MODES.names,
    )
    target_canvas: int = option_of(LlavaSampleConfig, "target_canvas")
    images_per_group: int = option_of(LlavaSampleConfig, "images_per_group")
    min_group_frames: int = param(
        8, label="Min GOP frames", help="shortest GOP (bitcost mode)", min=1, max=100000
    )
    max_group_frames: int = param(64, label="Max GOP frames", help="longest GOP", min=1, max=100000)
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity drops frames past the last uniform GOP and leaves one-frame GOPs empty "
        "(lmms-video-utils); clean adds GOPs and merges one-frame ones",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.min_group_frames > self.max_group_frames:
            raise ValueError(
                f"Invalid min group frames ({self.min_group_frames}). Supported values are at most "
                f"max_group_frames ({self.max_group_frames})."
            )

    @property
    def gop_count(self) -> int:
        """K: the GOPs the canvas budget asks for."""
        return self.target_canvas // self.images_per_group


def partition(inputs: GopInputs, *, config: GopConfig) -> Groups:
    """The GOPs of the sampled frames, by the partition ``config.gop_mode`` names.

    Returns
    -------
    Groups whose specs are [start, end) ranges of the candidates, in order, covering them (but
    for parity's dropped tail).
    """
    return GOP_MODES.lookup(config.gop_mode).function(inputs, config=config)
