"""Run summary view: headline figures and warnings, and the canvas gallery."""

from __future__ import annotations

import html

import numpy as np

from backend.pipeline import RunResult
from views.wording import plural


def aspect_note(result: RunResult) -> str:
    """How the frames are stored and shown, for anamorphic video ('' for square pixels)."""
    info = result.info
    num, den = info.sample_aspect_ratio
    if num == den:
        return ""
    h, w = result.geometry.processed_hw
    return (
        f"Anamorphic: stored {info.width}×{info.height} with pixel aspect (SAR) {num}:{den}, shown at its "
        f"display aspect {info.display_aspect:.3g}:1; processed at the storage aspect ({w}×{h})."
    )


def prepare_summary(
    result: RunResult, *, pipeline_secs: float | None = None, reopen_secs: float | None = None
) -> str:
    """Markdown with the run's headline figures and every warning that fired.

    ``pipeline_secs``: the stored run's pipeline time (default: the result's own total);
    ``reopen_secs``: what reopening it cost, shown apart when given.
    """
    info = result.info
    total = result.timings_secs.get("total", 0.0) if pipeline_secs is None else pipeline_secs
    reopen = "" if reopen_secs is None else f" (reopened from the cache in {reopen_secs:.2f} s)"
    lines = [
        f"**{info.path}** — {info.codec_name} {info.width}×{info.height}, {info.fps:.4g} fps, "
        f"{info.total_frames} frames ({info.frame_count_source})",
        "",
        f"Profile **{result.options.profile}**: {result.candidates.frame_indices.size} candidates → "
        f"{plural(len(result.selection.groups), 'group')} → "
        f"{plural(result.canvases.images.shape[0], 'canvas', 'canvases')}, "
        f"{int(result.canvases.tokens[:, 7].sum())} valid tokens of {result.canvases.tokens.shape[0]}; "
        f"pipeline {total:.2f} s{reopen}",
    ]
    note = aspect_note(result)
    if note:
        lines += ["", note]
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
