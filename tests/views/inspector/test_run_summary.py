"""The run summary view's prepare_* functions on a real run of the bundled sample."""

from __future__ import annotations

import pytest
from conftest import REPO_ROOT, requires_cvp

from backend.pipeline import SelectionOptions, run
from views.inspector import run_summary

pytestmark = requires_cvp


@pytest.fixture(scope="module")
def result():
    return run(
        REPO_ROOT / "sample_videos" / "flower_timelapse_cc0.mp4",
        options=SelectionOptions(num_sampled_frames=48),
    )


def test_gallery_and_summary_match_the_run(result):
    gallery = run_summary.prepare_gallery(result)
    assert len(gallery) == result.canvases.images.shape[0]
    assert "anchor" in gallery[0][1] and "blocks" in gallery[1][1]
    assert "Profile **clean**" in run_summary.prepare_summary(result)
