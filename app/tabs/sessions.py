"""Sessions panel of the Run tab: the stored runs, reopening one where its viewer was left, imports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.static import press_if_shown_js
from app.tabs.common import reported, ui_error
from app.tabs.import_panel import build_import_panel
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace
    from backend.store.runs import RunRow

RUN_HEADERS = [
    "run_id",
    "video",
    "selector",
    "profile",
    "status",
    "created",
    "parent",
    "change",
    "warnings",
]


def _by_video(rows: list[RunRow]) -> list[RunRow]:
    """Runs grouped by video, the video with the newest run first, each video's runs newest first
    (``rows`` come newest first)."""
    first_seen: dict[str, int] = {}
    for k, r in enumerate(rows):
        first_seen.setdefault(r.video_path, k)
    return sorted(rows, key=lambda r: first_seen[r.video_path])  # stable: newest first within


def runs_table(ws: Workspace) -> list[list[Any]]:
    """One row per stored run (columns :data:`RUN_HEADERS`), grouped by video, newest first;
    ``change`` says what a re-selection changed against its parent."""
    from backend.runs.labels import change_labels

    rows = _by_video(ws.store.list_runs())
    changed = change_labels(rows)
    return [
        [
            r.run_id,
            Path(r.video_path).name,
            r.selector,
            r.profile,
            r.status,
            f"{r.created_at:%Y-%m-%d %H:%M:%S}",
            r.parent_run_id or "",
            changed[r.run_id],
            len(r.warnings),
        ]
        for r in rows
    ]


def _choice_label(row: list[Any], col: dict[str, int]) -> str:
    """A stored run as the picker lists it: its id first (typing it filters), its video, selector,
    profile and time, and for a re-selection what it changed."""
    parts = [str(row[col[c]]) for c in ("run_id", "video", "selector", "profile", "created")]
    if row[col["parent"]]:
        parts.append(f"from {row[col['parent']]}: {row[col['change']]}")
    return " · ".join(parts)


def sessions_update(ws: Workspace, selected: str | None = None) -> tuple[Any, Any]:
    """The runs table and the stored-run choices (finished runs, grouped by video, newest first;
    the picker filters on what is typed: a run id, a video name, an option), keeping ``selected``
    if it is one."""
    table = runs_table(ws)
    col = {name: i for i, name in enumerate(RUN_HEADERS)}
    done = [(_choice_label(r, col), r[0]) for r in table if r[col["status"]] == "done"]
    value = selected if selected in {v for _, v in done} else None
    return gr.update(value=table), gr.update(choices=done, value=value)


def save_view(ws: Workspace, run_id: str, row: float, layers: list[str], opacity: float, cmap: str) -> None:
    """Remember where run ``run_id``'s viewer is (no-op without a run)."""
    if run_id:
        ws.store.save_view(run_id, {"row": int(row), "layers": layers, "opacity": opacity, "colormap": cmap})


def open_stored(
    ws: Workspace, current: str, chosen: str | None, row: float, layers: list[str], opacity: float, cmap: str
) -> str:
    """Remember where the open run's viewer is, then switch to ``chosen``."""
    if not chosen:
        raise gr.Error("Choose a stored run to open.")
    try:
        save_view(ws, current, row, layers, opacity, cmap)
        ws.result(chosen)  # fails here, with the previous run still shown, if it cannot open
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    return chosen


def page_load(ws: Workspace, run_id: str | None) -> tuple[Any, ...]:
    """What a new page starts with: the run to open, the runs table and the choices."""
    return (run_id or "", *sessions_update(ws, run_id))


@dataclass
class SessionsPanel:
    open_pick: gr.Dropdown
    open_btn: gr.Button
    refresh_btn: gr.Button
    runs: gr.Dataframe
    status: gr.Markdown
    """Why Open did not open the chosen run (empty after one it opened)."""


def build_sessions_panel(ws: Workspace, run_id: gr.Textbox) -> SessionsPanel:
    """The stored-run picker, the import panel and the runs table, in the caller's context."""
    gr.Markdown("### Sessions")
    with gr.Row():
        open_pick = gr.Dropdown([], label="Stored run", elem_id="open_pick", scale=3)
        open_btn = gr.Button("Open", elem_id="open_btn", scale=1)
        refresh_btn = gr.Button("Refresh", elem_id="refresh_btn", scale=1)
    status = gr.Markdown("", elem_id="open_status")
    with gr.Accordion("Import a codec-video-prep output directory", open=False):
        build_import_panel(ws, run_id)
    runs = gr.Dataframe(headers=RUN_HEADERS, label="Runs", interactive=False, elem_id="runs_table")
    return SessionsPanel(
        open_pick=open_pick, open_btn=open_btn, refresh_btn=refresh_btn, runs=runs, status=status
    )


def wire_sessions_panel(
    ws: Workspace,
    run_id: gr.Textbox,
    panel: SessionsPanel,
    view_controls: list[gr.Component],
    tab: gr.Tab | None = None,
) -> None:
    """Refresh and Open; ``view_controls`` (row, layers, opacity, colormap) are saved on Open.

    Whatever opened a run (Run, Import, Open, a live re-selection, the page load), the runs table
    and the stored-run choice follow it: at once while the panel is on screen, else when ``tab``
    (the tab holding it) is opened.
    """
    # A refresh takes milliseconds: no progress bar over the list (it covered the stored-run choice).
    for event in [panel.refresh_btn.click, *([tab.select] if tab is not None else [])]:
        event(
            lambda rid: sessions_update(ws, rid),
            run_id,
            [panel.runs, panel.open_pick],
            api_name=False,
            show_progress="hidden",
        )
    run_id.change(None, None, None, js=press_if_shown_js("#runs_table", "#refresh_btn"), api_name=False)

    def on_open(current: str, chosen: str | None, row: float, lay: list[str], op: float, cm: str):
        return open_stored(ws, current, chosen, row, lay, op, cm), ""

    # A run that cannot open says why next to Open; the open run stays (common.reported).
    panel.open_btn.click(
        reported(on_open, [run_id, panel.status], panel.status),
        [run_id, panel.open_pick, *view_controls],
        [run_id, panel.status],
        api_name=False,
    )
