"""Every selector and preset from the CLI on H.264, HEVC, VP9 and AV1; stored runs reopen and re-select;
a selector comparison's coverage by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from clips import encode_clip
from conftest import run_cli_forked

from backend.compare import compare_selectors, load_comparison, parse_entries
from backend.compare.selectors import coverage, masks_on
from backend.runs import open_run, reselect, select_and_store
from backend.selectors import options_for
from backend.store import SessionStore

pytestmark = [pytest.mark.slow, pytest.mark.needs_cvp]

CODECS = ("h264", "hevc", "vp9", "av1")


@pytest.fixture(scope="module")
def tiny_clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """48 frames of 320×192 at 24 fps in every codec, keyframes at 0 and 24."""
    folder = tmp_path_factory.mktemp("selector_clips")
    shape = {"width": 320, "height": 192, "frames": 48, "fps": 24, "gop": 24}
    return {c: encode_clip(folder / c, codec=c, **shape) for c in CODECS}


# Each command's selector options; AV1 has no bitcost, so cvp (and its presets) take a signal there.
COMMANDS = {
    "cvp": ["--num_sampled_frames", "24"],
    "llava-ov2": ["--selector", "llava-ov2", "--target_canvas", "8", "--score_mode", "mvwarp"],
    "uniform": ["--selector", "uniform", "--num_frames", "8"],
    "mage-vl": ["--preset", "mage-vl", "--num_sampled_frames", "24"],
    "llava-ov2-release": ["--preset", "llava-ov2-release"],
}


@pytest.mark.parametrize("codec", CODECS)
def test_every_selector_and_preset_runs_from_the_cli(
    codec: str, tiny_clips: dict[str, Path], tmp_path: Path
) -> None:
    db = tmp_path / "s.duckdb"
    for name, args in COMMANDS.items():
        needs_signal = codec == "av1" and name in ("cvp", "mage-vl", "llava-ov2-release")
        extra = ["--profile", "clean", "--score", "residual"] if needs_signal else []
        out = tmp_path / name
        done = run_cli_forked(
            "select", tiny_clips[codec], "--out", out, "--session-db", db, "--json", *args, *extra
        )
        assert done.returncode == 0, (codec, name, done.stderr)
        summary = json.loads(done.stdout)
        positions = np.load(out / "src_patch_position.npy")
        canvases = sorted(out.glob("canvas_*.jpg"))
        assert len(canvases) == summary["canvases"] > 0 and positions.shape == (summary["tokens"], 3)
        meta = json.loads((out / "meta.json").read_text())
        assert meta["total_images"] == len(canvases)
        selector = "cvp" if name in ("mage-vl", "llava-ov2-release") else name
        assert summary["selector"] == selector
        if name == "llava-ov2-release":  # its 512 frames are capped at the clip's 48, no repeats
            assert summary["frames"] == 48
        if name == "mage-vl":
            assert meta["patch"] == 16
    refused = run_cli_forked(
        "select", tiny_clips[codec], "--out", tmp_path / "x", "--selector", "uniform", "--gop_mode", "bitcost"
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "Invalid option (--gop_mode) for the uniform selector (an option of llava-ov2)" in refused.stderr


def test_stored_runs_of_every_selector_reopen_and_reselect(
    tiny_clips: dict[str, Path], tmp_path: Path
) -> None:
    video = tiny_clips["h264"]
    with SessionStore(tmp_path / "s.duckdb") as store:
        llava_id, llava = select_and_store(
            video, store, options=options_for("llava-ov2", {"target_canvas": 8})
        )
        assert store.get_run(llava_id).selector == "llava-ov2"
        again = open_run(store, llava_id)  # from the decode cache: nothing decoded
        assert np.array_equal(again.canvases.tokens, llava.canvases.tokens)
        assert np.array_equal(again.canvases.images, llava.canvases.images)
        new_id, result, how = reselect(store, llava_id, {"gop_mode": "bitcost", "min_group_frames": 4})
        assert how in ("cache", "cache+scores") and result.options.gop_mode == "bitcost"
        assert store.get_run(new_id).parent_run_id == llava_id
        _, _, how = reselect(store, llava_id, {"score_mode": "framediff", "target_canvas": 4})
        assert how == "full"
        uni_id, uniform = select_and_store(video, store, options=options_for("uniform", {"num_frames": 6}))
        # Whole frames: each canvas is one sampled frame, its tokens that frame's every patch; 6 frames
        # in groups of 4 leave the second group's last two canvases as padding.
        hb, wb = uniform.geometry.grid_hw
        tok = uniform.canvases.tokens.reshape(-1, hb * wb, 8)
        assert [int(t[0, 0]) for t in tok] == [*uniform.candidates.frame_indices.tolist(), -1, -1]
        assert np.array_equal(uniform.canvases.images[:6], uniform.decoded.pixels)
        _, other, how = reselect(store, uni_id, {"num_frames": 4}, selector="uniform")
        assert how == "full" and other.canvases.images.shape[0] == 4
        _, cvp_run, _ = reselect(store, uni_id, {"num_sampled_frames": 24}, selector="cvp")
        assert cvp_run.options.num_sampled_frames == 24
        with pytest.raises(ValueError, match=r"Invalid option \(--num_sampled_frames\) for the uniform"):
            reselect(store, uni_id, {"num_sampled_frames": 2})


def test_coverage_of_whole_frames_by_hand(tiny_clips: dict[str, Path], tmp_path: Path) -> None:
    # 48 frames at 24 fps: 2 s, two 1-second bins. Uniform with 2 frames keeps frames 0 and 47
    # (0 s and 1.958 s): both bins, a longest gap of 1.958 s, every block position.
    video = tiny_clips["vp9"]
    with SessionStore(tmp_path / "s.duckdb") as store:
        _, two = select_and_store(video, store, options=options_for("uniform", {"num_frames": 2}))
        _, one = select_and_store(video, store, options=options_for("uniform", {"num_frames": 1}))
    grid = two.geometry.block_grid_hw
    c2 = coverage(two, grid, variant_index=0, selector="uniform")
    assert (c2.bins, c2.covered_bins, c2.temporal_coverage) == (2, 2, 1.0)
    assert c2.longest_gap_secs == pytest.approx(47 / 24) and c2.spatial_coverage == 1.0
    c1 = coverage(one, grid, variant_index=0, selector="uniform")
    assert (c1.covered_bins, c1.temporal_coverage, c1.longest_gap_secs) == (1, 0.5, pytest.approx(2.0))
    assert c1.kept_blocks == grid[0] * grid[1] and c2.kept_blocks == 2 * c1.kept_blocks


def test_blocks_of_another_grid_count_where_they_cover_half() -> None:
    masks = np.zeros((1, 3, 3), bool)
    masks[0, 0, 0] = True
    # 3×3 → 2×2: the top-left target block is 1.5×1.5 source blocks, of which 1 is kept: 1/2.25 < ½.
    assert not masks_on(masks, (2, 2)).any()
    masks[0, 0, 1] = masks[0, 1, 0] = True  # now 1 + ½ + ½ = 2 of 2.25
    assert masks_on(masks, (2, 2))[0].tolist() == [[True, False], [False, False]]


def test_a_selector_comparison_is_stored_like_a_codec_comparison(
    tiny_clips: dict[str, Path], tmp_path: Path
) -> None:
    entries = parse_entries("cvp[num_sampled_frames=24],llava-ov2[target_canvas=8],uniform[num_frames=6]")
    with SessionStore(tmp_path / "s.duckdb") as store:
        done = compare_selectors(tiny_clips["h264"], store, entries=entries)
        stored = load_comparison(store, done.comparison_id)
        assert stored.kind == "selectors" and stored.labels == [e.label for e in entries]
        assert len(stored.run_ids) == 3 and all(store.get_run(r).status == "done" for r in stored.run_ids)
        assert stored.coverage["temporal_coverage"].between(0, 1).all() and len(stored.pairs) == 3
        # Per frame: a pair's Jaccard is both / (a + b − both), on the first entry's grid.
        pf = stored.pair_frames
        union = pf["kept_a"] + pf["kept_b"] - pf["kept_both"]
        finite = union > 0
        assert np.allclose(pf["jaccard"][finite], (pf["kept_both"] / union)[finite])
        # The uniform run keeps its frames whole: on them it has every block of the grid.
        uniform_kept = pf[pf["variant_b"] == 2]
        assert uniform_kept["kept_b"].isin([0, done.grid_hw[0] * done.grid_hw[1]]).all()
        assert (uniform_kept["kept_b"] > 0).groupby(uniform_kept["variant_a"]).sum().tolist() == [6, 6]
        assert store.list_comparisons()[0]["kind"] == "selectors"
    with pytest.raises(ValueError, match=r"Invalid selectors \(cvp\)"):
        parse_entries("cvp")
    with pytest.raises(ValueError, match=r"Invalid option \(--profile\)"):
        parse_entries("uniform,uniform[num_frames=3]", shared={"profile": "parity"})
