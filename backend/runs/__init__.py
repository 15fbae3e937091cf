"""Stored runs: run-and-store, the re-selection plan, re-selection and the decode cache."""

from backend.runs.decode_cache import DEFAULT_CACHE_BUDGET_BYTES, load_front, load_scores, prune_cache
from backend.runs.plan import ReselectPlan, front_is_cached, plan_reselection
from backend.runs.reselect import reselect, run_plan
from backend.runs.store_run import CachedDecode, content_sha256, decode_is_cached, open_run, select_and_store
from backend.store import run_columns  # record → row code lives beside the store domain writing it

__all__ = [
    "DEFAULT_CACHE_BUDGET_BYTES",
    "CachedDecode",
    "ReselectPlan",
    "content_sha256",
    "decode_is_cached",
    "front_is_cached",
    "load_front",
    "load_scores",
    "open_run",
    "plan_reselection",
    "prune_cache",
    "reselect",
    "run_columns",
    "run_plan",
    "select_and_store",
]
