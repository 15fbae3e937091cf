"""The decode cache on disk: memory-mapped pixels, per-array files, and caches of the older layout."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest
from helpers.cli import run_cli

from backend.pipeline import SelectionOptions, run
from backend.runs import load_front, load_scores, open_run, prune_cache, reselect, select_and_store
from backend.store import SessionStore

# Whole runs stored and re-read: the end-to-end tier, not the unit tier (--fast).
pytestmark = [pytest.mark.needs_cvp, pytest.mark.slow]

OPTS = SelectionOptions(num_sampled_frames=48)


def test_cached_pixels_are_a_read_only_map(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, result = select_and_store(h264_clip, store, options=OPTS)
        front = load_front(store.cache_lookup(store.get_run(run_id).cache_key))
    pixels = front.decoded.pixels
    assert type(pixels) is np.ndarray and not pixels.flags.writeable
    assert np.array_equal(pixels, result.decoded.pixels)
    with pytest.raises(ValueError):
        pixels[0, 0, 0, 0] = 1


def _mapped(a: np.ndarray) -> bool:
    """Whether ``a`` is a view of a file map (not a copy read into memory)."""
    while a is not None and not isinstance(a, np.memmap):
        a = a.base if isinstance(a.base, np.ndarray) else None
    return a is not None


def test_opening_a_cached_decode_maps_its_arrays_and_keeps_the_luma_means(h264_clip, tmp_path):
    from backend.runs.decode_cache import cached_scores

    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, result = select_and_store(h264_clip, store, options=OPTS)
        key = store.get_run(run_id).cache_key
        folder = store.cache_lookup(key)
        front = load_front(folder)
        scores = cached_scores(store, key, folder, OPTS, front, None)
    # Every array of the front and the score maps is a read-only map of the cache files.
    for name, a in (
        ("packet_size_bytes", front.info.packet_size_bytes),
        ("frame_indices", front.candidates.frame_indices),
        ("grid 0", front.decoded.grids[0]),
        ("good", front.quality.good),
        ("block_scores", scores.block_scores),
    ):
        assert _mapped(a) and not a.flags.writeable, name
    assert np.array_equal(front.decoded.grids[0], result.decoded.grids[0])
    assert np.array_equal(scores.block_scores, result.scores.block_scores)
    # The luma means came with the decode: the same values, without reading the frames again.
    assert "luma_means" in front.decoded.__dict__
    assert np.array_equal(front.decoded.luma_means, result.decoded.luma_means)
    fresh = dataclasses.replace(front.decoded)
    assert "luma_means" not in fresh.__dict__
    assert np.allclose(fresh.luma_means, front.decoded.luma_means)


def test_a_cache_in_the_older_npz_layout_still_serves_reselect(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, _ = select_and_store(h264_clip, store, options=OPTS)
        folder = store.cache_lookup(store.get_run(run_id).cache_key)
        front = load_front(folder)
        scores = load_scores(folder, OPTS, front.geometry.processed_hw)
        # Rewrite the folder as the first cache format did: arrays.npz, and
        # scores_<key>.npz beside a scores_<key>.json holding the debug dict alone.
        info, dec = front.info, front.decoded
        np.savez(
            folder / "arrays.npz",
            packet_pts_secs=info.packet_pts_secs,
            packet_size_bytes=info.packet_size_bytes,
            packet_is_keyframe=info.packet_is_keyframe,
            frame_indices=front.candidates.frame_indices,
            sampled_frame_indices=front.candidates.sampled_frame_indices,
            bitcost_source=dec.bitcost_source,
            grids=np.stack(dec.grids),
            good=front.quality.good,
        )
        records = json.loads((folder / "records.json").read_text())
        del records["arrays"]
        (folder / "records.json").write_text(json.dumps(records))
        (marker,) = folder.glob("scores_*.json")
        np.savez(
            folder / f"{marker.stem}.npz",
            patch_scores=scores.patch_scores,
            block_scores=scores.block_scores,
            grids=np.stack(scores.grids),
            cap=np.asarray(np.nan if scores.iframe_clip_cap is None else scores.iframe_clip_cap),
        )
        marker.write_text(json.dumps(scores.debug))
        for blob in folder.glob("*.bin"):
            blob.unlink()
        new_id, result, how = reselect(store, run_id, {"images_per_group": 3})
        assert how == "cache+scores"
        again = open_run(store, new_id)
        assert np.array_equal(again.canvases.tokens, result.canvases.tokens)
        assert np.array_equal(again.canvases.images, result.canvases.images)
        _, fresh = select_and_store(h264_clip, store, options=OPTS.replace(images_per_group=3))
        assert np.array_equal(fresh.canvases.tokens, result.canvases.tokens)
        assert np.array_equal(fresh.canvases.images, result.canvases.images)


def test_an_incomplete_cache_is_decoded_again(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, first = select_and_store(h264_clip, store, options=OPTS)
        folder = store.cache_lookup(store.get_run(run_id).cache_key)
        (folder / "arrays.bin").unlink()
        _, result, how = reselect(store, run_id, {"images_per_group": 2})
        assert how == "full"
        assert np.array_equal(result.decoded.pixels, first.decoded.pixels)


def _three_cached_runs(clip, store: SessionStore) -> list[str]:
    # Different sample counts decode different frames: three cache entries of one clip.
    options = [OPTS.replace(num_sampled_frames=n) for n in (48, 40, 32)]
    return [select_and_store(clip, store, options=o)[0] for o in options]


def test_prune_removes_least_recently_used_decodes_first(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        runs = _three_cached_runs(h264_clip, store)
        keys = [store.get_run(r).cache_key for r in runs]
        sizes = {key: size for key, _, size in store.cache_entries()}
        assert set(sizes) == set(keys) and all(size > 0 for size in sizes.values())
        _, _, how = reselect(store, runs[0], {"images_per_group": 2})  # reading it back is a use
        assert how.startswith("cache")
        removed = prune_cache(store, budget_bytes=sizes[keys[0]])
        assert removed == [keys[1], keys[2]]  # the two untouched ones, older first
        assert [key for key, _, _ in store.cache_entries()] == [keys[0]]
        assert store.cache_lookup(keys[1]) is None and not (store.cache_dir / keys[1]).exists()
        assert store.size_bytes()["cache"] <= sizes[keys[0]]
        # The runs stay; an evicted one is decoded again and gives the same selection, whether
        # it is reopened as it is or re-selected with another option.
        _, again, how = reselect(store, runs[1], {"images_per_group": 3})
        assert how == "full"
        fresh = run(h264_clip, options=OPTS.replace(num_sampled_frames=40, images_per_group=3))
        assert np.array_equal(again.canvases.tokens, fresh.canvases.tokens)
        same, reopened, how = reselect(store, runs[1], {})
        assert (same, how) == (runs[1], "reused")
        first = run(h264_clip, options=OPTS.replace(num_sampled_frames=40))
        assert np.array_equal(reopened.canvases.tokens, first.canvases.tokens)


def test_a_run_keeps_its_new_decode_whatever_the_budget(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        first, _ = select_and_store(h264_clip, store, options=OPTS)
        second, _ = select_and_store(
            h264_clip, store, options=OPTS.replace(num_sampled_frames=40), cache_budget_bytes=0
        )
        assert [key for key, _, _ in store.cache_entries()] == [store.get_run(second).cache_key]
        assert store.get_run(first).status == "done"
        with pytest.raises(ValueError, match=r"Invalid cache budget \(-1\)"):
            prune_cache(store, budget_bytes=-1)


def test_cli_prunes_the_cache(h264_clip, tmp_path):
    db = tmp_path / "s.duckdb"
    with SessionStore(db) as store:
        keys = [store.get_run(r).cache_key for r in _three_cached_runs(h264_clip, store)]
    res = run_cli("sessions", "prune-cache", "--max-gb", "0", "--session-db", db, "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out == {"removed": keys, "cache_bytes": 0}


def test_a_reselection_from_memory_counts_as_a_use(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, _ = select_and_store(h264_clip, store, options=OPTS)
        folder = store.cache_lookup(store.get_run(run_id).cache_key)
        memory: dict = {}
        reselect(store, run_id, {"images_per_group": 2}, memory=memory)  # loads the decode into memory
        os.utime(folder, (1_000_000, 1_000_000))
        _, _, how = reselect(store, run_id, {"images_per_group": 3}, memory=memory)
        assert how.startswith("cache") and folder.stat().st_mtime > 1_000_000
