"""The onevision recipe: probe → uniform sample → letterbox → decode → quality → score → top-K → pack."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from backend.pipeline.recipe import Recipe, RunResult, Step, StepInput, run_recipe, stage_warnings
from backend.pipeline.registry import STAGES
from backend.records import RunWarning
from backend.selectors.onevision.letterbox import (
    decode_letterboxed,
    letterbox_geometry,
    letterboxed_raw_grids,
    picture_blocks,
    score_letterboxed,
)
from backend.selectors.onevision.options import OnevisionOptions
from backend.selectors.onevision.topk import select_topk
from backend.stages import quality as quality_mod
from backend.stages.signals import SIGNALS


def _probe(given: StepInput) -> dict[str, Any]:
    return {"info": STAGES.lookup("probe").function(given.video, config=given.configs["probe"])}


def _sample(given: StepInput) -> dict[str, Any]:
    info, cfg = given["info"], given.configs
    sampled = STAGES.lookup("sample").function(info, config=cfg["sample"])
    return {"candidates": STAGES.lookup("keyframes").function(sampled, info, config=cfg["keyframes"])}


def _geometry(given: StepInput) -> dict[str, Any]:
    return {"geometry": letterbox_geometry(given["info"], config=given.configs["geometry"])}


def _decode(given: StepInput) -> dict[str, Any]:
    r = given.records
    decoded, content, _exactness = decode_letterboxed(
        r["info"], r["candidates"], r["geometry"], config=given.configs["decode"]
    )
    return {"decoded": decoded, "content": content}


def _quality(given: StepInput) -> dict[str, Any]:
    # The bad-frame test looks at the frames themselves, not at the letterbox's bars.
    bare = dataclasses.replace(given["decoded"], pixels=given["content"], warnings=())
    return {"quality": quality_mod.assess_frames(bare, config=given.configs["quality"])}


def _score(given: StepInput) -> dict[str, Any]:
    decoded, geometry = given["decoded"], given["geometry"]
    normalisation = SIGNALS.lookup(given.options.signal).normalisation
    scores = score_letterboxed(decoded, geometry, normalisation=normalisation)
    # The run keeps the raw letterboxed grids (the score maps hold the normalised ones).
    raw = dataclasses.replace(decoded, grids=letterboxed_raw_grids(decoded, geometry))
    return {"scores": scores, "decoded": raw}


def _select(given: StepInput) -> dict[str, Any]:
    r = given.records
    selection, groups = select_topk(
        r["candidates"], r["scores"], r["geometry"], config=given.configs["select"]
    )
    return {"selection": selection, "groups": groups}


def _pack(given: StepInput) -> dict[str, Any]:
    r = given.records
    pack: Callable[..., Any] = STAGES.lookup("pack").function
    return {"canvases": pack(r["selection"], r["decoded"], r["geometry"], config=given.configs["pack"])}


def _warnings(records: Mapping[str, Any], _options: OnevisionOptions) -> tuple[RunWarning, ...]:
    info = records["info"]
    hn, wn = records["geometry"].prepared_hw
    upscaled: tuple[RunWarning, ...] = ()
    if hn * wn > info.width * info.height:
        text = f"frames upscaled from {info.width}x{info.height} to {wn}x{hn}"
        upscaled = (RunWarning("letterbox_upscaled", text),)
    return stage_warnings(records) + upscaled


ONEVISION = Recipe(
    "onevision",
    front=(
        Step("probe", _probe, ("info",)),
        Step("sample", _sample, ("candidates",)),
        Step("geometry", _geometry, ("geometry",)),
        Step("decode", _decode, ("decoded", "content")),
        Step("quality", _quality, ("quality",)),
    ),
    back=(
        Step("score", _score, ("scores",)),
        Step("select", _select, ("selection", "groups")),
        Step("pack", _pack, ("canvases",)),
    ),
    warnings=_warnings,
    reuses_scores=False,
    picture_box=picture_blocks,
)


def select_onevision(
    video: str | Path, *, options: OnevisionOptions, on_progress: Callable[[str, float], None] | None = None
) -> RunResult:
    """Run the onevision selector on one video.

    Parameters
    ----------
    video : path of the video file.
    options : the selector's options.
    on_progress : called as ``on_progress(stage_name, fraction_done)`` after each step.

    Returns
    -------
    RunResult with the pipeline's records: candidates (``seq_len_frames`` uniform frames),
    a letterbox geometry (square ``processed_hw``, 1×1 blocks), the letterboxed pixels and
    signal grids, patch scores, one group, its selection, and ``num_images`` canvases with
    N×8 token rows (``src_patch_position`` = [frame_index, patch_row, patch_col] in the square).

    Raises
    ------
    InputError, UnsupportedVideoError, DecodeError, PipelineError.
    """
    return run_recipe(ONEVISION, video, options=options, on_progress=on_progress)
