"""Frozen records passed between pipeline stages, with shape checks and compact reprs."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

TOKEN_COLUMNS: tuple[str, ...] = (
    "frame_index",
    "patch_row",
    "patch_col",
    "canvas_index",
    "packed_row",
    "packed_col",
    "group_index",
    "valid",
)


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, (tuple, list)) and len(value) > 6:
        return f"{type(value).__name__}(len={len(value)})"
    return repr(value)


class _ShapeRepr:
    """Mixin: repr prints array shapes, never array contents."""

    def __repr__(self) -> str:
        parts = [f"{f.name}={_short(getattr(self, f.name))}" for f in dataclasses.fields(self)]  # type: ignore[arg-type]
        return f"{type(self).__name__}({', '.join(parts)})"


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


@dataclass(frozen=True, repr=False)
class RunWarning(_ShapeRepr):
    """A named, human-readable note about a defect or fallback that fired in a run."""

    code: str
    """Stable identifier, e.g. ``bitcost_backfill`` or ``tail_dropped``."""
    message: str
    """One line for people, e.g. ``frame 37: bitcost missing, backfilled with frame 30's``."""

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, repr=False)
class VideoInfo(_ShapeRepr):
    """What the probe stage learnt about a video, without decoding it."""

    path: str
    size_bytes: int
    format_name: str
    codec_name: str
    width: int
    height: int
    fps: float
    """avg_frame_rate as a float, 0.0 when unknown."""
    total_frames: int
    frame_count_source: str
    """``header`` (nb_frames), ``duration_estimate`` (round(fps × duration)) or ``counted``."""
    duration_secs: float
    stream_bit_rate: int
    format_bit_rate: int
    start_pts_secs: float
    packet_pts_secs: np.ndarray
    """(P,) float64, presentation timestamps of the video packets in presentation order."""
    packet_size_bytes: np.ndarray
    """(P,) int64, packet sizes in presentation order (index = frame_index when P == frames)."""
    packet_is_keyframe: np.ndarray
    """(P,) bool, keyframe flag from the bitstream/container, presentation order."""
    stss_keyframes: tuple[int, ...] | None
    """0-based keyframe indices from the MP4 ``stss`` box (None when absent or not MP4)."""
    has_programs: bool
    """True for containers (MPEG-TS) whose probe lists the stream under a program too."""
    sample_aspect_ratio: tuple[int, int] = (1, 1)
    """(num, den) pixel aspect of the stored frames (SAR); (1, 1) for square pixels or unknown.
    The pipeline works on stored pixels; only the viewer stretches to the display aspect."""

    def __post_init__(self) -> None:
        n = self.packet_pts_secs.shape
        _check(
            self.packet_size_bytes.shape == n and self.packet_is_keyframe.shape == n,
            f"packet arrays differ: {self.packet_pts_secs.shape = }, "
            f"{self.packet_size_bytes.shape = }, {self.packet_is_keyframe.shape = }",
        )

    @property
    def display_aspect(self) -> float:
        """Width / height as the video is meant to be shown (stored aspect × SAR)."""
        num, den = self.sample_aspect_ratio
        return self.width * num / max(1, self.height * den)

    @property
    def bit_rate(self) -> int:
        """Stream bit rate, else container bit rate, else 0 (cvp's rule)."""
        return self.stream_bit_rate or self.format_bit_rate or 0

    @property
    def keyframe_indices(self) -> tuple[int, ...]:
        """Bitstream keyframes as presentation-order frame indices."""
        return tuple(int(i) for i in np.flatnonzero(self.packet_is_keyframe))


@dataclass(frozen=True, repr=False)
class Candidates(_ShapeRepr):
    """Sampled frame indices after keyframe handling, in pipeline order."""

    frame_indices: np.ndarray
    """(n,) int32, decoded presentation order; may repeat when n > total frames."""
    sampled_frame_indices: np.ndarray
    """(m,) int32, the sampler's output before keyframe avoidance."""
    keyframe_indices: tuple[int, ...]
    """Keyframes avoidance worked from (empty when avoidance is off)."""
    moved: tuple[tuple[int, int], ...]
    """(from_frame_index, to_frame_index) for every keyframe shifted by avoidance."""
    debug: dict[str, Any]
    """cvp-compatible ``sampling_debug`` keys."""
    warnings: tuple[RunWarning, ...] = ()

    def __post_init__(self) -> None:
        _check(self.frame_indices.ndim == 1, f"{self.frame_indices.shape = } must be 1-D")
        _check(self.frame_indices.dtype == np.int32, f"{self.frame_indices.dtype = } != int32")

    @property
    def stayed_keyframes(self) -> tuple[int, ...]:
        """Sampled keyframes that avoidance could not move (no non-keyframe within reach), sorted.

        Only these are candidates because avoidance failed; they are what ``keyframes_kept``
        names. Empty when avoidance was off.
        """
        keys = set(self.keyframe_indices)
        moved_from = {int(a) for a, _ in self.moved}
        sampled = {int(f) for f in self.sampled_frame_indices.tolist()}
        return tuple(sorted((sampled & keys) - moved_from))

    @property
    def refilled_keyframes(self) -> tuple[int, ...]:
        """Keyframes the refill put among the candidates, sorted (cvp quirk 10).

        With fewer free frames than the sample count (N ≥ frame count) the refill adds every
        unused frame, keyframes included, so a keyframe moved off (``moved``) can be a
        candidate as well as its neighbour. Empty when avoidance was off.
        """
        keys = set(self.keyframe_indices)
        present = {int(f) for f in self.frame_indices.tolist()}
        return tuple(sorted((present & keys) - set(self.stayed_keyframes)))


@dataclass(frozen=True, repr=False)
class Geometry(_ShapeRepr):
    """Frame geometry: original, decoder output (prepared) and processed sizes."""

    orig_hw: tuple[int, int]
    prepared_hw: tuple[int, int]
    """Size the decoder scales to."""
    processed_hw: tuple[int, int]
    """Size after cvp's second smart_resize (equals prepared_hw unless it double-resizes)."""
    patch: int
    block_size: int

    @property
    def grid_hw(self) -> tuple[int, int]:
        """Patch grid (patch_rows, patch_cols) of the processed frame."""
        return self.processed_hw[0] // self.patch, self.processed_hw[1] // self.patch

    @property
    def block_grid_hw(self) -> tuple[int, int]:
        """Block grid (block_rows, block_cols)."""
        hb, wb = self.grid_hw
        return hb // self.block_size, wb // self.block_size

    @property
    def patches_per_canvas(self) -> int:
        hb, wb = self.grid_hw
        return hb * wb


@dataclass(frozen=True, repr=False)
class DecodedFrames(_ShapeRepr):
    """Pixels and raw per-frame bitcost grids for the candidate frames."""

    frame_indices: np.ndarray
    """(n,) int32, same order as the candidates."""
    pixels: np.ndarray
    """(n, H, W, 3) uint8 RGB at the processed size."""
    grids: tuple[np.ndarray | None, ...]
    """Per frame, the raw bitcost grid (2-D, as the decoder delivered it) or None."""
    grid_key: str
    """``mb_bit_cost``, ``ctu_bit_cost`` or ``sub_mb_bit_cost``."""
    pict_types: tuple[str, ...]
    """'I', 'P', 'B' or '?' per frame (after any backfill copy)."""
    bitcost_source: np.ndarray
    """(n,) int32, frame_index whose bitcost (and in parity, pixels) each row carries."""
    pixel_source: str
    """``fast_reader`` (deblocking skipped, cvp's path) or ``full_decode``."""
    read_mode: str = "serial"
    """How the reader was driven: ``serial``; ``split`` (two processes, the second seeking to a
    keyframe); ``split from start`` (the second decoding a lead-in from frame 0, for containers
    without a trusted seek); ``bitcost here, pixels in workers`` (parity with pruning); or
    ``serial (split failed)``."""
    warnings: tuple[RunWarning, ...] = ()

    def __post_init__(self) -> None:
        n = self.frame_indices.shape[0]
        _check(self.pixels.ndim == 4 and self.pixels.shape[0] == n, f"{self.pixels.shape = }, {n = }")
        _check(self.pixels.dtype == np.uint8, f"{self.pixels.dtype = } != uint8")
        _check(len(self.grids) == n and len(self.pict_types) == n, f"{len(self.grids) = }, {n = }")
        _check(self.bitcost_source.shape == (n,), f"{self.bitcost_source.shape = }, {n = }")

    @functools.cached_property
    def luma_means(self) -> np.ndarray:
        """(n,) float64 BT.601 luma mean of each frame's pixels (0-255), over a 4×4 subsample (it
        moves the mean by far less than a level). Worked out once per decode; the decode cache keeps
        it, so a re-selection's views never read every frame for it."""
        means = np.asarray(self.pixels[:, ::4, ::4].mean(axis=(1, 2)) @ _BT601, np.float64)
        means.flags.writeable = False
        return means


_BT601 = np.asarray([0.299, 0.587, 0.114], np.float32)


@dataclass(frozen=True, repr=False)
class FrameQuality(_ShapeRepr):
    """Bad-frame mask (black, solid colour, green corruption)."""

    good: np.ndarray
    """(n,) bool."""
    reasons: tuple[str, ...]
    """'' for good frames, else ``black``, ``solid`` or ``green``."""

    def __post_init__(self) -> None:
        _check(self.good.ndim == 1 and len(self.reasons) == self.good.shape[0], f"{self.good.shape = }")


@dataclass(frozen=True, repr=False)
class ScoreMaps(_ShapeRepr):
    """Normalised per-frame score grids and their patch and 2×2-block sums."""

    grids: tuple[np.ndarray, ...]
    """Per frame, float32 normalised grid in [0, 1] (before nearest-neighbour upsampling)."""
    processed_hw: tuple[int, int]
    patch_scores: np.ndarray
    """(n, patch_rows, patch_cols) float32, sum of the upsampled map over each patch."""
    block_scores: np.ndarray
    """(n, block_rows * block_cols) float32, block-raster order."""
    iframe_clip_cap: float | None
    """Cap applied to I-frame maps (None when the clip did not apply)."""
    debug: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.grids)
        _check(
            self.patch_scores.ndim == 3 and self.patch_scores.shape[0] == n,
            f"{self.patch_scores.shape = }",
        )
        _check(
            self.block_scores.ndim == 2 and self.block_scores.shape[0] == n,
            f"{self.block_scores.shape = }",
        )


@dataclass(frozen=True, repr=False)
class ReadinessStep(_ShapeRepr):
    """One step of the readiness scan: a window end tried and what was decided."""

    group_index: int
    start: int
    end: int
    """Exclusive window end (index into the candidates)."""
    frame_index_added: int
    topk_sum: float
    threshold: float
    covered_bins: int
    needed_bins: int
    marginal_gain: float
    """(sum − previous sum) / |previous sum|; 1.0 for the first step."""
    passed: bool
    decision: str
    """``continue``, ``stop`` or ``chosen``."""
    reason: str


@dataclass(frozen=True, repr=False)
class GroupSpec(_ShapeRepr):
    """A group: a slice [start, end) of the candidates."""

    group_index: int
    start: int
    end: int
    stop_reason: str
    readiness: dict[str, Any]

    @property
    def frame_count(self) -> int:
        return self.end - self.start

    def as_dict(self) -> dict[str, Any]:
        return {
            "group_idx": self.group_index,
            "start": self.start,
            "end": self.end,
            "frame_count": self.frame_count,
            "stop_reason": self.stop_reason,
            "readiness": self.readiness,
        }


@dataclass(frozen=True, repr=False)
class Groups(_ShapeRepr):
    """Grouping result with the threshold and the per-step readiness trace."""

    specs: tuple[GroupSpec, ...]
    threshold: float
    threshold_debug: dict[str, Any]
    trace: tuple[ReadinessStep, ...]
    dropped_tail: tuple[int, int] | None
    """Candidate index range [start, end) never grouped (parity's tail drop)."""
    warnings: tuple[RunWarning, ...] = ()


@dataclass(frozen=True, repr=False)
class GroupSelection(_ShapeRepr):
    """Anchor and kept blocks of one group."""

    group_index: int
    start: int
    end: int
    frame_indices: tuple[int, ...]
    """Group frame indices after the anchor swap (position 0 = anchor)."""
    anchor_swapped_with: int | None
    """Group-relative position swapped into the anchor slot, if the first frame was bad."""
    kept: np.ndarray
    """(k, 3) int32 rows [t, block_row, block_col], sorted by t then block raster."""
    kept_scores: np.ndarray
    """(k,) float32 block scores of ``kept``."""
    ranked: np.ndarray
    """(k, 2) int32 [t, flat_block] in descending score order (cvp's meta order)."""
    ranked_scores: np.ndarray
    """(k,) float32 scores in ranked order."""
    candidate_count: int
    budget: int
    cutoff_score: float
    """Lowest kept score (−inf when nothing was kept)."""
    kept_canvas: np.ndarray | None = None
    """(k,) int32 canvas of the group (1 … images_per_group − 1) each ``kept`` block goes to, for
    packers that assign blocks to canvases (llava-ov2's temporal quotas); None when blocks simply
    fill the canvases after the anchor in order."""

    def candidate_rows(self) -> np.ndarray:
        """(G,) candidate row of each group position t, after the anchor swap."""
        perm = np.arange(self.end - self.start)
        if self.anchor_swapped_with is not None:
            j = self.anchor_swapped_with
            perm[0], perm[j] = j, 0
        return self.start + perm

    def __post_init__(self) -> None:
        _check(self.kept.ndim == 2 and self.kept.shape[1] == 3, f"{self.kept.shape = }")
        _check(self.kept_scores.shape == (self.kept.shape[0],), f"{self.kept_scores.shape = }")
        if self.kept_canvas is not None:
            _check(self.kept_canvas.shape == (self.kept.shape[0],), f"{self.kept_canvas.shape = }")


STOP_REASONS = ("budget", "content", "video_end")
"""Why a hard token budget stopped (backend.stages.budget): the next item did not fit, the next
block's gain fell below the floor, or nothing was left to keep."""


@dataclass(frozen=True)
class BudgetOutcome:
    """What the hard token budget kept of a run (backend.stages.budget, docs/audit.md)."""

    token_budget: int
    """N: the most valid tokens the run may use, anchors included."""
    tokens_used: int
    """Valid tokens of the budgeted selection (≤ token_budget)."""
    stop_reason: str
    """One of :data:`STOP_REASONS`."""
    stop_gain: float
    anchors: int
    """Anchor frames kept (a group whose anchor does not fit is dropped whole)."""
    blocks: int
    """Blocks kept after the anchors."""
    gain_unit_bytes: float
    """Bytes of an average keyframe block (mean keyframe packet over the blocks of a frame), the
    unit of a block's gain (0: no scores or packets unknown, no content stop)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FALLBACK_REASONS = ("no_bitcost", "flat_scores", "damaged_stream")
"""Why a run fell back (backend.selectors.fallback, docs/audit.md): the codec has no bitcost,
the codec spent too little between keyframes for its scores to rank, or too many frames were bad."""


@dataclass(frozen=True)
class FallbackOutcome:
    """Which selector a run asked for, which one ran, and why they differ (None: they do not)."""

    selector_requested: str
    """The selector as asked for, with the options a fallback changed: ``cvp[score=bitcost]``."""
    selector_used: str
    """The selector that ran: the requested one, ``cvp[profile=clean,score=mvres]`` or ``uniform``."""
    fallback_reason: str | None
    """One of :data:`FALLBACK_REASONS`, or None when the requested selector ran."""
    detail: str = ""
    """The measured condition in words (empty when nothing fell back)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, repr=False)
class Selection(_ShapeRepr):
    """Per-group selections for every processed group (skipped groups are absent)."""

    groups: tuple[GroupSelection, ...]
    skipped_group_indices: tuple[int, ...]
    warnings: tuple[RunWarning, ...] = ()
    budget: BudgetOutcome | None = None
    """What a hard token budget kept; None when the selector's own budget rules."""

    @functools.cached_property
    def kept_by_row(self) -> Mapping[int, np.ndarray]:
        """Candidate row → its kept blocks, a read-only (m, 2) int64 array of [block_row, block_col]
        (by group, then in kept order). Worked out once: the timeline, the signal plots and the
        frame overlays all ask for it on every re-selection."""
        out: dict[int, list[np.ndarray]] = {}
        for sel in self.groups:
            if not sel.kept.shape[0]:
                continue
            rows = sel.candidate_rows()
            # By position t, each t's blocks in their kept order (a stable sort, one split).
            kept = sel.kept[np.argsort(sel.kept[:, 0], kind="stable")]
            ts, starts = np.unique(kept[:, 0], return_index=True)
            parts = np.split(kept[:, 1:].astype(np.int64), starts[1:])
            for t, blocks in zip(ts.tolist(), parts, strict=True):
                out.setdefault(int(rows[t]), []).append(blocks)
        merged = {row: np.concatenate(parts) for row, parts in out.items()}
        for blocks in merged.values():
            blocks.flags.writeable = False
        return MappingProxyType(merged)

    def __getstate__(self) -> dict[str, Any]:
        # The worked-out kept_by_row (a mapping proxy, which pickle refuses) is not state.
        return {k: v for k, v in self.__dict__.items() if k != "kept_by_row"}


class CanvasPixels:
    """Where a run's canvas pixels come from: held in memory (this class) or packed when first
    asked for (``backend.stages.pack``: a re-selection that only views one canvas packs one)."""

    def __init__(self, images: np.ndarray) -> None:
        self._images = images

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(C, H, W, 3), without packing anything."""
        return tuple(self._images.shape)  # type: ignore[return-value]

    @property
    def packed(self) -> bool:
        """Whether every canvas's pixels are in memory (always, for held pixels)."""
        return True

    def canvas(self, canvas_index: int) -> np.ndarray:
        """(H, W, 3) uint8 RGB of one canvas."""
        return self._images[canvas_index]

    def all(self) -> np.ndarray:
        """(C, H, W, 3) uint8 RGB of every canvas (the same array on every call)."""
        return self._images

    def __reduce__(self) -> tuple[Any, ...]:
        # A packed-on-demand subclass pickles its pixels, not the decode it packs from.
        return (CanvasPixels, (self.all(),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape})"


@dataclass(frozen=True, repr=False, eq=False, init=False)
class Canvases(_ShapeRepr):
    """Packed canvases and the token records that map them back to source frames.

    Built from ``images`` (held) or ``pixels`` (a :class:`CanvasPixels`, e.g. packed on demand);
    ``images`` wins when both are given, as ``dataclasses.replace(c, images=...)`` does.
    """

    tokens: np.ndarray
    """(C·S, 8) int32, canvas-raster rows, columns :data:`TOKEN_COLUMNS`."""
    canvas_group_index: np.ndarray
    """(C,) int32, the group each canvas belongs to."""
    pixels: CanvasPixels
    """The canvases' (C, H, W, 3) pixels, held or packed on demand."""

    def __init__(
        self,
        *,
        tokens: np.ndarray,
        canvas_group_index: np.ndarray,
        images: np.ndarray | None = None,
        pixels: CanvasPixels | None = None,
    ) -> None:
        if images is not None:
            _check(images.ndim == 4 and images.dtype == np.uint8, f"{images.shape = }")
            pixels = CanvasPixels(images)
        _check(pixels is not None, "Canvases need images or pixels")
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "canvas_group_index", canvas_group_index)
        object.__setattr__(self, "pixels", pixels)
        self.__post_init__()

    def __post_init__(self) -> None:
        c = self.count
        _check(len(self.pixels.shape) == 4 and self.pixels.shape[3] == 3, f"{self.pixels.shape = }")
        _check(
            self.tokens.ndim == 2 and self.tokens.shape[1] == len(TOKEN_COLUMNS),
            f"{self.tokens.shape = }",
        )
        _check(self.canvas_group_index.shape == (c,), f"{self.canvas_group_index.shape = }, {c = }")
        if c:
            _check(self.tokens.shape[0] % c == 0, f"{self.tokens.shape = } not divisible by {c = }")

    @property
    def count(self) -> int:
        """C, the number of canvases (nothing is packed to tell)."""
        return int(self.pixels.shape[0])

    @property
    def images(self) -> np.ndarray:
        """(C, H, W, 3) uint8 RGB of every canvas (packed on first use when packed on demand)."""
        return self.pixels.all()

    def image(self, canvas_index: int) -> np.ndarray:
        """(H, W, 3) uint8 RGB of canvas ``canvas_index`` (only it is packed, when on demand)."""
        if not 0 <= canvas_index < self.count:
            raise ValueError(
                f"Invalid canvas_index ({canvas_index}). Supported values are 0 to {self.count - 1}."
            )
        return self.pixels.canvas(canvas_index)

    @property
    def src_patch_position(self) -> np.ndarray:
        """(C·S, 3) int32 ``[frame_index, patch_row, patch_col]``, −1 rows for padding."""
        return np.ascontiguousarray(self.tokens[:, :3], dtype=np.int32)
