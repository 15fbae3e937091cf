"""HTML fragments of the Inspect tab: the viewer's stage and tools, info line, groups table and key map."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from app.tabs.inspect.routes import ViewSettings
    from backend.pipeline import RunResult

TOOLS_HTML = """
<div id="frame_tools">
  <button id="zoom_out_btn" title="zoom out (−)">−</button>
  <button id="zoom_in_btn" title="zoom in (+, wheel)">+</button>
  <button id="zoom_fit_btn" title="fit (0)">fit</button>
  <label id="native_toggle" title="decode the source frame at its own size when zoomed in">
    <input type="checkbox" checked> native pixels when zoomed</label>
  <span id="frame_mode"></span>
  <span class="lens-sep"></span>
  <button id="play_btn" title="play / pause (Space)">▶ play</button>
  <select id="play_rate" title="frames per second">
    <option>1</option><option>2</option><option selected>4</option>
    <option>8</option><option>15</option><option>30</option>
  </select> fps
  <span class="lens-sep"></span>
  <button id="set_b_btn" title="remember the current run and layers as B">set B</button>
  <button id="flip_btn" title="A/B flip (b)">A/B flip</button> <span id="b_label"></span>
</div>
"""


def frame_url(run_id: str, row: int, view: ViewSettings) -> str:
    """The app-relative URL of one rendered frame (the same one the browser builds, page.js)."""
    layers = view.layers if isinstance(view.layers, str) else ",".join(view.layers)
    q = {"run": run_id, "row": str(int(row)), "l": layers, "o": str(view.opacity), "c": view.colormap}
    q |= {"s": view.scale, "h": view.heat}
    return "lens/frame?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in q.items())


def frame_html(url: str | None, result: RunResult | None = None) -> str:
    """The viewer: the frame image in a zoomable stage, with the hover and pinned block outlines.

    The image carries the processed size (``data-pw/ph``), the source size (``data-nw/nh``)
    and the display aspect (``data-dar``: an anamorphic video is shown stretched to it).
    """
    if url is None or result is None:
        return '<div id="frame_empty">No run open. Choose a video in the Run tab.</div>'
    h, w = result.geometry.processed_hw
    info = result.info
    data = f'data-pw="{w}" data-ph="{h}" data-nw="{info.width}" data-nh="{info.height}"'
    data += f' data-dar="{info.display_aspect:.6f}"'
    return (
        '<div id="frame_stage" data-vh="0.46"><div id="frame_zoom">'
        f'<img id="frame_img" src="{html.escape(url)}" alt="frame" draggable="false" {data}>'
        '<div id="block_hover" class="lens-box"></div><div id="block_pin" class="lens-box lens-pin"></div>'
        "</div></div>"
    )


def info_html(inner: str) -> str:
    """The info line's holder (the browser replaces ``#frame_info_text``'s content on every frame step)."""
    return f'<div id="frame_info_text">{inner}</div>'


def _shown(value: Any) -> Any:
    """A table cell as read: floats to four significant digits, whole ones without decimals (a
    readiness threshold of 176242.20957880435 reads 176242; 0.5312 stays 0.5312)."""
    if not isinstance(value, float) or not math.isfinite(value) or value == 0:
        return value
    digits = max(0, 3 - math.floor(math.log10(abs(value))))
    return round(value) if digits == 0 else round(value, digits)


GROUP_COLUMNS: dict[str, str] = {
    "group_index": "group",
    "candidate_start": "cand.<br>start",
    "candidate_end": "cand.<br>end",
    "first_frame_index": "first<br>frame",
    "last_frame_index": "last<br>frame",
    "length": "cands",
    "anchor_frame_index": "anchor<br>frame",
    "stop_reason": "stop reason",
    "threshold": "threshold",
    "kept_blocks": "kept<br>blocks",
    "skipped": "skipped",
}
"""Header of each groups-table column: short words on two lines, so all eleven fit the half-width
column the table sits in; each header's tooltip is the field's name (views.inspector.group_stepper)."""
GROUP_COLUMN_NOTES: dict[str, str] = {
    "candidate_start": "first candidate row",
    "candidate_end": "candidate row after the last, exclusive",
    "length": "candidates in the group",
    "threshold": "readiness threshold its trace used",
    "skipped": "not selected from (parity profile)",
}
# Inline: the page's stylesheet (app.main.CSS) keeps table cells on one line, which is what made
# the row wider than its column. Headers and the stop reason may wrap; numbers stay whole.
_TABLE_STYLE = "width: 100%; font-size: 12px"
_HEAD_STYLE = (
    "white-space: normal; vertical-align: bottom; hyphens: manual; line-height: 1.15; padding: 2px 3px"
)
_CELL_STYLE = "padding: 2px 3px"
_WRAP_STYLE = f"{_CELL_STYLE}; white-space: normal; text-align: left"


def _cell(key: str, value: Any) -> str:
    """One table cell: numbers as :func:`_shown` reads them, yes/no for flags, – for none, the
    stop reason breakable after its underscores (it keeps them: it is the stored name)."""
    if key == "stop_reason":
        text = "_<wbr>".join(html.escape(part) for part in str(value).split("_"))
        return f'<td style="{_WRAP_STYLE}">{text}</td>'
    if isinstance(value, bool):
        text = "yes" if value else "no"
    else:
        text = "–" if value is None else html.escape(str(_shown(value)))
    return f'<td style="{_CELL_STYLE}">{text}</td>'


def groups_table_html(rows: list[dict[str, Any]], current: int | None = None) -> str:
    """The groups table (one row per group, every field of
    ``views.inspector.group_stepper.prepare_group_table``, headed by :data:`GROUP_COLUMNS`), the
    viewed group's row marked; the page moves the mark as the viewer moves (inspect_src.js)."""
    if not rows:
        return '<div class="lens-groups">No groups.</div>'
    head = ""
    for key in rows[0]:
        tip = key + (f" ({GROUP_COLUMN_NOTES[key]})" if key in GROUP_COLUMN_NOTES else "")
        label = GROUP_COLUMNS.get(key, html.escape(key))
        head += (
            f'<th title="{html.escape(tip)}" data-key="{html.escape(key)}" style="{_HEAD_STYLE}">{label}</th>'
        )
    body = ""
    for r in rows:
        mark = ' class="lens-current"' if r["group_index"] == current else ""
        cells = "".join(_cell(k, v) for k, v in r.items())
        body += f'<tr data-group="{r["group_index"]}"{mark}>{cells}</tr>'
    table = f'<table style="{_TABLE_STYLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    return f'<div class="lens-groups">{table}</div>'


def key_map_html() -> str:
    """The key map (hidden until ``?``; a second ``?`` hides it again)."""
    from views.inspector import navigation

    items = "".join(f"<li><kbd>{html.escape(k)}</kbd> {html.escape(d)}</li>" for k, d in navigation.KEY_MAP)
    return f"<b>Keys</b> (press <kbd>?</kbd> again to hide)<ul>{items}</ul>"
