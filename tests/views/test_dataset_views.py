"""Dataset views: table columns, histograms of the videos with an output, failures, status line."""

from __future__ import annotations

import pandas as pd

from backend.store import SUMMARY_NAMES
from views import dataset as dv

ROWS = pd.DataFrame(
    [
        {
            "path": "/d/a.mp4",
            "rel_path": "a.mp4",
            "status": "done",
            "tokens": 2240,
            "valid_tokens": 2000,
            "temporal_coverage": 0.25,
            "seconds": 1.23456,
        },
        {
            "path": "/d/b.mp4",
            "rel_path": "b.mp4",
            "status": "skipped",
            "tokens": 600,
            "valid_tokens": 500,
            "temporal_coverage": 0.9,
            "seconds": 0.5,
        },
        {
            "path": "/d/c.mp4",
            "rel_path": "c.mp4",
            "status": "failed",
            "error": "/d/c.mp4: no video stream in file",
            "seconds": 0.01,
        },
    ]
).reindex(columns=list(SUMMARY_NAMES))


def test_the_table_shows_its_columns_rounded_with_blanks() -> None:
    table = dv.prepare_table(ROWS)
    assert list(table.columns) == list(dv.TABLE_COLUMNS) and table.columns[-1] == "path"
    assert table["seconds"].tolist() == [1.23, 0.5, 0.01]
    assert table.loc[2, "tokens"] == "" and table.loc[0, "error"] == ""


def test_histograms_count_the_videos_with_an_output() -> None:
    fig = dv.prepare_histograms(ROWS)
    assert [t.name for t in fig.data] == ["tokens", "temporal_coverage", "seconds"]
    assert list(fig.data[0].x) == [2000, 500]  # valid tokens; the failed video has none
    assert list(fig.data[2].x) == [1.23456, 0.5]
    assert fig.layout.meta["counts"] == {"tokens": 2, "temporal_coverage": 2, "seconds": 2}
    empty = dv.prepare_histograms(ROWS.iloc[:0])
    assert all(len(t.x) == 0 for t in empty.data)


def test_failures_and_status() -> None:
    failures = dv.prepare_failures(ROWS)
    assert failures.to_dict("records") == [{"path": "/d/c.mp4", "error": "/d/c.mp4: no video stream in file"}]
    status = dv.prepare_status(ROWS, shown=1, source="batch.parquet", where="status = 'done'")
    assert status.startswith("**batch.parquet**: 3 videos (1 done, 1 skipped, 1 failed)")
    assert "**1** match `status = 'done'`" in status


# Issue 27 items 19, 20: titles fit their third of the figure; the share convention is stated.
def test_the_dataset_histograms_titles_fit():
    import pandas as pd

    from views import dataset as dv
    from views.figure_style import SCREEN_FULL_WIDTH_PX, text_width_px

    fig = dv.prepare_histograms(
        pd.DataFrame({"status": ["done"], "valid_tokens": [5], "temporal_coverage": [0.25]})
    )
    # Each subplot title is centred over its third of the plot: it must fit that third.
    third = (SCREEN_FULL_WIDTH_PX - fig.layout.margin.l - fig.layout.margin.r) / len(dv.HISTOGRAMS)
    for note in fig.layout.annotations:
        assert text_width_px(note.text, size_px=note.font.size or 16) <= third, note.text
    assert "0–1" in fig.layout.xaxis2.title.text  # the share convention, stated
