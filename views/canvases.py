"""Canvases view: patch sources on hover, reconstruction from canvases, coverage and a round-trip check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from backend.output import canvas_name
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
    count = result.canvases.images.shape[0]
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
    if not 0.0 <= dim <= 1.0:
        raise ValueError(f"Invalid dim ({dim!r}). Supported values are 0.0 to 1.0.")
    first_row = _first_row_by_frame(result)
    if frame_index not in first_row:
        ids = result.candidates.frame_indices
        raise ValueError(
            f"Invalid frame_index ({frame_index!r}). Supported values are the {len(first_row)} candidate "
            f"frames between {int(ids.min())} and {int(ids.max())}."
        )
    geometry = result.geometry
    hb, wb = geometry.grid_hw
    source = result.decoded.pixels[first_row[frame_index]]
    # Round, not truncate, so a dimmed pixel is the nearest level to source·dim.
    image = np.rint(source.astype(np.float32) * dim).astype(np.uint8)
    tokens = _valid_tokens(result)
    mine = tokens[tokens[:, _FRAME] == frame_index]
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


def _count_mismatches(result: RunResult, canvas_images: np.ndarray, tokens: np.ndarray) -> int:
    """Number of tokens whose canvas patch differs from the source frame's patch.

    Parameters
    ----------
    canvas_images : (C, H, W, 3) uint8 RGB canvases to check.
    tokens : (V, 8) int32 valid token rows.
    """
    geometry = result.geometry
    grid_hw = geometry.grid_hw
    first_row = _first_row_by_frame(result)
    # Map frame_index → candidate row with a lookup table so the chunks stay vectorised.
    lookup = np.full(max(first_row) + 1, -1, dtype=np.int64)
    lookup[list(first_row)] = list(first_row.values())
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
    return mismatched


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
    """
    tokens = _valid_tokens(result)
    count = result.canvases.images.shape[0]
    checked = int(tokens.shape[0])
    if canvas_dir is None:
        mismatched = _count_mismatches(result, result.canvases.images, tokens)
        note = f"in-memory canvases: {checked - mismatched} of {checked} patches match their source"
        return RoundTrip(mismatched == 0, checked, mismatched, "memory", note)
    canvas_dir = Path(canvas_dir)
    if count and (canvas_dir / canvas_name(0, "png")).is_file():
        images = _read_png_canvases(canvas_dir, count)
        if images is None or images.shape != result.canvases.images.shape:
            return RoundTrip(
                False, checked, checked, "png", f"{canvas_dir}: canvas files missing or of the wrong size"
            )
        mismatched = _count_mismatches(result, images, tokens)
        note = f"png files: {checked - mismatched} of {checked} patches match their source exactly"
        return RoundTrip(mismatched == 0, checked, mismatched, "png", note)
    if count and (canvas_dir / canvas_name(0, "jpg")).is_file():
        mismatched = _count_mismatches(result, result.canvases.images, tokens)
        note = (
            "jpg files are lossy (quality 95), so the file check is skipped; "
            f"in-memory canvases: {checked - mismatched} of {checked} patches match"
        )
        return RoundTrip(mismatched == 0, checked, mismatched, "jpg", note)
    return RoundTrip(False, checked, checked, "none", f"{canvas_dir}: no canvas files found")


def prepare_sparse_video(result: RunResult) -> list[np.ndarray]:
    """Reconstruction of every candidate frame, in candidate order, for a sparse-video player.

    Memory: one (H, W, 3) uint8 image per distinct candidate frame (repeats share the same
    array), e.g. 48 frames at 392×392 ≈ 22 MB; callers with long runs should stream
    ``prepare_reconstruction`` instead.

    Returns
    -------
    n lists entries, each (H, W, 3) uint8 RGB, n = number of candidates.
    """
    cache: dict[int, np.ndarray] = {}
    frames = []
    for frame_index in result.candidates.frame_indices.tolist():
        if frame_index not in cache:
            cache[frame_index] = prepare_reconstruction(result, frame_index).image
        frames.append(cache[frame_index])
    return frames
