"""The block readout of an onevision run: rank and budget K describe its one top-K over frames 1…."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers.clips import encode_clip

from backend.pipeline import RunResult
from backend.selectors.onevision import OnevisionOptions, select_onevision, valid_patches
from views.inspector.readout import block_readout_html

pytestmark = pytest.mark.needs_cvp

PATCH = 16


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 frames of 320×240 H.264: letterboxed into a square, it has bars above and below."""
    return encode_clip(tmp_path_factory.mktemp("ov") / "ov", codec="h264", width=320, height=240, frames=24)


def _run(clip: Path, **options: object) -> RunResult:
    opts = OnevisionOptions(seq_len_frames=12, num_images=3, square_size=128, patch_size=PATCH, workers=1)
    return select_onevision(clip, options=opts.replace(**options))


@pytest.fixture(scope="module")
def global_run(clip: Path) -> RunResult:
    return _run(clip)


def _readout(result: RunResult, row: int, patch_row: int, patch_col: int) -> dict[str, str]:
    """The readout table of one patch as {row header: cell text}."""
    html, _ = block_readout_html(result, row, patch_col * PATCH + 3, patch_row * PATCH + 3)
    cells = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", html)
    return {re.sub("<[^>]+>", "", k): re.sub("<[^>]+>", "", v).replace("&gt;", ">") for k, v in cells}


def _rank_of(text: str) -> tuple[int, int]:
    m = re.match(r"(\d+) of (\d+) valid patches", text)
    assert m, text
    return int(m[1]), int(m[2])


def test_global_rank_is_over_every_valid_patch_of_frames_1_on(global_run: RunResult) -> None:
    result = global_run
    sel = result.selection.groups[0]
    valid = valid_patches(result.geometry)
    n = int(result.candidates.frame_indices.size)
    pool = (n - 1) * int(valid.sum())
    assert sel.budget == 2 * valid.size and pool > sel.budget  # the bars cut the pool below S · (n − 1)
    kept = {(int(t), int(r), int(c)) for t, r, c in sel.kept}
    seen_kept = seen_lost = 0
    for row in (1, n // 2, n - 1):
        for r, c in zip(*np.nonzero(valid), strict=True):
            cells = _readout(result, row, int(r), int(c))
            rank, size = _rank_of(cells["rank"])
            assert size == pool and 1 <= rank <= pool, cells
            assert cells["group · budget K"] == f"0 · K={sel.budget} over candidates 1–{n - 1}", cells
            if (row, r, c) in kept:
                seen_kept += 1
                assert cells["decision"].startswith(f"kept: rank {rank} ≤ K={sel.budget}"), cells
            else:
                seen_lost += 1
                assert cells["decision"].startswith(f"lost: rank {rank} "), cells
                assert rank > sel.budget or "tie" in cells["decision"], cells
    assert seen_kept and seen_lost
    # The kept patches are exactly the K best: the worst kept ranks at most K.
    worst = max(_rank_of(_readout(result, t, r, c)["rank"])[0] for t, r, c in kept)
    assert worst <= sel.budget


def test_a_patch_on_the_letterbox_bars_is_not_a_candidate(global_run: RunResult) -> None:
    result = global_run
    valid = valid_patches(result.geometry)
    r, c = (int(v[0]) for v in np.nonzero(~valid))
    cells = _readout(result, 3, r, c)
    assert cells["rank"] == "–" and "letterbox bars" in cells["decision"], cells
    # Frame 0 stays the anchor, kept whole.
    assert _readout(result, 0, 4, 4)["decision"].startswith("anchor frame"), _readout(result, 0, 4, 4)


def test_time_bucket_rank_and_budget_are_the_bucket_s(clip: Path) -> None:
    result = _run(clip, topk_mode="time_bucket")
    valid = valid_patches(result.geometry)
    # 11 frames after frame 0 in num_images − 1 = 2 buckets: candidates 1–6 and 7–11.
    cells = _readout(result, 8, *(int(v[0]) for v in np.nonzero(valid)))
    rank, size = _rank_of(cells["rank"])
    assert size == 5 * int(valid.sum()) and rank <= size, cells
    assert cells["group · budget K"] == f"0 · K={valid.size} in the time bucket of candidates 7–11", cells
