"""The selection run: the stage calls of a selector recipe, in order, each through the stage table."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from backend.errors import PipelineError
from backend.pipeline.options import SelectionOptions
from backend.pipeline.quirks import quirk, quirk_on, quirk_warning
from backend.pipeline.registry import STAGES
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
from backend.stages.decode import FrameResults, FrameWork
from backend.stages.quality import frame_bad_reason
from backend.stages.score import frame_scores, per_frame_scoring

if TYPE_CHECKING:
    from typing_extensions import Unpack

ProgressCallback = Callable[[str, float], None]
_T = TypeVar("_T")


class StageClock:
    """The stage timer of a selector run: times each stage call and reports it done.

    ``clock(name, fn, *args, **kwargs)`` returns ``fn(*args, **kwargs)``, records its wall
    seconds under ``name`` and calls ``on_progress(name, fraction)``, the fraction being the
    stage's place in ``stage_names``; :meth:`finish` adds ``total`` (since the clock was made).
    """

    def __init__(self, stage_names: Sequence[str], on_progress: ProgressCallback | None) -> None:
        self._names = tuple(stage_names)
        self._on_progress = on_progress
        self._start = time.perf_counter()
        self.timings: dict[str, float] = {}

    def __call__(self, name: str, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        self.timings[name] = time.perf_counter() - t0
        if self._on_progress is not None:
            self._on_progress(name, (self._names.index(name) + 1) / len(self._names))
        return out

    def finish(self) -> dict[str, float]:
        """The per-stage seconds and ``total``."""
        self.timings["total"] = time.perf_counter() - self._start
        return self.timings


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


@dataclass(frozen=True)
class Front:
    """Records of the expensive stages, reusable while FRONT_OPTIONS stay the same."""

    info: VideoInfo
    candidates: Candidates
    geometry: Geometry
    decoded: DecodedFrames
    quality: FrameQuality


class ResumeArgs(TypedDict, total=False):
    """The keywords every resumable selector run takes after its options (all optional)."""

    on_progress: ProgressCallback | None
    """Called as ``on_progress(stage_name, fraction_done)`` after each stage."""
    front: Front | None
    """Cached probe … decode records of a run whose front options agree: those stages are skipped."""
    scores: ScoreMaps | None
    """Cached score maps (same front and score options): the score stage is skipped where the
    selector keeps score maps apart from its selection."""
    info: VideoInfo | None
    """The probe of the video, when the caller already has it."""


def begin(
    stage_names: Sequence[str], resume: ResumeArgs
) -> tuple[StageClock, Front | None, ScoreMaps | None, VideoInfo | None]:
    """The stage clock and the cached records a resumable run starts from.

    Raises
    ------
    TypeError : a keyword that is not one of :class:`ResumeArgs`.
    """
    unknown = sorted(set(resume) - set(ResumeArgs.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    clock = StageClock(stage_names, resume.get("on_progress"))
    return clock, resume.get("front"), resume.get("scores"), resume.get("info")


def run(video: str | Path, *, options: SelectionOptions, **resume: Unpack[ResumeArgs]) -> RunResult:
    """Run every stage on one video.

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
    cfg = options.stage_configs()
    clock, front, scores, info = begin(STAGES.names, resume)

    def call(name: str, *inputs: Any, **extra: Any) -> Any:
        return clock(name, STAGES.lookup(name).function, *inputs, config=cfg[name], **extra)

    if front is None:
        if info is None:
            info = call("probe", video)
        sampled = call("sample", info)
        candidates = call("keyframes", sampled, info)
        geometry = call("geometry", info)
        work = _decode_work(cfg, geometry, scores_cached=scores is not None)
        decoded, per_frame = call("decode", info, candidates, geometry, work=work)
        quality = call("quality", decoded, precomputed=per_frame.pixels)
    else:
        info, candidates, geometry = front.info, front.candidates, front.geometry
        decoded, quality = front.decoded, front.quality
        per_frame = FrameResults()
    if scores is None:
        scores = call("score", decoded, geometry, precomputed=per_frame.grids)
    groups = call("group", info, candidates, scores, geometry)
    selection = call("select", candidates, scores, quality, groups, geometry)
    if not selection.groups:
        raise PipelineError(
            f"no canvases produced: {candidates.frame_indices.size} candidates never formed a group "
            f"of at least {cfg['group'].frame_limits[0]} frames",
            path=info.path,
            stage="select",
        )
    canvases = call("pack", selection, decoded, geometry)
    timings = clock.finish()
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
