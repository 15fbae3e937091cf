"""Inspect tab: the frame viewer with its layers and readouts, frame steps, plots, groups, re-selection.

``layout`` builds the components, ``handlers`` holds the events' plain functions, ``routes`` the
frame routes' (``/lens/frame``, ``/lens/native``, ``/lens/info``, ``/lens/block``), ``live`` the
``/lens/reselect`` route, ``wiring`` the events; ``fragments`` the HTML they share.
"""

from __future__ import annotations

from app.tabs.inspect.handlers import (
    VIEW_OUTPUTS,
    LastViewed,
    ViewOutputs,
    follow_group,
    info_of,
    jump,
    legends_of,
    open_view,
    pick_block,
    result_of,
    show_group,
    show_run,
    step,
    summary_of,
)
from app.tabs.inspect.layout import InspectTab, SharedControls, build_inspect_tab, build_shared_controls
from app.tabs.inspect.live import LIVE_OPTIONS, LiveRoute, reselect_live, reselect_route
from app.tabs.inspect.routes import (
    JPEG_CACHE_BYTES,
    CodecSides,
    FrameRequest,
    SourceFrames,
    ViewSettings,
    block_fragment,
    info_fragment,
    render_jpeg,
    warm_frame,
)
from app.tabs.inspect.wiring import wire_inspect_tab

__all__ = [
    "JPEG_CACHE_BYTES",
    "LIVE_OPTIONS",
    "VIEW_OUTPUTS",
    "CodecSides",
    "FrameRequest",
    "InspectTab",
    "LastViewed",
    "LiveRoute",
    "SharedControls",
    "SourceFrames",
    "ViewOutputs",
    "ViewSettings",
    "block_fragment",
    "build_inspect_tab",
    "build_shared_controls",
    "follow_group",
    "info_fragment",
    "info_of",
    "jump",
    "legends_of",
    "open_view",
    "pick_block",
    "render_jpeg",
    "reselect_live",
    "reselect_route",
    "result_of",
    "show_group",
    "show_run",
    "step",
    "summary_of",
    "warm_frame",
    "wire_inspect_tab",
]
