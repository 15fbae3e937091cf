"""Run-and-store: hash the video, run the pipeline, store its rows and decode; reopen a stored run."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import native
from backend import __version__
from backend.errors import CodecLensError, StoreError
from backend.pipeline.recipe import (
    FRONT_RECORDS,
    Front,
    ProgressCallback,
    RunResult,
    SelectorOptions,
    assemble,
)
from backend.records import ScoreMaps
from backend.runs.decode_cache import (
    DEFAULT_CACHE_BUDGET_BYTES,
    cache_key,
    cached_front,
    cached_scores,
    load_back,
    prune_cache,
    save_front,
    save_scores,
)
from backend.runs.plan import front_is_cached
from backend.selectors import options_for, select, selector_of, spec_of
from backend.selectors.fallback import FallbackConfig, select_with_fallback
from backend.stages.probe import ProbeConfig, probe
from backend.store import SessionStore, run_columns, run_summary
from backend.store.runs import RunRow


def content_sha256(path: str | Path) -> str:
    """sha256 of the file's bytes (hex)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class CachedDecode:
    """Where a re-selection starts: the parent run's cached front, its cache key and its video's session."""

    front: Front
    key: str
    session_id: str
    scores: ScoreMaps | None = None
    """The parent's cached score maps, when the score options agree."""
    scores_run_id: str | None = None
    """The run whose stored score grids these are (they are not stored again)."""


def run_versions() -> dict[str, Any]:
    """The versions a run is stored with: codec-lens and the decoders behind ``native``."""
    return {"codec_lens": __version__, **native.versions()}


def select_and_store(
    video: str | Path,
    store: SessionStore,
    *,
    options: SelectorOptions,
    on_progress: ProgressCallback | None = None,
    parent_run_id: str | None = None,
    reuse: CachedDecode | None = None,
    content: str | None = None,
    cache_budget_bytes: int = DEFAULT_CACHE_BUDGET_BYTES,
    fallback: FallbackConfig | None = None,
) -> tuple[str, RunResult]:
    """Run the selector ``options`` belong to, store every table and the decode cache; a failure
    marks the run failed.

    ``fallback``: a declared fallback (backend.selectors.fallback) for a new run: when another
    selector or option set runs instead, the row holds the one that ran (so it reopens as it ran)
    and ``selector_requested`` / ``fallback_reason`` say what was asked for and why.

    ``options``: the options of any selector of ``backend.selectors.SELECTORS`` (``SelectionOptions``
    for cvp). A re-selection passes the cached decode as ``reuse``; the video is then neither hashed
    nor read. ``content``: the video's sha256 when the caller has it. After a new decode is cached,
    older ones are removed (least recently used first) while the cache exceeds ``cache_budget_bytes``.

    Returns
    -------
    (run_id, RunResult).
    """
    # Probed first: its input checks name a missing or unreadable file before it is hashed.
    selector = selector_of(options)
    front = reuse.front if reuse is not None else None
    scores = reuse.scores if reuse is not None else None
    # cvp's parity profile probes as cvp does (frame count estimated from the duration); the other
    # selectors reproduce other readers and count packets.
    probe_profile = options.profile if selector == "cvp" else "clean"
    info = front.info if front is not None else probe(video, config=ProbeConfig(profile=probe_profile))
    if content is None and reuse is None:
        content = content_sha256(video)
    session_id = reuse.session_id if reuse is not None else None
    if session_id is None:
        assert content is not None
        session_id = store.ensure_session(info, content)
    run_kwargs = {
        "profile": options.profile,
        "config": options.as_dict(),
        "versions": run_versions(),
        "parent_run_id": parent_run_id,
        "selector": selector,
    }
    if reuse is not None:
        key = reuse.key
    else:
        assert content is not None
        key = cache_key(content, options)
    # A full run is visible as ``running`` while it decodes; a re-selection from the
    # cache takes milliseconds, so it is written in one transaction when it is done.
    run_id = store.begin_run(session_id, **run_kwargs) if front is None else None
    try:
        if fallback is not None and reuse is None:
            result = select_with_fallback(
                video, options=options, config=fallback, on_progress=on_progress, info=info
            )
            if result.options is not options:  # the cache holds the decode of what ran
                assert content is not None
                key = cache_key(content, result.options)
        else:
            result = select(
                video, options=options, on_progress=on_progress, front=front, scores=scores, info=info
            )
        scores_run_id = reuse.scores_run_id if reuse is not None else None
        # Score grids reused from scores_run_id are stored there already.
        tables = run_columns(result, score_grids=scores_run_id is None)
        summary = run_summary(result, key, scores_run_id)
        if run_id is None:
            run_id = store.insert_finished_run(session_id, tables=tables, summary=summary, **run_kwargs)
        else:
            store.finish_run(run_id, tables, summary)
    except (CodecLensError, ValueError, OSError, RuntimeError) as exc:
        store.fail_run(run_id or store.begin_run(session_id, **run_kwargs), str(exc))
        raise
    except BaseException:
        store.fail_run(run_id or store.begin_run(session_id, **run_kwargs), "interrupted")
        raise
    if front is None:
        assert content is not None
        save_front(store, key, content, result)
        prune_cache(store, budget_bytes=cache_budget_bytes, keep=[key])
    elif scores is None:
        folder = store.cache_lookup(key)
        if folder is not None:
            save_scores(folder, result)
    return run_id, result


def decode_is_cached(store: SessionStore, run_id: str, *, memory: dict[str, Any] | None = None) -> bool:
    """Whether :func:`open_run` can rebuild ``run_id`` from its decode cache (or ``memory``),
    without decoding the video; False for an unknown run too (open_run then says why)."""
    try:
        key = store.get_run(run_id).cache_key
    except StoreError:
        return False
    return front_is_cached(store, key, memory)


def open_run(
    store: SessionStore, run_id: str, *, memory: dict[str, Any] | None = None, row: RunRow | None = None
) -> RunResult:
    """Rebuild a stored, finished run's records for viewing.

    The decode comes from the run's cache (or ``memory``, as in :func:`reselect`); grouping,
    selection and packing re-run on it with the stored options, which reproduces the run
    exactly because those stages are deterministic. Without a cache (evicted) the video is
    decoded again and the decode cached anew under the run's key, so the next open is cheap.

    Returns
    -------
    RunResult of the run.

    Raises
    ------
    StoreError if the run is unknown or not done; the pipeline's errors if the video changed.
    ``row``: the run's store row, when the caller has just read it (one read fewer).
    """
    if row is None or row.run_id != run_id:
        row = store.get_run(run_id)
    if row.status != "done":
        raise StoreError(f"run {run_id} is {row.status}, not done", path=store.path, stage="open")
    result = _rebuilt(store, row, memory)
    # The row holds what ran; a declared fallback's record says what was asked for.
    return result if row.fallback is None else dataclasses.replace(result, fallback=row.fallback)


def _rebuilt(store: SessionStore, row: RunRow, memory: dict[str, Any] | None) -> RunResult:
    """The records of a stored, finished run: from its decode cache, else decoded again."""
    run_id = row.run_id
    options = options_for(row.selector, row.config)
    front, folder = cached_front(store, row.cache_key, memory) if row.cache_key else (None, None)
    back = load_back(folder) if folder is not None and not spec_of(options).resumable else None
    if front is None or (not spec_of(options).resumable and back is None):
        result = select(row.video_path, options=options)
        if row.cache_key:
            save_front(store, row.cache_key, content_sha256(row.video_path), result)
        return result
    assert row.cache_key is not None
    scores = cached_scores(store, row.cache_key, folder, options, front, memory)
    if back is not None:
        if scores is None:
            raise StoreError(f"run {run_id}'s cached score maps are missing", path=store.path, stage="open")
        groups, selection, canvases, warnings, timings = back
        records = {name: getattr(front, name) for name in FRONT_RECORDS}
        records |= {"scores": scores, "groups": groups, "selection": selection, "canvases": canvases}
        return assemble(options, records, warnings, dict(timings))
    return select(row.video_path, options=options, front=front, scores=scores, info=front.info)
