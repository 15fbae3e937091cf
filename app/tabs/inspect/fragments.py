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


def groups_table_html(rows: list[dict[str, Any]], current: int | None = None) -> str:
    """The groups table (one row per group, numbers as :func:`_shown` reads them), the viewed
    group's row marked; the page moves the mark as the viewer moves (inspect_src.js)."""
    if not rows:
        return '<div class="lens-groups">No groups.</div>'
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = ""
    for r in rows:
        mark = ' class="lens-current"' if r["group_index"] == current else ""
        cells = "".join(f"<td>{html.escape(str(_shown(v)))}</td>" for v in r.values())
        body += f'<tr data-group="{r["group_index"]}"{mark}>{cells}</tr>'
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="lens-groups">{table}</div>'


def key_map_html() -> str:
    """The key map (hidden until ``?``; a second ``?`` hides it again)."""
    from views.inspector import navigation

    items = "".join(f"<li><kbd>{html.escape(k)}</kbd> {html.escape(d)}</li>" for k, d in navigation.KEY_MAP)
    return f"<b>Keys</b> (press <kbd>?</kbd> again to hide)<ul>{items}</ul>"
