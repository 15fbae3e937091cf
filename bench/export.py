"""Benchmark: exporting annotated 720p frames against encoding the same frames without overlays.

Usage::

    .venv/bin/python bench/export.py [--frames 300] [--repeat 3] [--layers heatmap,kept,lost,grid,anchor,bad]

Makes a 1280×720 H.264 clip of ``--frames`` frames from the bundled sample (upscaled real
footage, played forwards then backwards), runs the clean pipeline with ``max_pixels`` =
1280·720, ``patch`` 8 and ``block_size`` 2 so frames are processed at exactly 1280×720 (16 px
blocks) and every frame is a candidate, then, in alternating order, ``--repeat`` times:

1. plain: encode the processed frames as they are (libx264, CRF 18, preset medium — the
   export's own encoder settings) through ``native.gateway.VideoWriter``;
2. export: ``backend.export.write_export`` to mp4 with the chosen layers and the frame
   index/timestamp footer (drawing, encoding, sidecar with the input hash).

Prints each pair's seconds and ratio export / plain, and the range. Target (issue 6): ≤ 2.
Also prints the drawing time alone (composing every frame without encoding).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.export import (  # noqa: E402
    EXPORT_LAYERS,
    ClipComposer,
    ExportConfig,
    ExportRun,
    export_rows,
    parse_names,
    write_export,
)
from backend.pipeline import SelectionOptions, run  # noqa: E402
from native import gateway  # noqa: E402

SAMPLE = REPO / "sample_videos" / "flower_timelapse_cc0.mp4"
WIDTH, HEIGHT = 1280, 720


def make_720p(path: Path, frames: int) -> Path:
    src = gateway.decode_frames_rgb(SAMPLE, range(150), out_width=WIDTH, out_height=HEIGHT)
    order = list(range(150)) + list(range(149, -1, -1))
    with gateway.VideoWriter(
        path, codec="libx264", width=WIDTH, height=HEIGHT, fps=30, options={"crf": "20", "g": "60", "bf": "2"}
    ) as writer:
        for k in range(frames):
            writer.write(src[order[k % len(order)]])
    return path


def encode_plain(pixels: np.ndarray, path: Path, fps: float) -> float:
    t0 = time.perf_counter()
    h, w = pixels.shape[1:3]
    with gateway.VideoWriter(
        path,
        codec="libx264",
        width=w,
        height=h,
        fps=Fraction(fps).limit_denominator(1001),
        options={"crf": "18", "preset": "medium"},
    ) as writer:
        for frame in pixels:
            writer.write(frame)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layers", default="heatmap,kept,lost,grid,anchor,bad")
    args = parser.parse_args()
    layers = parse_names(args.layers, EXPORT_LAYERS, what="layer")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clip = make_720p(tmp / "clip720.mp4", args.frames)
        options = SelectionOptions(
            max_pixels=WIDTH * HEIGHT, patch=8, block_size=2, num_sampled_frames=args.frames
        )
        t0 = time.perf_counter()
        result = run(clip, options=options)
        n = int(result.candidates.frame_indices.size)
        ph, pw = result.geometry.processed_hw
        print(
            f"pipeline: {n} candidates at {pw}x{ph}, "
            f"{len(result.selection.groups)} groups, {time.perf_counter() - t0:.1f} s"
        )
        export_run = ExportRun(
            run_id="bench",
            result=result,
            config=options.as_dict(),
            versions={},
            video_path=str(clip),
            cache_key=None,
        )
        config = ExportConfig(out_path=tmp / "annotated.mp4", allowed_roots=(tmp,), layers=layers, crf=18)
        pixels = np.ascontiguousarray(result.decoded.pixels)
        fps = float(result.info.fps or 30.0)

        composer = ClipComposer([export_run], config.layer_options(), stamp=True)
        rows = export_rows(result, None).tolist()
        t0 = time.perf_counter()
        for row in rows:
            composer.compose([row])
        draw = time.perf_counter() - t0
        print(f"drawing alone ({', '.join(layers)} + stamp): {draw / n * 1e3:.1f} ms per frame")

        ratios = []
        for k in range(args.repeat):
            if k % 2 == 0:
                plain = encode_plain(pixels, tmp / "plain.mp4", fps)
                t0 = time.perf_counter()
                write_export([export_run], config=config)
                annotated = time.perf_counter() - t0
            else:
                t0 = time.perf_counter()
                write_export([export_run], config=config)
                annotated = time.perf_counter() - t0
                plain = encode_plain(pixels, tmp / "plain.mp4", fps)
            ratios.append(annotated / plain)
            print(
                f"repeat {k + 1}: plain encode {plain:.2f} s, annotated export {annotated:.2f} s "
                f"({n} frames) → ratio {annotated / plain:.2f}"
            )
        print(
            f"ratio export/plain over {args.repeat} repeats: {min(ratios):.2f}–{max(ratios):.2f} "
            f"(median {float(np.median(ratios)):.2f}); target ≤ 2"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
