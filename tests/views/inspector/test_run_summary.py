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
        "coverage (share)",
        "luma mean (Y)",
    ]
    assert [s.name for s in fig.layout.shapes] == ["cursor"] and fig.layout.shapes[0].x0 == 7
    series = signal_plots.per_candidate_series(result)
    assert series["coverage"].max() == 1.0  # anchors are kept whole
    assert np.all((series["luma_mean"] > 0) & (series["luma_mean"] < 255))
    assert len(fig.data[0].x) == result.info.packet_size_bytes.size
    go.Figure(fig.to_plotly_json())  # built unvalidated (figure_style.plain_figure): plotly's names only


def test_summary_words_plurals_and_times(result):
    text = run_summary.prepare_summary(result, pipeline_secs=3.97, provenance="computed at 10:00:00 UTC")
    assert "pipeline 3.97 s (computed at 10:00:00 UTC)" in text
    assert "pipeline 3.97 s  \nCoverage: " in run_summary.prepare_summary(result, pipeline_secs=3.97)
    assert plural(1, "warning") == "1 warning" and plural(2, "canvas", "canvases") == "2 canvases"
    assert run_summary.aspect_note(result) == ""  # square pixels


# --------------------------------------------------------------------------- issue 27 items 20, 21


@pytest.fixture(scope="module")
def av1_run(clips_dir):
    """A real AV1 run (24 frames of 320×192, decoded by libdav1d), scored by the residual."""
    from helpers.clips import encode_clip

    from backend.pipeline import SelectionOptions, run

    clip = encode_clip(clips_dir / "av1_320", codec="av1", width=320, height=192, frames=24, gop=12)
    return run(clip, options=SelectionOptions(num_sampled_frames=12, profile="clean", score="residual"))


def test_the_summary_names_the_codec_and_keeps_the_decoder_where_one_is_meant(av1_run):
    assert av1_run.info.codec_name == "libdav1d"  # PyAV names the decoder
    head = run_summary.prepare_summary(av1_run).splitlines()[0]
    assert "— AV1 (decoder libdav1d) 320×192" in head
    assert run_summary.codec_label("h264") == "H.264" and run_summary.codec_label("hevc") == "HEVC"
    assert run_summary.codec_label("libvpx-vp9") == "VP9 (decoder libvpx-vp9)"


@pytest.mark.parametrize(
    ("sar", "flagged"), [((427, 426), False), ((100, 101), False), ((16, 15), True), ((10, 11), True)]
)
def test_pixel_aspects_within_one_percent_of_square_are_not_called_anamorphic(av1_run, sar, flagged):
    import dataclasses

    result = dataclasses.replace(av1_run, info=dataclasses.replace(av1_run.info, sample_aspect_ratio=sar))
    note = run_summary.aspect_note(result)
    assert bool(note) is flagged and run_summary.is_anamorphic(result.info) is flagged
    assert ("Anamorphic" in run_summary.prepare_summary(result)) is flagged
    if flagged:
        assert f"SAR) {sar[0]}:{sar[1]}" in note


def test_the_heat_legend_gives_the_raw_signal_its_unit(av1_run):
    from backend.render import LayerOptions
    from backend.render.heatmap import video_raw_max
    from views.inspector.legend import prepare_heat_legend

    unit = "luma levels |Y − prediction|"
    legend = prepare_heat_legend(av1_run, LayerOptions(heatmap=True, heat="cell", scale="video"))
    top = f"{video_raw_max(av1_run):.6g}"
    assert f"<span>{top} {unit} = the run's highest cell</span>" in legend.replace("&#x27;", "'")
    frame = prepare_heat_legend(av1_run, LayerOptions(heatmap=True, heat="cell", scale="frame"))
    assert f"signal per cell ({unit})" in frame


def test_a_budgeted_run_says_what_its_budget_bought() -> None:
    from backend.audit.sweep import budgeted_result

    result = synthetic_run(frames=150, groups=3)
    assert run_summary.budget_note(result) == "" and "Token budget" not in run_summary.prepare_summary(result)
    two = budgeted_result(result, 2 * 64 + 3, 0.05)  # two anchors of 64 tokens, no room for a block
    assert run_summary.budget_note(two) == (
        "Token budget **131**: 128 used (2 anchors, 0 blocks), stopped by **budget**: the next item did "
        "not fit (stop gain 0.05); 1 group without room for its anchor."
    )
    every = budgeted_result(result, 10**6, 0.0)
    assert (
        "stopped by **video_end**: every block that fits was kept (stop gain 0)."
        in run_summary.prepare_summary(every)
    )


def test_a_fallback_run_says_what_was_asked_for_and_why() -> None:
    import dataclasses

    from backend.records import FallbackOutcome

    result = synthetic_run(frames=60, groups=2)
    assert run_summary.fallback_note(result) == ""
    asked = dataclasses.replace(result, fallback=FallbackOutcome("cvp", "cvp", None))
    assert run_summary.fallback_note(asked) == ""  # what was asked for ran
    fell = dataclasses.replace(
        result, fallback=FallbackOutcome("cvp", "uniform", "flat_scores", "inter frames carry 0.30% <of> it")
    )
    assert run_summary.fallback_note(fell) == (
        "**Fallback**: asked for **cvp**, ran **uniform** "
        "(flat_scores: inter frames carry 0.30% &lt;of&gt; it)."
    )
    assert run_summary.fallback_note(fell) in run_summary.prepare_summary(fell)
