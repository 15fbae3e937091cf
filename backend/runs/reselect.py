"""Re-selection: re-run a stored run with changed options, reusing its cached decode and score maps."""

from __future__ import annotations

import json
import time
from typing import Any

from backend.errors import StoreError
from backend.pipeline.recipe import ProgressCallback, RunResult, SelectorOptions
from backend.runs.decode_cache import cached_front, cached_scores
from backend.runs.plan import ReselectPlan, plan_reselection
from backend.runs.store_run import CachedDecode, open_run, run_versions, select_and_store
from backend.selectors import selector_of
from backend.store import SessionStore
from backend.store.runs import RunRow


def reselect(
    store: SessionStore,
    run_id: str,
    changes: dict[str, Any],
    *,
    on_progress: ProgressCallback | None = None,
    memory: dict[str, Any] | None = None,
    selector: str | None = None,
    parent: RunRow | None = None,
) -> tuple[str, RunResult, str]:
    """Re-run a stored run with some options changed, reusing its cached decode when possible.

    ``memory`` (cache key → (Front, cache folder)), when given, keeps decoded fronts between calls
    (the app passes one per session) so repeated re-selections skip the disk read. ``selector``:
    re-select the run's video with another selector (its options start from that selector's
    defaults plus ``changes``; the video is then decoded again). A selector that cannot resume
    from its front (``SelectorSpec.resumable`` False) re-runs in full whatever changed.
    ``parent``: run ``run_id``'s store row, when the caller has just read it (one read fewer).

    Returns
    -------
    (run_id, RunResult, how: ``reused`` / ``cache`` / ``cache+scores`` / ``full``).

    Raises
    ------
    StoreError : the run is unknown or not done. ValueError : an option the selector does not take.
    """
    if parent is None or parent.run_id != run_id:
        parent = store.get_run(run_id)
    if parent.status != "done":
        raise StoreError(f"run {run_id} is {parent.status}, not done", path=store.path, stage="reselect")
    plan = plan_reselection(store, parent, changes, selector=selector, memory=memory)
    return run_plan(store, plan, on_progress=on_progress, memory=memory)


def identical_run(store: SessionStore, parent: RunRow, options: SelectorOptions) -> RunRow | None:
    """A finished run of ``parent``'s video made with exactly ``options`` by this version (the parent
    itself included), newest first; None when there is none."""
    # Through JSON as the store keeps it (tuples become lists).
    wanted, versions = json.loads(json.dumps(options.as_dict())), run_versions()
    for row in store.session_runs(parent.session_id, selector=selector_of(options)):
        if row.config == wanted and row.versions == versions:
            return row
    return None


def run_plan(
    store: SessionStore,
    plan: ReselectPlan,
    *,
    on_progress: ProgressCallback | None = None,
    memory: dict[str, Any] | None = None,
) -> tuple[str, RunResult, str]:
    """Carry out a re-selection plan: from the cached decode when it serves, else a full run.

    A finished run of the same video, selector, options and versions is reopened instead of stored
    again (going back to options already run adds no run).

    Returns
    -------
    (run_id, RunResult, how: ``reused`` / ``cache`` / ``cache+scores`` / ``full``).
    """
    parent, options = plan.parent, plan.options
    t0 = time.perf_counter()
    same = identical_run(store, parent, options)
    if same is not None:
        result = open_run(store, same.run_id, memory=memory, row=same)
        result.timings_secs["reopen"] = time.perf_counter() - t0
        return same.run_id, result, "reused"
    key = parent.cache_key
    # The cache is read even when the plan saw it gone: it may have come back; a decode that went
    # since the plan was made means a full run.
    front, folder = cached_front(store, key, memory) if key and plan.same_front else (None, None)
    if front is None:
        new_id, result = select_and_store(
            parent.video_path, store, options=options, on_progress=on_progress, parent_run_id=parent.run_id
        )
        return new_id, result, "full"
    assert key is not None
    scores = cached_scores(store, key, folder, options, front, memory)
    reuse = CachedDecode(
        front=front,
        key=key,
        session_id=parent.session_id,
        scores=scores,
        scores_run_id=(parent.scores_run_id or parent.run_id)
        if scores is not None and plan.same_scores
        else None,
    )
    new_id, result = select_and_store(
        parent.video_path,
        store,
        options=options,
        on_progress=on_progress,
        parent_run_id=parent.run_id,
        reuse=reuse,
    )
    result.timings_secs["load_cache"] = time.perf_counter() - t0 - result.timings_secs.get("total", 0.0)
    return new_id, result, "cache+scores" if scores is not None else "cache"
