"""The batch progress bar: done, failed, skipped, videos per minute and the time left."""

from __future__ import annotations

import io

from app.cli.batch import Progress


def _row(status: str, error: str | None = None) -> dict:
    return {"status": status, "error": error}


def test_the_bar_counts_rows_and_derives_rate_and_eta_from_the_elapsed_time() -> None:
    stream = io.StringIO()
    progress = Progress(5, stream=stream)
    assert progress.line().endswith("0/5 · done 0 · failed 0 · 0.0 videos/min · ETA ?")
    progress.started -= 60.0  # as if the first minute had passed
    progress.row(_row("done"))
    progress.row(_row("failed", "/v/b.mp4: cannot read video"))
    progress.row(_row("skipped"))
    line = progress.line()
    # 3 of 5 in ~60 s: ~3 videos a minute, the 2 left in ~40 s.
    assert "[##############..........] 3/5 · done 1 · failed 1 · skipped 1 · 3.0 videos/min" in line
    assert line.endswith("ETA 40s")
    text = stream.getvalue()  # not a terminal: a failure is its own line, and the bar is redrawn
    assert "failed: /v/b.mp4: cannot read video\n" in text
    assert "\r" not in text and "3.0 videos/min" not in text.splitlines()[0]
    progress.row(_row("done"))
    progress.row(_row("done"))
    assert stream.getvalue().splitlines()[-1].startswith("[########################] 5/5 · done 3")
