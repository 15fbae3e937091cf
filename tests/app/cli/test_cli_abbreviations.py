"""Abbreviated flags are refused: ``export --heat`` is not read as ``--heatmap-scale`` (issue 27 item 24)."""

from __future__ import annotations

import argparse

from helpers.cli import run_cli

from app.cli import CORE_COMMANDS, TOOL_COMMANDS, build_parser


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every sub-command parser under it, at any depth."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def test_no_parser_takes_abbreviations() -> None:
    parsers = _parsers(build_parser([]))
    names = {p.prog.split()[-1] for p in parsers}
    assert set(CORE_COMMANDS) | set(TOOL_COMMANDS) <= names
    assert "analyze" in names  # luma-bias's own actions too
    assert [p.prog for p in parsers if p.allow_abbrev] == []


def test_heat_is_its_own_flag_with_the_viewers_default() -> None:
    argv = ["export", "r1", "--out", "x.mp4"]
    args = build_parser(argv).parse_args(argv)
    assert (args.heat, args.heatmap_scale, args.layers, args.opacity, args.colormap) == (
        "block",
        "frame",
        "kept,anchor,bad",
        0.5,
        "turbo",
    )
    argv += ["--heat", "cell"]
    args = build_parser(argv).parse_args(argv)
    assert (args.heat, args.heatmap_scale) == ("cell", "frame")


def test_an_abbreviation_is_one_error_line_and_exit_2(tmp_path) -> None:
    # --heatmap was a prefix of --heatmap-scale: argparse used to take it for that flag.
    done = run_cli("export", "r1", "--out", tmp_path / "x.mp4", "--heatmap", "video")
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("codec-lens: error: unrecognized arguments: --heatmap video")
    assert not (tmp_path / "x.mp4").exists()
    # A core command too: --num-sampled for --num-sampled-frames.
    done = run_cli("select", tmp_path / "none.mp4", "--num-sampled", "8")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "unrecognized arguments: --num-sampled 8" in done.stderr
