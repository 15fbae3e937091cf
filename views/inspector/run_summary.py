"""Run summary view: headline figures and warnings, the canvas gallery, kept blocks per frame."""

from __future__ import annotations

import numpy as np

from backend.pipeline import RunResult

KEPT_RGB = (255, 64, 32)
ANCHOR_RGB = (32, 200, 255)


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


def kept_blocks_by_row(result: RunResult) -> dict[int, list[tuple[int, int]]]:
    """Candidate row → kept (block_row, block_col) list."""
    out: dict[int, list[tuple[int, int]]] = {}
    for sel in result.selection.groups:
        rows = sel.candidate_rows()
        for t, br, bc in sel.kept.tolist():
            out.setdefault(int(rows[t]), []).append((br, bc))
    return out


def anchor_rows(result: RunResult) -> set[int]:
    """Candidate rows that are group anchors."""
    return {int(sel.candidate_rows()[0]) for sel in result.selection.groups}
