"""The decode cache on disk: memory-mapped pixels, per-array files, and caches of the older layout."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import requires_cvp

from backend.pipeline import SelectionOptions
from backend.sessions import load_front, load_scores, open_run, reselect, select_and_store
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
