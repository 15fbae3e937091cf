"""Selectors: recipes of stage functions that all produce a ``backend.pipeline.recipe.RunResult``.

``SELECTORS`` is the table every entry point dispatches through (CLI ``--selector``, the Run
tab, re-selection, comparisons, the store). Each entry names its function
``select(video, *, options, on_progress=None) -> RunResult`` (``run_recipe`` over the selector's
``Recipe``) and its options class, a ``SelectorOptions`` (a frozen, keyword-only dataclass whose
``param`` metadata is the schema of its CLI flags and app controls). A *resumable* selector's
function also takes ``front=``, ``scores=`` and ``info=``: runs whose ``FRONT_OPTIONS`` agree then
share one cached decode, and re-selection re-runs only the cheap stages.

Adding a selector: one module with its options class, its step functions and its ``Recipe``
(``docs/architecture.md``, "Where to add things"), and one ``SelectorSpec`` row below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.config import Registry, Variant
from backend.pipeline.options import SelectionOptions
from backend.pipeline.recipe import ProgressCallback, Recipe, ResumeArgs, RunResult, SelectorOptions
from backend.pipeline.runner import CVP, run
from backend.records import Geometry
from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.run import LLAVA_OV2, select_llava_ov2
from backend.selectors.onevision import ONEVISION, OnevisionOptions, select_onevision
from backend.selectors.uniform import UNIFORM, UniformOptions, select_uniform

if TYPE_CHECKING:
    from typing_extensions import Unpack


@dataclass(frozen=True)
class SelectorSpec(Variant):
    """One selector: ``function(video, *, options, on_progress=None) -> RunResult`` and its options class.

    ``config_class`` is the options class (also :attr:`options_cls`), a :class:`SelectorOptions`
    whose ``FRONT_OPTIONS`` and ``SCORE_OPTIONS`` name what a cached decode and cached score maps
    depend on. ``resumable``: the function takes ``front``/``scores``/``info`` (see the module
    docstring). ``recipe``: the stages ``function`` runs (its picture box and whether it scores).
    """

    resumable: bool = False
    recipe: Recipe | None = None

    @property
    def picture_box(self) -> Callable[[Geometry], tuple[int, int, int, int]] | None:
        """For a selector whose frames carry bars (onevision letterboxes): ``(r0, r1, c0, c1)``,
        the block rows and columns that show the picture. None: the whole block grid does."""
        return self.recipe.picture_box if self.recipe is not None else None

    def __post_init__(self) -> None:
        if not (isinstance(self.config_class, type) and issubclass(self.config_class, SelectorOptions)):
            raise ValueError(
                f"Invalid options class ({self.config_class!r}). Supported values are SelectorOptions."
            )

    @property
    def options_cls(self) -> type[SelectorOptions]:
        assert self.config_class is not None
        return self.config_class

    @property
    def front_options(self) -> tuple[str, ...]:
        """The options whose change invalidates the cached decode (empty when not resumable)."""
        return self.options_cls.FRONT_OPTIONS if self.resumable else ()

    @property
    def score_options(self) -> tuple[str, ...]:
        """The options whose change invalidates the cached score maps."""
        return self.options_cls.SCORE_OPTIONS if self.resumable else ()

    def cache_options(self) -> tuple[str, ...]:
        """The options a cached decode of this selector depends on."""
        if self.resumable:
            return self.front_options
        return tuple(f.name for f in dataclasses.fields(self.options_cls))


SELECTORS: Registry[SelectorSpec] = Registry(
    "selector",
    (
        SelectorSpec(
            "cvp",
            run,
            "codec-video-prep 0.2.5: readiness groups, anchor + top-K 2×2 blocks by bitcost (the released "
            "LLaVA-OneVision-2 and Mage-VL checkpoints)",
            SelectionOptions,
            resumable=True,
            recipe=CVP,
        ),
        SelectorSpec(
            "llava-ov2",
            select_llava_ov2,
            "lmms-video-utils 0.1.0 (LLaVA-OneVision-2 paper): logical GOPs, one I-canvas and P-canvases "
            "with temporal quotas per GOP",
            LlavaOv2Options,
            resumable=True,
            recipe=LLAVA_OV2,
        ),
        SelectorSpec(
            "onevision",
            select_onevision,
            "OneVision-Encoder's LLaVA-NeXT codec path: frame 0 whole, then a global (or per time bucket) "
            "top-K of motion+residual patches over a letterboxed square",
            OnevisionOptions,
            recipe=ONEVISION,
        ),
        SelectorSpec(
            "uniform",
            select_uniform,
            "baseline: N evenly spaced whole frames, one canvas each",
            UniformOptions,
            resumable=True,
            recipe=UNIFORM,
        ),
    ),
)
SELECTOR_NAMES = SELECTORS.names


def spec_of(options: SelectorOptions) -> SelectorSpec:
    """The selector whose options class ``options`` is an instance of."""
    for spec in SELECTORS.values():
        if type(options) is spec.options_cls:
            return spec
    names = ", ".join(s.options_cls.__name__ for s in SELECTORS.values())
    raise ValueError(f"Invalid options ({type(options).__name__}). Supported values are {names}.")


def selector_of(options: SelectorOptions) -> str:
    """The name of the selector ``options`` belong to (``cvp`` for SelectionOptions)."""
    return spec_of(options).name


def picture_of(options: SelectorOptions, geometry: Geometry) -> tuple[int, int, int, int]:
    """``(r0, r1, c0, c1)``: the block rows and columns of a run's grid that show the picture (the
    whole grid unless its selector adds bars, see :attr:`SelectorSpec.picture_box`)."""
    spec = spec_of(options)
    if spec.picture_box is not None:
        return spec.picture_box(geometry)
    bh, bw = geometry.block_grid_hw
    return 0, bh, 0, bw


def picture_patches(result: Any) -> tuple[int, int, int, int] | None:
    """``(r0, r1, c0, c1)``: the patch rows and columns of a run's grid that show the picture;
    None when that is the whole grid (only a selector with bars, onevision, has a box)."""
    geometry = result.geometry
    r0, r1, c0, c1 = (int(v) * geometry.block_size for v in picture_of(result.options, geometry))
    hp, wp = geometry.grid_hw
    return None if (r0, r1, c0, c1) == (0, hp, 0, wp) else (r0, r1, c0, c1)


def option_names(selector: str) -> tuple[str, ...]:
    """The options a selector takes, in its class's order."""
    return tuple(f.name for f in dataclasses.fields(SELECTORS.lookup(selector).options_cls))


def options_for(selector: str, values: Mapping[str, Any] | None = None) -> SelectorOptions:
    """The options of ``selector`` from ``values`` (keys it does not take are ignored: a stored
    config may hold options a later version dropped).

    Raises
    ------
    ValueError : unknown selector, or an invalid value.
    """
    spec = SELECTORS.lookup(selector)
    known = set(option_names(selector))
    return spec.options_cls(**{k: v for k, v in (values or {}).items() if k in known})


def check_options(selector: str, given: Mapping[str, Any]) -> None:
    """Refuse options that ``selector`` does not take, naming the selectors that do.

    Raises
    ------
    ValueError : ``Invalid option (--score_mode) for the cvp selector. …``
    """
    known = set(option_names(selector))
    for name in given:
        if name in known:
            continue
        owners = [s for s in SELECTOR_NAMES if name in option_names(s)]
        where = f" (an option of {', '.join(owners)})" if owners else ""
        raise ValueError(
            f"Invalid option (--{name}) for the {selector} selector{where}. Supported options are "
            f"{', '.join('--' + n for n in option_names(selector))}."
        )


def select(
    video: str | Path,
    *,
    options: SelectorOptions,
    on_progress: ProgressCallback | None = None,
    **resume: Unpack[ResumeArgs],
) -> RunResult:
    """Run the selector ``options`` belong to; ``resume`` (front, scores, info) for resumable ones."""
    spec = spec_of(options)
    if resume and not spec.resumable:
        resume = {}
    return spec.function(video, options=options, on_progress=on_progress, **resume)


__all__ = [
    "SELECTORS",
    "SELECTOR_NAMES",
    "SelectorOptions",
    "SelectorSpec",
    "check_options",
    "option_names",
    "options_for",
    "picture_of",
    "picture_patches",
    "select",
    "selector_of",
    "spec_of",
]
