"""onevision options, named as OneVision-Encoder's scripts name them, with the cvp names the views read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.config import param, validate_fields
from backend.pipeline.recipe import SelectorOptions
from backend.selectors.onevision.letterbox import LetterboxConfig
from backend.selectors.onevision.topk import TOPK_MODES, TopKConfig
from backend.stages import keyframes as keyframes_mod
from backend.stages import pack as pack_mod
from backend.stages import probe as probe_mod
from backend.stages import quality as quality_mod
from backend.stages import sample as sample_mod
from backend.stages.decode import decoder_thread_count
from backend.stages.signals import SignalConfig

SIGNAL_CHOICES = ("mvres", "residual", "mv")
CANVAS_FORMATS = ("jpg", "png")


@dataclass(frozen=True, kw_only=True)
class OnevisionOptions(SelectorOptions):
    """Options of the onevision selector, named as OneVision-Encoder's scripts name them.

    The field metadata is the single schema for validation, CLI flags and app controls.
    """

    seq_len_frames: int = param(
        64,
        label="Sampled frames",
        help="frames sampled uniformly over the video; positions' t runs over them",
        min=2,
        max=100000,
    )
    num_images: int = param(
        8,
        label="Canvases",
        help="canvases: frame 0 whole, then the top-K patches of the other frames",
        min=2,
        max=256,
    )
    square_size: int = param(
        576,
        label="Square size",
        help="side of the square every frame is letterboxed into (longer side scaled to it, centred)",
        min=16,
        max=4096,
    )
    patch_size: int = param(16, label="Patch", help="patch side in pixels", min=1, max=256)
    topk_mode: str = param(
        "global",
        label="Top-K mode",
        help="global: one top-K over every patch of frames 1…; time_bucket: the frames split in "
        "contiguous buckets, the top canvas-full of patches of each",
        choices=TOPK_MODES,
    )
    time_bucket_count: int = param(
        -1,
        label="Time buckets",
        help="time_bucket: number of buckets; -1 takes one per remaining canvas (num_images - 1)",
        min=-1,
        max=100000,
    )
    signal: str = param(
        "mvres",
        label="Signal",
        help="per-pixel energy standing in for the patched decoder's export: mvres (fused motion + "
        "residual, the reference's), residual or mv (backend.stages.signals)",
        choices=SIGNAL_CHOICES,
    )
    w_mv: float = param(1.0, label="Motion weight", help="mvres: weight of the motion term", min=0, max=100)
    w_res: float = param(
        1.0, label="Residual weight", help="mvres: weight of the residual term", min=0, max=100
    )
    pct: float = param(
        95.0,
        label="Percentile",
        help="mvres: the frame's percentile mapped to 1.0 (the reference's mv_pct and res_pct together)",
        min=1,
        max=100,
    )
    static_fallback: bool = param(
        True,
        label="Static fallback",
        help="a nearly static video first keeps static_uniform_frames uniformly spaced frames",
    )
    static_abs_thresh: float = param(
        2.0,
        label="Static level",
        help="static when the 95th percentile of patch mean energy (0–255) is below this, or below "
        "twice this with a flat distribution",
        min=0,
        max=255,
    )
    static_rel_thresh: float = param(
        0.15,
        label="Static contrast",
        help="flat distribution: (p95 − p50) / p95 below this",
        min=0,
        max=1,
    )
    static_uniform_frames: int = param(
        4, label="Static frames", help="frames the static fallback keeps first", min=1, max=1000
    )
    canvas_format: str = param(
        "jpg", label="Canvas format", help="jpg (quality 95) or png", choices=CANVAS_FORMATS
    )
    workers: int = param(
        2,
        label="Workers",
        help="threads for the bad-frame test; 1 also decodes on one thread (as a batch runs)",
        min=1,
        max=64,
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.square_size % self.patch_size:
            raise ValueError(
                f"Invalid square size ({self.square_size!r}). Supported values are multiples of the "
                f"patch size ({self.patch_size})."
            )
        if self.signal == "mvres" and self.w_mv + self.w_res <= 0:
            raise ValueError(
                f"Invalid w mv + w res ({self.w_mv + self.w_res!r}). Supported values are a sum above 0."
            )

    def stage_configs(self) -> dict[str, Any]:
        """The config of every step of the onevision recipe, derived from these options."""
        return {
            "probe": probe_mod.ProbeConfig(profile="clean"),
            "sample": sample_mod.SampleConfig(
                frame_sampling_mode="uniform_count", num_sampled_frames=self.seq_len_frames
            ),
            "keyframes": keyframes_mod.KeyframeConfig(
                avoid_keyframes=False, frame_sampling_mode="uniform_count"
            ),
            "geometry": LetterboxConfig(square_size=self.square_size, patch_size=self.patch_size),
            "decode": SignalConfig(
                kind=self.signal,
                mv_weight=self.w_mv,
                residual_weight=self.w_res,
                percentile=self.pct,
                threads=decoder_thread_count(self.workers),
            ),
            "quality": quality_mod.QualityConfig(threads=self.workers),
            "select": TopKConfig(
                num_images=self.num_images,
                topk_mode=self.topk_mode,
                time_bucket_count=self.time_bucket_count,
                static_fallback=self.static_fallback,
                static_abs_thresh=self.static_abs_thresh,
                static_rel_thresh=self.static_rel_thresh,
                static_uniform_frames=self.static_uniform_frames,
            ),
            "pack": pack_mod.PackConfig(images_per_group=self.num_images),
        }

    # -- the cvp option names the output folder and the views read --------------------------
    # One group of every sampled frame; frame 0 its anchor; clean profile; pixels from a
    # normal decode; no keyframe avoidance.

    @property
    def profile(self) -> str:
        return "clean"

    @property
    def images_per_group(self) -> int:
        return self.num_images

    @property
    def group_size(self) -> int:
        return self.seq_len_frames

    @property
    def min_group_frames(self) -> int:
        return self.seq_len_frames

    @property
    def max_group_frames(self) -> int:
        return self.seq_len_frames

    @property
    def grouping_mode(self) -> str:
        return "single"

    @property
    def readiness_sum_threshold_mode(self) -> str:
        return "none"

    @property
    def readiness_norm_sum_threshold(self) -> float:
        return 0.0

    @property
    def avoid_keyframes(self) -> bool:
        return False

    @property
    def pixel_source(self) -> str:
        return "full_decode"

    @property
    def score(self) -> str:
        return self.signal

    @property
    def bitcost_grid(self) -> str:
        return "none"

    @property
    def iframe_score_clip_mode(self) -> str:
        return "none"

    @property
    def iframe_score_clip_percentile(self) -> float:
        return 0.0
