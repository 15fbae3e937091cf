"""Every selector's and preset's command-line options, sized for the 48-frame 320×192 test clips."""

from __future__ import annotations

TINY_CLIP_ARGS: dict[str, list[str]] = {
    "cvp": ["--num_sampled_frames", "24"],
    "llava-ov2": ["--selector", "llava-ov2", "--target_canvas", "8", "--score_mode", "mvwarp"],
    "uniform": ["--selector", "uniform", "--num_frames", "8"],
    # A 192-pixel square: the 320×192 frames become 192×115, letterboxed with bars above and below.
    "onevision": [
        "--selector",
        "onevision",
        "--seq_len_frames",
        "16",
        "--num_images",
        "3",
        "--square_size",
        "192",
    ],
    "mage-vl": ["--preset", "mage-vl", "--num_sampled_frames", "24"],
    "llava-ov2-release": ["--preset", "llava-ov2-release"],
}
"""Selector or preset name → its ``codec-lens select`` options (AV1 has no bitcost: cvp and its
presets take a signal there)."""
