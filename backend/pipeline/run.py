"""The selection pipeline: a straight sequence of stage calls dispatched through a registry."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.config import PROFILES, Profile, option_of, param, validate_fields
from backend.errors import PipelineError
from backend.records import (
    Candidates,
    Canvases,
    DecodedFrames,
    FrameQuality,
    Geometry,
    Groups,
    RunWarning,
    ScoreMaps,
    Selection,
    VideoInfo,
)
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
ProgressCallback = Callable[[str, float], None]


@dataclass(frozen=True, kw_only=True)
class SelectionOptions:
    """Every user-facing selection option, named as in cvp's CLI, plus the profile.

    The field metadata is the single schema for validation, the CLI and the app. Options
    a stage uses repeat that stage config's field (default, bounds, help): see
    :func:`backend.config.option_of`.
    """

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

    def replace(self, **changes: Any) -> SelectionOptions:
        """A copy with some options changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
                normalisation={"mvres": "none", "pkt_energy": "video_max"}.get(
                    self.score, "frame_percentile"
                ),
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


@dataclass(frozen=True)
class Stage:
    """One registry entry: the stage function, its config class and a line of help."""

    name: str
    function: Callable[..., Any]
    config_class: type
    help: str


STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage("probe", probe_mod.probe, probe_mod.ProbeConfig, "container facts, packets, keyframes"),
        Stage("sample", sample_mod.sample, sample_mod.SampleConfig, "candidate frame indices"),
        Stage(
            "keyframes",
            keyframes_mod.avoid_keyframes,
            keyframes_mod.KeyframeConfig,
            "keyframe avoidance",
        ),
        Stage("geometry", geometry_mod.resolve_geometry, geometry_mod.GeometryConfig, "processed size"),
        Stage("decode", decode_mod.decode, decode_mod.DecodeConfig, "pixels and bitcost grids"),
        Stage("quality", quality_mod.assess_frames, quality_mod.QualityConfig, "bad-frame mask"),
        Stage("score", score_mod.score_frames, score_mod.ScoreConfig, "score maps and block scores"),
        Stage("group", group_mod.build_groups, group_mod.GroupConfig, "readiness or fixed groups"),
        Stage("select", select_mod.select_blocks, select_mod.SelectConfig, "anchor + top-K blocks"),
        Stage("pack", pack_mod.pack, pack_mod.PackConfig, "canvases and token records"),
    )
}


def stage(name: str) -> Stage:
    """Look a stage up by name; unknown names list the known ones."""
    try:
        return STAGES[name]
    except KeyError:
        raise ValueError(f"Invalid stage ({name!r}). Supported values are {', '.join(STAGES)}.") from None


@dataclass(frozen=True)
class RunResult:
    """Everything one selection run produced, stage by stage."""

    options: SelectionOptions
    info: VideoInfo
    candidates: Candidates
    geometry: Geometry
    decoded: DecodedFrames
    quality: FrameQuality
    scores: ScoreMaps
    groups: Groups
    selection: Selection
    canvases: Canvases
    warnings: tuple[RunWarning, ...]
    timings_secs: dict[str, float]


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


@dataclass(frozen=True)
class Front:
    """Records of the expensive stages, reusable while FRONT_OPTIONS stay the same."""

    info: VideoInfo
    candidates: Candidates
    geometry: Geometry
    decoded: DecodedFrames
    quality: FrameQuality


def run(
    video: str | Path,
    *,
    options: SelectionOptions,
    on_progress: ProgressCallback | None = None,
    front: Front | None = None,
    scores: ScoreMaps | None = None,
    info: VideoInfo | None = None,
) -> RunResult:
    """Run every stage on one video.

    Parameters
    ----------
    video : path of the video file.
    options : selection options (profile + cvp options).
    on_progress : called as ``on_progress(stage_name, fraction_done)`` after each stage.
    front : cached probe … quality records (from a run with the same FRONT_OPTIONS);
        those stages are then skipped.
    scores : cached score maps (same front and SCORE_OPTIONS); the score stage is skipped.
    info : the probe of ``video`` under this profile, when the caller already has it.

    Returns
    -------
    RunResult holding every stage's record, the warnings that fired and per-stage times.

    Raises
    ------
    InputError, UnsupportedVideoError, BitcostUnavailableError, DecodeError, PipelineError.
    """
    cfg = options.stage_configs()
    timings: dict[str, float] = {}
    names = list(STAGES)

    def call(name: str, *args: Any, function: Callable[..., Any] | None = None, **extra: Any) -> Any:
        t0 = time.perf_counter()
        out = (function or stage(name).function)(*args, config=cfg[name], **extra)
        timings[name] = time.perf_counter() - t0
        if on_progress is not None:
            on_progress(name, (names.index(name) + 1) / len(names))
        return out

    t_start = time.perf_counter()
    if front is None:
        if info is None:
            info = call("probe", video)
        sampled = call("sample", info)
        candidates = call("keyframes", sampled, info)
        geometry = call("geometry", info)
        # The bad-frame test and (when a frame's scores depend on its grid alone) the
        # score sums run per frame inside the decode workers, in parallel with the
        # read; the quality and score stages then only assemble those results.
        work = decode_mod.FrameWork(
            on_pixels=functools.partial(quality_mod.frame_bad_reason, config=cfg["quality"]),
            on_grid=(
                functools.partial(score_mod.frame_scores, geometry=geometry, config=cfg["score"])
                if scores is None and score_mod.per_frame_scoring(cfg["score"])
                else None
            ),
        )
        decoded, per_frame = call(
            "decode", info, candidates, geometry, function=decode_mod.decode_frames, work=work
        )
        quality = call("quality", decoded, precomputed=per_frame.pixels)
    else:
        info, candidates, geometry = front.info, front.candidates, front.geometry
        decoded, quality = front.decoded, front.quality
        per_frame = decode_mod.FrameResults()
    if scores is None:
        scores = call("score", decoded, geometry, precomputed=per_frame.grids)
    groups = call("group", info, candidates, scores, geometry)
    selection = call("select", candidates, scores, quality, groups, geometry)
    if not selection.groups:
        raise PipelineError(
            f"no canvases produced: {candidates.frame_indices.size} candidates never formed a group "
            f"of at least {max(4, options.min_group_frames)} frames",
            path=info.path,
            stage="select",
        )
    canvases = call("pack", selection, decoded, geometry)
    timings["total"] = time.perf_counter() - t_start
    warnings = _run_warnings(options, info, geometry)
    warnings += candidates.warnings + decoded.warnings + groups.warnings + selection.warnings
    return RunResult(
        options=options,
        info=info,
        candidates=candidates,
        geometry=geometry,
        decoded=decoded,
        quality=quality,
        scores=scores,
        groups=groups,
        selection=selection,
        canvases=canvases,
        warnings=warnings,
        timings_secs=timings,
    )


def _run_warnings(options: SelectionOptions, info: VideoInfo, geometry: Geometry) -> tuple[RunWarning, ...]:
    out: list[RunWarning] = []
    if info.frame_count_source == "duration_estimate":
        out.append(
            RunWarning(
                "frame_count_estimated",
                f"frame count {info.total_frames} guessed as round(fps × duration) "
                f"({info.fps:g} × {info.duration_secs:g}); the {info.format_name} header has none",
            )
        )
    if options.profile == "parity" and options.frame_sampling_mode == "pkt_peak":
        out.append(
            RunWarning("pkt_peak_is_fps", "frame_sampling_mode pkt_peak ran the fps sampler (cvp quirk 3)")
        )
    if geometry.processed_hw != geometry.prepared_hw:
        out.append(
            RunWarning(
                "double_resize",
                f"decoded at {geometry.prepared_hw[1]}x{geometry.prepared_hw[0]} then resized again to "
                f"{geometry.processed_hw[1]}x{geometry.processed_hw[0]} (cvp quirk 13)",
            )
        )
    if geometry.processed_hw[0] * geometry.processed_hw[1] > info.width * info.height:
        out.append(
            RunWarning(
                "upscaled",
                f"frames upscaled from {info.width}x{info.height} to "
                f"{geometry.processed_hw[1]}x{geometry.processed_hw[0]}",
            )
        )
    return tuple(out)
