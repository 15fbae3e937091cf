"""Dataset views: a batch's summary rows as a table, histograms, the failures and a status line."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

TABLE_COLUMNS: tuple[str, ...] = (
    "rel_path",
    "status",
    "selector_used",
    "fallback_reason",
    "codec_name",
    "width",
    "height",
    "duration_secs",
    "frames",
    "groups",
    "canvases",
    "tokens",
    "valid_tokens",
    "temporal_coverage",
    "longest_never_observed_secs",
    "never_observed_fraction",
    "video_max_staleness_frames",
    "kept_score_fraction",
    "warnings",
    "seconds",
    "error",
    "run_id",
    "path",
)
"""What the table shows, in order; ``path`` last (the key a row click opens). The columns are the
SQL filter's names and hold its values: ``temporal_coverage``, ``never_observed_fraction`` and
``kept_score_fraction`` are shares 0–1 (views.wording.SHARE_CONVENTION), as
``temporal_coverage < 0.2`` compares them; the audit columns are defined in docs/audit.md."""
HISTOGRAMS: tuple[tuple[str, str], ...] = (
    ("tokens", "valid tokens"),
    ("temporal_coverage", "temporal_coverage (share, 0–1)"),
    ("seconds", "seconds per video"),
)
"""(column, axis title) of each histogram; ``tokens`` counts valid tokens (padding left out),
``temporal_coverage`` is the share of the video's frames with a valid token."""
_HIST_COLUMN = {"tokens": "valid_tokens"}
_BINS = 30
_STYLE: dict[str, Any] = {"template": "plotly_white", "margin": {"l": 50, "r": 20, "t": 50, "b": 40}}
STATUS_ORDER = ("done", "skipped", "failed")


def prepare_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows as the table shows them: :data:`TABLE_COLUMNS`, floats rounded, empty cells blank.

    Parameters
    ----------
    rows : summary rows (``backend.store.SUMMARY_COLUMNS``), one per video.
    """
    table = rows.reindex(columns=list(TABLE_COLUMNS)).copy()
    rounded = (
        ("duration_secs", 2),
        ("temporal_coverage", 3),
        ("longest_never_observed_secs", 3),
        ("never_observed_fraction", 3),
        ("kept_score_fraction", 3),
        ("seconds", 2),
    )
    for column, digits in rounded:
        table[column] = pd.to_numeric(table[column], errors="coerce").round(digits)
    return table.astype(object).where(table.notna(), "")


def prepare_failures(rows: pd.DataFrame) -> pd.DataFrame:
    """The failed videos, (path, error), in table order."""
    failed = rows[rows["status"] == "failed"] if len(rows) else rows
    return failed.reindex(columns=["path", "error"]).reset_index(drop=True).fillna("")


def _values(rows: pd.DataFrame, column: str) -> np.ndarray:
    kept = rows[rows["status"].isin(("done", "skipped"))] if len(rows) else rows
    values = pd.to_numeric(kept.get(_HIST_COLUMN.get(column, column)), errors="coerce")
    array = np.asarray(values, dtype=np.float64) if values is not None else np.zeros(0)
    return array[np.isfinite(array)]


def prepare_histograms(rows: pd.DataFrame) -> go.Figure:
    """One histogram per :data:`HISTOGRAMS` column over the videos with an output (done or skipped).

    Returns
    -------
    Figure with three side-by-side subplots, each one ``go.Histogram`` trace named after its
    column (x = the column's values, y = videos), ``meta.counts`` = values drawn per column.
    """
    fig = make_subplots(rows=1, cols=len(HISTOGRAMS), subplot_titles=[title for _, title in HISTOGRAMS])
    counts = {}
    for k, (column, title) in enumerate(HISTOGRAMS, start=1):
        values = _values(rows, column)
        counts[column] = int(values.size)
        fig.add_trace(
            go.Histogram(
                x=values,
                nbinsx=_BINS,
                name=column,
                marker_color="#4c78a8",
                hovertemplate=f"{title} %{{x}}: %{{y}} videos<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=k,
        )
        fig.update_xaxes(title_text=title, row=1, col=k)
        fig.update_yaxes(title_text="videos" if k == 1 else None, row=1, col=k)
    fig.update_layout(height=300, bargap=0.05, meta={"counts": counts}, **_STYLE)
    return fig


def prepare_status(rows: pd.DataFrame, *, shown: int, source: str, where: str = "") -> str:
    """A markdown line: what is open, how many videos by status, how many the filter shows."""
    total = len(rows)
    by_status = rows["status"].value_counts().to_dict() if total else {}
    parts = [f"{int(by_status.get(s, 0))} {s}" for s in STATUS_ORDER if by_status.get(s)]
    seconds = pd.to_numeric(rows.get("seconds"), errors="coerce") if total else None
    mean = float(seconds.mean()) if seconds is not None and seconds.notna().any() else math.nan
    cost = f" · {mean:.2f} s per video" if math.isfinite(mean) else ""
    filtered = f" · **{shown}** match `{where}`" if where else ""
    return f"**{source}**: {total} videos ({', '.join(parts) or 'none'}){cost}{filtered}"


def dataset_choices(datasets: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, dataset id) of each stored dataset, newest first: its folder and its counts."""
    out = []
    for row in datasets.itertuples(index=False):
        label = (
            f"{row.out_dir} · {row.videos} videos ({row.done} done, {row.failed} failed, "
            f"{row.skipped} skipped) · {row.selector} · {row.updated_at:%Y-%m-%d %H:%M}"
        )
        out.append((label, str(row.dataset_id)))
    return out
