"""The llava-ov2 recipe: LLaVA-OneVision-2's codec-stream frontend (lmms-video-utils 0.1.0) as stage calls.

probe → sample (canvas budget or rate) → canvas geometry → one streaming decode (canvas-size
frames, block residuals of consecutive samples, picture types, packet sizes) → GOP partition
(``GOP_MODES``) → packet-size weights per GOP → temporal-quota selection → the ``quota`` packer.
The result has the records of every selector (``backend.pipeline.RunResult``), so every view,
export and comparison takes it as it takes a cvp run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

# PyAV (native.stream_decode) loads in select_llava_ov2(): backend.selectors imports this module,
# and a batch re-run that skips everything must not load a decoder.
from backend.errors import PipelineError
from backend.pipeline import RunResult
from backend.pipeline.runner import ResumeArgs, begin
from backend.records import Candidates, FrameQuality, Groups, RunWarning, ScoreMaps
from backend.selectors.llava_ov2.decode import decode_stream
from backend.selectors.llava_ov2.geometry import canvas_geometry
from backend.selectors.llava_ov2.gop import GopInputs, partition
from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.quota import select_quota
from backend.selectors.llava_ov2.sample import sample, stream_fps
from backend.selectors.llava_ov2.score import ScoreConfig, gop_weights
from backend.stages.pack import PackConfig, pack
from backend.stages.probe import ProbeConfig, probe

if TYPE_CHECKING:
    from typing_extensions import Unpack

STAGE_NAMES = ("probe", "sample", "geometry", "decode", "group", "score", "select", "pack")


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
        ``info`` (the probe of ``video``); ``scores`` is ignored (the weights depend on the GOPs,
        which are cheap to redo). See ``backend.pipeline.runner.ResumeArgs``.

    Returns
    -------
    RunResult: candidates = sampled frames, groups = GOPs, selection = the I-canvas frame and
    the P-canvases' blocks of each GOP, canvases in lmms-video-utils' order (so
    ``canvases.src_patch_position`` holds its ``patch_positions`` rows).

    Raises
    ------
    InputError, UnsupportedVideoError, DecodeError, PipelineError, ValueError.
    """
    from native import stream_decode
    from native.side_data import SideDataError

    cfg = options.stage_configs()
    timed, front, _, info = begin(STAGE_NAMES, resume)
    warnings: list[RunWarning] = []
    if front is None:
        if info is None:
            info = timed("probe", probe, video, config=ProbeConfig(profile="clean"))
        try:
            facts = stream_decode.stream_facts(info.path)
        except SideDataError as exc:
            raise PipelineError(str(exc), path=info.path, stage="sample") from exc
        fps = stream_fps(
            float(facts.average_rate) if facts.average_rate else None,
            float(facts.base_rate) if facts.base_rate else None,
        )
        candidates = timed("sample", sample, info, fps, config=cfg["sample"])
        sar = float(facts.sample_aspect_ratio) if facts.sample_aspect_ratio else None
        canvas = timed("geometry", canvas_geometry, info, sar, config=cfg["geometry"])
        decoded_stream = timed("decode", decode_stream, info, candidates, canvas, config=cfg["decode"])
        decoded = decoded_stream.decoded
        # The per-candidate packet facts travel with the candidates, so a cached front can re-run
        # the GOP partition.
        debug = dict(candidates.debug) | {
            "packet_size_bytes": decoded_stream.packet_sizes.tolist(),
            "pts_secs": [None if np.isnan(p) else float(p) for p in decoded_stream.pts_secs],
            "crop": list(canvas.crop),
        }
        candidates = Candidates(
            frame_indices=candidates.frame_indices,
            sampled_frame_indices=candidates.sampled_frame_indices,
            keyframe_indices=(),
            moved=(),
            debug=debug,
            warnings=candidates.warnings + canvas.warnings,
        )
        geometry = canvas.geometry
        n = int(candidates.frame_indices.size)
        quality = FrameQuality(good=np.ones(n, bool), reasons=("",) * n)
    else:
        info, candidates, geometry = front.info, front.candidates, front.geometry
        decoded, quality = front.decoded, front.quality
    packet_sizes = np.asarray(candidates.debug["packet_size_bytes"], np.int64)
    gop_inputs = GopInputs(packet_sizes=packet_sizes, pict_types=decoded.pict_types)
    groups = timed("group", partition, gop_inputs, config=cfg["group"])
    score_maps = timed("score", weighted_scores, decoded.grids, packet_sizes, groups, config=cfg["score"])
    score_maps = ScoreMaps(
        grids=score_maps.grids,
        processed_hw=geometry.processed_hw,
        patch_scores=score_maps.patch_scores,
        block_scores=score_maps.block_scores,
        iframe_clip_cap=None,
        debug=score_maps.debug,
    )
    selection = timed(
        "select",
        select_quota,
        score_maps,
        groups,
        candidates.frame_indices,
        geometry.block_grid_hw[1],
        config=cfg["select"],
    )
    if not selection.groups:
        raise PipelineError(
            f"no canvases produced: {candidates.frame_indices.size} sampled frames formed no GOP of at least "
            "2 frames (the video is too short)",
            path=info.path,
            stage="select",
        )
    canvases = timed(
        "pack",
        pack,
        selection,
        decoded,
        geometry,
        config=PackConfig(images_per_group=options.images_per_group, packer="quota"),
    )
    timings = timed.finish()
    warnings += (
        list(candidates.warnings) + list(decoded.warnings) + list(groups.warnings) + list(selection.warnings)
    )
    return RunResult(
        options=options,
        info=info,
        candidates=candidates,
        geometry=geometry,
        decoded=decoded,
        quality=quality,
        scores=score_maps,
        groups=groups,
        selection=selection,
        canvases=canvases,
        warnings=tuple(warnings),
        timings_secs=timings,
    )
