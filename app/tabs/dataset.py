"""Dataset tab: open a batch (its batch.parquet or a stored dataset), filter it with SQL, open a video."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from app.tabs.common import reported, ui_error
from backend.errors import CodecLensError, InputError
from backend.store import SUMMARY_NAMES, filter_summary, read_summary_parquet
from views import dataset as dv

if TYPE_CHECKING:
    from app.workspace import Workspace

PARQUET = "parquet:"
DATASET = "dataset:"
SUMMARY_FILE = "batch.parquet"  # backend.batch.SUMMARY_FILE (not imported: it loads the pipeline)
WHERE_HELP = (
    "A SQL condition over the columns, e.g. `status = 'done' AND temporal_coverage < 0.2` or "
    "`warning_codes LIKE '%double_resize%'`. It reads only this batch's rows (table `videos`); "
    "no `;`, no comments, no other tables."
)


def _source_parts(source: str) -> tuple[str, str]:
    for prefix in (PARQUET, DATASET):
        if source.startswith(prefix):
            return prefix, source[len(prefix) :]
    raise gr.Error("Open a batch first: its batch.parquet, or a stored dataset.")


def source_rows(ws: Workspace, source: str) -> tuple[pd.DataFrame, Path]:
    """The summary rows of an opened batch and the batch's output folder."""
    kind, value = _source_parts(source)
    if kind == PARQUET:
        path = Path(value)
        return read_summary_parquet(path), path.parent
    rows = ws.store.dataset_rows(value)
    found = ws.store.list_datasets()
    out_dir = found.loc[found["dataset_id"] == value, "out_dir"]
    return rows, Path(str(out_dir.iloc[0])) if len(out_dir) else Path()


def open_parquet(ws: Workspace, text: str) -> str:
    """The source id of a batch summary typed as a path (the file, or the batch folder holding it)."""
    try:
        path = ws.input_path(text)
        if path.is_dir():
            path = path / SUMMARY_FILE
        read_summary_parquet(path)  # refuse now, not at the first filter
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    return PARQUET + str(path)


def open_dataset(ws: Workspace, dataset_id: str | None) -> str:
    """The source id of a stored dataset."""
    if not dataset_id:
        raise gr.Error("Choose a stored dataset to open.")
    return DATASET + dataset_id


def stored_choices(ws: Workspace) -> Any:
    """The stored-dataset dropdown's choices (newest first)."""
    return gr.update(choices=dv.dataset_choices(ws.store.list_datasets()))


def show(
    ws: Workspace, source: str, where: str, sort: str | None, descending: bool
) -> tuple[str, pd.DataFrame, Any, pd.DataFrame]:
    """Status line, filtered and sorted table, histograms and failures of the opened batch.

    The histograms and failures follow the filter too, so a condition narrows every view.
    """
    try:
        rows, _ = source_rows(ws, source)
        shown = filter_summary(rows, where=where or "", order_by=sort or None, descending=bool(descending))
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc
    kind, value = _source_parts(source)
    label = value if kind == PARQUET else f"dataset {value}"
    status = dv.prepare_status(rows, shown=len(shown), source=label, where=(where or "").strip())
    return status, dv.prepare_table(shown), dv.prepare_histograms(shown), dv.prepare_failures(shown)


def open_and_show(
    ws: Workspace, source_of: Any, given: Any, where: str, sort: str | None, descending: bool
) -> tuple[Any, ...]:
    """Open a batch (``source_of(ws, given)``: :func:`open_parquet` or :func:`open_dataset`) and show
    it: its source id, then :func:`show`'s status line, table, histograms and failures."""
    source = source_of(ws, given)
    return (source, *show(ws, source, where, sort, descending))


def cleared_views() -> tuple[pd.DataFrame, None, pd.DataFrame]:
    """An empty table, no histograms and no failures: what a refused filter or batch leaves, so
    that no result of an earlier condition is taken for this one's."""
    return pd.DataFrame(columns=list(dv.TABLE_COLUMNS)), None, pd.DataFrame(columns=["path", "error"])


def _stored_options(folder: Path) -> Any:
    """The selector options a video's output folder was made with (its codec_lens.json, which
    names the selector unless it is cvp)."""
    from backend.selectors import options_for

    try:
        done = json.loads((folder / "codec_lens.json").read_text())
        given, selector = done["options"], done.get("selector", "cvp")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError("has no complete batch output to reopen", path=folder, stage="dataset") from exc
    return options_for(selector, given)


def open_video(ws: Workspace, source: str, path: str) -> tuple[str, str]:
    """The run id of a batch video for the inspector, and a status line.

    A run the batch stored in this app's session file (``--session-db``) opens as it is; any
    other finished video runs again here with the options of its output folder.
    """
    from app.workspace import ensure_run

    rows, out_dir = source_rows(ws, source)
    match = rows[rows["path"] == path]
    if not len(match):
        raise gr.Error(f"{path}: not in this batch")
    row = match.iloc[0]
    name = Path(path).name
    if row["status"] == "failed":
        raise gr.Error(f"{row['error']} (the batch produced no output for it)")
    try:
        run_id = row["run_id"] if isinstance(row["run_id"], str) else ""
        if run_id and ws.store.done_runs([run_id]):
            ws.result(run_id)  # fails here, with the previous run still shown, if it cannot open
            return run_id, f"Opened **{name}**: run `{run_id}` stored by the batch."
        options = _stored_options(out_dir / str(row["output_dir"]))
        run_id = ensure_run(ws, path, options)
    except (CodecLensError, ValueError) as exc:
        raise ui_error(exc, single_line=True) from exc
    note = "run again here: the batch did not store it in this session file"
    return run_id, f"Opened **{name}**: run `{run_id}` ({note})."


@dataclass
class DatasetTab:
    source: gr.Textbox
    table: gr.Dataframe
    status: gr.Markdown


def build_dataset_tab(ws: Workspace, run_id: gr.Textbox, tabs: gr.Tabs) -> DatasetTab:
    """The tab's components and events; a click on a row puts its run in ``run_id`` and shows
    the Inspect tab of ``tabs``."""
    gr.Markdown(
        "### Datasets\nA batch's videos (`codec-lens batch`): filter, sort, find the ones that went wrong."
    )
    with gr.Row():
        path = gr.Textbox(
            label="Batch summary",
            placeholder="batch.parquet, or the batch's output folder",
            elem_id="ds_path",
            scale=4,
        )
        open_path = gr.Button("Open", elem_id="ds_open_path", scale=1)
    with gr.Row():
        pick = gr.Dropdown(
            dv.dataset_choices(ws.store.list_datasets()),
            label="Stored dataset (batch --session-db)",
            elem_id="ds_pick",
            scale=4,
        )
        open_pick = gr.Button("Open", elem_id="ds_open_pick", scale=1)
        refresh = gr.Button("Refresh", elem_id="ds_refresh", scale=1)
    source = gr.Textbox(visible="hidden", elem_id="ds_source")
    status = gr.Markdown(elem_id="ds_status")
    with gr.Row():
        where = gr.Textbox(
            label="WHERE", placeholder="tokens < 2000 AND status = 'done'", elem_id="ds_where", scale=4
        )
        sort = gr.Dropdown(list(SUMMARY_NAMES), value="rel_path", label="Sort by", elem_id="ds_sort", scale=2)
        descending = gr.Checkbox(False, label="descending", elem_id="ds_desc", scale=1)
        apply = gr.Button("Apply", variant="primary", elem_id="ds_apply", scale=1)
    gr.Markdown(WHERE_HELP)
    table = gr.Dataframe(
        headers=list(dv.TABLE_COLUMNS),
        interactive=False,
        elem_id="ds_table",
        label="Videos (click a row to open it in the inspector)",
        max_height=420,
    )
    opened = gr.Markdown(elem_id="ds_opened")
    hist = gr.Plot(elem_id="ds_hist", label="Histograms")
    failures = gr.Dataframe(
        headers=["path", "error"], interactive=False, elem_id="ds_failures", label="Failures"
    )

    outputs = [status, table, hist, failures]
    filters = [where, sort, descending]
    # A refused batch or filter: its reason in the status line (one toast), the views cleared
    # rather than left showing the last accepted result (common.reported).
    cleared = dict(zip([table, hist, failures], cleared_views(), strict=True))

    def render(src: str, w: str, s: str | None, d: bool) -> tuple[Any, ...]:
        return show(ws, src, w, s, d)

    def open_typed(text: str, w: str, s: str | None, d: bool) -> tuple[Any, ...]:
        return open_and_show(ws, open_parquet, text, w, s, d)

    def open_stored(dataset_id: str | None, w: str, s: str | None, d: bool) -> tuple[Any, ...]:
        return open_and_show(ws, open_dataset, dataset_id, w, s, d)

    for button, box, fn in ((open_path, path, open_typed), (open_pick, pick, open_stored)):
        button.click(
            reported(fn, [source, *outputs], status, on_error=cleared),
            [box, *filters],
            [source, *outputs],
            api_name=False,
        )
    refresh.click(lambda: stored_choices(ws), None, pick, api_name=False)
    for trigger in (apply.click, where.submit, sort.input, descending.input):
        trigger(
            reported(render, outputs, status, on_error=cleared), [source, *filters], outputs, api_name=False
        )

    def on_select(src: str, evt: gr.SelectData) -> tuple[str, Any, str]:
        values = list(evt.row_value or [])
        if len(values) != len(dv.TABLE_COLUMNS):
            raise gr.Error("Click a row of the table.")
        rid, message = open_video(ws, src, str(values[dv.TABLE_COLUMNS.index("path")]))
        return rid, gr.Tabs(selected="inspect"), message

    table.select(
        reported(on_select, [run_id, tabs, opened], opened),
        source,
        [run_id, tabs, opened],
        api_name=False,
        concurrency_limit=None,
    )
    return DatasetTab(source=source, table=table, status=status)
