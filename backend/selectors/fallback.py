"""Declared fallbacks: when a selector's scores cannot be trusted, which selector runs instead, and why."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.config import param, validate_fields
from backend.errors import BitcostUnavailableError
from backend.pipeline.recipe import ProgressCallback, RunResult, SelectorOptions
from backend.records import FallbackOutcome, VideoInfo
from backend.selectors import options_for, select, selector_of
from backend.stages.decode import OptionFixError
from backend.stages.probe import ProbeConfig, probe

FALLBACK_MODES = ("none", "uniform", "signal")
DEFAULT_SIGNAL = "mvres"
"""The decoder-side signal cvp ranks by where a codec has no bitcost (docs/signals.md)."""


@dataclass(frozen=True, kw_only=True)
class FallbackConfig:
    """When a run's scores are not to be trusted, and what runs instead."""

    mode: str = param(
        "signal",
        label="Fallback",
        help="none: the selector as asked, or its error; uniform: evenly spaced frames when its scores "
        "cannot be trusted; signal: a decoder-side signal where the codec has no bitcost, then uniform",
        choices=FALLBACK_MODES,
    )
    min_inter_byte_ratio: float = param(
        0.005,
        label="Flat below",
        help="scores are too flat to rank when the median inter-frame packet is below this share of the "
        "mean keyframe packet (a still image: 0.003; a slow pan 0.014; real clips measured: 0.06 and above)",
        min=0.0,
        max=1.0,
    )
    max_bad_frame_share: float = param(
        0.5,
        label="Damaged above",
        help="the stream counts as damaged when more than this share of the candidate frames is bad",
        min=0.0,
        max=1.0,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def default_fallback(options: SelectorOptions) -> FallbackConfig:
    """The app's and batch's default: ``signal`` (then uniform), but ``none`` for the parity
    profile, which reproduces the reference, errors included."""
    return FallbackConfig(mode="none" if options.profile == "parity" else "signal")


def inter_byte_ratio(info: VideoInfo) -> float:
    """Median inter-frame packet over the mean keyframe packet (1.0 when either is missing).

    A codec that spends almost nothing between keyframes (a still image) leaves block scores that
    are quantisation noise: there is nothing to rank.
    """
    sizes = np.asarray(info.packet_size_bytes, np.float64)
    keys = np.asarray(info.packet_is_keyframe, bool)[: sizes.size]
    if not keys.any() or keys.all():
        return 1.0
    key_mean = float(sizes[keys].mean())
    return float(np.median(sizes[~keys])) / key_mean if key_mean > 0 else 1.0


def bad_frame_share(result: RunResult) -> float:
    """Share of the run's candidate frames the quality check marked bad."""
    good = np.asarray(result.quality.good, bool)
    return float(1.0 - good.mean()) if good.size else 0.0


def flat_packets(info: VideoInfo, config: FallbackConfig) -> str | None:
    """The ``flat_scores`` detail when the packets alone (a probe, no decode) show too little
    between keyframes to rank (:func:`inter_byte_ratio`), else None."""
    ratio = inter_byte_ratio(info)
    if ratio >= config.min_inter_byte_ratio:
        return None
    return f"inter frames carry {ratio:.2%} of a keyframe's bytes (below {config.min_inter_byte_ratio:.2%})"


def untrusted(result: RunResult, config: FallbackConfig) -> tuple[str, str] | None:
    """``(reason, detail)`` when ``result``'s scores are not to be trusted, else None."""
    share = bad_frame_share(result)
    if share > config.max_bad_frame_share:
        return (
            "damaged_stream",
            f"{share:.0%} of the candidate frames are bad (above {config.max_bad_frame_share:.0%})",
        )
    flat = flat_packets(result.info, config)
    if flat is not None:
        return "flat_scores", flat
    if not (result.scores.block_scores.size and float(np.abs(result.scores.block_scores).sum()) > 0):
        return "flat_scores", "every block score is 0"
    return None


def label(options: SelectorOptions, changes: dict[str, Any] | None = None) -> str:
    """``name`` or ``name[k=v,…]``, the selector comparison's spelling of an option set."""
    name = selector_of(options)
    if not changes:
        return name
    return name + "[" + ",".join(f"{k}={v}" for k, v in changes.items()) + "]"


def _uniform_like(options: SelectorOptions) -> SelectorOptions:
    """Uniform frames at the requested run's token budget and canvas size."""
    return options_for(
        "uniform",
        {
            "token_budget": options.token_budget,
            "stop_gain": options.stop_gain,
            "max_pixels": _max_pixels(options),
        },
    )


def _max_pixels(options: SelectorOptions) -> int:
    value = getattr(options, "max_pixels", None)
    return int(value) if value else int(options_for("uniform").max_pixels)


def select_with_fallback(
    video: str | Path,
    *,
    options: SelectorOptions,
    config: FallbackConfig,
    on_progress: ProgressCallback | None = None,
    **resume: Any,
) -> RunResult:
    """Run ``options``' selector, or the declared fallback when its scores cannot be trusted.

    * The codec has no bitcost (cvp's score on AV1, MPEG-4 Part 2, or without the patched reader):
      ``signal`` re-runs cvp with the clean profile and a decoder-side signal, ``uniform`` runs
      uniform frames, ``none`` raises the selector's error.
    * The run's scores are too flat to rank (:func:`inter_byte_ratio` below
      ``min_inter_byte_ratio``, or every score 0) or the stream is damaged (more than
      ``max_bad_frame_share`` of the candidates bad): ``signal`` and ``uniform`` run uniform frames.

    Uniform runs never fall back. The result's ``fallback`` records what was asked for and what ran.

    Raises
    ------
    The selectors' errors (with ``mode="none"``, or when the fallback fails too).
    """
    requested = label(options)
    if config.mode == "none" or selector_of(options) == "uniform":
        result = select(video, options=options, on_progress=on_progress, **resume)
        return dataclasses.replace(result, fallback=FallbackOutcome(requested, requested, None))
    # Flat packets are known from the probe: decode once, for the uniform frames only.
    info = resume.get("info") or probe(video, config=ProbeConfig(profile="clean"))
    flat = flat_packets(info, config)
    if flat is not None:
        result = select(video, options=_uniform_like(options), on_progress=on_progress)
        return dataclasses.replace(
            result, fallback=FallbackOutcome(requested, "uniform", "flat_scores", flat)
        )
    try:
        result = select(video, options=options, on_progress=on_progress, **resume)
        reason = None
    except (OptionFixError, BitcostUnavailableError) as exc:
        reason, detail = "no_bitcost", str(getattr(exc, "problem", "") or exc).rstrip(";").strip()
        if config.mode == "signal" and selector_of(options) == "cvp":
            fix = dict(getattr(exc, "fix", ()) or (("profile", "clean"), ("score", DEFAULT_SIGNAL)))
            used_options = options.replace(**fix)
            result = select(video, options=used_options, on_progress=on_progress)
            used = label(options, fix)
        else:
            result = select(video, options=_uniform_like(options), on_progress=on_progress)
            used = "uniform"
    doubt = untrusted(result, config) if selector_of(result.options) != "uniform" else None
    if doubt is not None:
        reason, detail = doubt
        result = select(video, options=_uniform_like(options), on_progress=on_progress)
        used = "uniform"
    if reason is None:
        return dataclasses.replace(result, fallback=FallbackOutcome(requested, requested, None))
    return dataclasses.replace(result, fallback=FallbackOutcome(requested, used, reason, detail))


__all__ = [
    "FALLBACK_MODES",
    "FallbackConfig",
    "bad_frame_share",
    "default_fallback",
    "flat_packets",
    "inter_byte_ratio",
    "select_with_fallback",
    "untrusted",
]
