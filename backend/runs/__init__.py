"""Stored runs: run-and-store, re-selection and the decode cache."""

from backend.runs.decode_cache import DEFAULT_CACHE_BUDGET_BYTES, load_front, load_scores, prune_cache
from backend.runs.reselect import reselect
from backend.runs.store_run import content_sha256, decode_is_cached, open_run, select_and_store
from backend.store import run_columns  # record → row code lives beside the store domain writing it

__all__ = [
    "DEFAULT_CACHE_BUDGET_BYTES",
    "content_sha256",
    "decode_is_cached",
    "load_front",
    "load_scores",
    "open_run",
    "prune_cache",
    "reselect",
    "run_columns",
    "select_and_store",
]
