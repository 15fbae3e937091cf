"""Model payloads by hand: 2×2 block order, padding, the timestamp prompt, OneVision's [t, h, w]."""

from __future__ import annotations

import numpy as np
import pytest

from backend.errors import InputError
from backend.payload import block_order, encoder_payload, llava_ov2_payload, timestamp_prompt
from backend.payload.llava_ov2 import padding_split, timestamp_runs

PAD = [-1, -1, -1]


def canvas(frame: int, h: int, w: int) -> np.ndarray:
    """Canvas-raster rows [frame, patch_row, patch_col] of a whole frame (an anchor canvas)."""
    r, c = np.divmod(np.arange(h * w), w)
    return np.stack([np.full(h * w, frame), r, c], axis=1)


def test_block_order_walks_each_2x2_block_in_raster_order() -> None:
    # A 2 × 4 grid: raster rows 0 1 2 3 / 4 5 6 7 → blocks (0 1 4 5) then (2 3 6 7).
    rows = np.arange(8)[:, None]
    assert block_order(rows, 2, 4).ravel().tolist() == [0, 1, 4, 5, 2, 3, 6, 7]
    # 4 × 4: the first block row gives 0 1 4 5 | 2 3 6 7, the second 8 9 12 13 | 10 11 14 15.
    assert block_order(np.arange(16)[:, None], 4, 4).ravel().tolist() == [
        0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15,
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"Invalid patch grid \(3x4\)"):
        block_order(np.arange(12)[:, None], 3, 4)


def test_positions_prompt_and_max_pixels_of_a_two_canvas_run() -> None:
    # Canvas 0: frame 0 whole (2 × 4 patches). Canvas 1: two blocks of frame 30 (left) and one of
    # frame 45 (right) — in raster rows: 30 30 45 45 / 30 30 45 45. Canvas 2: all padding.
    h, w = 2, 4
    c1 = np.array(
        [[30, 0, 0], [30, 0, 1], [45, 2, 2], [45, 2, 3], [30, 1, 0], [30, 1, 1], [45, 3, 2], [45, 3, 3]]
    )
    positions = np.concatenate([canvas(0, h, w), c1, np.full((8, 3), -1)])
    names = ["canvas_000.jpg", "canvas_001.jpg", "canvas_002.jpg"]
    payload = llava_ov2_payload(positions, canvas_names=names, grid_hw=(h, w), patch=14, fps=15.0)
    assert payload.kept == (0, 1) and payload.dropped == (2,)
    # Canvas 1 in block order: block (0,0) = raster 0 1 4 5, block (0,1) = raster 2 3 6 7.
    want_c1 = c1[[0, 1, 4, 5, 2, 3, 6, 7]]
    assert np.array_equal(payload.positions[8:], want_c1) and payload.positions.dtype == np.int64
    # Runs: frame 0 (8 rows → 2 tokens), frame 30 (4 rows → 1), frame 45 (4 rows → 1).
    assert payload.runs == ((0, 2), (30, 1), (45, 1)) and payload.image_pad_count == 4
    assert payload.prompt == (
        "<0.0 seconds><|vision_start|><|image_pad|><|image_pad|><|vision_end|>\n"
        "<2.0 seconds><|vision_start|><|image_pad|><|vision_end|>\n"
        "<3.0 seconds><|vision_start|><|image_pad|><|vision_end|>\n"
    )
    # A canvas of 2 × 4 patches of 14 px is 28 × 56 = 1568 px: max_pixels stays at 150000 …
    assert payload.max_pixels == 150000
    # … and follows a larger canvas (40 × 40 patches = 560 × 560 px).
    big = llava_ov2_payload(canvas(0, 40, 40), canvas_names=["c"], grid_hw=(40, 40), patch=14, fps=30)
    assert big.max_pixels == 560 * 560
    manifest = payload.manifest(names)
    assert manifest["canvas_files"] == names[:2] and manifest["dropped_canvases"] == names[2:]
    assert manifest["image_grid_thw"] == [[1, 2, 4], [1, 2, 4]]


def test_runs_continue_across_canvases() -> None:
    # Frame 7 ends canvas 0 and starts canvas 1: one run of 3 tokens.
    rows = np.array([[3, 0, 0]] * 4 + [[7, 0, 0]] * 4 + [[7, 0, 0]] * 8 + [PAD] * 4)
    assert timestamp_runs(rows) == [(3, 1), (7, 3)]
    assert timestamp_prompt([(7, 3)], 2.0, decimals=2).startswith("<3.50 seconds>")


def test_a_half_padded_canvas_is_refused_naming_it() -> None:
    positions = np.concatenate([canvas(0, 2, 2), [[5, 0, 0], [5, 0, 1], PAD, PAD]])
    with pytest.raises(InputError) as info:
        padding_split(positions, ["canvas_000.jpg", "canvas_001.jpg"])
    line = info.value.one_line()
    assert line.startswith("canvas_001.jpg: half-padded canvas: 2 of 4 patches") and "\n" not in line


def test_what_the_processor_cannot_take_is_refused() -> None:
    whole = canvas(0, 2, 2)
    with pytest.raises(InputError, match="16-pixel patches"):
        llava_ov2_payload(whole, canvas_names=["c"], grid_hw=(2, 2), patch=16, fps=30)
    with pytest.raises(InputError, match="does not split"):
        llava_ov2_payload(canvas(0, 3, 2), canvas_names=["c"], grid_hw=(3, 2), patch=14, fps=30)
    mixed = np.array([[0, 0, 0], [0, 0, 1], [9, 1, 0], [9, 1, 1]])  # single patches of two frames
    with pytest.raises(InputError, match=r"merge block 0,0 mixes frames \[0, 9\]"):
        llava_ov2_payload(
            np.concatenate([whole, mixed]), canvas_names=["a", "b"], grid_hw=(2, 2), patch=14, fps=30
        )
    with pytest.raises(InputError, match="every one of the 1 canvases is padding"):
        llava_ov2_payload(np.full((4, 3), -1), canvas_names=["c"], grid_hw=(2, 2), patch=14, fps=30)


def test_encoder_positions_count_time_in_sampled_frames() -> None:
    # Sampled frames 0, 12, 24, 24 (a repeat), 36; a 2 × 3 grid; canvas 1 holds three patches
    # of frame 24 and 36, then padding.
    frame_ids = np.array([0, 12, 24, 24, 36])
    c1 = np.array([[24, 1, 2], [36, 0, 0], [36, 1, 1], PAD, PAD, PAD])
    payload = encoder_payload(np.concatenate([canvas(0, 2, 3), c1]), frame_ids=frame_ids, grid_hw=(2, 3))
    thw = payload.positions_thw.tolist()
    assert thw[:6] == [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 1, 1], [0, 1, 2]]
    # Frame 24 is t 2 (its first place), 36 is t 4; the padding repeats the last real row.
    assert thw[6:] == [[2, 1, 2], [4, 0, 0], [4, 1, 1], [4, 1, 1], [4, 1, 1], [4, 1, 1]]
    # visible = t · 6 + h · 3 + w.
    assert payload.visible_indices.tolist() == [0, 1, 2, 3, 4, 5, 17, 24, 28, 28, 28, 28]
    assert payload.padded_rows == 3 and payload.seq_len_frames == 5
    assert payload.positions_thw.dtype == np.int32 and payload.visible_indices.dtype == np.int64
    with pytest.raises(InputError, match=r"frames \[99\]"):
        encoder_payload(np.array([[99, 0, 0]]), frame_ids=frame_ids, grid_hw=(1, 1))
