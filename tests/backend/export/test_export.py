"""Exports of a stored run of the sample: clips decoded back, sidecar, CSV, YUView, figures, bad input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import av
import numpy as np
import pandas as pd
import pytest
from helpers.cli import run_cli
from helpers.paths import REPO_ROOT
from PIL import Image

import backend.export as ex
import backend.render as render
import native
from backend.errors import OutputError
from backend.export import tables
from backend.export.config import DEFAULT_CHROMIUM
from backend.export.run import align_rows
from backend.pipeline import SelectionOptions
from backend.runs import content_sha256, reselect, select_and_store
from backend.store import SessionStore

pytestmark = pytest.mark.needs_cvp

SAMPLE = REPO_ROOT / "sample_videos" / "flower_timelapse_cc0.mp4"
CHROMIUM = Path(DEFAULT_CHROMIUM)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """(db path, run id, second run id with another budget, output root) of the sample."""
    root = tmp_path_factory.mktemp("export")
    db = root / "s.duckdb"
    with SessionStore(db) as store:
        run_id, _ = select_and_store(SAMPLE, store, options=SelectionOptions())
        other_id, _, _ = reselect(store, run_id, {"images_per_group": 2})
    out = root / "out"
    out.mkdir()
    return db, run_id, other_id, out


@pytest.fixture(scope="module")
def runs(stored):
    db, run_id, other_id, _ = stored
    with SessionStore(db, read_only=True) as store:
        return ex.load_export_run(store, run_id), ex.load_export_run(store, other_id)


def _decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def _outline_pixels(blocks: np.ndarray, f: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the 2-px outline ring of each block (numpy fancy index)."""
    ring = np.zeros((f, f), bool)
    ring[:2], ring[-2:], ring[:, :2], ring[:, -2:] = True, True, True, True
    ry, rx = np.nonzero(ring)
    ys = (blocks[:, 0, None] * f + ry[None]).ravel()
    xs = (blocks[:, 1, None] * f + rx[None]).ravel()
    return ys, xs


def _ring(image: np.ndarray, y0: int, x0: int, side: int, border: int, rgb: tuple[int, int, int]) -> None:
    """Paint, by hand, a ``border``-px square ring of side ``side`` with its top-left at (y0, x0)."""
    image[y0 : y0 + border, x0 : x0 + side] = rgb
    image[y0 + side - border : y0 + side, x0 : x0 + side] = rgb
    image[y0 : y0 + side, x0 : x0 + border] = rgb
    image[y0 : y0 + side, x0 + side - border : x0 + side] = rgb


def _tiny_run(pixels: np.ndarray, *, good: bool = True, reason: str = "") -> SimpleNamespace:
    """The few run records draw_frame reads without a heatmap, for synthetic frames."""
    n = pixels.shape[0]
    return SimpleNamespace(
        candidates=SimpleNamespace(frame_indices=np.arange(n)),
        decoded=SimpleNamespace(pixels=pixels),
        quality=SimpleNamespace(good=np.full(n, good), reasons=[reason] * n),
    )


def _tiny_plan(options: render.LayerOptions, **fields) -> render.OverlayPlan:
    plan = {"grid_lines": (), "kept": {}, "anchors": frozenset(), "block_px": 8}
    plan.update(fields)
    return render.OverlayPlan(
        options=options, log_max=0.0, legend=None, legend_stops=(), legend_labels=("", ""), **plan
    )


def test_kept_outlines_and_block_grid_are_the_hand_drawn_pixels():
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (2, 24, 40, 3), dtype=np.uint8)  # 3 × 5 blocks of 8 px
    kept = {0: np.array([[1, 2], [2, 4]]), 1: np.array([[0, 0]])}
    before = pixels.copy()
    only_kept = render.LayerOptions(kept=True, anchor_badge=False, bad_frames=False)
    image = render.draw_frame(_tiny_run(pixels), 0, _tiny_plan(only_kept, kept=kept))
    expected = pixels[0].copy()
    _ring(expected, 8, 16, 8, 2, (255, 64, 32))  # block (1, 2)
    _ring(expected, 16, 32, 8, 2, (255, 64, 32))  # block (2, 4), at the frame's corner
    assert np.array_equal(image, expected)
    assert np.array_equal(pixels, before)  # the run's frames are not modified
    # The block grid goes under the outlines: white lines every 8 px, kept rings on top.
    grid = ((slice(None, None, 8), slice(None, None, 8), (255, 255, 255)),)
    image = render.draw_frame(_tiny_run(pixels), 1, _tiny_plan(only_kept, kept=kept, grid_lines=grid))
    expected = pixels[1].copy()
    expected[[0, 8, 16]] = 255
    expected[:, [0, 8, 16, 24, 32]] = 255
    _ring(expected, 0, 0, 8, 2, (255, 64, 32))
    assert np.array_equal(image, expected)
    assert render.KEPT_RGB == (255, 64, 32) and render.BLOCK_GRID_RGB == (255, 255, 255)


def test_anchor_badge_is_a_4px_border_and_a_label_box():
    pixels = np.full((2, 48, 96, 3), 90, np.uint8)
    badge = render.LayerOptions(kept=False, anchor_badge=True, bad_frames=False)
    plan = _tiny_plan(badge, anchors=frozenset({1}))
    assert np.array_equal(render.draw_frame(_tiny_run(pixels), 0, plan), pixels[0])  # not an anchor
    image = render.draw_frame(_tiny_run(pixels), 1, plan)
    anchor = np.array((32, 200, 255), np.uint8)
    frame = np.ones((48, 96), bool)
    frame[4:-4, 4:-4] = False
    assert (image[frame] == anchor).all()
    # The label box fills x 4 … 66, y 4 … 20 (inclusive) with black text on it; the rest is the frame.
    box = np.zeros((48, 96), bool)
    box[4:21, 4:67] = True
    assert (image[~frame & ~box] == 90).all()
    inside = image[box & ~frame]
    # Box pixels are the anchor colour, or blends of it towards the black text.
    assert (inside <= anchor).all() and (inside == anchor).all(axis=1).mean() > 0.6
    assert (inside.sum(axis=1) < 60).any()
    assert tuple(image[20, 66]) == tuple(anchor) and tuple(image[4, 5]) == tuple(anchor)


def test_bad_frames_are_tinted_red_and_labelled():
    pixels = np.zeros((1, 64, 160, 3), np.uint8)
    pixels[:] = (100, 100, 200)
    bad = render.LayerOptions(kept=False, anchor_badge=False, bad_frames=True)
    image = render.draw_frame(_tiny_run(pixels, good=False, reason="blur"), 0, _tiny_plan(bad))
    # 0.35 · (255, 0, 0) + 0.65 · (100, 100, 200), rounded.
    tinted = (154, 65, 130)
    assert tuple(image[0, 0]) == tinted and tuple(image[20, 150]) == tinted
    label = image[34:60, 4:150].reshape(-1, 3)
    assert (label == 255).all(axis=1).any()  # white text "BAD: blur" near the bottom-left
    assert (image[:30] == tinted).all() and (image[:, 150:] == tinted).all()
    off = dataclasses.replace(bad, bad_frames=False)
    assert np.array_equal(render.draw_frame(_tiny_run(pixels, good=False), 0, _tiny_plan(off)), pixels[0])


def test_kept_outlines_on_a_real_run_match_the_selection(runs):
    result = runs[0].result
    f = result.geometry.patch * result.geometry.block_size
    # Kept blocks straight from the selection records, not through backend.render.
    kept: dict[int, set[tuple[int, int]]] = {}
    for sel in result.selection.groups:
        rows = sel.candidate_rows()
        for t, br, bc in sel.kept.tolist():
            kept.setdefault(int(rows[t]), set()).add((br, bc))
    got = render.kept_blocks_by_row(result)
    assert {r: set(map(tuple, b.tolist())) for r, b in got.items()} == kept
    options = render.LayerOptions(kept=True, anchor_badge=False, bad_frames=False)
    plan = render.plan_overlays(result, options=options)
    for row in (0, 17, 64, *sorted(kept)[:3]):
        expected = result.decoded.pixels[row].copy()
        for br, bc in kept.get(row, ()):
            _ring(expected, br * f, bc * f, f, 2, render.KEPT_RGB)
        assert np.array_equal(render.draw_frame(result, row, plan), expected), row


def test_mp4_decodes_with_the_requested_frames_and_kept_colour(runs, stored):
    out = stored[3]
    run = runs[0]
    result = run.result
    # At the processed size (the run's own frames): outline positions are the selection's blocks.
    config = ex.ExportConfig(
        out_path=out / "kept.mp4",
        allowed_roots=(out,),
        frames=(20, 50),
        layers=("kept",),
        crf=12,
        size="processed",
    )
    done = ex.write_export([run], config=config)
    frames = _decode(out / "kept.mp4")
    assert len(frames) == 30 == len(done.frame_indices)
    assert done.frame_indices == tuple(range(20, 50))
    h, w = result.geometry.processed_hw
    assert frames[0].shape[1] == w and frames[0].shape[0] > h  # the stamp footer sits below
    f = result.geometry.patch * result.geometry.block_size
    kept = render.kept_blocks_by_row(result)
    rows = ex.export_rows(result, (20, 50))
    checked = 0
    for k, row in enumerate(rows.tolist()):
        if row not in kept or row in render.anchor_rows(result):
            continue
        ys, xs = _outline_pixels(kept[row], f)
        decoded = frames[k][ys, xs].astype(float)
        source = result.decoded.pixels[row][ys, xs].astype(float)
        err_kept = np.abs(decoded - np.asarray(render.KEPT_RGB)).mean()
        err_source = np.abs(decoded - source).mean()
        assert err_kept < 20, (row, err_kept)
        assert err_source > 2 * err_kept, (row, err_source, err_kept)
        # Blocks without overlay keep the frame's pixels (up to the encoder's loss).
        plain = np.ones(result.geometry.block_grid_hw, bool)
        plain[kept[row][:, 0], kept[row][:, 1]] = False
        by, bx = np.argwhere(plain)[0]
        inner = (slice(by * f + 4, by * f + f - 4), slice(bx * f + 4, bx * f + f - 4))
        assert np.abs(frames[k][inner].astype(float) - result.decoded.pixels[row][inner]).mean() < 6
        checked += 1
    assert checked >= 10


def test_sidecar_matches_the_run(runs, stored):
    db, run_id, _, out = stored
    run = runs[0]
    config = ex.ExportConfig(out_path=out / "side", allowed_roots=(out,), frames=(5, 25), tables=True)
    done = ex.write_export([run], config=config)
    assert done.sidecar == out / "side.mp4.json" and done.files[-1] == done.sidecar
    side = json.loads(done.sidecar.read_text())
    with SessionStore(db, read_only=True) as store:
        row = store.get_run(run_id)
    entry = side["runs"][0]
    assert entry["run_id"] == run_id and entry["config"] == row.config
    assert entry["versions_at_run"] == row.versions
    assert entry["video_sha256"] == content_sha256(SAMPLE)
    assert entry["processed_hw"] == list(run.result.geometry.processed_hw)
    assert side["frames"] == {"start": 5, "stop": 25, "count": 20, "frame_indices": list(range(5, 25))}
    versions = native.versions()
    assert side["versions"]["pyav"] == versions["pyav"] == av.__version__
    assert side["versions"]["ffmpeg_libavcodec"] == versions["pyav_libavcodec"]
    assert side["versions"]["codec_video_prep"] == versions["codec_video_prep"]
    assert side["versions"]["codec_lens"] == row.versions["codec_lens"]
    assert side["export_config"]["layers"] == list(ex.DEFAULT_LAYERS)
    names = {f["name"]: f for f in side["files"]}
    assert set(names) == {"side.mp4", "side.frames.csv", "side.blocks.csv"}
    for name, meta in names.items():
        assert meta["sha256"] == content_sha256(out / name)
    assert len(side["inputs_sha256"]) == 64


def test_tables_follow_their_schema_and_the_run(runs, stored):
    out = stored[3]
    run = runs[0]
    result = run.result
    ex.write_export(
        [run], config=ex.ExportConfig(out_path=out / "tab", allowed_roots=(out,), format="none", tables=True)
    )
    frames = pd.read_csv(out / "tab.frames.csv")
    blocks = pd.read_csv(out / "tab.blocks.csv", keep_default_na=False)
    assert tuple(frames.columns) == tables.FRAMES_CSV_COLUMNS
    assert tuple(blocks.columns) == tables.BLOCKS_CSV_COLUMNS
    assert (frames["schema_version"] == tables.FRAMES_CSV_SCHEMA_VERSION).all()
    n = result.candidates.frame_indices.size
    bh_n, bw_n = result.geometry.block_grid_hw
    assert len(frames) == n and len(blocks) == n * bh_n * bw_n
    kept = render.kept_blocks_by_row(result)
    assert frames["kept_blocks"].tolist() == [len(kept.get(r, [])) for r in range(n)]
    scores = blocks["score"].to_numpy().reshape(n, bh_n * bw_n)
    assert np.array_equal(scores.astype(np.float32), result.scores.block_scores)
    picked = blocks[blocks["kept_as"] == "block"]
    assert {
        (r, a, b) for r, a, b in picked[["candidate_row", "block_row", "block_col"]].itertuples(index=False)
    } == {(r, a, b) for r, blocks_ in kept.items() for a, b in blocks_.tolist()}
    anchors = render.anchor_rows(result)
    assert set(blocks.loc[blocks["kept_as"] == "anchor", "candidate_row"]) == anchors


def _parse_yuview(path: Path) -> tuple[list[list[str]], list[tuple[int, ...]]]:
    """YUView's reading rules: ';'-separated, spaces dropped, '%' lines are the header."""
    header, data = [], []
    for line in path.read_text().splitlines():
        items = line.strip().replace(" ", "").split(";")
        if not items[0]:
            continue
        if items[0].startswith("%"):
            header.append(items)
        else:
            data.append(tuple(int(v) for v in items))
    return header, data


def test_yuview_statistics_parse_back_to_the_same_values(runs, stored):
    out = stored[3]
    run = runs[0]
    result = run.result
    ex.write_export(
        [run],
        config=ex.ExportConfig(
            out_path=out / "yu", allowed_roots=(out,), format="none", frames=(0, 60), yuview=True
        ),
    )
    header, data = _parse_yuview(out / "yu.yuview.csv")
    spec = next(h for h in header if h[1] == "seq-specs")
    (oh, ow), (h, w) = result.geometry.orig_hw, result.geometry.processed_hw
    assert (int(spec[4]), int(spec[5])) == (ow, oh)
    types = {int(h[2]): (h[3], h[4]) for h in header if h[1] == "type"}
    assert types == {
        0: ("block_score", "range"),
        1: ("selection", "map"),
        2: (result.decoded.grid_key, "range"),
    }
    # Each POC's lines are contiguous (YUView's rule for files sorted by POC).
    pocs = [d[0] for d in data]
    runs_of_poc = [p for i, p in enumerate(pocs) if i == 0 or pocs[i - 1] != p]
    assert runs_of_poc == sorted(set(pocs)) == list(range(60))
    f = result.geometry.patch * result.geometry.block_size
    bh_n, bw_n = result.geometry.block_grid_hw
    xs = [round(c * f * ow / w) for c in range(bw_n + 1)]
    ys = [round(r * f * oh / h) for r in range(bh_n + 1)]
    kept = {r: set(map(tuple, b.tolist())) for r, b in render.kept_blocks_by_row(result).items()}
    anchors = render.anchor_rows(result)
    by_type: dict[int, dict[tuple[int, int, int], int]] = {0: {}, 1: {}, 2: {}}
    area: dict[tuple[int, int], int] = {}
    for poc, x, y, bw, bh, kind, value in data:
        by_type[kind][(poc, x, y)] = value
        if kind != 1:
            area[(poc, kind)] = area.get((poc, kind), 0) + bw * bh
    assert set(area.values()) == {ow * oh}  # score blocks and raw cells tile the whole frame
    for row in range(60):
        fid = int(result.candidates.frame_indices[row])
        got = np.array([[by_type[0][(fid, xs[c], ys[r])] for c in range(bw_n)] for r in range(bh_n)])
        want = np.rint(result.scores.block_scores[row].astype(np.float64) * 1000 / (f * f)).reshape(
            bh_n, bw_n
        )
        assert np.array_equal(got, want)
        sel = {(ys.index(y), xs.index(x)): v for (p, x, y), v in by_type[1].items() if p == fid}
        if row in anchors:
            assert set(sel.values()) == {3} and len(sel) == bh_n * bw_n
        else:
            assert {k for k, v in sel.items() if v == 1} == set(kept.get(row, []))
            assert {k for k, v in sel.items() if v == 2} == set(
                map(tuple, np.argwhere(render.lost_blocks(result, row)))
            )
        raw = sorted(v for (p, _, _), v in by_type[2].items() if p == fid)
        assert raw == sorted(np.rint(result.decoded.grids[row]).astype(int).ravel().tolist())


def test_side_by_side_shows_each_runs_kept_blocks(runs, stored):
    out = stored[3]
    a, b = runs
    config = ex.ExportConfig(
        out_path=out / "pair.mp4",
        allowed_roots=(out,),
        frames=(30, 40),
        layers=("kept",),
        crf=12,
        size="processed",
    )
    done = ex.write_export([a, b], config=config)
    frames = _decode(out / "pair.mp4")
    w = a.result.geometry.processed_hw[1]
    assert len(frames) == 10 and done.frame_size == frames[0].shape[:2]
    assert frames[0].shape[1] == 2 * w + 4
    f = a.result.geometry.patch * a.result.geometry.block_size
    rows_a = ex.export_rows(a.result, (30, 40))
    rows_b = align_rows(a.result, rows_a, b.result)
    differs = 0
    for k, (ra, rb) in enumerate(zip(rows_a.tolist(), rows_b, strict=True)):
        ka, kb = render.kept_blocks_by_row(a.result).get(ra), render.kept_blocks_by_row(b.result).get(rb)
        for blocks, x0 in ((ka, 0), (kb, w + 4)):
            if blocks is None or not blocks.size:
                continue
            ys, xs = _outline_pixels(blocks, f)
            assert np.abs(frames[k][ys, xs + x0].astype(float) - np.asarray(render.KEPT_RGB)).mean() < 25
        differs += (
            ka is not None and kb is not None and set(map(tuple, ka.tolist())) != set(map(tuple, kb.tolist()))
        )
    assert differs > 0  # the two budgets really kept different blocks


@pytest.mark.parametrize(
    ("fmt", "out_name", "count"), [("webm", "w.webm", 6), ("gif", "g.gif", 6), ("png", "p", 6)]
)
def test_other_formats_hold_every_frame(runs, stored, fmt, out_name, count):
    out = stored[3]
    config = ex.ExportConfig(out_path=out / out_name, allowed_roots=(out,), format=fmt, frames=(60, 66))
    done = ex.write_export([runs[0]], config=config)
    if fmt == "webm":
        assert len(_decode(out / out_name)) == count
    elif fmt == "gif":
        with Image.open(out / out_name) as gif:
            assert gif.n_frames == count
    else:
        pngs = sorted((out / out_name).glob("*.png"))
        assert len(pngs) == count and pngs[0].name == "00000_frame000060.png"
        assert np.asarray(Image.open(pngs[0])).shape[:2] == done.frame_size


def test_one_png_file_for_one_frame_and_a_folder_otherwise(runs, stored):
    out = stored[3]
    done = ex.write_export(
        [runs[0]],
        config=ex.ExportConfig(out_path=out / "one.png", allowed_roots=(out,), format="png", frames=(7, 8)),
    )
    assert done.files[0] == out / "one.png" and Image.open(out / "one.png").size[::-1] == done.frame_size
    with pytest.raises(ValueError, match=r"Invalid out path .* for 3 png frames"):
        ex.write_export(
            [runs[0]],
            config=ex.ExportConfig(
                out_path=out / "two.png", allowed_roots=(out,), format="png", frames=(7, 10)
            ),
        )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"layers": ("heatmap", "sparkles")},
            r"Invalid layer \('sparkles'\)\. Supported values are heatmap, staleness, kept, lost",
        ),
        (
            {"format": "avi"},
            r"Invalid format \('avi'\)\. Supported values are 'mp4', 'webm', 'gif', 'png', 'none'",
        ),
        (
            {"plot_formats": ("jpg",)},
            r"Invalid plot format \('jpg'\)\. Supported values are png, svg, pdf, html",
        ),
        ({"colormap": "rainbow"}, r"Invalid colormap \('rainbow'\)\. Supported values are 'turbo'"),
        ({"frames": (10, 5)}, r"Invalid frames"),
        ({"yuview_coordinates": "screen"}, r"Supported values are 'source', 'processed'"),
    ],
)
def test_unknown_names_list_the_choices(tmp_path, changes, message):
    with pytest.raises(ValueError, match=message):
        ex.ExportConfig(out_path=tmp_path / "x.mp4", allowed_roots=(tmp_path,), **changes)


def test_frame_ranges_parse_and_empty_ranges_are_refused(runs, tmp_path):
    assert ex.parse_frame_range("3:9") == (3, 9) and ex.parse_frame_range("4:") == (4, None)
    assert ex.parse_frame_range(":9") == (0, 9) and ex.parse_frame_range("") is None
    for bad in ("9:3", "a:b", "5", "-1:4", "1:2:3"):
        with pytest.raises(ValueError, match=r"Invalid frames .* Supported values are A:B"):
            ex.parse_frame_range(bad)
    config = ex.ExportConfig(out_path=tmp_path / "x.mp4", allowed_roots=(tmp_path,), frames=(400, 500))
    with pytest.raises(ValueError, match=r"Supported values cover the run's candidate frame_index 0 to 149"):
        ex.write_export([runs[0]], config=config)


def test_paths_outside_the_allowed_folder_are_refused(runs, tmp_path):
    inside = tmp_path / "inside"
    inside.mkdir()
    for bad in (tmp_path / "outside.mp4", inside / ".." / "escape.mp4", Path("/etc/codec-lens.mp4")):
        config = ex.ExportConfig(out_path=bad, allowed_roots=(inside,), frames=(0, 2))
        with pytest.raises(OutputError, match="is outside the allowed folders"):
            ex.write_export([runs[0]], config=config)
    link = inside / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(OutputError, match="is outside the allowed folders"):
        ex.write_export([runs[0]], config=ex.ExportConfig(out_path=link / "x.mp4", allowed_roots=(inside,)))
    assert not list(tmp_path.glob("*.mp4*"))


@pytest.mark.slow  # the export CLI end to end
def test_cli_exports_and_reports_bad_input_in_one_line(stored, tmp_path):
    db, run_id, other_id, _ = stored
    base = ["export", run_id, "--session-db", db, "--size", "processed"]
    done = run_cli(
        *base, "--out", tmp_path / "c.mp4", "--frames", "0:12", "--compare", other_id, "--tables", "--json"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["frames"] == 12 and summary["sidecar"] == str(tmp_path / "c.mp4.json")
    assert len(_decode(tmp_path / "c.mp4")) == 12
    cases = [
        (
            ["--out", tmp_path / "d.mp4", "--layers", "kept,glitter"],
            "Invalid layer ('glitter'). Supported values are",
        ),
        (["--out", tmp_path / "d.mkv", "--format", "mkv"], "Invalid format ('mkv'). Supported values are"),
        (["--out", tmp_path / "d.mp4", "--scale", "2", "--width", "640"], "a scale or a width, not both"),
        (["--out", tmp_path / "d.mp4", "--scale", "big"], "Invalid scale ('big')"),
        (["--out", tmp_path / "no" / "such" / "d.mp4", "--size", "huge"], "Invalid size ('huge')"),
        (
            ["--out", tmp_path / "d.mp4", "--plots", "histogram"],
            "Invalid plot ('histogram'). Supported values are",
        ),
    ]
    for extra, message in cases:
        bad = run_cli(*base, *extra)
        assert bad.returncode == 2 and message in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
    # The CLI writes wherever --out says: an absolute path outside the current directory (the
    # repo) works without --allow-dir, which is accepted and ignored.
    far = tmp_path / "elsewhere" / "e.mp4"
    done = run_cli("export", run_id, "--session-db", db, "--out", far, "--frames", "0:4", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["frame_size"][1] == 960  # the sample's own width
    assert far.is_file() and Path(f"{far}.json").is_file()
    # Every figure follows --frames: readiness figures only for the groups the range touches.
    with SessionStore(db, read_only=True) as store:
        result = ex.load_export_run(store, run_id).result
    fids = result.candidates.frame_indices
    last = result.groups.specs[-1]
    frames = (int(fids[last.start]), int(fids[last.end - 1]) + 1)
    wanted = ex.export_groups(result, frames)
    assert 1 <= len(wanted) < len(result.groups.specs)
    figs = tmp_path / "figs" / "g"
    args = ["--out", figs, "--format", "none", "--plots", "timeline,readiness", "--plot-format", "html"]
    done = run_cli(*base, *args, "--frames", f"{frames[0]}:{frames[1]}")
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in figs.parent.glob("g.*.html"))
    assert names == sorted(["g.timeline.html", *(f"g.readiness_g{g}.html" for g in wanted)])
    old = run_cli(*base, "--out", tmp_path / "f.mp4", "--frames", "0:2", "--allow-dir", tmp_path)
    assert old.returncode == 0, old.stderr
    refused = run_cli(*base, "--out", "/proc/codec-lens/x.mp4", "--frames", "0:2")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr


@pytest.mark.browser
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="static figure export needs /usr/bin/chromium (Debian chromium)"
)
def test_static_figures_export_with_the_system_chromium(runs, stored):
    from views import coverage_figure
    from views.export_figures import prepare_export_figures
    from views.figure_style import PAPER_HEIGHT_PX, PAPER_WIDTH_PX

    out = stored[3]
    figures = prepare_export_figures([("a", runs[0].result)], ["timeline", "coverage"], frames=(30, 90))
    config = ex.ExportConfig(
        out_path=out / "fig",
        allowed_roots=(out,),
        format="none",
        plot_formats=("png", "svg", "pdf", "html"),
        frames=(30, 90),
    )
    done = ex.write_export([runs[0]], config=config, figures=figures)
    png, svg, pdf, html = (out / f"fig.timeline.{fmt}" for fmt in ("png", "svg", "pdf", "html"))
    assert {png, svg, pdf, html} <= set(done.files)
    with Image.open(png) as image:
        # The paper figure's own size, rendered at 3× for print.
        scale = config.figure_png_scale
        assert image.size == (round(PAPER_WIDTH_PX * scale), round(PAPER_HEIGHT_PX * scale))
        assert len(np.unique(np.asarray(image.convert("RGB")).reshape(-1, 3), axis=0)) > 20
    text = svg.read_text()
    # Vector: paths and text, no embedded bitmap.
    assert text.startswith("<svg") and "frame_index" in text and "<image" not in text
    assert 'width="700"' in text and "<path" in text
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-") and b"/Font" in data
    assert b"/Subtype /Image" not in data and b"/Subtype/Image" not in data
    page = html.read_text()
    # Self-contained: plotly.js is inlined, nothing is fetched from the network.
    assert "<script src=" not in page and "Plotly.newPlot" in page and len(page) > 1_000_000
    # The coverage figure: its own paper size at 3×, and vector too (the map is rectangles).
    png, svg, pdf = (out / f"fig.coverage.{fmt}" for fmt in ("png", "svg", "pdf"))
    assert {png, svg, pdf, out / "fig.coverage.html"} <= set(done.files)
    with Image.open(png) as image:
        size = (PAPER_WIDTH_PX * scale, coverage_figure.PAPER_HEIGHT_PX * scale)
        assert image.size == tuple(round(v) for v in size)
        assert len(np.unique(np.asarray(image.convert("RGB")).reshape(-1, 3), axis=0)) > 20
    text = svg.read_text()
    assert "never observed" in text and "patch column" in text and "<image" not in text
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-") and b"/Subtype /Image" not in data and b"/Subtype/Image" not in data


def test_figure_export_without_chromium_says_so(runs, tmp_path):
    from views.inspector.timeline import prepare_timeline

    config = ex.ExportConfig(
        out_path=tmp_path / "fig",
        allowed_roots=(tmp_path,),
        format="none",
        plot_formats=("png",),
        chromium_path=str(tmp_path / "no-chromium"),
    )
    with pytest.raises(OutputError, match="Chromium not found"):
        ex.write_export([runs[0]], config=config, figures={"timeline": prepare_timeline(runs[0].result)})


def test_config_is_frozen_and_records_its_names(tmp_path):
    config = ex.ExportConfig(out_path=tmp_path / "x", allowed_roots=[tmp_path], layers="heatmap,kept")
    assert config.layers == ("heatmap", "kept") and config.allowed_roots == (tmp_path,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.format = "gif"  # type: ignore[misc]
