"""Dataset tab handlers, called directly: open a summary, filter it, refuse what is not one."""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import pytest

from app.tabs import dataset
from app.workspace import make_workspace
from backend.store import write_summary_parquet

ROWS = [
    {
        "path": "/d/a.mp4",
        "rel_path": "a.mp4",
        "status": "done",
        "valid_tokens": 2000,
        "temporal_coverage": 0.25,
    },
    {
        "path": "/d/b.mp4",
        "rel_path": "b.mp4",
        "status": "done",
        "valid_tokens": 500,
        "temporal_coverage": 0.9,
    },
    {
        "path": "/d/c.mp4",
        "rel_path": "c.mp4",
        "status": "failed",
        "error": "/d/c.mp4: no video stream in file",
    },
]


@pytest.fixture
def ws(tmp_path: Path):
    workspace = make_workspace(session_db=tmp_path / "s.duckdb", output_dir=tmp_path / "work")
    yield workspace
    workspace.close()


def test_a_batch_folder_opens_and_filters(ws, tmp_path: Path) -> None:
    batch = ws.output_root / "batch"
    batch.mkdir()
    write_summary_parquet(ROWS, batch / "batch.parquet")
    source = dataset.open_parquet(ws, "batch")  # the folder, relative to the work folder
    assert source == f"parquet:{batch / 'batch.parquet'}"
    status, table, hist, failures = dataset.show(ws, source, "temporal_coverage > 0.5", "rel_path", False)
    assert table["rel_path"].tolist() == ["b.mp4"]
    assert "3 videos (2 done, 1 failed)" in status and "**1** match" in status
    assert failures.empty and list(hist.data[0].x) == [500]
    status, table, _, failures = dataset.show(ws, source, "", "valid_tokens", True)
    assert table["rel_path"].tolist() == ["a.mp4", "b.mp4", "c.mp4"]
    assert failures["path"].tolist() == ["/d/c.mp4"]


def test_bad_paths_filters_and_failed_videos_are_one_line_errors(ws, tmp_path: Path) -> None:
    write_summary_parquet(ROWS, ws.output_root / "batch.parquet")
    with pytest.raises(gr.Error, match="is outside the allowed folders"):
        dataset.open_parquet(ws, str(tmp_path / "elsewhere" / "batch.parquet"))
    with pytest.raises(gr.Error, match="does not exist"):
        dataset.open_parquet(ws, "missing.parquet")
    source = dataset.open_parquet(ws, "batch.parquet")
    with pytest.raises(gr.Error, match="only the summary table"):
        dataset.show(ws, source, "valid_tokens > (SELECT count(*) FROM runs)", None, False)
    with pytest.raises(gr.Error, match="no video stream in file"):
        dataset.open_video(ws, source, "/d/c.mp4")
    with pytest.raises(gr.Error, match="Open a batch first"):
        dataset.show(ws, "", "", None, False)
