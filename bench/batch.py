"""Benchmark: ``codec-lens batch`` (local and Ray engines) against cvp's CLI over one folder of videos.

Usage::

    python bench/batch.py DIR [--make] [--copies 3] [--workers 2] [--profile parity] [--rounds 1]

With ``--make``, DIR is first filled with real H.264 clips: ``tests/data/*.mp4`` copied
``--copies`` times, plus one re-encode of each (libx264 through PyAV, CRF 30, a 2-second GOP:
other bytes, other keyframes). Every round then runs, side by side on the same videos:

* ``cvp``: cvp's own CLI (``codec-video-prep --video V --out_dir D``, what cvp offers for
  one video), two processes at a time (``--workers``), each video a fresh process;
* ``local``: ``codec-lens batch DIR --out O --workers N`` (one process, N worker processes);
* ``ray``: the same with ``--engine ray`` (a private local Ray with N CPUs, started and
  stopped by the command: its start-up counts), skipped when Ray is not installed;
* ``ray@addr`` (with ``--ray-address ADDR``): the Ray engine on that running cluster, no
  start-up of its own (start it beforehand, e.g. ``ray start --head --num-cpus 2``, and run
  with ``RAY_AUTH_MODE=token``);
* ``rerun``: ``local`` again on its own output: every video is skipped.

``--no-cvp`` leaves cvp out (a large folder, for the Ray and re-run ratios); ``--make
--rounds 0`` only fills the folder.

The Ray and local output folders are then compared file by file (bytes; the JSON files without
their timing fields and folder path).

Each is timed as whole processes (wall), interpreter start and imports included, as a user
would run them. Ratios: local ÷ cvp (goal ≤ 0.33), ray ÷ local (goal ≤ 1.15), rerun ÷ local
(goal ≤ 0.05). The machine is shared: the load average before and after each round is
printed, and ``--rounds`` repeats the set (medians reported).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# cvp's console script beside this interpreter, else on PATH.
CVP = Path(sys.executable).parent / "codec-video-prep"
if not CVP.exists():
    CVP = Path(shutil.which("codec-video-prep") or CVP)


def make_folder(folder: Path, copies: int) -> list[Path]:
    """Real H.264 clips in ``folder``: each of tests/data/*.mp4 ``copies`` times, and a re-encode of each."""
    import av

    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for clip in sorted((REPO / "tests" / "data").glob("*.mp4")):
        source = clip.resolve()
        for k in range(copies):
            dest = folder / f"{clip.stem}_copy{k}.mp4"
            shutil.copyfile(source, dest)
            made.append(dest)
        dest = folder / f"{clip.stem}_crf30.mp4"
        with av.open(str(source)) as src, av.open(str(dest), "w", format="mp4") as out:
            stream_in = src.streams.video[0]
            fps = stream_in.average_rate or Fraction(25)
            stream = out.add_stream("libx264", rate=fps, options={"crf": "30", "g": str(round(2 * fps))})
            stream.width, stream.height, stream.pix_fmt = stream_in.width, stream_in.height, "yuv420p"
            for index, frame in enumerate(src.decode(stream_in)):
                frame = frame.reformat(format="yuv420p")
                frame.pts, frame.time_base = index, Fraction(1) / fps
                for packet in stream.encode(frame):
                    out.mux(packet)
            for packet in stream.encode(None):
                out.mux(packet)
        made.append(dest)
    return made


def videos_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.mp4") if p.is_file())


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def run_cvp(videos: list[Path], out: Path, workers: int, extra: list[str]) -> tuple[float, int]:
    """Wall seconds of cvp's CLI over every video, ``workers`` processes at a time; failures."""

    def one(video: Path) -> int:
        target = out / video.stem
        cmd = [str(CVP), "--video", str(video), "--out_dir", str(target), *extra]
        return subprocess.run(cmd, capture_output=True, check=False).returncode

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        codes = list(pool.map(one, videos))
    return time.perf_counter() - t0, sum(1 for c in codes if c != 0)


def run_lens(
    folder: Path, out: Path, workers: int, engine: str, profile: str, *, address: str | None = None
) -> tuple[float, dict]:
    """Wall seconds of one ``codec-lens batch`` process and its JSON summary."""
    cmd = [sys.executable, "-m", "app.cli", "batch", str(folder), "--out", str(out), "--json"]
    cmd += ["--workers", str(workers), "--engine", engine, "--profile", profile]
    if address is not None:
        cmd += ["--ray-address", address]
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise SystemExit(f"codec-lens batch ({engine}) failed:\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout.splitlines()[-1])


# Fields holding the time a run took or the folder it was written to, per JSON file of an output.
_VARYING = {"meta.json": ("timing_sec", "timings", "out_dir"), "codec_lens.json": ("timings_secs",)}


def _comparable(path: Path) -> bytes | dict:
    """A file's bytes, or for the JSON files the document without its timings and folder."""
    if path.name not in _VARYING and path.name != "codec_lens_batch.json":
        return path.read_bytes()
    doc = json.loads(path.read_text())
    for key in _VARYING.get(path.name, ()):
        doc.pop(key, None)
    if path.name == "codec_lens_batch.json":
        doc["row"].pop("seconds", None)
    return doc


def differing_files(first: Path, second: Path) -> tuple[int, list[str]]:
    """Files under two batches' ``videos/`` folders, and the names that differ (or exist in one only)."""
    trees = [
        {p.relative_to(root / "videos").as_posix(): p for p in (root / "videos").rglob("*") if p.is_file()}
        for root in (first, second)
    ]
    names = sorted(set(trees[0]) | set(trees[1]))
    differ = [
        n
        for n in names
        if n not in trees[0] or n not in trees[1] or _comparable(trees[0][n]) != _comparable(trees[1][n])
    ]
    return len(names), differ


def ray_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import ray"], capture_output=True, check=False)
    return probe.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="folder of videos (filled first with --make)")
    parser.add_argument(
        "--make", action="store_true", help="fill FOLDER with copies and re-encodes of tests/data"
    )
    parser.add_argument("--copies", type=int, default=3, help="copies of each real clip (with --make)")
    parser.add_argument("--workers", type=int, default=2, help="processes at a time, for every tool")
    parser.add_argument("--profile", default="parity", help="codec-lens profile (parity: cvp's behaviour)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat the whole set (medians reported; 0: only --make)"
    )
    parser.add_argument("--no-ray", action="store_true", help="leave the Ray engine out")
    parser.add_argument(
        "--no-cvp", action="store_true", help="leave cvp's CLI out (for the Ray and re-run ratios)"
    )
    parser.add_argument(
        "--ray-address", help="also run the Ray engine on this running cluster (a separate 'ray@addr' row)"
    )
    args = parser.parse_args()
    if args.make:
        made = make_folder(args.folder, args.copies)
        print(f"made {len(made)} videos in {args.folder}")
    if args.rounds < 1:  # --make --rounds 0: only make the folder
        return 0
    if not args.no_cvp and not CVP.exists():
        raise SystemExit("codec-video-prep's CLI is not installed (it needs the cvp wheel and ffprobe)")
    videos = videos_of(args.folder)
    if not videos:
        raise SystemExit(f"{args.folder}: no .mp4 videos (use --make)")
    with_ray = not args.no_ray and ray_available()
    if not with_ray:
        print("ray: not installed (pip install 'codec-lens[ray]') or --no-ray; its row is left out")
    size_mb = sum(v.stat().st_size for v in videos) / 1e6
    at_once = f"{args.workers} at a time, codec-lens --profile {args.profile}"
    print(f"{len(videos)} videos, {size_mb:.1f} MB, {at_once}")
    walls: dict[str, list[float]] = {k: [] for k in ("cvp", "local", "ray", "ray@addr", "rerun")}
    for round_index in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
            work = Path(tmp)
            before = load()
            if not args.no_cvp:
                walls["cvp"].append(run_cvp(videos, work / "cvp", args.workers, [])[0])
            wall, summary = run_lens(args.folder, work / "local", args.workers, "local", args.profile)
            walls["local"].append(wall)
            failed = summary["failed"]
            if with_ray:
                try:
                    wall, ray_summary = run_lens(args.folder, work / "ray", args.workers, "ray", args.profile)
                except SystemExit as exc:  # Ray could not start (a loaded machine): say so, go on
                    print(f"ray: {str(exc).strip().splitlines()[-1]}")
                else:
                    walls["ray"].append(wall)
                    failed += ray_summary["failed"]
                    files, differ = differing_files(work / "local", work / "ray")
                    same = "all identical" if not differ else f"{len(differ)} differ: {', '.join(differ[:5])}"
                    print(f"ray vs local outputs: {files} files, {same} (JSON timing fields left out)")
            if args.ray_address:
                wall, cluster_summary = run_lens(
                    args.folder, work / "cluster", args.workers, "ray", args.profile, address=args.ray_address
                )
                walls["ray@addr"].append(wall)
                failed += cluster_summary["failed"]
                files, differ = differing_files(work / "local", work / "cluster")
                same = "all identical" if not differ else f"{len(differ)} differ: {', '.join(differ[:5])}"
                print(f"ray@{args.ray_address} vs local outputs: {files} files, {same}")
            wall, rerun = run_lens(args.folder, work / "local", args.workers, "local", args.profile)
            walls["rerun"].append(wall)
            assert rerun["skipped"] == len(videos) - summary["failed"], rerun
            print(
                f"round {round_index + 1}: load {before} → {load()}; "
                + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in walls.items() if v)
                + (f"; {failed} codec-lens videos failed" if failed else "")
            )
    med = {k: statistics.median(v) for k, v in walls.items() if v}
    print(f"\n{'tool':<8} {'wall s':>8} {'videos/min':>11}")
    for name, wall in med.items():
        print(f"{name:<8} {wall:>8.2f} {len(videos) / wall * 60:>11.1f}")
    print("\nratios (medians)")
    if "cvp" in med:
        print(f"  local / cvp   = {med['local'] / med['cvp']:.3f}   (goal ≤ 0.33)")
    if "ray" in med:
        print(f"  ray / local   = {med['ray'] / med['local']:.3f}   (goal ≤ 1.15)")
    if "ray@addr" in med:
        print(f"  ray@addr / local = {med['ray@addr'] / med['local']:.3f}   (a running cluster: no start-up)")
    print(f"  rerun / local = {med['rerun'] / med['local']:.3f}   (goal ≤ 0.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
