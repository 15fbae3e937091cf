"""Fitted linear luma correction: keys, least-squares fit on cell means, evaluation, JSON file, apply."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np

import native
from backend.config import param, validate_fields
from backend.errors import DecodeError, InputError, OutputError
from backend.luma.geometry import (
    GopGeometry,
    LatentWindowGeometry,
    LumaGeometry,
    SlotLayout,
    geometry_from_dict,
)
from backend.luma.measure import video_keyframes
from backend.luma.records import LUMA_WEIGHTS
from backend.luma.report import LumaReport, _num, fit_line
from backend.records import _check, _ShapeRepr
from backend.stages.probe import check_input_file
from native import FFmpegError

COEFFS_FORMAT = "codec-lens/luma-correction"
COEFFS_VERSION = 1
_W = np.asarray(LUMA_WEIGHTS, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class FitConfig:
    """Options of the least-squares fit."""

    min_cells: int = param(
        8,
        label="Min cells",
        help="a key with fewer cells than this gets a constant-only fit (b = 0)",
        min=2,
        max=1_000_000_000,
    )
    gop_slots: int = param(
        0,
        label="GOP slots",
        help="keys of the GOP model (0: the GOP length, or the longest GOP in training)",
        min=0,
        max=1_000_000,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def head_frame_count(geometry: LatentWindowGeometry) -> int:
    """Frames with one (a, b) each: those of latents 0..W−2 (18 with the H3 defaults).

    The last latent of the first window (slot W−1) already attends over a full window, as
    every steady-state latent does, so it shares the steady-state (slot, position) keys.
    """
    t = np.arange(geometry.window * geometry.chunk_frames + 1)
    return int(np.count_nonzero(geometry.assign(t).latent <= geometry.window - 2))


def key_labels(geometry: LumaGeometry, *, gop_slots: int = 0) -> tuple[str, ...]:
    """Names of the model's keys, in coefficient order."""
    if isinstance(geometry, LatentWindowGeometry):
        head = [f"frame {t}" for t in range(head_frame_count(geometry))]
        steady = [
            f"slot {s} position {p}"
            for s in geometry.steady_slots
            for p in range(geometry.temporal_compression)
        ]
        return tuple(head + steady)
    return tuple(f"slot {s}" for s in range(gop_slots))


@dataclass(frozen=True, repr=False)
class CorrectionModel(_ShapeRepr):
    """``out = test − (a + b·x [+ c·x² on frame 0])`` per channel, clipped to [0, 255]."""

    geometry: LumaGeometry
    keys: tuple[str, ...]
    """Key labels, e.g. ``frame 0`` … ``frame 17``, ``slot 2 position 0`` …"""
    linear: np.ndarray
    """(k, 3, 2) float64, (a, b) per key and channel R, G, B."""
    quadratic: np.ndarray | None
    """(3,) float64, c of frame 0 per channel (latent model only; None for GOP)."""
    cell: int
    """Cell side the model was fitted on."""
    train: tuple[str, ...] = ()
    """Names of the training clips."""

    def __post_init__(self) -> None:
        expected = key_labels(self.geometry, gop_slots=len(self.keys))
        _check(self.keys == expected, f"keys do not match the geometry ({len(self.keys)} vs {len(expected)})")
        _check(self.linear.shape == (len(self.keys), 3, 2), f"{self.linear.shape = }, {len(self.keys) = }")
        if isinstance(self.geometry, LatentWindowGeometry):
            _check(
                self.quadratic is not None and self.quadratic.shape == (3,),
                "the latent model needs 3 quadratic terms",
            )
        else:
            _check(self.quadratic is None, "the GOP model has no quadratic term")

    @property
    def coefficient_count(self) -> int:
        """Numbers in the model (231 with the H3 defaults)."""
        return int(self.linear.size + (0 if self.quadratic is None else self.quadratic.size))

    @property
    def head_frames(self) -> int:
        """Frames with their own key (latent model), 0 for GOP."""
        return head_frame_count(self.geometry) if isinstance(self.geometry, LatentWindowGeometry) else 0

    def key_index(self, layout: SlotLayout) -> np.ndarray:
        """(n,) int64 key of every frame of ``layout``."""
        g = self.geometry
        if isinstance(g, LatentWindowGeometry):
            head = self.head_frames
            t = layout.frame_index
            steady = head + (layout.slot - (g.window - g.stride)) * g.temporal_compression + layout.position
            return np.where(t < head, t, steady).astype(np.int64)
        return np.minimum(layout.slot, len(self.keys) - 1).astype(np.int64)

    def predict(self, x: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Predicted difference d of cells or pixels.

        Parameters
        ----------
        x : (n, ..., 3) test values (cell means or pixels) of n frames.
        keys : (n,) key of each frame.

        Returns
        -------
        (n, ..., 3) float64, a + b·x (+ c·x² for the frame-0 key).
        """
        extra = (1,) * (x.ndim - 2)
        a = self.linear[keys, :, 0].reshape(keys.shape[0], *extra, 3)
        b = self.linear[keys, :, 1].reshape(keys.shape[0], *extra, 3)
        out = a + b * x
        if self.quadratic is not None:
            first = (keys == 0).reshape(keys.shape[0], *extra, 1)
            out = out + first * self.quadratic * x.astype(np.float64) ** 2
        return out

    def corrected_levels(self, key: int) -> np.ndarray:
        """(256, 3) float64: the corrected value of every input level, clipped to [0, 255]."""
        x = np.arange(256, dtype=np.float64)[:, None]
        d = self.linear[key, :, 0] + self.linear[key, :, 1] * x
        if self.quadratic is not None and key == 0:
            d = d + self.quadratic * x**2
        return np.clip(x - d, 0.0, 255.0)

    def to_json(self) -> dict[str, Any]:
        """The versioned coefficients file content."""
        return {
            "format": COEFFS_FORMAT,
            "version": COEFFS_VERSION,
            "model": "out = test - (a + b*x [+ c*x^2 on frame 0]) per channel (R, G, B), clipped to [0, 255]",
            "geometry": self.geometry.to_dict(),
            "cell": self.cell,
            "coefficient_count": self.coefficient_count,
            "keys": list(self.keys),
            "linear": self.linear.tolist(),
            "quadratic": None if self.quadratic is None else self.quadratic.tolist(),
            "train": list(self.train),
        }


def save_model(model: CorrectionModel, path: str | Path) -> Path:
    """Write the coefficients as JSON (see :meth:`CorrectionModel.to_json`)."""
    p = Path(path)
    try:
        p.write_text(json.dumps(model.to_json(), indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write coefficients ({exc.strerror or exc})", path=p) from exc
    return p


def load_model(path: str | Path) -> CorrectionModel:
    """Read a coefficients file, refusing another format, version or shape.

    Raises
    ------
    InputError : missing file, not JSON, not a coefficients file, wrong version, or arrays
        whose shape does not match the stored geometry.
    """
    p = check_input_file(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a coefficients file (invalid JSON: {exc})", path=p) from exc
    return model_from_json(data, source=p)


def model_from_json(data: Any, *, source: str | Path) -> CorrectionModel:
    """Build a model from the content of a coefficients file (see :meth:`CorrectionModel.to_json`).

    Parameters
    ----------
    data : the decoded JSON.
    source : named in errors (the file, or the stored fit).

    Raises
    ------
    InputError : not a coefficients file, wrong version, or arrays whose shape does not match
        the stored geometry.
    """
    p = source
    if not isinstance(data, dict) or data.get("format") != COEFFS_FORMAT:
        raise InputError(f"not a luma-correction coefficients file (format is not {COEFFS_FORMAT!r})", path=p)
    version = data.get("version")
    if version != COEFFS_VERSION:
        raise InputError(
            f"unsupported coefficients version {version!r}; this Codec Lens reads version {COEFFS_VERSION}",
            path=p,
        )
    try:
        geometry = geometry_from_dict(dict(data["geometry"]))
        keys = tuple(str(k) for k in data["keys"])
        linear = np.asarray(data["linear"], dtype=np.float64)
        quadratic = None if data.get("quadratic") is None else np.asarray(data["quadratic"], dtype=np.float64)
        cell = int(data["cell"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"malformed coefficients file ({exc})", path=p) from exc
    gop_slots = linear.shape[0] if linear.ndim >= 1 else 0
    expected_keys = key_labels(geometry, gop_slots=gop_slots)
    expected = (len(expected_keys), 3, 2)
    described = ", ".join(f"{k}={v}" for k, v in geometry.to_dict().items())
    if linear.shape != expected or keys != expected_keys:
        raise InputError(
            f"coefficients have shape {linear.shape} with {len(keys)} keys but geometry ({described}) "
            f"needs shape {expected}",
            path=p,
        )
    needs_quadratic = isinstance(geometry, LatentWindowGeometry)
    if needs_quadratic and (quadratic is None or quadratic.shape != (3,)):
        got = None if quadratic is None else quadratic.shape
        raise InputError(f"quadratic terms have shape {got} but geometry ({described}) needs (3,)", path=p)
    if not needs_quadratic and quadratic is not None:
        raise InputError(f"geometry ({described}) has no quadratic terms but the file has some", path=p)
    count = linear.size + (0 if quadratic is None else quadratic.size)
    if data.get("coefficient_count") != count:
        raise InputError(
            f"coefficient_count {data.get('coefficient_count')!r} does not match the {count} numbers stored",
            path=p,
        )
    if not np.all(np.isfinite(linear)) or (quadratic is not None and not np.all(np.isfinite(quadratic))):
        raise InputError("coefficients contain NaN or infinity", path=p)
    return CorrectionModel(
        geometry=geometry,
        keys=keys,
        linear=linear,
        quadratic=quadratic,
        cell=cell,
        train=tuple(str(t) for t in data.get("train", ())),
    )


# --------------------------------------------------------------------------- fit


def _check_clips(clips: Sequence[LumaReport], geometry: LumaGeometry) -> int:
    if not clips:
        raise InputError("no clips to fit or evaluate on")
    cells = {c.frames.cell for c in clips}
    if len(cells) != 1:
        raise InputError(f"clips were measured with different cell sizes {sorted(cells)}")
    for c in clips:
        if c.layout.geometry != geometry.name:
            raise InputError(
                f"clip was analysed with geometry {c.layout.geometry!r}, not {geometry.name!r}",
                path=c.frames.test_name,
            )
        if c.frames.diff_cells.shape[1] * c.frames.diff_cells.shape[2] == 0:
            raise InputError(
                f"frames are smaller than one {c.frames.cell}×{c.frames.cell} cell", path=c.frames.test_name
            )
    return cells.pop()


def _gop_slots(clips: Sequence[LumaReport], geometry: LumaGeometry, config: FitConfig) -> int:
    if config.gop_slots:
        return config.gop_slots
    if isinstance(geometry, GopGeometry) and geometry.every:
        return geometry.every
    return int(max(int(c.layout.slot.max()) for c in clips) + 1)


def fit_correction(
    clips: Sequence[LumaReport], *, geometry: LumaGeometry, config: FitConfig | None = None
) -> tuple[CorrectionModel, CorrectionModel]:
    """Least-squares fit of the correction on cell means of training clips.

    Per key and channel: d ≈ a + b·x over every cell of every frame with that key
    (x = test cell mean, d = test − reference cell mean); frame 0 of the latent model
    adds c·x². Keys with fewer than ``min_cells`` cells, or with x constant, get b = 0;
    keys without cells stay 0 (no correction).

    Parameters
    ----------
    clips : reports of the training clips, all analysed with ``geometry`` and one cell size.
    geometry : the period geometry (its key layout decides the coefficient count).

    Returns
    -------
    (model, constant_model): the fitted model and the constant-only model (b = c = 0).
    """
    config = config or FitConfig()
    cell = _check_clips(clips, geometry)
    gop_slots = 0 if isinstance(geometry, LatentWindowGeometry) else _gop_slots(clips, geometry, config)
    keys = key_labels(geometry, gop_slots=gop_slots)
    latent = isinstance(geometry, LatentWindowGeometry)
    stub = CorrectionModel(
        geometry=geometry,
        keys=keys,
        linear=np.zeros((len(keys), 3, 2)),
        quadratic=np.zeros(3) if latent else None,
        cell=cell,
    )
    xs: list[list[np.ndarray]] = [[] for _ in keys]
    ds: list[list[np.ndarray]] = [[] for _ in keys]
    for clip in clips:
        key = stub.key_index(clip.layout)
        x = clip.frames.test_cells
        d = clip.frames.diff_cells
        for k in np.unique(key):
            sel = key == k
            xs[k].append(x[sel].reshape(-1, 3))
            ds[k].append(d[sel].reshape(-1, 3))
    linear = np.zeros((len(keys), 3, 2))
    const = np.zeros((len(keys), 3, 2))
    quadratic = np.zeros(3) if latent else None
    for k in range(len(keys)):
        if not xs[k]:
            continue
        x = np.concatenate(xs[k]).astype(np.float64)
        d = np.concatenate(ds[k]).astype(np.float64)
        const[k, :, 0] = d.mean(axis=0)
        for c in range(3):
            xc, dc = x[:, c], d[:, c]
            if latent and k == 0 and xc.size >= max(3, config.min_cells) and np.ptp(xc) > 0:
                design = np.stack([np.ones_like(xc), xc, xc**2], axis=1)
                coef = np.linalg.lstsq(design, dc, rcond=None)[0]
                linear[k, c] = coef[:2]
                assert quadratic is not None
                quadratic[c] = coef[2]
            elif xc.size >= config.min_cells:
                linear[k, c] = fit_line(xc, dc)
            else:
                linear[k, c] = (dc.mean(), 0.0)
    names = tuple(c.frames.test_name for c in clips)
    model = CorrectionModel(
        geometry=geometry, keys=keys, linear=linear, quadratic=quadratic, cell=cell, train=names
    )
    constant = CorrectionModel(
        geometry=geometry,
        keys=keys,
        linear=const,
        quadratic=np.zeros(3) if latent else None,
        cell=cell,
        train=names,
    )
    return model, constant


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True, repr=False)
class CorrectionEvaluation(_ShapeRepr):
    """Held-out residuals per slot group: before, after the fitted model, after constant-only."""

    group: tuple[str, ...]
    """``frame 0``, ``first window``, ``slot 2`` … (latent model) or ``slot 0`` … (GOP)."""
    frames: np.ndarray
    """(g,) int64."""
    cells: np.ndarray
    """(g,) int64."""
    rms_before: np.ndarray
    """(g,) float64, RMS over cells of the luma difference d (levels)."""
    rms_after: np.ndarray
    """(g,) float64, RMS of d − prediction of the fitted model."""
    rms_constant: np.ndarray
    """(g,) float64, RMS of d − prediction of the constant-only model."""
    bias_before: np.ndarray
    """(g,) float64, mean frame bias (mean over cells) before correction."""
    bias_after: np.ndarray
    """(g,) float64, the same after the fitted model."""
    bias_constant: np.ndarray
    """(g,) float64, the same after the constant-only model."""

    def __post_init__(self) -> None:
        g = (len(self.group),)
        for name in ("frames", "cells", "rms_before", "rms_after", "rms_constant"):
            _check(getattr(self, name).shape == g, f"{name}: {getattr(self, name).shape} != {g}")
        for name in ("bias_before", "bias_after", "bias_constant"):
            _check(getattr(self, name).shape == g, f"{name}: {getattr(self, name).shape} != {g}")

    @property
    def reduction(self) -> np.ndarray:
        """(g,) float64, 1 − rms_after / rms_before (0.8 = residual cut by 80 %)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 - self.rms_after / self.rms_before

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "group": self.group[i],
                "frames": int(self.frames[i]),
                "cells": int(self.cells[i]),
                "rms_before": _num(self.rms_before[i]),
                "rms_after": _num(self.rms_after[i]),
                "rms_constant": _num(self.rms_constant[i]),
                "reduction": _num(self.reduction[i]),
                "bias_before": _num(self.bias_before[i]),
                "bias_after": _num(self.bias_after[i]),
                "bias_constant": _num(self.bias_constant[i]),
            }
            for i in range(len(self.group))
        ]


def _groups(model: CorrectionModel, layout: SlotLayout) -> list[str]:
    if isinstance(model.geometry, LatentWindowGeometry):
        return [
            "frame 0" if t == 0 else ("first window" if not steady else f"slot {s}")
            for t, steady, s in zip(layout.frame_index, layout.is_steady, layout.slot, strict=True)
        ]
    return [f"slot {s}" for s in layout.slot]


def evaluate_correction(
    model: CorrectionModel, constant: CorrectionModel, clips: Sequence[LumaReport]
) -> CorrectionEvaluation:
    """Residuals of held-out clips per slot group, on cell means (the fit's own domain).

    Parameters
    ----------
    model, constant : from :func:`fit_correction`.
    clips : reports of held-out clips with the model's geometry and cell size.

    Returns
    -------
    CorrectionEvaluation with one row per group present in the clips.
    """
    _check_clips(clips, model.geometry)
    per_group: dict[str, dict[str, list[np.ndarray]]] = {}
    for clip in clips:
        key = model.key_index(clip.layout)
        x = clip.frames.test_cells.astype(np.float64)
        d = clip.frames.diff_cells.astype(np.float64)
        before = d @ _W  # (n, ch, cw) luma difference
        after = (d - model.predict(x, key)) @ _W
        const = (d - constant.predict(x, key)) @ _W
        for i, group in enumerate(_groups(model, clip.layout)):
            bucket = per_group.setdefault(group, {"before": [], "after": [], "constant": []})
            bucket["before"].append(before[i].reshape(-1))
            bucket["after"].append(after[i].reshape(-1))
            bucket["constant"].append(const[i].reshape(-1))
    order = sorted(per_group, key=_group_order)
    stats: dict[str, list[float]] = {k: [] for k in ("rb", "ra", "rc", "bb", "ba", "bc", "frames", "cells")}
    for group in order:
        bucket = per_group[group]
        for tag, name in (("b", "before"), ("a", "after"), ("c", "constant")):
            frames = bucket[name]
            values = np.concatenate(frames)
            stats["r" + tag].append(float(np.sqrt(np.mean(values**2))))
            stats["b" + tag].append(float(np.mean([f.mean() for f in frames])))
        stats["frames"].append(len(bucket["before"]))
        stats["cells"].append(sum(v.size for v in bucket["before"]))
    return CorrectionEvaluation(
        group=tuple(order),
        frames=np.asarray(stats["frames"], np.int64),
        cells=np.asarray(stats["cells"], np.int64),
        rms_before=np.asarray(stats["rb"]),
        rms_after=np.asarray(stats["ra"]),
        rms_constant=np.asarray(stats["rc"]),
        bias_before=np.asarray(stats["bb"]),
        bias_after=np.asarray(stats["ba"]),
        bias_constant=np.asarray(stats["bc"]),
    )


def _group_order(group: str) -> tuple[int, int]:
    if group == "frame 0":
        return (0, 0)
    if group == "first window":
        return (1, 0)
    return (2, int(group.split()[-1]))


@dataclass(frozen=True, repr=False)
class FitResult(_ShapeRepr):
    """A fitted model, its constant-only counterpart and their held-out evaluation."""

    model: CorrectionModel
    constant: CorrectionModel
    evaluation: CorrectionEvaluation | None
    """None when no held-out clips were given."""
    train: tuple[str, ...]
    test: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "codec-lens/luma-fit",
            "version": COEFFS_VERSION,
            "coefficient_count": self.model.coefficient_count,
            "train": list(self.train),
            "test": list(self.test),
            "evaluation": None if self.evaluation is None else self.evaluation.rows(),
        }


def fit_and_evaluate(
    train: Sequence[LumaReport],
    test: Sequence[LumaReport] = (),
    *,
    geometry: LumaGeometry,
    config: FitConfig | None = None,
) -> FitResult:
    """Fit on ``train`` clips and evaluate on held-out ``test`` clips (split by clip)."""
    train_names = {c.frames.test_name for c in train}
    overlap = sorted(train_names & {c.frames.test_name for c in test})
    if overlap:
        raise InputError(f"clips are in both the training and the test set: {', '.join(overlap)}")
    model, constant = fit_correction(train, geometry=geometry, config=config)
    evaluation = evaluate_correction(model, constant, test) if test else None
    return FitResult(
        model=model,
        constant=constant,
        evaluation=evaluation,
        train=tuple(c.frames.test_name for c in train),
        test=tuple(c.frames.test_name for c in test),
    )


# --------------------------------------------------------------------------- apply


class _Corrector:
    """Per-key lookup tables plus a fixed dither, so sub-level corrections survive rounding.

    Rounding ``x − 0.3`` to the nearest integer would give back ``x`` for every pixel; instead
    each pixel rounds up with probability equal to the fractional part (a fixed uniform
    threshold per pixel), which keeps every mean unbiased to within the dither noise.
    """

    def __init__(self, model: CorrectionModel, *, seed: int = 0) -> None:
        self.model = model
        self.seed = seed
        self._luts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._dither: np.ndarray | None = None

    def _lut(self, key: int) -> tuple[np.ndarray, np.ndarray]:
        if key not in self._luts:
            v = self.model.corrected_levels(key)
            floor = np.floor(v)
            frac = np.rint((v - floor) * 256.0)
            floor = np.where(frac >= 256, floor + 1, floor)
            frac = np.where(frac >= 256, 0, frac)
            self._luts[key] = (
                floor.astype(np.uint8).reshape(1, 256, 3),
                frac.astype(np.uint8).reshape(1, 256, 3),
            )
        return self._luts[key]

    def __call__(self, frame: np.ndarray, key: int) -> np.ndarray:
        if self._dither is None or self._dither.shape != frame.shape:
            rng = np.random.default_rng(self.seed)
            self._dither = rng.integers(0, 256, size=frame.shape, dtype=np.uint8)
        floor, frac = self._lut(key)
        frame = np.ascontiguousarray(frame)
        out = cv2.LUT(frame, floor)
        up = cv2.LUT(frame, frac) > self._dither
        out += up.view(np.uint8)
        return out


def correct_frames(
    model: CorrectionModel,
    frames: Iterable[np.ndarray],
    *,
    keyframes: Sequence[int] | None = None,
    first_index: int = 0,
    seed: int = 0,
) -> Iterator[np.ndarray]:
    """Apply the correction to a stream of (H, W, 3) uint8 RGB frames (frame indices from ``first_index``).

    Yields
    ------
    (H, W, 3) uint8 corrected frames; per channel ``x − (a + b·x [+ c·x²])`` clipped to [0, 255],
    rounded with a fixed dither so fractional corrections keep the mean.
    """
    corrector = _Corrector(model, seed=seed)
    keys_tuple = tuple(int(k) for k in keyframes) if keyframes is not None else None
    for i, frame in enumerate(frames):
        layout = model.geometry.assign(np.asarray([first_index + i]), keyframes=keys_tuple)
        yield corrector(frame, int(model.key_index(layout)[0]))


def apply_correction(
    model: CorrectionModel,
    test: str | Path,
    out: str | Path,
    *,
    lossless: bool = False,
    codec: str | None = None,
    options: dict[str, str] | None = None,
) -> Path:
    """Write a corrected copy of a test video.

    Parameters
    ----------
    model : the correction.
    test : the decoder output to correct (decoded to RGB by ``native.iter_rgb``).
    out : output video; the default encoder is libx264 at crf 12 (yuv420p), which adds its
        own error (chroma subsampling and quantisation); ``lossless`` writes RGB with
        libx264rgb at qp 0 instead, which decodes back to the exact corrected pixels.
    codec, options : override the encoder and its options.

    Returns
    -------
    The output path.
    """
    p = check_input_file(test)
    info = native.probe_container(p)
    keyframes = None
    if isinstance(model.geometry, GopGeometry) and model.geometry.every == 0:
        keyframes = video_keyframes(p)
    fps = info.avg_frame_rate or Fraction(25)
    even = info.width % 2 == 0 and info.height % 2 == 0
    if lossless:
        codec, pix_fmt = codec or "libx264rgb", "rgb24"
        options = options or {"qp": "0", "preset": "veryfast"}
    else:
        codec, pix_fmt = codec or "libx264", "yuv420p" if even else "yuv444p"
        options = options or {"crf": "12", "preset": "fast"}
    out = Path(out)
    index = 0
    try:
        with native.VideoWriter(
            out, codec=codec, width=info.width, height=info.height, fps=fps, options=options, pix_fmt=pix_fmt
        ) as writer:
            for frame in correct_frames(model, native.iter_rgb(p), keyframes=keyframes):
                writer.write(frame)
                index += 1
    except FFmpegError as exc:
        raise DecodeError(f"correcting failed ({exc.strerror or exc})", path=p, frame_index=index) from exc
    except OSError as exc:
        raise OutputError(f"cannot write corrected video ({exc.strerror or exc})", path=out) from exc
    return out
