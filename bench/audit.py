"""Benchmark: the coverage audit's cost against the selection it audits, per selector, on a 720p clip.

Usage::

    .venv/bin/python bench/audit.py [VIDEO ...] [--frames 300] [--repeat 5]

Without VIDEO it makes a 1280×720 H.264 clip of ``--frames`` frames from the bundled sample (as
bench/export.py does). For each video and selector (cvp, llava-ov2, onevision, uniform, each with
its default options), in one process: one warm-up selection, then ``--repeat`` times a selection
followed at once by the audit of its result (``audit_source_of_run`` + ``audit_coverage``, what
``codec-lens audit`` and the batch rows compute), then the 4-budget sweep of that result
(``sweep_budgets`` at 2000, 4000, 8000 and 16000 tokens: re-selection, packing and an audit per
budget, what ``codec-lens sweep`` adds to its one selection). It prints the median selection and
audit times, the audit/selection ratio (median of the per-repeat ratios and the worst) against
the issue's target of ≤ 5 %, and (selection + sweep)/selection against ≤ 1.5×.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from export import make_720p  # noqa: E402 (bench/export.py, beside this script)

from backend.audit import AuditConfig, audit_coverage, audit_source_of_run  # noqa: E402
from backend.audit.sweep import SweepConfig, sweep_budgets  # noqa: E402
from backend.selectors import options_for, select  # noqa: E402

SELECTORS = ("cvp", "llava-ov2", "onevision", "uniform")
TARGET = 0.05
SWEEP_TARGET = 1.5


def measure(video: Path, selector: str, repeat: int) -> dict[str, float]:
    """Median selection and audit seconds and the audit/selection ratios of ``repeat`` pairs."""
    options = options_for(selector, {})
    config = AuditConfig()
    select(video, options=options)  # warm: imports, the reader's first open
    picks, audits, ratios, sweeps = [], [], [], []
    frames = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = select(video, options=options)
        t1 = time.perf_counter()
        audit = audit_coverage(audit_source_of_run(result), config=config)
        t2 = time.perf_counter()
        sweep_budgets(result, config=SweepConfig(), audit=config)
        t3 = time.perf_counter()
        picks.append(t1 - t0)
        audits.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
        sweeps.append((t1 - t0 + t3 - t2) / (t1 - t0))
        frames = audit.frames
    return {
        "frames": frames,
        "select": statistics.median(picks),
        "audit": statistics.median(audits),
        "ratio": statistics.median(ratios),
        "worst": max(ratios),
        "sweep": statistics.median(sweeps),
        "sweep_worst": max(sweeps),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("videos", nargs="*", type=Path)
    parser.add_argument("--frames", type=int, default=300, help="frames of the made 720p clip")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        videos = args.videos or [make_720p(Path(tmp) / "clip720.mp4", args.frames)]
        print(f"{'clip':22s} {'selector':10s} {'frames':>6s} {'select s':>8s} {'audit ms':>8s} "
              f"{'audit/select':>12s} {'worst':>6s}  target ≤ {TARGET:.0%}   "
              f"{'sweep/select':>12s} {'worst':>6s}  target ≤ {SWEEP_TARGET}×")  # fmt: skip
        for video in videos:
            for selector in SELECTORS:
                m = measure(video, selector, args.repeat)
                verdict = "ok" if m["worst"] <= TARGET else "OVER"
                swept = "ok" if m["sweep_worst"] <= SWEEP_TARGET else "OVER"
                print(
                    f"{video.name[:22]:22s} {selector:10s} {m['frames']:6.0f} {m['select']:8.3f} "
                    f"{1000 * m['audit']:8.1f} {m['ratio']:12.2%} {m['worst']:6.2%}  {verdict:<14s}"
                    f"{m['sweep']:12.2f}× {m['sweep_worst']:5.2f}×  {swept}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
