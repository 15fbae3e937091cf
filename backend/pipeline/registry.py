"""Stage tables: the pipeline's stages in run order, and the variant table of each stage kind.

Each stage is ``function(inputs..., *, config) -> frozen record``. Stages with
interchangeable implementations dispatch through their own table, declared next to the
implementations (a new sampler, grouper, scorer or packer is one entry there plus its
function); the option naming the variant takes its choices from that table's keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from backend.config import Registry, Variant
from backend.stages import decode as decode_mod
from backend.stages import geometry as geometry_mod
from backend.stages import group as group_mod
from backend.stages import keyframes as keyframes_mod
from backend.stages import pack as pack_mod
from backend.stages import probe as probe_mod
from backend.stages import quality as quality_mod
from backend.stages import sample as sample_mod
from backend.stages import score as score_mod
from backend.stages import select as select_mod
from backend.stages import signals as signals_mod

STAGES: Registry[Variant] = Registry(
    "stage",
    (
        Variant("probe", probe_mod.probe, "container facts, packets, keyframes", probe_mod.ProbeConfig),
        Variant("sample", sample_mod.sample, "candidate frame indices", sample_mod.SampleConfig),
        Variant(
            "keyframes", keyframes_mod.avoid_keyframes, "keyframe avoidance", keyframes_mod.KeyframeConfig
        ),
        Variant("geometry", geometry_mod.resolve_geometry, "processed size", geometry_mod.GeometryConfig),
        Variant("decode", decode_mod.decode_frames, "pixels and score grids", decode_mod.DecodeConfig),
        Variant("quality", quality_mod.assess_frames, "bad-frame mask", quality_mod.QualityConfig),
        Variant("score", score_mod.score_frames, "score maps and block scores", score_mod.ScoreConfig),
        Variant("group", group_mod.build_groups, "readiness or fixed groups", group_mod.GroupConfig),
        Variant("select", select_mod.select_blocks, "anchor + top-K blocks", select_mod.SelectConfig),
        Variant("pack", pack_mod.pack, "canvases and token records", pack_mod.PackConfig),
    ),
)

VARIANTS: Mapping[str, Registry[Variant]] = MappingProxyType(
    {
        "sample": sample_mod.SAMPLERS,  # SampleConfig.frame_sampling_mode
        "decode": decode_mod.SCORERS,  # DecodeConfig.score
        "signals": signals_mod.SIGNALS,  # SignalConfig.kind (each is also a scorer)
        "score": score_mod.NORMALISERS,  # ScoreConfig.normalisation (set by the scorer)
        "group": group_mod.GROUPERS,  # GroupConfig.grouping_mode
        "threshold": group_mod.THRESHOLDS,  # GroupConfig.readiness_sum_threshold_mode
        "pack": pack_mod.PACKERS,  # PackConfig.packer
    }
)
"""Stage kind → its variant table, with the config field that picks the variant."""
