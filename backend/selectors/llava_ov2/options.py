"""llava-ov2 options: lmms-video-utils' CodecConfig fields, the canvas format and the profile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from backend.config import PROFILES, Profile, option_of, param, validate_fields
from backend.pipeline.recipe import SelectorOptions
from backend.selectors.llava_ov2.decode import StreamDecodeConfig
from backend.selectors.llava_ov2.geometry import CanvasConfig
from backend.selectors.llava_ov2.gop import GopConfig
from backend.selectors.llava_ov2.quota import QuotaConfig
from backend.selectors.llava_ov2.sample import LlavaSampleConfig
from backend.selectors.llava_ov2.score import ScoreConfig
from backend.stages.decode import decoder_thread_count
from backend.stages.pack import PackConfig
from backend.stages.probe import ProbeConfig

CANVAS_FORMATS = ("jpg", "png")


@dataclass(frozen=True, kw_only=True)
class LlavaOv2Options(SelectorOptions):
    """Every option of a llava-ov2 run, named as lmms-video-utils' ``CodecConfig``.

    Unset values of the reference (``None``) are 0 here: ``start_time``/``end_time`` 0 mean the
    whole video, ``target_fps`` 0 the canvas budget, ``max_frames`` 0 no cap. Its ``backend`` and
    ``device`` do not apply (one decoder, no torch); ``bitcost_bin_seconds`` raised
    NotImplementedError there and is left out; ``min_pixels`` was validated only.
    """

    selector: ClassVar[str] = "llava-ov2"
    FRONT_OPTIONS: ClassVar[tuple[str, ...]] = (
        "profile",
        "target_canvas",
        "group_size",
        "images_per_group",
        "patch",
        "block",
        "max_pixels",
        "score_mode",
        "mv_edge_weight",
        "start_time",
        "end_time",
        "target_fps",
        "max_frames",
        "reference_threads",
        "needs_packet_attribution",
    )
    """Options that change the decode (the cached front); the others re-run only GOPs → packing."""
    SCORE_OPTIONS: ClassVar[tuple[str, ...]] = ()

    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity: reproduce lmms-video-utils 0.1.0 exactly, defects included; clean: fix its defects",
        choices=PROFILES,
    )
    target_canvas: int = option_of(LlavaSampleConfig, "target_canvas")
    group_size: int = option_of(LlavaSampleConfig, "group_size")
    images_per_group: int = option_of(LlavaSampleConfig, "images_per_group")
    patch: int = option_of(CanvasConfig, "patch")
    block: int = option_of(CanvasConfig, "block")
    max_pixels: int = option_of(CanvasConfig, "max_pixels")
    min_group_frames: int = option_of(GopConfig, "min_group_frames")
    max_group_frames: int = option_of(GopConfig, "max_group_frames")
    score_mode: str = option_of(ScoreConfig, "score_mode")
    mv_edge_weight: float = option_of(ScoreConfig, "mv_edge_weight")
    gop_mode: str = option_of(GopConfig, "gop_mode")
    bitcost_score_weight: float = option_of(ScoreConfig, "bitcost_score_weight")
    bitcost_score_mode: str = option_of(ScoreConfig, "bitcost_score_mode")
    start_time: float = option_of(LlavaSampleConfig, "start_time")
    end_time: float = option_of(LlavaSampleConfig, "end_time")
    target_fps: float = option_of(LlavaSampleConfig, "target_fps")
    max_frames: int = option_of(LlavaSampleConfig, "max_frames")
    canvas_format: str = param(
        "jpg", label="Canvas format", help="jpg (quality 95) or png", choices=CANVAS_FORMATS
    )
    reference_threads: int = option_of(StreamDecodeConfig, "reference_threads")
    workers: int = param(
        2,
        label="Decode workers",
        help="1 decodes on one thread and scores on it (as a batch runs); more lets FFmpeg choose its "
        "threads, as it always does when parity attributes packet sizes (they follow the decoder's "
        "frame threads), and scores on a second thread",
        min=1,
        max=64,
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        self.stage_configs()  # cross-field checks live in the stage configs

    @property
    def needs_packet_attribution(self) -> bool:
        """Whether the run reads packet sizes as the reference attributes them (parity, with bitcost
        GOPs or packet-size-weighted mvwarp scores): the decode then counts every frame and skips none."""
        weighted = self.score_mode != "framediff" and self.bitcost_score_mode != "off"
        return self.profile == "parity" and (self.gop_mode == "bitcost" or weighted)

    def codec_config(self) -> dict[str, Any]:
        """The same run as lmms-video-utils' ``fetch_codec_video(path, **codec_config())`` keywords.

        Examples
        --------
        >>> LlavaOv2Options(target_fps=2.0).codec_config()["target_fps"]
        2.0
        >>> LlavaOv2Options().codec_config()["end_time"] is None
        True
        """
        names = (
            "target_canvas",
            "group_size",
            "images_per_group",
            "patch",
            "block",
            "max_pixels",
            "min_group_frames",
            "max_group_frames",
            "score_mode",
            "mv_edge_weight",
            "gop_mode",
            "bitcost_score_weight",
            "bitcost_score_mode",
        )
        out: dict[str, Any] = {k: getattr(self, k) for k in names}
        for name in ("start_time", "end_time", "target_fps", "max_frames"):
            value = getattr(self, name)
            out[name] = value if value > 0 else None  # 0 here is the reference's None
        return out | {"backend": "pyav", "device": "cpu"}

    def stage_configs(self) -> dict[str, Any]:
        """The frozen config of every stage, derived from these options."""
        prof = self.profile
        return {
            "sample": LlavaSampleConfig(
                target_canvas=self.target_canvas,
                group_size=self.group_size,
                images_per_group=self.images_per_group,
                start_time=self.start_time,
                end_time=self.end_time,
                target_fps=self.target_fps,
                max_frames=self.max_frames,
            ),
            "geometry": CanvasConfig(
                patch=self.patch, block=self.block, max_pixels=self.max_pixels, profile=prof
            ),
            "decode": StreamDecodeConfig(
                score_mode=self.score_mode,
                mv_edge_weight=self.mv_edge_weight,
                reference_threads=self.reference_threads,
                skip_unwanted=not self.needs_packet_attribution,
                # Which decode call returns a frame depends on FFmpeg's frame threads: parity's
                # packet attribution keeps the reference's (FFmpeg's choice).
                threads=0 if self.needs_packet_attribution else decoder_thread_count(self.workers),
                score_thread=self.workers > 1,
                profile=prof,
            ),
            "group": GopConfig(
                gop_mode=self.gop_mode,
                target_canvas=self.target_canvas,
                images_per_group=self.images_per_group,
                min_group_frames=self.min_group_frames,
                max_group_frames=self.max_group_frames,
                profile=prof,
            ),
            "score": ScoreConfig(
                score_mode=self.score_mode,
                mv_edge_weight=self.mv_edge_weight,
                bitcost_score_weight=self.bitcost_score_weight,
                bitcost_score_mode=self.bitcost_score_mode,
            ),
            "select": QuotaConfig(images_per_group=self.images_per_group, profile=prof),
            "probe": ProbeConfig(profile="clean"),
            "pack": PackConfig(images_per_group=self.images_per_group, packer="quota"),
        }
