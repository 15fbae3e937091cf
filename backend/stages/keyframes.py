"""Keyframe-avoidance stage: shift sampled keyframes to neighbours, dedupe and refill."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from backend.config import PROFILES, Profile, option_of, param, validate_fields
from backend.quirks import quirk_on, quirk_warning
from backend.records import Candidates, RunWarning, VideoInfo
from backend.stages.sample import SampleConfig, Sampled


@dataclass(frozen=True, kw_only=True)
class KeyframeConfig:
    """Keyframe avoidance parameters."""

    avoid_keyframes: bool = param(
        True, label="Avoid keyframes", help="move sampled keyframes to a neighbouring frame"
    )
    avoid_keyframe_offset: int = param(1, label="Offset", help="shift step in frames", min=1, max=64)
    frame_sampling_mode: str = option_of(
        SampleConfig, "frame_sampling_mode", help="how candidates were sampled; all_frames skips avoidance"
    )
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity lists keyframes like cvp (MP4 stss, else ffprobe's -skip_frame nokey, "
        "which reports every VP9 frame); clean reads the bitstream keyframe flags",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def keyframe_list(info: VideoInfo, *, profile: Profile) -> tuple[int, ...]:
    """Sorted keyframe indices with 0 included, as the given profile sees them."""
    total = info.total_frames
    if quirk_on(profile, "ffprobe_keyframes"):
        if info.stss_keyframes is not None:
            return info.stss_keyframes
        fps_use = info.fps if info.fps > 0 else 30.0
        # ffprobe's -skip_frame nokey is ignored by FFmpeg 5.1's VP9 decoder, so cvp
        # sees every frame as a keyframe there (spec quirk 9).
        all_key = info.codec_name == "vp9" and quirk_on(profile, "vp9_keyframes_all")
        mask = np.ones_like(info.packet_is_keyframe) if all_key else info.packet_is_keyframe
        ts = info.packet_pts_secs[mask]
        ids = {min(max(round(float(t) * fps_use), 0), total - 1) for t in ts if np.isfinite(t)}
    else:
        ids = {int(i) for i in info.keyframe_indices if i < total}
    out = sorted(ids)
    if not out or out[0] != 0:
        out = [0, *out]
    return tuple(out)


def _shift(
    ids: np.ndarray, keys: set[int], total: int, offset: int
) -> tuple[list[int], list[tuple[int, int]]]:
    step = max(1, offset)
    out: list[int] = []
    moved: list[tuple[int, int]] = []
    for raw in ids.tolist():
        fid0 = min(max(int(raw), 0), total - 1)
        if fid0 not in keys:
            out.append(fid0)
            continue
        new = fid0
        for d in range(step, 4 * step + 1, step):
            for cand in (fid0 + d, fid0 - d):
                if 0 <= cand < total and cand not in keys:
                    new = cand
                    break
            if new != fid0:
                break
        out.append(new)
        if new != fid0:
            moved.append((fid0, new))
    return out, moved


def _dedup_refill(ids: list[int], keys: set[int], total: int) -> list[int]:
    length = len(ids)
    seen: set[int] = set()
    kept: list[int] = []
    for raw in ids:
        fid = min(max(raw, 0), total - 1)
        if fid not in seen:
            seen.add(fid)
            kept.append(fid)
    if len(kept) >= length:
        return kept[:length]  # order preserved, no sort (cvp)
    seeds = np.asarray(sorted(kept) or [0], dtype=np.int64)
    free = np.asarray([f for f in range(total) if f not in seen and f not in keys], dtype=np.int64)
    if free.size:
        pos = np.searchsorted(seeds, free)
        left = np.abs(free - seeds[np.clip(pos - 1, 0, seeds.size - 1)])
        right = np.abs(seeds[np.clip(pos, 0, seeds.size - 1)] - free)
        dist = np.minimum(left, right)
        order = np.lexsort((free, np.abs(free - total // 2), dist))
        for f in free[order].tolist():
            if len(kept) >= length:
                break
            kept.append(int(f))
            seen.add(int(f))
    if len(kept) < length:
        for f in range(total):
            if len(kept) >= length:
                break
            if f not in seen:
                kept.append(f)
                seen.add(f)
    return sorted(kept)[:length]


def avoid_keyframes(sampled: Sampled, info: VideoInfo, *, config: KeyframeConfig) -> Candidates:
    """Shift sampled keyframes by ±1…±4 frames, dedupe, refill to the sampled count.

    Parameters
    ----------
    sampled : sampler output, (m,) frame indices.
    info : probe result (frame count, keyframes).
    config : whether to avoid and how keyframes are listed.

    Returns
    -------
    Candidates with ``frame_indices`` (n,) int32, n ≤ m (n < m only when the video
    has fewer than m frames). With N ≥ frame count the result is every frame,
    keyframes included (cvp's refill): those are listed by ``refilled_keyframes``, while
    ``keyframes_kept`` warns only of sampled keyframes that had no free neighbour
    (``stayed_keyframes``).
    """
    ids = sampled.frame_indices
    debug = dict(sampled.debug)
    warnings: list[RunWarning] = []
    if not config.avoid_keyframes or config.frame_sampling_mode == "all_frames":
        if config.avoid_keyframes:
            debug["avoid_keyframes_note"] = "ignored for all_frames sampling"
        return Candidates(
            frame_indices=ids.astype(np.int32),
            sampled_frame_indices=ids,
            keyframe_indices=(),
            moved=(),
            debug=debug,
            warnings=tuple(warnings),
        )
    total = info.total_frames
    keys_list = keyframe_list(info, profile=config.profile)
    keys = set(keys_list)
    shifted, moved = _shift(ids, keys, total, config.avoid_keyframe_offset)
    result = np.asarray(_dedup_refill(shifted, keys, total), dtype=np.int32)
    debug["keyframes_found"] = len(keys_list)
    debug["sampled_frames_after_keyframe_shift"] = int(result.size)
    # Without an stss box cvp asks ffprobe, which lists every VP9 frame (keyframe_list).
    if (
        info.codec_name == "vp9"
        and info.stss_keyframes is None
        and quirk_on(config.profile, "vp9_keyframes_all")
    ):
        warnings.append(
            quirk_warning(
                "vp9_keyframes_all",
                f"keyframe avoidance inactive: the probe lists all {len(keys_list)} frames "
                "as keyframes (ffprobe -skip_frame nokey ignored for VP9)",
            )
        )
    candidates = Candidates(
        frame_indices=result,
        sampled_frame_indices=ids,
        keyframe_indices=keys_list,
        moved=tuple(moved),
        debug=debug,
        warnings=tuple(warnings),
    )
    stayed = candidates.stayed_keyframes
    # Keyframes the refill put back (N ≥ frame count) were moved first, as `moved` says; they
    # are recorded in `refilled_keyframes`, not warned about. When the probe lists every VP9
    # frame as a keyframe, the warning above already says why nothing could move.
    if stayed and not any(w.code == "vp9_keyframes_all" for w in warnings):
        shown = ", ".join(map(str, stayed[:8])) + (" …" if len(stayed) > 8 else "")
        reach = 4 * config.avoid_keyframe_offset
        warnings.append(
            quirk_warning(
                "keyframes_kept",
                f"keyframe{'s' if len(stayed) > 1 else ''} {shown} stayed among the candidates despite "
                f"avoid_keyframes: no non-keyframe within ±{reach} frames",
            )
        )
        candidates = dataclasses.replace(candidates, warnings=tuple(warnings))
    return candidates
