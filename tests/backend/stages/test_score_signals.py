"""Selecting with decoder-side signals (--score) instead of bitcost, end to end."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers.cli import run_cli
from helpers.clips import encode_clip

from backend.pipeline import SelectionOptions, run

W, H, FRAMES = 448, 336, 24  # processed at 448×336: 16×12 blocks of 28 px, 1 px = 1 px
SIDE = min(W, H) // 5  # the square's side in tests/clips.render_frame


@pytest.fixture(scope="module", params=["h264", "av1"])
def square_clip(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"square_{request.param}")
    return encode_clip(
        folder / "sq", codec=request.param, width=W, height=H, frames=FRAMES, fps=24, gop=12, pattern="square"
    )


def square_blocks(frame_index: int, f: int) -> set[tuple[int, int]]:
    """Blocks (28 px) the square covers in a frame, from the generator's geometry."""
    x0, y0 = (5 * frame_index) % (W - SIDE), (2 * frame_index) % (H - SIDE)
    return {
        (r, c)
        for r in range(y0 // f, (y0 + SIDE - 1) // f + 1)
        for c in range(x0 // f, (x0 + SIDE - 1) // f + 1)
    }


@pytest.mark.parametrize("score", ["mvres", "residual"])
def test_signal_scores_keep_the_moving_square(square_clip, score):
    # A small budget (ipg 2 → 48 blocks per group) so only the strongest blocks survive.
    opts = SelectionOptions(
        score=score,
        max_pixels=W * H,
        images_per_group=2,
        min_group_frames=8,
        grouping_mode="fixed",
        group_size=12,
    )
    result = run(square_clip, options=opts)
    assert result.decoded.grid_key == score and result.decoded.pixel_source == "full_decode"
    f = result.geometry.patch * result.geometry.block_size
    hits = total = 0
    for sel in result.selection.groups:
        for t, br, bc in sel.kept.tolist():
            fid = sel.frame_indices[t]
            near = square_blocks(fid, f) | square_blocks(max(0, fid - 1), f)  # the trail it uncovers
            hits += (br, bc) in near
            total += 1
    assert total > 0 and hits / total >= 0.5, f"{hits}/{total} kept blocks on the square"


@pytest.mark.slow  # whole-clip CLI selects
def test_av1_needs_a_signal_and_h264_qp_works(tmp_path):
    av1 = encode_clip(tmp_path / "a", codec="av1", width=320, height=240, frames=16, gop=8, pattern="square")
    res = run_cli("select", av1, "--out", tmp_path / "o1", "--num_sampled_frames", "16")
    assert res.returncode == 2 and "no bitcost" in res.stderr
    # The message suggests signals that work for AV1 (no qp: dav1d exports none), and its first
    # suggestion runs.
    assert "--profile clean --score residual (or mv, mvres or pkt_energy)" in res.stderr, res.stderr
    suggested = re.search(r"--score (\w+)", res.stderr).group(1)
    ok = run_cli("select", av1, "--out", tmp_path / "o2", "--score", suggested, "--json")
    assert ok.returncode == 0, ok.stderr
    hevc = encode_clip(tmp_path / "h", codec="hevc", width=320, height=240, frames=16, gop=8)
    bad = run_cli("select", hevc, "--out", tmp_path / "o3", "--score", "qp")
    assert bad.returncode == 2 and "QP is not available for codec hevc" in bad.stderr
    assert not (tmp_path / "o3").exists()
    h264 = encode_clip(tmp_path / "x", codec="h264", width=320, height=240, frames=16, gop=8)
    qp = run(h264, options=SelectionOptions(score="qp", num_sampled_frames=16))
    assert qp.decoded.grid_key == "qp" and all(np.isfinite(g).all() for g in qp.scores.grids)


def test_parity_refuses_signal_scores():
    with pytest.raises(ValueError, match=r"Invalid score \('mvres'\) for the parity profile"):
        SelectionOptions(profile="parity", score="mvres")
