"""The decode cache on disk: memory-mapped pixels, per-array files, and caches of the older layout."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import requires_cvp

from backend.pipeline import SelectionOptions
from backend.sessions import load_front, open_run, reselect, select_and_store
from backend.store import SessionStore

pytestmark = requires_cvp

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


def test_a_cache_in_the_older_npz_layout_still_serves_reselect(h264_clip, tmp_path):
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, _ = select_and_store(h264_clip, store, options=OPTS)
        folder = store.cache_lookup(store.get_run(run_id).cache_key)
        # Rewrite the folder as the first cache format wrote it: arrays.npz and
        # scores_<key>.npz beside scores_<key>.json.
        front_files = sorted(folder.glob("arrays_*.npy"))
        np.savez(folder / "arrays.npz", **{p.stem.removeprefix("arrays_"): np.load(p) for p in front_files})
        (marker,) = folder.glob("scores_*.json")
        prefix = marker.stem
        score_files = sorted(folder.glob(f"{prefix}_*.npy"))
        np.savez(
            folder / f"{prefix}.npz", **{p.stem.removeprefix(f"{prefix}_"): np.load(p) for p in score_files}
        )
        for p in front_files + score_files:
            p.unlink()
        new_id, result, how = reselect(store, run_id, {"images_per_group": 3})
        assert how == "cache+scores"
        again = open_run(store, new_id)
        assert np.array_equal(again.canvases.tokens, result.canvases.tokens)
        assert np.array_equal(again.canvases.images, result.canvases.images)
        _, fresh = select_and_store(h264_clip, store, options=OPTS.replace(images_per_group=3))
        assert np.array_equal(fresh.canvases.tokens, result.canvases.tokens)
        assert np.array_equal(fresh.canvases.images, result.canvases.images)
