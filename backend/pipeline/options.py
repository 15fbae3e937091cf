"""Selection options: every user-facing option of a run, and the frozen stage configs derived from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from backend.config import PROFILES, Profile, option_of, param, validate_fields
from backend.pipeline.recipe import SelectorOptions
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

CANVAS_FORMATS = ("jpg", "png")

# Options that change what the expensive front stages (probe … quality) produce, and
# those that change the score maps; everything else only re-runs group → pack.
FRONT_OPTIONS = (
    "profile",
    "num_sampled_frames",
    "frame_sampling_mode",
    "sample_fps",
    "avoid_keyframes",
    "patch",
    "max_pixels",
    "block_size",
    "bitcost_grid",
    "pixel_source",
    "score",
)
SCORE_OPTIONS = ("iframe_score_clip_mode", "iframe_score_clip_percentile")


@dataclass(frozen=True, kw_only=True)
class SelectionOptions(SelectorOptions):
    """Every user-facing selection option, named as in cvp's CLI, plus the profile.

    The field metadata is the single schema for validation, the CLI and the app. Options
    a stage uses repeat that stage config's field (default, bounds, help): see
    :func:`backend.config.option_of`.
    """

    FRONT_OPTIONS: ClassVar[tuple[str, ...]] = FRONT_OPTIONS
    SCORE_OPTIONS: ClassVar[tuple[str, ...]] = SCORE_OPTIONS

    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity: reproduce codec-video-prep 0.2.5 exactly, defects included; clean: fix its defects",
        choices=PROFILES,
    )
    num_sampled_frames: int = option_of(sample_mod.SampleConfig, "num_sampled_frames")
    group_size: int = option_of(group_mod.GroupConfig, "group_size")
    images_per_group: int = option_of(group_mod.GroupConfig, "images_per_group")
    patch: int = option_of(geometry_mod.GeometryConfig, "patch")
    max_pixels: int = option_of(geometry_mod.GeometryConfig, "max_pixels")
    block_size: int = option_of(geometry_mod.GeometryConfig, "block_size")
    min_group_frames: int = option_of(group_mod.GroupConfig, "min_group_frames")
    max_group_frames: int = option_of(group_mod.GroupConfig, "max_group_frames")
    bitcost_grid: str = option_of(decode_mod.DecodeConfig, "bitcost_grid")
    canvas_format: str = param(
        "jpg", label="Canvas format", help="jpg (quality 95) or png", choices=CANVAS_FORMATS
    )
    grouping_mode: str = option_of(group_mod.GroupConfig, "grouping_mode")
    frame_sampling_mode: str = option_of(sample_mod.SampleConfig, "frame_sampling_mode", label="Sampling")
    sample_fps: float = option_of(sample_mod.SampleConfig, "sample_fps")
    readiness_sum_threshold_mode: str = option_of(group_mod.GroupConfig, "readiness_sum_threshold_mode")
    readiness_sum_threshold: float = option_of(group_mod.GroupConfig, "readiness_sum_threshold")
    readiness_norm_sum_threshold: float = option_of(group_mod.GroupConfig, "readiness_norm_sum_threshold")
    iframe_score_clip_mode: str = option_of(score_mod.ScoreConfig, "iframe_score_clip_mode")
    iframe_score_clip_percentile: float = option_of(
        score_mod.ScoreConfig, "iframe_score_clip_percentile", label="I-frame clip pct"
    )
    avoid_keyframes: bool = option_of(keyframes_mod.KeyframeConfig, "avoid_keyframes")
    score: str = option_of(decode_mod.DecodeConfig, "score", label="Score")
    pixel_source: str = option_of(decode_mod.DecodeConfig, "pixel_source")
    workers: int = param(
        2,
        label="Workers",
        help="processes/threads a run may use (decode split, per-frame stages)",
        min=1,
        max=64,
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        self.stage_configs()  # cross-field checks live in the stage configs

    def stage_configs(self) -> dict[str, Any]:
        """The frozen config of every stage, derived from these options."""
        prof = self.profile
        return {
            "probe": probe_mod.ProbeConfig(profile=prof),
            "sample": sample_mod.SampleConfig(
                frame_sampling_mode=self.frame_sampling_mode,
                num_sampled_frames=self.num_sampled_frames,
                sample_fps=self.sample_fps,
                profile=prof,
            ),
            "keyframes": keyframes_mod.KeyframeConfig(
                avoid_keyframes=self.avoid_keyframes,
                frame_sampling_mode=self.frame_sampling_mode,
                profile=prof,
            ),
            "geometry": geometry_mod.GeometryConfig(
                patch=self.patch,
                block_size=self.block_size,
                max_pixels=self.max_pixels,
                profile=prof,
            ),
            "decode": decode_mod.DecodeConfig(
                bitcost_grid=self.bitcost_grid,
                pixel_source=self.pixel_source,
                score=self.score,
                workers=self.workers,
                profile=prof,
            ),
            "quality": quality_mod.QualityConfig(threads=self.workers),
            "score": score_mod.ScoreConfig(
                iframe_score_clip_mode=self.iframe_score_clip_mode,
                iframe_score_clip_percentile=self.iframe_score_clip_percentile,
                normalisation=decode_mod.SCORERS.lookup(self.score).normalisation,
                threads=self.workers,
            ),
            "group": group_mod.GroupConfig(
                grouping_mode=self.grouping_mode,
                group_size=self.group_size,
                images_per_group=self.images_per_group,
                min_group_frames=self.min_group_frames,
                max_group_frames=self.max_group_frames,
                readiness_sum_threshold_mode=self.readiness_sum_threshold_mode,
                readiness_sum_threshold=self.readiness_sum_threshold,
                readiness_norm_sum_threshold=self.readiness_norm_sum_threshold,
                profile=prof,
            ),
            "select": select_mod.SelectConfig(images_per_group=self.images_per_group, profile=prof),
            "pack": pack_mod.PackConfig(images_per_group=self.images_per_group),
        }
