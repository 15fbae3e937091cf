"""Signals stage: motion, residual, QP, mvres and packet energy as per-frame cell grids."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import native

# OpenCV and PyAV (through native) load in the functions that use them: the option classes
# import this module for SignalConfig, and a batch re-run that skips everything must not load them.
from backend.codecs import canonical_codec
from backend.config import Registry, Variant, param, validate_fields
from backend.errors import DecodeError, UnsupportedVideoError
from backend.records import RunWarning, VideoInfo, _ShapeRepr
from backend.stages.score import percentile_of_order_statistics
from backend.stages.signal_maps import (
    RESIDUAL_SCALE_FLOOR,
    cell_counts,
    cell_means,
    expand_units,
    flow_magnitude,
    fuse_mvres,
    grid_shape,
    motion_compensate,
    packet_energy,
    residual_order_statistics,
    unit_order_statistics,
)

QP_MAX: dict[str, int] = {"h264": 51, "vp9": 255}
"""Largest QP of each codec whose per-block QP FFmpeg exports (VP9: quantiser index)."""

EXACT = "exact"
PROXY_FLOW = "proxy: optical flow (Farneback on luma) to the previous frame"
PROXY_DIFF = "proxy: frame difference |Y_t - Y_t-1|"
PROXY_MVRES = "proxy: optical-flow magnitude + frame difference"
UNAVAILABLE = "unavailable"


class FrameSignal(NamedTuple):
    """One frame's signal grid, how it was made, and its pixels when the signal's decode made them."""

    grid: np.ndarray
    exactness: str
    note: str
    pict_type: str
    rgb: np.ndarray | None = None
    """(H, W, 3) uint8 RGB at the requested ``pixels_hw`` (None when not asked for or not decoded)."""


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
    import native

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
    rgb = None
    if pixels_hw is not None:
        rgb = native.RgbFrames(width=pixels_hw[1], height=pixels_hw[0], frames=wanted)
    try:
        for item in native.iter_side_data(
            info.path,
            luma=False,
            block_qp=True,
            last_index=uniq[-1],
            thread_count=config.threads,
            rgb=rgb,
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
            unit = native.QP_UNIT.get(item["qp_type"], 16)
            score = np.maximum(qmax - expand_units(qp, unit, hw).astype(np.float32), 0)
            note = f"{pict} frame: QP {int(qp.min())}–{int(qp.max())} (score = {qmax} − QP)"
            out[t] = FrameSignal(cell_means(score, config.cell_size), EXACT, note, pict, rgb)
    except native.SideDataError as exc:
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


def _compiled_cells(
    kind: str,
    cur: np.ndarray,
    refs: dict[int, np.ndarray],
    mvs: np.ndarray,
    config: SignalConfig,
    scratch: native.MotionScratch | None = None,
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
    unit = native.block_unit(mvs)
    motion = native.motion_residual(
        cur,
        refs,
        mvs,
        hyp,
        unit=unit,
        max_distance=config.reference_search,
        outputs=native.ResidualOutputs(
            residual=kind != "mv",
            histogram=kind == "mvres",  # only mvres ranks the residual (its percentile)
            histogram_floor=int(RESIDUAL_SCALE_FLOOR * native.RESIDUAL_SCALE),
            cell_size=config.cell_size if kind == "residual" else 0,  # summed as the kernel writes them
            keep_keys=kind != "residual",
        ),
        scratch=scratch,
    )
    if motion is None:
        return None
    scales: dict[str, Any] = {}
    if kind == "mvres":
        n = height * width
        p_mag = percentile_of_order_statistics(
            n, config.percentile, unit_order_statistics(motion.magnitude_units, unit, height, width)
        )
        p_res = percentile_of_order_statistics(n, config.percentile, residual_order_statistics(motion))
        total = config.mv_weight + config.residual_weight
        total = total if total > 0 else 1.0
        scales = {
            "mv_scale": np.float32(max(p_mag, 1e-6)),
            "residual_scale": np.float32(max(p_res, RESIDUAL_SCALE_FLOOR)),
            "mv_weight": np.float32(config.mv_weight / total),
            "residual_weight": np.float32(config.residual_weight / total),
        }
    if motion.residual_cell_sums is not None:
        # Keys are |r| * 2048 below 2^20: numpy's float64 sums of the r are exact, the integer sum / 2048.
        sums = motion.residual_cell_sums / np.float64(native.RESIDUAL_SCALE)
    else:
        sums = native.cell_sums(
            kind,
            motion,
            height=height,
            width=width,
            cell_size=config.cell_size,
            fusion=native.MvresFusion(**scales),
        )
    grid = (sums / cell_counts(height, width, config.cell_size)).astype(np.float32)
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
    scratch: native.MotionScratch | None = None,
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
    size (as ``native.decode_frames_rgb`` makes them), so a run decodes the video once.
    """
    import native

    vectors = native.exports_motion_vectors(canonical_codec(info.codec_name))
    # Vectors may point up to reference_search frames away; the proxies need one neighbour.
    reach = config.reference_search if vectors else 1
    # The compiled kernel takes the decoder's uint8 planes; the numpy path works in float32.
    as_float = not native.motion_kernel_available()
    pending = list(uniq)  # ascending
    window: dict[int, dict[str, Any]] = {}
    out: dict[int, FrameSignal] = {}
    frame = functools.partial(
        _motion_frame, kind=kind, proxy=proxy, vectors=vectors, config=config, scratch=native.MotionScratch()
    )
    rgb = None
    if pixels_hw is not None:
        rgb = native.RgbFrames(width=pixels_hw[1], height=pixels_hw[0], frames=set(uniq))
    try:
        for item in native.iter_side_data(
            info.path,
            luma=True,
            motion_vectors=vectors,
            last_index=uniq[-1] + reach,
            thread_count=config.threads,
            rgb=rgb,
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
    except native.SideDataError as exc:
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
        (area-filtered, as ``native.decode_frames_rgb`` scales them), so a caller that
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
