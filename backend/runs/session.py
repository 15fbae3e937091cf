"""Stored runs: run-and-store, the decode cache, and instant re-selection."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from backend import __version__
from backend.errors import CodecLensError, StoreError
from backend.pipeline import (
    FRONT_OPTIONS,
    SCORE_OPTIONS,
    Front,
    ProgressCallback,
    RunResult,
    SelectionOptions,
    run,
)
from backend.records import (
    TOKEN_COLUMNS,
    Candidates,
    DecodedFrames,
    FrameQuality,
    Geometry,
    ReadinessStep,
    RunWarning,
    ScoreMaps,
    VideoInfo,
)
from backend.stages.probe import ProbeConfig, probe
from backend.store import SessionStore
from native import gateway

CACHE_FORMAT = 1
_STEP_COLUMNS = tuple(f.name for f in dataclasses.fields(ReadinessStep))


def content_sha256(path: str | Path) -> str:
    """sha256 of the file's bytes (hex)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_key(content: str, options: SelectionOptions) -> str:
    """Key of a decode: content hash, decoder and version, and every front option."""
    versions = gateway.versions()
    front = {k: getattr(options, k) for k in FRONT_OPTIONS}
    blob = json.dumps(
        {"sha256": content, "decoder": versions, "front": front, "format": CACHE_FORMAT}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _score_key(options: SelectionOptions) -> str:
    blob = json.dumps({k: getattr(options, k) for k in SCORE_OPTIONS}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


# -- run tables --------------------------------------------------------------------------------


def _column(values: list[Any]) -> np.ndarray:
    """A column from Python values, typed as pandas would (text as objects, not fixed-width)."""
    arr = np.array(values)
    return arr.astype(object) if arr.dtype.kind == "U" else arr


def run_columns(result: RunResult, *, score_grids: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """The run's rows for the store, column by column: table → column name → (rows,) array.

    Tables: frames, groups, readiness_steps (when the grouping traced any), tokens and,
    with ``score_grids``, the per-candidate score grids. Missing values are NaN (numeric
    columns) or None (text); the store writes both as NULL.
    """
    info, cand, dec = result.info, result.candidates, result.decoded
    total = info.total_frames
    npk = info.packet_size_bytes.size
    ids = cand.frame_indices
    inside = ids < total
    candidate = np.zeros(total, bool)
    candidate[ids[inside]] = True
    moved_from = np.full(total, np.nan)
    for src, dst in cand.moved:
        if dst < total:
            moved_from[dst] = src
    group_of = np.full(total, np.nan)
    is_anchor = np.zeros(total, bool)
    kept = np.zeros(total, np.int64)
    bad = np.full(total, None, object)
    pict = np.full(total, None, object)
    for row, fid in enumerate(ids.tolist()):  # a repeated frame keeps its last row's values
        if fid < total:
            pict[fid] = dec.pict_types[row]
            bad[fid] = result.quality.reasons[row] or None
    for spec in result.groups.specs:
        gids = ids[spec.start : spec.end]
        group_of[gids[gids < total]] = spec.group_index
    for sel in result.selection.groups:
        is_anchor[sel.frame_indices[0]] = True
        fids = np.asarray(sel.frame_indices)[sel.kept[:, 0]] if sel.kept.size else np.zeros(0, int)
        np.add.at(kept, fids, 1)
    pad = max(0, total - npk)
    frames = {
        "frame_index": np.arange(total),
        "pts_secs": np.concatenate([info.packet_pts_secs, np.full(pad, np.nan)])[:total],
        "pict_type": pict,
        "size_bytes": np.concatenate([info.packet_size_bytes, np.full(pad, -1)])[:total],
        "is_keyframe": np.concatenate([info.packet_is_keyframe, np.zeros(pad, bool)])[:total],
        "candidate": candidate,
        "moved_from": moved_from,
        "group_index": group_of,
        "is_anchor": is_anchor,
        "kept_blocks": kept,
        "bad_reason": bad,
    }
    sel_by = {s.group_index: s for s in result.selection.groups}
    specs = result.groups.specs
    groups = {
        "group_index": np.array([s.group_index for s in specs], np.int64),
        "start": np.array([s.start for s in specs], np.int64),
        "end": np.array([s.end for s in specs], np.int64),
        "frame_count": np.array([s.frame_count for s in specs], np.int64),
        "stop_reason": np.array([s.stop_reason for s in specs], object),
        "threshold": np.full(len(specs), result.groups.threshold, np.float64),
        "anchor_frame_index": np.array(
            [sel_by[s.group_index].frame_indices[0] if s.group_index in sel_by else np.nan for s in specs],
            np.float64,
        ),
        "kept_blocks": np.array(
            [sel_by[s.group_index].kept.shape[0] if s.group_index in sel_by else 0 for s in specs], np.int64
        ),
        "skipped": np.array([s.group_index not in sel_by for s in specs], bool),
        "readiness_json": np.array([json.dumps(s.readiness) for s in specs], object),
    }
    tok = np.ascontiguousarray(result.canvases.tokens.T)  # one contiguous row per column
    tokens = {name: tok[i] for i, name in enumerate(TOKEN_COLUMNS[:-1])}
    tokens["valid"] = tok[7].astype(bool)
    out = {"frames": frames, "groups": groups}
    trace = result.groups.trace
    if trace:
        out["readiness_steps"] = {name: _column([getattr(t, name) for t in trace]) for name in _STEP_COLUMNS}
    out["tokens"] = tokens
    if score_grids:
        grids = result.scores.grids
        out["score_grids"] = {
            "candidate_row": np.arange(len(grids)),
            "frame_index": ids,
            "grid_rows": np.array([g.shape[0] for g in grids], np.int64),
            "grid_cols": np.array([g.shape[1] for g in grids], np.int64),
            "grid": np.array([np.ascontiguousarray(g, np.float32).tobytes() for g in grids], object),
        }
    return out


def _summary(result: RunResult, key: str | None, scores_run_id: str | None) -> dict[str, Any]:
    return {
        "scores_run_id": scores_run_id,
        "threshold": result.groups.threshold,
        "timings": result.timings_secs,
        "warnings": [w.as_dict() for w in result.warnings],
        "processed_hw": result.geometry.processed_hw,
        "patch": result.geometry.patch,
        "block_size": result.geometry.block_size,
        "cache_key": key,
    }


# -- decode cache ------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, RunWarning):
        return value.as_dict()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


DEFAULT_CACHE_BUDGET_BYTES = 10 * 2**30
"""Decode-cache size above which the least recently used decodes are removed (10 GiB)."""


def prune_cache(store: SessionStore, *, budget_bytes: int, keep: Sequence[str] = ()) -> list[str]:
    """Remove least recently used cached decodes until the cache fits ``budget_bytes``.

    A decode's last use is its folder's modification time (set when it is written and each
    time it is read back). Runs stay in the database; only their cached pixels and grids go,
    so re-selecting one of them decodes the video again.

    Parameters
    ----------
    budget_bytes : size the cache may keep (≥ 0).
    keep : cache keys never removed (e.g. the decode just written).

    Returns
    -------
    The removed cache keys, oldest first.
    """
    if budget_bytes < 0:
        raise ValueError(f"Invalid cache budget ({budget_bytes}). Supported values are ≥ 0 bytes.")
    entries = []
    for key, folder, size in store.cache_entries():
        if not folder.is_dir():
            store.cache_forget(key)  # removed by hand: nothing to keep
            continue
        entries.append((folder.stat().st_mtime, key, folder, size))
    total = sum(size for *_, size in entries)
    removed = []
    for _, key, folder, size in sorted(entries):
        if total <= budget_bytes:
            break
        if key in keep:
            continue
        store.cache_forget(key)  # unregister first: a crash leaves an orphan folder, never a dangling row
        shutil.rmtree(folder, ignore_errors=True)
        total -= size
        removed.append(key)
    return removed


def save_front(store: SessionStore, key: str, content: str, result: RunResult) -> Path:
    """Write the front records of a run to ``<db>.cache/<key>/`` and register them."""
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    final = store.cache_dir / key
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=store.cache_dir))
    info, cand, geo, dec, qual = (
        result.info,
        result.candidates,
        result.geometry,
        result.decoded,
        result.quality,
    )
    np.save(tmp / "pixels.npy", dec.pixels)
    arrays = _save_arrays(
        tmp,
        "arrays",
        {
            "packet_pts_secs": info.packet_pts_secs,
            "packet_size_bytes": info.packet_size_bytes,
            "packet_is_keyframe": info.packet_is_keyframe,
            "frame_indices": cand.frame_indices,
            "sampled_frame_indices": cand.sampled_frame_indices,
            "bitcost_source": dec.bitcost_source,
            "grids": np.stack([np.asarray(g, np.float32) for g in dec.grids]),
            "good": qual.good,
        },
    )
    scalars = {
        "info": {
            f.name: getattr(info, f.name)
            for f in dataclasses.fields(info)
            if not f.name.startswith("packet_")
        },
        "candidates": {
            "keyframe_indices": cand.keyframe_indices,
            "moved": cand.moved,
            "debug": cand.debug,
            "warnings": cand.warnings,
        },
        "geometry": dataclasses.asdict(geo),
        "decoded": {
            "grid_key": dec.grid_key,
            "pict_types": dec.pict_types,
            "pixel_source": dec.pixel_source,
            "read_mode": dec.read_mode,
            "warnings": dec.warnings,
            "grid_dtype": str(dec.grids[0].dtype),
        },
        "quality": {"reasons": qual.reasons},
        "arrays": arrays,
    }
    (tmp / "records.json").write_text(json.dumps(scalars, default=_json_default))
    _save_scores(tmp, result)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    store.cache_register(
        key,
        final,
        {
            "content_sha256": content,
            "decoder": dec.pixel_source,
            "decoder_version": json.dumps(gateway.versions()),
            "geometry": dataclasses.asdict(geo),
            "signal_kind": dec.grid_key,
        },
    )
    return final


_ALIGN = 64  # bytes: every array in a blob starts aligned for any dtype


def _save_arrays(folder: Path, prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Write the arrays back to back into ``<prefix>.bin``; return their index for the JSON beside.

    Loading is one read plus a view per array, several times faster than an ``.npz`` (a
    zip lookup, CRC and parsed header per member) or one ``.npy`` per array.
    """
    index: dict[str, Any] = {}
    offset = 0
    tmp = folder / f".{prefix}.bin.tmp"
    with tmp.open("wb") as fh:
        for name, value in arrays.items():
            arr = np.asarray(value, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
            pad = -offset % _ALIGN
            fh.write(bytes(pad))
            offset += pad
            index[name] = {"offset": offset, "dtype": arr.dtype.str, "shape": list(arr.shape)}
            fh.write(arr.tobytes())
            offset += arr.nbytes
    tmp.replace(folder / f"{prefix}.bin")
    return index


def _load_arrays(folder: Path, prefix: str, index: dict[str, Any] | None) -> Mapping[str, np.ndarray]:
    """The arrays written by :func:`_save_arrays` (or, without an index, an older ``.npz``)."""
    if index is None:
        return np.load(folder / f"{prefix}.npz")
    buf = np.fromfile(folder / f"{prefix}.bin", dtype=np.uint8)
    out = {}
    for name, entry in index.items():
        dtype = np.dtype(entry["dtype"])
        size = int(np.prod(entry["shape"], dtype=np.int64)) * dtype.itemsize
        out[name] = buf[entry["offset"] : entry["offset"] + size].view(dtype).reshape(entry["shape"])
    return out


def _save_scores(folder: Path, result: RunResult) -> None:
    """Score maps as ``scores_<score key>.bin``; the JSON beside, written last, marks them complete."""
    sc = result.scores
    prefix = f"scores_{_score_key(result.options)}"
    arrays = _save_arrays(
        folder,
        prefix,
        {
            "patch_scores": sc.patch_scores,
            "block_scores": sc.block_scores,
            "grids": np.stack(sc.grids),
            "cap": np.asarray(np.nan if sc.iframe_clip_cap is None else sc.iframe_clip_cap),
        },
    )
    tmp = folder / f".{prefix}.json.tmp"
    tmp.write_text(json.dumps({"debug": sc.debug, "arrays": arrays}, default=_json_default))
    tmp.replace(folder / f"{prefix}.json")


def _warnings(items: list[dict[str, str]]) -> tuple[RunWarning, ...]:
    return tuple(RunWarning(w["code"], w["message"]) for w in items)


def load_front(folder: Path) -> Front:
    """Rebuild the front records from a cache folder.

    Pixels (about 444 MB per 1000 frames) are memory-mapped, read-only: packing reads
    only the anchors and kept blocks, views only the frames they show, and a front kept
    for reuse costs page cache rather than process memory.
    """
    rec = json.loads((folder / "records.json").read_text())
    arr = _load_arrays(folder, "arrays", rec.get("arrays"))
    # A plain ndarray view of the map, so callers never see the np.memmap subclass.
    pixels = np.asarray(np.load(folder / "pixels.npy", mmap_mode="r"))
    i = rec["info"]
    info = VideoInfo(
        **{k: v for k, v in i.items() if k != "stss_keyframes"},
        stss_keyframes=None if i["stss_keyframes"] is None else tuple(i["stss_keyframes"]),
        packet_pts_secs=arr["packet_pts_secs"],
        packet_size_bytes=arr["packet_size_bytes"],
        packet_is_keyframe=arr["packet_is_keyframe"],
    )
    c = rec["candidates"]
    candidates = Candidates(
        frame_indices=arr["frame_indices"],
        sampled_frame_indices=arr["sampled_frame_indices"],
        keyframe_indices=tuple(c["keyframe_indices"]),
        moved=tuple(tuple(m) for m in c["moved"]),
        debug=c["debug"],
        warnings=_warnings(c["warnings"]),
    )
    g = rec["geometry"]
    geometry = Geometry(
        orig_hw=tuple(g["orig_hw"]),
        prepared_hw=tuple(g["prepared_hw"]),
        processed_hw=tuple(g["processed_hw"]),
        patch=g["patch"],
        block_size=g["block_size"],
    )
    d = rec["decoded"]
    grids = arr["grids"].astype(d["grid_dtype"])
    decoded = DecodedFrames(
        frame_indices=arr["frame_indices"],
        pixels=pixels,
        grids=tuple(grids),
        grid_key=d["grid_key"],
        pict_types=tuple(d["pict_types"]),
        bitcost_source=arr["bitcost_source"],
        pixel_source=d["pixel_source"],
        read_mode=d["read_mode"],
        warnings=_warnings(d["warnings"]),
    )
    quality = FrameQuality(good=arr["good"], reasons=tuple(rec["quality"]["reasons"]))
    return Front(info=info, candidates=candidates, geometry=geometry, decoded=decoded, quality=quality)


def load_scores(folder: Path, options: SelectionOptions, processed_hw: tuple[int, int]) -> ScoreMaps | None:
    """Cached score maps for these score options, or None."""
    prefix = f"scores_{_score_key(options)}"
    marker = folder / f"{prefix}.json"
    if not marker.is_file():
        return None
    meta = json.loads(marker.read_text())
    if (folder / f"{prefix}.bin").is_file():
        debug, arr = meta["debug"], _load_arrays(folder, prefix, meta["arrays"])
    elif (folder / f"{prefix}.npz").is_file():  # an older cache: the JSON is the debug alone
        debug, arr = meta, _load_arrays(folder, prefix, None)
    else:
        return None
    cap = float(arr["cap"])
    return ScoreMaps(
        grids=tuple(arr["grids"]),
        processed_hw=processed_hw,
        patch_scores=arr["patch_scores"],
        block_scores=arr["block_scores"],
        iframe_clip_cap=None if np.isnan(cap) else cap,
        debug=debug,
    )


# -- run and store -----------------------------------------------------------------------------


def select_and_store(
    video: str | Path,
    store: SessionStore,
    *,
    options: SelectionOptions,
    on_progress: ProgressCallback | None = None,
    parent_run_id: str | None = None,
    front: Front | None = None,
    scores: ScoreMaps | None = None,
    content: str | None = None,
    key: str | None = None,
    scores_run_id: str | None = None,
    session_id: str | None = None,
    cache_budget_bytes: int = DEFAULT_CACHE_BUDGET_BYTES,
) -> tuple[str, RunResult]:
    """Run the pipeline, store every table and the decode cache; a failure marks the run failed.

    A re-selection passes the cached ``front`` with its cache ``key`` and ``session_id``;
    the video is then neither hashed nor read. After a new decode is cached, older ones
    are removed (least recently used first) while the cache exceeds ``cache_budget_bytes``.

    Returns
    -------
    (run_id, RunResult).
    """
    # Probed first: its input checks name a missing or unreadable file before it is hashed.
    info = front.info if front is not None else probe(video, config=ProbeConfig(profile=options.profile))
    if content is None and (front is None or key is None or session_id is None):
        content = content_sha256(video)
    if session_id is None:
        assert content is not None
        session_id = store.ensure_session(info, content)
    run_kwargs = {
        "profile": options.profile,
        "config": options.as_dict(),
        "versions": {"codec_lens": __version__, **gateway.versions()},
        "parent_run_id": parent_run_id,
    }
    if key is None:
        assert content is not None
        key = cache_key(content, options)
    # A full run is visible as ``running`` while it decodes; a re-selection from the
    # cache takes milliseconds, so it is written in one transaction when it is done.
    run_id = store.begin_run(session_id, **run_kwargs) if front is None else None
    try:
        result = run(video, options=options, on_progress=on_progress, front=front, scores=scores, info=info)
        # Score grids reused from scores_run_id are stored there already.
        tables = run_columns(result, score_grids=scores_run_id is None)
        summary = _summary(result, key, scores_run_id)
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
            _save_scores(folder, result)
    return run_id, result


def _cached_front(
    store: SessionStore, key: str, memory: dict[str, Any] | None
) -> tuple[Front | None, Path | None]:
    """The decode cached under ``key`` (from ``memory`` first) and its cache folder, if still on disk."""
    if memory is not None and key in memory:
        front, folder = memory[key]  # remembered with its folder: no store lookup
        if not folder.is_dir():
            return front, None  # pruned since: the decode in memory still serves
    else:
        folder = store.cache_lookup(key)
        if folder is None:
            return None, None
        try:
            front = load_front(folder)
        except FileNotFoundError:
            return None, None  # an incomplete (or unreadable older) cache: decode again
        if memory is not None:
            memory.clear()  # one decoded video at a time
            memory[key] = (front, folder)
    os.utime(folder)  # a use of the cached decode: prune_cache removes the least recent first
    return front, folder


def _cached_scores(
    store: SessionStore,
    key: str,
    folder: Path | None,
    options: SelectionOptions,
    front: Front,
    memory: dict[str, Any] | None,
) -> ScoreMaps | None:
    """Score maps cached for these score options (from ``memory`` first), or None."""
    score_key = f"{key}/scores/{_score_key(options)}"
    scores = memory.get(score_key) if memory is not None else None
    if scores is not None:
        return scores
    folder = folder or store.cache_lookup(key)
    if folder is None:
        return None
    scores = load_scores(folder, options, front.geometry.processed_hw)
    if memory is not None and scores is not None:
        memory[score_key] = scores
    return scores


def reselect(
    store: SessionStore,
    run_id: str,
    changes: dict[str, Any],
    *,
    on_progress: ProgressCallback | None = None,
    memory: dict[str, Any] | None = None,
) -> tuple[str, RunResult, str]:
    """Re-run a stored run with some options changed, reusing its cached decode when possible.

    ``memory`` (cache key → (Front, cache folder)), when given, keeps decoded fronts between calls
    (the app passes one per session) so repeated re-selections skip the disk read.

    Returns
    -------
    (new run_id, RunResult, how: ``cache`` / ``cache+scores`` / ``full``).
    """
    parent = store.get_run(run_id)
    if parent.status != "done":
        raise StoreError(f"run {run_id} is {parent.status}, not done", path=store.path, stage="reselect")
    fields = {f.name for f in dataclasses.fields(SelectionOptions)}
    base = {k: v for k, v in parent.config.items() if k in fields}
    options = SelectionOptions(**base).replace(**changes)
    video = parent.video_path
    front_same = all(getattr(options, k) == base.get(k) for k in FRONT_OPTIONS)
    t0 = time.perf_counter()
    front, folder = (
        _cached_front(store, parent.cache_key, memory) if parent.cache_key and front_same else (None, None)
    )
    if front is None:
        new_id, result = select_and_store(
            video, store, options=options, on_progress=on_progress, parent_run_id=run_id
        )
        return new_id, result, "full"
    assert parent.cache_key is not None
    scores = _cached_scores(store, parent.cache_key, folder, options, front, memory)
    same_scores = scores is not None and all(getattr(options, k) == base.get(k) for k in SCORE_OPTIONS)
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


def open_run(store: SessionStore, run_id: str, *, memory: dict[str, Any] | None = None) -> RunResult:
    """Rebuild a stored, finished run's records for viewing, without storing anything.

    The decode comes from the run's cache (or ``memory``, as in :func:`reselect`); grouping,
    selection and packing re-run on it with the stored options, which reproduces the run
    exactly because those stages are deterministic. Without a cache the video is decoded again.

    Returns
    -------
    RunResult of the run.

    Raises
    ------
    StoreError if the run is unknown or not done; the pipeline's errors if the video changed.
    """
    row = store.get_run(run_id)
    if row.status != "done":
        raise StoreError(f"run {run_id} is {row.status}, not done", path=store.path, stage="open")
    fields = {f.name for f in dataclasses.fields(SelectionOptions)}
    options = SelectionOptions(**{k: v for k, v in row.config.items() if k in fields})
    front, folder = _cached_front(store, row.cache_key, memory) if row.cache_key else (None, None)
    if front is None:
        return run(row.video_path, options=options)
    assert row.cache_key is not None
    scores = _cached_scores(store, row.cache_key, folder, options, front, memory)
    return run(row.video_path, options=options, front=front, scores=scores, info=front.info)
