"""The run summary view's prepare_* functions on a synthetic run (no cvp, no decode)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from helpers.synthetic import synthetic_run

from views.inspector import run_summary
from views.wording import plural


@pytest.fixture(scope="module")
def result():
    """48 candidates (every third frame) in three groups, square pixels, the clean profile."""
    return synthetic_run(frames=144, sampled=range(0, 144, 3), groups=3)


def test_gallery_and_summary_match_the_run(result):
    gallery = run_summary.prepare_gallery(result)
    assert len(gallery) == result.canvases.images.shape[0]
    assert "anchor" in gallery[0][1] and "blocks" in gallery[1][1]
    assert "Profile **clean**" in run_summary.prepare_summary(result)


def test_signal_plots_have_four_rows_and_a_cursor(result):
    import numpy as np

    from views.inspector import signal_plots

    fig = signal_plots.prepare_signal_plots(result, cursor_frame_index=7)
    assert [t.name for t in fig.data] == [
        "bits per frame (kbit)",
        "kept blocks",
        "coverage (%)",
        "luma mean (Y)",
    ]
    assert [s.name for s in fig.layout.shapes] == ["cursor"] and fig.layout.shapes[0].x0 == 7
    series = signal_plots.per_candidate_series(result)
    assert series["coverage"].max() == 1.0  # anchors are kept whole
    assert np.all((series["luma_mean"] > 0) & (series["luma_mean"] < 255))
    assert len(fig.data[0].x) == result.info.packet_size_bytes.size
    go.Figure(fig.to_plotly_json())  # built unvalidated (figure_style.plain_figure): plotly's names only


def test_summary_words_plurals_and_times(result):
    text = run_summary.prepare_summary(result, pipeline_secs=3.97, reopen_secs=0.23)
    assert "pipeline 3.97 s (reopened from the cache in 0.23 s)" in text
    assert plural(1, "warning") == "1 warning" and plural(2, "canvas", "canvases") == "2 canvases"
    assert run_summary.aspect_note(result) == ""  # square pixels
