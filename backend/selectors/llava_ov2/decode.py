"""llava-ov2 decode stage: one streaming pass → canvas frames, block residuals, picture types, packet sizes.

lmms-video-utils decodes every frame of the video to RGB and holds them all before sampling
(and decodes the video a second time for its codec metadata). Here one pass decodes the stream
in order, converts only the sampled frames, resizes each to the canvas at once and computes its
residual against the previous sampled frame, keeping nothing else: memory holds the canvases,
not the video. Motion vectors come from slice threads only: FFmpeg's vector export races under
frame threads (the reference's own vectors vary run to run), and a slice-threaded decode's equal
a one-thread decode's. Where parity reads packet sizes (defect 2), they follow the reference's
frame-threaded metadata pass: the pass itself when it needs no vectors, else a second,
vector-free frame-threaded pass (``native.attributed_sizes``).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

import native

# OpenCV and PyAV (through native) load in the functions that decode: the
# options class imports this module for StreamDecodeConfig, and a skipping batch re-run must not.
from backend.config import PROFILES, Profile, option_of, param, validate_fields
from backend.errors import DecodeError
from backend.records import Candidates, DecodedFrames, RunWarning, VideoInfo
from backend.selectors.llava_ov2.geometry import CanvasGeometry
from backend.selectors.llava_ov2.quirks import cite, quirk_on, quirk_warning
from backend.selectors.llava_ov2.score import (
    SCORE_MODES,
    FramePair,
    ScoreConfig,
    block_sums,
    luma,
    motion_field,
    resize_field,
)


@dataclass(frozen=True, kw_only=True)
class StreamDecodeConfig:
    """How the one decode pass runs and what it computes per sampled frame."""

    score_mode: str = option_of(ScoreConfig, "score_mode")
    mv_edge_weight: float = option_of(ScoreConfig, "mv_edge_weight")
    reference_threads: int = param(
        0,
        label="Reference threads",
        help="parity: threads of the lmms-video-utils process reproduced (0: this machine's CPUs); "
        "1 selects torch's single-thread resize kernel",
        min=0,
        max=1024,
    )
    skip_unwanted: bool = param(
        True,
        label="Skip unwanted frames",
        help="let the decoder skip non-reference frames that are not sampled (nothing depends on them); "
        "off where parity needs the reference's packet-size attribution, which counts every frame",
    )
    threads: int = param(
        0,
        label="Decoder threads",
        help="FFmpeg's decoder and conversion threads (0: its choice, as lmms-video-utils leaves it)",
        min=0,
        max=64,
    )
    score_thread: bool = param(
        True,
        label="Scoring thread",
        help="resize and score each sampled frame on a second thread while the decoder works; off "
        "where the run must keep to one core (one worker of a batch)",
    )
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity resizes with torch's bilinear and truncates, and gives packet sizes in decode-call "
        "order (lmms-video-utils); clean resizes with an area filter and gives each frame its own packet",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)

    @property
    def torch_threads(self) -> int:
        """The torch thread count whose resize kernel parity reproduces."""
        return self.reference_threads or len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class StreamDecode:
    """What the decode pass produced for the candidates."""

    decoded: DecodedFrames
    """Canvas-size pixels; ``grids[i]`` the (hp, wp) block residual of candidate i against i − 1
    (zeros for i = 0); picture types from the decoder."""
    packet_sizes: np.ndarray
    """(n,) int64 packet size per candidate, attributed as the profile says."""
    pts_secs: np.ndarray
    """(n,) float64 presentation time per candidate (NaN without a timestamp)."""


def stream_flags(config: StreamDecodeConfig) -> dict[str, Any]:
    """The keywords of ``native.iter_stream`` a decode with ``config`` passes.

    Motion vectors for the mvwarp modes, decoded with slice threads only (frame threads race the
    vector export, in either profile); frame threads otherwise, as the reference decodes. A pass
    with vectors skips the unwanted frames even where parity reads packet sizes: those then come
    from a separate pass (``separate_size_pass``).
    """
    want_mvs = SCORE_MODES.lookup(config.score_mode).motion_vectors
    return {
        "motion_vectors": want_mvs,
        "frame_threads": not want_mvs,
        "skip_unwanted": config.skip_unwanted or want_mvs,
        "thread_count": config.threads,
    }


def separate_size_pass(config: StreamDecodeConfig) -> bool:
    """Whether parity's packet attribution needs its own frame-threaded, vector-free pass.

    The reference attributes packet sizes in a frame-threaded pass that also exports its vectors;
    the vectors from that pass race, so a run that needs both takes them from two passes.
    """
    want_mvs = SCORE_MODES.lookup(config.score_mode).motion_vectors
    parity = quirk_on(config.profile, "packet_size_by_output_order")
    return parity and want_mvs and not config.skip_unwanted


def _to_canvas(rgb: np.ndarray, canvas: CanvasGeometry, config: StreamDecodeConfig) -> np.ndarray:
    import cv2

    h, w = canvas.geometry.processed_hw
    if quirk_on(config.profile, "bilinear_truncated"):
        if rgb.shape[:2] == (h, w):
            return rgb
        return native.bilinear_u8(rgb, (h, w), torch_threads=config.torch_threads)
    top, left, ch, cw = canvas.crop
    region = rgb[top : top + ch, left : left + cw]
    if region.shape[:2] == (h, w):
        return np.ascontiguousarray(region)
    shrink = h < ch or w < cw
    return cv2.resize(region, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def _field_to_canvas(field: np.ndarray, canvas: CanvasGeometry, config: StreamDecodeConfig) -> np.ndarray:
    """A stored-size motion field on the canvas, vectors in canvas pixels (clean: the frame's crop)."""
    import cv2

    h, w = canvas.geometry.processed_hw
    if quirk_on(config.profile, "bilinear_truncated"):
        return resize_field(field, (h, w), torch_threads=config.torch_threads)
    top, left, ch, cw = canvas.crop
    region = np.ascontiguousarray(field[top : top + ch, left : left + cw])
    if region.shape[:2] == (h, w):
        return region
    out = cv2.resize(region, (w, h), interpolation=cv2.INTER_AREA if h < ch or w < cw else cv2.INTER_LINEAR)
    out[..., 0] *= np.float32(w / cw)
    out[..., 1] *= np.float32(h / ch)
    return out


class _FrameScorer:
    """Each sampled frame on the canvas and its block residual against the previous sampled frame.

    Rows must arrive in order on one thread, so each sees the previous row's canvas and luma.
    """

    def __init__(self, n: int, canvas: CanvasGeometry, config: StreamDecodeConfig) -> None:
        geo = canvas.geometry
        h, w = geo.processed_hw
        self.block_px = geo.patch * geo.block_size
        bh, bw = h // self.block_px, w // self.block_px
        self.canvas = canvas
        self.config = config
        self.mode = SCORE_MODES.lookup(config.score_mode)
        self.score_cfg = ScoreConfig(score_mode=config.score_mode, mv_edge_weight=config.mv_edge_weight)
        self.pixels = np.empty((n, h, w, 3), np.uint8)
        """(n, H, W, 3) uint8 canvas-size pixels."""
        self.grids: list[np.ndarray] = [np.zeros((bh, bw), np.float32) for _ in range(n)]
        """(hp, wp) float32 block residual per row (zeros for row 0)."""
        self._previous_luma: np.ndarray | None = None

    def __call__(self, row: int, item: dict[str, Any]) -> None:
        frame = _to_canvas(item["to_rgb"](), self.canvas, self.config)
        self.pixels[row] = frame
        y = luma(frame)
        if row > 0 and self._previous_luma is not None:
            field = None
            if self.mode.motion_vectors and item["mvs"].shape[0]:  # no vectors: an all-zero field, framediff
                raw = motion_field(item["mvs"], item["height"], item["width"])
                field = _field_to_canvas(raw, self.canvas, self.config)
            pair = FramePair(
                current=frame,
                previous=self.pixels[row - 1],
                current_luma=y,
                previous_luma=self._previous_luma,
                field=field,
            )
            self.grids[row] = block_sums(self.mode.function(pair, config=self.score_cfg), self.block_px)
        self._previous_luma = y


@dataclass
class _PassFacts:
    """What the decoder reported for each candidate during the pass."""

    pict: list[str]
    """Picture type per candidate."""
    sizes: np.ndarray
    """(n,) int64 packet size attributed by the decoder's output calls."""
    pts: np.ndarray
    """(n,) float64 presentation time (NaN without a timestamp)."""
    decoded_count: int
    """Frames the decoder produced, sampled or not."""


def _decode_pass(
    info: VideoInfo, ids: list[int], config: StreamDecodeConfig, score: _FrameScorer
) -> _PassFacts:
    """Stream the video once, handing each sampled frame to ``score``; DecodeError if one is never reached."""
    from native import SideDataError

    n = len(ids)
    facts = _PassFacts(pict=["?"] * n, sizes=np.zeros(n, np.int64), pts=np.full(n, np.nan), decoded_count=0)
    row_of = {fid: row for row, fid in enumerate(ids)}
    reached = np.zeros(n, bool)
    # Resizing and scoring a frame (C kernels that release the GIL) run on a second thread while
    # this one waits on the decoder and converts the next sampled frame: they overlapped nothing
    # before (1.48 s on the 24 s clip, 0.45 s of it resizing). At most a few frames wait.
    pending: deque[Future[None]] = deque()
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="llava-score") as scorer:
            stream = native.iter_stream(info.path, frozenset(ids), rgb_later=True, **stream_flags(config))
            for item in stream:
                facts.decoded_count += 1
                row = row_of.get(item["frame_index"])
                if row is None:
                    continue
                reached[row] = True
                facts.pict[row] = item["pict_type"]
                facts.sizes[row] = item["attributed_size"]
                if item["pts_secs"] is not None:
                    facts.pts[row] = item["pts_secs"]
                if not config.score_thread:
                    score(row, item)
                    continue
                pending.append(scorer.submit(score, row, item))
                while len(pending) > 2:
                    pending.popleft().result()
            while pending:
                pending.popleft().result()
    except SideDataError as exc:
        raise DecodeError(str(exc).removeprefix(f"{info.path}: "), path=info.path, stage="decode") from exc
    missing = [fid for fid, got in zip(ids, reached, strict=True) if not got]
    if missing:
        raise DecodeError(
            f"the stream ended after {facts.decoded_count} frames, before sampled frame {missing[0]}",
            path=info.path,
            stage="decode",
        )
    return facts


def _separate_pass_sizes(info: VideoInfo, ids: list[int], config: StreamDecodeConfig) -> np.ndarray:
    """(n,) int64 packet sizes of the candidates from the vector-free, frame-threaded size pass."""
    from native import SideDataError

    try:
        all_sizes = native.attributed_sizes(info.path, max(ids), thread_count=config.threads)
    except SideDataError as exc:
        raise DecodeError(str(exc).removeprefix(f"{info.path}: "), path=info.path, stage="decode") from exc
    return all_sizes[np.asarray(ids, np.intp)]


def _parity_warnings(
    info: VideoInfo, ids: list[int], sizes: np.ndarray, config: StreamDecodeConfig
) -> list[RunWarning]:
    """The reference's defects this parity pass reproduces or departs from, one warning each."""
    from native import exports_motion_vectors

    n = len(ids)
    want_mvs = SCORE_MODES.lookup(config.score_mode).motion_vectors
    warnings: list[RunWarning] = []
    if not config.skip_unwanted:
        # Which packet sizes went to another frame than their own (defect 2).
        own = _own_packet_sizes(info, ids)
        wrong = int(np.count_nonzero(sizes != own))
        if wrong:
            warnings.append(
                quirk_warning(
                    "packet_size_by_output_order",
                    f"{wrong} of {n} sampled frames carry another frame's packet size (or 0): sizes "
                    "follow the "
                    f"decoder's output calls under frame threading ({cite('packet_size_by_output_order')})",
                )
            )
    if want_mvs and exports_motion_vectors(info.codec_name):
        warnings.append(
            quirk_warning(
                "vectors_race_frame_threads",
                "motion vectors come from a slice-threaded decode (equal to a one-thread decode's): "
                "lmms-video-utils exports them under frame threads, where FFmpeg's export races and "
                "some frames' vectors vary run to run; parity reproduces the race-free result "
                f"({cite('vectors_race_frame_threads')})",
            )
        )
    full_bytes = info.total_frames * info.width * info.height * 3
    warnings.append(
        quirk_warning(
            "whole_video_decoded",
            f"lmms-video-utils would hold all {info.total_frames} frames as RGB "
            f"({full_bytes / 2**30:.2f} GiB) "
            f"before sampling {n}; this run streamed them ({cite('whole_video_decoded')})",
        )
    )
    return warnings


def decode_stream(
    info: VideoInfo, candidates: Candidates, canvas: CanvasGeometry, *, config: StreamDecodeConfig
) -> StreamDecode:
    """Decode the candidates' frames in one streaming pass and score each against the previous one.

    Parameters
    ----------
    info : probe (packets in presentation order give clean's packet sizes).
    candidates : (n,) ascending frame indices.
    canvas : the canvas geometry and (clean) crop.
    config : score mode, profile and the reference's thread count.

    Returns
    -------
    StreamDecode with (n, H, W, 3) uint8 canvas-size pixels and (hp, wp) float32 block residuals.

    Raises
    ------
    DecodeError : decoding failed or ended before a sampled frame.
    """
    from native import exports_motion_vectors

    ids = [int(i) for i in candidates.frame_indices]
    n = len(ids)
    parity = quirk_on(config.profile, "packet_size_by_output_order")
    warnings: list[RunWarning] = []
    if SCORE_MODES.lookup(config.score_mode).motion_vectors and not exports_motion_vectors(info.codec_name):
        warnings.append(
            RunWarning(
                "no_motion_vectors",
                f"{info.codec_name} exports no motion vectors: {config.score_mode} falls back to the frame "
                "difference on every frame (as lmms-video-utils does for frames without vectors)",
            )
        )
    score = _FrameScorer(n, canvas, config)
    facts = _decode_pass(info, ids, config, score)
    sizes = _separate_pass_sizes(info, ids, config) if separate_size_pass(config) else facts.sizes
    if parity:
        warnings.extend(_parity_warnings(info, ids, sizes, config))
    if not parity or config.skip_unwanted:  # (parity skips only when nothing reads the sizes)
        sizes = _own_packet_sizes(info, ids)
    decoded = DecodedFrames(
        frame_indices=np.asarray(ids, np.int32),
        pixels=score.pixels,
        grids=tuple(score.grids),
        grid_key=config.score_mode,
        pict_types=tuple(facts.pict),
        bitcost_source=np.asarray(ids, np.int32),
        pixel_source="pyav_rgb24_torch_bilinear"
        if quirk_on(config.profile, "bilinear_truncated")
        else "pyav_rgb24_area",
        read_mode=f"stream ({facts.decoded_count} frames decoded, {n} kept)",
        warnings=tuple(warnings),
    )
    return StreamDecode(decoded=decoded, packet_sizes=sizes, pts_secs=facts.pts)


def _own_packet_sizes(info: VideoInfo, ids: list[int]) -> np.ndarray:
    """Each frame's own packet size: packets in presentation order, frame i ↔ packet i (0 past the end)."""
    sizes = info.packet_size_bytes
    return np.asarray([int(sizes[i]) if i < sizes.size else 0 for i in ids], np.int64)
