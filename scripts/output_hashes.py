"""Hash every output of a fixed set of codec-lens runs, to show a refactor changed no behaviour.

Usage::

    python scripts/output_hashes.py [--tree DIR] [--work DIR] [--out hashes.json]

It drives the CLI of the checkout at ``--tree`` (default: this one) through ``python -m app.cli``,
so it runs unchanged on any layout of the code: both profiles, every score signal, import of a
parity output, a two-codec comparison, the fast-reader luma analysis, a luma pair analysis and an
export with tables, YUView statistics and an html figure. Each run writes into the same fixed
folder under ``--work`` (wiped first), so absolute paths in outputs agree between trees.

What is hashed: every file the runs write (JSON after dropping values that differ run to run:
wall-clock times, run ids, dates, versions), and every table of the session file with the same
columns dropped. Two trees behave the same when the printed ``total`` digests are equal; the
per-item digests name what differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Keys whose values are clocks, identities or build facts, not behaviour.
_VOLATILE_KEY = re.compile(
    r"(seconds|secs|timing|elapsed|created|updated|started|finished|_at$|^run_id$|^id$|"
    r"session_id|comparison_id|analysis_id|^versions?$|hostname|^process$|^pid$|wall|_ms$|"
    r"^parent_run_id$|^parent$|^stored_run$|^run$|^runs$|^run_ids$|cpu|mtime)",
)
_UUIDISH = re.compile(r"\b[0-9a-f]{8,}(-[0-9a-f]{4,}){0,4}\b")


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in sorted(value.items()) if not _VOLATILE_KEY.search(str(k))}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, str):
        return _UUIDISH.sub("<id>", value)
    return value


def _file_digest(path: Path) -> str:
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError):
            return hashlib.sha256(path.read_bytes()).hexdigest()
        return hashlib.sha256(json.dumps(_scrub(data), sort_keys=True).encode()).hexdigest()
    if path.suffix == ".parquet":
        return _parquet_digest(path)
    if path.suffix in {".html", ".csv", ".txt"}:
        text = _UUIDISH.sub("<id>", path.read_text(errors="replace"))
        return hashlib.sha256(text.encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parquet_digest(path: Path) -> str:
    """The table's rows without the columns that are clocks or identities."""
    import duckdb

    con = duckdb.connect()
    try:
        rel = con.read_parquet(str(path))
        keep = [c for c in rel.columns if not _VOLATILE_KEY.search(c)]
        rows = [tuple(_UUIDISH.sub("<id>", str(v)) for v in r) for r in rel.select(*keep).fetchall()]
    finally:
        con.close()
    return hashlib.sha256(repr((keep, sorted(rows))).encode()).hexdigest()


def _tree_digests(folder: Path) -> dict[str, str]:
    return {
        _UUIDISH.sub("<id>", str(p.relative_to(folder))): _file_digest(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".cache" not in p.parts and p.suffix not in {".duckdb", ".wal"}
    }


def _db_digests(db: Path) -> dict[str, str]:
    import duckdb

    out: dict[str, str] = {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        for table in sorted(tables):
            cols = [
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                    "ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
            keep = [c for c in cols if not _VOLATILE_KEY.search(c) and c not in {"config", "config_json"}]
            if not keep:
                continue
            rows = con.execute(f'SELECT {", ".join(f"{c!r}" for c in keep)} FROM "{table}"').fetchall()
            rows = [tuple(_UUIDISH.sub("<id>", str(v)) for v in r) for r in rows]
            out[f"db:{table}"] = hashlib.sha256(repr(sorted(rows)).encode()).hexdigest()
    finally:
        con.close()
    return out


def _cli(tree: Path, *args: str, cwd: Path) -> str:
    cmd = [sys.executable, "-c", "import sys; from app.cli import entry; sys.exit(entry())", *args]
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**_env(), "PYTHONPATH": str(tree)}, timeout=900
    )
    if proc.returncode != 0:
        what = " ".join(args[:2])
        raise SystemExit(f"output_hashes: {what} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return proc.stdout


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout whose CLI to run")
    parser.add_argument("--work", type=Path, default=Path("/tmp/codec-lens-output-hashes"))
    parser.add_argument("--out", type=Path, help="write the digests as JSON here")
    args = parser.parse_args()
    tree = args.tree.resolve()
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    video = work / "sample.mp4"
    shutil.copyfile(ROOT / "sample_videos" / "flower_timelapse_cc0.mp4", video)
    db = work / "runs.duckdb"
    digests: dict[str, str] = {}

    def select(name: str, *opts: str) -> str:
        out = _cli(tree, "select", str(video), "--out", str(work / name), "--json", *opts, cwd=work)
        return out

    select("parity", "--profile", "parity", "--canvas_format", "png")
    stored = json.loads(
        select("clean", "--profile", "clean", "--canvas_format", "png", "--session-db", str(db))
    )
    for signal in ("mv", "residual", "qp", "mvres", "pkt_energy"):
        select(f"clean_{signal}", "--profile", "clean", "--score", signal, "--num_sampled_frames", "16")
    select("fixed", "--grouping_mode", "fixed", "--pixel_source", "full_decode")
    _cli(tree, "import", str(work / "parity"), str(video), "--session-db", str(db), "--json", cwd=work)
    run_id = stored.get("run_id") or stored.get("id")
    if not run_id:
        raise SystemExit(f"output_hashes: no run id in select --json: {sorted(stored)}")
    _cli(
        tree,
        "reselect",
        run_id,
        "--images_per_group",
        "4",
        "--out",
        str(work / "reselect"),
        "--session-db",
        str(db),
        cwd=work,
    )
    cmp_json = _cli(
        tree,
        "compare",
        str(video),
        "--codecs",
        "h264,vp9",
        "--max-frames",
        "24",
        "--max-side",
        "320",
        "--session-db",
        str(db),
        "--json",
        cwd=work,
    )
    (work / "compare.json").write_text(cmp_json)
    _cli(tree, "luma-bias", "fast-reader", str(video), "--json", str(work / "luma_fast.json"), cwd=work)
    # A pair analysis of the video against itself still runs every metric and the store.
    _cli(
        tree,
        "luma-bias",
        "--reference",
        str(video),
        "--test",
        str(video),
        "--json",
        str(work / "luma_pair.json"),
        "--session-db",
        str(db),
        cwd=work,
    )
    # Every other selector and preset, both llava-ov2 profiles, their payloads and a re-selection.
    llava = json.loads(
        select("llava_parity", "--selector", "llava-ov2", "--profile", "parity", "--session-db", str(db))
    )
    select("llava_clean", "--selector", "llava-ov2", "--profile", "clean", "--canvas_format", "png")
    select("onevision", "--selector", "onevision")
    select("uniform", "--selector", "uniform", "--num_frames", "12")
    select("mage_vl", "--preset", "mage-vl")
    _cli(
        tree,
        "reselect",
        llava.get("run_id") or llava.get("id"),
        "--images_per_group",
        "2",
        "--out",
        str(work / "llava_reselect"),
        "--session-db",
        str(db),
        cwd=work,
    )
    _cli(
        tree,
        "payload",
        str(work / "llava_parity"),
        "--model",
        "llava-ov2",
        "--out",
        str(work / "payload_llava"),
        cwd=work,
    )
    _cli(
        tree,
        "payload",
        str(work / "parity"),
        "--model",
        "onevision-encoder",
        "--out",
        str(work / "payload_ove"),
        cwd=work,
    )
    sel_json = _cli(
        tree,
        "compare",
        str(video),
        "--selectors",
        "cvp,llava-ov2,uniform[num_frames=8]",
        "--session-db",
        str(db),
        "--json",
        cwd=work,
    )
    (work / "compare_selectors.json").write_text(sel_json)
    # A batch over two copies of the sample (one worker: rows in a fixed order).
    (work / "batch_in").mkdir()
    for name in ("a.mp4", "b.mp4"):
        shutil.copyfile(video, work / "batch_in" / name)
    _cli(
        tree,
        "batch",
        str(work / "batch_in"),
        "--out",
        str(work / "batch_out"),
        "--workers",
        "1",
        "--num_sampled_frames",
        "24",
        "--session-db",
        str(db),
        cwd=work,
    )
    (work / "export").mkdir()
    _cli(
        tree,
        "export",
        run_id,
        "--out",
        str(work / "export" / "clip.mp4"),
        "--frames",
        "0:40",
        "--layers",
        "heatmap,kept,lost,grid,anchor,bad",
        "--tables",
        "--yuview",
        "--plots",
        "timeline,readiness",
        "--plot-format",
        "html",
        "--session-db",
        str(db),
        cwd=work,
    )
    digests.update(_tree_digests(work))
    digests.update(_db_digests(db))
    total = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()
    for key, value in sorted(digests.items()):
        print(f"{value[:16]}  {key}")
    print(f"total {total}  ({len(digests)} items)")
    if args.out:
        args.out.write_text(json.dumps({"total": total, "items": digests}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
