"""Benchmark: codec-lens (parity and clean) against cvp's CLI and PyAV decode passes.

Usage::

    python bench/select_vs_cvp.py VIDEO [VIDEO ...] [--repeat 3] [--baseline DIR] [-- extra cvp options]

Every repetition runs, side by side on the same clip and options:

* cvp's CLI (``codec-video-prep --video V --out_dir D``; needs ffprobe);
* ``codec-lens select V --out D --profile parity`` and ``--profile clean`` (``python -m
  app.cli``, what the ``codec-lens`` script runs);
* three in-process PyAV decodes of every frame (frames discarded): ``pyav`` with PyAV's
  defaults (thread_type SLICE, thread_count 0 = auto: the H.264 clips here carry one
  slice per picture, so it runs on one core, CPU time = wall time; the HEVC .ts uses
  about 1.5 cores), ``pyav2`` with thread_type AUTO (frame threads, all cores), and
  ``pyrgb``, PyAV's defaults plus converting every frame to RGB at the pipeline's
  processed size (area filter), i.e. the pixels the pipeline delivers.

Each tool runs as a fresh process, so interpreter start, imports, output writing and
interpreter exit count for both. Runs are interleaved and the median is reported, because
the machine is shared. ``cpu`` is the user+system time of a tool's process and its
children (load-independent, unlike wall time). Ratios: codec-lens wall / cvp wall (target
≤ 0.33) and codec-lens in-process pipeline time (``stage_seconds.total``: probe … pack,
without imports and output writing) / one PyAV pass (target ≤ 2).

A ``best of`` table repeats the ratios with each tool's fastest run, which other work on
the machine disturbs least.

``--baseline DIR`` also runs another checkout of codec-lens (e.g. ``git worktree add
../before REV`` then ``python setup.py build_ext --inplace`` there) in the same interleaved
rounds and prints its walls beside this tree's: before/after ratios measured side by side.

``--profile`` ends with one warm in-process selection of each clip in each profile under cProfile:
its stages, the canvases' packing and the heaviest functions by self time, with what the cvp
reader's and the native kernels' entries do.

``floor`` rows time a process that only starts, imports what ``select`` needs and exits:
codec-lens building its ``select`` parser and importing the pipeline and output modules,
cvp printing ``--help``.

The ``lower bound`` table estimates the least process wall any parity implementation could
reach here: a process importing only numpy, OpenCV and cvp's reader, plus the reader's time
on the longer side of the best two-way keyframe split, each part timed alone (it assumes two
cores that do not slow each other, which these do). ``pipe/cvp`` is the in-process pipeline
total over cvp's process wall.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av

REPO = Path(__file__).resolve().parents[1]
CVP = Path(sys.executable).parent / "codec-video-prep"
_REPORTED: set[str] = set()


def pyav_decode_secs(video: Path, *, thread_type: str | None, rgb_hw: tuple[int, int] | None = None) -> float:
    """Seconds for one in-process decode of every frame (PyAV defaults if thread_type is None).

    With ``rgb_hw`` each frame is also converted to RGB at that size (area filter), as
    the pipeline's pixels are.
    """
    t0 = time.perf_counter()
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        if thread_type is not None:
            stream.thread_type = thread_type
        for frame in container.decode(stream):
            if rgb_hw is not None:
                frame.to_ndarray(format="rgb24", width=rgb_hw[1], height=rgb_hw[0], interpolation="AREA")
    return time.perf_counter() - t0


def processed_hw(video: Path) -> tuple[int, int]:
    """The pipeline's processed frame size for this clip (clean profile, default options)."""
    sys.path.insert(0, str(REPO))
    from backend.stages.geometry import GeometryConfig, resolve_geometry
    from backend.stages.probe import ProbeConfig, probe

    info = probe(video, config=ProbeConfig(profile="clean"))
    return resolve_geometry(info, config=GeometryConfig(profile="clean")).processed_hw


def reader_critical_path(video: Path) -> float | None:
    """Seconds of the cvp reader on the longer side of the best two-way split (parity, defaults).

    Parity needs cvp's reader for every sampled frame's bitcost and pixels. Each keyframe-to-
    keyframe range of the request is read alone (bitcost + pixels at the decoder-output
    size, no other work running), then the request is cut at the keyframe that minimises
    the longer side: the least reader time any 2-core schedule can put on its critical
    path. None when the reader is missing or the clip cannot be split (MPEG-TS).
    """
    sys.path.insert(0, str(REPO))
    import native
    from backend.stages.geometry import GeometryConfig, resolve_geometry
    from backend.stages.keyframes import KeyframeConfig, avoid_keyframes
    from backend.stages.probe import ProbeConfig, probe
    from backend.stages.sample import SampleConfig, sample

    if not native.bitcost_reader_available():
        return None
    info = probe(video, config=ProbeConfig(profile="parity"))
    if info.stss_keyframes is None:
        return None
    candidates = avoid_keyframes(
        sample(info, config=SampleConfig(profile="parity")), info, config=KeyframeConfig(profile="parity")
    )
    h, w = resolve_geometry(info, config=GeometryConfig(profile="parity")).prepared_hw
    wanted = sorted(set(candidates.frame_indices.tolist()))
    cuts = [k for k in info.keyframe_indices if wanted[0] < k <= wanted[-1]]
    bounds = [wanted[0], *cuts, wanted[-1] + 1]
    secs = []
    for lo, hi in itertools.pairwise(bounds):
        part = [i for i in wanted if lo <= i < hi]
        t0 = time.perf_counter()
        if part:
            native.read_segment(
                video, part, export=native.ReaderExport(pixels=True, bitcost=True, out_width=w, out_height=h)
            )
        secs.append(time.perf_counter() - t0)
    return min(max(sum(secs[:k]), sum(secs[k:])) for k in range(len(secs) + 1))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_process(args: list[str], **kwargs: object) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall seconds, cpu seconds of the process and its children, result)."""
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - t0, _children_cpu() - cpu0, proc


def run_cvp(video: Path, out: Path, extra: list[str]) -> tuple[float, float, dict[str, float] | None]:
    wall, cpu, proc = timed_process([str(CVP), "--video", str(video), "--out_dir", str(out), *extra])
    if proc.returncode != 0:
        return float("nan"), float("nan"), None
    meta = json.loads((out / "meta.json").read_text())
    return wall, cpu, meta.get("timing_sec")


def run_lens(
    video: Path, out: Path, profile: str, extra: list[str], *, repo: Path = REPO
) -> tuple[float, float, dict[str, float] | None]:
    cmd = [sys.executable, "-m", "app.cli", "select", str(video), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(repo)}  # this checkout's modules, not the installed ones
    wall, cpu, proc = timed_process([*cmd, "--profile", profile, "--json", *extra], cwd=repo, env=env)
    if proc.returncode != 0:
        message = f"  codec-lens {profile} failed: {proc.stderr.strip().splitlines()[-1]}"
        if message not in _REPORTED:  # once per clip and profile, not per repetition
            _REPORTED.add(message)
            print(message)
        return float("nan"), float("nan"), None
    return wall, cpu, json.loads(proc.stdout)["stage_seconds"]


def floors(repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, cpu) of processes that only start up and exit."""
    code = (
        "import app.cli as c; c.build_parser(['select']); "
        "import backend.pipeline.runner, backend.cvp_format.write"
    )
    lens = [sys.executable, "-c", code]
    cmds = {"codec-lens": (lens, {"cwd": REPO}), "cvp": ([str(CVP), "--help"], {})}
    out = {}
    for name, (cmd, kw) in cmds.items():
        runs = [timed_process(cmd, **kw)[:2] for _ in range(repeat)]
        out[name] = (median([w for w, _ in runs]), median([c for _, c in runs]))
    return out


def floor_of_needed_imports(repeat: int) -> float:
    """Median wall of a process that imports only numpy, OpenCV and cvp's reader, then exits."""
    code = "import numpy, cv2; from codec_video_prep import cv_reader_fast"
    return median([timed_process([sys.executable, "-c", code])[0] for _ in range(repeat)])


def median(values: list[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.median(clean) if clean else float("nan")


def best(values: list[float]) -> float:
    clean = [v for v in values if v == v]
    return min(clean) if clean else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b and a == a and b == b else float("nan")


def _median_stages(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = dict.fromkeys(k for run in runs for k in run)
    return {k: round(median([r[k] for r in runs if k in r]), 3) for k in keys}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("videos", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another codec-lens checkout to time alongside")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile one in-process selection of each clip in both profiles (cProfile, self time)",
    )
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    load0 = os.getloadavg()[0]
    print(
        f"options: {' '.join(extra) or '(defaults)'}; median of {args.repeat} interleaved runs; "
        f"{os.cpu_count()} CPUs, load average {load0:.1f} at start\n"
    )
    header = (
        f"{'clip':34s} {'pyav':>5s} {'pyav2':>5s} {'pyrgb':>5s} {'cvp':>5s} {'parity':>6s} {'clean':>5s} │ "
        f"{'par/cvp':>7s} {'cln/cvp':>7s} │ {'pipe par/pyav':>13s} {'cln/pyav':>8s} {'cln/pyav2':>9s} "
        f"{'cln/pyrgb':>9s} │ "
        f"{'cpu cvp':>7s} {'par':>5s} {'cln':>5s}"
    )
    print(header)
    details = []
    bounds: list[tuple[str, dict[str, float], float | None]] = []
    baseline_rows: list[tuple[str, dict[str, float]]] = []
    best_rows: list[tuple[str, dict[str, float]]] = []
    for video in args.videos:
        rows: dict[str, list[float]] = {
            k: []
            for k in (
                "pyav",
                "pyav2",
                "pyrgb",
                "cvp",
                "parity",
                "clean",
                "parity_pipe",
                "clean_pipe",
                "cvp_cpu",
                "parity_cpu",
                "clean_cpu",
                "base_parity",
                "base_clean",
            )
        }
        stages: dict[str, list[dict[str, float]]] = {"cvp": [], "parity": [], "clean": []}
        rgb_hw = processed_hw(video)
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.repeat):
                rows["pyav"].append(pyav_decode_secs(video, thread_type=None))
                rows["pyav2"].append(pyav_decode_secs(video, thread_type="AUTO"))
                rows["pyrgb"].append(pyav_decode_secs(video, thread_type=None, rgb_hw=rgb_hw))
                wall, cpu, st = run_cvp(video, Path(tmp) / f"cvp{rep}", extra)
                rows["cvp"].append(wall)
                rows["cvp_cpu"].append(cpu)
                if st:
                    stages["cvp"].append(st)
                for profile in ("parity", "clean"):
                    wall, cpu, st = run_lens(video, Path(tmp) / f"{profile}{rep}", profile, extra)
                    rows[profile].append(wall)
                    rows[f"{profile}_cpu"].append(cpu)
                    rows[f"{profile}_pipe"].append(st["total"] if st else float("nan"))
                    if st:
                        stages[profile].append(st)
                    if args.baseline is not None:
                        out = Path(tmp) / f"base_{profile}{rep}"
                        wall = run_lens(video, out, profile, extra, repo=args.baseline.resolve())[0]
                        rows[f"base_{profile}"].append(wall)
        m = {k: median(v) for k, v in rows.items()}
        baseline_rows.append((video.name, m))
        best_rows.append((video.name, {k: best(v) for k, v in rows.items()}))
        print(
            f"{video.name[:34]:34s} {m['pyav']:5.2f} {m['pyav2']:5.2f} {m['pyrgb']:5.2f} {m['cvp']:5.2f} "
            f"{m['parity']:6.2f} "
            f"{m['clean']:5.2f} │ {ratio(m['parity'], m['cvp']):7.2f} {ratio(m['clean'], m['cvp']):7.2f} │ "
            f"{ratio(m['parity_pipe'], m['pyav']):13.2f} {ratio(m['clean_pipe'], m['pyav']):8.2f} "
            f"{ratio(m['clean_pipe'], m['pyav2']):9.2f} {ratio(m['clean_pipe'], m['pyrgb']):9.2f} │ "
            f"{m['cvp_cpu']:7.2f} {m['parity_cpu']:5.2f} "
            f"{m['clean_cpu']:5.2f}"
        )
        details.append((video.name, m, {k: _median_stages(v) for k, v in stages.items() if v}))
        crit = [reader_critical_path(video) for _ in range(args.repeat)]
        bounds.append((video.name, m, median([c for c in crit if c is not None]) if any(crit) else None))
    floor = floors(args.repeat)
    print(
        "\nfloor (start + imports + exit, no work): "
        + ", ".join(f"{k} wall {w:.2f} s cpu {c:.2f} s" for k, (w, c) in floor.items())
    )
    least = floor_of_needed_imports(args.repeat)
    print(
        "\nlower bound of a parity run's process wall on this machine = start-up with only what any "
        f"implementation needs (python, numpy, cv2, cvp's reader: {least:.2f} s) + the cvp reader's "
        "critical path at the best 2-way keyframe split (parts timed alone):"
    )
    print(
        f"  {'clip':34s} {'cvp':>5s} {'0.33×cvp':>8s} {'reader':>6s} {'bound':>5s} {'bound/cvp':>9s} "
        f"{'parity':>6s} {'par/cvp':>7s} {'pipe/cvp':>8s}"
    )
    for name, m, crit in bounds:
        bound = least + crit if crit is not None else float("nan")
        print(
            f"  {name[:34]:34s} {m['cvp']:5.2f} {0.33 * m['cvp']:8.2f} "
            f"{crit if crit is not None else float('nan'):6.2f} {bound:5.2f} {ratio(bound, m['cvp']):9.2f} "
            f"{m['parity']:6.2f} {ratio(m['parity'], m['cvp']):7.2f} {ratio(m['parity_pipe'], m['cvp']):8.2f}"
        )
    print(f"\nbest of {args.repeat} (each tool's fastest run: less sensitive to other work on the machine):")
    print(f"  {'clip':34s} {'par/cvp':>7s} {'cln/cvp':>7s} {'pipe par/pyav':>13s} {'cln/pyav':>8s}")
    for name, b in best_rows:
        print(
            f"  {name[:34]:34s} {ratio(b['parity'], b['cvp']):7.2f} {ratio(b['clean'], b['cvp']):7.2f} "
            f"{ratio(b['parity_pipe'], b['pyav']):13.2f} {ratio(b['clean_pipe'], b['pyav']):8.2f}"
        )
    if args.baseline is not None:
        print(f"\nbaseline {args.baseline} (median process wall, same rounds; ratio = this tree / baseline):")
        print(
            f"  {'clip':34s} {'base par':>8s} {'parity':>6s} {'ratio':>5s} "
            f"{'base cln':>8s} {'clean':>5s} {'ratio':>5s}"
        )
        for name, m in baseline_rows:
            print(
                f"  {name[:34]:34s} {m['base_parity']:8.2f} {m['parity']:6.2f} "
                f"{ratio(m['parity'], m['base_parity']):5.2f} {m['base_clean']:8.2f} {m['clean']:5.2f} "
                f"{ratio(m['clean'], m['base_clean']):5.2f}"
            )
    print(
        "\nthe selection issue's targets, medians (best of): total = the in-process pipeline total "
        "(stage_seconds.total) against cvp's process wall (≤ 0.33) and one PyAV pass (≤ 2); the "
        "whole-process ratio beside them; cores = codec-lens CPU time / process wall"
    )
    print(
        f"  {'clip':34s} {'profile':7s} {'total/cvp':>13s} {'total/pyav':>13s} {'process/cvp':>13s} "
        f"{'cores':>5s}"
    )
    for (name, m), (_, b) in zip(baseline_rows, best_rows, strict=True):
        for profile in ("parity", "clean"):
            pairs = (
                (ratio(m[f"{profile}_pipe"], m["cvp"]), ratio(b[f"{profile}_pipe"], b["cvp"]), 0.33),
                (ratio(m[f"{profile}_pipe"], m["pyav"]), ratio(b[f"{profile}_pipe"], b["pyav"]), 2.0),
                (ratio(m[profile], m["cvp"]), ratio(b[profile], b["cvp"]), 0.33),
            )
            cells = [f"{med:5.2f} ({bst:4.2f}){'*' if med > limit else ' '}" for med, bst, limit in pairs]
            print(
                f"  {name[:34]:34s} {profile:7s} {cells[0]:>13s} {cells[1]:>13s} {cells[2]:>13s} "
                f"{ratio(m[f'{profile}_cpu'], m[profile]):5.2f}"
            )
    print("  (* median above the target)")
    print("\nmedian stage seconds (codec-lens: in-process stages; cvp: its meta.json timing_sec):")
    for name, m, st in details:
        print(f"  {name}: pipeline total parity {m['parity_pipe']:.3f} s, clean {m['clean_pipe']:.3f} s")
        for tool, shown in st.items():
            print(f"    {tool:7s} {json.dumps({k: v for k, v in shown.items() if v >= 0.005})}")
    print(
        "\nwall = whole process (interpreter + imports + run + output + exit); pipe = codec-lens "
        "in-process pipeline total;\npyav = one in-process PyAV decode of every frame with PyAV's "
        "defaults (slice threads: one core on these H.264 clips), pyav2 = thread_type AUTO (frame threads),"
        "\npyrgb = PyAV defaults plus conversion of every frame to RGB at the processed size (area filter);"
        f"\nload average {os.getloadavg()[0]:.1f} at the end (other work shares the CPUs)."
    )
    if args.profile:
        for video in args.videos:
            for profile in ("parity", "clean"):
                print_profile(video, profile)
    return 0


# What the heaviest callees of a selection are, in words (cProfile names C functions by their symbol).
_LABELS = {
    "read_video_fast_selected_segment": "cvp's reader in this process (decode, bitcost, area resize)",
    "read": "waiting on the forked reader half (its pixels land in shared memory)",
    "bgr_to_rgb_stats": "BGR → RGB with each frame's statistics (native kernel)",
    "waitpid": "reaping the forked reader",
    "fork": "forking the reader",
}


def print_profile(video: Path, profile: str, top: int = 12) -> None:
    """One warm in-process selection of ``video`` under cProfile: its stages, the canvases' packing
    (as ``--out`` needs it) and the ``top`` functions by self time, with their share of the wall."""
    import cProfile
    import pstats

    sys.path.insert(0, str(REPO))
    from backend.pipeline import SelectionOptions
    from backend.selectors import select

    options = SelectionOptions(profile=profile)
    select(video, options=options)  # warm: imports, page cache
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = select(video, options=options)
    t_pack = time.perf_counter()
    result.canvases.images  # noqa: B018 (packs them, as select --out does)
    packing = time.perf_counter() - t_pack
    prof.disable()
    wall = time.perf_counter() - t0
    stages = {k: round(v, 3) for k, v in result.timings_secs.items() if v >= 0.005}
    print(
        f"\nprofile of {video.name}, {profile} ({result.decoded.read_mode}): wall {wall:.2f} s under cProfile"
    )
    print(f"  stages {json.dumps(stages)}, pack_pixels {packing:.3f}")
    stats = pstats.Stats(prof)
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]  # type: ignore[attr-defined]
    for (filename, line, name), (_, calls, self_secs, _, _) in rows:
        where = Path(filename).name + f":{line}" if line else "built-in"
        label = _LABELS.get(name.rsplit(".", 1)[-1].strip("<>{} ").split(" ")[-1], "")
        print(
            f"  {self_secs:6.3f} s {100 * self_secs / wall:5.1f} %  {calls:6d}×  {name[:56]:56s} "
            f"{where:28s} {label}"
        )


if __name__ == "__main__":
    sys.exit(main())
