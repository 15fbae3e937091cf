"""Luma-bias analysis speed against just decoding both inputs.

Usage::

    python bench/luma_speed.py TEST REFERENCE [--repeat 3] [--geometry h3|gop] [--workers 2]
    python bench/luma_speed.py --make-pair DIR [--frames 120]   # 1344×768 pair, then measure it

The analysis (decode both inputs, measure every pair: RGB of each pixel, per-frame bias,
Y-PSNR, cell sums, then every summary; yuv420p pairs go through the compiled kernel
``native/_kernels.c`` when it was built, which the bench prints) is timed against four
ways of only decoding the same two files:

* ``decode rgb, sequential``: each file decoded to RGB arrays (``native.iter_rgb``), one
  after the other;
* ``decode rgb, concurrent``: both decoded to RGB in two threads, read in lockstep (the way
  the analyzer reads them, so this is the strict baseline);
* ``decode only (no RGB)``: frames out of the decoder without any RGB conversion (for
  reference: the analysis must convert every pixel, so it cannot beat this);
* ``decode rgb, PyAV rgb24``: PyAV's own ``to_ndarray(format="rgb24")`` (swscale), what a
  script would usually do; slower and ~1 level off, so the analyzer converts with OpenCV
  (for reference only: the verdict uses the two strict baselines above).

Variants run interleaved, ``--repeat`` rounds, so a change of machine load hits all of them.
Reported: the best wall and CPU time of each; the speed ratio decode time / analysis time from
the best times, and the median of the per-round ratios (each round's analysis against that
round's strict baseline). The target is ≥ 0.8 against the strict baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import av

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import native
from backend.luma import (
    MEASURE_WORKERS,
    MeasureConfig,
    Prefetch,
    StreamConfig,
    analyze_videos,
    make_geometry,
)
from native.compiled import COMPILED_KERNEL

SHARED = Path(__file__).resolve().parents[2] / "shared" / "videos"


def make_pair(folder: Path, *, frames: int = 120, width: int = 1344, height: int = 768) -> tuple[Path, Path]:
    """Upscale a shared clip to width×height; reference near-lossless (crf 4), test crf 23."""
    folder.mkdir(parents=True, exist_ok=True)
    reference, test = folder / "reference_1344x768.mp4", folder / "test_1344x768.mp4"
    if reference.exists() and test.exists():
        return test, reference
    source = SHARED / "real_h264_film_friday.mp4"
    with (
        av.open(str(source)) as container,
        native.VideoWriter(
            reference,
            codec="libx264",
            width=width,
            height=height,
            fps=30,
            options={"crf": "4", "preset": "veryfast"},
        ) as ref_writer,
        native.VideoWriter(
            test,
            codec="libx264",
            width=width,
            height=height,
            fps=30,
            options={"crf": "23", "preset": "veryfast"},
        ) as test_writer,
    ):
        for index, frame in enumerate(container.decode(video=0)):
            if index >= frames:
                break
            rgb = frame.to_ndarray(format="rgb24", width=width, height=height, interpolation="BICUBIC")
            ref_writer.write(rgb)
            test_writer.write(rgb)
    return test, reference


def _decode_sequential(paths: list[Path]) -> None:
    for p in paths:
        for _ in native.iter_rgb(p):
            pass


def _decode_concurrent(paths: list[Path]) -> None:
    streams = [Prefetch(native.iter_rgb(p)) for p in paths]
    try:
        for _ in zip(*streams, strict=True):
            pass
    finally:
        for s in streams:
            s.close()


def _decode_swscale(paths: list[Path]) -> None:
    for p in paths:
        for _ in native.iter_rgb(p, conversion="swscale"):
            pass


def _decode_only(paths: list[Path]) -> None:
    for p in paths:
        with av.open(str(p)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            for _ in container.decode(stream):
                pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("test", nargs="?", type=Path)
    parser.add_argument("reference", nargs="?", type=Path)
    parser.add_argument(
        "--make-pair", type=Path, metavar="DIR", help="write a 1344×768 pair to DIR and use it"
    )
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--geometry", default="h3", choices=("h3", "gop"))
    parser.add_argument("--workers", type=int, default=MEASURE_WORKERS, help="measuring threads")
    args = parser.parse_args(argv)
    if args.make_pair:
        args.test, args.reference = make_pair(args.make_pair, frames=args.frames)
    if args.test is None or args.reference is None:
        parser.error("give TEST and REFERENCE, or --make-pair DIR")
    paths = [args.test, args.reference]
    geometry = make_geometry(args.geometry)
    frames = native.count_decoded_frames(args.test)
    info = native.probe_container(args.test)
    print(f"pair: {args.test} vs {args.reference}: {frames} frames, {info.width}x{info.height}")
    print(f"measuring kernel: {'compiled (native._kernels)' if COMPILED_KERNEL else 'numpy'}")

    runs: dict[str, Callable[[], object]] = {
        "analysis": lambda: analyze_videos(
            args.test,
            args.reference,
            geometry=geometry,
            config=MeasureConfig(),
            streams=StreamConfig(workers=args.workers),
        ),
        "decode rgb, sequential": lambda: _decode_sequential(paths),
        "decode rgb, concurrent": lambda: _decode_concurrent(paths),
        "decode only (no RGB)": lambda: _decode_only(paths),
        "decode rgb, PyAV rgb24": lambda: _decode_swscale(paths),
    }
    load_before = os.getloadavg()[0]
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeat):  # interleaved, so a change of machine load hits every variant
        for name, fn in runs.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(time.process_time() - c0)
    wall = {name: min(v) for name, v in walls.items()}
    cpu = {name: min(v) for name, v in cpus.items()}
    print(
        f"load average (1 min) before {load_before:.1f}, after {os.getloadavg()[0]:.1f}; "
        f"{os.cpu_count()} CPUs"
    )
    print(f"{'':<24} {'wall s':>7} {'pairs/s':>8} {'cpu s':>7}  speed ratio (wall, cpu) vs analysis")
    for name in runs:
        ratio = (
            ""
            if name == "analysis"
            else f"{wall[name] / wall['analysis']:.2f}, {cpu[name] / cpu['analysis']:.2f}"
        )
        print(f"{name:<24} {wall[name]:7.3f} {frames / wall[name]:8.1f} {cpu[name]:7.3f}  {ratio}")
    strict = min(wall["decode rgb, sequential"], wall["decode rgb, concurrent"])
    ratio = strict / wall["analysis"]
    rounds = [
        min(s, c) / a
        for s, c, a in zip(
            walls["decode rgb, sequential"], walls["decode rgb, concurrent"], walls["analysis"], strict=True
        )
    ]
    cpu_ratio = min(cpu["decode rgb, sequential"], cpu["decode rgb, concurrent"]) / cpu["analysis"]
    verdict = "meets" if ratio >= 0.8 else "misses"
    print(f"speed ratio (analysis vs decoding both to RGB, wall): {ratio:.2f} ({verdict} the 0.8 target)")
    print(
        f"per-round ratios {', '.join(f'{r:.2f}' for r in rounds)} (median {statistics.median(rounds):.2f}); "
        f"cpu ratio {cpu_ratio:.2f}; "
        f"vs decode only (no RGB), wall {wall['decode only (no RGB)'] / wall['analysis']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
