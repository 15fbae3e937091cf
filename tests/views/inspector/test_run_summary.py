"""The run summary view's prepare_* functions on a real run of the bundled sample."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO_ROOT, requires_cvp

from backend.pipeline import SelectionOptions, run
from views.inspector import run_summary
from views.inspector.frame_layers import prepare_frame_layers

pytestmark = requires_cvp


@pytest.fixture(scope="module")
def result():
    return run(
        REPO_ROOT / "sample_videos" / "flower_timelapse_cc0.mp4",
        options=SelectionOptions(num_sampled_frames=48),
    )


def test_kept_blocks_are_outlined_and_the_rest_untouched(result):
    kept = run_summary.kept_blocks_by_row(result)
    row = next(r for r, blocks in kept.items() if blocks and r not in run_summary.anchor_rows(result))
    view = prepare_frame_layers(result, row)
    f = result.geometry.patch * result.geometry.block_size
    br, bc = kept[row][0]
    assert tuple(view.image[br * f, bc * f + f // 2]) == run_summary.KEPT_RGB
    assert tuple(view.image[br * f + f - 1, bc * f + 3]) == run_summary.KEPT_RGB
    mask = np.zeros(view.image.shape[:2], bool)
    for r, c in kept[row]:
        mask[r * f : (r + 1) * f, c * f : (c + 1) * f] = True
    assert np.array_equal(view.image[~mask], result.decoded.pixels[row][~mask])
    assert view.info["kept_blocks"] == len(kept[row]) and not view.info["is_anchor"]


def test_anchor_gets_a_frame_border(result):
    row = min(run_summary.anchor_rows(result))
    view = prepare_frame_layers(result, row)
    assert tuple(view.image[0, 0]) == run_summary.ANCHOR_RGB and view.info["is_anchor"]


def test_rows_out_of_range_are_refused(result):
    with pytest.raises(ValueError, match="Invalid row"):
        prepare_frame_layers(result, result.candidates.frame_indices.size)


def test_gallery_and_summary_match_the_run(result):
    gallery = run_summary.prepare_gallery(result)
    assert len(gallery) == result.canvases.images.shape[0]
    assert "anchor" in gallery[0][1] and "blocks" in gallery[1][1]
    assert "Profile **clean**" in run_summary.prepare_summary(result)
