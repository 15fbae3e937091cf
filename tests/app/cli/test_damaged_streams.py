"""Damaged copies of every codec and container: each command exits 0 (named warnings) or 2 (one line).

Never a traceback, never death by a signal, never a hang, never decoder noise on stderr. The
copies come from tests/helpers/damage.py (seeded: the same seed gives the same bytes). Seed 1 of every
clip and kind runs by default; more seeds are ``slow``.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli_forked
from helpers.damage import CONTAINERS, DAMAGE_KINDS, damage_bytes, file_layout, make_clip, write_damaged

# Every command over every damaged copy: the end-to-end tier, not the unit tier (--fast).
pytestmark = pytest.mark.slow

TIMEOUT_SECS = 60
"""Per command; the 20-frame clips take about a second each."""
MAX_ERROR_LINES = 3
_FFMPEG_LINE = re.compile(r"^\[[^\]]* @ 0x[0-9a-f]+\]")  # "[h264 @ 0x55d0…] error while decoding MB …"
# Python's own wording leaking into an error line: a failure nobody mapped to a message.
_INTERNAL_TEXT = re.compile(r"index out of range|has no attribute|codec can't decode|\[Errno -?\d+\]")
# A cvp-style output folder can be made (parity profile) from these intact clips; parity reads
# bitcost, which AV1 lacks, and cvp's own reader fails on HEVC in MPEG-TS.
_CVP_READABLE = ("h264_mp4", "vp9_webm", "h264_mkv")


@dataclass
class Outcome:
    """One command's run on one damaged file."""

    label: str
    args: list[str]
    returncode: int | None
    """None: killed by the test's timeout."""
    stdout: str
    stderr: str
    json_path: Path | None = None
    """Where the command wrote its JSON (stdout when None)."""

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def data(self) -> dict[str, Any]:
        text = self.json_path.read_text() if self.json_path is not None else self.stdout
        return json.loads(text)


def _run(label: str, *args: str | Path, json_path: Path | None = None) -> Outcome:
    try:
        proc = run_cli_forked(*args, timeout=TIMEOUT_SECS)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return Outcome(label, [str(a) for a in args], None, "", err, json_path)
    return Outcome(label, [str(a) for a in args], proc.returncode, proc.stdout, proc.stderr, json_path)


def _warnings(outcome: Outcome) -> list[dict[str, Any]]:
    data = outcome.data()
    if outcome.label == "compare":  # per variant; the damaged source only feeds the encoders
        return [w for v in data["variants"] for w in v.get("warnings") or []]
    return list(data.get("warnings") or [])


def _problems(outcome: Outcome, names: tuple[str, ...]) -> list[str]:
    """What breaks the contract in one outcome (empty when it kept it)."""
    rc, lines = outcome.returncode, outcome.lines
    if rc is None:
        return [f"no answer within {TIMEOUT_SECS} s"]
    if rc < 0 or rc not in (0, 2):
        return [f"exit {rc}: {' | '.join(lines[-3:])[:400]}"]
    problems = []
    if "Traceback" in outcome.stderr:
        problems.append("traceback on stderr")
    noise = [line for line in lines if _FFMPEG_LINE.match(line)]
    if noise:
        problems.append(f"{len(noise)} decoder log lines on stderr, first: {noise[0][:200]}")
    if rc == 2:
        if not 1 <= len(lines) <= MAX_ERROR_LINES:
            problems.append(f"exit 2 with {len(lines)} stderr lines: {' | '.join(lines[:4])[:400]}")
        elif not lines[-1].startswith("codec-lens: error: "):
            problems.append(f"exit 2, last line is not an error line: {lines[-1][:300]}")
        elif not any(name in lines[-1] for name in names):
            problems.append(f"exit 2, the error names none of {names}: {lines[-1][:300]}")
        elif _INTERNAL_TEXT.search(lines[-1]):
            problems.append(f"exit 2 with an unmapped internal error: {lines[-1][:300]}")
        return problems
    if len(lines) > MAX_ERROR_LINES:
        problems.append(f"exit 0 with {len(lines)} stderr lines: {' | '.join(lines[:4])[:400]}")
    try:
        warnings = _warnings(outcome)
    except (OSError, ValueError, KeyError) as exc:
        return [*problems, f"exit 0 without its JSON ({exc})"]
    unnamed = [w for w in warnings if not (isinstance(w, dict) and w.get("code") and w.get("message"))]
    if unnamed:
        problems.append(f"warnings without a code and message: {unnamed[:2]}")
    return problems


def _codes(outcome: Outcome) -> set[str]:
    return {w["code"] for w in _warnings(outcome)} if outcome.returncode == 0 else set()


@pytest.fixture(scope="module")
def intact_clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small clip per codec and container (320×240, 20 frames, a keyframe every 10)."""
    folder = tmp_path_factory.mktemp("intact")
    return {name: make_clip(name, folder) for name in CONTAINERS}


@pytest.fixture(scope="module")
def cvp_dirs(intact_clips: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """cvp-layout output folders of the intact clips (parity profile), for ``import``."""
    folder = tmp_path_factory.mktemp("cvp")
    dirs = {}
    for name in _CVP_READABLE:
        out = folder / name
        # Without cvp's reader (off Linux x86-64) parity cannot run; import is then left out.
        if run_cli_forked("select", intact_clips[name], "--out", out, "--profile", "parity").returncode == 0:
            dirs[name] = out
    return dirs


def _run_all(name: str, damaged: Path, intact: Path, cvp_dir: Path | None, work: Path) -> list[Outcome]:
    """Every command on one damaged file (export on the run its select stored)."""
    av1 = CONTAINERS[name][2] == "av1"
    score = ["--score", "residual"] if av1 else []  # AV1 has no bitcost
    db = work / "s.duckdb"
    select = _run("select", "select", damaged, "--out", work / "sel", "--session-db", db, "--json", *score)
    outcomes = [select]
    if not av1:
        outcomes.append(
            _run("select parity", "select", damaged, "--out", work / "par", "--profile", "parity", "--json")
        )
    fast = work / "fast.json"
    outcomes.append(_run("fast-reader", "luma-bias", "fast-reader", damaged, "--json", fast, json_path=fast))
    pair = work / "pair.json"
    outcomes.append(
        _run(
            "luma-bias",
            *("luma-bias", "--reference", intact, "--test", damaged, "--truncate", "--json", pair),
            json_path=pair,
        )
    )
    outcomes.append(
        _run(
            "compare",
            *("compare", damaged, "--codecs", "h264,vp9", "--max-frames", "20", "--max-side", "160"),
            *("--session-db", work / "c.duckdb", "--json"),
        )
    )
    if cvp_dir is not None:
        db_import = work / "i.duckdb"
        outcomes.append(_run("import", "import", cvp_dir, damaged, "--session-db", db_import, "--json"))
    if select.returncode == 0:
        run_id = select.data()["run_id"]
        clip = work / "export" / "clip.mp4"
        outcomes.append(_run("export", "export", run_id, "--out", clip, "--session-db", db, "--json"))
    return outcomes


def _check_file(
    name: str, kind: str, seed: int, intact_clips: dict[str, Path], cvp_dirs: dict[str, Path], work: Path
) -> None:
    damaged = write_damaged(intact_clips[name], work, seed, kinds=(kind,))[kind]
    outcomes = _run_all(name, damaged, intact_clips[name], cvp_dirs.get(name), work)
    # An export error may name its run instead of the video.
    failures = [
        f"{o.label}: {p}"
        for o in outcomes
        for p in _problems(o, (damaged.name, *((o.args[1],) if o.label == "export" else ())))
    ]
    by_label = {o.label: o for o in outcomes}
    # The reader decodes what select decoded: if select saw decoder errors, so must the fast
    # reader's analysis, as one warning (its log is captured, not printed).
    fast = by_label["fast-reader"]
    if "decoder_errors" in _codes(by_label["select"]) and fast.returncode == 0:
        found = [w for w in _warnings(fast) if w["code"] == "decoder_errors"]
        if len(found) != 1:
            failures.append(f"fast-reader: {len(found)} decoder_errors warnings where select reported one")
    assert not failures, f"{damaged.name}:\n  " + "\n  ".join(failures)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every clip and damage kind for each seed of ``--damage-seeds`` (default: seed 1)."""
    if {"name", "kind", "seed"} <= set(metafunc.fixturenames):
        seeds = metafunc.config.getoption("damage_seeds")
        cases = [(name, kind, seed) for seed in seeds for name in CONTAINERS for kind in DAMAGE_KINDS]
        metafunc.parametrize(("name", "kind", "seed"), cases, ids=lambda value: str(value))


def test_every_command_survives_a_damaged_file(
    name: str, kind: str, seed: int, intact_clips: dict[str, Path], cvp_dirs: dict[str, Path], tmp_path: Path
) -> None:
    _check_file(name, kind, seed, intact_clips, cvp_dirs, tmp_path)


# --- the generator ----------------------------------------------------------------------------


def test_damage_is_deterministic_per_seed(intact_clips: dict[str, Path], tmp_path: Path) -> None:
    clip = intact_clips["h264_mkv"]
    first = write_damaged(clip, tmp_path / "a", seed=4)
    again = write_damaged(clip, tmp_path / "b", seed=4)
    other = write_damaged(clip, tmp_path / "c", seed=5)
    intact = clip.read_bytes()
    for kind in DAMAGE_KINDS:
        data = first[kind].read_bytes()
        assert data == again[kind].read_bytes(), kind
        assert data != other[kind].read_bytes(), kind
        assert data != intact, kind
    assert len(first["cut"].read_bytes()) < len(intact)
    assert len(first["splice"].read_bytes()) < len(intact)
    assert all(len(first[k].read_bytes()) == len(intact) for k in ("flip", "zero", "header"))


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_damage_hits_payload_or_structure_as_named(name: str, intact_clips: dict[str, Path]) -> None:
    import random

    clip = intact_clips[name]
    data, layout = clip.read_bytes(), file_layout(clip)
    assert layout.payload and layout.structure, "the demuxer reported no packet positions"

    def changed(kind: str) -> list[int]:
        damaged = damage_bytes(data, kind, random.Random(f"test:{kind}"), layout)
        return [i for i, (a, b) in enumerate(zip(data, damaged, strict=True)) if a != b]

    def inside(ranges: tuple[tuple[int, int], ...], i: int) -> bool:
        return any(s <= i < e for s, e in ranges)

    for kind in ("flip", "zero"):
        assert changed(kind) and all(inside(layout.payload, i) for i in changed(kind)), kind
    assert changed("header") and all(inside(layout.structure, i) for i in changed("header"))


def test_intact_clips_decode_in_their_containers(intact_clips: dict[str, Path]) -> None:
    import av

    for name, path in intact_clips.items():
        suffix, container_format, _ = CONTAINERS[name]
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            assert path.suffix == suffix
            assert container_format in container.format.name.split(","), container.format.name
            assert sum(1 for _ in container.decode(stream)) == 20, name


# --- the fast reader's decoder log ------------------------------------------------------------


def test_fast_reader_reports_decoder_errors_once_and_intact_json_is_unchanged(
    intact_clips: dict[str, Path], tmp_path: Path
) -> None:
    clip = intact_clips["h264_mp4"]
    intact_json = tmp_path / "intact.json"
    ok = _run("fast-reader", "luma-bias", "fast-reader", clip, "--json", intact_json, json_path=intact_json)
    assert ok.returncode == 0 and not ok.lines, ok.stderr
    assert "warnings" not in ok.data()  # a clean read's JSON has no new key

    reported = []
    for kind in ("flip", "zero"):
        damaged = write_damaged(clip, tmp_path, seed=1, kinds=(kind,))[kind]
        out = tmp_path / f"{kind}.json"
        result = _run("fast-reader", "luma-bias", "fast-reader", damaged, "--json", out, json_path=out)
        assert result.returncode == 0, result.stderr
        assert not result.lines, result.stderr  # nothing of FFmpeg's on the terminal
        reported += [w["message"] for w in _warnings(result) if w["code"] == "decoder_errors"]
    assert reported, "no damaged copy made the reader's decoder complain"
    for message in reported:
        assert re.fullmatch(r"the decoder reported a damaged stream \(\d+ log lines?\), first: .+", message)
        assert "@ 0x" not in message  # the "[h264 @ 0x…]" prefix is removed


def test_decoder_log_count_adds_the_dropped_lines() -> None:
    import native

    assert native.decoder_log_count([]) == 0
    assert native.decoder_log_count(["a", "b", "… 7 more lines", "c"]) == 10
