"""Wording of CLI text output: every abbreviated column of ``compare``'s table is explained, counts
agree with their nouns."""

from __future__ import annotations

import re

from helpers.paths import REPO_ROOT

from app.cli import compare
from app.cli.select import print_summary


def _summary() -> dict:
    variant = {
        "label": "h264 crf23",
        "score": "bitcost",
        "bitrate_kbps": 812.4,
        "canvases": 7,
        "tokens_per_sec": 1234.5,
        "time_covered_share": 0.5,
        "kept_block_share": 0.25,
        "luma_bias_mean": 0.125,
        "psnr_y_db": 41.5,
        "reader_luma_bias_mean": None,
        "reader_psnr_y_db": None,
    }
    return {
        "source": "v.mp4",
        "frames": 12,
        "width": 160,
        "height": 90,
        "comparison_id": "c1",
        "seconds": {"total": 1.0},
        "variants": [variant],
        "pairs": [],
    }


def test_compare_table_has_a_legend_for_every_abbreviated_column(capsys) -> None:
    compare._print_text(_summary())
    lines = capsys.readouterr().out.splitlines()
    header = lines[1]
    assert header.split()[:3] == ["variant", "score", "kb/s"]
    legend = "\n".join(lines[3:])  # under the header and the one variant row
    for column in ("kb/s", "canv", "tok/s", "time%", "blk%", "bias", "PSNR", "rd bias", "rd PSNR"):
        assert column in header
        assert re.search(rf"(^|[ ,·]){re.escape(column)}[:,]", legend), column
    docs = (REPO_ROOT / "docs" / "compare.md").read_text()
    for column in ("canv", "tok/s", "time%", "blk%", "rd bias", "rd PSNR"):
        assert f"`{column}`" in docs, column


def test_export_scale_is_a_size_factor_and_still_takes_the_old_heatmap_words() -> None:
    import argparse

    import pytest

    from app.cli import export

    def options(scale: str | None, heatmap: str = "frame") -> tuple[float, str]:
        return export._size_options(argparse.Namespace(scale=scale, heatmap_scale=heatmap))

    assert options(None) == (1.0, "frame") and options(None, "video") == (1.0, "video")
    assert options("2") == (2.0, "frame") and options("0.5", "video") == (0.5, "video")
    assert options("video") == (1.0, "video")  # --scale once named the heatmap scale
    with pytest.raises(ValueError, match=r"Invalid scale \('big'\)\. Supported values are a size factor"):
        options("big")


def test_select_line_agrees_its_nouns_with_the_counts(capsys) -> None:
    one = {"video": "v.mp4", "frames": 1, "groups": 1, "canvases": 1, "tokens": 1, "seconds": 0.5}
    print_summary(one | {"profile": "clean", "warnings": [{"code": "x"}], "out": "o"}, as_json=False)
    many = {"video": "v.mp4", "frames": 9, "groups": 2, "canvases": 3, "tokens": 432, "seconds": 0.5}
    print_summary(many | {"profile": "parity", "warnings": []}, as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "v.mp4: 1 frame → 1 group, 1 canvas, 1 token in 0.50 s (clean, 1 warning) → o",
        "v.mp4: 9 frames → 2 groups, 3 canvases, 432 tokens in 0.50 s (parity, 0 warnings)",
    ]
