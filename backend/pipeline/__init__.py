"""The selection pipeline: options, stage registries, cvp quirks and the run itself.

The names below load on first use (PEP 562): the stages import
``backend.pipeline.quirks``, so importing this package must not import the stages back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend import lazy_exports

if TYPE_CHECKING:
    from backend.pipeline.options import FRONT_OPTIONS, SCORE_OPTIONS, SelectionOptions
    from backend.pipeline.quirks import QUIRKS, Quirk, quirk_on
    from backend.pipeline.registry import STAGES, VARIANTS
    from backend.pipeline.runner import Front, ProgressCallback, RunResult, run

_HOMES = {
    "FRONT_OPTIONS": "options",
    "SCORE_OPTIONS": "options",
    "SelectionOptions": "options",
    "QUIRKS": "quirks",
    "Quirk": "quirks",
    "quirk_on": "quirks",
    "STAGES": "registry",
    "VARIANTS": "registry",
    "Front": "runner",
    "ProgressCallback": "runner",
    "RunResult": "runner",
    "run": "runner",
}

__all__ = [
    "FRONT_OPTIONS",
    "QUIRKS",
    "SCORE_OPTIONS",
    "STAGES",
    "VARIANTS",
    "Front",
    "ProgressCallback",
    "Quirk",
    "RunResult",
    "SelectionOptions",
    "quirk_on",
    "run",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())
