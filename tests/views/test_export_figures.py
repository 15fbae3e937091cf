"""The figures an export writes: frame range honoured by every figure, paper style, whole-number counts."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.synthetic import synthetic_run

from backend.export import export_groups
from backend.pipeline import RunResult
from views import figure_style
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
