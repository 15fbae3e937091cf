"""The selection pipeline: options, stage registries, cvp quirks and the run itself."""

from backend.pipeline.run import (
    FRONT_OPTIONS,
    SCORE_OPTIONS,
    STAGES,
    Front,
    ProgressCallback,
    RunResult,
    SelectionOptions,
    run,
)

__all__ = [
    "FRONT_OPTIONS",
    "SCORE_OPTIONS",
    "STAGES",
    "Front",
    "ProgressCallback",
    "RunResult",
    "SelectionOptions",
    "run",
]
