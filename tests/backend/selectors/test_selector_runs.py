"""Every selector and preset from the CLI on H.264, HEVC, VP9 and AV1; stored runs reopen and re-select;
onevision through reselect, compare and payload; a selector comparison's coverage and a letterboxed
run's blocks by hand."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run_cli_forked
from helpers.clips import encode_clip
from helpers.selector_args import TINY_CLIP_ARGS

from backend.compare import compare_selectors, load_comparison, parse_entries
from backend.compare.selectors import coverage, kept_mask_into, masks_on, picture_grid, picture_masks
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


COMMANDS = TINY_CLIP_ARGS


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
        if name == "onevision":  # frame 0 whole, then 2 canvases of 12×12 patches from frames 1…
            assert summary["frames"] == 16 and summary["tokens"] == 3 * 12 * 12
            assert (positions[: 12 * 12, 0] == 0).all() and (positions[12 * 12 :, 0] > 0).all()
            assert "signal_stand_in" in {w["code"] for w in summary["warnings"]}
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


def test_onevision_reselects_compares_and_pays_out_from_the_cli(
    tiny_clips: dict[str, Path], tmp_path: Path
) -> None:
    video, db = tiny_clips["h264"], tmp_path / "s.duckdb"
    args = ["--seq_len_frames", "16", "--num_images", "3", "--square_size", "192"]
    first = run_cli_forked(
        "select",
        video,
        "--selector",
        "onevision",
        *args,
        "--out",
        tmp_path / "ov",
        "--session-db",
        db,
        "--json",
    )
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    # The bool option as a switch; options of another selector refused in one line.
    again = run_cli_forked(
        "reselect", run_id, "--session-db", db, "--json", "--num_images", "2", "--no_static_fallback",
        "--topk_mode", "time_bucket", "--out", tmp_path / "ov2",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["selector"] == "onevision" and summary["parent_run_id"] == run_id
    assert summary["changed"] == {"num_images": 2, "topk_mode": "time_bucket", "static_fallback": False}
    assert summary["canvases"] == 2 and len(list((tmp_path / "ov2").glob("canvas_*.jpg"))) == 2
    refused = run_cli_forked("reselect", run_id, "--session-db", db, "--images_per_group", "2")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "Invalid option (--images_per_group) for the onevision selector" in refused.stderr
    as_cvp = run_cli_forked("reselect", run_id, "--session-db", db, "--json", "--selector", "cvp")
    assert as_cvp.returncode == 0 and json.loads(as_cvp.stdout)["selector"] == "cvp", as_cvp.stderr
    # A comparison with onevision: its blocks on cvp's 7×11 grid (the first entry's).
    compared = run_cli_forked(
        "compare", video, "--session-db", db, "--json",
        "--selectors", "cvp[num_sampled_frames=24],onevision[seq_len_frames=16,num_images=3,square_size=192]",
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    done = json.loads(compared.stdout)
    assert done["grid_hw"] == [7, 11] and [e["selector"] for e in done["entries"]] == ["cvp", "onevision"]
    ov = done["entries"][1]
    # Frame 0 is kept whole: every block of the picture, so spatial coverage is complete.
    assert ov["canvases"] == 3 and ov["spatial_coverage"] == 1.0 and ov["covered_bins"] >= 1
    # OneVision-Encoder's payload of the onevision folder: t over the 16 sampled frames, the square's grid.
    pay = run_cli_forked("payload", tmp_path / "ov", "--model", "onevision-encoder", "--out", tmp_path / "p")
    assert pay.returncode == 0, pay.stderr
    thw = np.load(tmp_path / "p" / "positions_thw.npy")
    vis = np.load(tmp_path / "p" / "visible_indices.npy")
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert manifest["grid_hw"] == [12, 12] and manifest["seq_len_frames"] == 16
    assert thw.shape == (3 * 144, 3) and (thw[:144, 0] == 0).all() and (thw[144:, 0] > 0).all()
    assert np.array_equal(vis, thw[:, 0].astype(np.int64) * 144 + thw[:, 1] * 12 + thw[:, 2])
    llava = run_cli_forked("payload", tmp_path / "ov", "--model", "llava-ov2", "--out", tmp_path / "q")
    assert llava.returncode == 2 and "16-pixel patches" in llava.stderr and llava.stderr.count("\n") == 1


def _only(result, frame: int, cells: list[tuple[int, int]]):
    """``result`` with its canvases carrying exactly ``cells`` (patch row, col) of ``frame``."""
    tok = np.array(result.canvases.tokens, copy=True)
    tok[:, 7] = 0
    tok[: len(cells), 0] = frame
    tok[: len(cells), 1:3] = cells
    tok[: len(cells), 7] = 1
    return dataclasses.replace(result, canvases=dataclasses.replace(result.canvases, tokens=tok))


def test_a_letterboxed_runs_blocks_land_where_their_pixels_are(
    tiny_clips: dict[str, Path], tmp_path: Path
) -> None:
    # onevision with a 320 square: the 320×192 frame fills rows 64…256, i.e. patch rows 4…16 of the
    # 20×20 grid; cvp's grid of the same frame is 7×11 blocks of 28 px (196×308 processed).
    video = tiny_clips["h264"]
    with SessionStore(tmp_path / "s.duckdb") as store:
        _, ov = select_and_store(
            video,
            store,
            options=options_for("onevision", {"seq_len_frames": 8, "num_images": 2, "square_size": 320}),
        )
        _, cvp = select_and_store(video, store, options=options_for("cvp", {"num_sampled_frames": 8}))
    assert picture_grid(ov) == (12, 20) and picture_grid(cvp) == (7, 11) == cvp.geometry.block_grid_hw
    # The picture's top-left 2×2 patches (square rows 4–5): on the 7×11 grid a target block spans
    # 12/7 × 20/11 patches, wholly inside them, so block (0, 0) alone is kept. Counting the bars
    # (the whole square resampled) would put them in block row 1 instead.
    top_left = _only(ov, 3, [(4, 0), (4, 1), (5, 0), (5, 1)])
    assert picture_masks(top_left)[3].sum() == 4
    kept = kept_mask_into(top_left, 3, cvp)
    assert kept.shape == (7, 11) and np.argwhere(kept).tolist() == [[0, 0]]
    # Back again: cvp's block (0, 0) covers 20/11 × 12/7 patches' worth; patches (0…1, 0…1) of the
    # picture are at least half covered (the smallest share 0.714 × 0.818), the next ones not, and
    # they sit below the 4 rows of bars.
    block = _only(cvp, 3, [(0, 0), (0, 1), (1, 0), (1, 1)])  # the 2×2 patches of block (0, 0)
    onto = kept_mask_into(block, 3, ov)
    assert onto.shape == (20, 20) and np.argwhere(onto).tolist() == [[4, 0], [4, 1], [5, 0], [5, 1]]
    # Spatial coverage counts the picture only: frame 0 whole covers all of it, bars or not.
    c = coverage(ov, (7, 11), variant_index=0, selector="onevision")
    assert c.spatial_coverage == 1.0
