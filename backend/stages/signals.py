"""Signals stage: motion, residual, QP, mvres and packet energy as per-frame cell grids."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

# OpenCV and PyAV (native.side_data) load in the functions that use them: the option classes
# import this module for SignalConfig, and a batch re-run that skips everything must not load them.
from backend.config import Registry, Variant, param, validate_fields
from backend.errors import DecodeError, UnsupportedVideoError
from backend.records import RunWarning, VideoInfo, _ShapeRepr
from backend.stages.score import percentile_linear, percentile_of_order_statistics
from native import motion as motion_kernel

QP_MAX: dict[str, int] = {"h264": 51, "vp9": 255}
"""Largest QP of each codec whose per-block QP FFmpeg exports (VP9: quantiser index)."""

EXACT = "exact"
PROXY_FLOW = "proxy: optical flow (Farneback on luma) to the previous frame"
PROXY_DIFF = "proxy: frame difference |Y_t - Y_t-1|"
PROXY_MVRES = "proxy: optical-flow magnitude + frame difference"
UNAVAILABLE = "unavailable"

# Decoder names (PyAV reports the decoder, e.g. libdav1d) → the codec they decode.
_CODEC_ALIASES = {
    "libdav1d": "av1",
    "libaom-av1": "av1",
    "av1_cuvid": "av1",
    "h265": "hevc",
    "libvpx-vp9": "vp9",
    "avc": "h264",
    "libopenh264": "h264",
}


class FrameSignal(NamedTuple):
    """One frame's signal grid, how it was made, and its pixels when the signal's decode made them."""

    grid: np.ndarray
    exactness: str
    note: str
    pict_type: str
    rgb: np.ndarray | None = None
    """(H, W, 3) uint8 RGB at the requested ``pixels_hw`` (None when not asked for or not decoded)."""


def canonical_codec(codec_name: str) -> str:
    """The codec behind a probed decoder name (``libdav1d`` → ``av1``); others lower-cased."""
    name = codec_name.lower()
    return _CODEC_ALIASES.get(name, name)


# --------------------------------------------------------------------------- grid helpers


def grid_shape(height: int, width: int, cell_size: int) -> tuple[int, int]:
    """(rows, cols) of the cell grid covering a height × width frame (last cells may be partial).

    Examples
    --------
    >>> grid_shape(240, 320, 16), grid_shape(360, 640, 16)
    ((15, 20), (23, 40))
    """
    return math.ceil(height / cell_size), math.ceil(width / cell_size)


def cell_means(pixel_map: np.ndarray, cell_size: int) -> np.ndarray:
    """Mean of a per-pixel map over each cell; partial edge cells average their own pixels.

    Parameters
    ----------
    pixel_map : (H, W) numeric.

    Returns
    -------
    (ceil(H / cell_size), ceil(W / cell_size)) float32.

    Examples
    --------
    >>> cell_means(np.arange(12, dtype=np.float32).reshape(3, 4), 2).tolist()
    [[2.5, 4.5], [8.5, 10.5]]
    """
    h, w = pixel_map.shape
    rows, cols = grid_shape(h, w, cell_size)
    padded = np.zeros((rows * cell_size, cols * cell_size), dtype=np.float64)
    padded[:h, :w] = pixel_map
    sums = padded.reshape(rows, cell_size, cols, cell_size).sum(axis=(1, 3))
    row_n = np.minimum(cell_size, h - cell_size * np.arange(rows))
    col_n = np.minimum(cell_size, w - cell_size * np.arange(cols))
    return (sums / np.outer(row_n, col_n)).astype(np.float32)


# --------------------------------------------------------------------------- per-pixel signals


def flow_magnitude(current: np.ndarray, other: np.ndarray, *, max_side: int = 320) -> np.ndarray:
    """Optical-flow magnitude from ``current`` to ``other`` (Farneback), full-resolution pixels.

    The flow is computed on luma downscaled so its longer side is at most ``max_side`` and
    anchored on ``current``'s pixels (like a codec vector: where each current pixel came from).

    Parameters
    ----------
    current, other : (H, W) luma, uint8 or float32.

    Returns
    -------
    (H, W) float32, displacement length in full-resolution pixels.
    """
    import cv2

    h, w = current.shape
    scale = min(1.0, max_side / max(h, w))
    size = (max(1, round(w * scale)), max(1, round(h * scale)))

    def small(y: np.ndarray) -> np.ndarray:
        y8 = np.clip(y, 0, 255).astype(np.uint8) if y.dtype != np.uint8 else y
        return y8 if scale == 1.0 else cv2.resize(y8, size, interpolation=cv2.INTER_AREA)

    flow = cv2.calcOpticalFlowFarneback(small(current), small(other), None, 0.5, 3, 15, 3, 5, 1.2, 0)
    mag = np.hypot(flow[..., 0], flow[..., 1]) / np.float32(scale)
    if scale != 1.0:
        mag = cv2.resize(mag, (w, h), interpolation=cv2.INTER_LINEAR)
    return mag.astype(np.float32, copy=False)


def _paint(
    shape: tuple[int, int],
    blocks: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    values: np.ndarray,
    fill: float,
) -> np.ndarray:
    """A grid of ``fill`` with each block (x0, y0, w, h in grid units) set to its value."""
    from native import side_data

    # float32 / int32 only: cv2.resize (in _expand) silently narrows int64 to int32.
    dtype = np.float32 if np.issubdtype(values.dtype, np.floating) else np.int32
    grid = np.full(shape, fill, dtype=dtype)
    side_data.paint_blocks(grid, *blocks, values.astype(dtype, copy=False))
    return grid


def _expand(grid: np.ndarray, unit: int, hw: tuple[int, int]) -> np.ndarray:
    """Unit grid → per-pixel map cropped to (H, W)."""
    import cv2

    if unit == 1:
        return grid[: hw[0], : hw[1]]
    # Nearest-neighbour at an integer factor is an exact repeat, and faster than np.repeat.
    size = (grid.shape[1] * unit, grid.shape[0] * unit)
    return cv2.resize(grid, size, interpolation=cv2.INTER_NEAREST)[: hw[0], : hw[1]]


def motion_compensate(
    current: np.ndarray,
    references: dict[int, np.ndarray],
    mvs: np.ndarray,
    *,
    max_distance: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, Counter[int]]]:
    """Rebuild the codec's inter prediction of a frame from its exported motion vectors.

    Each vector block of ``current`` is predicted by the reference block displaced by the
    vector (bilinear sub-pixel interpolation). FFmpeg exports the prediction direction
    (``source``: -1 past list, +1 future list) but not the reference index, so for every
    block the reference is inferred: among the frames at display distance 1..max_distance
    in that direction, the one whose displaced block matches best (least absolute
    difference). Blocks predicted from both directions average the two predictions;
    pixels no vector covers (intra blocks) are predicted by the co-located pixel of the
    nearest past frame (else the nearest future frame).

    Parameters
    ----------
    current : (H, W) float32 luma.
    references : display offset (-d past, +d future) → (H, W) float32 luma of that frame.
    mvs : (N, 8) int32 in ``side_data.MV_COLUMNS`` order.
    max_distance : largest |offset| tried.

    Returns
    -------
    prediction : (H, W) float32.
    magnitude : (H, W) float32, vector length divided by the inferred reference distance
        (pixels per frame), averaged over the directions covering the pixel; 0 where none.
    covered : (H, W) bool, pixels covered by at least one vector.
    distances : direction (-1, +1) → Counter of inferred distances over that direction's blocks.
    """
    import cv2

    hw = current.shape
    height, width = hw
    dst_x, dst_y, bw, bh, mx, my, mscale, source = (mvs[:, k] for k in range(8))
    mscale = np.maximum(mscale, 1).astype(np.float32)
    dx = mx.astype(np.float32) / mscale
    dy = my.astype(np.float32) / mscale
    x0 = dst_x - bw // 2  # FFmpeg's dst is the block centre
    y0 = dst_y - bh // 2
    # Paint on the coarsest grid every block aligns with (8 px for H.264 / MPEG-4 vectors).
    unit = int(np.gcd.reduce(np.concatenate([bw, bh, np.abs(x0), np.abs(y0), [0]]).astype(np.int64))) or 1
    ushape = (math.ceil(height / unit), math.ceil(width / unit))
    ux, uy, uw, uh = x0 // unit, y0 // unit, np.maximum(bw // unit, 1), np.maximum(bh // unit, 1)
    grid_x = np.arange(width, dtype=np.float32)[None, :]
    grid_y = np.arange(height, dtype=np.float32)[:, None]
    xa, xb = np.clip(x0, 0, width), np.clip(x0 + bw, 0, width)
    ya, yb = np.clip(y0, 0, height), np.clip(y0 + bh, 0, height)

    pred_sum = np.zeros(hw, np.float32)
    pred_n = np.zeros(hw, np.float32)
    mag_sum = np.zeros(hw, np.float32)
    distances: dict[int, Counter[int]] = {}
    for direction in (-1, 1):
        sel = np.flatnonzero(np.sign(source) == direction)
        cands = [d for d in range(1, max_distance + 1) if direction * d in references]
        if sel.size == 0 or not cands:
            continue
        blocks = (ux[sel], uy[sel], uw[sel], uh[sel])
        fx = _expand(_paint(ushape, blocks, dx[sel], 0), unit, hw)
        fy = _expand(_paint(ushape, blocks, dy[sel], 0), unit, hw)
        map_x = grid_x + fx
        map_y = grid_y + fy
        stack = np.empty((len(cands), height, width), np.float32)
        sad = np.empty((len(cands), sel.size), np.float64)
        err = np.empty(hw, np.float32)
        for k, d in enumerate(cands):
            cv2.remap(
                references[direction * d],
                map_x,
                map_y,
                cv2.INTER_LINEAR,
                dst=stack[k],
                borderMode=cv2.BORDER_REPLICATE,
            )
            cv2.absdiff(current, stack[k], dst=err)
            integral = cv2.integral(err, sdepth=cv2.CV_64F)
            sad[k] = (
                integral[yb[sel], xb[sel]]
                - integral[ya[sel], xb[sel]]
                - integral[yb[sel], xa[sel]]
                + integral[ya[sel], xa[sel]]
            )
        best = np.argmin(sad, axis=0)  # ties keep the nearest reference
        dist = np.asarray(cands)[best]
        distances[direction] = Counter(dist.tolist())
        choice = _expand(_paint(ushape, blocks, best, -1), unit, hw)
        pred = stack[0]
        for k in range(1, len(cands)):
            np.copyto(pred, stack[k], where=choice == k)
        has = choice >= 0
        np.add(pred_sum, pred, out=pred_sum, where=has)
        np.add(pred_n, 1, out=pred_n, where=has)
        per_frame = (np.hypot(dx[sel], dy[sel]) / dist).astype(np.float32)
        mag = _expand(_paint(ushape, blocks, per_frame, 0), unit, hw)
        mag_sum += mag
    covered = pred_n > 0
    fallback = references.get(-1, references.get(1, current))
    prediction = np.where(covered, pred_sum / np.maximum(pred_n, 1), fallback).astype(np.float32)
    magnitude = (mag_sum / np.maximum(pred_n, 1)).astype(np.float32)
    return prediction, magnitude, covered, distances


_RESIDUAL_SCALE_FLOOR = 1.0
"""fuse_mvres divides the residual by max(percentile, 1.0): residual values below 1.0 never set the
scale, so the kernel only counts their keys (``histogram_floor``) and bins the rest (on most video
80-95 % of the keys lie below it)."""


def fuse_mvres(
    magnitude: np.ndarray,
    residual: np.ndarray,
    *,
    mv_weight: float = 1.0,
    residual_weight: float = 1.0,
    percentile: float = 95.0,
) -> np.ndarray:
    """The OneVision-Encoder / cvp ``mv_res_score_map`` fusion of motion and residual.

    mv = clip(mag / max(p(mag), 1e-6), 0, 1); res = clip(|r| / max(p(|r|), 1), 0, 1);
    fused = clip((w_mv·mv + w_res·res) / (w_mv + w_res), 0, 1), with p the ``percentile``
    of the frame's pixels.

    Parameters
    ----------
    magnitude : (H, W) motion magnitude.
    residual : (H, W) residual (signed or absolute).

    Returns
    -------
    (H, W) float32 in [0, 1].

    Examples
    --------
    >>> fuse_mvres(np.array([[0.0, 2.0]]), np.array([[4.0, 0.0]]), percentile=100).tolist()
    [[0.5, 0.5]]
    """
    mag = np.asarray(magnitude, np.float32)
    if not np.isfinite(mag).all():  # cvp maps NaN to 0
        mag = np.nan_to_num(mag, nan=0.0, posinf=0.0, neginf=0.0)
    res = np.abs(np.asarray(residual, np.float32))
    total = mv_weight + residual_weight
    total = total if total > 0 else 1.0
    # In-place minimum/maximum instead of np.clip: np.clip costs ~4× more on 1080p float32 maps.
    mv_n = mag / np.float32(max(percentile_linear(mag, percentile), 1e-6))
    np.maximum(np.minimum(mv_n, 1, out=mv_n), 0, out=mv_n)
    res_n = res / np.float32(max(percentile_linear(res, percentile), _RESIDUAL_SCALE_FLOOR))
    np.minimum(res_n, 1, out=res_n)
    fused = mv_n * np.float32(mv_weight / total)
    fused += res_n * np.float32(residual_weight / total)
    return np.maximum(np.minimum(fused, 1, out=fused), 0, out=fused)


def packet_energy(info: VideoInfo, frame_indices: Iterable[int], *, radius: int = 3) -> np.ndarray:
    """Packet-size temporal energy of frames: how far a frame's log size rises above its neighbours'.

    e_t = log1p(bytes_t); energy_t = max(e_t - median{e_j : 0 < |j - t| <= radius, j not a
    keyframe}, 0). Keyframes get 0: an intra picture's size says nothing about change over
    time (cvp's packet-energy sampler skips them too). A frame with no non-key neighbour gets 0.

    Returns
    -------
    (n,) float32, one value per requested frame.

    Raises
    ------
    DecodeError : a frame index has no packet.
    """
    sizes = np.log1p(np.maximum(info.packet_size_bytes.astype(np.float64), 0))
    keys = info.packet_is_keyframe
    count = sizes.shape[0]
    out = []
    for t in frame_indices:
        t = int(t)
        if not 0 <= t < count:
            raise DecodeError(
                f"no packet for this frame (the probe found {count})",
                path=info.path,
                stage="signals",
                frame_index=t,
            )
        if keys[t]:
            out.append(0.0)
            continue
        lo, hi = max(0, t - radius), min(count, t + radius + 1)
        idx = [j for j in range(lo, hi) if j != t and not keys[j]]
        out.append(max(float(sizes[t] - np.median(sizes[idx])), 0.0) if idx else 0.0)
    return np.asarray(out, dtype=np.float32)


# --------------------------------------------------------------------------- the signals


def _summarise(labels: list[str]) -> str:
    distinct = sorted(set(labels), key=labels.index)
    if len(distinct) == 1:
        return distinct[0]
    exact = labels.count(EXACT)
    rest = "; ".join(lab for lab in distinct if lab != EXACT)
    return f"mixed: exact on {exact} of {len(labels)} frames; {rest} on the rest"


def _distance_note(distances: dict[int, Counter[int]]) -> str:
    parts = []
    for direction, name in ((-1, "past"), (1, "future")):
        if direction in distances:
            hist = ", ".join(f"d={d}×{n}" for d, n in sorted(distances[direction].items()))
            parts.append(f"{name} refs {hist}")
    return "; ".join(parts)


def _check_indices(info: VideoInfo, frame_indices: np.ndarray) -> np.ndarray:
    ids = np.asarray(frame_indices)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(f"frame indices must be a 1-D integer array, got {ids.shape} {ids.dtype}")
    if ids.size and int(ids.min()) < 0:
        raise ValueError(f"Invalid frame index ({int(ids.min())}). Supported values are at least 0.")
    return ids.astype(np.int32)


def _decode_error(info: VideoInfo, exc: Exception) -> DecodeError:
    return DecodeError(f"signal decode failed ({exc})", path=info.path, stage="signals")


def qp_grids(
    info: VideoInfo, uniq: list[int], *, config: SignalConfig, pixels_hw: tuple[int, int] | None = None
) -> dict[int, FrameSignal]:
    """(QP_max − QP) cell means of the frames ``uniq`` (sorted, distinct), from the exported block QP."""
    from native import side_data

    codec = canonical_codec(info.codec_name)
    if codec not in QP_MAX:
        raise UnsupportedVideoError(
            f"per-block QP is not available for codec {codec}: FFmpeg exports it "
            f"(export_side_data=venc_params) only for {', '.join(c.upper() for c in QP_MAX)}",
            path=info.path,
            stage="signals",
        )
    qmax = QP_MAX[codec]
    out: dict[int, FrameSignal] = {}
    wanted = set(uniq)
    try:
        for item in side_data.iter_frames(
            info.path,
            luma=False,
            block_qp=True,
            last_index=uniq[-1],
            thread_count=config.threads,
            rgb_size=None if pixels_hw is None else (pixels_hw[1], pixels_hw[0]),
            rgb_frames=wanted if pixels_hw is not None else None,
        ):
            t = item["frame_index"]
            if t not in wanted:
                continue
            hw = (item["height"], item["width"])
            qp = item["qp"]
            pict, rgb = item["pict_type"], item.get("rgb")
            if qp is None:
                grid = np.zeros(grid_shape(*hw, config.cell_size), np.float32)
                out[t] = FrameSignal(grid, UNAVAILABLE, f"{pict} frame: no QP side data", pict, rgb)
                continue
            unit = side_data.QP_UNIT.get(item["qp_type"], 16)
            score = np.maximum(qmax - _expand(qp, unit, hw).astype(np.float32), 0)
            note = f"{pict} frame: QP {int(qp.min())}–{int(qp.max())} (score = {qmax} − QP)"
            out[t] = FrameSignal(cell_means(score, config.cell_size), EXACT, note, pict, rgb)
    except side_data.SideDataError as exc:
        raise _decode_error(info, exc) from exc
    if all(v[1] == UNAVAILABLE for v in out.values()) and out:
        raise DecodeError(
            f"the {codec} decoder exported no per-block QP for the requested frames",
            path=info.path,
            stage="signals",
        )
    return out


PixelMap = Callable[[Any, Any, "SignalConfig"], np.ndarray]
"""(motion magnitude, residual, config) → the per-pixel map a motion signal averages per cell
(each argument None where the signal does not use it)."""


@functools.lru_cache(maxsize=16)
def _cell_counts(height: int, width: int, cell_size: int) -> np.ndarray:
    """(rows, cols) int64 pixels of each cell inside a height × width frame (``cell_means``' divisor).

    Cached (every frame of a video asks the same), so read-only.
    """
    rows, cols = grid_shape(height, width, cell_size)
    row_n = np.minimum(cell_size, height - cell_size * np.arange(rows))
    col_n = np.minimum(cell_size, width - cell_size * np.arange(cols))
    counts = np.outer(row_n, col_n)
    counts.flags.writeable = False
    return counts


def _unit_order_statistics(
    values: np.ndarray, unit: int, height: int, width: int
) -> Callable[[tuple[int, int]], tuple[np.generic, np.generic]]:
    """Order statistics of the per-pixel map that repeats each unit cell of ``values`` over its pixels."""
    flat = values.ravel()
    counts = _cell_counts(height, width, unit).ravel()

    def select(ranks: tuple[int, int]) -> tuple[np.generic, np.generic]:
        if counts.min() == counts.max():  # equal cells: pixel rank r is unit rank r // count
            c = int(counts[0])
            part = np.partition(flat, np.unique([r // c for r in ranks]))
            return part[ranks[0] // c], part[ranks[1] // c]
        order = np.argsort(flat, kind="stable")
        ends = np.cumsum(counts[order])
        picks = np.searchsorted(ends, np.asarray(ranks), side="right")
        return flat[order[picks[0]]], flat[order[picks[1]]]

    return select


def _residual_order_statistics(
    motion: motion_kernel.MotionResidual,
) -> Callable[[tuple[int, int]], tuple[np.generic, np.generic]]:
    """Order statistics of the residual map whose keys (``|r| * RESIDUAL_SCALE``) the kernel wrote,
    for a percentile clamped below at ``_RESIDUAL_SCALE_FLOOR``.

    When both ranks lie below the kernel's histogram floor the percentile (which lies between them)
    is below it too, and any pair of values below it gives the same clamped scale: 0 stands for both.
    """

    def select(ranks: tuple[int, int]) -> tuple[np.generic, np.generic]:
        if motion.keys_below_floor > ranks[1]:
            assert motion.histogram_floor <= _RESIDUAL_SCALE_FLOOR * motion_kernel.RESIDUAL_SCALE
            return np.float32(0), np.float32(0)
        lo, hi = motion_kernel.residual_order_statistics(motion, ranks)
        scale = motion_kernel.RESIDUAL_SCALE
        return np.float32(lo / scale), np.float32(hi / scale)

    return select


def _compiled_cells(
    kind: str,
    cur: np.ndarray,
    refs: dict[int, np.ndarray],
    mvs: np.ndarray,
    config: SignalConfig,
    scratch: motion_kernel.Scratch | None = None,
) -> tuple[np.ndarray, float, dict[int, Counter[int]]] | None:
    """The cell means of a motion signal's map from the compiled kernel, or None where it cannot serve.

    Equal to ``cell_means(pixel_map(*motion_compensate(...)))`` of the numpy path, bit for bit
    (tests/native/test_motion_kernel.py): the same prediction in exact integers, the percentiles
    of :func:`fuse_mvres` from order statistics the kernel's outputs rank cheaply, and the cell
    sums in numpy's order.

    Returns
    -------
    (cell grid float32, covered share of pixels, inferred distances by direction) or None.
    """
    height, width = cur.shape
    # The same float32 operations as motion_compensate's (dx, dy), in one array.
    d = mvs[:, 4:6].astype(np.float32) / np.maximum(mvs[:, 6:7], 1).astype(np.float32)
    hyp = np.hypot(d[:, 0], d[:, 1])
    unit = motion_kernel.block_unit(mvs)
    motion = motion_kernel.motion_residual(
        cur,
        refs,
        mvs,
        hyp,
        unit=unit,
        max_distance=config.reference_search,
        residual=kind != "mv",
        histogram=kind == "mvres",  # only mvres ranks the residual (its percentile)
        histogram_floor=int(_RESIDUAL_SCALE_FLOOR * motion_kernel.RESIDUAL_SCALE),
        cell_size=config.cell_size if kind == "residual" else 0,  # summed as the kernel writes them
        keep_keys=kind != "residual",
        scratch=scratch,
    )
    if motion is None:
        return None
    scales: dict[str, Any] = {}
    if kind == "mvres":
        n = height * width
        p_mag = percentile_of_order_statistics(
            n, config.percentile, _unit_order_statistics(motion.magnitude_units, unit, height, width)
        )
        p_res = percentile_of_order_statistics(n, config.percentile, _residual_order_statistics(motion))
        total = config.mv_weight + config.residual_weight
        total = total if total > 0 else 1.0
        scales = {
            "mv_scale": np.float32(max(p_mag, 1e-6)),
            "residual_scale": np.float32(max(p_res, _RESIDUAL_SCALE_FLOOR)),
            "mv_weight": np.float32(config.mv_weight / total),
            "residual_weight": np.float32(config.residual_weight / total),
        }
    if motion.residual_cell_sums is not None:
        # Keys are |r| * 2048 below 2^20: numpy's float64 sums of the r are exact, the integer sum / 2048.
        sums = motion.residual_cell_sums / np.float64(motion_kernel.RESIDUAL_SCALE)
    else:
        sums = motion_kernel.cell_sums(
            kind, motion, height=height, width=width, cell_size=config.cell_size, **scales
        )
    grid = (sums / _cell_counts(height, width, config.cell_size)).astype(np.float32)
    distances: dict[int, Counter[int]] = {}
    assert motion.distance_counts is not None
    for direction, counts in zip((-1, 1), motion.distance_counts.tolist(), strict=True):
        if any(counts):  # the direction had vectors and references to try
            distances[direction] = Counter({d: n for d, n in enumerate(counts) if n})
    return grid, motion.covered_pixels / (height * width), distances


def _as_float(luma: np.ndarray) -> np.ndarray:
    return luma if luma.dtype == np.float32 else luma.astype(np.float32)


def _motion_frame(
    t: int,
    window: dict[int, dict[str, Any]],
    *,
    kind: str,
    proxy: str,
    vectors: bool,
    config: SignalConfig,
    scratch: motion_kernel.Scratch | None = None,
) -> FrameSignal:
    """Grid, exactness, note and picture type of frame t from the decoded window around it."""
    item = window[t]
    cur = item["luma"]
    pict = item["pict_type"]
    rgb = item.get("rgb")
    mvs = item.get("mvs")
    pixel_map = _PIXEL_MAPS[kind]
    if vectors and mvs is not None and len(mvs):
        refs = {k - t: window[k]["luma"] for k in window if k != t and abs(k - t) <= config.reference_search}
        compiled = _compiled_cells(kind, cur, refs, mvs, config, scratch) if cur.dtype == np.uint8 else None
        if compiled is not None:
            grid, covered_share, distances = compiled
        else:
            pred, mag, covered, distances = motion_compensate(
                _as_float(cur),
                {k: _as_float(v) for k, v in refs.items()},
                mvs,
                max_distance=config.reference_search,
            )
            grid = cell_means(pixel_map(mag, np.abs(_as_float(cur) - pred), config), config.cell_size)
            covered_share = float(covered.mean())
        note = f"{pict} frame: {len(mvs)} vectors, {covered_share:.0%} of pixels covered; " + (
            _distance_note(distances)
        )
        return FrameSignal(grid, EXACT, note, pict, rgb)
    other = t - 1 if t - 1 in window else (t + 1 if t + 1 in window else None)
    why = f"{pict} frame: no motion vectors" if vectors else f"{pict} frame"
    if other is None:
        zeros = np.zeros(grid_shape(*cur.shape, config.cell_size), np.float32)
        return FrameSignal(zeros, proxy, f"{why}; no neighbouring frame, grid is zero", pict, rgb)
    neighbour = window[other]["luma"]
    # Each map is made only where the signal looks at it (the flow is most of a proxy's cost).
    mag = flow_magnitude(cur, neighbour, max_side=config.flow_max_side) if kind != "residual" else None
    residual = np.abs(_as_float(cur) - _as_float(neighbour)) if kind != "mv" else None
    grid = cell_means(pixel_map(mag, residual, config), config.cell_size)
    return FrameSignal(grid, proxy, f"{why}; proxy against frame {other}", pict, rgb)


def _motion_grids(
    info: VideoInfo,
    uniq: list[int],
    config: SignalConfig,
    *,
    kind: str,
    proxy: str,
    pixels_hw: tuple[int, int] | None,
) -> dict[int, FrameSignal]:
    """Cell means of a motion signal for the frames ``uniq``, from one decode with motion vectors.

    With ``pixels_hw`` the same decode also returns each wanted frame's RGB pixels at that
    size (as ``gateway.decode_frames_rgb`` makes them), so a run decodes the video once.
    """
    from native import side_data

    vectors = side_data.exports_motion_vectors(canonical_codec(info.codec_name))
    # Vectors may point up to reference_search frames away; the proxies need one neighbour.
    reach = config.reference_search if vectors else 1
    # The compiled kernel takes the decoder's uint8 planes; the numpy path works in float32.
    as_float = not motion_kernel.available()
    pending = list(uniq)  # ascending
    window: dict[int, dict[str, Any]] = {}
    out: dict[int, FrameSignal] = {}
    frame = functools.partial(
        _motion_frame, kind=kind, proxy=proxy, vectors=vectors, config=config, scratch=motion_kernel.Scratch()
    )
    try:
        for item in side_data.iter_frames(
            info.path,
            luma=True,
            motion_vectors=vectors,
            last_index=uniq[-1] + reach,
            thread_count=config.threads,
            rgb_size=None if pixels_hw is None else (pixels_hw[1], pixels_hw[0]),
            rgb_frames=set(uniq) if pixels_hw is not None else None,
            luma_copy=as_float,  # the kernel reads the decoder's planes in place
        ):
            index = item["frame_index"]
            if pending and index < pending[0] - reach:
                continue  # far from every wanted frame: never kept
            if as_float:
                item["luma"] = item["luma"].astype(np.float32)
            window[index] = item
            while pending and pending[0] + reach <= index:
                t = pending.pop(0)
                out[t] = frame(t, window)
                # Memory stays at 2·reach + 1 frames: drop what the next wanted frame cannot use.
                floor = (pending[0] if pending else index + 1) - reach
                for k in [k for k in window if k < floor]:
                    del window[k]
    except side_data.SideDataError as exc:
        raise _decode_error(info, exc) from exc
    for t in pending:  # the stream ended within `reach` of these frames
        if t not in window:
            raise DecodeError(
                "frame not reached by the decoder", path=info.path, stage="signals", frame_index=t
            )
        out[t] = frame(t, window)
    return out


def _magnitude(magnitude: np.ndarray, residual: np.ndarray | None, config: SignalConfig) -> np.ndarray:
    return magnitude


def _residual(magnitude: np.ndarray | None, residual: np.ndarray, config: SignalConfig) -> np.ndarray:
    return residual


def _fused(magnitude: np.ndarray, residual: np.ndarray, config: SignalConfig) -> np.ndarray:
    return fuse_mvres(
        magnitude,
        residual,
        mv_weight=config.mv_weight,
        residual_weight=config.residual_weight,
        percentile=config.percentile,
    )


_PIXEL_MAPS: dict[str, PixelMap] = {"mv": _magnitude, "residual": _residual, "mvres": _fused}


def mv_grids(
    info: VideoInfo, uniq: list[int], *, config: SignalConfig, pixels_hw: tuple[int, int] | None = None
) -> dict[int, FrameSignal]:
    """Mean motion magnitude per cell (pixels per frame) of the frames ``uniq``."""
    return _motion_grids(info, uniq, config, kind="mv", proxy=PROXY_FLOW, pixels_hw=pixels_hw)


def residual_grids(
    info: VideoInfo, uniq: list[int], *, config: SignalConfig, pixels_hw: tuple[int, int] | None = None
) -> dict[int, FrameSignal]:
    """Mean |Y_t − prediction| per cell of the frames ``uniq``."""
    return _motion_grids(info, uniq, config, kind="residual", proxy=PROXY_DIFF, pixels_hw=pixels_hw)


def mvres_grids(
    info: VideoInfo, uniq: list[int], *, config: SignalConfig, pixels_hw: tuple[int, int] | None = None
) -> dict[int, FrameSignal]:
    """Cell means of :func:`fuse_mvres` of motion and residual, in [0, 1]."""
    return _motion_grids(info, uniq, config, kind="mvres", proxy=PROXY_MVRES, pixels_hw=pixels_hw)


def pkt_energy_grids(
    info: VideoInfo, uniq: list[int], *, config: SignalConfig, pixels_hw: tuple[int, int] | None = None
) -> dict[int, FrameSignal]:
    """:func:`packet_energy` of each frame ``uniq``, the same value in every cell (no decode: no pixels)."""
    values = packet_energy(info, uniq, radius=config.pkt_radius)
    shape = grid_shape(info.height, info.width, config.cell_size)
    out: dict[int, FrameSignal] = {}
    for t, v in zip(uniq, values.tolist(), strict=True):
        note = "keyframe: 0 by definition" if info.packet_is_keyframe[t] else f"energy {v:.3f}"
        out[t] = FrameSignal(np.full(shape, v, np.float32), EXACT, note, "?")
    return out


@dataclass(frozen=True)
class SignalKind(Variant):
    """A signal entry: its grid function, the normalisation its values need and its gap warning.

    ``function(info, uniq, *, config, pixels_hw=None)`` maps each of the sorted distinct frames
    ``uniq`` to its FrameSignal (with the frame's RGB pixels at ``pixels_hw`` when its decode
    can make them). ``gap_code`` and ``gap_note`` (formatted with the first gap's
    ``exactness``) report frames it could only approximate while others were exact.
    """

    normalisation: str = "frame_percentile"
    gap_code: str = "signal_proxy_frames"
    gap_note: str = "no motion vectors; {exactness}"


SIGNALS: Registry[SignalKind] = Registry(
    "signal",
    (
        SignalKind("mv", mv_grids, "motion magnitude"),
        SignalKind("residual", residual_grids, "motion-compensated residual"),
        SignalKind("qp", qp_grids, "low QP scores high", gap_code="qp_missing", gap_note="no QP side data"),
        # In [0, 1] by construction: used as it is.
        SignalKind("mvres", mvres_grids, "fused mv + residual (OneVision-Encoder)", normalisation="none"),
        # One value per frame: scaled by the run's largest.
        SignalKind("pkt_energy", pkt_energy_grids, "packet-size energy per frame", normalisation="video_max"),
    ),
)
SIGNAL_KINDS: tuple[str, ...] = SIGNALS.names


# --------------------------------------------------------------------------- the stage


@dataclass(frozen=True, kw_only=True)
class SignalConfig:
    """Which per-cell signal to compute and how (fusion weights, grid, search window)."""

    kind: str = param(
        "mvres",
        label="Signal",
        help="mv: motion magnitude; residual: motion-compensated residual; qp: low QP scores high; "
        "mvres: fused mv + residual (OneVision-Encoder); pkt_energy: packet-size energy per frame",
        choices=SIGNAL_KINDS,
    )
    mv_weight: float = param(
        1.0, label="Motion weight", help="mvres weight of the motion term", min=0, max=100
    )
    residual_weight: float = param(
        1.0, label="Residual weight", help="mvres weight of the residual term", min=0, max=100
    )
    percentile: float = param(
        95.0,
        label="mvres percentile",
        help="per-frame percentile that maps motion and residual to 1.0 before fusing",
        min=1,
        max=100,
    )
    cell_size: int = param(16, label="Cell size", help="output grid cell side in pixels", min=1, max=512)
    reference_search: int = param(
        4,
        label="Reference search",
        help="frames on each side tried as the reference of an exported vector "
        "(FFmpeg does not export the reference index)",
        min=1,
        max=16,
    )
    flow_max_side: int = param(
        320,
        label="Flow size",
        help="longer side of the luma the optical-flow proxy runs on",
        min=32,
        max=4096,
    )
    pkt_radius: int = param(
        3, label="Packet radius", help="pkt_energy: neighbours on each side in the baseline", min=1, max=64
    )
    threads: int = param(0, label="Decoder threads", help="0 lets FFmpeg choose", min=0, max=64)

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.kind == "mvres" and self.mv_weight + self.residual_weight <= 0:
            raise ValueError(
                f"Invalid mv weight + residual weight ({self.mv_weight + self.residual_weight!r}). "
                "Supported values are a sum above 0."
            )


@dataclass(frozen=True, repr=False)
class SignalGrids(_ShapeRepr):
    """One non-negative per-cell energy grid per requested frame (larger = more worth keeping)."""

    frame_indices: np.ndarray
    """(n,) int32, the requested frames in request order (repeats allowed)."""
    grids: tuple[np.ndarray, ...]
    """n grids, each (rows, cols) float32 ≥ 0 with rows = ceil(H / cell_size), cols = ceil(W / cell_size);
    raw energies, not normalised (mvres is in [0, 1] by construction)."""
    kind: str
    """One of ``SIGNAL_KINDS``."""
    exactness: str
    """``exact``, ``proxy: <what>``, or ``mixed: exact on k of n frames; proxy: <what> on the rest``."""
    cell_size: int
    frame_exactness: tuple[str, ...]
    """Per frame: ``exact``, ``proxy: <what>`` or ``unavailable``."""
    notes: tuple[str, ...]
    """Per frame, one line for people (picture type, vectors, inferred reference distances)."""
    pict_types: tuple[str, ...]
    """Per frame 'I', 'P', 'B', … or '?' when the signal needed no decode."""
    warnings: tuple[RunWarning, ...] = ()
    pixels: np.ndarray | None = None
    """(n, H, W, 3) uint8 RGB of the requested frames at ``pixels_hw`` when it was asked for and
    the signal's own decode made them (None otherwise: ``pkt_energy`` decodes nothing)."""

    def __post_init__(self) -> None:
        n = self.frame_indices.shape[0]
        _require(self.frame_indices.ndim == 1, f"{self.frame_indices.shape = } must be 1-D")
        _require(self.frame_indices.dtype == np.int32, f"{self.frame_indices.dtype = } != int32")
        lengths = (len(self.grids), len(self.frame_exactness), len(self.notes), len(self.pict_types))
        _require(all(k == n for k in lengths), f"per-frame lengths {lengths} differ from {n = }")
        if self.pixels is not None:
            _require(
                self.pixels.ndim == 4 and self.pixels.shape[0] == n and self.pixels.dtype == np.uint8,
                f"{self.pixels.shape = }, {self.pixels.dtype = }, {n = }",
            )
        _require(self.kind in SIGNAL_KINDS, f"{self.kind = } not in {SIGNAL_KINDS}")
        _require(self.cell_size >= 1, f"{self.cell_size = } must be >= 1")
        shapes = {g.shape for g in self.grids}
        _require(len(shapes) <= 1, f"grids differ in shape: {sorted(shapes)}")
        for g in self.grids:
            _require(g.ndim == 2 and g.dtype == np.float32, f"grid {g.shape}, {g.dtype} is not 2-D float32")
        # One check over all grids; NaN fails both comparisons.
        if self.grids and not all(bool((g >= 0).all()) and bool(np.isfinite(g).all()) for g in self.grids):
            raise ValueError("grids must be finite and non-negative")


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


def compute_signals(
    info: VideoInfo,
    frame_indices: np.ndarray,
    *,
    config: SignalConfig,
    pixels_hw: tuple[int, int] | None = None,
) -> SignalGrids:
    """Per-cell signal grids of the requested frames, from one decode in presentation order.

    Parameters
    ----------
    info : probe result (path, codec, size, packet sizes and keyframe flags).
    frame_indices : (n,) int, 0-based presentation order; any order, repeats allowed.
    config : the signal kind and its parameters.
    pixels_hw : (H, W): also return the frames' RGB pixels at that size from the same decode
        (area-filtered, as ``native.gateway.decode_frames_rgb`` scales them), so a caller that
        needs both decodes the video once.

    Returns
    -------
    SignalGrids with n grids of shape (ceil(H / cell_size), ceil(W / cell_size)) float32 ≥ 0
    (and ``pixels`` (n, H, W, 3) when ``pixels_hw`` was given and the signal decodes):

    * ``mv``: mean motion magnitude per cell in pixels per frame. Codecs that export vectors
      (H.264, MPEG-4): |vector| / inferred reference distance (exact). Others, and frames
      without vectors (I frames): Farneback optical flow to the previous frame (proxy).
    * ``residual``: mean |Y_t − prediction| per cell, the prediction rebuilt from the exported
      vectors and decoded reference frames (exact vectors); elsewhere |Y_t − Y_t−1| (proxy).
    * ``qp``: mean of (QP_max − QP) per cell, H.264 (51) and VP9 (255, quantiser index).
    * ``mvres``: ``fuse_mvres`` of the two above, per pixel, then the cell mean; in [0, 1].
    * ``pkt_energy``: ``packet_energy`` of the frame, the same value in every cell.

    Raises
    ------
    UnsupportedVideoError : ``qp`` on a codec without exported QP.
    DecodeError : decoding failed or a frame was not reached.
    ValueError : negative or non-integer frame indices.
    """
    ids = _check_indices(info, frame_indices)
    signal = SIGNALS.lookup(config.kind)
    uniq = sorted({int(i) for i in ids})
    per = signal.function(info, uniq, config=config, pixels_hw=pixels_hw) if uniq else {}
    missing = [t for t in uniq if t not in per]
    if missing:
        raise DecodeError(
            "frame not reached by the decoder", path=info.path, stage="signals", frame_index=missing[0]
        )
    rows = [per[int(t)] for t in ids]  # repeats share one grid object
    labels = [r[1] for r in rows]
    warnings = []
    # Only worth a warning when the codec is exact elsewhere: a proxy codec is proxy throughout.
    off = [t for t in uniq if per[t][1] != EXACT and any(v[1] == EXACT for v in per.values())]
    if off:
        listed = ", ".join(map(str, off[:8])) + (f" and {len(off) - 8} more" if len(off) > 8 else "")
        what = signal.gap_note.format(exactness=per[off[0]][1])
        warnings.append(RunWarning(signal.gap_code, f"frames {listed}: {what}"))
    pixels = None
    if pixels_hw is not None and rows and all(r.rgb is not None for r in rows):
        pixels = np.empty((len(rows), *pixels_hw, 3), np.uint8)
        for row, r in enumerate(rows):
            pixels[row] = r.rgb
    return SignalGrids(
        frame_indices=ids,
        grids=tuple(r[0] for r in rows),
        kind=config.kind,
        exactness=_summarise(labels) if labels else EXACT,
        cell_size=config.cell_size,
        frame_exactness=tuple(labels),
        notes=tuple(r[2] for r in rows),
        pict_types=tuple(r[3] for r in rows),
        warnings=tuple(warnings),
        pixels=pixels,
    )
