"""Frame sizes through every command: each run gives the right pixels or refuses the size in one line.

Right pixels: Y-PSNR ≥ 35 dB of what the command wrote (canvas patches, exported frames, the
compared runs' frames) against a PyAV decode of the same frames scaled the same way: with the
loop filter skipped where the pixels come from cvp's fast reader (which skips it), a normal
decode otherwise; ``luma-bias fast-reader`` reports the reader against a normal decode itself.
A refusal: exit 2 and one stderr line naming the file, the size (or codec) and what is
supported. Never a signal, a traceback or a hang. Clips are 20 frames, each encoded once.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import numpy as np
import pytest
from helpers.cli import run_cli_forked
from helpers.clips import encode_clip
from PIL import Image

from backend.stages.geometry import MAX_ASPECT_RATIO
from native import svt_av1_stalls

# Whole-command runs over encoded clips: the end-to-end tier, not the unit tier (--fast).
pytestmark = [pytest.mark.needs_cvp, pytest.mark.slow]

FRAMES = 20
MIN_Y_PSNR_DB = 35.0
"""No-deblocking drift of cvp's reader against a deblocked decode stays above this; the broken
unscaled path gave 22–34 dB (tests/native/test_frame_sizes.py)."""
TIMEOUT_SECS = 180
WIDTHS = tuple(range(400, 450, 2))
CODECS = ("h264", "hevc", "vp9", "av1")
SIZES = (
    (400, 240),
    (404, 240),
    (410, 240),
    (416, 240),
    (854, 480),
    (300, 500),
    (18, 18),
    (64, 36),
    (4094, 18),
    (1918, 1080),
)
HEAVY = {(1918, 1080)}
"""Sizes whose runs are all slow (1080p)."""
FAST_CODECS = ("h264",)
"""Codecs whose runs at the other sizes are not slow: the default run covers each size once."""
_PATCH = 14  # the default --patch


def _size_id(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def _cases(
    codecs: tuple[str, ...] = CODECS, fast: tuple[str, ...] = FAST_CODECS, *, selectable_only: bool = False
) -> Iterator[object]:
    """(size, codec) params; slow at 1080p and for codecs not in ``fast``. Clips SVT-AV1 cannot
    encode are left out (the refusal to try is test_compare_refuses_av1_where_svt_av1_would_stall);
    ``selectable_only`` leaves out sizes a clean select refuses (aspect ratio beyond 200:1)."""
    for size in SIZES:
        if selectable_only and max(size) / min(size) > MAX_ASPECT_RATIO:
            continue
        for codec in codecs:
            if codec == "av1" and svt_av1_stalls(*size):
                continue
            marks = [pytest.mark.slow] if size in HEAVY or codec not in fast else []
            yield pytest.param(size, codec, marks=marks, id=f"{_size_id(size)}-{codec}")


# ---------------------------------------------------------------------------------------------
# Fixtures: one clip per (codec, size), one clean select per (codec, size) shared with export.


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, int, int], Path]:
    """``clip(codec, width, height)``: a 20-frame clip (gop 10), encoded on first use."""
    root = tmp_path_factory.mktemp("size_sweep_clips")
    made: dict[tuple[str, int, int], Path] = {}

    def get(codec: str, width: int, height: int) -> Path:
        key = (codec, width, height)
        if key not in made:
            made[key] = encode_clip(
                root / f"{codec}_{width}x{height}",
                codec=codec,
                width=width,
                height=height,
                frames=FRAMES,
                gop=10,
            )
        return made[key]

    return get


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    try:
        return run_cli_forked(*args, timeout=TIMEOUT_SECS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {TIMEOUT_SECS} s (hang): {' '.join(map(str, args))}")


def _score_args(codec: str) -> list[str]:
    # AV1 has no bitcost: clean selects it with another decoder-side signal.
    return ["--score", "residual"] if codec == "av1" else []


@pytest.fixture(scope="module")
def clean_select(
    clip: Callable[[str, int, int], Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str, int, int], tuple[subprocess.CompletedProcess[str], Path, Path]]:
    """``clean_select(codec, w, h)``: a clean fast-reader select with --out and --session-db, run once.

    Returns (process, out folder, session db); export reuses the stored run.
    """
    root = tmp_path_factory.mktemp("size_sweep_runs")
    done: dict[tuple[str, int, int], tuple[subprocess.CompletedProcess[str], Path, Path]] = {}

    def get(codec: str, width: int, height: int) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
        key = (codec, width, height)
        if key not in done:
            video = clip(codec, width, height)
            out = root / f"{codec}_{width}x{height}"
            db = root / f"{codec}_{width}x{height}.duckdb"
            proc = _run(
                "select",
                video,
                "--out",
                out,
                "--session-db",
                db,
                "--json",
                "--canvas_format",
                "png",
                "--pixel_source",
                "fast_reader",
                *_score_args(codec),
            )
            done[key] = (proc, out, db)
        return done[key]

    return get


# ---------------------------------------------------------------------------------------------
# Checks.


def _y(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def _y_psnr_db(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    mse = float(np.mean((_y(a) - _y(b)) ** 2))
    return np.inf if mse == 0 else 10 * np.log10(255.0**2 / mse)


def _reference(
    video: Path, frame_indices: list[int], processed_hw: tuple[int, int], *, fast_reader: bool
) -> dict[int, np.ndarray]:
    """A PyAV decode of the frames, area-scaled to the processed size; ``fast_reader`` skips the
    loop filter as cvp's reader does (its drift on an 18x18 clip reaches 34 dB, frame 6)."""
    h, w = processed_hw
    wanted = set(frame_indices)
    out: dict[int, np.ndarray] = {}
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        if fast_reader:
            stream.codec_context.options = {"skip_loop_filter": "all"}
        for index, frame in enumerate(container.decode(stream)):
            if index in wanted:
                out[index] = frame.to_ndarray(format="rgb24", width=w, height=h, interpolation="AREA")
            if index >= max(wanted):
                break
    assert set(out) == wanted
    return out


def _expect_ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"


Refusal = tuple[tuple[str, str], ...]
"""(phrase, the value in parentheses) pairs, one of which the error line must hold; () = accepted."""


def _expect_refusal(proc: subprocess.CompletedProcess[str], video: Path, expected: Refusal) -> None:
    """Exit 2 and exactly one line: ``codec-lens: error: <file>: <problem> (WxH). Supported … .``"""
    assert proc.returncode == 2, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith(f"codec-lens: error: {video}: ") and ". Supported " in line, line
    assert line.endswith("."), line
    assert any(phrase in line and f"({value})" in line for phrase, value in expected), (expected, line)


def _select_refusal(profile: str, codec: str, size: tuple[int, int]) -> Refusal:
    """What a select refuses this clip for (any one of them); () when it must select."""
    width, _ = size
    size_id = _size_id(size)
    expected: list[tuple[str, str]] = []
    if max(size) / min(size) > MAX_ASPECT_RATIO:
        expected.append(("aspect ratio", size_id))
    if profile == "parity":
        if width % 16:
            expected.append(("multiple of 16", size_id))
        if codec == "av1":
            expected.append(("no bitcost", "av1"))
    return tuple(expected)


def _check_canvases(out: Path, video: Path, *, fast_reader: bool) -> float:
    """Worst Y-PSNR over canvases of their valid patches against the reference decode."""
    meta = json.loads((out / "meta.json").read_text())
    processed_hw = tuple(meta["processed_hw"])
    tokens = np.load(out / "tokens.npy")
    valid = tokens[tokens[:, 7] == 1]
    assert valid.size, "no valid tokens"
    frames = sorted({int(f) for f in valid[:, 0]})
    ref = _reference(video, frames, processed_hw, fast_reader=fast_reader)
    worst = np.inf
    p = _PATCH
    for canvas_index in sorted({int(c) for c in valid[:, 3]}):
        canvas = np.asarray(Image.open(out / f"canvas_{canvas_index:03d}.png").convert("RGB"))
        rows = valid[valid[:, 3] == canvas_index]
        got = np.stack([canvas[r[4] * p : (r[4] + 1) * p, r[5] * p : (r[5] + 1) * p] for r in rows])
        want = np.stack([ref[int(r[0])][r[1] * p : (r[1] + 1) * p, r[2] * p : (r[2] + 1) * p] for r in rows])
        worst = min(worst, _y_psnr_db(got, want))
    return worst


# ---------------------------------------------------------------------------------------------
# select: the whole width range (clean, the fast command), then the sizes in every mode.


@pytest.mark.parametrize("width", WIDTHS)
def test_select_clean_at_every_width(clip, tmp_path: Path, width: int) -> None:
    video = clip("h264", width, 240)
    out = tmp_path / "out"
    _expect_ok(_run("select", video, "--out", out, "--canvas_format", "png"))
    assert _check_canvases(out, video, fast_reader=True) >= MIN_Y_PSNR_DB


@pytest.mark.parametrize(("size", "codec"), list(_cases()))
def test_select_clean_fast_reader(clean_select, clip, size: tuple[int, int], codec: str) -> None:
    proc, out, _ = clean_select(codec, *size)
    video = clip(codec, *size)
    if expected := _select_refusal("clean", codec, size):
        _expect_refusal(proc, video, expected)
        return
    _expect_ok(proc)
    # AV1 is selected by a signal; its pixels come from a normal decode.
    assert _check_canvases(out, video, fast_reader=codec != "av1") >= MIN_Y_PSNR_DB


# AV1 is left out: selected by a signal, its pixels come from a normal decode whatever
# --pixel_source says, which test_select_clean_fast_reader already checks.
@pytest.mark.parametrize(("size", "codec"), list(_cases(codecs=("h264", "hevc", "vp9"))))
def test_select_clean_full_decode(clip, tmp_path: Path, size: tuple[int, int], codec: str) -> None:
    video = clip(codec, *size)
    out = tmp_path / "out"
    args = ["--canvas_format", "png", "--pixel_source", "full_decode", *_score_args(codec)]
    proc = _run("select", video, "--out", out, *args)
    if expected := _select_refusal("clean", codec, size):
        _expect_refusal(proc, video, expected)
        return
    _expect_ok(proc)
    assert _check_canvases(out, video, fast_reader=False) >= MIN_Y_PSNR_DB


# Parity refuses most of these up front (cheap), so every codec runs by default.
@pytest.mark.parametrize(("size", "codec"), list(_cases(fast=CODECS)))
def test_select_parity(clip, tmp_path: Path, size: tuple[int, int], codec: str) -> None:
    video = clip(codec, *size)
    out = tmp_path / "out"
    proc = _run("select", video, "--out", out, "--canvas_format", "png", "--profile", "parity")
    if expected := _select_refusal("parity", codec, size):
        _expect_refusal(proc, video, expected)
        assert not out.exists()
        return
    _expect_ok(proc)
    assert _check_canvases(out, video, fast_reader=True) >= MIN_Y_PSNR_DB


# ---------------------------------------------------------------------------------------------
# luma-bias fast-reader: cvp's reader at the stream's own size against a normal decode.


@pytest.mark.parametrize(("size", "codec"), list(_cases()))
def test_luma_bias_fast_reader(clip, tmp_path: Path, size: tuple[int, int], codec: str) -> None:
    video = clip(codec, *size)
    report = tmp_path / "luma.json"
    proc = _run("luma-bias", "fast-reader", video, "--json", report)
    if codec == "av1":
        _expect_refusal(proc, video, (("fast reader cannot read", "av1"),))
        return
    _expect_ok(proc)
    (ref,) = json.loads(report.read_text())["references"]
    assert (ref["width"], ref["height"]) == size
    assert ref["summary"]["frames"] == FRAMES
    worst = ref["summary"]["min_y_psnr_db"]  # null: every frame identical (VP9: no loop filter to skip)
    assert worst is None or worst >= MIN_Y_PSNR_DB


# ---------------------------------------------------------------------------------------------
# export: the stored clean run, plain frames (pixel check) and an annotated mp4 (layout check).


def _decoded_frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


@pytest.mark.parametrize(("size", "codec"), list(_cases(selectable_only=True)))
def test_export(clean_select, clip, tmp_path: Path, size: tuple[int, int], codec: str) -> None:
    proc, out, db = clean_select(codec, *size)
    _expect_ok(proc)
    run_id = json.loads(proc.stdout)["run_id"]
    video = clip(codec, *size)
    processed_hw = tuple(json.loads((out / "meta.json").read_text())["processed_hw"])
    base = ["export", run_id, "--session-db", db, "--size", "processed"]
    plain = tmp_path / "plain"
    _expect_ok(_run(*base, "--out", plain, "--format", "png", "--layers", "", "--no-stamp"))
    frames = sorted(plain.glob("*.png"))
    assert len(frames) == FRAMES
    fids = [int(p.stem.split("_frame")[1]) for p in frames]
    ref = _reference(video, fids, processed_hw, fast_reader=codec != "av1")
    got = [np.asarray(Image.open(p).convert("RGB")) for p in frames]
    assert min(_y_psnr_db(g, ref[fid]) for g, fid in zip(got, fids, strict=True)) >= MIN_Y_PSNR_DB
    # The default size is the source's own: those frames are a normal decode at that size.
    source = tmp_path / "source"
    args = ["--out", source, "--format", "png", "--layers", "", "--no-stamp", "--frames", "0:3"]
    _expect_ok(_run(*base[:-2], *args))
    native = _reference(video, [0, 1, 2], (size[1], size[0]), fast_reader=False)
    shown = sorted(source.glob("*.png"))
    assert len(shown) == 3 and all(Image.open(p).size == size for p in shown)
    for path in shown:
        fid = int(path.stem.split("_frame")[1])
        assert _y_psnr_db(np.asarray(Image.open(path).convert("RGB")), native[fid]) >= MIN_Y_PSNR_DB
    if codec != "h264":
        return  # the annotated layout depends on the size only
    annotated = tmp_path / "annotated.mp4"
    layers = "heatmap,kept,lost,grid,patch_grid,codec_grid,anchor,bad"
    _expect_ok(_run(*base, "--out", annotated, "--layers", layers, "--tables", "--yuview"))
    decoded = _decoded_frames(annotated)
    assert len(decoded) == FRAMES
    assert decoded[0].shape[0] >= processed_hw[0] and decoded[0].shape[1] >= processed_hw[1]


# ---------------------------------------------------------------------------------------------
# compare: the H.264 clip of each size re-encoded in four codecs at its own size.


def _compare(video: Path, db: Path, codecs: tuple[str, ...] = CODECS) -> subprocess.CompletedProcess[str]:
    args = ["--codecs", ",".join(codecs), "--max-frames", "10", "--max-side", "0"]
    return _run("compare", video, *args, "--session-db", db, "--json")


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=_size_id)
def test_compare(clip, tmp_path: Path, size: tuple[int, int]) -> None:
    video = clip("h264", *size)
    db = tmp_path / "c.duckdb"
    proc = _compare(video, db)
    expected = _select_refusal("clean", "h264", size)
    if svt_av1_stalls(*size):
        expected += (("SVT-AV1 stalls", _size_id(size)),)
    if expected:
        _expect_refusal(proc, video, expected)
        return
    _expect_ok(proc)
    summary = json.loads(proc.stdout)
    assert (summary["width"], summary["height"]) == size
    assert [v["codec"] for v in summary["variants"]] == list(CODECS)
    from backend.runs import open_run
    from backend.store import SessionStore

    with SessionStore(db, read_only=True) as store:
        for variant in summary["variants"]:
            result = open_run(store, variant["run_id"])
            ids = [int(i) for i in result.decoded.frame_indices]
            fast = result.decoded.pixel_source == "fast_reader" and variant["score"] == "bitcost"
            ref = _reference(Path(variant["video_path"]), ids, result.geometry.processed_hw, fast_reader=fast)
            worst = min(_y_psnr_db(result.decoded.pixels[k], ref[fid]) for k, fid in enumerate(ids))
            assert worst >= MIN_Y_PSNR_DB, (variant["label"], worst)


def test_compare_refuses_av1_where_svt_av1_would_stall(clip, tmp_path: Path) -> None:
    """128x24 is selectable, but SVT-AV1 never returns from such frames (and SIGTERM cannot end it)."""
    video = clip("h264", 128, 24)
    _expect_refusal(
        _compare(video, tmp_path / "c.duckdb", ("h264", "av1")), video, (("SVT-AV1 stalls", "128x24"),)
    )
    assert not list(tmp_path.glob("c.duckdb.compare/*/*.mp4"))  # refused before encoding


def test_luma_roundtrip_refuses_av1_where_svt_av1_would_stall(clip, tmp_path: Path) -> None:
    video = clip("h264", 128, 24)
    proc = _run("luma-bias", "roundtrip", video, "--out-dir", tmp_path / "rt", "--codec", "libsvtav1")
    _expect_refusal(proc, video, (("SVT-AV1 stalls", "128x24"),))
