"""Stored runs: run-and-store, re-selection and the decode cache."""

from backend.runs.session import (
    DEFAULT_CACHE_BUDGET_BYTES,
    content_sha256,
    load_front,
    load_scores,
    open_run,
    prune_cache,
    reselect,
    run_columns,
    select_and_store,
)

__all__ = [
    "DEFAULT_CACHE_BUDGET_BYTES",
    "content_sha256",
    "load_front",
    "load_scores",
    "open_run",
    "prune_cache",
    "reselect",
    "run_columns",
    "select_and_store",
]
