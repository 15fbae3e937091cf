"""Codec comparison view: synchronised panes, difference overlay, per-frame metric plots and tables."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from backend.compare import (
    HEATMAP_SCALES,
    StoredComparison,
    cell_area_px,
    heatmap_normaliser,
    signal_family,
)
from backend.pipeline import RunResult
from backend.render.heatmap import video_block_max
from backend.selectors import spec_of
from backend.selectors.onevision import letterbox_offsets
from views.compare_difference import difference_masks, draw_difference
from views.compare_style import VARIANT_COLOURS, legend_rows_layout, pair_style
from views.figure_style import apply_style
from views.inspector import navigation
from views.inspector.frame_layers import COLORMAPS, LayerOptions, prepare_frame_layers
from views.inspector.readout import heat_unit
from views.wording import share

CURSOR_NAME = "cursor"
MAX_PANES = 4
NO_LAYERS = LayerOptions(kept=False, anchor_badge=False, bad_frames=False)
"""No layer drawn: a frame's facts (its info dict) without its overlays."""


@dataclass(frozen=True)
class PaneView:
    """One rendered pane: the frame with its layers and the fields of its caption."""

    image: np.ndarray
    """(H, W, 3) uint8 RGB at the processed size, cropped to the picture (:func:`picture_pixels`)."""
    info: dict[str, Any]
    """``prepare_frame_layers`` info plus ``label``, ``requested_frame_index``, ``exact`` and,
    in difference mode, ``a_only``, ``b_only``, ``both`` (block counts) and ``reference_label``."""
    caption: str


@dataclass(frozen=True, kw_only=True)
class PaneOptions:
    """How :func:`prepare_pane` draws the panes of one comparison (the same for every pane)."""

    layers: LayerOptions | None = None
    """The viewer's layers (``views.inspector.frame_layers.LayerOptions``; None: its defaults)."""
    scale: str | None = None
    """Heatmap scale of :data:`backend.compare.run.HEATMAP_SCALES` (None: ``layers.scale``)."""
    difference_with: int | None = None
    """Reference pane A; the drawn pane is B. None (or the pane itself) draws no difference."""
    labels: Sequence[str] | None = None
    """Pane labels (None: ``run i``)."""
    show_both: bool = False
    """In difference mode, also outline the blocks both kept."""


# --------------------------------------------------------------------------- positions and keys


def prepare_positions(results: Sequence[RunResult]) -> np.ndarray:
    """Slider positions of a comparison: every frame that is a candidate in any run.

    Returns
    -------
    (m,) int64 frame indices, ascending; position p shows frame ``positions[p]`` in every pane.
    """
    if not results:
        raise ValueError("Invalid results (empty). Supported values are 1 to 4 runs.")
    frames = np.unique(np.concatenate([r.candidates.frame_indices.astype(np.int64) for r in results]))
    return frames


def position_of_frame(positions: np.ndarray, frame_index: float) -> int:
    """The position showing ``frame_index``, or the nearest one."""
    return int(np.argmin(np.abs(positions - round(float(frame_index)))))


def navigate_position(
    results: Sequence[RunResult], positions: np.ndarray, position: int, action: str, *, reference: int = 0
) -> int:
    """The position a step or key leads to; keyframes and group starts come from the reference run.

    Parameters
    ----------
    results : the compared runs.
    positions : from :func:`prepare_positions`.
    position : current slider position.
    action : one of ``views.inspector.navigation.ACTIONS``.
    reference : pane whose keyframes and groups ``*_key`` / ``*_group`` jump to.
    """
    if action not in navigation.ACTIONS:
        raise ValueError(
            f"Invalid action ({action!r}). Supported values are {', '.join(navigation.ACTIONS)}."
        )
    last = int(positions.size) - 1
    position = min(max(int(position), 0), last)
    if action in ("prev", "next"):
        return min(max(position + (1 if action == "next" else -1), 0), last)
    if action == "home":
        return 0
    if action == "end":
        return last
    ref = results[reference]
    row = navigation.row_for_frame(ref, float(positions[position]))
    new_row = navigation.navigate(ref, row, action)
    if new_row == row:
        return position
    return position_of_frame(positions, float(ref.candidates.frame_indices[new_row]))


# --------------------------------------------------------------------------- panes


def prepare_heatmap_runs(results: Sequence[RunResult], scale: str) -> tuple[RunResult, ...]:
    """Runs whose heatmaps draw on one shared scale.

    ``frame`` and ``video`` return the runs unchanged (``views.inspector.frame_layers`` draws those
    scales). ``all`` returns copies whose stored score grids are replaced by the shared
    normaliser's grids (``backend.compare.run.HeatmapNormaliser``); draw them with the ``frame``
    scale. Only the heatmap changes: block scores, kept blocks and pixels are the originals.
    """
    if scale not in HEATMAP_SCALES:
        raise ValueError(f"Invalid scale ({scale!r}). Supported values are {', '.join(HEATMAP_SCALES)}.")
    if scale != "all":
        return tuple(results)
    norm = heatmap_normaliser(results, mode="all")
    out = []
    for i, r in enumerate(results):
        grids = tuple(norm.grid(results, i, row) for row in range(r.candidates.frame_indices.size))
        out.append(dataclasses.replace(r, scores=dataclasses.replace(r.scores, grids=grids)))
    return tuple(out)


def heatmap_range(results: Sequence[RunResult], index: int, scale: str, heat: str = "cell") -> str:
    """What the top of the colour bar means for pane ``index`` under ``scale`` and ``heat`` (the
    ``all`` scale is always cells), with its unit (``views.inspector.readout.heat_unit``: per
    pixel on the ``all`` scale, per cell on ``video``)."""
    if heat == "block" and scale != "all":
        top = "this frame's" if scale == "frame" else f"{video_block_max(results[index]):.4g} = the run's"
        return f"1 = {top} highest block score" if scale == "frame" else f"{top} highest block score"
    if scale == "frame":
        return "1 = frame p99"
    norm = heatmap_normaliser(results, mode=scale)
    top = math.expm1(norm.log_max[index])
    r = results[index]
    unit = heat_unit(r, per_px=scale == "all")
    where = f"all {signal_family(r)} runs" if scale == "all" else "video"
    return f"1 = {top:.4g} {unit} ({where} max, log)"


def prepare_pane(
    results: Sequence[RunResult],
    index: int,
    frame_index: int,
    options: PaneOptions | None = None,
    *,
    heatmap_runs: Sequence[RunResult] | None = None,
) -> PaneView:
    """Render pane ``index`` at ``frame_index`` (or the run's nearest candidate to it).

    Parameters
    ----------
    results : the compared runs (1 to 4).
    index : pane / run index.
    frame_index : the frame every pane shows.
    options : how every pane is drawn (:class:`PaneOptions`; None: its defaults).
    heatmap_runs : :func:`prepare_heatmap_runs` of ``results`` for the scale (computed when None).

    Returns
    -------
    PaneView with the (H, W, 3) uint8 image at the processed size (a letterboxed run's picture
    only, :func:`picture_pixels`), its info dict and a one-line caption.
    """
    options = options or PaneOptions()
    opts, scale = _pane_layers(results, index, options)
    result = results[index]
    row = navigation.row_for_frame(result, float(frame_index))
    source = result
    if opts.heatmap and scale == "all":  # one scale over runs: their raw cell signals
        runs = heatmap_runs if heatmap_runs is not None else prepare_heatmap_runs(results, "all")
        source = runs[index]
        opts = dataclasses.replace(opts, scale="frame", heat="cell")
    elif opts.heatmap:
        opts = dataclasses.replace(opts, scale=scale)
    view = prepare_frame_layers(source, row, opts)
    image = view.image
    info, masks = _pane_info(results, index, frame_index, view.info, options)
    if masks is not None:
        image = draw_difference(
            image, masks, result.geometry.patch * result.geometry.block_size, show_both=options.show_both
        )
    # A letterboxed pane shows its picture only: the bars are no picture, and drawn they made the
    # pane taller than the others and carried heatmap colour.
    y0, y1, x0, x1 = picture_pixels(result)
    if (y0, x0, y1, x1) != (0, 0, *image.shape[:2]):
        image = np.ascontiguousarray(image[y0:y1, x0:x1])
    return PaneView(image=image, info=info, caption=pane_caption(info))


def prepare_pane_caption(
    results: Sequence[RunResult], index: int, frame_index: int, options: PaneOptions | None = None
) -> str:
    """The caption :func:`prepare_pane` gives pane ``index`` at ``frame_index``, without drawing the
    pane (the facts of a frame cost a fraction of a millisecond, its layers several).

    Parameters
    ----------
    results : the compared runs (1 to 4).
    index : pane / run index.
    frame_index : the frame every pane shows.
    options : as for :func:`prepare_pane`; only the labels and the difference mode matter here.

    Returns
    -------
    str, the pane's one-line caption.
    """
    options = options or PaneOptions()
    _pane_layers(results, index, options)  # the same refusals as prepare_pane
    result = results[index]
    row = navigation.row_for_frame(result, float(frame_index))
    facts = prepare_frame_layers(result, row, NO_LAYERS).info
    return pane_caption(_pane_info(results, index, frame_index, facts, options)[0])


def _pane_layers(results: Sequence[RunResult], index: int, options: PaneOptions) -> tuple[LayerOptions, str]:
    """The layers and heatmap scale of pane ``index`` (ValueError for a pane or scale that is none)."""
    if not 0 <= index < len(results):
        raise ValueError(f"Invalid pane ({index}). Supported values are 0 to {len(results) - 1}.")
    opts = options.layers or LayerOptions()
    scale = options.scale or opts.scale
    if scale not in HEATMAP_SCALES:
        raise ValueError(f"Invalid scale ({scale!r}). Supported values are {', '.join(HEATMAP_SCALES)}.")
    return opts, scale


def _pane_info(
    results: Sequence[RunResult], index: int, frame_index: int, facts: dict[str, Any], options: PaneOptions
) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """A pane's info (the frame's ``facts`` with its label, the frame asked for and, in difference
    mode, the block counts) and the difference masks (None outside difference mode)."""
    labels, difference_with = options.labels, options.difference_with
    info = dict(facts) | {
        "label": labels[index] if labels is not None else f"run {index}",
        "requested_frame_index": int(frame_index),
        "exact": int(facts["frame_index"]) == int(frame_index),
    }
    if difference_with is None or difference_with == index:
        return info, None
    masks = difference_masks(results[difference_with], results[index], int(facts["frame_index"]))
    info |= {k: int(m.sum()) for k, m in masks.items()}
    info["reference_label"] = labels[difference_with] if labels is not None else f"run {difference_with}"
    return info, masks


def picture_pixels(result: RunResult) -> tuple[int, int, int, int]:
    """``(y0, y1, x0, x1)``: the processed pixels that show the picture. A selector that adds bars
    (onevision letterboxes the frame into a square, ``SelectorSpec.picture_box``) centres the
    prepared frame in the processed one; every other run's picture is the whole frame."""
    h, w = result.geometry.processed_hw
    if spec_of(result.options).picture_box is None:
        return 0, h, 0, w
    top, left = letterbox_offsets(result.geometry)
    hn, wn = result.geometry.prepared_hw
    return top, min(h, top + hn), left, min(w, left + wn)


def pane_caption(info: dict[str, Any]) -> str:
    """One line under a pane: label, frame, time, type, size, group, what was kept, difference."""
    when = "–" if info.get("time_secs") is None else f"{info['time_secs']:.3f} s"
    role = "anchor (whole frame)" if info.get("is_anchor") else f"{info.get('kept_blocks', 0)} kept blocks"
    text = (
        f"{info['label']} · frame {info['frame_index']} · {when} · {info.get('pict_type', '?')} · "
        f"{info.get('size_bytes')} bytes · group {info.get('group_index')} · {role}"
    )
    if not info.get("exact", True):
        text += f" (nearest candidate to frame {info['requested_frame_index']})"
    if "a_only" in info:
        text += (
            f" · vs {info['reference_label']}: {info['a_only']} only there, "
            f"{info['b_only']} only here, {info['both']} both"
        )
    return text


def prepare_legend(colormap: str, low_label: str, high_label: str) -> np.ndarray:
    """(40, 256, 3) uint8 RGB colour bar with a label under each end."""
    if colormap not in COLORMAPS:
        raise ValueError(f"Invalid colormap ({colormap!r}). Supported values are {', '.join(COLORMAPS)}.")
    bar = cv2.applyColorMap(np.arange(256, dtype=np.uint8).reshape(1, 256), COLORMAPS[colormap])
    image = np.full((40, 256, 3), 255, np.uint8)
    image[:18] = cv2.cvtColor(bar, cv2.COLOR_BGR2RGB)
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(image, low_label, (2, 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    (w, _), _ = cv2.getTextSize(high_label, font, 0.4, 1)
    cv2.putText(image, high_label, (max(0, 254 - w), 34), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    return image


# --------------------------------------------------------------------------- metrics


def _clean(values: Any) -> list[float | None]:
    return [None if v is None or not np.isfinite(v) else float(v) for v in np.asarray(values, np.float64)]


def prepare_metric_figure(
    stored: StoredComparison, positions: np.ndarray, *, cursor_frame_index: int | None = None
) -> go.Figure:
    """Per-frame metrics of a comparison, x = frame_index, with a cursor line at the panes' frame.

    Rows: kept-set Jaccard per pair; Spearman of block scores per pair; Y-PSNR of every
    variant's decode against the source (full decode solid, cvp's fast reader dotted).
    The cursor is a shape named ``cursor`` spanning every row; ``layout.meta.frames`` holds
    the slider positions' frame indices so the browser can move it without a round trip.
    """
    labels = stored.labels
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        subplot_titles=(
            "Kept-set Jaccard (blocks in canvases)",
            "Spearman of block scores",
            "Y-PSNR vs source (dB)",
        ),
    )
    pf = stored.pair_frames
    pairs = pf.groupby(["variant_a", "variant_b"], sort=True) if len(pf) else []
    for k, ((a, b), part) in enumerate(pairs):
        name = f"{labels[int(a)]} vs {labels[int(b)]}"
        frames = part["frame_index"].to_numpy()
        for row, column in ((1, "jaccard"), (2, "spearman")):
            fig.add_trace(
                go.Scatter(
                    x=frames,
                    y=_clean(part[column]),
                    mode="lines",
                    name=name,
                    line={"color": pair_style(k)[0], "dash": pair_style(k)[1]},
                    legendgroup=name,
                    showlegend=row == 1,
                    customdata=frames,
                    hovertemplate=f"{name}<br>frame %{{x}}<br>{column} %{{y:.3f}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
    for (v, decoder), part in stored.luma.groupby(["variant_index", "decoder"], sort=True):
        name = f"{labels[int(v)]} ({'fast reader' if decoder == 'fast_reader' else 'full decode'})"
        frames = part["frame_index"].to_numpy()
        fig.add_trace(
            go.Scatter(
                x=frames,
                y=_clean(part["psnr_y_db"]),
                mode="lines",
                name=name,
                line={
                    "color": VARIANT_COLOURS[int(v) % 4],
                    "dash": "dot" if decoder == "fast_reader" else "solid",
                },
                customdata=frames,
                hovertemplate=f"{name}<br>frame %{{x}}<br>%{{y:.2f}} dB<extra></extra>",
            ),
            row=3,
            col=1,
        )
    _add_cursor(fig, positions, cursor_frame_index)
    apply_style(fig)
    fig.update_yaxes(range=[0, 1.02], title_text="Jaccard", row=1, col=1)
    fig.update_yaxes(range=[-1.02, 1.02], title_text="Spearman ρ", row=2, col=1)
    fig.update_yaxes(title_text="Y-PSNR (dB)", row=3, col=1)
    fig.update_xaxes(title_text="frame index", row=3, col=1)
    fig.update_layout(
        height=620,
        margin={"l": 60, "r": 10, "t": 40, "b": 10},
        meta={"frames": [int(f) for f in positions]},
        hovermode="x",
    )
    return fig


def _add_cursor(fig: go.Figure, positions: np.ndarray, cursor_frame_index: int | None) -> None:
    """The panes' cursor: the dashed line named ``cursor`` at the shown frame (default the first
    slider position), which the page's script moves as the panes step."""
    x = int(positions[0]) if cursor_frame_index is None else int(cursor_frame_index)
    fig.add_shape(
        type="line",
        name=CURSOR_NAME,
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        xref="x",
        yref="paper",
        line={"color": "black", "width": 1.5, "dash": "dash"},
    )


def _fmt(value: Any, digits: int = 3) -> Any:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return round(value, digits)
    return value


def _share(value: Any) -> Any:
    """A share for a table: a fraction 0–1 (views.wording.SHARE_CONVENTION), – when unknown."""
    number = float(value) if value is not None else math.nan
    return share(number) if math.isfinite(number) else "–"


def prepare_variant_table(stored: StoredComparison) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows): one row per variant with size, rate, selection and decode figures; the
    coverage columns are shares 0–1 (views.wording.SHARE_CONVENTION)."""
    headers = [
        "variant",
        "score",
        "size kB",
        "kb/s",
        "encode s",
        "canvases",
        "tokens/s",
        "time covered (share of frames)",
        "blocks kept (share)",
        "luma bias",
        "Y-PSNR dB",
        "reader bias",
        "reader Y-PSNR dB",
    ]
    metrics = stored.metrics.set_index("variant_index")
    rows = []
    for v in stored.variants.to_dict(orient="records"):
        m = metrics.loc[v["variant_index"]].to_dict()
        rows.append(
            [
                v["label"],
                v["score"],
                round(v["size_bytes"] / 1000, 1),
                round(float(v["bitrate_kbps"]), 1),
                round(float(v["encode_secs"]), 2),
                int(m["canvases"]),
                _fmt(float(m["tokens_per_sec"]), 1),
                _share(m["time_covered_share"]),
                _share(m["kept_block_share"]),
                _fmt(m["luma_bias_mean"]),
                _fmt(m["psnr_y_db"], 2),
                _fmt(m["reader_luma_bias_mean"]),
                _fmt(m["reader_psnr_y_db"], 2),
            ]
        )
    return headers, rows


def prepare_pair_table(stored: StoredComparison) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows): one row per pair with pooled and per-frame Jaccard and Spearman."""
    headers = ["pair", "Jaccard", "Jaccard (frame mean)", "Spearman mean", "Spearman median", "frames"]
    labels = stored.labels
    rows = [
        [
            f"{labels[int(p['variant_a'])]} vs {labels[int(p['variant_b'])]}",
            _fmt(p["jaccard"]),
            _fmt(p["jaccard_frame_mean"]),
            _fmt(p["spearman_mean"]),
            _fmt(p["spearman_median"]),
            int(p["frames_compared"]),
        ]
        for p in stored.pairs.to_dict(orient="records")
    ]
    return headers, rows


def prepare_settings_markdown(stored: StoredComparison) -> str:
    """The comparison's source, size, GOP, quality and per-variant encoder settings, as Markdown."""
    row = stored.row
    cfg = row.get("config") or {}
    settings = row.get("settings") or {}
    lines = [
        f"**{Path(str(row['source_path'])).name}** → {settings.get('width')}×{settings.get('height')}, "
        f"{settings.get('frames')} frames at {settings.get('fps')} fps; GOP {cfg.get('gop')}, "
        f"B-frames {cfg.get('bframes')}, "
        + (f"target {cfg.get('bitrate_kbps')} kb/s" if cfg.get("bitrate_kbps") else "CRF per codec")
        + f", speed {cfg.get('speed')} · comparison `{stored.comparison_id}`",
        "",
    ]
    for v in stored.variants.to_dict(orient="records"):
        lines.append(
            f"- **{v['label']}** ({v['encoder'] or 'pre-encoded'}): {v['structure_note']}; keyframes "
            f"{v['keyframe_indices_json']}; score {v['score_note']}"
        )
    return "\n".join(lines)


def prepare_comparison_choices(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(label, comparison_id) dropdown choices of finished comparisons, newest first (selector
    comparisons marked ``selectors``)."""
    out = []
    for r in rows:
        if r.get("status") != "done":
            continue
        when = r.get("created_at")
        stamp = when.strftime("%Y-%m-%d %H:%M") if hasattr(when, "strftime") else str(when)
        names = ", ".join(r.get("labels") or [])
        kind = "selectors · " if r.get("kind") == "selectors" else ""
        out.append(
            (
                f"{stamp} · {kind}{Path(str(r['source_path'])).name} · {names} · {r['comparison_id']}",
                str(r["comparison_id"]),
            )
        )
    return out


def cell_area_note(result: RunResult) -> str:
    """How the ``all`` scale turns a run's raw grid into a per-pixel value."""
    grid = next((g for g in result.decoded.grids if g is not None), None)
    if grid is None:
        return "no raw grid"
    area = cell_area_px(result, grid.shape)
    return (
        f"{result.decoded.grid_key} / {area:g} px" if area != 1.0 else f"{result.decoded.grid_key} (per px)"
    )


# --------------------------------------------------------------------------- selector comparisons


def prepare_selector_metric_figure(
    stored: StoredComparison, positions: np.ndarray, *, cursor_frame_index: int | None = None
) -> go.Figure:
    """Per-frame figures of a selector comparison, x = frame_index, with the panes' cursor.

    Rows: kept-set Jaccard per pair (y title ``Jaccard``; pairs in
    :data:`views.compare_style.PAIR_STYLES`, their legend ``legend`` under the row); kept blocks
    per selector (on the comparison's block grid, anchors counted whole; y title ``kept blocks``;
    selectors in :data:`VARIANT_COLOURS`, their own legend ``legend2`` under the row). Entries
    are labelled with their options, so the legends wrap; the figure grows by the lines they
    take at the narrowest screen width. The cursor is the shape ``cursor`` and
    ``layout.meta.frames`` the slider positions' frame indices, as in
    :func:`prepare_metric_figure`.
    """
    labels = stored.labels
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        subplot_titles=(
            "Kept-set Jaccard per pair (blocks in canvases)",
            "Kept blocks per frame, per selector",
        ),
    )
    pf = stored.pair_frames
    for k, ((a, b), part) in enumerate(pf.groupby(["variant_a", "variant_b"], sort=True) if len(pf) else []):
        name = f"{labels[int(a)]} vs {labels[int(b)]}"
        frames = part["frame_index"].to_numpy()
        colour, dash = pair_style(k)
        fig.add_trace(
            go.Scatter(
                x=frames,
                y=_clean(part["jaccard"]),
                mode="lines",
                name=name,
                line={"color": colour, "dash": dash, "width": 2},
                legend="legend",
                customdata=frames,
                hovertemplate=f"{name}<br>frame %{{x}}<br>Jaccard %{{y:.3f}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    for v, label in enumerate(labels):
        # A selector's counts appear in every pair it is part of; any one gives them.
        as_a = pf[pf["variant_a"] == v][["frame_index", "kept_a"]].rename(columns={"kept_a": "kept"})
        as_b = pf[pf["variant_b"] == v][["frame_index", "kept_b"]].rename(columns={"kept_b": "kept"})
        kept = pd.concat([as_a, as_b]).drop_duplicates("frame_index").sort_values("frame_index")
        fig.add_trace(
            go.Scatter(
                x=kept["frame_index"].to_numpy(),
                y=kept["kept"].to_numpy(),
                mode="lines",
                name=f"{label} kept",
                line={"color": VARIANT_COLOURS[v % len(VARIANT_COLOURS)], "width": 2},
                legend="legend2",
                customdata=kept["frame_index"].to_numpy(),
                hovertemplate=f"{label}<br>frame %{{x}}<br>%{{y}} blocks<extra></extra>",
            ),
            row=2,
            col=1,
        )
    _add_cursor(fig, positions, cursor_frame_index)
    apply_style(fig, legend_below=False)
    pair_names = [t.name for t in fig.data if t.yaxis == "y"]
    layout, rows = legend_rows_layout(pair_names, [f"{label} kept" for label in labels])
    fig.update_layout(layout)
    fig.update_yaxes(range=[0, 1.02], title_text="Jaccard", domain=rows[0], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", title_text="kept blocks", domain=rows[1], row=2, col=1)
    fig.update_xaxes(title_text="frame index", row=2, col=1)
    # The row titles make_subplots placed over the rows, moved with them.
    for note, (_, top) in zip(fig.layout.annotations, rows, strict=True):
        note.update(y=top, yanchor="bottom")
    fig.update_layout(meta={"frames": [int(f) for f in positions]}, hovermode="x")
    return fig


def prepare_selector_table(stored: StoredComparison) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows): one row per compared selector with its tokens, canvases and coverage
    (shares 0–1, views.wording.SHARE_CONVENTION)."""
    headers = [
        "selector",
        "canvases",
        "tokens",
        "valid tokens",
        "kept blocks",
        "time covered (share of 1 s bins)",
        "longest gap s",
        "space covered (share of blocks)",
        "run",
    ]
    cover = stored.coverage.set_index("variant_index") if len(stored.coverage) else None
    runs = stored.metrics.set_index("variant_index")["run_id"]
    rows = []
    for v in stored.variants.to_dict(orient="records"):
        i = v["variant_index"]
        c = cover.loc[i].to_dict() if cover is not None and i in cover.index else {}
        rows.append(
            [
                v["label"],
                int(c.get("canvases", 0)),
                int(c.get("tokens", 0)),
                int(c.get("valid_tokens", 0)),
                int(c.get("kept_blocks", 0)),
                _share(c.get("temporal_coverage", math.nan)),
                _fmt(float(c.get("longest_gap_secs", math.nan)), 2),
                _share(c.get("spatial_coverage", math.nan)),
                str(runs.get(i, "")),
            ]
        )
    return headers, rows


def prepare_selector_settings_markdown(stored: StoredComparison) -> str:
    """The selector comparison's video, grid and each entry's selector and options, as Markdown."""
    row = stored.row
    cfg = row.get("config") or {}
    options = row.get("options") or {}
    grid = cfg.get("grid_hw") or ["?", "?"]
    lines = [
        f"**{Path(str(row['source_path'])).name}** → {row.get('width')}×{row.get('height')}, "
        f"{row.get('frame_count')} frames at {row.get('fps')} fps · blocks compared on the first entry's "
        f"{grid[0]}×{grid[1]} grid (another grid's kept blocks count where they cover half a block) · "
        f"comparison `{stored.comparison_id}`",
        "",
    ]
    for v in stored.variants.to_dict(orient="records"):
        opts = options.get(v["label"], {})
        shown = ", ".join(f"{k}={val}" for k, val in opts.items() if k != "workers")
        lines.append(f"- **{v['label']}** ({v['score']}, {v['score_note']}): {shown}")
    return "\n".join(lines)
