"""The frame viewer's own routes (registered by app.server): frame JPEGs at the processed or source size,
the info line and the block readout under the cursor. Plain functions of the workspace, testable without a
server."""

from __future__ import annotations

import html
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace
    from backend.pipeline import RunResult
    from backend.render import LayerOptions
    from views.inspector.frame_cache import JpegCache

JPEG_CACHE_BYTES = 128 << 20
PREFETCH_AHEAD = 4
PREFETCH_BEHIND = 2
DEFAULT_HEAT = "block"
SOURCE_FRAMES_KEPT = 6


@dataclass(frozen=True)
class ViewSettings:
    """The viewer's five settings as the page holds them, travelling together: what
    :meth:`options` turns into the renderer's :class:`backend.render.LayerOptions`.

    The layer names keep the page's order (the frame URL and the saved view carry them as the
    checkboxes hold them), which LayerOptions, a set of switches, does not; the values are checked
    only when drawn (:meth:`options` raises ValueError), as before.
    """

    layers: Sequence[str] | str
    """Layer names (backend.render.LAYER_NAMES) as a list, or comma-separated (the frame URL's)."""
    opacity: float
    """Heatmap weight in [0, 1]."""
    colormap: str
    scale: str
    """Heatmap scale: ``frame`` or ``video``."""
    heat: str = DEFAULT_HEAT
    """What the heatmap shows: ``block`` or ``signal``."""

    def options(self) -> LayerOptions:
        """The renderer's LayerOptions (ValueError for a value it does not support)."""
        from backend.render import layer_options as options_for

        heat = self.heat or DEFAULT_HEAT
        return options_for(
            self.layers, opacity=self.opacity, colormap=self.colormap, scale=self.scale, heat=heat
        )


INFO_VIEW = ViewSettings([], 0.5, "turbo", "frame")
"""The settings the info line is computed with (it names no layer)."""


@dataclass(frozen=True)
class FrameRequest:
    """One frame the page asks for (``/lens/frame``, ``/lens/native``)."""

    run_id: str
    row: int
    """The candidate row (ignored when ``frame`` is given)."""
    view: ViewSettings
    frame: str | None = None
    """A frame index: the candidate nearest it is shown instead (the A/B flip shows another run)."""
    codec: str = ""
    """Codec layers drawn over the frame (``mv``, ``qp``, comma-separated)."""


def checked_row(result: RunResult, row: int) -> None:
    n = int(result.candidates.frame_indices.size)
    if not 0 <= row < n:
        raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}")


def resolve_row(result: RunResult, row: int, frame: str | int | None) -> int:
    """``row``, or with ``frame`` (the A/B flip shows another run at the same frame) the row of
    the candidate nearest that frame."""
    from views.inspector.navigation import row_for_frame

    if frame not in (None, ""):
        return row_for_frame(result, frame, default_row=0)
    checked_row(result, row)
    return int(row)


class SourceFrames:
    """Source frames at their own size, decoded in the worker pool (app.jobs.source_frame) and
    kept for the last few (run, frame) pairs; one decode at a time."""

    def __init__(self, ws: Workspace, keep: int = SOURCE_FRAMES_KEPT) -> None:
        self._ws = ws
        self._keep = keep
        self._items: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._decode = threading.Lock()

    def get(self, run_id: str, frame_index: int) -> np.ndarray:
        from app import jobs
        from app.workers import run_job

        key = (run_id, int(frame_index))
        with self._decode:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    return self._items[key]
            info = self._ws.result(run_id).info
            frame = run_job(self._ws.pool, jobs.source_frame, info, int(frame_index), subject="native view")
            with self._lock:
                self._items[key] = frame
                while len(self._items) > self._keep:
                    self._items.popitem(last=False)
            return frame


class CodecSides:
    """Motion vectors and per-block QP of a run's candidates, read in one decode pass in the worker
    pool (app.jobs.codec_side_data) the first time a codec layer is asked for; a few runs kept."""

    def __init__(self, ws: Workspace, keep: int = 2) -> None:
        self._ws = ws
        self._keep = keep
        self._runs: OrderedDict[str, dict[int, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def frame(self, run_id: str, frame_index: int) -> dict[str, Any] | None:
        from app import jobs
        from app.workers import run_job

        with self._lock:
            if run_id not in self._runs:
                result = self._ws.result(run_id)
                frames = sorted({int(f) for f in result.candidates.frame_indices.tolist()})
                self._runs[run_id] = run_job(
                    self._ws.pool, jobs.codec_side_data, result.info, frames, subject="codec layers"
                )
                while len(self._runs) > self._keep:
                    self._runs.popitem(last=False)
            self._runs.move_to_end(run_id)
            return self._runs[run_id].get(int(frame_index))


def _with_codec_layers(
    image: np.ndarray, sides: CodecSides | None, run_id: str, result: RunResult, row: int, codec: str
) -> np.ndarray:
    from views.inspector.codec_layers import draw_codec_layers, parse_codec_layers

    layers = parse_codec_layers(codec)
    if not layers or sides is None:
        return image
    side = sides.frame(run_id, int(result.candidates.frame_indices[row]))
    return draw_codec_layers(image, side, (result.info.height, result.info.width), layers)


def render_jpeg(
    ws: Workspace,
    cache: JpegCache,
    request: FrameRequest,
    *,
    sides: CodecSides | None = None,
    sources: SourceFrames | None = None,
) -> bytes:
    """JPEG bytes of one frame for the frame routes: at the processed size (its neighbours go to
    the prefetcher), or with ``sources`` the candidate frame decoded at its source size (in a
    worker) with the layers drawn over it.

    ``request.codec``: codec layers (``mv``, ``qp``) drawn over it from ``sides``.
    Raises the backend's errors, and ValueError for a row outside the run.
    """
    from backend.render import cached_plan, draw_frame
    from views.inspector.codec_layers import parse_codec_layers

    run_id = request.run_id
    result = ws.result(run_id)
    row = resolve_row(result, request.row, request.frame)
    opts = request.view.options()
    kinds = ",".join(parse_codec_layers(request.codec))
    if sources is not None:

        def native() -> np.ndarray:
            fid = int(result.candidates.frame_indices[row])
            image = draw_frame(result, row, cached_plan(result, opts), sources.get(run_id, fid))
            return _with_codec_layers(image, sides, run_id, result, row, kinds)

        return cache.get((run_id, row, opts, kinds, "native"), native)

    def job(r: int) -> tuple[Any, Any]:
        return _frame_job(result, run_id, r, opts, kinds, sides)

    data = cache.get(*job(row))
    cache.prefetch([job(r) for r in likely_rows(run_id, result, row)])
    return data


_MARKS: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
_MARKS_LOCK = threading.Lock()


def _marks(run_id: str, result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """The keyframe rows and group start rows of run ``run_id``, kept for the last few runs (a
    run id names one stored run, whose candidates and groups never change)."""
    from views.inspector.navigation import group_start_rows, keyframe_rows

    with _MARKS_LOCK:
        hit = _MARKS.get(run_id)
        if hit is not None:
            _MARKS.move_to_end(run_id)
            return hit
    marks = (keyframe_rows(result), group_start_rows(result))
    with _MARKS_LOCK:
        _MARKS[run_id] = marks
        while len(_MARKS) > 8:
            _MARKS.popitem(last=False)
    return marks


def likely_rows(run_id: str, result: RunResult, row: int) -> list[int]:
    """The rows the viewer may ask for after ``row``, likeliest first: the next frame, the next
    group start and keyframe, the previous frame, group start and keyframe, then the frames
    around (a jump's frame rendered ahead shows as fast as a step's, issue 27 item 11)."""
    n = int(result.candidates.frame_indices.size)
    keys, starts = _marks(run_id, result)

    def after(marks: np.ndarray) -> list[int]:
        later = marks[marks > row]
        return [int(later[0])] if later.size else []

    def before(marks: np.ndarray) -> list[int]:
        earlier = marks[marks < row]
        return [int(earlier[-1])] if earlier.size else []

    order = [row + 1, *after(starts), *after(keys), row - 1, *before(starts), *before(keys)]
    order += [row + d for d in range(2, PREFETCH_AHEAD + 1)]
    order += [row - d for d in range(2, PREFETCH_BEHIND + 1)]
    return [r for r in dict.fromkeys(order) if 0 <= r < n and r != row]


def _frame_job(
    result: RunResult, run_id: str, row: int, opts: LayerOptions, kinds: str, sides: CodecSides | None
) -> tuple[Any, Any]:
    """The cache key of one processed frame and the function that renders it."""
    from views.inspector.frame_layers import prepare_frame_layers

    def render() -> np.ndarray:
        image = prepare_frame_layers(result, row, opts).image
        return _with_codec_layers(image, sides, run_id, result, row, kinds)

    return (run_id, row, opts, kinds), render


def warm_frame(ws: Workspace, cache: JpegCache, run_id: str, row: int, view: ViewSettings) -> None:
    """Start rendering the processed frame (no codec layers) that a view being drawn names, so
    the page's request for it, which comes only once the view is on screen, finds it ready."""
    result = ws.result(run_id)
    checked_row(result, row)
    cache.warm(*_frame_job(result, run_id, row, view.options(), "", None))


def info_fragment(ws: Workspace, run_id: str, row: int) -> str:
    """The info line of one frame (also served at /lens/info for the browser's frame steps)."""
    from views.inspector.frame_layers import frame_info

    result = ws.result(run_id)
    checked_row(result, row)
    return info_text_html(result, frame_info(result, row, INFO_VIEW.options()))


def info_text_html(result: RunResult, info: dict[str, Any]) -> str:
    """The info panel's line for one frame, as an HTML fragment: where it is (seconds from the
    first frame), its picture type and packet size, its group and role, and what keyframe
    avoidance did with it (``views.inspector.keyframe_notes``, the timeline's words too)."""
    from views.inspector.keyframe_notes import avoidance_note

    when = "–" if info["time_secs"] is None else f"{info['time_secs']:.3f} s"
    size = "–" if info["size_bytes"] is None else f"{info['size_bytes']} bytes"
    fid = info["frame_index"]
    note = avoidance_note(result, fid)
    moved = f" · {note}" if note else ""
    bad = "" if not info["bad_reason"] else f" · <b>bad frame: {html.escape(str(info['bad_reason']))}</b>"
    role = "anchor (whole frame kept)" if info["is_anchor"] else f"{info['kept_blocks']} kept blocks"
    return (
        f"candidate {info['candidate_row']} · frame {fid} · {when} · "
        f"<b>{html.escape(str(info['pict_type']))}</b> · {size} · group {info['group_index']} · "
        f"{role}{moved}{bad}"
    )


def block_fragment(
    ws: Workspace,
    sources: SourceFrames,
    run_id: str,
    row: int,
    x: int,
    y: int,
    *,
    native: bool = False,
    frame: str | None = None,
) -> dict[str, Any]:
    """The readout of the block under processed pixel (x, y): ``html`` (the table), ``box`` (its
    processed-pixel rectangle), ``key`` (block_row, block_col) and ``pixel`` (RGB and Y under
    the cursor, from the source frame when ``native`` and it is decoded, else the processed one)."""
    from views.inspector.readout import block_readout_html, pixel_readout_html

    result = ws.result(run_id)
    row = resolve_row(result, row, frame)
    h, w = result.geometry.processed_hw
    x, y = min(max(int(x), 0), w - 1), min(max(int(y), 0), h - 1)
    table, block = block_readout_html(result, row, x, y)
    rgb, px, py = result.decoded.pixels[row][y, x], x, y
    if native:
        try:
            src = sources.get(run_id, int(result.candidates.frame_indices[row]))
            px, py = (
                min(int(x * src.shape[1] / w), src.shape[1] - 1),
                min(int(y * src.shape[0] / h), src.shape[0] - 1),
            )
            rgb = src[py, px]
        except CodecLensError:
            native = False
    return {
        "html": table,
        "box": list(block["box"]),
        "key": [block["block_row"], block["block_col"]],
        "pixel": pixel_readout_html(rgb, px, py, native=native),
    }
