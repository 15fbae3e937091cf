"""Benchmark: codec-lens (parity and clean) against cvp's CLI and one PyAV decode pass.

Usage::

    .venv/bin/python bench/select_vs_cvp.py VIDEO [VIDEO ...] [--repeat 3] [-- extra cvp options]

Every repetition runs, side by side on the same clip and options: cvp's CLI
(``codec-video-prep``, needs ffprobe), ``codec-lens select --profile parity``,
``codec-lens select --profile clean`` (each as a fresh process, so interpreter and
import time count for both tools) and one in-process PyAV decode of every frame.
Runs are interleaved and the median is reported, because machines are noisy.
Ratios: codec-lens wall / cvp wall, and codec-lens pipeline time / PyAV decode pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av

REPO = Path(__file__).resolve().parents[1]


def pyav_decode_secs(video: Path) -> float:
    t0 = time.perf_counter()
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        for _ in container.decode(stream):
            pass
    return time.perf_counter() - t0


def run_cvp(video: Path, out: Path, extra: list[str]) -> tuple[float, dict[str, float] | None]:
    exe = Path(sys.executable).parent / "codec-video-prep"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(exe), "--video", str(video), "--out_dir", str(out), *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return float("nan"), None
    meta = json.loads((out / "meta.json").read_text())
    return wall, meta.get("timing_sec")


def run_lens(video: Path, out: Path, profile: str, extra: list[str]) -> tuple[float, dict[str, float] | None]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "select",
            str(video),
            "--out",
            str(out),
            "--profile",
            profile,
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f"  codec-lens {profile} failed: {proc.stderr.strip().splitlines()[-1]}")
        return float("nan"), None
    return wall, json.loads(proc.stdout)["stage_seconds"]


def median(values: list[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.median(clean) if clean else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("videos", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    print(f"options: {' '.join(extra) or '(defaults)'}; median of {args.repeat} interleaved runs\n")
    header = (
        f"{'clip':34s} {'pyav':>6s} {'cvp':>6s} {'parity':>7s} {'clean':>6s} "
        f"{'par/cvp':>8s} {'cln/cvp':>8s} {'par/pyav':>9s} {'cln/pyav':>9s}"
    )
    print(header)
    for video in args.videos:
        rows: dict[str, list[float]] = {
            k: [] for k in ("pyav", "cvp", "parity", "clean", "parity_pipe", "clean_pipe")
        }
        stages: dict[str, dict[str, float] | None] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.repeat):
                rows["pyav"].append(pyav_decode_secs(video))
                wall, stages["cvp"] = run_cvp(video, Path(tmp) / f"cvp{rep}", extra)
                rows["cvp"].append(wall)
                for profile in ("parity", "clean"):
                    wall, st = run_lens(video, Path(tmp) / f"{profile}{rep}", profile, extra)
                    rows[profile].append(wall)
                    rows[f"{profile}_pipe"].append(st["total"] if st else float("nan"))
                    stages[profile] = st
        m = {k: median(v) for k, v in rows.items()}
        print(
            f"{video.name[:34]:34s} {m['pyav']:6.2f} {m['cvp']:6.2f} {m['parity']:7.2f} {m['clean']:6.2f} "
            f"{m['parity'] / m['cvp']:8.2f} {m['clean'] / m['cvp']:8.2f} "
            f"{m['parity_pipe'] / m['pyav']:9.2f} {m['clean_pipe'] / m['pyav']:9.2f}"
        )
        for name, st in stages.items():
            if st:
                shown = {k: round(v, 3) for k, v in st.items() if v >= 0.005}
                print(f"    {name:7s} stages (last run): {shown}")
    print(
        "\nwall = whole process (interpreter + imports + run); pipe = codec-lens in-process pipeline total;"
        "\npyav = one in-process PyAV decode of every frame (no colour conversion)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
