"""Benchmark: the cost of one session-store call (open the file, query, close), this tree against another.

Usage::

    .venv/bin/python bench/store_calls.py [--calls 40] [--rounds 3] [--before TREE]

Stores one run of the bundled sample in a fresh session file, then times single store calls,
each its own lease (the file opened and closed around it, as between two handlers of the app):
``get_run``, ``list_runs`` and a write (``begin_run`` + ``fail_run``, two leases). ``--before
TREE`` runs the same calls with another checkout's code (e.g. the main branch before a change)
in a child process on a copy of the same file, round after round with this tree's, and prints
both medians (ms per call) and their ratio. Timed rounds alternate between the trees so that
the machine's drift hits both.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CALLS = ("get_run", "list_runs", "write")


def measure(tree: Path, db: Path, calls: int) -> dict[str, float]:
    """Median ms per call of each kind, with the store code of ``tree``."""
    sys.path.insert(0, str(tree))
    from backend.store import SessionStore

    store = SessionStore(db)
    run_id = store.list_runs()[0].run_id
    session_id = store.get_run(run_id).session_id
    do: dict[str, Any] = {
        "get_run": lambda: store.get_run(run_id),
        "list_runs": store.list_runs,
        "write": lambda: store.fail_run(
            store.begin_run(session_id, profile="clean", config={}, versions={}), "bench row"
        ),
    }
    out = {}
    for name in CALLS:
        do[name]()  # the first call pays for imports and caches
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            do[name]()
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = statistics.median(times)
    store.close()
    return out


def make_session(db: Path) -> None:
    sys.path.insert(0, str(REPO))
    from app.workspace import SAMPLE_VIDEO
    from backend.pipeline import SelectionOptions
    from backend.runs import select_and_store
    from backend.store import SessionStore

    with SessionStore(db) as store:
        select_and_store(SAMPLE_VIDEO, store, options=SelectionOptions(num_sampled_frames=32))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None, help="another checkout to compare with")
    parser.add_argument("--child", nargs=2, metavar=("TREE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(Path(args.child[0]), Path(args.child[1]), args.calls)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        made = Path(tmp) / "made.duckdb"
        make_session(made)
        trees = {"this tree": REPO} | ({"before": args.before.resolve()} if args.before else {})
        results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for r in range(args.rounds):
            for name, tree in trees.items():
                db = Path(tmp) / f"{name.replace(' ', '_')}_{r}.duckdb"
                shutil.copy(made, db)
                child = [sys.executable, __file__, "--calls", str(args.calls), "--child", str(tree), str(db)]
                done = subprocess.run(child, capture_output=True, text=True, check=True)
                results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        f"{'call':10s} "
        + " ".join(f"{name + ' ms':>14s}" for name in trees)
        + ("   ratio" if args.before else "")
    )
    for call in CALLS:
        med = {name: statistics.median(r[call] for r in results[name]) for name in trees}
        row = f"{call:10s} " + " ".join(f"{med[name]:14.2f}" for name in trees)
        if args.before:
            row += f"   {med['this tree'] / med['before']:.3f}"
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
