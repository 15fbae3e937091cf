"""Benchmark: exporting annotated 720p frames against encoding the same frames without overlays.

Usage::

    .venv/bin/python bench/export.py [--frames 300] [--repeat 3] [--layers heatmap,kept,anchor,bad ...]

Makes a 1280×720 H.264 clip of ``--frames`` frames from the bundled sample (upscaled real
footage, played forwards then backwards), runs the clean pipeline with ``max_pixels`` =
1280·720, ``patch`` 8 and ``block_size`` 2 so frames are processed at exactly 1280×720 (16 px
blocks) and every frame is a candidate, then, in alternating order, ``--repeat`` times:

1. plain: encode the processed frames as they are with the export's own encoder settings
   (libx264, CRF 18, ``backend.export.clip.MP4_OPTIONS``) through ``native.gateway.VideoWriter``;
2. export: ``backend.export.run.write_export`` to mp4 with each layer set and the frame
   index/timestamp footer (drawing, encoding, sidecar with the input hash).

Layer sets (``--layers``, repeatable): by default ``heatmap,kept,anchor,bad`` (a typical paper
clip) and every layer (``heatmap,kept,lost,grid,patch_grid,codec_grid,anchor,bad``).
Prints each repeat's wall seconds and ratio export / plain per layer set, and the range; the
ratio of process CPU seconds is printed too (steadier when other work shares the machine). Target
(issue 6): ≤ 2. Also prints the drawing time alone (composing every frame without encoding).
Nearly all of an export's time is the encoder's: overlays add edges that change every frame,
which cost x264 more bits and time than the smooth source.
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
    MP4_OPTIONS,
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


def encode_plain(pixels: np.ndarray, path: Path, fps: float) -> None:
    h, w = pixels.shape[1:3]
    with gateway.VideoWriter(
        path,
        codec="libx264",
        width=w,
        height=h,
        fps=Fraction(fps).limit_denominator(1001),
        options={"crf": "18", **MP4_OPTIONS},
    ) as writer:
        for frame in pixels:
            writer.write(frame)


def timed(fn: object, *args: object, **kwargs: object) -> tuple[float, float]:
    """(wall seconds, process CPU seconds of every thread) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn(*args, **kwargs)  # type: ignore[operator]
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layers", action="append", help="comma-separated layer set (repeatable)")
    args = parser.parse_args()
    sets = args.layers or ["heatmap,kept,anchor,bad", ",".join(EXPORT_LAYERS)]
    layer_sets = [parse_names(text, EXPORT_LAYERS, what="layer") for text in sets]
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
        configs = [
            ExportConfig(out_path=tmp / f"annotated{k}.mp4", allowed_roots=(tmp,), layers=layers, crf=18)
            for k, layers in enumerate(layer_sets)
        ]
        pixels = np.ascontiguousarray(result.decoded.pixels)
        fps = float(result.info.fps or 30.0)
        rows = export_rows(result, None).tolist()
        for config in configs:
            composer = ClipComposer([export_run], config.layer_options(), stamp=True)
            t0 = time.perf_counter()
            for row in rows:
                composer.compose([row])
            draw = time.perf_counter() - t0
            print(f"drawing alone ({','.join(config.layers)} + stamp): {draw / n * 1e3:.1f} ms per frame")

        ratios: list[list[float]] = [[] for _ in configs]
        cpu_ratios: list[list[float]] = [[] for _ in configs]
        for k in range(args.repeat):
            # Alternate the order so drift in the machine's load hits both sides alike.
            order = ["plain", *range(len(configs))]
            if k % 2:
                order.reverse()
            secs: dict[object, tuple[float, float]] = {}
            for item in order:
                if item == "plain":
                    secs[item] = timed(encode_plain, pixels, tmp / "plain.mp4", fps)
                else:
                    secs[item] = timed(write_export, [export_run], config=configs[item])
            wall0, cpu0 = secs["plain"]
            parts = []
            for c, config in enumerate(configs):
                wall, cpu = secs[c]
                ratios[c].append(wall / wall0)
                cpu_ratios[c].append(cpu / cpu0)
                parts.append(
                    f"{','.join(config.layers)} {wall:.2f} s (×{wall / wall0:.2f}, cpu ×{cpu / cpu0:.2f})"
                )
            print(
                f"repeat {k + 1}: plain encode {wall0:.2f} s (cpu {cpu0:.2f} s); export " + "; ".join(parts)
            )
        for config, r, rc in zip(configs, ratios, cpu_ratios, strict=True):
            print(
                f"ratio export/plain, {','.join(config.layers)}, {n} frames, {args.repeat} repeats: "
                f"wall {min(r):.2f}–{max(r):.2f} (median {float(np.median(r)):.2f}), "
                f"cpu {min(rc):.2f}–{max(rc):.2f}; target ≤ 2"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
