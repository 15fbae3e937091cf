"""Run summary view: headline figures, warnings, group table, canvases and a kept-block overlay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


GROUP_HEADERS = [
    "group",
    "candidates",
    "frames",
    "length",
    "anchor frame",
    "stop reason",
    "kept blocks",
]


def prepare_group_rows(result: RunResult) -> list[list[Any]]:
    """One row per group: bounds, anchor, stop reason and kept-block count."""
    sel_by_group = {s.group_index: s for s in result.selection.groups}
    ids = result.candidates.frame_indices
    rows = []
    for spec in result.groups.specs:
        sel = sel_by_group.get(spec.group_index)
        rows.append(
            [
                spec.group_index,
                f"{spec.start}–{spec.end - 1}",
                f"{int(ids[spec.start])}–{int(ids[spec.end - 1])}",
                spec.frame_count,
                sel.frame_indices[0] if sel else "skipped",
                spec.stop_reason,
                int(sel.kept.shape[0]) if sel else 0,
            ]
        )
    return rows


def prepare_gallery(result: RunResult) -> list[tuple[np.ndarray, str]]:
    """(canvas RGB, caption) pairs for a gallery."""
    out = []
    for c, image in enumerate(result.canvases.images):
        kind = "anchor" if c % result.options.images_per_group == 0 else "blocks"
        out.append((image, f"canvas {c} · group {int(result.canvases.canvas_group_index[c])} · {kind}"))
    return out


@dataclass(frozen=True)
class FrameView:
    """What the frame viewer shows for one candidate row."""

    image: np.ndarray
    """(H, W, 3) uint8 RGB with overlays."""
    caption: str


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


def prepare_frame(result: RunResult, row: int) -> FrameView:
    """A candidate frame with its kept blocks outlined (2-px border) and an anchor frame border.

    Parameters
    ----------
    row : candidate row, 0 ≤ row < n.
    """
    n = result.candidates.frame_indices.size
    if not 0 <= row < n:
        raise ValueError(f"Invalid row ({row}). Supported values are 0 to {n - 1}.")
    image = result.decoded.pixels[row].copy()
    f = result.geometry.patch * result.geometry.block_size
    kept = kept_blocks_by_row(result).get(row, [])
    for br, bc in kept:
        y0, x0 = br * f, bc * f
        block = image[y0 : y0 + f, x0 : x0 + f]
        block[:2], block[-2:], block[:, :2], block[:, -2:] = KEPT_RGB, KEPT_RGB, KEPT_RGB, KEPT_RGB
    is_anchor = row in anchor_rows(result)
    if is_anchor:
        image[:4], image[-4:], image[:, :4], image[:, -4:] = (
            ANCHOR_RGB,
            ANCHOR_RGB,
            ANCHOR_RGB,
            ANCHOR_RGB,
        )
    fid = int(result.candidates.frame_indices[row])
    pict = result.decoded.pict_types[row]
    caption = f"candidate {row} · frame {fid} · {pict} · " + (
        "anchor (whole frame kept)" if is_anchor else f"{len(kept)} kept blocks"
    )
    return FrameView(image=image, caption=caption)
