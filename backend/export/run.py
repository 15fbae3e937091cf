"""Export: annotated clips, figures, per-frame/per-block CSV and YUView statistics, with JSON sidecars."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd

from backend import __version__
from backend.config import param, parse_names, validate_fields
from backend.cvp_format import jsonable
from backend.errors import OutputError
from backend.paths import resolve_within
from backend.pipeline import RunResult
from backend.render import (
    ANCHOR_RGB,
    COLORMAPS,
    DEFAULT_LAYERS,
    KEPT_RGB,
    LAYER_NAMES,
    LOST_RGB,
    SCALES,
    LayerOptions,
    OverlayPlan,
    anchor_rows,
    colormap_lut,
    draw_overlays,
    frame_facts,
    glyph_font,
    group_of_row,
    kept_blocks_by_row,
    layer_options,
    lost_blocks,
    plan_overlays,
)
from backend.runs import content_sha256, open_run
from backend.stages.score import upsample
from backend.store import SessionStore
from native import gateway

CLIP_FORMATS: tuple[str, ...] = ("mp4", "webm", "gif", "png", "none")
"""``none`` writes no clip (tables, YUView statistics or figures only)."""
FIGURE_FORMATS: tuple[str, ...] = ("png", "svg", "pdf", "html")
EXPORT_LAYERS = LAYER_NAMES
YUVIEW_COORDINATES: tuple[str, ...] = ("source", "processed")
DEFAULT_CHROMIUM = "/usr/bin/chromium"

SIDECAR_SCHEMA_VERSION = 1
FRAMES_CSV_SCHEMA_VERSION = 1
BLOCKS_CSV_SCHEMA_VERSION = 1
FRAMES_CSV_COLUMNS: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "candidate_row",
    "frame_index",
    "pts_secs",
    "pict_type",
    "size_bytes",
    "group_index",
    "is_anchor",
    "bad_reason",
    "kept_blocks",
    "lost_blocks",
    "block_rows",
    "block_cols",
    "score_sum",
    "score_max",
)
BLOCKS_CSV_COLUMNS: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "candidate_row",
    "frame_index",
    "block_row",
    "block_col",
    "x_px",
    "y_px",
    "size_px",
    "score",
    "raw_mean",
    "kept",
    "kept_as",
    "lost",
)

YUVIEW_SCORE_SCALE = 1000
"""YUView statistics hold integers: a block's score is written as its mean per-pixel score in
per mille, round(1000 · score / block_px²), which is 0 … 1000 on the frame scale."""
YUVIEW_TYPES: dict[str, int] = {"block_score": 0, "selection": 1, "raw_signal": 2}
YUVIEW_SELECTION: dict[str, int] = {"kept": 1, "lost": 2, "anchor": 3}
"""Values of the ``selection`` map type; blocks that are none of these are not written."""

_FOOTER_BG = (24, 24, 24)
_FOOTER_FG = (255, 255, 255)
_GAP_RGB = (64, 64, 64)
_GAP_PX = 4
_NOT_SAMPLED_RGB = (48, 48, 48)
_LEGEND_BAR_PX = 160

MP4_OPTIONS: dict[str, str] = {"preset": "fast"}
"""libx264 settings besides the CRF. ``fast`` rather than x264's ``medium``: annotated frames
change in many macroblocks every frame (heatmap, outlines), where medium's extra analysis
costs about 2x the encode time of the plain video and fast about 1.4x, at a similar size."""
WEBM_OPTIONS: dict[str, str] = {"b": "0", "deadline": "good", "cpu-used": "4", "row-mt": "1"}


# -- names and ranges --------------------------------------------------------------------------


def parse_frame_range(text: str | None) -> tuple[int, int | None] | None:
    """``A:B`` → (A, B), frame_index from A up to B exclusive; ``A:`` → (A, None); ``:B`` → (0, B).

    None or an empty string mean every candidate frame.
    """
    if text is None or not str(text).strip():
        return None
    bad = ValueError(
        f"Invalid frames ({text!r}). Supported values are A:B, A: or :B with frame_index 0 ≤ A < B "
        "(B exclusive)."
    )
    parts = str(text).strip().split(":")
    if len(parts) != 2:
        raise bad
    try:
        start = int(parts[0]) if parts[0].strip() else 0
        stop = int(parts[1]) if parts[1].strip() else None
    except ValueError:
        raise bad from None
    if start < 0 or (stop is not None and stop <= start):
        raise bad
    return start, stop


# -- config and records ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """What one export writes, and where.

    Every file goes next to ``out_path``: the clip is ``out_path`` itself; companions are
    ``<stem>.frames.csv``, ``<stem>.blocks.csv``, ``<stem>.yuview.csv`` (compared runs:
    ``<stem>.<run_id>.yuview.csv``), ``<stem>.<figure>.<fmt>``; the sidecar is ``<out_path>.json``.
    """

    out_path: str | Path
    """Clip file (``png``: a folder of frames, or one ``.png`` file for a one-frame range)."""
    allowed_roots: tuple[str | Path, ...]
    """Folders exports may write into; anything resolving outside them is refused. A relative
    ``out_path`` is taken relative to the first."""
    format: str = param("mp4", label="Format", help="clip format", choices=CLIP_FORMATS)
    frames: tuple[int, int | None] | None = None
    """(start, stop) frame_index range, stop exclusive or None for the end; None = every candidate."""
    layers: tuple[str, ...] = DEFAULT_LAYERS
    opacity: float = param(0.5, label="Heatmap opacity", help="heatmap weight", min=0.0, max=1.0)
    colormap: str = param("turbo", label="Colormap", help="heatmap colours", choices=tuple(COLORMAPS))
    scale: str = param("frame", label="Heatmap scale", help="frame or video", choices=SCALES)
    fps: float | None = None
    """Clip frame rate; None = the video's (25 when unknown)."""
    crf: int = param(18, label="CRF", help="mp4/webm constant quality (lower is better)", min=0, max=51)
    stamp: bool = param(True, label="Stamp", help="draw frame index and timestamp under each frame")
    tables: bool = param(False, label="Tables", help="per-frame and per-block CSV")
    yuview: bool = param(False, label="YUView", help="per-block statistics in YUView's CSV format")
    yuview_coordinates: str = param(
        "source",
        label="YUView coordinates",
        help="source: blocks scaled onto the original video; processed: the processed frame",
        choices=YUVIEW_COORDINATES,
    )
    plot_formats: tuple[str, ...] = ("png",)
    """Formats of the figures passed to :func:`write_export` (see :data:`FIGURE_FORMATS`)."""
    chromium_path: str = DEFAULT_CHROMIUM
    """Browser kaleido drives for png/svg/pdf figures (never downloaded)."""
    figure_width_px: int = param(1200, label="Figure width", help="static figure width", min=100, max=8000)
    figure_height_px: int = param(500, label="Figure height", help="static figure height", min=100, max=8000)

    def __post_init__(self) -> None:
        validate_fields(self)
        object.__setattr__(self, "layers", parse_names(self.layers, EXPORT_LAYERS, what="layer"))
        object.__setattr__(
            self, "plot_formats", parse_names(self.plot_formats, FIGURE_FORMATS, what="plot format")
        )
        if self.frames is not None:
            pair = isinstance(self.frames, (tuple, list)) and len(self.frames) == 2
            start, stop = self.frames if pair else (None, None)
            if (
                not pair
                or not isinstance(start, int)
                or start < 0
                or (stop is not None and (not isinstance(stop, int) or stop <= start))
            ):
                raise ValueError(
                    f"Invalid frames ({self.frames!r}). Supported values are (start, stop) with "
                    "0 ≤ start < stop, or (start, None)."
                )
            object.__setattr__(self, "frames", (start, stop))
        if self.fps is not None and not (isinstance(self.fps, (int, float)) and 0 < self.fps <= 1000):
            raise ValueError(f"Invalid fps ({self.fps!r}). Supported values are above 0 up to 1000.")
        if isinstance(self.allowed_roots, (str, Path)) or not self.allowed_roots:
            raise ValueError(
                f"Invalid allowed roots ({self.allowed_roots!r}). Supported values are a tuple of folders."
            )
        object.__setattr__(self, "allowed_roots", tuple(self.allowed_roots))
        if not str(self.out_path).strip():
            raise ValueError("Invalid out path (''). Supported values are a file path.")
        self.layer_options()  # opacity/colormap/scale checks

    def layer_options(self) -> LayerOptions:
        return layer_options(self.layers, opacity=self.opacity, colormap=self.colormap, scale=self.scale)


@dataclass(frozen=True)
class ExportRun:
    """A stored run to export: its records and what the store says about it."""

    run_id: str
    result: RunResult
    config: dict[str, Any]
    """Selection options the run was made with (the store's ``config_json``)."""
    versions: dict[str, Any]
    """Versions recorded when the run was made."""
    video_path: str
    cache_key: str | None


def load_export_run(
    store: SessionStore,
    run_id: str,
    *,
    memory: dict[str, Any] | None = None,
    result: RunResult | None = None,
) -> ExportRun:
    """A stored run with its records (rebuilt by ``open_run`` unless ``result`` is given)."""
    row = store.get_run(run_id)
    if result is None:
        result = open_run(store, run_id, memory=memory)
    return ExportRun(
        run_id=row.run_id,
        result=result,
        config=dict(row.config),
        versions=dict(row.versions),
        video_path=row.video_path,
        cache_key=row.cache_key,
    )


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote."""

    files: tuple[Path, ...]
    """Every file written, the sidecar last."""
    sidecar: Path
    frame_indices: tuple[int, ...]
    """frame_index of each exported frame of the first run, in clip order."""
    frame_size: tuple[int, int] | None
    """(height, width) of the clip's frames (None without a clip)."""
    timings_secs: dict[str, float]


# -- rows --------------------------------------------------------------------------------------


def export_rows(result: RunResult, frames: tuple[int, int | None] | None) -> np.ndarray:
    """Candidate rows whose frame_index lies in ``frames``, in pipeline order.

    Returns
    -------
    (k,) int64 rows; repeated candidates appear once per row.

    Raises
    ------
    ValueError : no candidate lies in the range.
    """
    fids = result.candidates.frame_indices.astype(np.int64)
    if frames is None:
        return np.arange(fids.size)
    start, stop = frames
    mask = fids >= start
    if stop is not None:
        mask &= fids < stop
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        span = f"{int(fids.min())} to {int(fids.max())}" if fids.size else "none"
        raise ValueError(
            f"Invalid frames ({start}:{'' if stop is None else stop}). Supported values cover the "
            f"run's candidate frame_index {span}."
        )
    return rows


def align_rows(primary: RunResult, rows: np.ndarray, other: RunResult) -> list[int | None]:
    """For each primary row, the row of ``other`` showing the same frame_index (None when absent).

    A frame sampled twice pairs with the other run's occurrences in order.
    """
    queues: dict[int, list[int]] = {}
    for row, fid in enumerate(other.candidates.frame_indices.tolist()):
        queues.setdefault(int(fid), []).append(row)
    out: list[int | None] = []
    for fid in primary.candidates.frame_indices[rows].tolist():
        q = queues.get(int(fid))
        out.append(q.pop(0) if q else None)
    return out


# -- clip composition --------------------------------------------------------------------------


def _even(n: int) -> int:
    return n + (n & 1)


def _stamp_text(result: RunResult, row: int) -> str:
    fid, pts, pict = frame_facts(result, row)
    when = "t=?" if pts is None else f"t={pts:.3f} s"
    return f"frame {fid}  {when}  {pict}"


@dataclass
class _Pane:
    """One run's column of the clip: its plan, label and where it sits in the output frame."""

    run: ExportRun
    plan: OverlayPlan
    label: str
    x0: int
    width: int


class ClipComposer:
    """Builds output frames: each run's annotated frame side by side, a stamp footer under each.

    The output buffer, the footer backgrounds and the legend bars are made once; per frame
    only the panes and the stamp text are written.
    """

    def __init__(self, runs: Sequence[ExportRun], options: LayerOptions, *, stamp: bool) -> None:
        first = runs[0].result
        self.height = first.geometry.processed_hw[0]
        self.stamp = stamp
        self.options = options
        font_px = max(12, min(24, self.height // 18))
        self.font = glyph_font(font_px)
        self.line_px = self.font.height_px + 8
        panes: list[_Pane] = []
        x = 0
        for k, run in enumerate(runs):
            h, w = run.result.geometry.processed_hw
            width = w if h == self.height else max(2, round(w * self.height / h))
            label = "" if len(runs) == 1 else f"{run.run_id} {run.result.info.codec_name}  "
            panes.append(_Pane(run, plan_overlays(run.result, options=options), label, x, width))
            x += width + (_GAP_PX if k < len(runs) - 1 else 0)
        self.panes = panes
        # The stamp takes one footer line; the heatmap's legend goes to its right when every
        # pane has room for both, else on a second line (fewer footer rows to encode).
        legend_fits = all(
            self._stamp_width(p) + 24 + self._legend_width(p, _LEGEND_BAR_PX) + 12 <= p.width for p in panes
        )
        self.legend_line = 0 if legend_fits else 1
        lines = 2 if options.heatmap and not legend_fits else 1
        self.footer = _even(self.line_px * lines) if stamp else 0
        self.size = (_even(self.height + self.footer), _even(x))
        self._template = np.zeros((*self.size, 3), np.uint8)
        self._template[:] = _GAP_RGB
        self._template[self.height :] = _FOOTER_BG
        for pane in panes:
            self._template[: self.height, pane.x0 : pane.x0 + pane.width] = 0
            if stamp and options.heatmap:
                self._draw_legend(pane)
        self._buffer = self._template.copy()

    def _stamp_width(self, pane: _Pane) -> int:
        """Width of the widest stamp this pane can show (six-digit frame, five-digit seconds)."""
        return self.font.width_px(pane.label + "frame 000000  t=00000.000 s  B")

    def _legend_width(self, pane: _Pane, bar_px: int) -> int:
        low, high = pane.plan.legend_labels
        return self.font.width_px(low) + 6 + bar_px + 6 + self.font.width_px(high)

    def _draw_legend(self, pane: _Pane) -> None:
        low, high = pane.plan.legend_labels
        y0 = self.height + self.line_px * self.legend_line
        y_text = y0 + (self.line_px - self.font.height_px) // 2
        if self.legend_line == 0:
            bar_w = _LEGEND_BAR_PX
            x_low = pane.x0 + pane.width - 6 - self._legend_width(pane, bar_w)
        else:
            x_low = pane.x0 + 6
            bar_w = min(256, pane.width - 12 - self._legend_width(pane, 0))
            if bar_w < 16:
                return  # too narrow for a colour bar
        x_bar = self.font.draw(self._template, low, x_low, y_text, _FOOTER_FG) + 6
        bar = colormap_lut(self.options.colormap)[np.linspace(0, 255, bar_w).astype(np.uint8)]
        self._template[y0 + 4 : y0 + self.line_px - 4, x_bar : x_bar + bar_w] = bar[None, :, :]
        self.font.draw(self._template, high, x_bar + bar_w + 6, y_text, _FOOTER_FG)

    def compose(self, rows: Sequence[int | None]) -> np.ndarray:
        """The output frame for one row per run (None: that run did not sample this frame).

        Returns
        -------
        (H_out, W_out, 3) uint8 RGB; the same buffer is reused by the next call.
        """
        out = self._buffer
        np.copyto(out, self._template)
        y_text = self.height + (self.line_px - self.font.height_px) // 2
        for pane, row in zip(self.panes, rows, strict=True):
            target = out[: self.height, pane.x0 : pane.x0 + pane.width]
            if row is None:
                target[:] = _NOT_SAMPLED_RGB
                self.font.draw(target, "not sampled", 8, 8, _FOOTER_FG)
                text = pane.label + "not sampled"
            else:
                image = draw_overlays(pane.run.result, row, pane.plan)
                if image.shape[:2] != target.shape[:2]:
                    # Nearest keeps outlines and grid lines one colour.
                    image = cv2.resize(image, (pane.width, self.height), interpolation=cv2.INTER_NEAREST)
                target[:] = image
                text = pane.label + _stamp_text(pane.run.result, row)
            if self.stamp:
                # Drawn into the pane's columns, so a long stamp is clipped at the pane's edge.
                self.font.draw(out[:, pane.x0 : pane.x0 + pane.width], text, 6, y_text, _FOOTER_FG)
        return out


class _VideoSink:
    def __init__(self, path: Path, fmt: str, size: tuple[int, int], fps: Fraction, crf: int) -> None:
        if fmt == "mp4":
            codec, options = "libx264", {"crf": str(crf), **MP4_OPTIONS}
        else:
            codec, options = "libvpx-vp9", {"crf": str(crf), **WEBM_OPTIONS}
        self._writer = gateway.VideoWriter(
            path, codec=codec, width=size[1], height=size[0], fps=fps, options=options
        )

    def write(self, frame: np.ndarray, name: str) -> None:
        self._writer.write(frame)

    def close(self) -> None:
        self._writer.close()


class _GifSink:
    def __init__(self, path: Path, fps: Fraction) -> None:
        self._path = path
        self._frames: list[Any] = []
        self._duration_ms = max(20, round(1000 / float(fps)))

    def write(self, frame: np.ndarray, name: str) -> None:
        from PIL import Image

        # An adaptive palette per frame keeps the overlay colours close to exact.
        self._frames.append(Image.fromarray(frame).quantize(256, method=Image.Quantize.FASTOCTREE))

    def close(self) -> None:
        first, rest = self._frames[0], self._frames[1:]
        first.save(self._path, save_all=True, append_images=rest, duration=self._duration_ms, loop=0)


class _PngSink:
    def __init__(self, path: Path, single: bool) -> None:
        self._path = path
        self._single = single
        self.written: list[Path] = []
        if not single:
            path.mkdir(parents=True, exist_ok=True)

    def write(self, frame: np.ndarray, name: str) -> None:
        from PIL import Image

        target = self._path if self._single else self._path / name
        Image.fromarray(frame).save(target, compress_level=3)
        self.written.append(target)

    def close(self) -> None:
        pass


def _clip_fps(result: RunResult, fps: float | None) -> Fraction:
    value = fps if fps is not None else (result.info.fps or 25.0)
    return Fraction(value).limit_denominator(1001)


# -- tables ------------------------------------------------------------------------------------


def _kept_as(result: RunResult, rows: np.ndarray) -> dict[int, np.ndarray]:
    """Row → (block_rows, block_cols) object array of ``anchor`` / ``block`` / ``''``."""
    bh_n, bw_n = result.geometry.block_grid_hw
    kept = kept_blocks_by_row(result)
    anchors = anchor_rows(result)
    out: dict[int, np.ndarray] = {}
    for row in rows.tolist():
        grid = np.full((bh_n, bw_n), "", object)
        if row in anchors:
            grid[:] = "anchor"
        elif row in kept:
            k = kept[row]
            grid[k[:, 0], k[:, 1]] = "block"
        out[row] = grid
    return out


def _raw_block_means(result: RunResult, row: int) -> np.ndarray:
    """(block_rows, block_cols) float64 mean of the stretched raw signal per block (NaN without one)."""
    geo = result.geometry
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    raw = result.decoded.grids[row]
    if raw is None:
        return np.full((bh_n, bw_n), np.nan)
    stretched = upsample(np.asarray(raw, np.float32), geo.processed_hw)[: bh_n * f, : bw_n * f]
    return stretched.reshape(bh_n, f, bw_n, f).mean(axis=(1, 3), dtype=np.float64)


def frames_table(run: ExportRun, rows: np.ndarray) -> pd.DataFrame:
    """One row per exported candidate row, columns :data:`FRAMES_CSV_COLUMNS`."""
    result = run.result
    info = result.info
    bh_n, bw_n = result.geometry.block_grid_hw
    kept = kept_blocks_by_row(result)
    anchors = anchor_rows(result)
    records = []
    for row in rows.tolist():
        fid, pts, pict = frame_facts(result, row)
        sel, _t = group_of_row(result, row)
        scores = result.scores.block_scores[row]
        records.append(
            {
                "schema_version": FRAMES_CSV_SCHEMA_VERSION,
                "run_id": run.run_id,
                "candidate_row": row,
                "frame_index": fid,
                "pts_secs": pts,
                "pict_type": pict,
                "size_bytes": int(info.packet_size_bytes[fid])
                if 0 <= fid < info.packet_size_bytes.size
                else None,
                "group_index": None if sel is None else sel.group_index,
                "is_anchor": row in anchors,
                "bad_reason": result.quality.reasons[row],
                "kept_blocks": int(kept[row].shape[0]) if row in kept else 0,
                "lost_blocks": int(lost_blocks(result, row).sum()),
                "block_rows": bh_n,
                "block_cols": bw_n,
                "score_sum": float(scores.sum(dtype=np.float64)),
                "score_max": float(scores.max()) if scores.size else 0.0,
            }
        )
    frame = pd.DataFrame.from_records(records, columns=list(FRAMES_CSV_COLUMNS))
    frame["group_index"] = frame["group_index"].astype("Int64")
    frame["size_bytes"] = frame["size_bytes"].astype("Int64")
    return frame


def blocks_table(run: ExportRun, rows: np.ndarray) -> pd.DataFrame:
    """One row per block of each exported candidate row, columns :data:`BLOCKS_CSV_COLUMNS`."""
    result = run.result
    geo = result.geometry
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    nb = bh_n * bw_n
    block_row = np.repeat(np.arange(bh_n), bw_n)
    block_col = np.tile(np.arange(bw_n), bh_n)
    kept_as = _kept_as(result, rows)
    parts = []
    for row in rows.tolist():
        fid = int(result.candidates.frame_indices[row])
        roles = kept_as[row].ravel()
        parts.append(
            pd.DataFrame(
                {
                    "schema_version": np.full(nb, BLOCKS_CSV_SCHEMA_VERSION),
                    "run_id": run.run_id,
                    "candidate_row": np.full(nb, row),
                    "frame_index": np.full(nb, fid),
                    "block_row": block_row,
                    "block_col": block_col,
                    "x_px": block_col * f,
                    "y_px": block_row * f,
                    "size_px": np.full(nb, f),
                    "score": result.scores.block_scores[row].astype(np.float64),
                    "raw_mean": _raw_block_means(result, row).ravel(),
                    "kept": (roles != "").astype(np.int8),
                    "kept_as": roles,
                    "lost": lost_blocks(result, row).ravel().astype(np.int8),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)[list(BLOCKS_CSV_COLUMNS)]


# -- YUView statistics -------------------------------------------------------------------------


def _cell_edges(cells: int, length_px: int) -> np.ndarray:
    """(cells + 1,) pixel edges of a nearest-neighbour stretch of ``cells`` over ``length_px``.

    Uses the same resize as the pipeline's upsampling, so the cells are exactly the pixels
    each grid value covers.
    """
    ramp = cv2.resize(
        np.arange(cells, dtype=np.float32).reshape(1, cells), (length_px, 1), interpolation=cv2.INTER_NEAREST
    )[0].astype(np.int64)
    edges = np.searchsorted(ramp, np.arange(cells), side="left")
    return np.append(edges, length_px)


def yuview_block_edges(result: RunResult, coordinates: str) -> tuple[np.ndarray, np.ndarray]:
    """Pixel edges of the block grid in YUView coordinates.

    Returns
    -------
    ys : (block_rows + 1,) int64; xs : (block_cols + 1,) int64. Source coordinates scale the
    processed block edges by orig/processed and round, so neighbouring blocks share an edge.
    """
    geo = result.geometry
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    ys, xs = np.arange(bh_n + 1) * f, np.arange(bw_n + 1) * f
    if coordinates == "processed":
        return ys, xs
    (oh, ow), (h, w) = geo.orig_hw, geo.processed_hw
    return np.round(ys * oh / h).astype(np.int64), np.round(xs * ow / w).astype(np.int64)


def _yuview_lines(kind: int, poc: int, ys: np.ndarray, xs: np.ndarray, values: np.ndarray) -> list[str]:
    """Data lines ``POC;x;y;w;h;type;value`` for every non-masked cell (values: (rows, cols) int)."""
    rr, cc = np.nonzero(values != np.iinfo(np.int64).min)
    x0, y0 = xs[cc], ys[rr]
    w, h = xs[cc + 1] - x0, ys[rr + 1] - y0
    keep = (w > 0) & (h > 0)
    vals = values[rr, cc]
    return [
        f"{poc};{a};{b};{c};{d};{kind};{v}"
        for a, b, c, d, v in zip(
            x0[keep].tolist(),
            y0[keep].tolist(),
            w[keep].tolist(),
            h[keep].tolist(),
            vals[keep].tolist(),
            strict=True,
        )
    ]


def yuview_text(run: ExportRun, rows: np.ndarray, *, coordinates: str) -> str:
    """A YUView statistics file (CSV, ``;``-separated) for the exported frames of one run.

    Types: 0 ``block_score`` (see :data:`YUVIEW_SCORE_SCALE`, range), 1 ``selection`` (map: 1 kept,
    2 lost, 3 anchor; other blocks absent), 2 the raw signal (its grid key, range) on the
    cells of the pipeline's nearest stretch. POC is the frame_index; each frame once.
    """
    result = run.result
    geo = result.geometry
    (oh, ow), (h, w) = geo.orig_hw, geo.processed_hw
    width, height = (ow, oh) if coordinates == "source" else (w, h)
    ys, xs = yuview_block_edges(result, coordinates)
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(result.info.path).stem) or "video"
    raw_key = result.decoded.grid_key
    raw_max = max((float(np.max(g)) for g in result.decoded.grids if g is not None), default=0.0)
    fps = result.info.fps or 25.0
    header = [
        "%;syntax-version;v1.22",
        f"%;seq-specs;{name};0;{width};{height};{fps:.6g}",
        f"%;codec-lens;{__version__};run;{run.run_id};score-scale;{YUVIEW_SCORE_SCALE};coordinates;{coordinates}",
        f"%;type;{YUVIEW_TYPES['block_score']};block_score;range",
        f"%;defaultRange;0;{YUVIEW_SCORE_SCALE};jet",
        f"%;type;{YUVIEW_TYPES['selection']};selection;map",
        f"%;mapColor;{YUVIEW_SELECTION['kept']};{KEPT_RGB[0]};{KEPT_RGB[1]};{KEPT_RGB[2]};255",
        f"%;mapColor;{YUVIEW_SELECTION['lost']};{LOST_RGB[0]};{LOST_RGB[1]};{LOST_RGB[2]};255",
        f"%;mapColor;{YUVIEW_SELECTION['anchor']};{ANCHOR_RGB[0]};{ANCHOR_RGB[1]};{ANCHOR_RGB[2]};255",
        f"%;type;{YUVIEW_TYPES['raw_signal']};{raw_key};range",
        f"%;defaultRange;0;{max(1, int(np.ceil(raw_max)))};jet",
    ]
    lines = list(header)
    missing = np.iinfo(np.int64).min
    kept_as = _kept_as(result, rows)
    seen: set[int] = set()
    # YUView needs each POC's lines together: frames in frame_index order, each once.
    order = rows[np.argsort(result.candidates.frame_indices[rows], kind="stable")]
    for row in order.tolist():
        fid = int(result.candidates.frame_indices[row])
        if fid in seen:
            continue
        seen.add(fid)
        scores = np.rint(result.scores.block_scores[row].astype(np.float64) * (YUVIEW_SCORE_SCALE / (f * f)))
        lines += _yuview_lines(
            YUVIEW_TYPES["block_score"], fid, ys, xs, scores.astype(np.int64).reshape(bh_n, bw_n)
        )
        sel = np.full((bh_n, bw_n), missing, np.int64)
        sel[lost_blocks(result, row)] = YUVIEW_SELECTION["lost"]
        roles = kept_as[row]
        sel[roles == "block"] = YUVIEW_SELECTION["kept"]
        sel[roles == "anchor"] = YUVIEW_SELECTION["anchor"]
        lines += _yuview_lines(YUVIEW_TYPES["selection"], fid, ys, xs, sel)
        raw = result.decoded.grids[row]
        if raw is not None:
            gh, gw = raw.shape
            lines += _yuview_lines(
                YUVIEW_TYPES["raw_signal"],
                fid,
                _cell_edges(gh, height),
                _cell_edges(gw, width),
                np.rint(np.asarray(raw, np.float64)).astype(np.int64),
            )
    return "\n".join(lines) + "\n"


# -- figures -----------------------------------------------------------------------------------


def write_figures(
    figures: Mapping[str, Any],
    stem: Path,
    *,
    formats: Sequence[str],
    chromium_path: str,
    width_px: int,
    height_px: int,
) -> list[Path]:
    """Write plotly figures as ``<stem>.<name>.<fmt>``: html self-contained, png/svg/pdf via kaleido.

    Static formats run kaleido on the given Chromium in one batch (one browser start).

    Raises
    ------
    OutputError : static formats without that Chromium or kaleido, or a failed render.
    """
    written: list[Path] = []
    static: list[dict[str, Any]] = []
    for name, fig in figures.items():
        for fmt in formats:
            path = stem.parent / f"{stem.name}.{name}.{fmt}"
            if fmt == "html":
                # include_plotlyjs=True embeds plotly.js: the file opens offline.
                fig.write_html(str(path), include_plotlyjs=True, full_html=True)
                written.append(path)
            else:
                opts = {"format": fmt, "width": width_px, "height": height_px}
                static.append({"fig": fig, "path": str(path), "opts": opts})
                written.append(path)
    if static:
        if not Path(chromium_path).exists():
            raise OutputError(
                f"Chromium not found at {chromium_path}: png/svg/pdf figures need it (html does not)",
                path=stem.parent,
                stage="export",
            )
        try:
            import kaleido
        except ImportError as exc:
            raise OutputError("kaleido is not installed (pip install kaleido)", stage="export") from exc
        try:
            # mathjax=False: kaleido would otherwise load MathJax from a CDN.
            kaleido.write_fig_from_object_sync(
                static, kopts={"path": chromium_path, "mathjax": False}, cancel_on_error=True
            )
        except (RuntimeError, OSError, ValueError) as exc:
            raise OutputError(
                f"static figure export failed ({exc})", path=stem.parent, stage="export"
            ) from exc
    return written


# -- the export --------------------------------------------------------------------------------


def write_video(
    frames: Iterable[np.ndarray],
    path: Path,
    *,
    width: int,
    height: int,
    fps: float,
    options: dict[str, str] | None = None,
) -> Path:
    """Encode RGB frames as an H.264 mp4, written aside and renamed into place.

    Parameters
    ----------
    frames : (H, W, 3) uint8 RGB arrays, cropped to ``height`` × ``width`` (both even).
    path : the mp4 to write.

    Returns
    -------
    ``path``, complete; on failure nothing is left at ``path``.
    """
    if width % 2 or height % 2 or width < 2 or height < 2:
        raise ValueError(f"Invalid size ({width}x{height}). Supported values are even sides of at least 2")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}.partial.mp4")
    try:
        with gateway.VideoWriter(
            partial, codec="libx264", width=width, height=height, fps=fps, options=options or {}
        ) as writer:
            for image in frames:
                writer.write(image[:height, :width])
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def export_versions() -> dict[str, Any]:
    """Versions of codec-lens, cvp, PyAV and FFmpeg (libavcodec) at export time."""
    v = gateway.versions()
    return {
        "codec_lens": __version__,
        "codec_video_prep": v.get("codec_video_prep"),
        "cvp_ffmpeg": v.get("cvp_ffmpeg"),
        "pyav": v.get("pyav"),
        "ffmpeg_libavcodec": v.get("pyav_libavcodec"),
    }


def _run_entry(run: ExportRun, rows: np.ndarray) -> dict[str, Any]:
    result = run.result
    video = Path(run.video_path)
    info = result.info
    return {
        "run_id": run.run_id,
        "video_path": run.video_path,
        "video_sha256": content_sha256(video) if video.is_file() else None,
        "video_size_bytes": video.stat().st_size if video.is_file() else None,
        "codec_name": info.codec_name,
        "width": info.width,
        "height": info.height,
        "fps": info.fps,
        "total_frames": info.total_frames,
        "processed_hw": list(result.geometry.processed_hw),
        "patch": result.geometry.patch,
        "block_size": result.geometry.block_size,
        "config": run.config,
        "versions_at_run": run.versions,
        "cache_key": run.cache_key,
        "candidate_rows": rows.tolist(),
        "frame_indices": result.candidates.frame_indices[rows].tolist(),
    }


def _out_paths(config: ExportConfig) -> tuple[Path, Path, Path]:
    """(clip path, companion stem, sidecar) — each refused outside ``allowed_roots``."""
    out = resolve_within(config.out_path, config.allowed_roots, kind="output")
    fmt = config.format
    suffix = out.suffix.lower().lstrip(".")
    if fmt in ("mp4", "webm", "gif"):
        if suffix in CLIP_FORMATS and suffix != fmt:
            raise ValueError(
                f"Invalid out path ({str(config.out_path)!r}) for format {fmt}. "
                f"Supported values end in .{fmt}."
            )
        clip = out if suffix == fmt else out.with_name(out.name + f".{fmt}")
    else:
        clip = out
    stem = clip.with_suffix("") if clip.suffix.lower().lstrip(".") in CLIP_FORMATS else clip
    sidecar = resolve_within(str(clip) + ".json", config.allowed_roots, kind="output")
    return clip, stem, sidecar


def write_export(
    runs: Sequence[ExportRun],
    *,
    config: ExportConfig,
    figures: Mapping[str, Any] | None = None,
    on_progress: Callable[[float], None] | None = None,
) -> ExportResult:
    """Export a run (and runs to compare with it, side by side) as files plus a JSON sidecar.

    Parameters
    ----------
    runs : the run first, then up to three runs to put beside it (aligned by frame_index).
    config : what to write and where (paths must resolve inside ``config.allowed_roots``).
    figures : name → plotly figure, written in ``config.plot_formats``.
    on_progress : called with the fraction of clip frames written.

    Returns
    -------
    ExportResult with every file written; the sidecar ``<clip>.json`` records the export
    config, frame range and frame indices, each run's stored config and versions, the
    versions now, the sha256 of each input video and of each file written.

    Raises
    ------
    ValueError : bad frame range (no candidate in it), too many runs, a mismatched suffix.
    OutputError : a path outside the allowed folder, or a file that cannot be written.
    """
    if not 1 <= len(runs) <= 4:
        raise ValueError(f"Invalid run count ({len(runs)}). Supported values are 1 to 4.")
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    clip_path, stem, sidecar = _out_paths(config)
    primary = runs[0].result
    rows = export_rows(primary, config.frames)
    aligned = [rows.tolist()] + [align_rows(primary, rows, r.result) for r in runs[1:]]
    if config.format == "png" and clip_path.suffix.lower() == ".png" and rows.size != 1:
        raise ValueError(
            f"Invalid out path ({str(config.out_path)!r}) for {rows.size} png frames. Supported values are "
            "a folder (no .png suffix), or a .png file for a one-frame range."
        )
    clip_path.parent.mkdir(parents=True, exist_ok=True)
    files: list[tuple[Path, str]] = []
    frame_size: tuple[int, int] | None = None
    try:
        if config.format != "none":
            t0 = time.perf_counter()
            frame_size, written = _write_clip(runs, aligned, clip_path, config, on_progress)
            files += [(p, "clip") for p in written]
            timings["clip"] = time.perf_counter() - t0
        if config.tables:
            t0 = time.perf_counter()
            frames_csv = resolve_within(f"{stem}.frames.csv", config.allowed_roots, kind="output")
            blocks_csv = resolve_within(f"{stem}.blocks.csv", config.allowed_roots, kind="output")
            per_run = [_run_rows(a) for r, a in zip(runs, aligned, strict=True)]
            pd.concat([frames_table(r, rr) for r, rr in zip(runs, per_run, strict=True)]).to_csv(
                frames_csv, index=False
            )
            pd.concat([blocks_table(r, rr) for r, rr in zip(runs, per_run, strict=True)]).to_csv(
                blocks_csv, index=False
            )
            files += [(frames_csv, "frames_csv"), (blocks_csv, "blocks_csv")]
            timings["tables"] = time.perf_counter() - t0
        if config.yuview:
            t0 = time.perf_counter()
            for k, (run, a) in enumerate(zip(runs, aligned, strict=True)):
                name = f"{stem}.yuview.csv" if k == 0 else f"{stem}.{run.run_id}.yuview.csv"
                path = resolve_within(name, config.allowed_roots, kind="output")
                path.write_text(yuview_text(run, _run_rows(a), coordinates=config.yuview_coordinates))
                files.append((path, "yuview_csv"))
            timings["yuview"] = time.perf_counter() - t0
        if figures:
            t0 = time.perf_counter()
            written = write_figures(
                figures,
                stem,
                formats=config.plot_formats,
                chromium_path=config.chromium_path,
                width_px=config.figure_width_px,
                height_px=config.figure_height_px,
            )
            files += [(p, "figure") for p in written]
            timings["figures"] = time.perf_counter() - t0
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(
            f"cannot write the export ({exc.strerror or exc})", path=exc.filename or clip_path
        ) from exc
    timings["total"] = time.perf_counter() - t_start
    sidecar_data = {
        "schema": "codec-lens/export",
        "schema_version": SIDECAR_SCHEMA_VERSION,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "export_config": dataclasses.asdict(config),
        "frames": {
            "start": None if config.frames is None else config.frames[0],
            "stop": None if config.frames is None else config.frames[1],
            "count": int(rows.size),
            "frame_indices": primary.candidates.frame_indices[rows].tolist(),
        },
        "clip": None
        if frame_size is None
        else {"height": frame_size[0], "width": frame_size[1], "fps": float(_clip_fps(primary, config.fps))},
        "runs": [_run_entry(r, _run_rows(a)) for r, a in zip(runs, aligned, strict=True)],
        "versions": export_versions(),
        "csv_schemas": {
            "frames": {"version": FRAMES_CSV_SCHEMA_VERSION, "columns": list(FRAMES_CSV_COLUMNS)},
            "blocks": {"version": BLOCKS_CSV_SCHEMA_VERSION, "columns": list(BLOCKS_CSV_COLUMNS)},
        },
        "yuview": {
            "types": YUVIEW_TYPES,
            "selection_values": YUVIEW_SELECTION,
            "score_scale": YUVIEW_SCORE_SCALE,
            "coordinates": config.yuview_coordinates,
        },
        "timings_secs": timings,
    }
    runs_blob = json.dumps(
        [[e["run_id"], e["video_sha256"], e["config"]] for e in sidecar_data["runs"]], sort_keys=True
    )
    sidecar_data["inputs_sha256"] = hashlib.sha256(runs_blob.encode()).hexdigest()
    sidecar_data["files"] = [
        {
            "name": os.path.relpath(p, sidecar.parent),
            "role": role,
            "size_bytes": p.stat().st_size,
            "sha256": content_sha256(p),
        }
        for p, role in files
    ]
    try:
        sidecar.write_text(json.dumps(jsonable(sidecar_data), indent=2))
    except OSError as exc:
        raise OutputError(f"cannot write the sidecar ({exc.strerror or exc})", path=sidecar) from exc
    return ExportResult(
        files=(*(p for p, _ in files), sidecar),
        sidecar=sidecar,
        frame_indices=tuple(primary.candidates.frame_indices[rows].tolist()),
        frame_size=frame_size,
        timings_secs=timings,
    )


def _run_rows(aligned: Sequence[int | None]) -> np.ndarray:
    """The exported rows of one run (the aligned rows of a compared run, gaps dropped)."""
    return np.asarray([r for r in aligned if r is not None], np.int64)


def _write_clip(
    runs: Sequence[ExportRun],
    aligned: list[list[int]] | list[Any],
    path: Path,
    config: ExportConfig,
    on_progress: Callable[[float], None] | None,
) -> tuple[tuple[int, int], list[Path]]:
    composer = ClipComposer(runs, config.layer_options(), stamp=config.stamp)
    primary = runs[0].result
    fps = _clip_fps(primary, config.fps)
    n = len(aligned[0])
    fmt = config.format
    # Video files are written under a temporary name and renamed when complete.
    tmp = path.with_name(f".{path.stem}.partial{path.suffix}") if fmt in ("mp4", "webm", "gif") else path
    sink: _VideoSink | _GifSink | _PngSink
    if fmt in ("mp4", "webm"):
        sink = _VideoSink(tmp, fmt, composer.size, fps, config.crf)
    elif fmt == "gif":
        sink = _GifSink(tmp, fps)
    else:
        sink = _PngSink(path, single=path.suffix.lower() == ".png")
    fids = primary.candidates.frame_indices
    try:
        for k in range(n):
            frame_rows = [a[k] for a in aligned]
            frame = composer.compose(frame_rows)
            sink.write(frame, f"{k:05d}_frame{int(fids[aligned[0][k]]):06d}.png")
            if on_progress is not None and (k % 10 == 9 or k == n - 1):
                on_progress((k + 1) / n)
        sink.close()
    except BaseException:
        if tmp != path:
            tmp.unlink(missing_ok=True)
        raise
    if tmp != path:
        os.replace(tmp, path)
        return composer.size, [path]
    assert isinstance(sink, _PngSink)
    return composer.size, sink.written
