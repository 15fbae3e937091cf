"""``codec-lens compare``: a small real run with --json, and one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest
from helpers.cli import run_cli

from backend.store import SessionStore

# Whole comparisons through the CLI: the end-to-end tier, not the unit tier (--fast).
pytestmark = pytest.mark.slow

FLOWER = "real_h264_flower_timelapse.mp4"


@pytest.mark.needs_cvp
@pytest.mark.needs_cvp
def test_compare_prints_json_and_stores_the_comparison(real_clips, tmp_path) -> None:
    db = tmp_path / "s.duckdb"
    args = [
        "--codecs",
        "h264,av1",
        "--crf",
        "h264=26",
        "--gop",
        "6",
        "--max-frames",
        "12",
        "--max-side",
        "160",
    ]
    proc = run_cli("compare", real_clips / FLOWER, *args, "--session-db", db, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [v["label"] for v in out["variants"]] == ["h264 crf26", "av1 crf35"]
    assert out["frames"] == 12 and out["width"] == 160 and out["config"]["gop"] == 6
    assert out["selection_options"]["frame_sampling_mode"] == "all_frames"
    assert [v["keyframe_indices"] for v in out["variants"]] == [[0, 6], [0, 6]]
    assert out["variants"][1]["score"] == "residual" and "stands in" in out["variants"][1]["score_note"]
    (pair,) = out["pairs"]
    assert pair["a"] == "h264 crf26" and 0.0 <= pair["jaccard"] <= 1.0
    with SessionStore(db, read_only=True) as store:
        (row,) = store.list_comparisons()
    assert row["comparison_id"] == out["comparison_id"] and row["labels"] == ["h264 crf26", "av1 crf35"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--codecs", "h264,vp8"], "Invalid codecs"),
        (["--crf", "vp8=3"], "Invalid codec ('vp8'). Supported values are h264, hevc, vp9, av1."),
        (["--gop", "0"], "Invalid gop (0)"),
        (["--speed", "warp"], "Supported values are 'fast', 'medium', 'slow'"),
    ],
)
def test_bad_options_fail_with_one_line_listing_the_choices(real_clips, tmp_path, args, fragment) -> None:
    proc = run_cli("compare", real_clips / FLOWER, *args, "--session-db", tmp_path / "s.duckdb")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("codec-lens: error: ") and fragment in lines[0]


def test_a_missing_video_is_named(tmp_path) -> None:
    missing = tmp_path / "nope.mp4"
    proc = run_cli("compare", missing, "--session-db", tmp_path / "s.duckdb")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"codec-lens: error: {missing}: file does not exist"
