"""LLaVA-OneVision-2's view of codec canvases: padding dropped, 2×2 block order, the timestamp prompt.

As the checkpoint's processor consumes them (lmms-video-utils spec §10, codec-video-prep's LLaVA
integration): canvases whose positions are all padding are dropped and a half-padded canvas is an
error; the image processor runs with ``max_pixels = max(150000, largest canvas area)`` so that its
grid is the canvas's own (1, h, w) patch grid; each canvas's positions, stored in canvas-raster
order, are reordered into the 2×2 merge-block order the vision tower emits tokens in; and the
prompt gets, for each run of equal source frames, ``<{frame / fps:.1f} seconds><|vision_start|>``,
one ``<|image_pad|>`` per merged token and ``<|vision_end|>`` and a newline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backend.errors import InputError

PATCH = 14
"""Side of the vision tower's patches, in pixels: positions must count in them."""
MERGE = 2
"""The processor merges MERGE × MERGE patches into one token."""
MIN_MAX_PIXELS = 150000
"""The processor's max_pixels when no canvas is larger (``prepare_llava_onevision_inputs``'s default)."""
IMAGE_PAD = "<|image_pad|>"
VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"


@dataclass(frozen=True)
class LlavaPayload:
    """What LLaVA-OneVision-2's processor is given for one run's canvases."""

    positions: np.ndarray
    """(L, 3) int64 ``[frame_index, patch_row, patch_col]`` of the kept canvases, each canvas's
    rows in 2×2 block order; L = kept canvases × h·w."""
    prompt: str
    """The video's span of the prompt: one timestamped vision block per run of equal frames."""
    kept: tuple[int, ...]
    """Indices of the canvases kept, in order."""
    dropped: tuple[int, ...]
    """Indices of the all-padding canvases dropped."""
    grid_hw: tuple[int, int]
    fps: float
    max_pixels: int
    image_pad_count: int
    runs: tuple[tuple[int, int], ...] = field(repr=False)
    """(frame_index, tokens) of each timestamped run, in prompt order."""

    def manifest(self, canvas_files: list[str]) -> dict[str, Any]:
        hb, wb = self.grid_hw
        return {
            "model": "llava-ov2",
            "canvas_files": [canvas_files[i] for i in self.kept],
            "dropped_canvases": [canvas_files[i] for i in self.dropped],
            "fps": self.fps,
            "max_pixels": self.max_pixels,
            "image_grid_thw": [[1, hb, wb] for _ in self.kept],
            "patch": PATCH,
            "merge_size": MERGE,
            "positions": "positions.npy",
            "positions_order": "per canvas, 2x2 merge-block order",
            "prompt": "prompt.txt",
            "image_pad_tokens": self.image_pad_count,
        }


def block_order(rows: np.ndarray, h: int, w: int, merge: int = MERGE) -> np.ndarray:
    """One canvas's canvas-raster rows reordered into merge-block order.

    The (h·w, k) rows viewed as (h/m, m, w/m, m, k), permuted to (h/m, w/m, m, m, k): block by
    block in raster order, each block's m×m patches in raster order.

    Examples
    --------
    >>> block_order(np.arange(8)[:, None], 2, 4).ravel().tolist()
    [0, 1, 4, 5, 2, 3, 6, 7]
    """
    if h % merge or w % merge:
        raise ValueError(
            f"Invalid patch grid ({h}x{w}). Supported values are multiples of {merge} on both sides."
        )
    k = rows.shape[1]
    return rows.reshape(h // merge, merge, w // merge, merge, k).transpose(0, 2, 1, 3, 4).reshape(h * w, k)


def padding_split(positions: np.ndarray, canvas_names: list[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The canvases to keep and the all-padding ones to drop.

    Raises
    ------
    InputError : a canvas is half padding (the processor cannot take it), naming the canvas.
    """
    count = len(canvas_names)
    if not count or positions.shape[0] % count:
        raise InputError(f"{positions.shape[0]} position rows do not split into {count} canvases")
    real = (positions[:, 0] >= 0).reshape(count, -1)
    kept, dropped = [], []
    for c in range(count):
        if real[c].all():
            kept.append(c)
        elif real[c].any():
            raise InputError(
                f"half-padded canvas: {int(real[c].sum())} of {real.shape[1]} patches carry a source, "
                "the rest is padding; LLaVA-OneVision-2's processor takes whole canvases only",
                path=canvas_names[c],
            )
        else:
            dropped.append(c)
    return tuple(kept), tuple(dropped)


def timestamp_runs(block_rows: np.ndarray, merge: int = MERGE) -> list[tuple[int, int]]:
    """(frame_index, tokens) per run of consecutive equal source frames, tokens = rows // merge².

    Runs continue across canvas borders (the anchor canvas is one run); padding rows are skipped.
    """
    frames = block_rows[:, 0]
    frames = frames[frames >= 0]
    if frames.size == 0:
        return []
    starts = np.flatnonzero(np.r_[True, frames[1:] != frames[:-1]])
    lengths = np.diff(np.r_[starts, frames.size])
    return [
        (int(frames[s]), int(n) // (merge * merge))
        for s, n in zip(starts, lengths, strict=True)
        if n >= merge * merge
    ]


def timestamp_prompt(runs: list[tuple[int, int]], fps: float, *, decimals: int = 1) -> str:
    """The video's prompt span: ``<t seconds><|vision_start|><|image_pad|>×n<|vision_end|>\\n`` per run.

    Examples
    --------
    >>> print(timestamp_prompt([(0, 2), (45, 1)], 30.0), end="")
    <0.0 seconds><|vision_start|><|image_pad|><|image_pad|><|vision_end|>
    <1.5 seconds><|vision_start|><|image_pad|><|vision_end|>
    """
    return "".join(
        f"<{frame / fps:.{decimals}f} seconds>{VISION_START}{IMAGE_PAD * count}{VISION_END}\n"
        for frame, count in runs
    )


def llava_ov2_payload(
    positions: np.ndarray,
    *,
    canvas_names: list[str],
    grid_hw: tuple[int, int],
    patch: int,
    fps: float,
) -> LlavaPayload:
    """The processor's inputs for one run's canvases.

    Parameters
    ----------
    positions : (C·h·w, 3) int ``[frame_index, patch_row, patch_col]`` in canvas-raster order,
        −1 rows for padding (``src_patch_position.npy``).
    canvas_names : the C canvases' file names, in order (named in errors).
    grid_hw : (h, w) patches per canvas.
    patch : patch side the positions count in.
    fps : the video's frame rate (0: 30, as the integration assumes).

    Raises
    ------
    InputError : positions not in 14-pixel patches, a patch grid the 2×2 merge cannot cut, a 2×2
        block mixing source frames (selectors keeping single patches), a half-padded canvas, or
        no canvas left.
    """
    h, w = grid_hw
    if patch != PATCH:
        raise InputError(
            f"positions count {patch}-pixel patches; LLaVA-OneVision-2's vision tower cuts {PATCH}-pixel ones"
        )
    if h % MERGE or w % MERGE:
        raise InputError(f"a {h}x{w} patch grid does not split into {MERGE}x{MERGE} merge blocks")
    kept, dropped = padding_split(positions, canvas_names)
    if not kept:
        raise InputError(f"every one of the {len(canvas_names)} canvases is padding")
    s = h * w
    blocks = [block_order(positions[c * s : (c + 1) * s].astype(np.int64), h, w) for c in kept]
    for c, rows in zip(kept, blocks, strict=True):
        quads = rows[:, 0].reshape(-1, MERGE * MERGE)
        mixed = np.flatnonzero((quads != quads[:, :1]).any(axis=1))
        if mixed.size:
            b = int(mixed[0])
            frames = sorted(set(quads[b].tolist()))
            raise InputError(
                f"merge block {b // (w // MERGE)},{b % (w // MERGE)} mixes frames {frames}: "
                f"LLaVA-OneVision-2 merges {MERGE}x{MERGE} patches into one token, so each block must come "
                "from one frame",
                path=canvas_names[c],
            )
    ordered = np.concatenate(blocks)
    fps_used = float(fps) if fps and fps > 0 else 30.0
    runs = timestamp_runs(ordered)
    area = h * w * patch * patch
    return LlavaPayload(
        positions=ordered,
        prompt=timestamp_prompt(runs, fps_used),
        kept=kept,
        dropped=dropped,
        grid_hw=grid_hw,
        fps=fps_used,
        max_pixels=max(MIN_MAX_PIXELS, area),
        image_pad_count=sum(n for _, n in runs),
        runs=tuple(runs),
    )
