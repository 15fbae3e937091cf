"""The figures an export writes: frame range honoured by every figure, paper style, whole-number counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

import backend.export as ex
from backend.audit import AuditConfig, audit_coverage, audit_source_of_run
from backend.export import export_groups
from backend.pipeline import RunResult
from views import coverage_figure, figure_style
from views.export_figures import prepare_export_figures


@pytest.fixture(scope="module")
def result() -> RunResult:
    """50 candidates (every third frame, keyframe 0 moved to 1) in three readiness groups."""
    return synthetic_run(frames=150, sampled=range(0, 150, 3), moved=[(0, 1)], groups=3)


def test_a_frame_range_keeps_only_the_groups_it_touches(result):
    everything = prepare_export_figures([("a", result)], ["timeline", "readiness"])
    groups = [s.group_index for s in result.groups.specs]
    assert len(groups) >= 2
    assert set(everything) == {"timeline", *(f"readiness_g{g}" for g in groups)}
    fids = result.candidates.frame_indices
    second = result.groups.specs[1]
    start = int(fids[second.start])  # from the second group's first frame on
    ranged = prepare_export_figures([("a", result)], ["timeline", "readiness"], frames=(start, None))
    assert set(ranged) == {"timeline", *(f"readiness_g{g}" for g in groups[1:])}
    assert export_groups(result, (start, None)) == groups[1:]
    assert export_groups(result, (0, 1)) == []  # frame 0 is no candidate (moved to 1)
    assert tuple(ranged["timeline"].layout.xaxis.range) == (start - 0.5, result.info.total_frames - 0.5)
    # Explicit groups win over the range; a compared run's figures carry its id.
    pair = prepare_export_figures(
        [("a", result), ("b", result)], ["readiness"], groups=[groups[0]], frames=(start, None)
    )
    assert set(pair) == {f"readiness_g{groups[0]}", f"readiness_g{groups[0]}_b"}
    with pytest.raises(ValueError, match=r"Invalid plot \('histogram'\)\. Supported values are timeline"):
        prepare_export_figures([("a", result)], ["histogram"])


def test_export_figures_are_paper_styled_with_whole_number_counts(result):
    figures = prepare_export_figures([("a", result)], ["timeline", "readiness"])
    for name, fig in figures.items():
        assert fig.layout.width == figure_style.PAPER_WIDTH_PX, name
        assert fig.layout.font.size >= 20 and fig.layout.legend.font.size >= 18, name
    g = result.groups.specs[0].group_index
    readiness = figures[f"readiness_g{g}"]
    bins = readiness.layout.yaxis2  # time bins: a count
    assert bins.tickmode == "linear" and float(bins.dtick).is_integer() and bins.range[0] == 0
    ticks = np.arange(bins.tick0, bins.range[1] + 1e-9, bins.dtick)
    assert np.all(ticks == np.round(ticks)) and bins.tickformat == "d"
    steps = [s for s in result.groups.trace if s.group_index == g]
    assert bins.range[1] >= max(max(s.covered_bins, s.needed_bins) for s in steps)
    colours = {t.name: (t.line.color if t.type == "scatter" else None) for t in readiness.data}
    assert colours["covered bins"] == figure_style.COLOURS["P"]
    assert colours["threshold"] == figure_style.COLOURS["threshold"]
    kept = figures["timeline"].layout.yaxis2
    assert kept.tickformat == "d" and float(kept.dtick).is_integer()


def test_the_coverage_figure_follows_the_range_and_compared_runs(result):
    figures = prepare_export_figures([("a", result), ("b", result)], ["coverage"], frames=(30, 90))
    assert set(figures) == {"coverage", "coverage_b"}
    fig = figures["coverage"]
    paper_size = (figure_style.PAPER_WIDTH_PX, coverage_figure.PAPER_HEIGHT_PX)
    assert (fig.layout.width, fig.layout.height) == paper_size
    assert fig.layout.font.size >= 20 and fig.layout.legend.font.size >= 18
    assert tuple(fig.layout.xaxis.range) == pytest.approx((1.0, 3.0))  # frames 30 … 89 at 30 fps
    audit = audit_coverage(audit_source_of_run(result), config=AuditConfig())
    (line,) = [t for t in fig.data if t.name == coverage_figure.COVERAGE_NAME]
    assert np.array_equal(line.y, audit.frame_coverage)


def test_an_export_asking_for_the_coverage_figure_writes_it(result, tmp_path):
    run = ex.ExportRun(
        run_id="a",
        result=result,
        config={},
        versions={},
        video_path=str(tmp_path / "gone.mp4"),
        cache_key=None,
    )
    figures = prepare_export_figures([("a", result)], ["coverage"], frames=(30, 90))
    config = ex.ExportConfig(
        out_path=tmp_path / "fig",
        allowed_roots=(tmp_path,),
        format="none",
        plot_formats=("html",),
        frames=(30, 90),
    )
    done = ex.write_export([run], config=config, figures=figures)
    fig = figures["coverage"]
    html = tmp_path / "fig.coverage.html"
    assert html in done.files and done.sidecar == tmp_path / "fig.json"
    page = html.read_text()
    # Self-contained, and the figure's own traces.
    assert "<script src=" not in page and "Plotly.newPlot" in page
    compact = page.replace(" ", "")
    assert '"name":"neverobserved"' in compact and '"name":"stalenessmap"' in compact
    assert compact.count('"xref":"x3"') == len(fig.layout.shapes) > 0  # the map's rectangles
    # The sidecar lists it as a figure.
    files = {f["name"]: f["role"] for f in json.loads(done.sidecar.read_text())["files"]}
    assert files == {"fig.coverage.html": "figure"}
