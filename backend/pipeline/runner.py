"""cvp's selector: codec-video-prep's stages, through the stage table, declared as one Recipe."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.pipeline.options import SelectionOptions
from backend.pipeline.recipe import (
    Front,
    ProgressCallback,
    Recipe,
    ResumeArgs,
    RunResult,
    StageClock,
    Step,
    StepInput,
    run_recipe,
    stage_warnings,
)
from backend.pipeline.registry import STAGES
from backend.quirks import quirk, quirk_on, quirk_warning
from backend.records import Geometry, RunWarning, VideoInfo
from backend.stages.decode_reads import FrameResults, FrameWork
from backend.stages.quality import frame_bad_reason
from backend.stages.score import frame_scores, per_frame_scoring

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CVP", "Front", "ProgressCallback", "ResumeArgs", "RunResult", "StageClock", "run"]


def _probe(given: StepInput) -> dict[str, Any]:
    return {"info": STAGES.lookup("probe").function(given.video, config=given.configs["probe"])}


def _sample(given: StepInput) -> dict[str, Any]:
    cfg, info = given.configs, given["info"]
    sampled = STAGES.lookup("sample").function(info, config=cfg["sample"])
    return {"sampled": sampled}


def _keyframes(given: StepInput) -> dict[str, Any]:
    avoid = STAGES.lookup("keyframes").function
    return {"candidates": avoid(given["sampled"], given["info"], config=given.configs["keyframes"])}


def _geometry(given: StepInput) -> dict[str, Any]:
    return {"geometry": STAGES.lookup("geometry").function(given["info"], config=given.configs["geometry"])}


def _decode(given: StepInput) -> dict[str, Any]:
    cfg, geometry = given.configs, given["geometry"]
    work = _decode_work(cfg, geometry, scores_cached="scores" in given.records)
    decode = STAGES.lookup("decode").function
    decoded, per_frame = decode(given["info"], given["candidates"], geometry, config=cfg["decode"], work=work)
    return {"decoded": decoded, "per_frame": per_frame}


def _quality(given: StepInput) -> dict[str, Any]:
    assess = STAGES.lookup("quality").function
    pixels = given["per_frame"].pixels
    return {"quality": assess(given["decoded"], config=given.configs["quality"], precomputed=pixels)}


def _score(given: StepInput) -> dict[str, Any]:
    grids = given.get("per_frame", FrameResults()).grids
    score = STAGES.lookup("score").function
    return {
        "scores": score(given["decoded"], given["geometry"], config=given.configs["score"], precomputed=grids)
    }


def _group(given: StepInput) -> dict[str, Any]:
    build = STAGES.lookup("group").function
    r = given.records
    return {
        "groups": build(r["info"], r["candidates"], r["scores"], r["geometry"], config=given.configs["group"])
    }


def _select(given: StepInput) -> dict[str, Any]:
    r, pick = given.records, STAGES.lookup("select").function
    selection = pick(
        r["candidates"], r["scores"], r["quality"], r["groups"], r["geometry"], config=given.configs["select"]
    )
    return {"selection": selection}


def _pack(given: StepInput) -> dict[str, Any]:
    r, pack = given.records, STAGES.lookup("pack").function
    return {"canvases": pack(r["selection"], r["decoded"], r["geometry"], config=given.configs["pack"])}


def _no_group_message(records: Mapping[str, Any], configs: Mapping[str, Any]) -> str:
    return (
        f"no canvases produced: {records['candidates'].frame_indices.size} candidates never formed a group "
        f"of at least {configs['group'].frame_limits[0]} frames"
    )


def _warnings(records: Mapping[str, Any], options: SelectionOptions) -> tuple[RunWarning, ...]:
    return _run_warnings(options, records["info"], records["geometry"]) + stage_warnings(records)


CVP = Recipe(
    "cvp",
    front=(
        Step("probe", _probe, ("info",)),
        Step("sample", _sample, ("sampled",)),
        Step("keyframes", _keyframes, ("candidates",)),
        Step("geometry", _geometry, ("geometry",)),
        Step("decode", _decode, ("decoded", "per_frame")),
        Step("quality", _quality, ("quality",)),
    ),
    back=(
        Step("score", _score, ("scores",)),
        Step("group", _group, ("groups",)),
        Step("select", _select, ("selection",)),
        Step("pack", _pack, ("canvases",)),
    ),
    warnings=_warnings,
    empty_message=_no_group_message,
)
"""codec-video-prep's pipeline: the stage table's stages, in its order."""


def run(video: str | Path, *, options: SelectionOptions, **resume: Unpack[ResumeArgs]) -> RunResult:
    """Run every stage of cvp's pipeline on one video.

    Parameters
    ----------
    video : path of the video file.
    options : selection options (profile + cvp options).
    **resume : ``on_progress``, ``front`` (cached probe … quality records of a run with the same
        FRONT_OPTIONS), ``scores`` (cached score maps, same front and SCORE_OPTIONS), ``info``
        (the probe of ``video`` under this profile): see :class:`ResumeArgs`.

    Returns
    -------
    RunResult holding every stage's record, the warnings that fired and per-stage times.

    Raises
    ------
    InputError, UnsupportedVideoError, BitcostUnavailableError, DecodeError, PipelineError.
    """
    return run_recipe(CVP, video, options=options, **resume)


def _decode_work(cfg: dict[str, Any], geometry: Geometry, *, scores_cached: bool) -> FrameWork:
    """The quality and score stages' per-frame parts, run where the decode lands each frame.

    The bad-frame test and (when a frame's scores depend on its grid alone) the score sums
    run inside the decode workers, in parallel with the read; the quality and score stages
    then only assemble those results.
    """
    per_frame_scores = not scores_cached and per_frame_scoring(cfg["score"])
    return FrameWork(
        on_pixels=functools.partial(frame_bad_reason, config=cfg["quality"]),
        on_grid=(
            functools.partial(frame_scores, geometry=geometry, config=cfg["score"])
            if per_frame_scores
            else None
        ),
    )


def _run_warnings(options: SelectionOptions, info: VideoInfo, geometry: Geometry) -> tuple[RunWarning, ...]:
    out: list[RunWarning] = []
    if info.frame_count_source == "duration_estimate":
        out.append(
            quirk_warning(
                "frame_count_estimated",
                f"frame count {info.total_frames} guessed as round(fps × duration) "
                f"({info.fps:g} × {info.duration_secs:g}); the {info.format_name} header has none",
            )
        )
    if options.frame_sampling_mode == "pkt_peak" and quirk_on(options.profile, "pkt_peak_is_fps"):
        cite = quirk("pkt_peak_is_fps").cite
        out.append(
            quirk_warning("pkt_peak_is_fps", f"frame_sampling_mode pkt_peak ran the fps sampler ({cite})")
        )
    if geometry.processed_hw != geometry.prepared_hw:
        out.append(
            quirk_warning(
                "double_resize",
                f"decoded at {geometry.prepared_hw[1]}x{geometry.prepared_hw[0]} then resized again to "
                f"{geometry.processed_hw[1]}x{geometry.processed_hw[0]} ({quirk('double_resize').cite})",
            )
        )
    if geometry.processed_hw[0] * geometry.processed_hw[1] > info.width * info.height:
        out.append(
            quirk_warning(
                "upscaled",
                f"frames upscaled from {info.width}x{info.height} to "
                f"{geometry.processed_hw[1]}x{geometry.processed_hw[0]}",
            )
        )
    return tuple(out)
