"""The batch unit's seam: resolving a selector's options, the options key, the summary figures."""

from __future__ import annotations

import numpy as np
import pytest

from backend.batch.unit import options_key, resolve_options, temporal_coverage
from backend.pipeline import SelectionOptions


def test_defaults_run_single_threaded_and_keys_ignore_workers() -> None:
    unit = resolve_options()
    assert unit.selector == "cvp" and unit.preset is None
    assert unit.options == SelectionOptions(workers=1)
    assert unit.key == options_key("cvp", SelectionOptions(workers=2))
    assert unit.key != resolve_options(overrides={"num_sampled_frames": 16}).key


def test_manifest_text_becomes_each_options_type() -> None:
    unit = resolve_options(
        overrides={
            "num_sampled_frames": "16",
            "sample_fps": "2",
            "avoid_keyframes": "false",
            "profile": "parity",
        }
    )
    assert unit.options.num_sampled_frames == 16
    assert unit.options.sample_fps == 2.0
    assert unit.options.avoid_keyframes is False
    assert unit.options.profile == "parity"
    assert resolve_options(overrides={"group_size": ""}).options.group_size == SelectionOptions().group_size


@pytest.mark.parametrize(
    ("selector", "preset", "overrides", "message"),
    [
        ("cvp", None, {"num_sampled_frames": "many"}, "Invalid num_sampled_frames"),
        ("cvp", None, {"frames": 3}, "Invalid option \\(frames\\) for selector cvp"),
        ("cvp", None, {"profile": "fast"}, "Invalid profile"),
        ("nope", None, {}, "Invalid selector \\('nope'\\)"),
        ("uniform", "mage-vl", {}, "Invalid preset \\('mage-vl'\\) for selector uniform"),
        ("uniform", None, {"group_size": 4}, "Invalid option \\(group_size\\) for selector uniform"),
        ("cvp", "other", {}, "Invalid preset"),
    ],
)
def test_invalid_choices_are_one_line_errors(selector, preset, overrides, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        resolve_options(selector, preset, overrides)
    assert "\n" not in str(err.value)


def test_presets_and_other_selectors_resolve_from_the_selector_table() -> None:
    mage = resolve_options("cvp", "mage-vl", {"group_size": "16"})
    assert (mage.options.patch, mage.options.num_sampled_frames, mage.options.group_size) == (16, 256, 16)
    assert mage.options.workers == 1 and mage.cap_sampled_frames
    assert mage.key != resolve_options("cvp").key
    uniform = resolve_options("uniform", None, {"num_frames": "6"})
    assert uniform.options.num_frames == 6 and uniform.options.workers == 1
    assert resolve_options("onevision").options.workers == 1


def test_every_selector_resolves_to_one_decoder_thread_in_a_batch() -> None:
    from backend.selectors import SELECTORS
    from backend.selectors.llava_ov2.options import LlavaOv2Options
    from backend.stages.decode import decoder_thread_count

    for selector in SELECTORS.names:
        assert resolve_options(selector).options.workers == 1, selector
    assert decoder_thread_count(1) == 1 and decoder_thread_count(2) == 0
    assert resolve_options("llava-ov2").options.stage_configs()["decode"].threads == 1
    # Parity's packet attribution follows FFmpeg's frame threads: it keeps FFmpeg's choice.
    attributing = LlavaOv2Options(profile="parity", gop_mode="bitcost", workers=1)
    assert attributing.needs_packet_attribution
    assert attributing.stage_configs()["decode"].threads == 0


def test_temporal_coverage_counts_frames_with_a_valid_token() -> None:
    tokens = np.zeros((6, 8), np.int32)
    tokens[:, 0] = [0, 0, 3, 5, 9, 7]
    tokens[:, 7] = [1, 1, 1, 1, 1, 0]  # frame 7 only in padding; frame 9 is past the end
    assert temporal_coverage(tokens, 8) == pytest.approx(3 / 8)
    assert temporal_coverage(tokens, 0) == 0.0
