"""A synthetic RunResult built from numpy alone: view tests get a whole run without cvp or a decode.

Every record is derived by hand from a few parameters, so a test can state its expectation from
them: the candidates are the sampled frames with ``moved`` keyframes replaced, the groups split the
candidates evenly, each group's kept blocks are its top-``budget`` blocks after the anchor, and the
canvases hold the anchor frame then the kept blocks in (t, block row, block col) order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from backend.pipeline import RunResult, SelectionOptions
from backend.records import (
    Candidates,
    Canvases,
    DecodedFrames,
    FrameQuality,
    Geometry,
    Groups,
    GroupSelection,
    GroupSpec,
    ReadinessStep,
    ScoreMaps,
    Selection,
    VideoInfo,
)

MB = 16
"""Side of the synthetic bitcost grid's cells (H.264 macroblocks), pixels."""
KEYFRAME_BYTES = 40_000
"""Packet size of every keyframe; other frames get 2,000–3,499 bytes."""


def synthetic_run(
    *,
    frames: int = 150,
    hw: tuple[int, int] = (112, 112),
    groups: int = 3,
    keyframes: Sequence[int] = (0, 90),
    sampled: Sequence[int] | None = None,
    moved: Sequence[tuple[int, int]] = (),
    grouping: Literal["readiness", "fixed"] = "readiness",
) -> RunResult:
    """A consistent run of a ``frames``-frame, 30 fps H.264 video stored at ``hw`` (no upscaling).

    Parameters
    ----------
    frames : int
        Frames of the video (one packet each, presentation order).
    hw : tuple of int
        (H, W) of the video and of the processed frames; a multiple of patch × block size (28).
    groups : int
        Groups the candidates are split into, as evenly as possible (the first ones one longer).
    keyframes : sequence of int
        Bitstream keyframes.
    sampled : sequence of int, optional
        The sampler's frames (default: every frame).
    moved : sequence of (int, int)
        Keyframes avoidance moved: ``(from, to)`` replaces ``from`` among the candidates by ``to``.
    grouping : {"readiness", "fixed"}
        ``readiness``: a trace per group whose last step passes and stops it; ``fixed``: no trace.

    Returns
    -------
    RunResult
        With n candidates: pixels (n, H, W, 3) uint8, score grids (H/16, W/16), patch scores
        (n, H/14, W/14), block scores (n, H/28 · W/28), ``options.images_per_group`` canvases
        per group.
    """
    options = SelectionOptions(grouping_mode=grouping)
    sampled_ids = np.asarray(range(frames) if sampled is None else sampled, dtype=np.int32)
    swap = dict(moved)
    fids = np.asarray([swap.get(int(f), int(f)) for f in sampled_ids], dtype=np.int32)
    info = _info(frames, hw, tuple(keyframes))
    candidates = Candidates(
        frame_indices=fids,
        sampled_frame_indices=sampled_ids,
        keyframe_indices=tuple(keyframes) if options.avoid_keyframes else (),
        moved=tuple((int(a), int(b)) for a, b in moved),
        debug={},
    )
    geometry = Geometry(orig_hw=hw, prepared_hw=hw, processed_hw=hw, patch=options.patch, block_size=2)
    decoded = _decoded(fids, hw, info)
    quality = FrameQuality(good=np.ones(fids.size, bool), reasons=("",) * fids.size)
    scores = _scores(decoded, geometry)
    ipg = options.images_per_group
    budget = (ipg - 1) * geometry.patches_per_canvas // geometry.block_size**2
    group_records = _groups(fids, scores.block_scores, groups, budget, readiness=grouping == "readiness")
    block_cols = geometry.block_grid_hw[1]
    picks = (_group_selection(s, fids, scores.block_scores, budget, block_cols) for s in group_records.specs)
    selection = Selection(groups=tuple(picks), skipped_group_indices=())
    return RunResult(
        options=options,
        info=info,
        candidates=candidates,
        geometry=geometry,
        decoded=decoded,
        quality=quality,
        scores=scores,
        groups=group_records,
        selection=selection,
        canvases=_canvases(selection, decoded, geometry, ipg),
        warnings=(),
        timings_secs={},
    )


def _info(frames: int, hw: tuple[int, int], keyframes: tuple[int, ...]) -> VideoInfo:
    index = np.arange(frames)
    is_key = np.isin(index, keyframes)
    sizes = np.where(is_key, KEYFRAME_BYTES, 2000 + (index * 37) % 1500).astype(np.int64)
    fps = 30.0
    return VideoInfo(
        path="synthetic.mp4",
        size_bytes=int(sizes.sum()),
        format_name="mov,mp4,m4a,3gp,3g2,mj2",
        codec_name="h264",
        width=hw[1],
        height=hw[0],
        fps=fps,
        total_frames=frames,
        frame_count_source="header",
        duration_secs=frames / fps,
        stream_bit_rate=int(sizes.sum() * 8 * fps / frames),
        format_bit_rate=0,
        start_pts_secs=0.0,
        packet_pts_secs=index / fps,
        packet_size_bytes=sizes,
        packet_is_keyframe=is_key,
        stss_keyframes=keyframes,
        has_programs=False,
    )


def _decoded(fids: np.ndarray, hw: tuple[int, int], info: VideoInfo) -> DecodedFrames:
    """Diagonal ramps (luma 20–219) and a bitcost grid per frame that peaks at a moving cell."""
    h, w = hw
    yy, xx = np.mgrid[0:h, 0:w]
    ramp = (xx + yy)[None] + 3 * fids[:, None, None]
    pixels = np.repeat(((ramp % 200) + 20).astype(np.uint8)[..., None], 3, axis=3)
    gh, gw = h // MB, w // MB
    gy, gx = np.mgrid[0:gh, 0:gw]
    grids = []
    for f in fids.tolist():
        cy, cx = f % gh, (f // gh) % gw
        grids.append((1.0 + 100.0 / (1.0 + (gy - cy) ** 2 + (gx - cx) ** 2)).astype(np.float32))
    keys = set(info.keyframe_indices)
    pict = tuple("I" if f in keys else ("P" if f % 3 == 0 else "B") for f in fids.tolist())
    return DecodedFrames(
        frame_indices=fids,
        pixels=pixels,
        grids=tuple(grids),
        grid_key="mb_bit_cost",
        pict_types=pict,
        bitcost_source=fids.copy(),
        pixel_source="fast_reader",
    )


def _scores(decoded: DecodedFrames, geometry: Geometry) -> ScoreMaps:
    """Grids scaled to [0, 1] per frame; patch and block sums of their nearest-neighbour upsampling."""
    h, w = geometry.processed_hw
    p, b = geometry.patch, geometry.block_size
    norm = tuple((g - g.min()) / max(float(g.max() - g.min()), 1e-6) for g in decoded.grids)
    stack = np.stack(norm)
    rows, cols = np.arange(h) * stack.shape[1] // h, np.arange(w) * stack.shape[2] // w
    full = stack[:, rows][:, :, cols]
    n, (ph, pw) = stack.shape[0], geometry.grid_hw
    patch_scores = full.reshape(n, ph, p, pw, p).sum(axis=(2, 4)).astype(np.float32)
    block_scores = patch_scores.reshape(n, ph // b, b, pw // b, b).sum(axis=(2, 4)).reshape(n, -1)
    return ScoreMaps(
        grids=tuple(g.astype(np.float32) for g in norm),
        processed_hw=(h, w),
        patch_scores=patch_scores,
        block_scores=block_scores.astype(np.float32),
        iframe_clip_cap=None,
    )


def _topk_sum(block_scores: np.ndarray, start: int, end: int, budget: int) -> float:
    """Sum of the ``budget`` best blocks of candidates start+1 … end−1 (the anchor's are kept whole)."""
    flat = np.sort(block_scores[start + 1 : end].ravel())[::-1]
    return float(flat[:budget].sum())


def _groups(
    fids: np.ndarray, block_scores: np.ndarray, count: int, budget: int, *, readiness: bool
) -> Groups:
    """``count`` even slices of the candidates; in readiness mode a trace from 8 frames to the group's end."""
    n, first = fids.size, 8
    bounds = np.cumsum([0] + [n // count + (i < n % count) for i in range(count)])
    slices = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
    # The threshold every group's last window reaches (and, having fewer bins, no earlier one passes).
    threshold = min(_topk_sum(block_scores, s, e, budget) for s, e in slices) if readiness else 0.0
    need = 3
    specs, trace = [], []
    for g, (start, end) in enumerate(slices):
        reason = "readiness_threshold_low_gain" if readiness else "fixed"
        prev: float | None = None
        for stop in range(min(start + first, end), end + 1) if readiness else ():
            total, last = _topk_sum(block_scores, start, stop, budget), stop == end
            trace.append(
                ReadinessStep(
                    group_index=g,
                    start=start,
                    end=stop,
                    frame_index_added=int(fids[stop - 1]),
                    topk_sum=total,
                    threshold=threshold,
                    covered_bins=need if last else need - 1,
                    needed_bins=need,
                    marginal_gain=1.0 if prev is None else (total - prev) / max(abs(prev), 1e-6),
                    passed=last,
                    decision="stop" if last else "continue",
                    reason="synthetic: ready at the group's end" if last else "synthetic: too few bins",
                )
            )
            prev = total
        specs.append(GroupSpec(g, start, end, reason, {"topk_sum": prev, "covered_bins": need}))
    return Groups(
        specs=tuple(specs), threshold=threshold, threshold_debug={}, trace=tuple(trace), dropped_tail=None
    )


def _group_selection(
    spec: GroupSpec, fids: np.ndarray, block_scores: np.ndarray, budget: int, block_cols: int
) -> GroupSelection:
    """The anchor is the group's first frame; the kept blocks its ``budget`` best after it."""
    scores = block_scores[spec.start + 1 : spec.end]  # (G-1, blocks), t = row + 1
    order = np.argsort(-scores.ravel(), kind="stable")[:budget]
    t, flat = order // scores.shape[1] + 1, order % scores.shape[1]
    ranked = np.stack([t, flat], axis=1).astype(np.int32)
    ranked_scores = scores.ravel()[order].astype(np.float32)
    raster = np.lexsort((flat, t))
    kept = np.stack([t, flat // block_cols, flat % block_cols], axis=1)[raster].astype(np.int32)
    return GroupSelection(
        group_index=spec.group_index,
        start=spec.start,
        end=spec.end,
        frame_indices=tuple(int(f) for f in fids[spec.start : spec.end]),
        anchor_swapped_with=None,
        kept=kept,
        kept_scores=ranked_scores[raster],
        ranked=ranked,
        ranked_scores=ranked_scores,
        candidate_count=int(scores.size),
        budget=budget,
        cutoff_score=float(ranked_scores[-1]) if ranked_scores.size else float("-inf"),
    )


def _canvases(selection: Selection, decoded: DecodedFrames, geometry: Geometry, ipg: int) -> Canvases:
    """Canvas 0 of a group: its anchor frame; canvases 1 … ipg−1: its kept blocks in raster slots."""
    h, w = geometry.processed_hw
    p, b = geometry.patch, geometry.block_size
    ph, pw = geometry.grid_hw
    bw = pw // b
    per_canvas = (ph // b) * bw
    images, tokens, owners = [], [], []
    for sel in selection.groups:
        rows = sel.candidate_rows()
        group_images = np.zeros((ipg, h, w, 3), np.uint8)
        group_tokens = np.full((ipg, ph, pw, 8), -1, np.int32)
        group_tokens[..., 7] = 0
        anchor = int(rows[0])
        group_images[0] = decoded.pixels[anchor]
        pr, pc = np.mgrid[0:ph, 0:pw]
        anchor_fid, one = int(decoded.frame_indices[anchor]), np.ones_like(pr)
        fields = (anchor_fid * one, pr, pc, 0 * one, pr, pc, sel.group_index * one, one)
        group_tokens[0] = np.stack(fields, axis=-1)
        for slot, (t, br, bc) in enumerate(sel.kept.tolist()[: (ipg - 1) * per_canvas]):
            canvas, at = 1 + slot // per_canvas, slot % per_canvas
            qr, qc = at // bw, at % bw
            src = decoded.pixels[int(rows[t])]
            group_images[canvas, qr * b * p : (qr + 1) * b * p, qc * b * p : (qc + 1) * b * p] = src[
                br * b * p : (br + 1) * b * p, bc * b * p : (bc + 1) * b * p
            ]
            for dy in range(b):
                for dx in range(b):
                    y, x = qr * b + dy, qc * b + dx
                    group_tokens[canvas, y, x] = (
                        decoded.frame_indices[int(rows[t])],
                        br * b + dy,
                        bc * b + dx,
                        canvas,
                        y,
                        x,
                        sel.group_index,
                        1,
                    )
        # canvas_index counts over the whole run, not within the group.
        group_tokens[..., 3] = np.where(
            group_tokens[..., 7] == 1, group_tokens[..., 3] + len(owners), group_tokens[..., 3]
        )
        images.append(group_images)
        tokens.append(group_tokens.reshape(-1, 8))
        owners += [sel.group_index] * ipg
    return Canvases(
        images=np.concatenate(images) if images else np.zeros((0, h, w, 3), np.uint8),
        tokens=np.concatenate(tokens) if tokens else np.zeros((0, 8), np.int32),
        canvas_group_index=np.asarray(owners, dtype=np.int32),
    )
