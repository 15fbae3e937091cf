"""Presets: a selector with the option values a released model runs (sources in docs/selectors.md).

A preset fills options the user did not give; options given explicitly win. Values that
depend on the video (the release caps its sample count at the frame count) are applied by
:func:`preset_values` once the video's frame count is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Preset:
    """A named option set of one selector."""

    name: str
    selector: str
    values: Mapping[str, Any]
    help: str
    cap_sampled_frames: bool = False
    """The release samples min(num_sampled_frames, frame count) frames (no repeats)."""
    sources: tuple[str, ...] = field(default_factory=tuple)


PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        p.name: p
        for p in (
            Preset(
                "mage-vl",
                "cvp",
                {
                    "num_sampled_frames": 256,
                    "grouping_mode": "readiness",
                    "group_size": 32,
                    "images_per_group": 4,
                    "patch": 16,
                    "max_pixels": 150000,
                    "min_group_frames": 8,
                    "max_group_frames": 64,
                    "avoid_keyframes": True,
                    "canvas_format": "jpg",
                },
                "Mage-VL's traditional codec path: the cv-preinfer call of its processor (patch 16)",
                sources=(
                    "microsoft/Mage-VL (Hugging Face) codec_video_processing_mage_vl.py::_run_cv_preinfer at "
                    "d88b153285f1633a61b2f693c59c8576693af185, as audited in shared/background/"
                    "codec-native-report.zh.txt §8.6",
                ),
            ),
            Preset(
                "llava-ov2-release",
                "cvp",
                {
                    "frame_sampling_mode": "uniform_count",
                    "num_sampled_frames": 512,
                    "grouping_mode": "readiness",
                    "readiness_sum_threshold_mode": "auto",
                    "group_size": 32,
                    "images_per_group": 4,
                    "patch": 14,
                    "max_pixels": 313600,
                    "min_group_frames": 8,
                    "max_group_frames": 128,
                    "bitcost_grid": "sub",
                    "canvas_format": "jpg",
                },
                "LLaVA-OneVision-2-8B-Instruct's codec evaluation: lmms-eval's run_codec.sh (TC=64) and its "
                "tuned cv-preinfer call",
                cap_sampled_frames=True,
                sources=(
                    "EvolvingLMMs-Lab/lmms-eval examples/llava_onevision2_repro/run_codec.sh at "
                    "1e1b37b4605e5b754a844f2ff44a710110a925b3 (MAX_PX 313600, TC per task, 64 for most)",
                    "EvolvingLMMs-Lab/lmms-eval lmms_eval/models/chat/llava_onevision2.py::"
                    "_process_codec_video_tuned at 1e1b37b4605e5b754a844f2ff44a710110a925b3",
                ),
            ),
        )
    }
)
PRESET_NAMES = tuple(PRESETS)


def preset(name: str) -> Preset:
    """The preset called ``name``; unknown names list the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"Invalid preset ({name!r}). Supported values are {', '.join(PRESET_NAMES)}."
        ) from None


def preset_values(name: str, given: Mapping[str, Any], *, total_frames: int | None = None) -> dict[str, Any]:
    """The preset's values under the options ``given`` explicitly (which win).

    ``total_frames``: the video's frame count, for presets that cap their sample count at it.

    Examples
    --------
    >>> preset_values("llava-ov2-release", {"patch": 16}, total_frames=150)["num_sampled_frames"]
    150
    >>> preset_values("mage-vl", {"patch": 14})["patch"]
    14
    """
    p = preset(name)
    values = dict(p.values)
    if p.cap_sampled_frames and total_frames is not None and "num_sampled_frames" not in given:
        values["num_sampled_frames"] = max(1, min(int(values["num_sampled_frames"]), int(total_frames)))
    return values | dict(given)
