"""The selection pipeline: options, the stage registry and the run itself.

Plain imports: the stages import nothing from this package (the cvp quirks table they consult
is ``backend.quirks``), so importing it here cannot import the stages back into a half-made package.
"""

from __future__ import annotations

from backend.pipeline.options import FRONT_OPTIONS, SCORE_OPTIONS, SelectionOptions
from backend.pipeline.registry import STAGES, VARIANTS
from backend.pipeline.runner import Front, ProgressCallback, RunResult, run

__all__ = [
    "FRONT_OPTIONS",
    "SCORE_OPTIONS",
    "STAGES",
    "VARIANTS",
    "Front",
    "ProgressCallback",
    "RunResult",
    "SelectionOptions",
    "run",
]
