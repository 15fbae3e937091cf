"""The decode cache: fronts and score maps in files beside the database, pruned least recently used first."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import native
from backend.pipeline import Front, RunResult
from backend.records import (
    Candidates,
    DecodedFrames,
    FrameQuality,
    Geometry,
    RunWarning,
    ScoreMaps,
    VideoInfo,
)
from backend.selectors import spec_of
from backend.store import SessionStore

CACHE_FORMAT = 1
_BACK = "back.pkl"  # the later records of a selector that cannot resume from its front


def cache_key(content: str, options: Any) -> str:
    """Key of a decode: content hash, decoder and version, the selector and every front option."""
    versions = native.versions()
    spec = spec_of(options)
    front = {k: getattr(options, k) for k in spec.cache_options()}
    key: dict[str, Any] = {"sha256": content, "decoder": versions, "front": front, "format": CACHE_FORMAT}
    if spec.name != "cvp":  # cvp's keys predate selectors and stay as they were
        key["selector"] = spec.name
    blob = json.dumps(key, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _score_key(options: Any) -> str:
    blob = json.dumps({k: getattr(options, k) for k in spec_of(options).score_options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


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
            # In the decoder's own dtype (older caches hold float32; both load as grid_dtype).
            "grids": np.stack([np.asarray(g, dec.grids[0].dtype) for g in dec.grids]),
            "good": qual.good,
            # From the pixels in memory now, so a re-selection's views never page in every frame.
            "luma_means": dec.luma_means,
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
    save_scores(tmp, result)
    if not spec_of(result.options).resumable:
        # Nothing re-runs the later stages of such a selector from its front: keep their records.
        back = (result.groups, result.selection, result.canvases, result.warnings, result.timings_secs)
        with (tmp / _BACK).open("wb") as fh:
            pickle.dump(back, fh, protocol=pickle.HIGHEST_PROTOCOL)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    store.cache_register(
        key,
        final,
        {
            "content_sha256": content,
            "decoder": dec.pixel_source,
            "decoder_version": json.dumps(native.versions()),
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
    """The arrays written by :func:`_save_arrays` (or, without an index, an older ``.npz``),
    memory-mapped read-only: opening a cached decode reads only the pages its callers touch."""
    if index is None:
        return np.load(folder / f"{prefix}.npz")
    path = folder / f"{prefix}.bin"
    if path.stat().st_size == 0:
        return {name: np.zeros(entry["shape"], np.dtype(entry["dtype"])) for name, entry in index.items()}
    # A plain ndarray view of the map, so callers never see the np.memmap subclass.
    buf = np.asarray(np.memmap(path, dtype=np.uint8, mode="r"))
    out = {}
    for name, entry in index.items():
        dtype = np.dtype(entry["dtype"])
        size = int(np.prod(entry["shape"], dtype=np.int64)) * dtype.itemsize
        out[name] = buf[entry["offset"] : entry["offset"] + size].view(dtype).reshape(entry["shape"])
    return out


def save_scores(folder: Path, result: RunResult) -> None:
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
        **{k: v for k, v in i.items() if k not in ("stss_keyframes", "sample_aspect_ratio")},
        stss_keyframes=None if i["stss_keyframes"] is None else tuple(i["stss_keyframes"]),
        sample_aspect_ratio=tuple(i.get("sample_aspect_ratio") or (1, 1)),
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
    grids = arr["grids"].astype(d["grid_dtype"], copy=False)
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
    if "luma_means" in arr:
        # What DecodedFrames.luma_means would work out from the pixels (a cached_property keeps
        # its value in the instance's __dict__).
        decoded.__dict__["luma_means"] = arr["luma_means"]
    quality = FrameQuality(good=arr["good"], reasons=tuple(rec["quality"]["reasons"]))
    return Front(info=info, candidates=candidates, geometry=geometry, decoded=decoded, quality=quality)


def load_back(folder: Path) -> tuple[Any, ...] | None:
    """(groups, selection, canvases, warnings, timings) cached for a selector that cannot resume, or None."""
    path = folder / _BACK
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        return tuple(pickle.load(fh))  # our own file, written by save_front


def load_scores(folder: Path, options: Any, processed_hw: tuple[int, int]) -> ScoreMaps | None:
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


def cached_front(
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


def cached_scores(
    store: SessionStore,
    key: str,
    folder: Path | None,
    options: Any,
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
