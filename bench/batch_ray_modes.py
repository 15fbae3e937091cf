"""Benchmark: one Ray task per video (the ray engine) against Ray Data's ``map_batches``, same videos.

Usage::

    python bench/batch_ray_modes.py DIR [--cpus 2] [--rounds 2]

Needs Ray with Ray Data (``pip install 'ray[data]'``, which brings pyarrow; codec-lens[ray]
installs Ray core only). Without touching the environment: ``pip install --target
/tmp/raydata 'pyarrow<21'`` (20.x still takes numpy 1.26) and ``PYTHONPATH=/tmp/raydata``.
One local Ray (``--cpus`` CPUs, started once, so start-up is not counted) runs, alternately,
each round:

* ``tasks``: ``backend.batch.ray_engine.run_ray``, one task per video (1 CPU each);
* ``data``: ``ray.data.from_items(tasks).map_batches(fn, batch_size=B, num_cpus=1,
  concurrency=cpus)`` for B = 1 and B = 4, every row collected by the driver.

Each writes fresh output folders. Prints the wall time of each mode (median over rounds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _rows_of(batch: dict[str, Any]) -> dict[str, list[Any]]:
    from backend.batch.unit import run_unit

    rows = [run_unit(task) for task in batch["task"]]
    return {"status": [r["status"] for r in rows], "path": [r["path"] for r in rows]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from backend.batch import BatchConfig, plan_batch
    from backend.batch.ray_engine import init_local_ray, run_ray

    # Ray Data needs pyarrow, which codec-lens[ray] does not install: a throwaway
    # ``pip install --target DIR 'pyarrow<21'`` on PYTHONPATH reaches the Ray workers too
    # (they inherit it, after the code's own folder).
    init_local_ray(args.cpus)
    ray.data.DataContext.get_current().enable_progress_bars = False
    walls: dict[str, list[float]] = {"tasks": [], "data b=1": [], "data b=4": []}
    try:
        for _ in range(args.rounds):
            for mode in walls:
                with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
                    config = BatchConfig(engine="ray", workers=args.cpus)
                    plan = plan_batch(args.folder, Path(tmp) / "out", config=config)
                    t0 = time.perf_counter()
                    if mode == "tasks":
                        rows: list[Any] = []
                        run_ray(plan.tasks, workers=args.cpus, address=None, on_row=rows.append)
                    else:
                        size = int(mode.rsplit("=", 1)[1])
                        data = ray.data.from_items([{"task": t} for t in plan.tasks])
                        out = data.map_batches(
                            _rows_of,
                            batch_size=size,
                            num_cpus=1,
                            concurrency=args.cpus,
                            batch_format="default",
                        )
                        rows = out.take_all()
                    walls[mode].append(time.perf_counter() - t0)
                    assert len(rows) == len(plan.tasks), (mode, len(rows))
                    print(f"{mode}: {walls[mode][-1]:.2f} s for {len(rows)} videos", flush=True)
    finally:
        ray.shutdown()
    print("\nmode        wall s (median)")
    for mode, values in walls.items():
        print(f"{mode:<10} {statistics.median(values):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
