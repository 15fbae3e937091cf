"""Benchmark: the motion signals (mv, residual, mvres) against the bitcost grids, per frame.

Usage::

    .venv/bin/python bench/signals.py VIDEO [--frames all|N] [--repeat 3] [--before TREE]

In one process, for the clip: the bitcost grids of cvp's patched reader (``read_bitcost``,
no pixels, one thread: what the bitcost scorer reads) and ``compute_signals`` of each motion
signal with one decoder thread, on every frame (``--frames all``, default) or on N uniformly
sampled frames. Times are CPU seconds of this process (the decoders run on one thread, so this
is the cost per core; wall seconds are shown beside them: on a loaded machine they include
waiting). ``--before TREE`` also runs the same signals with another checkout's code (e.g. the
main branch, before this change) in a child process, prints its times and checks that its
grids are identical to these (sha256 over every grid). Medians over the repeats.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import native  # noqa: E402
from backend.stages.probe import ProbeConfig, probe  # noqa: E402
from backend.stages.signals import SignalConfig, compute_signals  # noqa: E402

KINDS = ("mv", "residual", "mvres")

# Run in a child on another checkout: the same measurement, printed as JSON.
_CHILD = """
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from backend.stages.probe import ProbeConfig, probe
from backend.stages.signals import SignalConfig, compute_signals
info = probe(sys.argv[2], config=ProbeConfig())
ids = np.asarray(json.loads(sys.argv[3]), np.int32)
out = {}
for kind in sys.argv[4].split(","):
    c0, w0 = time.process_time(), time.perf_counter()
    sg = compute_signals(info, ids, config=SignalConfig(kind=kind, threads=1))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    digest = hashlib.sha256(b"".join(g.tobytes() for g in sg.grids)).hexdigest()
    out[kind] = {"cpu": cpu, "wall": wall, "sha256": digest}
print(json.dumps(out))
"""


def _frames(total: int, spec: str) -> np.ndarray:
    if spec == "all":
        return np.arange(total, dtype=np.int32)
    return np.linspace(0, total - 1, int(spec)).astype(np.int32)


def _load() -> str:
    """The 1/5/15-minute load averages: CPU times include waiting for caches other processes share."""
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _digest(grids: tuple[np.ndarray, ...]) -> str:
    return hashlib.sha256(b"".join(g.tobytes() for g in grids)).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("video", type=Path)
    parser.add_argument("--frames", default="all", help="'all' or a number of uniformly sampled frames")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout to time and compare the signals on")
    args = parser.parse_args()

    info = probe(args.video, config=ProbeConfig())
    ids = _frames(info.total_frames, args.frames)
    n = int(ids.size)
    print(
        f"{args.video.name}: {info.codec_name} {info.width}x{info.height}, {info.total_frames} frames, "
        f"{n} requested; compiled kernel: "
        f"{'yes' if native.motion_kernel_available() else 'no (numpy path)'}; "
        f"load average {_load()}"
    )
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in ("bitcost", *KINDS)}
    digests: dict[str, str] = {}
    before: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
    before_digests: dict[str, str] = {}
    for _ in range(args.repeat):
        if native.bitcost_reader_available():
            c0, w0 = time.process_time(), time.perf_counter()
            native.read_bitcost(
                info.path,
                ids.tolist(),
                export=native.ReaderExport(pixels=False),
                target_only=False,
                thread_count=1,
            )
            times["bitcost"].append((time.process_time() - c0, time.perf_counter() - w0))
        for kind in KINDS:
            c0, w0 = time.process_time(), time.perf_counter()
            sg = compute_signals(info, ids, config=SignalConfig(kind=kind, threads=1))
            times[kind].append((time.process_time() - c0, time.perf_counter() - w0))
            digests[kind] = _digest(sg.grids)
        if args.before is not None:
            child = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _CHILD,
                    str(args.before.resolve()),
                    info.path,
                    json.dumps(ids.tolist()),
                    ",".join(KINDS),
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=args.before,
            )
            for kind, row in json.loads(child.stdout.strip().splitlines()[-1]).items():
                before[kind].append((row["cpu"], row["wall"]))
                before_digests[kind] = row["sha256"]

    def per_frame(rows: list[tuple[float, float]], which: int) -> float:
        return statistics.median(r[which] for r in rows) / n * 1000

    bit = per_frame(times["bitcost"], 0) if times["bitcost"] else float("nan")
    header = f"{'signal':9s} {'ms/frame cpu':>12s} {'wall':>7s} {'vs bitcost':>10s}"
    if args.before is not None:
        header += f" {'before cpu':>10s} {'speed-up':>8s} {'same grids':>10s}"
    print(header)
    for name in ("bitcost", *KINDS):
        if not times[name]:
            print(f"{name:9s} {'(reader not installed)':>12s}")
            continue
        cpu, wall = per_frame(times[name], 0), per_frame(times[name], 1)
        line = f"{name:9s} {cpu:12.2f} {wall:7.2f} {cpu / bit:9.2f}x"
        if args.before is not None and name in KINDS:
            old = per_frame(before[name], 0)
            same = "yes" if before_digests[name] == digests[name] else "NO"
            line += f" {old:10.2f} {old / cpu:7.1f}x {same:>10s}"
        print(line)
    print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
