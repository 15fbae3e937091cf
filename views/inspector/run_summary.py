"""Run summary view: headline figures and warnings, and the canvas gallery."""

from __future__ import annotations

import html

import numpy as np

from backend.codecs import canonical_codec
from backend.pipeline import RunResult
from backend.records import VideoInfo
from views.wording import plural

SAR_TOLERANCE = 0.01
"""Pixel aspects within 1 % of square are not called anamorphic. Such ratios (427:426 is 0.2 %)
are rounding left by an encoder that derived the SAR from a display size; 1 % of a 720 px row
is 7 px, which no one sees, while the smallest real anamorphic formats are far off square
(PAL 16:15 is 6.7 %, NTSC 10:11 9 %)."""
CODEC_LABELS: dict[str, str] = {
    "h264": "H.264",
    "hevc": "HEVC",
    "vp8": "VP8",
    "vp9": "VP9",
    "av1": "AV1",
    "mpeg4": "MPEG-4 Part 2",
    "mpeg2video": "MPEG-2",
}
"""How the summary names each codec (``backend.codecs.canonical_codec`` names)."""


def codec_label(codec_name: str) -> str:
    """The codec a probed name stands for, as readers name it, and the decoder when the probe
    named one: ``libdav1d`` → ``AV1 (decoder libdav1d)``, ``h264`` → ``H.264``."""
    codec = canonical_codec(codec_name)
    label = CODEC_LABELS.get(codec, codec.upper())
    return label if codec == codec_name.lower() else f"{label} (decoder {codec_name})"


def is_anamorphic(info: VideoInfo) -> bool:
    """Whether the pixel aspect (SAR) is more than :data:`SAR_TOLERANCE` from square."""
    num, den = info.sample_aspect_ratio
    return abs(num / max(1, den) - 1.0) > SAR_TOLERANCE


def aspect_note(result: RunResult) -> str:
    """How the frames are stored and shown, for anamorphic video ('' for pixels within
    :data:`SAR_TOLERANCE` of square)."""
    info = result.info
    num, den = info.sample_aspect_ratio
    if not is_anamorphic(info):
        return ""
    h, w = result.geometry.processed_hw
    return (
        f"Anamorphic: stored {info.width}×{info.height} with pixel aspect (SAR) {num}:{den}, shown at its "
        f"display aspect {info.display_aspect:.3g}:1; processed at the storage aspect ({w}×{h})."
    )


STOP_WORDS = {
    "budget": "the next item did not fit",
    "content": "the remaining blocks were worth less than the stop gain",
    "video_end": "every block that fits was kept",
}
"""Why a hard token budget stopped, in words (``backend.records.STOP_REASONS``)."""


def fallback_note(result: RunResult) -> str:
    """The declared fallback that ran instead of the selector asked for ('' when none did)."""
    fallback = result.fallback
    if fallback is None or fallback.fallback_reason is None:
        return ""
    return (
        f"**Fallback**: asked for **{html.escape(fallback.selector_requested)}**, ran "
        f"**{html.escape(fallback.selector_used)}** "
        f"({fallback.fallback_reason}: {html.escape(fallback.detail)})."
    )


def coverage_note(result: RunResult) -> str:
    """What the run showed of the video, from its coverage audit (``docs/audit.md``): observed
    frames of F, never-observed spans and the longest in seconds, the video's highest staleness."""
    from backend.audit.cached import cached_run_audit

    audit = cached_run_audit(result).coverage
    spans = int(audit.never_observed_spans.shape[0])
    longest = f", the longest {audit.longest_never_observed_secs:.3f} s" if spans else ""
    return (
        f"Coverage: **{audit.observed_frames} of {audit.frames}** frames observed; "
        f"{plural(spans, 'never-observed span')}{longest}; "
        f"max staleness {plural(audit.video_max_staleness_frames, 'frame')}."
    )


def budget_note(result: RunResult) -> str:
    """The hard token budget's outcome ('' for a run under its selector's own budget)."""
    outcome = result.selection.budget
    if outcome is None:
        return ""
    skipped = len(result.selection.skipped_group_indices)
    dropped = f"; {plural(skipped, 'group')} without room for its anchor" if skipped else ""
    return (
        f"Token budget **{outcome.token_budget}**: {outcome.tokens_used} used "
        f"({outcome.anchors} anchors, {plural(outcome.blocks, 'block')}), stopped by "
        f"**{outcome.stop_reason}**: {STOP_WORDS[outcome.stop_reason]} "
        f"(stop gain {outcome.stop_gain:g}){dropped}."
    )


def prepare_summary(result: RunResult, *, pipeline_secs: float | None = None, provenance: str = "") -> str:
    """Markdown with the run's headline figures and every warning that fired.

    ``pipeline_secs``: the stored run's pipeline time (default: the result's own total);
    ``provenance``: where the run on screen comes from (computed now, or a stored run reopened
    and at what cost), shown in brackets after the pipeline time when given.
    """
    info = result.info
    total = result.timings_secs.get("total", 0.0) if pipeline_secs is None else pipeline_secs
    reopen = f" ({provenance})" if provenance else ""
    lines = [
        f"**{info.path}** — {codec_label(info.codec_name)} {info.width}×{info.height}, {info.fps:.4g} fps, "
        f"{info.total_frames} frames ({info.frame_count_source})",
        "",
        f"Profile **{result.options.profile}**: {result.candidates.frame_indices.size} candidates → "
        f"{plural(len(result.selection.groups), 'group')} → "
        f"{plural(result.canvases.count, 'canvas', 'canvases')}, "
        f"{int(result.canvases.tokens[:, 7].sum())} valid tokens of {result.canvases.tokens.shape[0]}; "
        f"pipeline {total:.2f} s{reopen}",
    ]
    # The coverage line ends the headline paragraph (a hard break, no paragraph gap): at
    # 1600×1000 the viewer's slider must stay on screen under the summary.
    lines[-1] += "  \n" + coverage_note(result)
    note = aspect_note(result)
    if note:
        lines += ["", note]
    fell = fallback_note(result)
    if fell:
        lines += ["", fell]
    budget = budget_note(result)
    if budget:
        lines += ["", budget]
    if result.warnings:
        # Folded: a long list would push the viewer below the fold.
        shown = result.warnings[:20]
        items = "".join(f"<li><code>{w.code}</code> {html.escape(w.message)}</li>" for w in shown)
        more = len(result.warnings) - len(shown)
        if more:
            items += f"<li>… {more} more</li>"
        lines += [
            "",
            f"<details><summary>{plural(len(result.warnings), 'warning')}</summary>"
            f"<ul>{items}</ul></details>",
        ]
    return "\n".join(lines)


def prepare_gallery(result: RunResult) -> list[tuple[np.ndarray, str]]:
    """(canvas RGB, caption) pairs for a gallery."""
    out = []
    for c, image in enumerate(result.canvases.images):
        kind = "anchor" if c % result.options.images_per_group == 0 else "blocks"
        out.append((image, f"canvas {c} · group {int(result.canvases.canvas_group_index[c])} · {kind}"))
    return out
