"""The coverage audit in the Inspect tab: timeline bands, the staleness layer and legend, the summary line."""

from __future__ import annotations

import dataclasses

import numpy as np
import plotly.graph_objects as go
import pytest
from helpers.synthetic import synthetic_run

import backend.render as render
from backend.pipeline import RunResult
from backend.records import TOKEN_COLUMNS, BudgetOutcome
from backend.render.colors import colormap_lut
from views.inspector import run_summary, timeline
from views.inspector.frame_layers import prepare_frame_layers
from views.inspector.legend import prepare_heat_legend

VALID = TOKEN_COLUMNS.index("valid")


@pytest.fixture(scope="module")
def sparse() -> RunResult:
    """Every third frame of 150 sampled (a candidate each, all observed): frames 3k+1 and 3k+2 hold
    no token, so the never-observed spans are [3k+1, 3k+2] for k = 0 … 49, 2/30 s each."""
    return synthetic_run(frames=150, sampled=range(0, 150, 3), groups=3)


def _naive_staleness(result: RunResult) -> np.ndarray:
    """(F, Hp, Wp) staleness of every frame by the definition, one frame at a time."""
    hp, wp = result.geometry.grid_hw
    frames = result.info.total_frames
    seen = np.zeros((frames, hp, wp), bool)
    for f, r, c, *_rest, valid in result.canvases.tokens.tolist():
        if valid:
            seen[f, r, c] = True
    stale = np.zeros((frames, hp, wp), np.int64)
    last = np.full((hp, wp), -1)
    for f in range(frames):
        last = np.where(seen[f], f, last)
        stale[f] = f - last
    return stale


def _bands(fig: go.Figure) -> list:
    return [t for t in fig.data if (t.meta or {}).get("kind") == "never_observed"]


# --------------------------------------------------------------------------- timeline


def test_the_never_observed_spans_are_one_trace_of_full_height_bands(sparse):
    fig = timeline.prepare_timeline(sparse)
    (band,) = _bands(fig)  # one trace however many spans
    spans = [[3 * k + 1, 3 * k + 2] for k in range(50)]
    assert band.meta["spans"] == spans and band.customdata.tolist() == spans
    assert band.type == "bar" and band.name == timeline.NEVER_OBSERVED_NAME == "never observed"
    assert band.showlegend is not False and band.marker.color == timeline.NEVER_OBSERVED_FILL
    # Each band covers its frames exactly, from 0 to the top of the byte axis.
    assert np.array_equal(band.x, [3 * k + 1.5 for k in range(50)]) and set(band.width) == {2.0}
    assert band.base == 0 and set(band.y) == {fig.layout.yaxis.range[1]}
    assert band.hovertext[0] == "never observed: frames 1–2 (2 frames, 0.067 s)"
    assert band.hovertemplate == "%{hovertext}<extra></extra>"
    # Under the packet bars (drawn first of the bars) and the legend names it once.
    kinds = [(t.meta or {}).get("kind") for t in fig.data]
    assert kinds.index("never_observed") < kinds.index("packet_size")
    assert [t.name for t in fig.data].count("never observed") == 1
    go.Figure(fig.to_plotly_json())  # plotly's own property names


def test_a_frame_range_clips_the_bands_and_the_hover_names_the_whole_span(sparse):
    fig = timeline.prepare_timeline(sparse, frame_range=(2, 8))
    (band,) = _bands(fig)
    assert band.meta["spans"] == [[2, 2], [4, 5], [7, 7]]
    assert np.array_equal(band.x, [2.0, 4.5, 7.0]) and list(band.width) == [1.0, 2.0, 1.0]
    assert band.hovertext[0] == "never observed: frames 1–2 (2 frames, 0.067 s)"
    assert band.hovertext[2] == "never observed: frames 7–8 (2 frames, 0.067 s)"


def test_a_single_frame_span_and_a_run_that_saw_every_frame():
    # Frames 0 … 29 all sampled and each holds a kept block: every frame is observed.
    base = synthetic_run(frames=30, groups=3)
    assert not _bands(timeline.prepare_timeline(base))  # every frame observed: no band, no legend
    tokens = base.canvases.tokens.copy()
    tokens[tokens[:, 0] == 4, VALID] = 0  # frame 4 loses its tokens
    hidden = dataclasses.replace(base, canvases=dataclasses.replace(base.canvases, tokens=tokens))
    (band,) = _bands(timeline.prepare_timeline(hidden))
    assert band.meta["spans"] == [[4, 4]]
    assert list(band.hovertext) == ["never observed: frame 4 (1 frame, 0.033 s)"]


# --------------------------------------------------------------------------- run summary


def test_the_summary_says_what_the_run_showed(sparse):
    stale = _naive_staleness(sparse)
    line = (
        f"Coverage: **50 of 150** frames observed; 50 never-observed spans, the longest 0.067 s; "
        f"max staleness {int(stale.max())} frames."
    )
    assert run_summary.coverage_note(sparse) == line
    every = synthetic_run(frames=24, groups=6)  # each group's 48 blocks are all its blocks
    assert run_summary.coverage_note(every) == (
        "Coverage: **24 of 24** frames observed; 0 never-observed spans; max staleness 0 frames."
    )


def test_the_coverage_line_ends_the_headline_before_the_aspect_and_budget_notes(sparse):
    outcome = BudgetOutcome(
        token_budget=1000,
        tokens_used=960,
        stop_reason="budget",
        stop_gain=0.05,
        anchors=3,
        blocks=192,
        gain_unit_bytes=0.0,
    )
    budgeted = dataclasses.replace(sparse, selection=dataclasses.replace(sparse.selection, budget=outcome))
    anamorphic = dataclasses.replace(
        budgeted, info=dataclasses.replace(sparse.info, sample_aspect_ratio=(16, 11))
    )
    text = run_summary.prepare_summary(anamorphic)
    paragraphs = text.split("\n\n")
    # A hard break inside the headline paragraph: no paragraph gap above the viewer.
    at = [i for i, p in enumerate(paragraphs) if "  \nCoverage: " in p]
    assert len(at) == 1 and paragraphs[at[0]].startswith("Profile ")
    assert paragraphs[at[0] + 1].startswith("Anamorphic:")
    assert paragraphs[at[0] + 2].startswith("Token budget **1000**")


# --------------------------------------------------------------------------- staleness layer


def test_the_staleness_layer_tiles_each_patch_on_the_videos_scale():
    run = synthetic_run(frames=30, groups=3)
    stale, top = _naive_staleness(run), 9
    assert int(stale.max()) == top  # the scale: the video's highest staleness
    options = render.layer_options(["staleness"], opacity=0.5, colormap="viridis")
    assert render.cached_plan(run, options).staleness_top == top
    lut, patch = colormap_lut("viridis"), run.geometry.patch
    for row in (0, 3, 7, 19):
        fid = int(run.candidates.frame_indices[row])
        assert np.array_equal(render.staleness_at_row(run, row), stale[fid])
        image = prepare_frame_layers(run, row, options).image
        frame = run.decoded.pixels[row].astype(np.float64)
        levels = np.round(stale[fid] * 255 / top).astype(int)
        colour = np.repeat(np.repeat(lut[levels], patch, axis=0), patch, axis=1).astype(np.float64)
        want = 0.5 * colour + 0.5 * frame
        assert np.abs(image.astype(np.float64) - want).max() <= 1.0, row
    # The anchor (row 0) is fresh everywhere: one colour, the scale's bottom, over the frame.
    assert (render.staleness_at_row(run, 0) == 0).all()


def test_the_staleness_layer_is_off_by_default_and_named_like_the_others():
    assert "staleness" in render.LAYER_NAMES and render.LAYER_LABELS["staleness"] == "staleness"
    assert "staleness" not in render.DEFAULT_LAYERS and not render.LayerOptions().staleness
    assert render.layer_names(render.layer_options(["staleness", "kept"])) == ("staleness", "kept")
    run = synthetic_run(frames=30, groups=3)
    plain = prepare_frame_layers(run, 3, render.layer_options(["kept"])).image
    assert render.cached_plan(run, render.layer_options(["kept"])).staleness_top is None
    assert not np.array_equal(plain, prepare_frame_layers(run, 3, render.layer_options(["staleness"])).image)


def test_the_heat_legend_shows_the_staleness_scale():
    run = synthetic_run(frames=30, groups=3)
    assert prepare_heat_legend(run, render.LayerOptions()) == ""
    alone = prepare_heat_legend(run, render.LayerOptions(staleness=True))
    assert alone.count('class="lens-bar"') == 1 and "Staleness: frames since a valid token" in alone
    assert "<span>0 = covered in this frame</span><span>9 frames = the video's highest</span>" in alone
    both = prepare_heat_legend(run, render.LayerOptions(heatmap=True, heat="block", staleness=True))
    assert both.count('class="lens-bar"') == 2
    assert both.index("Heatmap: 2×2-block score") < both.index("Staleness:")


@pytest.mark.needs_cvp
def test_the_staleness_layer_leaves_a_letterbox_alone(tmp_path):
    from helpers.clips import encode_clip

    from backend.selectors import options_for, picture_of, select

    # onevision letterboxes the 320×192 frame into a 320 square: rows above and below are bars.
    clip = encode_clip(tmp_path / "wide", codec="h264", width=320, height=192, frames=16, gop=8)
    result = select(
        clip, options=options_for("onevision", {"seq_len_frames": 8, "num_images": 2, "square_size": 320})
    )
    r0, r1, _, _ = picture_of(result.options, result.geometry)
    assert r0 > 0
    row = 1
    stale = render.staleness_at_row(result, row)
    f = result.geometry.block_size
    assert (
        (stale[: r0 * f] == -1).all()
        and (stale[r1 * f :] == -1).all()
        and (stale[r0 * f : r1 * f] >= 0).all()
    )
    drawn = prepare_frame_layers(result, row, render.layer_options(["staleness"], opacity=1.0)).image
    frame, px = result.decoded.pixels[row], result.geometry.patch * f
    assert np.array_equal(drawn[: r0 * px], frame[: r0 * px]) and np.array_equal(
        drawn[r1 * px :], frame[r1 * px :]
    )
    assert not np.array_equal(drawn[r0 * px : r1 * px], frame[r0 * px : r1 * px])
