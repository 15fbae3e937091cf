"""Run summary view: headline figures and warnings, and the canvas gallery."""

from __future__ import annotations

import numpy as np

from backend.pipeline import RunResult


def prepare_summary(result: RunResult) -> str:
    """Markdown with the run's headline figures and every warning that fired."""
    info = result.info
    lines = [
        f"**{info.path}** — {info.codec_name} {info.width}×{info.height}, {info.fps:.4g} fps, "
        f"{info.total_frames} frames ({info.frame_count_source})",
        f"Profile **{result.options.profile}**: {result.candidates.frame_indices.size} candidates → "
        f"{len(result.selection.groups)} groups → {result.canvases.images.shape[0]} canvases, "
        f"{int(result.canvases.tokens[:, 7].sum())} valid tokens of {result.canvases.tokens.shape[0]}; "
        f"pipeline {result.timings_secs.get('total', 0.0):.2f} s",
    ]
    lines = [lines[0], "", lines[1]]
    if result.warnings:
        lines.append("")
        lines.append(f"Warnings ({len(result.warnings)}):")
        shown = result.warnings[:20]
        lines += [f"- `{w.code}` {w.message}" for w in shown]
        if len(result.warnings) > len(shown):
            lines.append(f"- … {len(result.warnings) - len(shown)} more")
    return "\n".join(lines)


def prepare_gallery(result: RunResult) -> list[tuple[np.ndarray, str]]:
    """(canvas RGB, caption) pairs for a gallery."""
    out = []
    for c, image in enumerate(result.canvases.images):
        kind = "anchor" if c % result.options.images_per_group == 0 else "blocks"
        out.append((image, f"canvas {c} · group {int(result.canvases.canvas_group_index[c])} · {kind}"))
    return out
