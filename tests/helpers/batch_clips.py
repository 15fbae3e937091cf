"""Tiny datasets for the batch tests: a nested folder of real encoded clips, and bad inputs among them."""

from __future__ import annotations

from pathlib import Path

from helpers.clips import encode_clip, make_bad_inputs

# Small and short: a unit costs ~0.1 s, so a batch's cost is its workers' start-up.
_TINY = {"width": 192, "height": 128, "frames": 24, "gop": 12}


def make_dataset(folder: Path) -> dict[str, Path]:
    """Four clips under ``folder``, keyed by their path relative to it.

    * ``a.mp4`` (H.264) and ``a.webm`` (VP9): one stem, two files, two output folders;
    * ``sub/b.mp4`` (HEVC) and ``sub/deeper/c.mp4`` (H.264, 32 frames, a static background);
    * plus ``README.txt`` and ``sub/notes.json``, which are not videos and are ignored.
    """
    folder.mkdir(parents=True, exist_ok=True)
    clips = [
        encode_clip(folder / "a", codec="h264", **_TINY),
        encode_clip(folder / "a", codec="vp9", **_TINY),
        encode_clip(folder / "sub" / "b", codec="hevc", **_TINY),
        encode_clip(
            folder / "sub" / "deeper" / "c", codec="h264", **{**_TINY, "frames": 32}, pattern="square"
        ),
    ]
    (folder / "README.txt").write_text("Four tiny clips for the batch tests.\n")
    (folder / "sub" / "notes.json").write_text('{"note": "not a video"}\n')
    return {clip.relative_to(folder).as_posix(): clip for clip in clips}


def make_bad_dataset(folder: Path) -> dict[str, Path]:
    """Two good clips and every kind of bad input a dataset holds, keyed by relative path.

    ``bad/…``: clips.make_bad_inputs (empty, a text file named .mp4, a truncated clip (index
    lost and index kept), audio only, MPEG-4 Part 2, 2×2, 642×362); ``bad/av1.mp4``: an AV1
    clip, which has no bitcost (the default signal); ``locked/``: a folder holding a clip, for
    the test to make unreadable.
    """
    good = {
        "good/a.mp4": encode_clip(folder / "good" / "a", codec="h264", **_TINY),
        "good/b.mp4": encode_clip(folder / "good" / "b", codec="hevc", **_TINY),
    }
    bad = make_bad_inputs(folder / "bad")
    out = dict(good)
    out |= {path.relative_to(folder).as_posix(): path for path in bad.values()}
    out["bad/av1.mp4"] = encode_clip(folder / "bad" / "av1", codec="av1", **_TINY)
    out["locked/hidden.mp4"] = encode_clip(folder / "locked" / "hidden", codec="h264", **_TINY)
    return out
