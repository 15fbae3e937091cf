"""Period geometry of the luma-bias analyzer: which window slot (or GOP slot) produced each frame."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from backend.config import param, validate_fields
from backend.records import _check, _ShapeRepr

GEOMETRY_NAMES: tuple[str, ...] = ("h3", "gop")


@dataclass(frozen=True, repr=False)
class SlotLayout(_ShapeRepr):
    """Where every analysed frame sits in the decoder's period (one row per frame)."""

    geometry: str
    """``h3`` (latent window) or ``gop``."""
    frame_index: np.ndarray
    """(n,) int64, test frame index (decoded presentation order)."""
    slot: np.ndarray
    """(n,) int64, window slot of the frame's latent (GOP: frames since the last boundary)."""
    position: np.ndarray
    """(n,) int64, position inside the latent, 0..temporal_compression−1 (GOP: 0)."""
    latent: np.ndarray
    """(n,) int64, global latent index k (GOP: −1)."""
    chunk: np.ndarray
    """(n,) int64, chunk index c (GOP: index of the GOP, counted from 0)."""
    in_chunk: np.ndarray
    """(n,) int64, in-chunk position r (GOP: same as ``slot``)."""
    is_boundary: np.ndarray
    """(n,) bool, token-boundary frame (first frame of a latent; GOP: a boundary frame)."""
    is_steady: np.ndarray
    """(n,) bool, after the first window (GOP: every frame)."""
    chunk_length: int
    """Frames per chunk (GOP: the longest GOP among the frames, or ``every``)."""
    stack_from_chunk: int
    """First chunk of the stacked chunk view (2 for the latent model: chunks from the third on)."""
    steady_slots: tuple[int, ...]
    """Slots that occur in steady state, in order."""

    def __post_init__(self) -> None:
        n = self.frame_index.shape
        _check(self.frame_index.ndim == 1, f"{self.frame_index.shape = } must be 1-D")
        for name in ("slot", "position", "latent", "chunk", "in_chunk", "is_boundary", "is_steady"):
            _check(getattr(self, name).shape == n, f"{name} shape {getattr(self, name).shape} != {n}")

    def __len__(self) -> int:
        return int(self.frame_index.shape[0])


@dataclass(frozen=True, kw_only=True)
class LatentWindowGeometry:
    """Latent-window model of a streaming VAE decoder (H3 defaults).

    A chunk holds ``1 + temporal_compression·(latents_per_chunk − 1)`` frames: its first
    latent carries one real frame, the others ``temporal_compression`` each.
    """

    temporal_compression: int = param(
        4, label="Temporal compression", help="frames per latent (except a chunk's first)", min=1, max=64
    )
    latents_per_chunk: int = param(
        5, label="Latents per chunk (L)", help="latents of one chunk", min=1, max=1024
    )
    window: int = param(7, label="Window (W)", help="latents the decoder attends over", min=1, max=1024)
    stride: int = param(5, label="Stride (S)", help="latents the window moves by", min=1, max=1024)

    name: ClassVar[str] = "h3"

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.stride > self.window:
            raise ValueError(
                f"Invalid stride ({self.stride!r}). Supported values are between 1 and the window "
                f"({self.window})."
            )

    @property
    def chunk_frames(self) -> int:
        """Frames per chunk (17 with the defaults)."""
        return 1 + self.temporal_compression * (self.latents_per_chunk - 1)

    @property
    def steady_slots(self) -> tuple[int, ...]:
        """Slots of steady-state latents: W−S .. W−1 (2..6 with the defaults)."""
        return tuple(range(self.window - self.stride, self.window))

    @property
    def first_window_frames(self) -> int:
        """Frames of latents 0..W−1 (22 with the defaults); later frames are steady state."""
        return int(
            np.count_nonzero(self._latent(np.arange(self.window * self.chunk_frames + 1)) < self.window)
        )

    def _latent(self, t: np.ndarray) -> np.ndarray:
        r = t % self.chunk_frames
        j = np.where(r == 0, 0, 1 + (r - 1) // self.temporal_compression)
        return self.latents_per_chunk * (t // self.chunk_frames) + j

    def slot_of_latent(self, k: np.ndarray) -> np.ndarray:
        """Slot of latent k in a causal stream: k for k < W, else k − S·⌊(k − (W − S)) / S⌋."""
        k = np.asarray(k, dtype=np.int64)
        w, s = self.window, self.stride
        return np.where(k < w, k, k - s * ((k - (w - s)) // s))

    def assign(self, frame_index: np.ndarray, *, keyframes: tuple[int, ...] | None = None) -> SlotLayout:
        """Slot, latent and chunk of each frame.

        Parameters
        ----------
        frame_index : (n,) int, test frame indices (0-based presentation order).
        keyframes : ignored (the latent model does not depend on the bitstream).

        Returns
        -------
        SlotLayout with (n,) arrays.
        """
        t = np.asarray(frame_index, dtype=np.int64).reshape(-1)
        tc, f = self.temporal_compression, self.chunk_frames
        r = t % f
        k = self._latent(t)
        position = np.where(r == 0, 0, (r - 1) % tc)
        return SlotLayout(
            geometry=self.name,
            frame_index=t,
            slot=self.slot_of_latent(k),
            position=position.astype(np.int64),
            latent=k.astype(np.int64),
            chunk=(t // f).astype(np.int64),
            in_chunk=r.astype(np.int64),
            is_boundary=(r == 0) | ((r - 1) % tc == 0),
            is_steady=k >= self.window,
            chunk_length=f,
            stack_from_chunk=2,
            steady_slots=self.steady_slots,
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **asdict(self)}


@dataclass(frozen=True, kw_only=True)
class GopGeometry:
    """GOP model of a codec decoder: the slot of a frame is its distance from the last boundary.

    Boundaries sit at the test video's keyframes (``every`` = 0) or every ``every`` frames.
    """

    every: int = param(
        0,
        label="Boundary every N frames",
        help="0: boundaries at the test video's keyframes",
        min=0,
        max=1_000_000,
    )

    name: ClassVar[str] = "gop"

    def __post_init__(self) -> None:
        validate_fields(self)

    def assign(self, frame_index: np.ndarray, *, keyframes: tuple[int, ...] | None = None) -> SlotLayout:
        """Slot (frames since the last boundary) and GOP number of each frame.

        Parameters
        ----------
        frame_index : (n,) int, test frame indices.
        keyframes : presentation-order keyframe indices of the test video; required when
            ``every`` is 0. Frame 0 always starts a GOP.

        Returns
        -------
        SlotLayout with (n,) arrays; every frame counts as steady state.
        """
        t = np.asarray(frame_index, dtype=np.int64).reshape(-1)
        if self.every > 0:
            chunk = t // self.every
            slot = t % self.every
            length = self.every
        else:
            if keyframes is None:
                raise ValueError("GOP geometry needs the test video's keyframes (or every > 0)")
            starts = np.unique(np.concatenate([[0], np.asarray(keyframes, dtype=np.int64)]))
            chunk = np.searchsorted(starts, t, side="right") - 1
            slot = t - starts[chunk]
            length = int(slot.max()) + 1 if slot.size else 1
        n = t.shape[0]
        return SlotLayout(
            geometry=self.name,
            frame_index=t,
            slot=slot.astype(np.int64),
            position=np.zeros(n, np.int64),
            latent=np.full(n, -1, np.int64),
            chunk=chunk.astype(np.int64),
            in_chunk=slot.astype(np.int64),
            is_boundary=slot == 0,
            is_steady=np.ones(n, bool),
            chunk_length=int(length),
            stack_from_chunk=0,
            steady_slots=tuple(range(int(length))),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **asdict(self)}


LumaGeometry = LatentWindowGeometry | GopGeometry


def make_geometry(name: str, **params: Any) -> LumaGeometry:
    """Build a geometry by name (``h3`` or ``gop``) with optional parameters.

    Raises
    ------
    ValueError : unknown name (the message lists the choices) or invalid parameters.
    """
    if name == "h3":
        return LatentWindowGeometry(**params)
    if name == "gop":
        return GopGeometry(**params)
    choices = ", ".join(repr(g) for g in GEOMETRY_NAMES)
    raise ValueError(f"Invalid geometry ({name!r}). Supported values are {choices}.")


def geometry_from_dict(data: dict[str, Any]) -> LumaGeometry:
    """Inverse of ``to_dict`` (used by the coefficients file)."""
    params = {k: v for k, v in data.items() if k != "name"}
    return make_geometry(str(data.get("name")), **params)
