"""Re-selection: re-run a stored run with changed options, reusing its cached decode and score maps."""

from __future__ import annotations

import time
from typing import Any

from backend.errors import StoreError
from backend.pipeline import ProgressCallback, RunResult
from backend.runs.decode_cache import cached_front, cached_scores
from backend.runs.store_run import select_and_store
from backend.selectors import SELECTORS, check_options, options_for
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
    (new run_id, RunResult, how: ``cache`` / ``cache+scores`` / ``full``).
    """
    if parent is None or parent.run_id != run_id:
        parent = store.get_run(run_id)
    if parent.status != "done":
        raise StoreError(f"run {run_id} is {parent.status}, not done", path=store.path, stage="reselect")
    target = selector or parent.selector
    check_options(target, changes)
    spec = SELECTORS.lookup(target)
    before = options_for(target, parent.config if target == parent.selector else {})
    options = before.replace(**changes)
    video = parent.video_path
    front_same = (
        target == parent.selector
        and spec.resumable
        and all(getattr(options, k) == getattr(before, k) for k in spec.front_options)
    )
    t0 = time.perf_counter()
    front, folder = (
        cached_front(store, parent.cache_key, memory) if parent.cache_key and front_same else (None, None)
    )
    if front is None:
        new_id, result = select_and_store(
            video, store, options=options, on_progress=on_progress, parent_run_id=run_id
        )
        return new_id, result, "full"
    assert parent.cache_key is not None
    scores = cached_scores(store, parent.cache_key, folder, options, front, memory)
    same_scores = scores is not None and all(
        getattr(options, k) == getattr(before, k) for k in spec.score_options
    )
    new_id, result = select_and_store(
        video,
        store,
        options=options,
        on_progress=on_progress,
        parent_run_id=run_id,
        front=front,
        scores=scores,
        key=parent.cache_key,
        session_id=parent.session_id,
        scores_run_id=(parent.scores_run_id or parent.run_id) if same_scores else None,
    )
    result.timings_secs["load_cache"] = time.perf_counter() - t0 - result.timings_secs.get("total", 0.0)
    return new_id, result, "cache+scores" if scores is not None else "cache"
