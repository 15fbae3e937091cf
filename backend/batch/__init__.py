"""Batch selection over a dataset: list the videos, run one unit per video on an engine, summarise."""

from backend.batch.inputs import Entry, Listing, list_input, sniff_container
from backend.batch.local import run_local
from backend.batch.run import (
    ENGINES,
    SUMMARY_FILE,
    BatchConfig,
    BatchInterrupted,
    BatchPlan,
    BatchReport,
    default_workers,
    output_folder,
    plan_batch,
    run_batch,
)
from backend.batch.unit import (
    UnitOptions,
    UnitTask,
    resolve_options,
    run_unit,
)

__all__ = [
    "ENGINES",
    "SUMMARY_FILE",
    "BatchConfig",
    "BatchInterrupted",
    "BatchPlan",
    "BatchReport",
    "Entry",
    "Listing",
    "UnitOptions",
    "UnitTask",
    "default_workers",
    "list_input",
    "output_folder",
    "plan_batch",
    "resolve_options",
    "run_batch",
    "run_local",
    "run_unit",
    "sniff_container",
]
