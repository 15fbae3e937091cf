"""The uniform selector: N evenly spaced frames, each a whole canvas — the baseline the codec selectors beat.

Recipe: probe → N frames at round(linspace(0, frames − 1, N)) → cvp's processed size (clean
smart_resize) → one streaming decode of those frames (area resize) → groups of
``images_per_group`` consecutive frames → each group's first frame is its anchor and every
block of the others is kept → the ``block_raster`` packer, which lays each kept frame whole on
its own canvas (a frame's blocks fill exactly one canvas). No codec signal is read: score maps
are zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

# OpenCV and PyAV (through native) load in _decode(): backend.selectors imports this module
# for UniformOptions, and a batch re-run that skips everything must not load a decoder.
from backend.config import option_of, param, validate_fields
from backend.errors import DecodeError
from backend.pipeline.recipe import (
    Recipe,
    ResumeArgs,
    RunResult,
    SelectorOptions,
    Step,
    StepInput,
    run_recipe,
)
from backend.records import (
    Candidates,
    DecodedFrames,
    FrameQuality,
    Geometry,
    Groups,
    GroupSelection,
    GroupSpec,
    ScoreMaps,
    Selection,
    VideoInfo,
)
from backend.stages.decode import decoder_thread_count
from backend.stages.geometry import GeometryConfig, resolve_geometry
from backend.stages.pack import PackConfig, pack
from backend.stages.probe import ProbeConfig, probe

if TYPE_CHECKING:
    from typing_extensions import Unpack


@dataclass(frozen=True, kw_only=True)
class UniformOptions(SelectorOptions):
    """Options of the uniform baseline."""

    FRONT_OPTIONS: ClassVar[tuple[str, ...]] = ("num_frames", "patch", "block_size", "max_pixels")

    num_frames: int = param(
        32, label="Frames", help="evenly spaced frames to keep whole", min=1, max=100000, step=1
    )
    images_per_group: int = param(
        4,
        label="Frames per group",
        help="consecutive frames per group (the first is its anchor); one canvas per frame",
        min=1,
        max=64,
        step=1,
    )
    patch: int = option_of(GeometryConfig, "patch")
    block_size: int = option_of(GeometryConfig, "block_size")
    max_pixels: int = option_of(GeometryConfig, "max_pixels")
    canvas_format: str = param(
        "jpg", label="Canvas format", help="jpg (quality 95) or png", choices=("jpg", "png")
    )
    workers: int = param(
        2,
        label="Decode workers",
        help="1 decodes on one thread (as a batch runs); more lets FFmpeg choose its threads",
        min=1,
        max=64,
    )

    def __post_init__(self) -> None:
        validate_fields(self)

    @property
    def profile(self) -> str:
        """Uniform reproduces no reference: it has only the clean behaviour."""
        return "clean"

    def stage_configs(self) -> dict[str, Any]:
        """The probe, geometry and pack configs, and the decoder's thread count."""
        return {
            "probe": ProbeConfig(profile="clean"),
            "geometry": GeometryConfig(
                patch=self.patch, block_size=self.block_size, max_pixels=self.max_pixels
            ),
            "decode": decoder_thread_count(self.workers),
            "pack": PackConfig(images_per_group=self.images_per_group),
        }


def uniform_indices(total: int, n: int) -> np.ndarray:
    """min(n, total) frame indices round(linspace(0, total − 1, n)) (half to even), ascending and distinct.

    Examples
    --------
    >>> uniform_indices(10, 4).tolist()
    [0, 3, 6, 9]
    >>> uniform_indices(3, 8).tolist()
    [0, 1, 2]
    """
    if n >= total:
        return np.arange(total, dtype=np.int32)
    return np.round(np.linspace(0, total - 1, n)).astype(np.int32)


def _decode(info: VideoInfo, ids: np.ndarray, hw: tuple[int, int], *, threads: int) -> DecodedFrames:
    import cv2

    import native
    from native import SideDataError

    h, w = hw
    n = int(ids.size)
    pixels = np.empty((n, h, w, 3), np.uint8)
    pict = ["?"] * n
    row_of = {int(fid): row for row, fid in enumerate(ids)}
    reached = np.zeros(n, bool)
    try:
        for item in native.iter_stream(info.path, frozenset(row_of), thread_count=threads):
            row = row_of.get(item["frame_index"])
            if row is None:
                continue
            rgb = item["rgb"]
            shrink = h < rgb.shape[0] or w < rgb.shape[1]
            pixels[row] = cv2.resize(
                rgb, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
            )
            pict[row] = item["pict_type"]
            reached[row] = True
    except SideDataError as exc:
        raise DecodeError(str(exc).removeprefix(f"{info.path}: "), path=info.path, stage="decode") from exc
    if not reached.all():
        first = int(ids[np.flatnonzero(~reached)[0]])
        raise DecodeError(f"the stream ended before frame {first}", path=info.path, stage="decode")
    return DecodedFrames(
        frame_indices=ids.astype(np.int32),
        pixels=pixels,
        grids=tuple(np.zeros((1, 1), np.float32) for _ in range(n)),
        grid_key="none",
        pict_types=tuple(pict),
        bitcost_source=ids.astype(np.int32),
        pixel_source="pyav_rgb24_area",
        read_mode=f"stream ({n} frames kept)",
    )


def _candidates(info: VideoInfo, num_frames: int) -> Candidates:
    ids = uniform_indices(info.total_frames, num_frames)
    return Candidates(
        frame_indices=ids,
        sampled_frame_indices=ids.copy(),
        keyframe_indices=(),
        moved=(),
        debug={"frame_sampling_mode": "uniform", "sampled_frames": int(ids.size)},
    )


def _groups(n: int, images_per_group: int) -> Groups:
    """Groups of ``images_per_group`` consecutive frames (the last may be shorter)."""
    specs = tuple(
        GroupSpec(group_index=g, start=s, end=min(n, s + images_per_group), stop_reason="fixed", readiness={})
        for g, s in enumerate(range(0, n, images_per_group))
    )
    return Groups(specs=specs, threshold=0.0, threshold_debug={}, trace=(), dropped_tail=None)


def _select(groups: Groups, candidates: Candidates, geometry: Geometry, images_per_group: int) -> Selection:
    """Each group's first frame is its anchor; every block of its other frames is kept."""
    bh, bw = geometry.block_grid_hw
    every = np.stack(np.divmod(np.arange(bh * bw), bw), axis=1)
    selections = []
    for spec in groups.specs:
        m = spec.frame_count
        kept = np.concatenate(
            [np.column_stack([np.full(bh * bw, t), every]) for t in range(1, m)] or [np.zeros((0, 3))]
        )
        kept = kept.astype(np.int32)
        selections.append(
            GroupSelection(
                group_index=spec.group_index,
                start=spec.start,
                end=spec.end,
                frame_indices=tuple(int(i) for i in candidates.frame_indices[spec.start : spec.end]),
                anchor_swapped_with=None,
                kept=kept,
                kept_scores=np.zeros(kept.shape[0], np.float32),
                ranked=np.column_stack([kept[:, 0], kept[:, 1] * bw + kept[:, 2]]).astype(np.int32),
                ranked_scores=np.zeros(kept.shape[0], np.float32),
                candidate_count=int(kept.shape[0]),
                budget=int((images_per_group - 1) * bh * bw),
                cutoff_score=0.0,
            )
        )
    return Selection(tuple(selections), ())


def _probe(given: StepInput) -> dict[str, Any]:
    return {"info": probe(given.video, config=given.configs["probe"])}


def _sample(given: StepInput) -> dict[str, Any]:
    return {"candidates": _candidates(given["info"], given.options.num_frames)}


def _geometry(given: StepInput) -> dict[str, Any]:
    return {"geometry": resolve_geometry(given["info"], config=given.configs["geometry"])}


def _decode_frames(given: StepInput) -> dict[str, Any]:
    ids = given["candidates"].frame_indices
    decoded = _decode(given["info"], ids, given["geometry"].processed_hw, threads=given.configs["decode"])
    kept = int(ids.size)
    return {"decoded": decoded, "quality": FrameQuality(good=np.ones(kept, bool), reasons=("",) * kept)}


def _group(given: StepInput) -> dict[str, Any]:
    return {"groups": _groups(int(given["candidates"].frame_indices.size), given.options.images_per_group)}


def _select_all(given: StepInput) -> dict[str, Any]:
    """Every block of the non-anchor frames, and zero score maps (no codec signal is read)."""
    candidates, geometry = given["candidates"], given["geometry"]
    n = int(candidates.frame_indices.size)
    selection = _select(given["groups"], candidates, geometry, given.options.images_per_group)
    hb, wb = geometry.grid_hw
    bh, bw = geometry.block_grid_hw
    scores = ScoreMaps(
        grids=tuple(np.zeros((1, 1), np.float32) for _ in range(n)),
        processed_hw=geometry.processed_hw,
        patch_scores=np.zeros((n, hb, wb), np.float32),
        block_scores=np.zeros((n, bh * bw), np.float32),
        iframe_clip_cap=None,
    )
    return {"selection": selection, "scores": scores}


def _pack(given: StepInput) -> dict[str, Any]:
    r = given.records
    return {"canvases": pack(r["selection"], r["decoded"], r["geometry"], config=given.configs["pack"])}


UNIFORM = Recipe(
    "uniform",
    front=(
        Step("probe", _probe, ("info",)),
        Step("sample", _sample, ("candidates",)),
        Step("geometry", _geometry, ("geometry",)),
        Step("decode", _decode_frames, ("decoded", "quality")),
    ),
    back=(
        Step("group", _group, ("groups",)),
        Step("select", _select_all, ("selection", "scores")),
        Step("pack", _pack, ("canvases",)),
    ),
    reuses_scores=False,
    scored=False,
)


def select_uniform(video: str | Path, *, options: UniformOptions, **resume: Unpack[ResumeArgs]) -> RunResult:
    """Run the uniform baseline on one video (``resume``: ``on_progress``, ``info``, ``front`` a cached
    decode; ``scores`` is unused; see ``backend.pipeline.recipe.ResumeArgs``).

    Returns
    -------
    RunResult whose canvases are the sampled frames, whole, in order; groups of
    ``images_per_group`` frames, each group's first frame its anchor.
    """
    return run_recipe(UNIFORM, video, options=options, **resume)
