"""Canvases view: patch sources on hover, reconstruction from canvases, coverage and a round-trip check."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import plotly.graph_objects as go

from backend.cvp_format import canvas_name
from backend.pipeline import RunResult

# Token column positions (see backend.records.TOKEN_COLUMNS).
_FRAME, _PATCH_ROW, _PATCH_COL, _CANVAS, _PACKED_ROW, _PACKED_COL, _GROUP, _VALID = range(8)
# Tokens compared per numpy step in the round trip: bounds the gathered copies to ~chunk·p²·3·2 bytes.
_ROUND_TRIP_CHUNK = 4096


@dataclass(frozen=True)
class Reconstruction:
    """A source frame rebuilt from the canvases: kept patches bright, the rest dimmed."""

    frame_index: int
    image: np.ndarray
    """(H, W, 3) uint8 RGB at the processed size."""
    patch_mask: np.ndarray
    """(hb, wb) bool, True where some canvas carries this frame's patch."""
    coverage: float
    """Fraction of the frame's patches present in some canvas, 0..1."""


@dataclass(frozen=True)
class RoundTrip:
    """Outcome of checking canvas patches against the source frames' pixels."""

    passed: bool
    checked_patches: int
    mismatched_patches: int
    fmt: str
    """``memory`` (in-memory canvases), ``png`` (files compared) or ``jpg`` (file check skipped)."""
    note: str
    unchecked_patches: int = 0
    """Valid tokens whose source frame is not among the decoded candidates (imported runs only)."""


def _as_patches(images: np.ndarray, patch: int, grid_hw: tuple[int, int]) -> np.ndarray:
    """View of images with the patch grid on the leading axes.

    Parameters
    ----------
    images : (N, H, W, 3) array.
    patch : patch side in pixels.
    grid_hw : (hb, wb) patch grid.

    Returns
    -------
    (N, hb, wb, patch, patch, 3) view (a reshape, so writes go through when ``images`` is contiguous).
    """
    hb, wb = grid_hw
    # Crop to whole patches: the grid floors H/patch, so a ragged edge is never tokenised.
    cropped = images[:, : hb * patch, : wb * patch]
    return cropped.reshape(images.shape[0], hb, patch, wb, patch, 3).transpose(0, 1, 3, 2, 4, 5)


def _valid_tokens(result: RunResult) -> np.ndarray:
    """(V, 8) int32 token rows that carry a source patch (padding dropped)."""
    tokens = result.canvases.tokens
    return tokens[tokens[:, _VALID] != 0]


def _first_row_by_frame(result: RunResult) -> dict[int, int]:
    """Candidate row of the first occurrence of each frame_index (repeats share pixels)."""
    first: dict[int, int] = {}
    for row, fid in enumerate(result.candidates.frame_indices.tolist()):
        first.setdefault(int(fid), row)
    return first


def _check_canvas_index(result: RunResult, canvas_index: int) -> None:
    count = result.canvases.count
    if not 0 <= canvas_index < count:
        raise ValueError(f"Invalid canvas_index ({canvas_index!r}). Supported values are 0 to {count - 1}.")


def patch_sources(result: RunResult, canvas_index: int) -> np.ndarray:
    """Source of every patch of one canvas.

    Parameters
    ----------
    result : a finished run.
    canvas_index : canvas to describe, 0..C−1.

    Returns
    -------
    (hb, wb, 3) int32 ``[frame_index, patch_row, patch_col]`` at each packed (row, col); −1 for padding.
    """
    _check_canvas_index(result, canvas_index)
    hb, wb = result.geometry.grid_hw
    tokens = result.canvases.tokens
    rows = tokens[tokens[:, _CANVAS] == canvas_index]
    sources = np.full((hb, wb, 3), -1, dtype=np.int32)
    # Place by the recorded packed position rather than trusting the canvas-raster row order.
    valid = rows[:, _VALID] != 0
    sources[rows[valid, _PACKED_ROW], rows[valid, _PACKED_COL]] = rows[valid, _FRAME : _PATCH_COL + 1]
    return sources


def prepare_canvas_hover(result: RunResult, canvas_index: int) -> list[list[str]]:
    """Hover text per patch of one canvas.

    Returns
    -------
    hb lists of wb strings: ``frame F · row r · col c`` or ``padding``.
    """
    sources = patch_sources(result, canvas_index)
    return [
        ["padding" if fid < 0 else f"frame {fid} · row {r} · col {c}" for fid, r, c in row_sources.tolist()]
        for row_sources in sources
    ]


def _tokens_by_frame(result: RunResult) -> dict[int, np.ndarray]:
    """frame_index → its valid token rows (V_f, 8), grouped once for many reconstructions."""
    tokens = _valid_tokens(result)
    order = np.argsort(tokens[:, _FRAME], kind="stable")
    tokens = tokens[order]
    frames, starts = np.unique(tokens[:, _FRAME], return_index=True)
    bounds = [*starts.tolist(), tokens.shape[0]]
    return {int(f): tokens[bounds[i] : bounds[i + 1]] for i, f in enumerate(frames.tolist())}


def _reconstruct(
    result: RunResult, frame_index: int, row: int, mine: np.ndarray, dim: float
) -> Reconstruction:
    geometry = result.geometry
    hb, wb = geometry.grid_hw
    source = result.decoded.pixels[row]
    # Round, not truncate, so a dimmed pixel is the nearest level to source·dim.
    image = np.rint(source.astype(np.float32) * dim).astype(np.uint8)
    canvas_patches = _as_patches(result.canvases.images, geometry.patch, (hb, wb))
    # Scatter into a contiguous whole-patch buffer: reshaping a cropped view could copy silently.
    tiled = np.ascontiguousarray(image[: hb * geometry.patch, : wb * geometry.patch])
    image_patches = _as_patches(tiled[None], geometry.patch, (hb, wb))[0]
    # A repeated frame may be carried twice; either copy holds the same pixels, so last write wins.
    image_patches[mine[:, _PATCH_ROW], mine[:, _PATCH_COL]] = canvas_patches[
        mine[:, _CANVAS], mine[:, _PACKED_ROW], mine[:, _PACKED_COL]
    ]
    image[: hb * geometry.patch, : wb * geometry.patch] = tiled
    patch_mask = np.zeros((hb, wb), dtype=bool)
    patch_mask[mine[:, _PATCH_ROW], mine[:, _PATCH_COL]] = True
    return Reconstruction(
        frame_index=int(frame_index),
        image=image,
        patch_mask=patch_mask,
        coverage=float(patch_mask.sum()) / (hb * wb),
    )


def _check_dim(dim: float) -> None:
    if not 0.0 <= dim <= 1.0:
        raise ValueError(f"Invalid dim ({dim!r}). Supported values are 0.0 to 1.0.")


def prepare_reconstruction(result: RunResult, frame_index: int, *, dim: float = 0.25) -> Reconstruction:
    """Rebuild a source frame from the canvases: kept patches in place, the rest dimmed.

    The kept patches are copied out of the canvases (not the decoded frame), so the image
    shows what the model receives and where it came from.

    Parameters
    ----------
    result : a finished run.
    frame_index : a candidate frame index (presentation order).
    dim : brightness factor for patches no canvas carries, 0.0..1.0.

    Returns
    -------
    Reconstruction with image (H, W, 3) uint8, patch_mask (hb, wb) bool and coverage.

    Raises
    ------
    ValueError : dim outside 0..1, or frame_index not among the candidates.
    """
    _check_dim(dim)
    first_row = _first_row_by_frame(result)
    if frame_index not in first_row:
        ids = result.candidates.frame_indices
        raise ValueError(
            f"Invalid frame_index ({frame_index!r}). Supported values are the {len(first_row)} candidate "
            f"frames between {int(ids.min())} and {int(ids.max())}."
        )
    tokens = _valid_tokens(result)
    mine = tokens[tokens[:, _FRAME] == frame_index]
    return _reconstruct(result, frame_index, first_row[frame_index], mine, dim)


def iter_reconstructions(result: RunResult, *, dim: float = 0.25) -> Iterator[Reconstruction]:
    """Reconstruction of every candidate frame, in candidate order, one at a time.

    Tokens are grouped by frame once, so a whole run costs one pass over them; memory stays at
    one (H, W, 3) image (repeated candidates are rebuilt, not kept).

    Yields
    ------
    Reconstruction per candidate row (n in all, n = number of candidates).
    """
    _check_dim(dim)
    by_frame = _tokens_by_frame(result)
    empty = np.zeros((0, 8), dtype=np.int32)
    for row, frame_index in enumerate(result.candidates.frame_indices.tolist()):
        yield _reconstruct(result, frame_index, row, by_frame.get(frame_index, empty), dim)


def prepare_coverage(result: RunResult) -> np.ndarray:
    """Fraction of each frame's patches carried by some canvas.

    Returns
    -------
    (n_frames_total,) float64 indexed by frame_index; 0 for frames never in a canvas.
    n_frames_total is the video's frame count (extended if a candidate lies beyond it).
    """
    hb, wb = result.geometry.grid_hw
    tokens = _valid_tokens(result)
    n_frames_total = int(result.info.total_frames)
    if tokens.shape[0]:
        n_frames_total = max(n_frames_total, int(tokens[:, _FRAME].max()) + 1)
    # Distinct (frame, patch) keys: a frame repeated in the candidates must not count twice.
    keys = (tokens[:, _FRAME].astype(np.int64) * hb + tokens[:, _PATCH_ROW]) * wb + tokens[:, _PATCH_COL]
    distinct_frames = np.unique(keys) // (hb * wb)
    counts = np.bincount(distinct_frames, minlength=n_frames_total)
    return counts / float(hb * wb)


def _count_mismatches(result: RunResult, canvas_images: np.ndarray, tokens: np.ndarray) -> tuple[int, int]:
    """Tokens whose canvas patch differs from the source frame's patch, and tokens not checked.

    Parameters
    ----------
    canvas_images : (C, H, W, 3) uint8 RGB canvases to check.
    tokens : (V, 8) int32 valid token rows.

    Returns
    -------
    (mismatched, unchecked): unchecked tokens name a frame that was never decoded (an
    imported run whose frame ids differ from ours), so there are no source pixels to compare.
    """
    geometry = result.geometry
    grid_hw = geometry.grid_hw
    first_row = _first_row_by_frame(result)
    # Map frame_index → candidate row with a lookup table so the chunks stay vectorised.
    size = max(max(first_row), int(tokens[:, _FRAME].max()) if tokens.size else 0) + 1
    lookup = np.full(size, -1, dtype=np.int64)
    lookup[list(first_row)] = list(first_row.values())
    decoded = lookup[tokens[:, _FRAME]] >= 0
    unchecked = int(tokens.shape[0] - decoded.sum())
    tokens = tokens[decoded]
    canvas_patches = _as_patches(canvas_images, geometry.patch, grid_hw)
    source_patches = _as_patches(result.decoded.pixels, geometry.patch, grid_hw)
    mismatched = 0
    for start in range(0, tokens.shape[0], _ROUND_TRIP_CHUNK):
        chunk = tokens[start : start + _ROUND_TRIP_CHUNK]
        rows = lookup[chunk[:, _FRAME]]
        packed = canvas_patches[chunk[:, _CANVAS], chunk[:, _PACKED_ROW], chunk[:, _PACKED_COL]]
        source = source_patches[rows, chunk[:, _PATCH_ROW], chunk[:, _PATCH_COL]]
        differs = (packed != source).reshape(chunk.shape[0], -1).any(axis=1)
        mismatched += int(differs.sum())
    return mismatched, unchecked


def _read_png_canvases(canvas_dir: Path, count: int) -> np.ndarray | None:
    """(count, H, W, 3) uint8 RGB from ``canvas_*.png``, or None when a file is missing or unreadable."""
    images = []
    for canvas_index in range(count):
        bgr = cv2.imread(str(canvas_dir / canvas_name(canvas_index, "png")), cv2.IMREAD_COLOR)
        if bgr is None:
            return None
        images.append(bgr[:, :, ::-1])
    return np.stack(images) if images else None


def round_trip_check(result: RunResult, *, canvas_dir: Path | None = None) -> RoundTrip:
    """Check that every valid token's canvas patch equals the source frame's patch.

    Parameters
    ----------
    result : a finished run; its in-memory canvases (C, H, W, 3) are checked by default.
    canvas_dir : an output folder; PNG canvases there are read back and compared exactly.
        JPEG canvases are lossy, so for them only the in-memory canvases are checked.

    Returns
    -------
    RoundTrip with pass/fail, patch counts, the format checked and a note for people.
    Tokens whose source frame was never decoded are counted as unchecked, not as passes.
    """
    tokens = _valid_tokens(result)
    count = result.canvases.count
    total = int(tokens.shape[0])

    def outcome(images: np.ndarray, fmt: str, what: str) -> RoundTrip:
        mismatched, unchecked = _count_mismatches(result, images, tokens)
        checked = total - unchecked
        note = (
            f"{what}: {checked - mismatched} of {checked} patches equal the source frame's pixels at the "
            "recorded position"
        )
        if unchecked:
            note += f"; {unchecked} patches name frames that were not decoded"
        return RoundTrip(mismatched == 0 and unchecked == 0, checked, mismatched, fmt, note, unchecked)

    if canvas_dir is None:
        return outcome(result.canvases.images, "memory", "in-memory canvases")
    canvas_dir = Path(canvas_dir)
    if count and (canvas_dir / canvas_name(0, "png")).is_file():
        images = _read_png_canvases(canvas_dir, count)
        if images is None or images.shape != result.canvases.images.shape:
            return RoundTrip(
                False, total, total, "png", f"{canvas_dir}: canvas files missing or of the wrong size"
            )
        return outcome(images, "png", "png files (exact)")
    if count and (canvas_dir / canvas_name(0, "jpg")).is_file():
        check = outcome(result.canvases.images, "jpg", "in-memory canvases")
        note = f"jpg files are lossy (quality 95), so the file check is skipped; {check.note}"
        return dataclasses.replace(check, note=note)
    return RoundTrip(False, total, total, "none", f"{canvas_dir}: no canvas files found")


def round_trip_markdown(check: RoundTrip) -> str:
    """One line for people: PASS or FAIL, what was compared and the counts."""
    verdict = "PASS" if check.passed else "FAIL"
    return f"**Round trip: {verdict}** — {check.note} ({check.mismatched_patches} differ)"


def prepare_sparse_video(result: RunResult) -> list[np.ndarray]:
    """Reconstruction of every candidate frame, in candidate order, for a sparse-video player.

    Memory: one (H, W, 3) uint8 image per candidate, e.g. 48 frames at 392×392 ≈ 22 MB;
    long runs should stream :func:`iter_reconstructions` instead.

    Returns
    -------
    n lists entries, each (H, W, 3) uint8 RGB, n = number of candidates.
    """
    return [recon.image for recon in iter_reconstructions(result)]


def _jpeg_data_uri(rgb: np.ndarray, quality: int) -> str:
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:  # pragma: no cover - OpenCV always encodes uint8 BGR
        raise ValueError("Invalid image (JPEG encoding failed). Supported values are (H, W, 3) uint8 arrays.")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


HOVER_TRACE = "sources"


def prepare_canvas_figure(result: RunResult, canvas_index: int, *, jpeg_quality: int = 90) -> go.Figure:
    """One canvas as a plotly figure whose patches name their source on hover.

    The picture travels as a JPEG data URI (a few tens of kB instead of per-pixel JSON); over
    it lies a fully transparent heatmap named ``sources`` with one cell per patch, whose
    ``text`` is ``packed (r, c)<br>frame F · row r · col c`` (or ``padding``) and whose
    ``customdata`` is the source frame_index (−1 for padding).

    Parameters
    ----------
    result : a finished run.
    canvas_index : 0..C−1.

    Returns
    -------
    go.Figure in pixel coordinates: x 0..W−1 left to right, y 0..H−1 top to bottom.
    """
    _check_canvas_index(result, canvas_index)
    if not 1 <= jpeg_quality <= 100:
        raise ValueError(f"Invalid jpeg_quality ({jpeg_quality!r}). Supported values are 1 to 100.")
    image = result.canvases.image(canvas_index)
    h, w = image.shape[:2]
    p = result.geometry.patch
    hb, wb = result.geometry.grid_hw
    hover = prepare_canvas_hover(result, canvas_index)
    sources = patch_sources(result, canvas_index)
    text = [[f"packed ({r}, {c})<br>{hover[r][c]}" for c in range(wb)] for r in range(hb)]
    clear = "rgba(0,0,0,0)"
    fig = go.Figure()
    fig.add_trace(
        go.Image(source=_jpeg_data_uri(image, jpeg_quality), x0=0, dx=1, y0=0, dy=1, hoverinfo="skip")
    )
    # Cell centres sit mid-patch in pixel coordinates (pixel i spans i−0.5..i+0.5).
    fig.add_trace(
        go.Heatmap(
            z=np.zeros((hb, wb)),
            x=np.arange(wb) * p + (p - 1) / 2,
            y=np.arange(hb) * p + (p - 1) / 2,
            text=text,
            customdata=sources[:, :, 0],
            hovertemplate="%{text}<extra></extra>",
            colorscale=[[0.0, clear], [1.0, clear]],
            showscale=False,
            name=HOVER_TRACE,
        )
    )
    group = int(result.canvases.canvas_group_index[canvas_index])
    fig.update_xaxes(range=[-0.5, w - 0.5], visible=False, constrain="domain")
    fig.update_yaxes(range=[h - 0.5, -0.5], visible=False, scaleanchor="x", constrain="domain")
    fig.update_layout(
        title={"text": f"canvas {canvas_index} · group {group} — hover a patch for its source", "x": 0.0},
        margin={"l": 4, "r": 4, "t": 32, "b": 4},
        height=min(720, max(320, h + 40)),
        hovermode="closest",
        dragmode=False,
        plot_bgcolor="white",
    )
    return fig


def dominant_source_frame(result: RunResult, canvas_index: int) -> int | None:
    """The frame supplying most patches of a canvas (anchor canvases: the anchor); None if all padding."""
    frames = patch_sources(result, canvas_index)[:, :, 0].ravel()
    frames = frames[frames >= 0]
    if not frames.size:
        return None
    values, counts = np.unique(frames, return_counts=True)
    return int(values[np.argmax(counts)])


def frame_choices(result: RunResult) -> list[tuple[str, int]]:
    """(label, frame_index) for every distinct candidate, ascending, labelled with its coverage."""
    coverage = prepare_coverage(result)
    return [
        (f"frame {f} · {coverage[f]:.0%} of patches kept", int(f))
        for f in np.unique(result.candidates.frame_indices).tolist()
    ]


def default_frame(result: RunResult) -> int:
    """A candidate worth showing first: the first partly kept one (kept and dimmed areas both show)."""
    coverage = prepare_coverage(result)
    ids = np.unique(result.candidates.frame_indices)
    partial = ids[(coverage[ids] > 0.0) & (coverage[ids] < 1.0)]
    return int(partial[0]) if partial.size else int(ids[np.argmax(coverage[ids])])


def prepare_coverage_figure(result: RunResult, *, frame_index: int | None = None) -> go.Figure:
    """Bar per candidate frame: the share of its patches that some canvas carries.

    Parameters
    ----------
    frame_index : the frame the reconstruction shows, marked by a vertical line named ``selected``.

    Returns
    -------
    go.Figure, x = frame_index, y = coverage in percent (whole frames at 100, dropped ones at 0).
    """
    coverage = prepare_coverage(result)
    ids = np.unique(result.candidates.frame_indices)
    values = coverage[ids] * 100.0
    colours = np.where(values >= 100.0, "#1f77b4", np.where(values > 0.0, "#ff7f0e", "#bbbbbb"))
    fig = go.Figure(
        go.Bar(
            x=ids,
            y=values,
            marker_color=colours.tolist(),
            hovertemplate="frame %{x}: %{y:.1f}% of patches in a canvas<extra></extra>",
            name="coverage",
        )
    )
    if frame_index is not None:
        fig.add_vline(x=frame_index, line_color="#d62728", line_dash="dot", name="selected")
    fig.update_layout(
        title={"text": "Coverage per frame (blue: whole frame · orange: kept blocks · grey: none)", "x": 0.0},
        xaxis_title="frame_index",
        yaxis_title="patches kept (%)",
        yaxis_range=[0, 105],
        height=280,
        margin={"l": 50, "r": 10, "t": 40, "b": 40},
        bargap=0.1,
    )
    return fig
