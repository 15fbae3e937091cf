"""Benchmark: exporting annotated 720p frames against encoding the same frames without overlays.

Usage::

    .venv/bin/python bench/export.py [--frames 300] [--repeat 3] [--layers heatmap,kept,anchor,bad ...]

Makes a 1280×720 H.264 clip of ``--frames`` frames from the bundled sample (upscaled real
footage, played forwards then backwards), runs the clean pipeline with ``max_pixels`` =
1280·720, ``patch`` 8 and ``block_size`` 2 so frames are processed at exactly 1280×720 (16 px
blocks) and every frame is a candidate, then, in alternating order, ``--repeat`` times:

1. plain: encode the processed frames as they are with the export's own encoder settings
   (libx264, CRF 18, ``backend.export.clip.MP4_OPTIONS``) through ``native.VideoWriter``;
2. export: ``backend.export.run.write_export`` to mp4 with each layer set and the frame
   index/timestamp footer (drawing, encoding, sidecar with the input hash).

Layer sets (``--layers``, repeatable): by default ``heatmap,kept,anchor,bad`` (a typical paper
clip) and every layer (``heatmap,kept,lost,grid,patch_grid,codec_grid,anchor,bad``).
Prints each repeat's wall seconds and ratio export / plain per layer set, and the range; the
ratio of process CPU seconds is printed too (steadier when other work shares the machine). Target
(issue 6): ≤ 2. Also prints the drawing time alone (composing every frame without encoding).
Nearly all of an export's time is the encoder's: overlays add edges that change every frame,
which cost x264 more bits and time than the smooth source.

``--sizes``: instead, the cost of exporting at the source resolution. Runs the default pipeline
(frames processed at 504×280) on the 720p clip and exports it, alternating, ``--repeat`` times:
at the processed size (the run's own frames, no decode), at the source size (1280×720: every
frame decoded again with PyAV, overlays drawn at 720p) and at ``--scale 2`` of the processed size
(the run's frames upscaled to 1008×560, overlays drawn there). Prints each one's wall and CPU
seconds and the ratio to the processed-size export, the decode alone (PyAV, the same frames) and
decode + plain encode at 720p (what a source-size export costs without any drawing).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import native  # noqa: E402
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

SAMPLE = REPO / "sample_videos" / "flower_timelapse_cc0.mp4"
WIDTH, HEIGHT = 1280, 720


def make_720p(path: Path, frames: int) -> Path:
    src = native.decode_frames_rgb(SAMPLE, range(150), out_width=WIDTH, out_height=HEIGHT)
    order = list(range(150)) + list(range(149, -1, -1))
    with native.VideoWriter(
        path, codec="libx264", width=WIDTH, height=HEIGHT, fps=30, options={"crf": "20", "g": "60", "bf": "2"}
    ) as writer:
        for k in range(frames):
            writer.write(src[order[k % len(order)]])
    return path


def encode_plain(pixels: Iterable[np.ndarray], path: Path, fps: float) -> None:
    pixels = iter(pixels)
    first = next(pixels)
    h, w = first.shape[:2]
    with native.VideoWriter(
        path,
        codec="libx264",
        width=w,
        height=h,
        fps=Fraction(fps).limit_denominator(1001),
        options={"crf": "18", **MP4_OPTIONS},
    ) as writer:
        writer.write(first)
        for frame in pixels:
            writer.write(frame)


def compare_sizes(frames: int, repeat: int, layers_text: str) -> int:
    """Export the same run at the processed size, the source size and ×2 of the processed size."""
    layers = parse_names(layers_text, EXPORT_LAYERS, what="layer")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clip = make_720p(tmp / "clip720.mp4", frames)
        result = run(clip, options=SelectionOptions(num_sampled_frames=frames))
        n = int(result.candidates.frame_indices.size)
        ph, pw = result.geometry.processed_hw
        print(f"pipeline: {n} candidates of a {WIDTH}x{HEIGHT} clip, processed at {pw}x{ph}")
        export_run = ExportRun(
            run_id="bench", result=result, config={}, versions={}, video_path=str(clip), cache_key=None
        )
        sizes = {
            "processed": {"size": "processed"},
            "source": {"size": "source"},
            "processed x2": {"size": "processed", "size_factor": 2.0},
        }
        configs = {
            name: ExportConfig(out_path=tmp / f"{k}.mp4", layers=layers, **changes)
            for k, (name, changes) in enumerate(sizes.items())
        }
        fids = result.candidates.frame_indices.tolist()
        walls: dict[str, list[float]] = {name: [] for name in [*configs, "decode only", "decode+encode"]}
        cpus: dict[str, list[float]] = {name: [] for name in walls}
        for k in range(repeat):
            order = list(walls) if k % 2 == 0 else list(walls)[::-1]
            for name in order:
                if name == "decode only":
                    wall, cpu = timed(lambda: sum(1 for _ in native.iter_frames_rgb(clip, fids)))
                elif name == "decode+encode":
                    frames_720 = (rgb for _, rgb in native.iter_frames_rgb(clip, fids))
                    wall, cpu = timed(encode_plain, frames_720, tmp / "plain.mp4", float(result.info.fps))
                else:
                    wall, cpu = timed(write_export, [export_run], config=configs[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
        base_wall, base_cpu = float(np.median(walls["processed"])), float(np.median(cpus["processed"]))
        for name in walls:
            wall, cpu = float(np.median(walls[name])), float(np.median(cpus[name]))
            size = " {1}x{0}".format(*_frame_size(configs[name], export_run)) if name in configs else ""
            print(
                f"{name:>13s}{size}: wall {wall:.2f} s (median of {repeat}; {min(walls[name]):.2f}–"
                f"{max(walls[name]):.2f}), {wall / n * 1e3:.1f} ms/frame, "
                f"×{wall / base_wall:.2f} of processed; cpu {cpu:.2f} s (×{cpu / base_cpu:.2f})"
            )
    return 0


def _frame_size(config: ExportConfig, export_run: ExportRun) -> tuple[int, int]:
    from backend.export import clip_pane_sizes

    return clip_pane_sizes([export_run], config)[0]


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
    parser.add_argument("--sizes", action="store_true", help="compare source-size and processed-size exports")
    args = parser.parse_args()
    if args.sizes:
        layers = args.layers[0] if args.layers else "heatmap,kept,anchor,bad"
        return compare_sizes(args.frames, args.repeat, layers)
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
