"""The one selector skeleton: a selector declares its steps; ``run_recipe`` runs them into a RunResult.

Every selector is the same walk — probe → sample → geometry → decode → quality (the *front*,
which a decode cache can stand in for) → group → score → select → pack — with its own stage
functions. A :class:`Recipe` names the steps of one selector; :func:`run_recipe` times each
step, skips the front when a cached one is given, skips a step whose records are already known
(a given probe or cached score maps), refuses an empty selection and assembles the
:class:`RunResult`. A new selector is its options class, its stage functions and one Recipe.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, TypeVar

from backend.config import option_of
from backend.errors import InputError, PipelineError
from backend.records import (
    Candidates,
    Canvases,
    DecodedFrames,
    FallbackOutcome,
    FrameQuality,
    Geometry,
    Groups,
    RunWarning,
    ScoreMaps,
    Selection,
    VideoInfo,
)
from backend.stages.budget import BudgetConfig, budget_selection

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

ProgressCallback = Callable[[str, float], None]
_T = TypeVar("_T")

FRONT_RECORDS = ("info", "candidates", "geometry", "decoded", "quality")
"""The records of the front: what a decode cache keeps and a re-selection starts from."""


@dataclass(frozen=True, kw_only=True)
class SelectorOptions(abc.ABC):
    """What every selector's options are: frozen, keyword-only, with a profile and per-stage configs.

    The output folder and the views read ``profile``, ``canvas_format`` and ``images_per_group`` of
    any run, so every selector has them (as fields, or as properties over its own names).

    Subclasses are frozen keyword-only dataclasses whose ``param`` metadata is the schema of their
    CLI flags and app controls; ``FRONT_OPTIONS`` names the options a cached decode depends on
    (empty: every option does) and ``SCORE_OPTIONS`` those the cached score maps depend on.
    """

    FRONT_OPTIONS: ClassVar[tuple[str, ...]] = ()
    SCORE_OPTIONS: ClassVar[tuple[str, ...]] = ()

    # Every selector's: the hard budget re-selects after the selector's own select step, so it
    # never touches a cached decode or score maps (docs/audit.md).
    token_budget: int = option_of(BudgetConfig, "token_budget")
    stop_gain: float = option_of(BudgetConfig, "stop_gain")

    @property
    @abc.abstractmethod
    def profile(self) -> str:
        """``parity`` (reproduce the reference, defects and all) or ``clean``."""

    @property
    @abc.abstractmethod
    def canvas_format(self) -> str:
        """``jpg`` or ``png``: how the output folder writes the canvases."""

    @property
    @abc.abstractmethod
    def images_per_group(self) -> int:
        """Canvases per group (its anchor's and its blocks'): the output folder and the views read it."""

    @abc.abstractmethod
    def stage_configs(self) -> dict[str, Any]:
        """Stage name → that stage's frozen config, for the selector's recipe."""

    @property
    def budgeted(self) -> bool:
        """A hard token budget replaces the selector's own block budget."""
        return self.token_budget > 0

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (validated again).

        Raises
        ------
        ValueError : an invalid value.
        """
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every option by name (the stored config)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RunResult:
    """Everything one selection run produced, stage by stage."""

    options: SelectorOptions
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
    fallback: FallbackOutcome | None = None
    """Set by backend.selectors.fallback.select_with_fallback: what was asked for and what ran."""
    derived: dict[str, Any] = dataclasses.field(default_factory=dict, init=False, compare=False, repr=False)
    """Figures worked out from this run once and kept with it (backend.audit.cached). Not an
    init field, so ``dataclasses.replace`` (another selection, other canvases) starts empty."""


@dataclass(frozen=True)
class Front:
    """Records of the expensive stages, reusable while the selector's FRONT_OPTIONS stay the same."""

    info: VideoInfo
    candidates: Candidates
    geometry: Geometry
    decoded: DecodedFrames
    quality: FrameQuality


class ResumeArgs(TypedDict, total=False):
    """The keywords every selector run takes after its options (all optional)."""

    on_progress: ProgressCallback | None
    """Called as ``on_progress(stage_name, fraction_done)`` after each stage."""
    front: Front | None
    """Cached probe … quality records of a run whose front options agree: those stages are skipped."""
    scores: ScoreMaps | None
    """Cached score maps (same front and score options): the score stage is skipped where the
    selector keeps score maps apart from its selection."""
    info: VideoInfo | None
    """The probe of the video, when the caller already has it."""


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
class StepInput:
    """What a step sees: the video, the run's options and their stage configs, and the records so far."""

    video: str | Path
    options: SelectorOptions
    configs: Mapping[str, Any]
    records: Mapping[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.records[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.records.get(name, default)


StepFunction = Callable[[StepInput], Mapping[str, Any]]


@dataclass(frozen=True)
class Step:
    """One timed stage of a recipe: ``function(StepInput) -> {record name: record}``.

    The step is skipped (neither run nor timed) when every record it ``produces`` is already known.
    """

    name: str
    function: StepFunction
    produces: tuple[str, ...]


def stage_warnings(records: Mapping[str, Any]) -> tuple[RunWarning, ...]:
    """The warnings the records carry, in stage order (candidates, decode, groups, selection)."""
    return (
        records["candidates"].warnings
        + records["decoded"].warnings
        + records["groups"].warnings
        + records["selection"].warnings
    )


def _no_canvases(records: Mapping[str, Any], configs: Mapping[str, Any]) -> str:
    return "no canvases produced"


@dataclass(frozen=True)
class Recipe:
    """A selector: its front steps (replaced by a cached front), its back steps and its run warnings.

    ``warnings(records, options)``: the run's warnings, in order (default: the records' own,
    :func:`stage_warnings`). ``empty_message(records, configs)``: why a run whose selection has no
    group fails. ``reuses_scores``: given cached score maps stand in for the score step.
    """

    name: str
    front: tuple[Step, ...]
    back: tuple[Step, ...]
    warnings: Callable[[Mapping[str, Any], Any], tuple[RunWarning, ...]] = lambda records, _o: stage_warnings(
        records
    )
    empty_message: Callable[[Mapping[str, Any], Mapping[str, Any]], str] = _no_canvases
    reuses_scores: bool = True
    scored: bool = True
    """The selector ranks blocks by score (uniform does not): a hard budget's content stop needs it."""
    picture_box: Callable[[Geometry], tuple[int, int, int, int]] | None = None
    """The block rows and columns that show the video, for a selector that adds bars: a hard
    budget keeps no block on them."""

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in (*self.front, *self.back))

    def stages_of(self, options: SelectorOptions) -> tuple[str, ...]:
        """The stages a run with ``options`` times: a hard budget's after the selection's step."""
        names = self.stage_names
        if not options.budgeted:
            return names
        at = next(i for i, s in enumerate((*self.front, *self.back)) if "selection" in s.produces)
        return (*names[: at + 1], "budget", *names[at + 1 :])

    def __post_init__(self) -> None:
        names = self.stage_names
        if len(set(names)) != len(names):
            raise ValueError(f"Invalid recipe ({self.name}): stage names repeat in {names}.")


def run_recipe(
    recipe: Recipe, video: str | Path, *, options: SelectorOptions, **resume: Unpack[ResumeArgs]
) -> RunResult:
    """Run a selector's steps on one video.

    Parameters
    ----------
    recipe : the selector's steps.
    video : path of the video file.
    options : the selector's options.
    **resume : ``on_progress``, ``front`` (cached front records: the front steps are skipped),
        ``scores`` (cached score maps, used when ``recipe.reuses_scores``), ``info`` (the probe of
        ``video``): see :class:`ResumeArgs`.

    Returns
    -------
    RunResult holding every stage's record, the warnings that fired and per-stage times.

    Raises
    ------
    TypeError : a keyword that is not one of :class:`ResumeArgs`.
    PipelineError : the selection kept no group; and whatever the steps raise.
    """
    unknown = sorted(set(resume) - set(ResumeArgs.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    clock = StageClock(recipe.stages_of(options), resume.get("on_progress"))
    records: dict[str, Any] = {}
    front = resume.get("front")
    if front is not None:
        records.update({name: getattr(front, name) for name in FRONT_RECORDS})
    elif resume.get("info") is not None:
        records["info"] = resume["info"]
    if recipe.reuses_scores and resume.get("scores") is not None:
        records["scores"] = resume["scores"]
    configs = options.stage_configs()
    for step in (*recipe.back,) if front is not None else (*recipe.front, *recipe.back):
        if all(name in records for name in step.produces):
            continue
        view = StepInput(video=video, options=options, configs=configs, records=records)
        records.update(clock(step.name, step.function, view))
        if "selection" in step.produces and not records["selection"].groups:
            message = recipe.empty_message(records, configs)
            raise PipelineError(message, path=records["info"].path, stage="select")
        if "selection" in step.produces and options.budgeted:
            records["selection"] = clock("budget", _budget, recipe, options, records)
    return assemble(options, records, recipe.warnings(records, options), clock.finish())


def budget_config(recipe: Recipe, options: SelectorOptions, geometry: Geometry) -> BudgetConfig:
    """The hard budget's config of a run with ``options`` (its budget, floor, canvases and picture)."""
    return BudgetConfig(
        token_budget=options.token_budget,
        stop_gain=options.stop_gain,
        images_per_group=options.images_per_group,
        scored=recipe.scored,
        picture_blocks=recipe.picture_box(geometry) if recipe.picture_box is not None else None,
    )


def _budget(recipe: Recipe, options: SelectorOptions, records: Mapping[str, Any]) -> Selection:
    config = budget_config(recipe, options, records["geometry"])
    try:
        return budget_selection(
            records["selection"], records["scores"], records["geometry"], records["info"], config=config
        )
    except ValueError as exc:  # a budget below one anchor of this video's grid: the input's fault
        raise InputError(str(exc), path=records["info"].path, stage="budget") from exc


def assemble(
    options: SelectorOptions,
    records: Mapping[str, Any],
    warnings: tuple[RunWarning, ...],
    timings_secs: dict[str, float],
) -> RunResult:
    """The RunResult of a run's records (``FRONT_RECORDS`` plus scores, groups, selection, canvases).

    Raises
    ------
    KeyError : a record is missing.
    """
    return RunResult(
        options=options,
        info=records["info"],
        candidates=records["candidates"],
        geometry=records["geometry"],
        decoded=records["decoded"],
        quality=records["quality"],
        scores=records["scores"],
        groups=records["groups"],
        selection=records["selection"],
        canvases=records["canvases"],
        warnings=warnings,
        timings_secs=timings_secs,
    )
