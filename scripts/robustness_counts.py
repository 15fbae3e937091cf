"""Count how the CLI of a checkout ends on the frame-size sweep and the damaged streams.

Usage::

    python scripts/robustness_counts.py [--tree DIR] [--work DIR] [--seeds 1] [--json OUT]

It encodes the sweep's clips (20 frames, a keyframe every 10: widths 400–448 step 2 at height
240 in H.264, and 854×480, 1918×1080, 300×500, 18×18, 64×36 and 4094×18 in H.264, HEVC, VP9 and
AV1) and the damaged copies of ``tests/helpers/damage.py`` for each seed, then runs the commands of
``tests/app/cli/test_frame_size_sweep.py`` and ``tests/app/cli/test_damaged_streams.py`` on
them through ``python -m app.cli`` of ``--tree`` (so it runs unchanged on an older checkout)
and sorts every run into one outcome:

* ``ok``: exit 0 (for ``luma-bias fast-reader`` also every frame ≥ 35 dB Y-PSNR against a
  normal decode; below that it counts as ``wrong pixels``);
* ``refused``: exit 2 with at most 3 stderr lines and no traceback;
* ``signal``: killed by a signal (SIGABRT, SIGSEGV) or exit 134/139;
* ``traceback``: any other exit, or a traceback on stderr;
* ``hang``: no answer within the timeout.

The clips and damage come from this checkout's ``tests/`` so both trees see the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from helpers.clips import encode_clip  # noqa: E402  (the tests' clip recipes)
from helpers.damage import CONTAINERS, DAMAGE_KINDS, make_clip, write_damaged  # noqa: E402

from native import svt_av1_stalls  # noqa: E402  (the product's own rule, not a copy)

SIZES = ((854, 480), (1918, 1080), (300, 500), (18, 18), (64, 36), (4094, 18))
CODECS = ("h264", "hevc", "vp9", "av1")
TIMEOUT_SECS = 120
MIN_Y_PSNR_DB = 35.0


def _stalls(codec: str, width: int, height: int) -> bool:
    """SVT-AV1 never returns from some narrow frames; such clips cannot be made."""
    return codec == "av1" and svt_av1_stalls(width, height)


class Runner:
    """Runs ``python -m app.cli`` of one checkout and tallies outcomes per command."""

    def __init__(self, tree: Path, work: Path) -> None:
        self.tree, self.work = tree, work
        self.counts: dict[str, Counter[str]] = {}
        self.examples: dict[str, list[str]] = {}

    def run(self, label: str, *args: str | Path) -> subprocess.CompletedProcess[str] | None:
        env = {
            **os.environ,
            "PYTHONPATH": str(self.tree),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
        cmd = [sys.executable, "-m", "app.cli", *map(str, args)]
        try:
            proc = subprocess.run(
                cmd, cwd=self.work, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECS
            )
        except subprocess.TimeoutExpired:
            self._count(label, "hang", " ".join(map(str, args)))
            return None
        self._count(label, self._outcome(label, proc), f"{' '.join(map(str, args))}: {proc.stderr[-300:]}")
        return proc

    def _outcome(self, label: str, proc: subprocess.CompletedProcess[str]) -> str:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        if proc.returncode < 0 or proc.returncode in (134, 139):
            return "signal"
        if "Traceback" in proc.stderr or proc.returncode not in (0, 2):
            return "traceback"
        if proc.returncode == 2:
            return "refused" if len(lines) <= 3 else "traceback"
        if label.startswith("fast-reader"):
            report = self.work / "fast.json"
            try:
                worst = json.loads(report.read_text())["references"][0]["summary"]["min_y_psnr_db"]
            except (OSError, ValueError, KeyError, IndexError):
                return "ok"
            if worst is not None and worst < MIN_Y_PSNR_DB:
                return "wrong pixels"
        return "ok"

    def _count(self, label: str, outcome: str, detail: str) -> None:
        self.counts.setdefault(label, Counter())[outcome] += 1
        if outcome not in ("ok", "refused"):
            self.examples.setdefault(label, []).append(f"{outcome}: {detail}"[:400])


def sweep(runner: Runner, clips: Path) -> None:
    cases = [("h264", w, 240) for w in range(400, 450, 2)]
    cases += [(codec, w, h) for (w, h) in SIZES for codec in CODECS]
    for codec, width, height in cases:
        if _stalls(codec, width, height):
            continue
        video = encode_clip(
            clips / f"{codec}_{width}x{height}", codec=codec, width=width, height=height, frames=20, gop=10
        )
        score = ["--score", "residual"] if codec == "av1" else []
        db = runner.work / f"sweep_{codec}_{width}x{height}.duckdb"
        out = runner.work / "out"
        shutil.rmtree(out, ignore_errors=True)
        sel = runner.run("select clean", "select", video, "--out", out, "--session-db", db, "--json", *score)
        shutil.rmtree(runner.work / "full", ignore_errors=True)
        runner.run(
            "select full_decode",
            "select",
            video,
            "--out",
            runner.work / "full",
            "--pixel_source",
            "full_decode",
        )
        shutil.rmtree(runner.work / "par", ignore_errors=True)
        runner.run("select parity", "select", video, "--out", runner.work / "par", "--profile", "parity")
        (runner.work / "fast.json").unlink(missing_ok=True)
        runner.run("fast-reader", "luma-bias", "fast-reader", video, "--json", runner.work / "fast.json")
        if sel is not None and sel.returncode == 0:
            run_id = json.loads(sel.stdout)["run_id"]
            export = runner.work / "export"
            shutil.rmtree(export, ignore_errors=True)
            export.mkdir()
            runner.run(
                "export",
                *(
                    "export",
                    run_id,
                    "--out",
                    export / "clip.mp4",
                    "--session-db",
                    db,
                    "--allow-dir",
                    runner.work,
                ),
            )
        if codec == "h264" and (width, height) in SIZES:
            runner.run(
                "compare",
                *("compare", video, "--codecs", ",".join(CODECS), "--max-frames", "10", "--max-side", "0"),
                *("--session-db", runner.work / "c.duckdb", "--json"),
            )


def damaged(runner: Runner, clips: Path, seeds: list[int]) -> None:
    intact = {name: make_clip(name, clips / "intact") for name in CONTAINERS}
    for seed in seeds:
        for name, clip in intact.items():
            files = write_damaged(clip, clips / f"damaged_{seed}", seed, kinds=DAMAGE_KINDS)
            av1 = CONTAINERS[name][2] == "av1"
            score = ["--score", "residual"] if av1 else []
            for kind, path in files.items():
                db = runner.work / f"dmg_{seed}_{name}_{kind}.duckdb"
                sel = runner.run(
                    "damaged select",
                    *(
                        "select",
                        path,
                        "--out",
                        runner.work / f"d_{name}_{kind}",
                        "--session-db",
                        db,
                        "--json",
                    ),
                    *score,
                )
                if not av1:
                    runner.run(
                        "damaged select parity",
                        *("select", path, "--out", runner.work / f"dp_{name}_{kind}", "--profile", "parity"),
                    )
                (runner.work / "fast.json").unlink(missing_ok=True)
                runner.run(
                    "damaged fast-reader", "luma-bias", "fast-reader", path, "--json", runner.work / "f.json"
                )
                runner.run(
                    "damaged luma-bias",
                    *(
                        "luma-bias",
                        "--reference",
                        clip,
                        "--test",
                        path,
                        "--truncate",
                        "--json",
                        runner.work / "p.json",
                    ),
                )
                runner.run(
                    "damaged compare",
                    *("compare", path, "--codecs", "h264,vp9", "--max-frames", "20", "--max-side", "160"),
                    *("--session-db", runner.work / f"dc_{seed}_{name}_{kind}.duckdb", "--json"),
                )
                if sel is not None and sel.returncode == 0:
                    run_id = json.loads(sel.stdout)["run_id"]
                    runner.run(
                        "damaged export",
                        *("export", run_id, "--out", runner.work / f"de_{name}_{kind}" / "clip.mp4"),
                        *("--session-db", db, "--allow-dir", runner.work),
                    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout whose CLI to run")
    parser.add_argument("--work", type=Path, default=Path("/tmp/codec-lens-robustness"))
    parser.add_argument("--seeds", default="1", help="damage seeds, e.g. 1 or 1-5")
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = list(range(int(first), int(last or first) + 1))
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    (work / "clips").mkdir(parents=True)
    runner = Runner(args.tree.resolve(), work)
    started = time.monotonic()
    sweep(runner, work / "clips")
    damaged(runner, work / "clips", seeds)
    outcomes = ("ok", "refused", "wrong pixels", "signal", "traceback", "hang")
    print(f"{'command':24s} " + " ".join(f"{o:>12s}" for o in outcomes))
    for label, counts in runner.counts.items():
        print(f"{label:24s} " + " ".join(f"{counts[o]:12d}" for o in outcomes))
    total = sum(runner.counts.values(), Counter())
    print(f"{'total':24s} " + " ".join(f"{total[o]:12d}" for o in outcomes))
    print(f"({time.monotonic() - started:.0f} s, tree {args.tree})")
    for label, lines in runner.examples.items():
        for line in lines[:3]:
            print(f"  {label}: {line}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"counts": {k: dict(v) for k, v in runner.counts.items()}, "examples": runner.examples}
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
