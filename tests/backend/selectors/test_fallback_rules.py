"""The declared fallback's rules (backend.selectors.fallback) on synthetic runs: no decode."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

from backend.records import FrameQuality
from backend.selectors import options_for
from backend.selectors.fallback import (
    FallbackConfig,
    bad_frame_share,
    default_fallback,
    inter_byte_ratio,
    label,
    untrusted,
)

CONFIG = FallbackConfig()


@pytest.fixture(scope="module")
def run():
    return synthetic_run(frames=150, groups=3)


def test_the_inter_byte_ratio_is_the_median_inter_packet_over_the_mean_keyframe(run) -> None:
    sizes = run.info.packet_size_bytes
    inter = np.median(sizes[~run.info.packet_is_keyframe])
    assert inter_byte_ratio(run.info) == pytest.approx(inter / 40_000)  # synthetic keyframes: 40 kB
    every_key = dataclasses.replace(run.info, packet_is_keyframe=np.ones(sizes.size, bool))
    assert inter_byte_ratio(every_key) == 1.0  # nothing between keyframes to judge


def test_a_busy_run_is_trusted(run) -> None:
    assert untrusted(run, CONFIG) is None and bad_frame_share(run) == 0.0


def test_inter_frames_of_almost_no_bytes_are_too_flat_to_rank(run) -> None:
    sizes = np.where(run.info.packet_is_keyframe, 40_000, 100).astype(np.int64)  # 0.25 % of a keyframe
    still = dataclasses.replace(run, info=dataclasses.replace(run.info, packet_size_bytes=sizes))
    reason, detail = untrusted(still, CONFIG)
    assert reason == "flat_scores"
    assert detail == "inter frames carry 0.25% of a keyframe's bytes (below 0.50%)"
    assert untrusted(still, FallbackConfig(min_inter_byte_ratio=0.002)) is None


def test_scores_that_are_all_zero_are_too_flat_to_rank(run) -> None:
    zero = dataclasses.replace(run.scores, block_scores=np.zeros_like(run.scores.block_scores))
    assert untrusted(dataclasses.replace(run, scores=zero), CONFIG) == (
        "flat_scores",
        "every block score is 0",
    )


def test_a_stream_of_mostly_bad_frames_is_damaged(run) -> None:
    n = run.quality.good.size
    good = np.arange(n) % 3 == 0  # two thirds bad
    bad = dataclasses.replace(
        run, quality=FrameQuality(good=good, reasons=tuple("" if g else "green" for g in good))
    )
    assert bad_frame_share(bad) == pytest.approx(1 - good.mean())
    reason, detail = untrusted(bad, CONFIG)
    assert reason == "damaged_stream" and detail == "67% of the candidate frames are bad (above 50%)"
    assert untrusted(bad, FallbackConfig(max_bad_frame_share=0.7)) is None


def test_parity_reproduces_the_reference_so_it_falls_back_to_nothing() -> None:
    assert default_fallback(options_for("cvp", {"profile": "parity"})).mode == "none"
    assert default_fallback(options_for("cvp", {})).mode == "signal"
    assert default_fallback(options_for("llava-ov2", {})).mode == "signal"


def test_labels_spell_an_option_set_as_the_selector_comparison_does() -> None:
    options = options_for("cvp", {})
    assert label(options) == "cvp"
    assert label(options, {"profile": "clean", "score": "residual"}) == "cvp[profile=clean,score=residual]"


@pytest.mark.parametrize(
    ("field", "value"), [("mode", "always"), ("min_inter_byte_ratio", -0.1), ("max_bad_frame_share", 1.5)]
)
def test_configs_out_of_range_are_refused(field: str, value) -> None:
    with pytest.raises(ValueError, match=r"^Invalid .*Supported values are"):
        FallbackConfig(**{field: value})
