"""Canvases packed on demand: one canvas packs alone, every canvas equals the eager packing, and a
re-selection from the cache packs nothing until its pixels are asked for."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest

from backend.pipeline import SelectionOptions
from backend.records import Canvases, CanvasPixels
from backend.runs import reselect, select_and_store
from backend.selectors import options_for, select
from backend.store import SessionStore
from tests.helpers.paths import SAMPLE_VIDEO


def _digest(canvases: Canvases) -> str:
    h = hashlib.sha256()
    for part in (canvases.images, canvases.tokens, canvases.canvas_group_index):
        h.update(np.ascontiguousarray(part).tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A cvp run (block-raster packer), a llava-ov2 run (quota packer) of the sample clip."""
    cvp = select(SAMPLE_VIDEO, options=SelectionOptions(num_sampled_frames=48))
    llava = select(SAMPLE_VIDEO, options=options_for("llava-ov2", {"target_canvas": 8}))
    return {"cvp": cvp, "llava-ov2": llava}


@pytest.mark.parametrize("name", ["cvp", "llava-ov2"])
def test_each_canvas_alone_equals_the_whole_packing(runs: dict[str, object], name: str) -> None:
    result = runs[name]
    canvases = result.canvases  # type: ignore[attr-defined]
    pixels = canvases.pixels
    assert not pixels.packed, "a selection packs no pixels until they are asked for"
    shape = pixels.shape
    assert canvases.count == shape[0] > 2 and shape[3] == 3
    alone = [canvases.image(c).copy() for c in range(canvases.count)]
    assert not pixels.packed, "one canvas at a time never packs them all"
    whole = canvases.images
    assert pixels.packed and whole.shape == shape and whole.dtype == np.uint8
    for c, image in enumerate(alone):
        assert np.array_equal(image, whole[c]), f"canvas {c} packed alone differs"
    assert canvases.images is whole  # packed once
    # Anchors are frames, kept blocks are not all black: the packing really copied pixels.
    assert whole[1:].any()
    with pytest.raises(ValueError, match=r"Invalid canvas_index \(-1\)"):
        canvases.image(-1)


def test_a_pickled_run_carries_its_pixels_not_a_recipe(runs: dict[str, object]) -> None:
    canvases = runs["cvp"].canvases  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(canvases))
    assert type(back.pixels) is CanvasPixels and back.pixels.packed
    assert _digest(back) == _digest(canvases)


def test_held_images_and_replace_keep_working(runs: dict[str, object]) -> None:
    import dataclasses

    canvases = runs["cvp"].canvases  # type: ignore[attr-defined]
    held = Canvases(
        images=canvases.images.copy(), tokens=canvases.tokens, canvas_group_index=canvases.canvas_group_index
    )
    assert held.pixels.packed and _digest(held) == _digest(canvases)
    black = dataclasses.replace(canvases, images=np.zeros_like(canvases.images))
    assert not black.images.any() and np.array_equal(black.tokens, canvases.tokens)


def test_reselection_from_the_cache_is_lazy_and_equals_a_full_run(tmp_path: Path) -> None:
    options = SelectionOptions(num_sampled_frames=48)
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, _ = select_and_store(SAMPLE_VIDEO, store, options=options)
        memory: dict[str, object] = {}
        _, again, how = reselect(store, run_id, {"images_per_group": 3}, memory=memory)
    assert how.startswith("cache")
    assert not again.canvases.pixels.packed
    full = select(SAMPLE_VIDEO, options=SelectionOptions(num_sampled_frames=48, images_per_group=3))
    assert _digest(again.canvases) == _digest(full.canvases)


def test_kept_blocks_by_row_is_worked_out_once_read_only_and_pickles(runs: dict[str, object]) -> None:
    from backend.render import kept_blocks_by_row

    result = runs["cvp"]
    first = kept_blocks_by_row(result)  # type: ignore[arg-type]
    assert first is kept_blocks_by_row(result)  # type: ignore[arg-type]
    # The same blocks, row by row, as the selection names them.
    total = sum(int(sel.kept.shape[0]) for sel in result.selection.groups)  # type: ignore[attr-defined]
    assert sum(len(b) for b in first.values()) == total > 0
    row, blocks = next(iter(first.items()))
    with pytest.raises(ValueError, match="read-only"):
        blocks[0, 0] = -1
    with pytest.raises(TypeError):
        first[row] = blocks  # type: ignore[index]
    # A run is pickled to and from batch workers: the worked-out mapping is not part of it.
    back = pickle.loads(pickle.dumps(result.selection))  # type: ignore[attr-defined]
    assert {r: b.tolist() for r, b in back.kept_by_row.items()} == {r: b.tolist() for r, b in first.items()}
