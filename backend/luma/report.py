"""What a luma analysis reports: jump p95, slot tables, stacked chunks, gains, LumaReport, LumaAnalysis."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.imaging import psnr_db
from backend.luma.geometry import SlotLayout
from backend.luma.records import FrameLuma
from backend.records import RunWarning, _check, _ShapeRepr

JSON_VERSION = 1


def _p95(values: np.ndarray) -> float:
    return float(np.percentile(values, 95)) if values.size else math.nan


def luma_jumps(bias: np.ndarray, layout: SlotLayout, *, steady_only: bool = False) -> np.ndarray:
    """|bias(t) − bias(t−1)| over token-boundary frames t ≥ 2 (steady-state t only if asked).

    Parameters
    ----------
    bias : (n,) float, per-frame bias aligned with ``layout.frame_index`` (consecutive).
    layout : slot assignment of the same frames.

    Returns
    -------
    (j,) float64 jumps, in frame order.
    """
    t = layout.frame_index
    keep = layout.is_boundary & (t >= 2)
    if keep.size:
        keep[0] = False  # bias(t − 1) is not measured for the first paired frame
    if steady_only:
        keep &= layout.is_steady
    idx = np.flatnonzero(keep)
    return np.abs(bias[idx] - bias[idx - 1])


@dataclass(frozen=True, repr=False)
class SlotTable(_ShapeRepr):
    """Mean and spread of the bias by slot (steady state), or by (slot, position)."""

    slot: np.ndarray
    """(m,) int64."""
    position: np.ndarray
    """(m,) int64, −1 in the by-slot table."""
    count: np.ndarray
    """(m,) int64, frames."""
    mean: np.ndarray
    """(m,) float64, mean bias (levels)."""
    std: np.ndarray
    """(m,) float64, population standard deviation of the bias."""

    def __post_init__(self) -> None:
        m = self.slot.shape
        for name in ("position", "count", "mean", "std"):
            _check(getattr(self, name).shape == m, f"{name}: {getattr(self, name).shape} != {m}")

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for i in range(self.slot.shape[0]):
            row: dict[str, Any] = {"slot": int(self.slot[i])}
            if self.position[i] >= 0:
                row["position"] = int(self.position[i])
            row |= {"count": int(self.count[i]), "mean": _num(self.mean[i]), "std": _num(self.std[i])}
            out.append(row)
        return out


def slot_table(bias: np.ndarray, layout: SlotLayout, *, by_position: bool = False) -> SlotTable:
    """Per-slot (or per slot and position) mean and spread of the steady-state bias.

    Parameters
    ----------
    bias : (n,) float, per-frame bias aligned with ``layout``.
    layout : slot assignment of the same n frames.
    by_position : key rows by (slot, position inside the latent) instead of slot.

    Returns
    -------
    SlotTable with one row per key present in steady state, sorted by key.
    """
    keep = layout.is_steady
    slots = layout.slot[keep]
    pos = layout.position[keep] if by_position else np.full(slots.shape, -1, np.int64)
    values = bias[keep]
    keys = np.unique(np.stack([slots, pos], axis=1), axis=0) if slots.size else np.zeros((0, 2), np.int64)
    count, mean, std = [], [], []
    for s, p in keys:
        v = values[(slots == s) & (pos == p)]
        count.append(v.size)
        mean.append(v.mean())
        std.append(v.std())
    return SlotTable(
        slot=keys[:, 0].astype(np.int64),
        position=keys[:, 1].astype(np.int64),
        count=np.asarray(count, np.int64),
        mean=np.asarray(mean, np.float64),
        std=np.asarray(std, np.float64),
    )


@dataclass(frozen=True, repr=False)
class StackedChunks(_ShapeRepr):
    """Bias by in-chunk position r for every chunk from ``layout.stack_from_chunk`` on."""

    chunk: np.ndarray
    """(q,) int64, chunk indices."""
    bias: np.ndarray
    """(q, F) float64, NaN where a chunk has no frame at r (F = chunk length)."""
    slot: np.ndarray
    """(q, F) int64, slot of each cell, −1 where missing."""
    slot_by_position: np.ndarray
    """(F,) int64, the slot most chunks have at r (the label of position r); −1 if none."""

    def __post_init__(self) -> None:
        q = self.chunk.shape[0]
        _check(self.bias.ndim == 2 and self.bias.shape[0] == q, f"{self.bias.shape = }, {q = }")
        _check(self.slot.shape == self.bias.shape, f"{self.slot.shape = } != {self.bias.shape = }")
        _check(self.slot_by_position.shape == (self.bias.shape[1],), f"{self.slot_by_position.shape = }")


def stacked_chunks(bias: np.ndarray, layout: SlotLayout) -> StackedChunks:
    """The stacked chunk view: one row per chunk, one column per in-chunk position.

    Parameters
    ----------
    bias : (n,) float, per-frame bias aligned with ``layout``.
    layout : slot assignment; chunks before ``layout.stack_from_chunk`` are left out.

    Returns
    -------
    StackedChunks with bias and slot arrays of shape (q, chunk_length).
    """
    keep = layout.chunk >= layout.stack_from_chunk
    chunks = np.unique(layout.chunk[keep])
    f = int(layout.chunk_length)
    out = np.full((chunks.size, f), np.nan)
    slots = np.full((chunks.size, f), -1, np.int64)
    row = np.searchsorted(chunks, layout.chunk[keep])
    col = np.minimum(layout.in_chunk[keep], f - 1)
    out[row, col] = bias[keep]
    slots[row, col] = layout.slot[keep]
    label = np.full(f, -1, np.int64)
    for r in range(f):
        present = slots[:, r][slots[:, r] >= 0]
        if present.size:
            values, counts = np.unique(present, return_counts=True)
            label[r] = values[np.argmax(counts)]
    return StackedChunks(chunk=chunks.astype(np.int64), bias=out, slot=slots, slot_by_position=label)


@dataclass(frozen=True, repr=False)
class GainTable(_ShapeRepr):
    """Per-slot least-squares fit d ≈ a + b·x over the luma of cell × cell cells (steady state)."""

    slot: np.ndarray
    """(m,) int64."""
    a: np.ndarray
    """(m,) float64, offset (levels)."""
    b: np.ndarray
    """(m,) float64, gain error (b ≈ 0: a constant offset)."""
    cells: np.ndarray
    """(m,) int64, cells fitted."""
    rms_residual: np.ndarray
    """(m,) float64, RMS of d − (a + b·x)."""

    def __post_init__(self) -> None:
        m = self.slot.shape
        for name in ("a", "b", "cells", "rms_residual"):
            _check(getattr(self, name).shape == m, f"{name}: {getattr(self, name).shape} != {m}")


def fit_line(x: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """Least-squares (a, b) of d ≈ a + b·x; b = 0 when x does not vary.

    Parameters
    ----------
    x, d : (m,) float arrays of the same length (m = 0 gives (0, 0)).
    """
    if x.size == 0:
        return 0.0, 0.0
    xm = float(x.mean())
    dx = x - xm
    sxx = float(dx @ dx)
    if sxx <= 1e-9 * max(1, x.size):
        return float(d.mean()), 0.0
    b = float(dx @ (d - d.mean())) / sxx
    return float(d.mean()) - b * xm, b


def gain_table(frames: FrameLuma, layout: SlotLayout) -> GainTable:
    """Per-slot gain analysis of cell luma: test mean x against the difference d.

    Parameters
    ----------
    frames : measurements with (n, ch, cw, 3) cell arrays.
    layout : slot assignment of the same n frames (steady-state frames are used).

    Returns
    -------
    GainTable with one row per steady-state slot: d ≈ a + b·x over all its cells.
    """
    x_all, d_all = frames.cell_luma()
    keep = layout.is_steady
    slots = np.unique(layout.slot[keep])
    a, b, cells, rms = [], [], [], []
    for s in slots:
        sel = keep & (layout.slot == s)
        x = x_all[sel].reshape(-1)
        d = d_all[sel].reshape(-1)
        ai, bi = fit_line(x, d)
        a.append(ai)
        b.append(bi)
        cells.append(x.size)
        rms.append(float(np.sqrt(np.mean((d - ai - bi * x) ** 2))) if x.size else math.nan)
    return GainTable(
        slot=slots.astype(np.int64),
        a=np.asarray(a, np.float64),
        b=np.asarray(b, np.float64),
        cells=np.asarray(cells, np.int64),
        rms_residual=np.asarray(rms, np.float64),
    )


def _num(value: Any, digits: int = 6) -> float | None:
    """JSON-safe float: NaN and ±inf become null."""
    v = float(value)
    return round(v, digits) if math.isfinite(v) else None


def _nums(values: np.ndarray, digits: int = 6) -> list[Any]:
    return [_num(v, digits) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


@dataclass(frozen=True, repr=False)
class LumaReport(_ShapeRepr):
    """Every figure of the spec for one (test, reference) pairing."""

    frames: FrameLuma
    layout: SlotLayout
    p95_all: float
    """Luma-jump p95 over token-boundary frames t ≥ 2 (NaN if there are none)."""
    p95_steady: float
    """The same over steady-state boundary frames."""
    jump_0_1: float
    """bias(1) − bias(0), signed; NaN when frame 0 or 1 is not paired."""
    slots: SlotTable
    slot_positions: SlotTable
    stacked: StackedChunks
    gain: GainTable

    def __post_init__(self) -> None:
        _check(
            np.array_equal(self.frames.frame_index, self.layout.frame_index),
            "frames and layout cover different frame indices",
        )

    @property
    def bias(self) -> np.ndarray:
        """(n,) float64, per-frame bias (levels)."""
        return self.frames.bias

    def summary(self) -> dict[str, Any]:
        """Scalar figures, JSON-safe."""
        bias = self.frames.bias
        steady = self.layout.is_steady
        psnr = psnr_db(np.float64(self.frames.y_mse.mean()))
        return {
            "frames": len(self.frames),
            "p95_all": _num(self.p95_all),
            "p95_steady": _num(self.p95_steady),
            "jump_0_1": _num(self.jump_0_1),
            "mean_bias": _num(bias.mean()),
            "mean_abs_bias": _num(np.abs(bias).mean()),
            "steady_mean_bias": _num(bias[steady].mean()) if steady.any() else None,
            "y_psnr_db": _num(psnr),
            "min_y_psnr_db": _num(self.frames.psnr_db.min()),
            "channel_mean_diff": _nums(self.frames.channel_diff.mean(axis=0)),
        }

    def to_json(self, *, per_frame: bool = True) -> dict[str, Any]:
        """A JSON-ready dict: names, summary, per-slot tables, stacked view, gain and per-frame series."""
        f = self.frames
        out: dict[str, Any] = {
            "label": f.reference_label,
            "reference": f.reference_name,
            "test": f.test_name,
            "width": f.width,
            "height": f.height,
            "offset": f.offset,
            "truncated": f.truncated,
            "summary": self.summary(),
            "slots": self.slots.rows(),
            "slot_positions": self.slot_positions.rows(),
            "stacked": {
                "chunks": [int(c) for c in self.stacked.chunk],
                "slot_by_position": [int(s) for s in self.stacked.slot_by_position],
                "bias": [_nums(row) for row in self.stacked.bias],
            },
            "gain": [
                {
                    "slot": int(self.gain.slot[i]),
                    "a": _num(self.gain.a[i]),
                    "b": _num(self.gain.b[i]),
                    "cells": int(self.gain.cells[i]),
                    "rms_residual": _num(self.gain.rms_residual[i]),
                }
                for i in range(self.gain.slot.shape[0])
            ],
        }
        if per_frame:
            out["per_frame"] = {
                "frame_index": [int(t) for t in f.frame_index],
                "bias": _nums(f.bias),
                "y_psnr_db": _nums(f.psnr_db, 4),
                "channel_diff": [_nums(row) for row in f.channel_diff],
                "slot": [int(s) for s in self.layout.slot],
                "position": [int(p) for p in self.layout.position],
                "is_boundary": [bool(b) for b in self.layout.is_boundary],
                "is_steady": [bool(b) for b in self.layout.is_steady],
            }
        return out


def summarize(frames: FrameLuma, layout: SlotLayout) -> LumaReport:
    """All spec figures of one pairing from its per-frame measurements and slot layout.

    Parameters
    ----------
    frames : per-frame measurements (n frames).
    layout : ``geometry.assign(frames.frame_index)``; another geometry needs no new decode.

    Returns
    -------
    LumaReport with p95 (all, steady), the 0→1 jump, slot tables, stacked view and gains.
    """
    bias = frames.bias
    t = frames.frame_index
    has01 = len(frames) >= 2 and t[0] == 0
    return LumaReport(
        frames=frames,
        layout=layout,
        p95_all=_p95(luma_jumps(bias, layout)),
        p95_steady=_p95(luma_jumps(bias, layout, steady_only=True)),
        jump_0_1=float(bias[1] - bias[0]) if has01 else math.nan,
        slots=slot_table(bias, layout),
        slot_positions=slot_table(bias, layout, by_position=True),
        stacked=stacked_chunks(bias, layout),
        gain=gain_table(frames, layout),
    )


@dataclass(frozen=True, repr=False)
class LumaAnalysis(_ShapeRepr):
    """A test output analysed against one or two references with one geometry."""

    test_name: str
    geometry: dict[str, Any]
    """``to_dict()`` of the geometry (name and parameters)."""
    keyframes: tuple[int, ...]
    """Keyframes of the test video used by the GOP model (empty when unused)."""
    reports: tuple[LumaReport, ...]
    """One per reference, ``reference`` first, then ``official``."""
    warnings: tuple[RunWarning, ...] = ()
    """Named notes on what was off while reading (e.g. ``decoder_errors`` of a damaged stream)."""

    def __post_init__(self) -> None:
        _check(len(self.reports) >= 1, "an analysis needs at least one report")

    @property
    def report(self) -> LumaReport:
        """The report against the first reference."""
        return self.reports[0]

    def to_json(self, *, per_frame: bool = True) -> dict[str, Any]:
        """JSON-ready dict with the per-frame bias, per-slot means, p95 (all, steady) and 0→1 jump.

        ``warnings`` (a list of ``{code, message}``) is present only when there are any.
        """
        out = {
            "kind": "codec-lens/luma-bias",
            "version": JSON_VERSION,
            "test": self.test_name,
            "geometry": self.geometry,
            "keyframes": list(self.keyframes),
            "references": [r.to_json(per_frame=per_frame) for r in self.reports],
        }
        if self.warnings:  # absent otherwise, so the JSON of a clean read is what it always was
            out["warnings"] = [w.as_dict() for w in self.warnings]
        return out


__all__ = [
    "JSON_VERSION",
    "GainTable",
    "LumaAnalysis",
    "LumaReport",
    "SlotTable",
    "StackedChunks",
    "fit_line",
    "gain_table",
    "luma_jumps",
    "slot_table",
    "stacked_chunks",
    "summarize",
]
