"""The llava-ov2 recipe: LLaVA-OneVision-2's codec-stream frontend (lmms-video-utils 0.1.0) as stage calls.

probe → sample (canvas budget or rate) → canvas geometry → one streaming decode (canvas-size
frames, block residuals of consecutive samples, picture types, packet sizes) → GOP partition
(``GOP_MODES``) → packet-size weights per GOP → temporal-quota selection → the ``quota`` packer.
The result has the records of every selector (``backend.pipeline.RunResult``), so every view,
export and comparison takes it as it takes a cvp run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# PyAV (through native) loads in _sample(): backend.selectors imports this module,
# and a batch re-run that skips everything must not load a decoder.
from backend.errors import PipelineError
from backend.pipeline.recipe import Recipe, ResumeArgs, RunResult, Step, StepInput, run_recipe
from backend.records import Candidates, FrameQuality, Groups, ScoreMaps
from backend.selectors.llava_ov2.decode import decode_stream
from backend.selectors.llava_ov2.geometry import canvas_geometry
from backend.selectors.llava_ov2.gop import GopInputs, partition
from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.quota import select_quota
from backend.selectors.llava_ov2.sample import sample, stream_fps
from backend.selectors.llava_ov2.score import ScoreConfig, gop_weights
from backend.stages.pack import pack
from backend.stages.probe import probe

if TYPE_CHECKING:
    from typing_extensions import Unpack


def weighted_scores(
    decoded_grids: tuple[np.ndarray, ...], packet_sizes: np.ndarray, groups: Groups, *, config: ScoreConfig
) -> ScoreMaps:
    """Block scores of every candidate: its residual against the previous sample, times its GOP's
    packet-size weight (mvwarp modes); 0 for each GOP's first frame (the I-canvas).

    Returns
    -------
    ScoreMaps with block_scores (n, hp·wp), patch_scores (n, 2hp, 2wp) (a block's score split over
    its patches, for display) and grids normalised per frame to its maximum.
    """
    n = len(decoded_grids)
    hb, wb = decoded_grids[0].shape if n else (0, 0)
    block = np.zeros((n, hb, wb), np.float32)
    weights_debug: dict[str, list[float]] = {}
    for spec in groups.specs:
        rows = np.stack(decoded_grids[spec.start + 1 : spec.end]) if spec.end - spec.start > 1 else None
        if rows is None:
            continue
        w = gop_weights(packet_sizes[spec.start : spec.end], config=config)
        if w is not None:
            rows = (rows * w[:, None, None]).astype(np.float32)
            weights_debug[str(spec.group_index)] = [float(x) for x in w]
        block[spec.start + 1 : spec.end] = rows
    tops = block.reshape(n, -1).max(axis=1) if n else np.zeros(0, np.float32)
    grids = tuple(
        (block[i] / tops[i]).astype(np.float32) if tops[i] > 0 else np.zeros((hb, wb), np.float32)
        for i in range(n)
    )
    patches = np.repeat(np.repeat(block, 2, axis=1), 2, axis=2) / np.float32(4)
    return ScoreMaps(
        grids=grids,
        processed_hw=(0, 0),  # filled by the caller, which knows the canvas size
        patch_scores=patches.astype(np.float32),
        block_scores=block.reshape(n, hb * wb),
        iframe_clip_cap=None,
        debug={"score_mode": config.score_mode, "gop_weights": weights_debug},
    )


def _probe(given: StepInput) -> dict[str, Any]:
    return {"info": probe(given.video, config=given.configs["probe"])}


def _sample(given: StepInput) -> dict[str, Any]:
    import native
    from native import SideDataError

    info = given["info"]
    try:
        facts = native.stream_facts(info.path)
    except SideDataError as exc:
        raise PipelineError(str(exc), path=info.path, stage="sample") from exc
    fps = stream_fps(
        float(facts.average_rate) if facts.average_rate else None,
        float(facts.base_rate) if facts.base_rate else None,
    )
    sar = float(facts.sample_aspect_ratio) if facts.sample_aspect_ratio else None
    return {"sampled": sample(info, fps, config=given.configs["sample"]), "sar": sar}


def _geometry(given: StepInput) -> dict[str, Any]:
    return {"canvas": canvas_geometry(given["info"], given["sar"], config=given.configs["geometry"])}


def _decode(given: StepInput) -> dict[str, Any]:
    info, sampled, canvas = given["info"], given["sampled"], given["canvas"]
    decoded_stream = decode_stream(info, sampled, canvas, config=given.configs["decode"])
    # The per-candidate packet facts travel with the candidates, so a cached front can re-run
    # the GOP partition.
    debug = dict(sampled.debug) | {
        "packet_size_bytes": decoded_stream.packet_sizes.tolist(),
        "pts_secs": [None if np.isnan(p) else float(p) for p in decoded_stream.pts_secs],
        "crop": list(canvas.crop),
    }
    candidates = Candidates(
        frame_indices=sampled.frame_indices,
        sampled_frame_indices=sampled.sampled_frame_indices,
        keyframe_indices=(),
        moved=(),
        debug=debug,
        warnings=sampled.warnings + canvas.warnings,
    )
    n = int(candidates.frame_indices.size)
    return {
        "decoded": decoded_stream.decoded,
        "candidates": candidates,
        "geometry": canvas.geometry,
        "quality": FrameQuality(good=np.ones(n, bool), reasons=("",) * n),
    }


def _packet_sizes(candidates: Candidates) -> np.ndarray:
    return np.asarray(candidates.debug["packet_size_bytes"], np.int64)


def _group(given: StepInput) -> dict[str, Any]:
    inputs = GopInputs(
        packet_sizes=_packet_sizes(given["candidates"]), pict_types=given["decoded"].pict_types
    )
    return {"groups": partition(inputs, config=given.configs["group"])}


def _score(given: StepInput) -> dict[str, Any]:
    sizes = _packet_sizes(given["candidates"])
    maps = weighted_scores(given["decoded"].grids, sizes, given["groups"], config=given.configs["score"])
    return {"scores": dataclasses.replace(maps, processed_hw=given["geometry"].processed_hw)}


def _select(given: StepInput) -> dict[str, Any]:
    r = given.records
    block_cols = r["geometry"].block_grid_hw[1]
    selection = select_quota(
        r["scores"], r["groups"], r["candidates"].frame_indices, block_cols, config=given.configs["select"]
    )
    return {"selection": selection}


def _pack(given: StepInput) -> dict[str, Any]:
    r = given.records
    return {"canvases": pack(r["selection"], r["decoded"], r["geometry"], config=given.configs["pack"])}


def _no_gop_message(records: Mapping[str, Any], configs: Mapping[str, Any]) -> str:
    return (
        f"no canvases produced: {records['candidates'].frame_indices.size} sampled frames formed no GOP of "
        "at least 2 frames (the video is too short)"
    )


LLAVA_OV2 = Recipe(
    "llava-ov2",
    front=(
        Step("probe", _probe, ("info",)),
        Step("sample", _sample, ("sampled", "sar")),
        Step("geometry", _geometry, ("canvas",)),
        Step("decode", _decode, ("decoded", "candidates", "geometry", "quality")),
    ),
    back=(
        Step("group", _group, ("groups",)),
        Step("score", _score, ("scores",)),
        Step("select", _select, ("selection",)),
        Step("pack", _pack, ("canvases",)),
    ),
    empty_message=_no_gop_message,
    # The weights depend on the GOPs, which are cheap to redo: cached score maps are not used.
    reuses_scores=False,
)


def select_llava_ov2(
    video: str | Path, *, options: LlavaOv2Options, **resume: Unpack[ResumeArgs]
) -> RunResult:
    """Run the llava-ov2 selector on one video.

    Parameters
    ----------
    video : path of the video file.
    options : llava-ov2 options (lmms-video-utils' CodecConfig names, profile).
    **resume : ``on_progress``, ``front`` (cached probe … decode records of a run with the same
        FRONT_OPTIONS: then nothing is decoded; GOPs, weights, selection and packing run again),
        ``info`` (the probe of ``video``); ``scores`` is ignored. See
        ``backend.pipeline.recipe.ResumeArgs``.

    Returns
    -------
    RunResult: candidates = sampled frames, groups = GOPs, selection = the I-canvas frame and
    the P-canvases' blocks of each GOP, canvases in lmms-video-utils' order (so
    ``canvases.src_patch_position`` holds its ``patch_positions`` rows).

    Raises
    ------
    InputError, UnsupportedVideoError, DecodeError, PipelineError, ValueError.
    """
    return run_recipe(LLAVA_OV2, video, options=options, **resume)
