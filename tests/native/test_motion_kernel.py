"""The compiled motion kernel gives the numpy path's motion, residual and mvres grids bit for bit.

The numpy/OpenCV implementation (``signal_maps.motion_compensate``, ``cell_means``, ``fuse_mvres``)
is what every motion signal computed before the kernel existed and what serves where it is not
built; each test below compares the two on the same inputs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import native
from backend.stages import signal_maps
from backend.stages import signals as sig
from backend.stages.probe import ProbeConfig, probe
from native import motion as motion_kernel
from native import side_data
from native.compiled import COMPILED_KERNEL

DATA = Path(__file__).resolve().parents[1] / "data"
KINDS = ("mv", "residual", "mvres")
pytestmark = pytest.mark.skipif(not COMPILED_KERNEL, reason="native._kernels not built (no compiler)")


def numpy_path(
    kind: str, cur: np.ndarray, refs: dict[int, np.ndarray], mvs: np.ndarray, config: sig.SignalConfig
) -> tuple[np.ndarray, float, dict[int, Counter[int]]]:
    """The signal's cell grid, covered share and distances as the numpy path computes them."""
    cur32 = cur.astype(np.float32)
    pred, mag, covered, dist = signal_maps.motion_compensate(
        cur32, {k: v.astype(np.float32) for k, v in refs.items()}, mvs, max_distance=config.reference_search
    )
    grid = signal_maps.cell_means(sig._PIXEL_MAPS[kind](mag, np.abs(cur32 - pred), config), config.cell_size)
    return grid, float(covered.mean()), dist


def assert_same(kind: str, cur, refs, mvs, config, what: str) -> None:
    got = sig._compiled_cells(kind, cur, refs, mvs, config)
    assert got is not None, f"{what}: the kernel declined"
    grid, share, dist = got
    want_grid, want_share, want_dist = numpy_path(kind, cur, refs, mvs, config)
    assert grid.dtype == np.float32 and grid.shape == want_grid.shape, what
    assert np.array_equal(grid, want_grid), f"{what}: max |diff| {np.abs(grid - want_grid).max()}"
    assert share == want_share and dist == want_dist, what


@pytest.fixture(scope="module")
def windows() -> dict[str, dict[int, dict]]:
    """Every frame (luma + vectors) of two real H.264 clips: with B-frames, and without."""
    out = {}
    for name, last in (("real_h264_film_friday.mp4", 40), ("real_h264_static_parkinglot.mp4", 24)):
        out[name] = {
            item["frame_index"]: item
            for item in side_data.iter_side_data(DATA / name, luma=True, motion_vectors=True, last_index=last)
        }
    return out


@pytest.mark.slow
@pytest.mark.parametrize("clip", ["real_h264_film_friday.mp4", "real_h264_static_parkinglot.mp4"])
def test_kernel_equals_numpy_on_every_frame_of_real_clips(windows, clip) -> None:
    """Also records how each frame's mvres residual scale came about: on the parking clip some
    frames' 95th percentile lies below 1.0 (the clamped scale, never ranked) and others above it
    (ranked from the histogram), so both paths are compared with numpy's fuse_mvres."""
    frames = windows[clip]
    configs = {k: sig.SignalConfig(kind=k) for k in KINDS}
    checked = 0
    scales = set()
    for t, item in frames.items():
        if not len(item["mvs"]) or t + 4 > max(frames):
            continue
        refs = {k - t: frames[k]["luma"] for k in frames if k != t and abs(k - t) <= 4}
        for kind in KINDS:
            assert_same(kind, item["luma"], refs, item["mvs"], configs[kind], f"{clip} frame {t} {kind}")
        mvs = item["mvs"]
        unit = motion_kernel.block_unit(mvs)
        hyp = np.ones(len(mvs), np.float32)  # the keys do not depend on it
        keys = motion_kernel.motion_residual(
            item["luma"], refs, mvs, hyp, unit=unit, max_distance=4
        ).residual_keys
        p95 = np.percentile(keys, 95) / motion_kernel.RESIDUAL_SCALE
        scales.add("clamped" if p95 < 1.0 else "ranked")
        checked += 1
    assert checked >= 20
    assert scales == ({"clamped", "ranked"} if "parkinglot" in clip else {"ranked"})


def test_kernel_equals_numpy_with_other_settings(windows) -> None:
    """Cell sizes other than 16 (partial edge cells, runs numpy sums in other orders), other
    weights and percentiles, and a shorter reference search."""
    frames = windows["real_h264_film_friday.mp4"]
    configs = [
        sig.SignalConfig(kind="mvres", cell_size=7, mv_weight=3.0, residual_weight=0.25, percentile=60),
        sig.SignalConfig(kind="mvres", cell_size=32, percentile=100, reference_search=2),
        sig.SignalConfig(kind="residual", cell_size=200),
        sig.SignalConfig(kind="mv", cell_size=1, reference_search=1),
        sig.SignalConfig(kind="mvres", cell_size=8, residual_weight=0.0),
    ]
    for t in (3, 10):  # a B frame (both directions), a P frame
        for config in configs:
            reach = config.reference_search
            refs = {k - t: frames[k]["luma"] for k in frames if k != t and abs(k - t) <= reach}
            assert_same(config.kind, frames[t]["luma"], refs, frames[t]["mvs"], config, f"frame {t} {config}")


def synthetic(rng: np.random.Generator, *, scale: int, h: int = 40, w: int = 56, block: int = 8) -> tuple:
    """A frame, four references and block × block vectors on its block grid, some pointing past
    the borders (16-pixel blocks: the last column and row of blocks stick out of the frame)."""
    cur = rng.integers(0, 256, (h, w), dtype=np.uint8)
    refs = {d: rng.integers(0, 256, (h, w), dtype=np.uint8) for d in (-2, -1, 1, 2)}
    rows = []
    half = block // 2
    for by in range(0, h, block):
        for bx in range(0, w, block):
            source = int(rng.choice([-1, 1]))
            mx, my = (int(v) for v in rng.integers(-20 * scale, 20 * scale, 2))
            rows.append([bx + half, by + half, block, block, mx, my, scale, source])
            if rng.random() < 0.3:  # bi-predicted: the other direction on the same block
                rows.append([bx + half, by + half, block, block, -mx, my // 2, scale, -source])
    return cur, refs, np.asarray(rows, np.int32)


@pytest.mark.parametrize("block", [8, 16])
@pytest.mark.parametrize("scale", [1, 2, 4, 32])
def test_kernel_equals_numpy_on_synthetic_vectors(scale, block) -> None:
    """Whole-pixel, half-, quarter- and 1/32-pel vectors, many reaching past the frame (clamped taps),
    on 8- and 16-pixel blocks (the kernel's 16-wide loops), with small shifts that stay inside."""
    rng = np.random.default_rng(scale)
    for trial in range(4):
        cur, refs, mvs = synthetic(rng, scale=scale, block=block)
        if trial % 2:  # most vectors of real video stay inside the frame
            mvs[:, 4:6] //= 8
        for kind in KINDS:
            config = sig.SignalConfig(kind=kind, cell_size=16, reference_search=2)
            assert_same(kind, cur, refs, mvs, config, f"scale {scale} block {block} trial {trial} {kind}")


def test_kernel_declines_what_it_cannot_reproduce() -> None:
    rng = np.random.default_rng(9)
    cur, refs, mvs = synthetic(rng, scale=4)
    hyp = np.ones(mvs.shape[0], np.float32)
    assert motion_kernel.motion_residual(cur, refs, mvs, hyp, unit=8, max_distance=2) is not None
    off_grid = mvs.copy()
    off_grid[:, 6] = 3  # thirds of a pixel: not on OpenCV's 1/32 grid
    off_grid[:, 4] = 1
    assert motion_kernel.motion_residual(cur, refs, off_grid, hyp, unit=8, max_distance=2) is None
    overlapping = np.concatenate([mvs, mvs[:1]])  # one block listed twice in its direction
    hyp2 = np.ones(overlapping.shape[0], np.float32)
    assert motion_kernel.motion_residual(cur, refs, overlapping, hyp2, unit=8, max_distance=2) is None
    # ... and the signal falls back to the numpy path for such frames, with the same grid.
    config = sig.SignalConfig(kind="mvres", reference_search=2)
    window = {0: {"luma": cur, "pict_type": "P", "mvs": off_grid}} | {
        d: {"luma": refs[d], "pict_type": "P"} for d in refs
    }
    got = sig._motion_frame(0, window, kind="mvres", proxy=sig.PROXY_MVRES, vectors=True, config=config)
    assert np.array_equal(got.grid, numpy_path("mvres", cur, refs, off_grid, config)[0])


@pytest.mark.parametrize("floor", ["none", "one level", "median"])
@pytest.mark.parametrize("scale", [4, 32])
def test_residual_order_statistics_are_the_sorted_keys(scale, floor) -> None:
    """Quarter-pel vectors give keys on multiples of 64 (ranked from the histogram alone);
    1/32-pel vectors do not (one more pass over the keys). Keys below a histogram floor are
    only counted: ranks above it come from the histogram, ranks below it (or straddling it)
    take one more pass."""
    rng = np.random.default_rng(2)
    cur, refs, mvs = synthetic(rng, scale=scale)
    hyp = np.ones(mvs.shape[0], np.float32)
    keys = motion_kernel.motion_residual(cur, refs, mvs, hyp, unit=8, max_distance=2).residual_keys.copy()
    floor_key = {
        "none": 0,
        "one level": motion_kernel.RESIDUAL_SCALE,
        "median": int(np.median(keys)) // 64 * 64,
    }
    outputs = motion_kernel.ResidualOutputs(histogram_floor=floor_key[floor])
    motion = motion_kernel.motion_residual(cur, refs, mvs, hyp, unit=8, max_distance=2, outputs=outputs)
    assert motion is not None and motion.residual_keys is not None
    assert np.array_equal(motion.residual_keys, keys)
    assert motion.keys_aligned == (scale == 4)
    assert motion.keys_aligned == bool(np.all(motion.residual_keys % 64 == 0))
    below = int(np.count_nonzero(keys < floor_key[floor]))
    assert motion.keys_below_floor == (below if floor != "none" else 0)
    assert floor == "none" or 0 < below < keys.size  # both sides of the floor are exercised
    binned = keys[keys >= floor_key[floor]] >> motion_kernel.HISTOGRAM_SHIFT
    assert np.array_equal(motion.histogram, np.bincount(binned, minlength=motion_kernel.HISTOGRAM_BINS))
    ordered = np.sort(keys, axis=None)
    last = ordered.size - 1
    straddle = (max(below - 1, 0), below)  # the last key below the floor and the first at or above it
    for ranks in ((0, 1), (100, 101), (last - 1, last), (7, 7), straddle, (below, below)):
        assert motion_kernel.residual_order_statistics(motion, ranks) == tuple(int(ordered[r]) for r in ranks)


def test_one_decode_gives_the_signal_and_the_pixels() -> None:
    """compute_signals(pixels_hw=...) returns the frames native.decode_frames_rgb decodes."""
    info = probe(DATA / "real_h264_film_friday.mp4", config=ProbeConfig())
    ids = np.asarray([3, 17, 17, 40], np.int32)
    alone = sig.compute_signals(info, ids, config=sig.SignalConfig(kind="mvres"))
    both = sig.compute_signals(info, ids, config=sig.SignalConfig(kind="mvres"), pixels_hw=(224, 308))
    assert alone.pixels is None and both.pixels is not None and both.pixels.shape == (4, 224, 308, 3)
    assert all(np.array_equal(a, b) for a, b in zip(alone.grids, both.grids, strict=True))
    frames = native.decode_frames_rgb(info.path, ids.tolist(), out_width=308, out_height=224)
    for row, fid in enumerate(ids.tolist()):
        assert np.array_equal(both.pixels[row], frames[fid]), fid
    energy = sig.compute_signals(info, ids, config=sig.SignalConfig(kind="pkt_energy"), pixels_hw=(224, 308))
    assert energy.pixels is None  # no decode, no pixels


@pytest.mark.slow
def test_compute_signals_equals_the_numpy_path_end_to_end() -> None:
    """Every motion signal as a run computes it (one decode, the reference window, the kernel, the
    cell means) on a small real clip equals the numpy path fed from a separate single-threaded
    decode, frame by frame: the signals' outputs are pinned end to end, not only the kernel's."""
    info = probe(DATA / "real_h264_film_friday.mp4", config=ProbeConfig())
    ids = np.arange(0, 24, dtype=np.int32)
    frames = {
        item["frame_index"]: item
        for item in side_data.iter_side_data(
            info.path, luma=True, motion_vectors=True, last_index=27, thread_count=1
        )
    }
    checked = 0
    for kind in KINDS:
        config = sig.SignalConfig(kind=kind, threads=1)
        got = sig.compute_signals(info, ids, config=config)
        for row, t in enumerate(ids.tolist()):
            item = frames[t]
            if not len(item["mvs"]):  # an I frame: the proxy, the same code in both paths
                continue
            refs = {k - t: frames[k]["luma"] for k in frames if k != t and abs(k - t) <= 4}
            want = numpy_path(kind, item["luma"], refs, item["mvs"], config)[0]
            assert np.array_equal(got.grids[row], want), f"{kind} frame {t}"
            checked += 1
    assert checked >= 3 * 20
