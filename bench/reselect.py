"""Benchmark: a full stored run against re-selection from the cache.

Usage::

    .venv/bin/python bench/reselect.py VIDEO [VIDEO ...] [--repeat 3]

For each clip, in one process and a fresh DuckDB file: ``select_and_store`` (probe →
pack, then every table and the decode cache are written) and ``reselect`` of that run
with a changed readiness threshold (fixed, at 0.8× the estimated one) and
images_per_group 3 — first from disk (a new SessionStore, as ``codec-lens reselect``
does) and then with the store already holding the decode in memory (as the app does).
Also the CLI wall time of ``codec-lens reselect`` (interpreter and imports included),
and the database and cache size per 1000 frames. Medians of the repeats; the ratios are
also taken per repeat (full run and re-selections measured back to back) and the worst is
shown. Files that are not videos (a README beside the clips) are skipped with a note.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.errors import CodecLensError  # noqa: E402
from backend.pipeline import SelectionOptions  # noqa: E402
from backend.runs import reselect, select_and_store  # noqa: E402
from backend.store import SessionStore  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("videos", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'clip':34s} {'frames':>6s} {'full s':>7s} {'disk s':>7s} {'mem s':>6s} {'cli s':>6s} "
        f"{'disk/full':>9s} {'mem/full':>8s} {'worst d/f':>9s} {'worst m/f':>9s} {'DB MB/1k':>9s} "
        f"{'cache MB/1k':>11s}"
    )
    for video in args.videos:
        full, disk, mem, cli = [], [], [], []
        sizes = {}
        frames = 0
        for rep in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                db = Path(tmp) / f"bench{rep}.duckdb"
                with SessionStore(db) as store:
                    t0 = time.perf_counter()
                    try:
                        run_id, result = select_and_store(video, store, options=SelectionOptions())
                    except CodecLensError as exc:
                        print(f"{video.name[:34]:34s} skipped: {exc.one_line()}")
                        break
                    full.append(time.perf_counter() - t0)
                    frames = result.info.total_frames
                    changes = {
                        "readiness_sum_threshold_mode": "fixed",
                        "readiness_sum_threshold": round(0.8 * result.groups.threshold, 3),
                        "images_per_group": 3,
                    }
                with SessionStore(db) as store:
                    memory: dict = {}
                    t0 = time.perf_counter()
                    _, _, how = reselect(store, run_id, changes, memory=memory)
                    disk.append(time.perf_counter() - t0)
                    assert how == "cache+scores", how
                    nudged = changes | {"readiness_sum_threshold": changes["readiness_sum_threshold"] + 1}
                    t0 = time.perf_counter()
                    reselect(store, run_id, nudged, memory=memory)
                    mem.append(time.perf_counter() - t0)
                    sizes = store.size_bytes()
                cmd = [
                    sys.executable,
                    "-m",
                    "app.cli",
                    "reselect",
                    run_id,
                    "--session-db",
                    str(db),
                    "--images_per_group",
                    "2",
                    "--json",
                ]
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
                cli.append(time.perf_counter() - t0)
                assert json.loads(proc.stdout)["reused"] == "cache+scores"
        if not full:
            continue
        m = {k: statistics.median(v) for k, v in {"full": full, "disk": disk, "mem": mem, "cli": cli}.items()}
        worst_disk = max(d / f for d, f in zip(disk, full, strict=True))
        worst_mem = max(d / f for d, f in zip(mem, full, strict=True))
        per_k = 1000 / max(1, frames) / 1e6
        print(
            f"{video.name[:34]:34s} {frames:6d} {m['full']:7.2f} {m['disk']:7.3f} {m['mem']:6.3f} "
            f"{m['cli']:6.2f} "
            f"{m['disk'] / m['full']:9.3f} {m['mem'] / m['full']:8.3f} {worst_disk:9.3f} {worst_mem:9.3f} "
            f"{sizes['database'] * per_k:9.2f} "
            f"{sizes['cache'] * per_k:11.1f}"
        )
    print(
        "\nfull = select_and_store in-process (run + tables + decode cache); disk = reselect through a new\n"
        "SessionStore (cache read from disk); mem = reselect on a store that already holds the decode;\n"
        "cli = `codec-lens reselect` wall time. worst = largest per-repeat ratio. DB = DuckDB file after\n"
        "3 runs; cache = decoded pixels + maps."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
