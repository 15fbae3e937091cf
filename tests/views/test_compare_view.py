"""Comparison view: every prepare_* function on a real, stored four-codec comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.compare_clips import make_comparison

from backend.compare import kept_mask_at, load_comparison
from backend.runs import open_run
from backend.store import SessionStore
from views import compare as cv
from views import compare_difference as cd
from views.inspector.frame_layers import LayerOptions, prepare_frame_layers

pytestmark = pytest.mark.needs_cvp


@pytest.fixture(scope="module")
def opened(real_clips, tmp_path_factory):
    db = tmp_path_factory.mktemp("compare") / "c.duckdb"
    comparison = make_comparison(db, real_clips / "real_h264_flower_timelapse.mp4")
    with SessionStore(db) as store:
        stored = load_comparison(store, comparison.comparison_id)
        results = [open_run(store, rid) for rid in stored.run_ids]
        rows = store.list_comparisons()
    return stored, results, rows


def test_positions_are_the_union_of_candidates_and_steps_move_by_one(opened) -> None:
    _, results, _ = opened
    positions = cv.prepare_positions(results)
    union = np.unique(np.concatenate([r.candidates.frame_indices for r in results]))
    assert np.array_equal(positions, union) and positions.tolist() == list(range(24))
    assert cv.position_of_frame(positions, 7.4) == 7 and cv.position_of_frame(positions, 99) == 23
    assert cv.navigate_position(results, positions, 5, "next") == 6
    assert cv.navigate_position(results, positions, 5, "prev") == 4
    assert cv.navigate_position(results, positions, 0, "prev") == 0
    assert cv.navigate_position(results, positions, 5, "home") == 0
    assert cv.navigate_position(results, positions, 5, "end") == 23
    # GOP 12: the reference run's second keyframe is frame 12.
    assert cv.navigate_position(results, positions, 3, "next_key") == 12
    assert cv.navigate_position(results, positions, 14, "prev_key") == 12
    starts = sorted({s.start for s in results[1].groups.specs})
    later = [s for s in starts if s > 0]
    expected = later[0] if later else 0
    assert cv.navigate_position(results, positions, 0, "next_group", reference=1) == expected
    with pytest.raises(ValueError, match="Supported values are prev, next"):
        cv.navigate_position(results, positions, 0, "sideways")


def test_heatmap_runs_share_one_scale_per_signal(opened) -> None:
    _, results, _ = opened
    assert cv.prepare_heatmap_runs(results, "frame") == tuple(results)
    assert cv.prepare_heatmap_runs(results, "video") == tuple(results)
    shared = cv.prepare_heatmap_runs(results, "all")
    peaks = [max(float(g.max()) for g in r.scores.grids) for r in shared]
    bitcost = peaks[:3]  # h264, hevc, vp9 share bits/px; AV1's residual has its own scale
    assert max(bitcost) == pytest.approx(1.0) and min(bitcost) < 1.0
    assert peaks[3] == pytest.approx(1.0)
    for orig, copy in zip(results, shared, strict=True):
        assert copy.decoded is orig.decoded and copy.scores.block_scores is orig.scores.block_scores
        assert all(0.0 <= float(g.min()) and float(g.max()) <= 1.0 for g in copy.scores.grids)
    with pytest.raises(ValueError, match="Supported values are frame, video, all"):
        cv.prepare_heatmap_runs(results, "global")


def test_pane_draws_the_inspector_layers_and_captions_its_frame(opened) -> None:
    stored, results, _ = opened
    opts = LayerOptions(heatmap=True, block_grid=True)
    pane = cv.prepare_pane(results, 2, 5, cv.PaneOptions(layers=opts, scale="frame", labels=stored.labels))
    row = 5  # every frame is a candidate: row = frame_index
    assert np.array_equal(pane.image, prepare_frame_layers(results[2], row, opts).image)
    assert pane.caption.startswith(f"{stored.labels[2]} · frame 5 · ") and pane.info["exact"]
    video = cv.prepare_pane(results, 2, 5, cv.PaneOptions(layers=opts, scale="video", labels=stored.labels))
    shared = cv.prepare_pane(results, 2, 5, cv.PaneOptions(layers=opts, scale="all", labels=stored.labels))
    assert not np.array_equal(video.image, pane.image) and not np.array_equal(shared.image, pane.image)
    far = cv.prepare_pane(results, 0, 500, cv.PaneOptions(labels=stored.labels))
    assert not far.info["exact"] and "nearest candidate to frame 500" in far.caption
    with pytest.raises(ValueError, match="Invalid pane"):
        cv.prepare_pane(results, 4, 0)
    with pytest.raises(ValueError, match="Invalid scale"):
        cv.prepare_pane(results, 0, 0, cv.PaneOptions(scale="global"))


def test_difference_masks_partition_the_kept_blocks(opened) -> None:
    _, results, _ = opened
    for fid in (0, 5, 13):
        m = cd.difference_masks(results[0], results[3], fid)
        a, b = kept_mask_at(results[0], fid), kept_mask_at(results[3], fid)
        assert np.array_equal(m["a_only"] | m["both"], a) and np.array_equal(m["b_only"] | m["both"], b)
        assert not (m["a_only"] & m["b_only"]).any()
    same = cd.difference_masks(results[1], results[1], 5)
    assert not same["a_only"].any() and not same["b_only"].any() and same["both"].any()


def test_draw_difference_tints_only_the_differing_blocks() -> None:
    image = np.full((56, 84, 3), 100, np.uint8)
    masks = {k: np.zeros((2, 3), bool) for k in ("a_only", "b_only", "both")}
    masks["a_only"][0, 1] = True
    masks["b_only"][1, 2] = True
    out = cd.draw_difference(image, masks, 28)
    assert np.all(image == 100)  # the input is untouched
    centre_a, centre_b = out[14, 28 + 14], out[28 + 14, 56 + 14]
    assert centre_a[2] > 100 and centre_a[0] < 100  # towards A_ONLY_RGB (blue)
    assert centre_b[0] > 100 and centre_b[1] < 100  # towards B_ONLY_RGB (magenta)
    assert tuple(out[0, 28]) == cd.A_ONLY_RGB and tuple(out[28, 56]) == cd.B_ONLY_RGB  # outlines
    assert np.all(out[:28, :28] == 100) and np.all(out[28:, :28] == 100)


def test_pane_in_difference_mode_counts_the_blocks(opened) -> None:
    stored, results, _ = opened
    plain = cv.prepare_pane(results, 1, 6, cv.PaneOptions(labels=stored.labels))
    diff = cv.prepare_pane(results, 1, 6, cv.PaneOptions(difference_with=0, labels=stored.labels))
    masks = cd.difference_masks(results[0], results[1], 6)
    assert {k: diff.info[k] for k in masks} == {k: int(v.sum()) for k, v in masks.items()}
    assert f"vs {stored.labels[0]}: {diff.info['a_only']} only there" in diff.caption
    assert (masks["a_only"].any() or masks["b_only"].any()) == (not np.array_equal(plain.image, diff.image))
    itself = cv.prepare_pane(results, 0, 6, cv.PaneOptions(difference_with=0, labels=stored.labels))
    assert "a_only" not in itself.info  # the reference pane shows its own layers


def test_pane_caption_fields() -> None:
    info = {
        "label": "vp9 crf32",
        "frame_index": 7,
        "time_secs": 0.2335,
        "pict_type": "P",
        "size_bytes": 120,
        "group_index": 0,
        "is_anchor": False,
        "kept_blocks": 3,
        "exact": False,
        "requested_frame_index": 8,
        "a_only": 1,
        "b_only": 2,
        "both": 3,
        "reference_label": "h264 crf23",
    }
    text = cv.pane_caption(info)
    assert text.startswith("vp9 crf32 · frame 7 · 0.234 s · P · 120 bytes · group 0 · 3 kept blocks")
    assert (
        "(nearest candidate to frame 8)" in text
        and "vs h264 crf23: 1 only there, 2 only here, 3 both" in text
    )
    assert "anchor (whole frame)" in cv.pane_caption(info | {"is_anchor": True})


def test_legend_and_heatmap_ranges(opened) -> None:
    _, results, _ = opened
    legend = cv.prepare_legend("viridis", "0", "1")
    assert legend.shape == (40, 256, 3) and legend.dtype == np.uint8
    with pytest.raises(ValueError, match="Invalid colormap"):
        cv.prepare_legend("rainbow", "0", "1")
    assert cv.heatmap_range(results, 0, "frame") == "1 = frame p99"
    assert "video max" in cv.heatmap_range(results, 1, "video")
    assert "bits/px (all bitcost runs max" in cv.heatmap_range(results, 0, "all")
    # AV1's stand-in signal names its unit (it read "1 = 97.46 per px", issue 27 item 20).
    assert "luma levels |Y − prediction| (all residual runs max" in cv.heatmap_range(results, 3, "all")
    assert "bits per " in cv.heatmap_range(results, 0, "video") and " px cell (video max" in cv.heatmap_range(
        results, 0, "video"
    )
    assert cv.cell_area_note(results[0]) == "mb_bit_cost / 256 px"
    assert cv.cell_area_note(results[3]) == "residual (per px)"


def test_metric_figure_has_every_pair_and_decode_and_a_cursor(opened) -> None:
    stored, results, _ = opened
    positions = cv.prepare_positions(results)
    fig = cv.prepare_metric_figure(stored, positions, cursor_frame_index=9)
    names = [t.name for t in fig.data]
    assert len(names) == 6 * 2 + 4 + 3  # Jaccard and Spearman per pair, PSNR per decode
    assert "h264 crf23 vs av1 crf35" in names and "av1 crf35 (full decode)" in names
    assert "hevc crf28 (fast reader)" in names and "av1 crf35 (fast reader)" not in names
    (cursor,) = [s for s in fig.layout.shapes if s.name == cv.CURSOR_NAME]
    assert cursor.x0 == cursor.x1 == 9 and cursor.yref == "paper"
    assert list(fig.layout.meta["frames"]) == positions.tolist()
    jac = next(t for t in fig.data if t.name == "h264 crf23 vs hevc crf28")
    expected = stored.pair_frames.query("variant_a == 0 and variant_b == 1")["jaccard"].tolist()
    assert [None if math.isnan(v) else v for v in expected] == list(jac.y)


def test_tables_settings_and_choices(opened) -> None:
    stored, _, rows = opened
    headers, table = cv.prepare_variant_table(stored)
    assert len(table) == 4 and headers[0] == "variant" and [r[0] for r in table] == stored.labels
    assert table[3][1] == "residual" and table[3][-1] == "–"  # no fast reader for AV1
    assert table[0][10] == round(float(stored.metrics["psnr_y_db"][0]), 2)
    # Shares are fractions 0–1, as the dataset tab shows temporal_coverage (issue 27 item 20).
    for name, column in (
        ("time covered (share of frames)", "time_covered_share"),
        ("blocks kept (share)", "kept_block_share"),
    ):
        values = [r[headers.index(name)] for r in table]
        assert values == stored.metrics[column].round(3).tolist() and all(0 <= v <= 1 for v in values)
    assert not [h for h in headers if "%" in h]
    headers, pairs = cv.prepare_pair_table(stored)
    assert len(pairs) == 6 and pairs[0][0] == f"{stored.labels[0]} vs {stored.labels[1]}"
    assert pairs[0][1] == round(float(stored.pairs["jaccard"][0]), 3)
    md = cv.prepare_settings_markdown(stored)
    assert "GOP 12" in md and all(label in md for label in stored.labels) and "residual stands in" in md
    choices = cv.prepare_comparison_choices([*rows, {"status": "failed", "comparison_id": "x"}])
    assert len(choices) == 1 and choices[0][1] == stored.comparison_id
    assert stored.comparison_id in choices[0][0] and "real_h264_flower_timelapse.mp4" in choices[0][0]
