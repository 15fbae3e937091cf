"""Comparison settings: CompareConfig, the codec list, CRF parsing, speeds and each codec's signal."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import native
from backend.config import param, validate_fields
from backend.stages.decode import SCORE_SIGNALS

CODECS: tuple[str, ...] = ("h264", "hevc", "vp9", "av1")
CRF_RANGES: dict[str, tuple[int, int]] = {"h264": (0, 51), "hevc": (0, 51), "vp9": (0, 63), "av1": (1, 63)}
SPEEDS: tuple[str, ...] = ("fast", "medium", "slow")
FALLBACK_SCORES: tuple[str, ...] = ("mv", "residual", "mvres", "pkt_energy")

# Signals each codec can give exactly or at all (docs/signals.md): bitcost needs cvp's patched
# reader, qp needs exported QP tables; the flow/frame-difference signals work everywhere.
_SCORE_CODECS: dict[str, tuple[str, ...]] = {
    "bitcost": native.BITCOST_CODECS,
    "qp": ("h264", "vp9"),
}


@dataclass(frozen=True, kw_only=True)
class CompareConfig:
    """How the variants are encoded and which signal each one is selected with."""

    codecs: tuple[str, ...] = param(
        CODECS, label="Codecs", help="variants to encode: h264 (libx264), hevc (libx265), vp9, av1 (SVT)"
    )
    gop: int = param(
        32, label="GOP", help="frames from one keyframe to the next, every codec", min=1, max=100000
    )
    bframes: int = param(
        0,
        label="B-frames",
        help="B-frames between references (h264, hevc); VP9 gets alt-ref frames, AV1 a hierarchy",
        min=0,
        max=16,
    )
    crf_h264: int = param(23, label="CRF h264", help="libx264 constant rate factor", min=0, max=51)
    crf_hevc: int = param(28, label="CRF hevc", help="libx265 constant rate factor", min=0, max=51)
    crf_vp9: int = param(32, label="CRF vp9", help="libvpx-vp9 constant quality level", min=0, max=63)
    crf_av1: int = param(35, label="CRF av1", help="SVT-AV1 constant rate factor", min=1, max=63)
    bitrate_kbps: int = param(
        0,
        label="Target bitrate (kb/s)",
        help="0: constant quality (CRF); else one target for all",
        min=0,
        max=1_000_000,
    )
    speed: str = param("fast", label="Speed", help="encoder preset tier", choices=SPEEDS)
    max_frames: int = param(
        0, label="Max frames", help="encode only the first N frames (0: all)", min=0, max=10_000_000
    )
    max_side: int = param(
        0,
        label="Max side",
        help="downscale so the longer side is at most this (0: source size)",
        min=0,
        max=16384,
    )
    score: str = param(
        "bitcost", label="Score", help="selection signal where the codec has it", choices=SCORE_SIGNALS
    )
    fallback_score: str = param(
        "residual",
        label="Fallback score",
        help="signal for codecs without the score (AV1 has no bitcost)",
        choices=FALLBACK_SCORES,
    )
    measure_reader: bool = param(
        True, label="Measure fast reader", help="also measure cvp's fast reader (h264, hevc, vp9)"
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        codecs = self.codecs
        if (
            not isinstance(codecs, tuple)
            or not 1 <= len(codecs) <= 4
            or len(set(codecs)) != len(codecs)
            or any(c not in CODECS for c in codecs)
        ):
            raise ValueError(
                f"Invalid codecs ({codecs!r}). Supported values are 1 to 4 distinct names of "
                f"{', '.join(repr(c) for c in CODECS)}."
            )
        if 0 < self.max_side < 16:
            raise ValueError(
                f"Invalid max side ({self.max_side}). Supported values are 0 (source size) or 16 to 16384."
            )

    def crf(self, codec: str) -> int:
        """The quality setting of one codec."""
        return int(getattr(self, f"crf_{codec}"))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"codecs": list(self.codecs)}


def parse_crf(text: str, *, codecs: Sequence[str] = CODECS) -> dict[str, int]:
    """``"23"`` (every codec) or ``"h264=23,av1=35"`` → {``crf_h264``: 23, …} for CompareConfig.

    Raises
    ------
    ValueError : an unknown codec name or a value that is not an integer.
    """
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        targets = [name.strip()] if sep else list(codecs)
        raw = value if sep else name
        for codec in targets:
            if codec not in CODECS:
                raise ValueError(f"Invalid codec ({codec!r}). Supported values are {', '.join(CODECS)}.")
            try:
                out[f"crf_{codec}"] = int(raw)
            except ValueError:
                raise ValueError(f"Invalid crf ({raw.strip()!r}). Supported values are integers.") from None
    return out


def score_for(codec: str, config: CompareConfig) -> tuple[str, str]:
    """The selection signal a codec's variant uses, and why.

    Returns
    -------
    (score name, note): the configured score where the codec has it, otherwise the fallback;
    e.g. ``("residual", "bitcost unavailable for av1 …; residual stands in")``.
    """
    supported = _SCORE_CODECS.get(config.score)
    if config.score == "bitcost" and not native.bitcost_reader_available():
        supported = ()
    if supported is None or codec in supported:
        return config.score, f"{config.score} (as configured)"
    why = (
        "cvp's patched reader is not installed"
        if config.score == "bitcost" and not native.bitcost_reader_available()
        else f"{config.score} exists for {', '.join(supported)} only"
    )
    return (
        config.fallback_score,
        f"{config.score} unavailable for {codec} ({why}); {config.fallback_score} stands in",
    )
