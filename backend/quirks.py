"""The cvp 0.2.5 defects the profiles reproduce: which profile has each one, and its warning code.

This table is the single source of the parity/clean differences: stages ask
``quirk_on(config.profile, name)`` instead of comparing profile names, and the warnings a
defect records take their code from here (:func:`quirk_warning`). Numbers are the items of
§18 of ``specs/codec-video-prep-0.2.5.md``; ``section`` says where the spec describes the
behaviour (some are described only in a stage's section and have no §18 number).

It sits below the stages and the pipeline and imports only ``backend.config`` and
``backend.records``, so every stage may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from backend.config import PROFILES
from backend.records import RunWarning

PARITY = "parity"
"""The profile that reproduces cvp 0.2.5, defects and limits included."""


@dataclass(frozen=True)
class Quirk:
    """One behaviour of a reference implementation that a profile reproduces."""

    name: str
    number: int | None
    """Item of the reference's defect list (cvp: spec §18), None when the spec describes it only in
    ``section``."""
    section: str
    profiles: tuple[str, ...]
    """The switch: the profiles that reproduce it (both, for behaviours clean keeps)."""
    warning: str | None
    """Code of the RunWarning a run records when it fires; None when nothing is recorded."""
    summary: str
    reference: str = "cvp"
    """The implementation it belongs to, as warning messages name it."""
    item: str = "quirk"
    """What that reference's numbered list calls an entry (``quirk``, ``defect``)."""

    @property
    def cite(self) -> str:
        """How warning messages name it, e.g. ``cvp quirk 13`` or ``cvp, spec §2``."""
        if self.number is not None:
            return f"{self.reference} {self.item} {self.number}"
        return f"{self.reference}, spec {self.section}"


@dataclass(frozen=True)
class QuirkTable:
    """One reference's quirks by name, and the lookups the stages make in them."""

    quirks: Mapping[str, Quirk]

    def quirk(self, name: str) -> Quirk:
        """The table entry called ``name``; unknown names list the known ones."""
        try:
            return self.quirks[name]
        except KeyError:
            known = ", ".join(repr(n) for n in self.quirks)
            raise ValueError(f"Invalid quirk ({name!r}). Supported values are {known}.") from None

    def quirk_on(self, profile: str, name: str) -> bool:
        """Whether ``profile`` reproduces the quirk called ``name``.

        Examples
        --------
        >>> quirk_on("parity", "tail_dropped"), quirk_on("clean", "tail_dropped")
        (True, False)
        """
        if profile not in PROFILES:
            known = ", ".join(repr(p) for p in PROFILES)
            raise ValueError(f"Invalid profile ({profile!r}). Supported values are {known}.")
        return profile in self.quirk(name).profiles

    def quirk_warning(self, name: str, message: str) -> RunWarning:
        """The warning the quirk ``name`` records, with its code from the table."""
        code = self.quirk(name).warning
        if code is None:
            raise ValueError(
                f"Invalid quirk ({name!r}) for a warning. Supported values are quirks with a code."
            )
        return RunWarning(code, message)

    def of(self, profile: str) -> tuple[Quirk, ...]:
        """Every quirk ``profile`` reproduces, in table order."""
        return tuple(q for q in self.quirks.values() if self.quirk_on(profile, q.name))


_BOTH = PROFILES
_PARITY = (PARITY,)

QUIRKS: Mapping[str, Quirk] = MappingProxyType(
    {
        q.name: q
        for q in (
            # probe
            Quirk(
                "frame_count_estimated",
                None,
                "§2",
                _PARITY,
                "frame_count_estimated",
                "no nb_frames in the header (MPEG-TS, MKV, WebM): the frame count is round(fps × duration); "
                "clean counts the video packets",
            ),
            # sampling and keyframes
            Quirk(
                "pkt_peak_is_fps",
                3,
                "§18.3",
                _PARITY,
                "pkt_peak_is_fps",
                "frame_sampling_mode pkt_peak silently runs the fps sampler; clean runs pkt_size_peak",
            ),
            Quirk(
                "ffprobe_keyframes",
                None,
                "§4.1",
                _PARITY,
                None,
                "keyframes from the MP4 stss box, else ffprobe's keyframe timestamps × fps (MPEG-TS start "
                "offset included); clean reads the bitstream keyframe flags",
            ),
            Quirk(
                "vp9_keyframes_all",
                9,
                "§18.9, §4.1",
                _PARITY,
                "vp9_keyframes_all",
                "ffprobe -skip_frame nokey is ignored for VP9, so every frame is a keyframe and "
                "keyframe avoidance does nothing",
            ),
            Quirk(
                "keyframes_kept",
                None,
                "§4.2",
                _BOTH,
                "keyframes_kept",
                "a sampled keyframe with no non-keyframe within ±4 offsets stays a candidate "
                "(Candidates.stayed_keyframes)",
            ),
            Quirk(
                "keyframes_refilled",
                10,
                "§18.10, §4.3",
                _BOTH,
                None,
                "with N ≥ frame count the refill returns every frame, keyframes included, so a keyframe "
                "moved off is a candidate too (Candidates.refilled_keyframes; a fact, not a warning)",
            ),
            # geometry
            Quirk(
                "double_resize",
                13,
                "§18.13, §5",
                _PARITY,
                "double_resize",
                "when rounding overshoots max_pixels, frames are decoded at that size and resized again; "
                "clean rounds down once",
            ),
            Quirk(
                "upscaled",
                14,
                "§18.14, §5",
                _BOTH,
                "upscaled",
                "frames smaller than the pixel budget are enlarged to the nearest multiple of the factor",
            ),
            # decode
            Quirk(
                "width_not_multiple_of_16",
                11,
                "§18.11",
                _PARITY,
                None,
                "refused: partial macroblock columns misalign cvp's stretched bitcost grid",
            ),
            Quirk(
                "ts_codec_name",
                None,
                "§6.2",
                _PARITY,
                None,
                "the reader's codec name comes from an ffprobe call that prints it once per MPEG-TS "
                "program, so the adaptive grid falls to macroblocks there (HEVC .ts fails)",
            ),
            Quirk(
                "target_only_pruning",
                7,
                "§18.7, §14.5",
                _PARITY,
                None,
                "the reader computes only maps near a requested frame, so reordered P frames lose theirs "
                "under sparse sampling; clean reads every map",
            ),
            Quirk(
                "bitcost_backfill",
                7,
                "§18.7, §6.2",
                _PARITY,
                "bitcost_backfill",
                "a frame without bitcost gets a copy of the previous valid frame's bitcost, picture type "
                "and pixels (leading misses: the last valid frame); clean refuses missing maps",
            ),
            Quirk(
                "meta_backend_mislabelled",
                2,
                "§18.2",
                _PARITY,
                "meta_backend_mislabelled",
                'meta.json decode_backend is always "ffmpeg_native"; clean writes the real pixel source',
            ),
            # grouping, selection, packing
            Quirk(
                "group_limits_raised",
                None,
                "§11.1",
                _PARITY,
                "group_limits_raised",
                "readiness groups use max(4, min_group_frames) … max(that, max_group_frames); clean "
                "refuses limits it would raise",
            ),
            Quirk(
                "tail_dropped",
                15,
                "§18.15, §11.5",
                _PARITY,
                "tail_dropped",
                "fewer than max(4, min_group_frames) remaining candidates are never used; clean merges "
                "them into the last group",
            ),
            Quirk(
                "group_skipped",
                None,
                "§12",
                _PARITY,
                "group_skipped",
                "groups shorter than 4 frames (fixed grouping) get no canvases; clean packs them",
            ),
            Quirk(
                "selected_blocks_padded",
                16,
                "§18.16, §12.7",
                _PARITY,
                None,
                "group meta selected_blocks is the budget, padding included; clean counts the blocks kept",
            ),
            Quirk(
                "group_padded",
                None,
                "§12.5, §18.18",
                _BOTH,
                "group_padded",
                "a group with fewer candidate blocks than its budget (bad frames, short groups) is "
                "padded with black, invalid tokens",
            ),
        )
    }
)


TABLE = QuirkTable(QUIRKS)
quirk = TABLE.quirk
quirk_on = TABLE.quirk_on
quirk_warning = TABLE.quirk_warning
quirks_of = TABLE.of


def reproduces_cvp(profile: str) -> bool:
    """True for the profile bound to cvp's own scope (bitcost scores, cvp's reader pixels)."""
    return profile == PARITY
