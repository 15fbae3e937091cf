"""Measurement: what share of its blocks each stop gain keeps, on busy real clips and on still ones.

Usage::

    .venv/bin/python bench/stop_gain.py [VIDEO ...] [--gains 0.05,0.1,0.2,0.5]

Without VIDEO: the bundled clips in tests/data plus two made here from the first one's frame 40,
640×480 H.264 (crf 23, GOP 50, 2 B-frames), 100 frames: ``still`` (the frame repeated) and
``pan`` (a 640×480 window moving 1 px a frame across it, upscaled 1.5×). For each clip and scored
selector (cvp, llava-ov2, onevision; uniform has no scores), at an unlimited budget: the blocks
kept with no floor (stop gain 0), then the share of those kept at each gain and the stop reason.
The default (``backend.stages.budget.DEFAULT_STOP_GAIN``) should keep (nearly) every block of a
busy clip and clearly fewer of a still one; docs/audit.md has the table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # helpers.clips: the suite's encoder of RGB frames

import av  # noqa: E402
from helpers.clips import encode_frames  # noqa: E402

from backend.selectors import options_for, select  # noqa: E402

SELECTORS = ("cvp", "llava-ov2", "onevision")
UNLIMITED = 10**8


def _frame(video: Path, index: int) -> np.ndarray:
    with av.open(str(video)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i == index:
                return frame.to_ndarray(format="rgb24")
    raise ValueError(f"{video} has no frame {index}")


def _encode(path: Path, frames: list[np.ndarray]) -> Path:
    options = {"crf": "23", "g": "50", "bf": "2"}
    return encode_frames(path, frames, encoder="libx264", options=options, fps=25)


def make_still_clips(source: Path, folder: Path) -> list[Path]:
    """``still`` and ``pan`` (see the module docstring) from ``source``'s frame 40."""
    picture = _frame(source, 40)
    big = np.kron(picture, np.ones((2, 2, 1), np.uint8))[: 2 * picture.shape[0], : 2 * picture.shape[1]]
    big = big[: max(480, big.shape[0]), : max(740, big.shape[1])]
    still = np.ascontiguousarray(big[:480, :640])
    pans = [np.ascontiguousarray(big[:480, i : i + 640]) for i in range(100)]
    return [_encode(folder / "still.mp4", [still] * 100), _encode(folder / "pan.mp4", pans)]


def measure(video: Path, selector: str, gains: list[float]) -> list[str]:
    def kept(gain: float) -> tuple[int, int, str]:
        options = options_for(selector, {"token_budget": UNLIMITED, "stop_gain": gain})
        outcome = select(video, options=options).selection.budget
        return outcome.blocks, outcome.tokens_used, outcome.stop_reason

    free_blocks, free_tokens, _ = kept(0.0)
    cells = [f"{video.stem[:24]:<24} {selector:<10} {free_tokens:>7}"]
    for gain in gains:
        blocks, tokens, reason = kept(gain)
        share = blocks / free_blocks if free_blocks else 1.0
        cells.append(f"{share:>6.1%} {tokens:>6} {reason[:7]:<7}")
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("videos", nargs="*", type=Path)
    parser.add_argument("--gains", default="0.05,0.1,0.2,0.5")
    args = parser.parse_args()
    gains = [float(g) for g in args.gains.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        videos = list(args.videos)
        if not videos:
            data = REPO / "tests" / "data"
            videos = sorted(data.glob("real_*"))
            videos += make_still_clips(data / "real_h264_film_friday.mp4", Path(scratch))
        head = f"{'clip':<24} {'selector':<10} {'tokens@0':>7}"
        print(head + "".join(f" {'G=' + str(g):>21}" for g in gains))
        print(" " * len(head) + "   (share of blocks, tokens, stop reason)" * 1)
        for video in videos:
            for selector in SELECTORS:
                print(" ".join(measure(video, selector, gains)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
