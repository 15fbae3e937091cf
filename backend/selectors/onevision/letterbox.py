"""onevision's letterbox: the square geometry, the letterboxed decode and its patch scores."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.config import param, validate_fields
from backend.errors import DecodeError
from backend.imaging import upsample
from backend.records import (
    Candidates,
    DecodedFrames,
    Geometry,
    RunWarning,
    ScoreMaps,
    VideoInfo,
)
from backend.stages.geometry import check_frame_size
from backend.stages.score import NORMALISERS, ScoreConfig, patch_and_block_sums
from backend.stages.signals import SignalConfig, compute_signals


@dataclass(frozen=True, kw_only=True)
class LetterboxConfig:
    """The square every frame is letterboxed into, and its patches."""

    square_size: int = param(576, label="Square size", help="side of the square", min=16, max=4096)
    patch_size: int = param(16, label="Patch", help="patch side in pixels", min=1, max=256)

    def __post_init__(self) -> None:
        validate_fields(self)


def letterbox_geometry(info: VideoInfo, *, config: LetterboxConfig) -> Geometry:
    """The letterbox: the longer side scaled to ``square_size``, the frame centred in the square.

    Returns
    -------
    Geometry with ``prepared_hw`` the scaled frame (Hn, Wn) = (round(H·s), round(W·s)),
    s = square_size / max(H, W) (Python's rounding, as the reference), ``processed_hw`` the
    square, 1×1 blocks (onevision selects patches).

    Examples
    --------
    >>> from backend.records import VideoInfo
    >>> e = np.zeros(0)
    >>> info = VideoInfo("v", 0, "mp4", "h264", 1280, 720, 30.0, 1, "header", 1.0, 0, 0, 0.0,
    ...                  e, e.astype(np.int64), e.astype(bool), None, False)
    >>> geo = letterbox_geometry(info, config=LetterboxConfig())
    >>> geo.prepared_hw, geo.processed_hw, letterbox_offsets(geo)
    ((324, 576), (576, 576), (126, 0))
    """
    h0, w0 = info.height, info.width
    check_frame_size(w0, h0, path=info.path)
    s = config.square_size
    scale = s / max(h0, w0)
    content = (max(1, round(h0 * scale)), max(1, round(w0 * scale)))
    return Geometry(
        orig_hw=(h0, w0), prepared_hw=content, processed_hw=(s, s), patch=config.patch_size, block_size=1
    )


def letterbox_offsets(geometry: Geometry) -> tuple[int, int]:
    """(pad_top, pad_left) of the scaled frame inside the square."""
    (hn, wn), (s, _) = geometry.prepared_hw, geometry.processed_hw
    return (s - hn) // 2, (s - wn) // 2


def picture_blocks(geometry: Geometry) -> tuple[int, int, int, int]:
    """``(r0, r1, c0, c1)``: the patch rows and columns that show the scaled frame, its edges
    rounded to the nearest patch boundary (a comparison with another selector maps these onto
    that selector's grid; the bars are not part of the picture).

    Examples
    --------
    >>> geo = Geometry(orig_hw=(720, 1280), prepared_hw=(324, 576), processed_hw=(576, 576),
    ...                patch=16, block_size=1)
    >>> picture_blocks(geo)  # rows 126…450 px: 7.875 → 8, 28.125 → 28
    (8, 28, 0, 36)
    """
    top, left = letterbox_offsets(geometry)
    hn, wn = geometry.prepared_hw
    p = geometry.patch * geometry.block_size
    rows, cols = geometry.block_grid_hw
    r0, c0 = min(rows - 1, round(top / p)), min(cols - 1, round(left / p))
    r1, c1 = max(r0 + 1, min(rows, round((top + hn) / p))), max(c0 + 1, min(cols, round((left + wn) / p)))
    return r0, r1, c0, c1


def valid_patches(geometry: Geometry) -> np.ndarray:
    """(rows, cols) bool: patches lying wholly inside the scaled frame (not on the padding)."""
    top, left = letterbox_offsets(geometry)
    hn, wn = geometry.prepared_hw
    p = geometry.patch
    rows, cols = geometry.grid_hw
    r = np.arange(rows) * p
    c = np.arange(cols) * p
    return ((r >= top) & (r + p <= top + hn))[:, None] & ((c >= left) & (c + p <= left + wn))[None, :]


def _pad(content: np.ndarray, geometry: Geometry) -> np.ndarray:
    """Place a (Hn, Wn, …) array in the square at the letterbox offset, zeros around it."""
    s = geometry.processed_hw[0]
    top, left = letterbox_offsets(geometry)
    out = np.zeros((s, s, *content.shape[2:]), content.dtype)
    out[top : top + content.shape[0], left : left + content.shape[1]] = content
    return out


# --------------------------------------------------------------------------- decode and score


def decode_letterboxed(
    info: VideoInfo, candidates: Candidates, geometry: Geometry, *, config: SignalConfig
) -> tuple[DecodedFrames, np.ndarray, str]:
    """The candidates' signal grids and letterboxed pixels, from one decode.

    Returns
    -------
    decoded : DecodedFrames with ``pixels`` (n, S, S, 3) letterboxed RGB and ``grids`` the raw
        signal grids (cells of the original frame) — :func:`score_letterboxed` turns them into
        patch grids of the square.
    content : (n, Hn, Wn, 3) RGB of the scaled frames alone (for the bad-frame test).
    exactness : the signal's exactness summary.
    """
    hn, wn = geometry.prepared_hw
    signals = compute_signals(info, candidates.frame_indices, config=config, pixels_hw=(hn, wn))
    if signals.pixels is None:
        raise DecodeError(f"the {config.kind} signal decoded no pixels", path=info.path, stage="decode")
    ids = candidates.frame_indices.astype(np.int32)
    pixels = np.zeros((ids.size, *geometry.processed_hw, 3), np.uint8)
    top, left = letterbox_offsets(geometry)
    pixels[:, top : top + hn, left : left + wn] = signals.pixels
    warnings = list(signals.warnings)
    warnings.append(
        RunWarning(
            "signal_stand_in",
            f"{config.kind} from FFmpeg's exported motion vectors and a rebuilt prediction "
            f"({signals.exactness}) stands in for OneVision-Encoder's patched-decoder motion and "
            "residual export",
        )
    )
    decoded = DecodedFrames(
        frame_indices=ids,
        pixels=pixels,
        grids=signals.grids,
        grid_key=config.kind,
        pict_types=signals.pict_types,
        bitcost_source=ids,
        pixel_source="full_decode",
        read_mode=f"signal {config.kind} ({signals.exactness}), letterboxed",
        warnings=tuple(warnings),
    )
    return decoded, signals.pixels, signals.exactness


def _letterboxed_patch_sums(grid: np.ndarray, geometry: Geometry) -> np.ndarray:
    """(rows, cols) float32 patch sums of a cell grid stretched over the scaled frame, in the square."""
    stretched = upsample(np.asarray(grid, np.float32), geometry.prepared_hw)
    patches, _ = patch_and_block_sums(_pad(stretched, geometry), patch=geometry.patch, block_size=1)
    return patches


def score_letterboxed(decoded: DecodedFrames, geometry: Geometry, *, normalisation: str) -> ScoreMaps:
    """Patch scores of the letterboxed frames: each normalised grid stretched over the scaled
    frame (nearest neighbour), padded into the square and summed per patch.

    Returns
    -------
    ScoreMaps whose ``grids`` are the (rows, cols) patch means of the normalised map (so a view
    that stretches them over the square draws them in place), ``patch_scores`` the sums
    (n, rows, cols) and ``block_scores`` the same sums flattened (1×1 blocks).
    """
    normaliser = NORMALISERS.lookup(normalisation)
    raw = [np.zeros((1, 1), np.float32) if g is None else g for g in decoded.grids]
    normalised = normaliser.function(raw, config=ScoreConfig(normalisation=normalisation))
    area = np.float32(geometry.patch * geometry.patch)
    cache: dict[int, np.ndarray] = {}
    sums = []
    for g in normalised:  # repeated candidates share one grid object
        if id(g) not in cache:
            cache[id(g)] = _letterboxed_patch_sums(g, geometry)
        sums.append(cache[id(g)])
    patch_scores = np.stack(sums) if sums else np.zeros((0, *geometry.grid_hw), np.float32)
    return ScoreMaps(
        grids=tuple(s / area for s in sums),
        processed_hw=geometry.processed_hw,
        patch_scores=patch_scores,
        block_scores=patch_scores.reshape(patch_scores.shape[0], -1),
        iframe_clip_cap=None,
        debug={"normalisation": normalisation, "letterbox_offsets": list(letterbox_offsets(geometry))},
    )


def letterboxed_raw_grids(decoded: DecodedFrames, geometry: Geometry) -> tuple[np.ndarray, ...]:
    """The raw signal as patch means over the square (the grid views look up under a block)."""
    area = np.float32(geometry.patch * geometry.patch)
    cache: dict[int, np.ndarray] = {}
    out = []
    for g in decoded.grids:
        key = id(g)
        if key not in cache:
            grid = np.zeros((1, 1), np.float32) if g is None else g
            cache[key] = _letterboxed_patch_sums(grid, geometry) / area
        out.append(cache[key])
    return tuple(out)
