"""Gradio app composition: the page's tabs over one Workspace, wired together."""

from __future__ import annotations

import atexit
import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.workers import WorkerPool
    from app.workspace import Workspace

# Hidden, not invisible: Gradio leaves visible=False components out of the page, and the
# key handler must be able to click them.
CSS = """
#hidden_controls, #compare_hidden, #canvas_follow { display: none !important; }
#frame_stage { position: relative; overflow: hidden; margin: 0 auto; background: #111; cursor: crosshair; }
#frame_zoom { position: relative; width: 100%; height: 100%; transform-origin: 0 0; }
#frame_img { width: 100%; height: 100%; display: block; user-select: none; -webkit-user-drag: none; }
.lens-box { position: absolute; display: none; pointer-events: none; box-sizing: border-box;
  border: 2px dashed #ffffff; box-shadow: 0 0 0 1px #000; }
.lens-box.lens-pin { border: 2px solid #00ff66; }
#frame_tools { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; font-size: 13px; }
#frame_tools button { padding: 1px 8px; border: 1px solid #bbb; border-radius: 4px; background: #f4f4f4; }
#frame_tools .lens-sep { width: 10px; }
#frame_mode, #b_label { color: #666; }
#frame_info_text { font-size: 14px; padding: 4px 0; }
#key_map { display: none; }
/* The readout column keeps its layout while the cursor reads blocks and the key map opens: the
   readout's room is reserved (one block's table, scrolled when a codec's cells make it taller) and
   the key map lies over the legends instead of pushing the layer controls down (issue 27). */
#readout_col { position: relative; }
#block_info { height: 250px; overflow-y: auto; }
#pixel_info { min-height: 24px; }
#key_map.lens-open { display: block; position: absolute; left: 0; right: 0; z-index: 20;
  border: 1px solid #ccc; padding: 6px; background: var(--background-fill-primary, #fff);
  box-shadow: 0 4px 12px rgba(0, 0, 0, 0.2); }
.lens-readout, .lens-cells { border-collapse: collapse; font-size: 13px; }
.lens-readout th { text-align: left; padding: 2px 8px 2px 0; vertical-align: top; white-space: nowrap; }
.lens-readout td { padding: 2px 0; }
.lens-cells td { border: 1px solid #ccc; padding: 1px 5px; text-align: right; font-family: monospace; }
.lens-kept { color: #c02000; } .lens-lost { color: #a07000; } .lens-none { color: #555; }
.lens-swatch { display: inline-block; width: 12px; height: 12px; vertical-align: middle;
  border: 1px solid #888; }
.lens-legend { font-size: 12px; line-height: 1.5; }
.lens-legend .lens-off { opacity: 0.45; }
.lens-bar { height: 14px; border: 1px solid #888; }
.lens-heat { font-size: 12px; }
.lens-heat-range { display: flex; justify-content: space-between; }
#run_status { min-height: 2.5em; }
.lens-groups { max-height: 420px; overflow: auto; font-size: 13px; }
.lens-groups table { border-collapse: collapse; }
.lens-groups th { position: sticky; top: 0; background: #f4f4f4; text-align: left; }
.lens-groups th, .lens-groups td { border: 1px solid #ddd; padding: 2px 6px; white-space: nowrap; }
.lens-groups td { text-align: right; font-variant-numeric: tabular-nums; }
.lens-groups tr.lens-current td { background: #fff4c2; }
"""


def start_pool(ws: Workspace) -> WorkerPool:
    """The worker pool of ``ws``, started on first use: every native decode or encode of a handler
    runs in it (app.workers). Stopped by :func:`stop_pool`, at the latest when the process exits.
    """
    from app.workers import WorkerPool

    if ws.pool is None:
        ws.pool = WorkerPool()
        atexit.register(stop_pool, ws)
    return ws.pool


def stop_pool(ws: Workspace) -> None:
    """Stop the worker pool of ``ws`` (queued jobs fail, running ones are ended); handlers called
    afterwards run their jobs in-process."""
    pool, ws.pool = ws.pool, None
    if pool is not None:
        pool.stop()


def build_app(ws: Workspace, *, run_id: str | None = None) -> Any:
    """Blocks for the whole app over ``ws``, opened on stored run ``run_id`` (or empty); starts
    the worker pool of ``ws`` (:func:`start_pool`).

    The Blocks also carry what the server's frame routes call (``lens_render_jpeg``,
    ``lens_render_native``, ``lens_info``, ``lens_block``, ``lens_reselect``) and their JPEG
    cache (``lens_cache``).
    """
    import gradio as gr

    from app.tabs import canvases, compare, dataset, inspect, luma, option_form, run, sessions
    from views.inspector.frame_cache import JpegCache

    start_pool(ws)
    cache = JpegCache(budget_bytes=inspect.JPEG_CACHE_BYTES)
    sources = inspect.SourceFrames(ws)
    sides = inspect.CodecSides(ws)
    with gr.Blocks(title="Codec Lens", delete_cache=(600, 1200)) as demo:
        gr.Markdown("### Codec Lens · what the codec-native selector kept, and why. Press `?` for keys.")
        shared = inspect.build_shared_controls()
        with gr.Tabs() as tabs:
            with gr.Tab("Inspect", id="inspect"):
                inspect_tab = inspect.build_inspect_tab(ws, shared)
            with gr.Tab("Canvases", id="canvases") as canvas_tab:
                canvases.build_canvas_tab(ws, shared.run_id, canvas_tab, inspect_tab.slider)
            with gr.Tab("Compare codecs & selectors", id="compare"):
                compare.build_compare_tab(ws)
            with gr.Tab("Luma bias", id="luma"):
                luma.build_luma_tab(ws)
            with gr.Tab("Run", id="run") as run_tab_item:
                run_tab = run.build_run_tab(ws, shared.run_id)
            with gr.Tab("Dataset", id="dataset"):
                dataset.build_dataset_tab(ws, shared.run_id, tabs)

        # Across tabs: opening a run fills the Run tab's path and options; a run or a reopened
        # session saves the viewer of the run it replaces.
        layout = option_form.OptionLayout.of(run_tab)
        # A new page opens the run a page showed last (the start run until one did).
        viewed = inspect.LastViewed(fallback=run_id)
        live_route = inspect.wire_inspect_tab(ws, shared, inspect_tab, run_tab.video_path, layout, viewed)
        run.wire_run_tab(ws, shared.run_id, run_tab, inspect_tab, shared.run_options)
        sessions.wire_sessions_panel(
            ws, shared.run_id, run_tab.sessions, inspect_tab.view_controls[:4], run_tab_item
        )
        demo.load(
            lambda: sessions.page_load(ws, viewed.to_open(ws)),
            None,
            [shared.run_id, run_tab.sessions.runs, run_tab.sessions.open_pick],
            api_name=False,
        )
        # Served by app.server.
        demo.lens_render_jpeg = functools.partial(inspect.render_jpeg, ws, cache, sides=sides)
        demo.lens_render_native = functools.partial(
            inspect.render_jpeg, ws, cache, sides=sides, sources=sources
        )
        demo.lens_info = functools.partial(inspect.info_fragment, ws)
        demo.lens_block = functools.partial(inspect.block_fragment, ws, sources)
        demo.lens_reselect = functools.partial(inspect.reselect_route, ws, live_route)
        demo.lens_cache = cache  # kept on the Blocks for benches
        ws.warm_frame = functools.partial(inspect.warm_frame, ws, cache)
    return demo
