"""OneVision-Encoder's view of codec canvases: ``positions_thw`` and ``visible_indices``.

As ``offline_precompute_llava_codec_assets.py`` of ``EvolvingLMMs-Lab/OneVision-Encoder`` writes
them next to its mosaics: one ``[t, h, w]`` row per canvas token in canvas order (raster order in
a canvas), t the position of the token's source frame among the sampled frames, and the visible
index ``t · (H·W) + h · W + w`` of each (int64). The reference always fills every canvas: where a
run has padding, the rows repeat the last real position, as its "force exact target" step does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.errors import InputError


@dataclass(frozen=True)
class EncoderPayload:
    """What OneVision-Encoder takes for one run's canvases."""

    positions_thw: np.ndarray
    """(C·H·W, 3) int32 ``[t, patch_row, patch_col]``, canvas order."""
    visible_indices: np.ndarray
    """(C·H·W,) int64 ``t · H·W + patch_row · W + patch_col``."""
    padded_rows: int
    """Rows that were padding in the run, now repeating the last real position."""
    grid_hw: tuple[int, int]
    seq_len_frames: int

    def manifest(
        self, canvas_files: list[str], *, fps: float, frame_ids: list[int], patch: int
    ) -> dict[str, Any]:
        hb, wb = self.grid_hw
        return {
            "model": "onevision-encoder",
            "canvas_files": list(canvas_files),
            "fps": fps,
            "frame_ids": frame_ids,
            "seq_len_frames": self.seq_len_frames,
            "grid_hw": [hb, wb],
            "patch": patch,
            "tokens_per_canvas": hb * wb,
            "positions_thw": "positions_thw.npy",
            "visible_indices": "visible_indices.npy",
            "padded_rows": self.padded_rows,
            "padding": "padding rows repeat the last real position (the reference's exact-target fill)",
            "t": "position of the source frame in frame_ids (the first one when a frame repeats)",
        }


def encoder_payload(
    positions: np.ndarray, *, frame_ids: np.ndarray, grid_hw: tuple[int, int]
) -> EncoderPayload:
    """``positions_thw`` and ``visible_indices`` of a run's canvas tokens.

    Parameters
    ----------
    positions : (C·H·W, 3) int ``[frame_index, patch_row, patch_col]``, −1 rows for padding.
    frame_ids : (n,) int, the sampled frames; t indexes them.
    grid_hw : (H, W) patches per canvas.

    Raises
    ------
    InputError : no token carries a source, or a token's frame is not among ``frame_ids``.

    Examples
    --------
    >>> p = encoder_payload(np.array([[10, 0, 1], [30, 1, 0], [-1, -1, -1], [-1, -1, -1]]),
    ...                     frame_ids=np.array([10, 20, 30]), grid_hw=(2, 2))
    >>> p.positions_thw.tolist(), p.visible_indices.tolist(), p.padded_rows
    ([[0, 0, 1], [2, 1, 0], [2, 1, 0], [2, 1, 0]], [1, 10, 10, 10], 2)
    """
    h, w = grid_hw
    real = positions[:, 0] >= 0
    if not real.any():
        raise InputError("every canvas token is padding: nothing for the encoder to see")
    ids = np.asarray(frame_ids, np.int64)
    first = {}
    for t, fid in enumerate(ids.tolist()):
        first.setdefault(fid, t)
    missing = sorted({int(f) for f in positions[real, 0]} - set(first))
    if missing:
        raise InputError(f"frames {missing[:8]} of the positions are not among frame_ids")
    thw = np.empty((positions.shape[0], 3), np.int64)
    thw[:, 0] = [first.get(int(f), -1) for f in positions[:, 0]]
    thw[:, 1:] = positions[:, 1:]
    # Padding repeats the last real row; leading padding (none in practice) the first real one.
    index = np.where(real, np.arange(real.size), -1)
    np.maximum.accumulate(index, out=index)
    index[index < 0] = int(np.flatnonzero(real)[0])
    thw = thw[index]
    visible = thw[:, 0] * (h * w) + thw[:, 1] * w + thw[:, 2]
    return EncoderPayload(
        positions_thw=thw.astype(np.int32),
        visible_indices=visible.astype(np.int64),
        padded_rows=int((~real).sum()),
        grid_hw=grid_hw,
        seq_len_frames=int(ids.size),
    )
