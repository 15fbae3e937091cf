"""The lmms-video-utils 0.1.0 defects the llava-ov2 profiles reproduce: switch and warning code of each.

One table, like ``backend.quirks`` for codec-video-prep: the llava-ov2 stages ask
``quirk_on(profile, name)`` instead of comparing profile names, and every defect that fires in
a run records the warning its row names. Numbers are the items of §9 of
``specs/lmms-video-utils-0.1.0.md``; ``section`` is where the spec describes the behaviour.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType

from backend.quirks import PARITY, Quirk, QuirkTable

_PARITY = (PARITY,)
_defect = functools.partial(Quirk, reference="lmms-video-utils", item="defect")

QUIRKS: Mapping[str, Quirk] = MappingProxyType(
    {
        q.name: q
        for q in (
            _defect(
                "whole_video_decoded",
                1,
                "§3, §9.1",
                (),  # reproduced by neither profile: both stream and keep only the sampled frames
                "whole_video_decoded",
                "lmms-video-utils decodes every frame to RGB and keeps it in memory before sampling; "
                "both profiles decode in one streaming pass and keep only the sampled frames, and parity "
                "says how much the reference would have held",
            ),
            _defect(
                "vectors_race_frame_threads",
                None,
                "§5",
                (),  # reproduced by neither profile: a race gives no result to reproduce
                "motion_vectors_race_free",
                "the metadata pass exports motion vectors under frame threads, where FFmpeg's export "
                "races: on H.264 a few frames' vectors differ from a one-thread decode, a different "
                "set each run, so the reference's own mvwarp positions vary run to run; both profiles "
                "take the vectors from slice threads (equal to a one-thread decode), and parity keeps "
                "the frame-threaded packet attribution from a separate vector-free pass",
            ),
            _defect(
                "packet_size_by_output_order",
                2,
                "§5, §9.2",
                _PARITY,
                "packet_size_misattributed",
                "the first frame a packet's decode returns gets that packet's size, any other 0: under "
                "B-frames and frame threading that is another frame's packet (depends on the thread "
                "count); clean gives each frame its own packet's size, by presentation timestamp",
            ),
            _defect(
                "uniform_gops_drop_frames",
                3,
                "§6, §9.3",
                _PARITY,
                "frames_dropped",
                "the uniform partition clips each GOP to max_group_frames and drops the frames past the "
                "last GOP; clean adds GOPs until every sampled frame has one",
            ),
            _defect(
                "bilinear_truncated",
                4,
                "§4, §9.4",
                _PARITY,
                None,
                "frames are resized to the canvas with torch's bilinear interpolate (no antialiasing) and "
                "truncated to uint8; clean resizes with an area filter and rounds",
            ),
            _defect(
                "aspect_bent",
                5,
                "§4, §9.5",
                _PARITY,
                "aspect_bent",
                "the canvas grid rounds the stored aspect ratio (sample aspect ratio ignored) and frames "
                "are stretched to it; clean fits the grid to the display aspect ratio",
            ),
            _defect(
                "torch_tie_order",
                None,
                "§8",
                _PARITY,
                None,
                "equal block scores are ranked and cut in the order torch's CPU sort and top-k leave "
                "them (libstdc++ introsort/introselect); clean orders them by position",
            ),
            _defect(
                "short_gops_vanish",
                6,
                "§7, §9.6",
                _PARITY,
                "gop_skipped",
                "a GOP of one frame produces no canvas and no warning; clean merges it into its neighbour",
            ),
        )
    }
)


TABLE = QuirkTable(QUIRKS)
quirk = TABLE.quirk
quirk_on = TABLE.quirk_on
quirk_warning = TABLE.quirk_warning


def cite(name: str) -> str:
    """How warning messages name a defect, e.g. ``lmms-video-utils defect 3``."""
    return quirk(name).cite
