"""Reads of the decode stage: cvp's reader split over processes, per-frame work where frames land."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

import native

# OpenCV and PyAV (through native) load in the functions that read: the decode stage imports this
# module, the option classes import that stage for DecodeConfig, and a batch re-run that skips
# everything must not load a decoder.
from backend.records import VideoInfo

if TYPE_CHECKING:
    from native import BitcostFrame

FALLBACK_ORDER = ("sub_mb_bit_cost", "mb_bit_cost", "ctu_bit_cost")
"""The grids a read falls back to, finest first, when the codec's own grid was not returned."""


def to_processed(
    bgr: np.ndarray, processed_hw: tuple[int, int], *, out: np.ndarray
) -> native.PixelStats | None:
    """BGR reader output → RGB at the processed size (cvp's prepare_frames resize).

    At the processed size the frame only needs its channels swapped: the compiled kernel
    does that and gathers the bad-frame figures in the same pass (returned; None when
    the frame was resized or the kernel is not built).
    """
    import cv2

    h, w = processed_hw
    if bgr.shape[:2] == (h, w):
        stats = native.bgr_to_rgb_with_stats(bgr, out)
        if stats is None:
            cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB, dst=out)
        return stats
    shrink = h < bgr.shape[0] or w < bgr.shape[1]
    resized = cv2.resize(bgr, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
    cv2.cvtColor(resized, cv2.COLOR_BGR2RGB, dst=out)
    return None


# A part read from the file's start decodes every earlier frame without exporting it. That
# lead-in costs about half a read frame (0.5–0.6 measured on HEVC 1080p and H.264), so the
# first part takes the larger share of the frames.
_LEAD_IN_COST = 0.55
_MIN_SPLIT_GAIN = 0.85  # split from the start only when the longer part is ≤ 85 % of one read


@dataclass(frozen=True)
class _Split:
    """Two parts of a read and how the second one reaches its first frame."""

    parts: list[list[int]]
    seek: bool
    """True: seek to the keyframe before a part (MP4 family); False: decode from the start."""


def split_parts(info: VideoInfo, uniq: list[int], *, workers: int) -> _Split | None:
    """Split the wanted frames in two reads that run in parallel, or None to read serially.

    MP4-family files split at the keyframe that best balances the two parts: the reader's
    seek maps timestamps to frames correctly there. Elsewhere (MPEG-TS, Matroska, WebM)
    its seek returned the wrong frames, so the second part is read from the start with a
    lead-in decode, worth it only when the wanted frames are dense.
    """
    if workers < 2 or len(uniq) < 24:
        return None
    if info.stss_keyframes is not None:
        keys = [k for k in info.keyframe_indices if uniq[0] < k <= uniq[-1]]
        if not keys:
            return None
        pos = np.searchsorted(np.asarray(uniq), keys)
        best = int(pos[np.argmin(np.abs(pos - len(uniq) / 2))])
        if best < len(uniq) // 5 or best > len(uniq) - len(uniq) // 5:
            return None  # too lopsided to pay for a second process
        return _Split([uniq[:best], uniq[best:]], seek=True)
    # Cost in read-frame units of decoding frames 0..f: 1 per wanted frame, the lead-in
    # cost per frame decoded without export.
    wanted = np.zeros(uniq[-1] + 1, dtype=bool)
    wanted[uniq] = True
    cost = np.cumsum(np.where(wanted, 1.0, _LEAD_IN_COST))
    total = float(cost[-1])
    starts = np.asarray(uniq[1:])  # the second part begins at one of these frames
    before = cost[starts - 1]  # first part: everything up to the frame before
    second = _LEAD_IN_COST * starts + (total - before)  # lead-in to the start, then its frames
    longer = np.maximum(before, second)
    best = int(np.argmin(longer))
    if longer[best] > _MIN_SPLIT_GAIN * total:
        return None
    return _Split([uniq[: best + 1], uniq[best + 1 :]], seek=False)


def pruning_cannot_drop(uniq: list[int]) -> bool:
    """True when cvp's target-only pruning keeps every map for this request.

    The reader computes a picture's map when some wanted index lies within ±2 of
    its output counter (clipped to [0, last wanted]); a request with no run of 5
    unwanted frames and a wanted frame among 0–2 covers every counter value.
    """
    arr = np.asarray(uniq)
    return bool(arr.size and arr[0] <= 2 and (arr.size == 1 or np.diff(arr).max() <= 5))


@dataclass(frozen=True)
class FrameWork:
    """Per-frame functions to run where each frame lands.

    When the read is split across processes they run inside the readers, in parallel
    with the other parts, instead of in a later pass over all frames. ``on_pixels``
    gets a frame's final (H, W, 3) RGB pixels at the processed size, ``on_grid`` the
    raw 2-D grid that ``DecodedFrames.grids`` will hold for it. Both must be pure and
    return small picklable values; frames they did not reach are simply absent from
    :class:`FrameResults` (callers compute those themselves).
    """

    on_pixels: Callable[..., Any] | None = None
    """``on_pixels(rgb, stats=PixelStats | None)``: ``stats`` when the frame was copied by the
    compiled kernel (:func:`native.bgr_to_rgb_with_stats`), else None."""
    on_grid: Callable[[np.ndarray], Any] | None = None


@dataclass(frozen=True)
class FrameResults:
    """What :class:`FrameWork` returned, keyed by the frame index it ran on."""

    pixels: dict[int, Any] = field(default_factory=dict)
    grids: dict[int, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReadOut:
    """What a read returned: the reader records, the pixels, per-frame work results and how it ran."""

    items: list[BitcostFrame]
    mode: str
    frames: np.ndarray | None = None
    """(m, H, W, 3) RGB at the processed size, already converted where it was read."""
    frame_row: dict[int, int] = field(default_factory=dict)
    """frame index → row of ``frames`` (the sorted distinct requested frames)."""
    bgr: dict[int, np.ndarray] = field(default_factory=dict)
    """Reader BGR pixels read apart from ``items`` (fallback path), not yet converted."""
    results: FrameResults = field(default_factory=FrameResults)
    split_failure: str | None = None
    """Why a split read was abandoned for a serial one (None when it was not)."""
    decoder_log: tuple[str, ...] = ()
    """What cvp's FFmpeg printed during the reads (damaged streams), first lines only."""


def score_grid_name(bitcost: dict[str, Any], wanted: tuple[str, ...], score_key: str) -> str | None:
    """The grid the scorer uses: the codec's own if fetched, else the finest one present."""
    present = [k for k in wanted if k in bitcost]
    return score_key if score_key in present else next((k for k in FALLBACK_ORDER if k in present), None)


def _grid_result(item: BitcostFrame, work: FrameWork, wanted: tuple[str, ...], score_key: str) -> Any | None:
    bitcost = item.grids
    if work.on_grid is None or bitcost is None:
        return None
    key = score_grid_name(bitcost, wanted, score_key)
    if key is None:
        return None
    grid = np.asarray(bitcost[key])
    return work.on_grid(grid) if grid.ndim == 2 else None


@dataclass(frozen=True)
class ReadRequest:
    """What the decode stage asks cvp's reader for."""

    ids: list[int]
    """Candidate frame indices in request order (repeats allowed)."""
    pixels: bool
    """Also export the reader's pixels."""
    prepared_hw: tuple[int, int]
    """(H, W) the reader scales its pixels to."""
    processed_hw: tuple[int, int]
    """(H, W) the pixels are converted to (RGB) where they are read."""
    keep_keys: tuple[str, ...]
    """The bitcost grids to fetch."""
    score_key: str
    """The grid the scorer uses when it was fetched."""
    workers: int
    """Processes a read may split into."""
    pruning: bool
    """Reproduce cvp's target-only pruning (maps only near a requested frame)."""

    @property
    def reader_size(self) -> dict[str, int]:
        """The reader's output-size arguments."""
        h, w = self.prepared_hw
        return {"out_width": w, "out_height": h}


def _frame_hook(
    request: ReadRequest, work: FrameWork
) -> Callable[[BitcostFrame, np.ndarray | None, np.ndarray | None], tuple[Any, Any]]:
    """The function the reader processes run on each frame they read."""
    processed_hw, keep_keys, score_key = request.processed_hw, request.keep_keys, request.score_key

    def hook(item: BitcostFrame, bgr: np.ndarray | None, slot: np.ndarray | None) -> tuple[Any, Any]:
        # Runs in the reader processes: colour conversion, then the per-frame work.
        pix = None
        if slot is not None and bgr is not None:
            stats = to_processed(bgr, processed_hw, out=slot)
            if work.on_pixels is not None:
                pix = work.on_pixels(slot, stats=stats)
        return pix, _grid_result(item, work, keep_keys, score_key)

    return hook


def _collect(items: list[BitcostFrame]) -> FrameResults:
    """The per-frame work results the reader processes attached to their records."""
    by_pixels: dict[int, Any] = {}
    by_grid: dict[int, Any] = {}
    for item in items:
        pix, grid = item.frame_result if item.frame_result is not None else (None, None)
        fid = item.frame_index
        if pix is not None:
            by_pixels[fid] = pix
        if grid is not None:
            by_grid[fid] = grid
    return FrameResults(pixels=by_pixels, grids=by_grid)


def read_frames(info: VideoInfo, request: ReadRequest, work: FrameWork) -> ReadOut:
    """Reader dicts for the request, the pixels, per-frame work results and how it was read.

    Parameters
    ----------
    info : VideoInfo
        Probe result (path, keyframes, whether the MP4 index can seek).
    request : ReadRequest
        The (n,) requested frames, the grids, the sizes and the reader's options.
    work : FrameWork
        Per-frame functions run where frames land (inside the reader processes of a split read).

    Returns
    -------
    ReadOut
        One reader dict per reached request; ``frames`` (m, H, W, 3) uint8 RGB at
        ``request.processed_hw`` when reader processes converted them (m sorted distinct frames,
        ``frame_row`` their rows), else the pixels stay in the dicts or in ``bgr``.
    """
    import native

    uniq = sorted(set(request.ids))
    split = split_parts(info, uniq, workers=request.workers) if native.can_fork() else None
    hook = _frame_hook(request, work)
    rows = {fid: row for row, fid in enumerate(uniq)}  # split reads fill ``frames`` in this order
    split_failure: str | None = None
    if split is not None and (not request.pruning or pruning_cannot_drop(uniq)):
        # Nothing can be pruned, so unpruned halves give exactly the serial result.
        reads = native.SegmentReads(
            info.path,
            split.parts,
            export=native.ReaderExport(pixels=request.pixels, bitcost=True, **request.reader_size),
            keep_keys=request.keep_keys,
            hook=hook,
            frame_shape=(*request.processed_hw, 3),
            seek=split.seek,
        )
        mode = "split" if split.seek else "split from start"
        try:
            items = reads.wait()
            return ReadOut(
                items,
                mode,
                reads.pixels,
                rows if request.pixels else {},
                results=_collect(items),
                decoder_log=tuple(reads.decoder_log),
            )
        except RuntimeError as exc:
            # Read serially below; a second split would most likely fail the same way.
            split_failure, split = str(exc), None
    pixel_reads = None
    if split is not None and request.pixels:
        # Pixels dominate; children read them while this process runs the exact
        # (pruned, where cvp's pruning is reproduced) bitcost-only pass, which also skips the IDCT.
        pixel_reads = native.SegmentReads(
            info.path,
            split.parts,
            export=native.ReaderExport(pixels=True, bitcost=False, **request.reader_size),
            read_first_here=False,
            hook=hook,
            frame_shape=(*request.processed_hw, 3),
            seek=split.seek,
        )
    return _read_here(info, request, rows, pixel_reads, split_failure=split_failure, work=work)


def _read_here(
    info: VideoInfo,
    request: ReadRequest,
    rows: dict[int, int],
    pixel_reads: Any,
    *,
    split_failure: str | None,
    work: FrameWork,
) -> ReadOut:
    """The bitcost pass in this process, and the pixels of ``pixel_reads`` when workers read them.

    ``rows`` maps each sorted distinct requested frame to its row of the workers' pixels.
    """
    import native

    uniq = list(rows)
    log: list[str] = []  # the decoder's complaints about a damaged stream, reported once
    # With pruning, ask exactly as cvp does (repeats included), because which frames
    # lose their map depends on the whole request.
    items = native.read_bitcost(
        info.path,
        request.ids if request.pruning else uniq,
        export=native.ReaderExport(pixels=request.pixels and pixel_reads is None, **request.reader_size),
        target_only=request.pruning,
        decoder_log=log,
    )
    if pixel_reads is None:
        mode = "serial" if split_failure is None else "serial (split failed)"
        return ReadOut(items, mode, split_failure=split_failure, decoder_log=tuple(log))
    # The scorer's per-frame work overlaps the pixel workers; with repeats the
    # last dict of a frame is the one decode keeps.
    grid_results = {}
    for fid, item in {it.frame_index: it for it in items}.items():
        if (res := _grid_result(item, work, request.keep_keys, request.score_key)) is not None:
            grid_results[fid] = res
    try:
        pixel_items = pixel_reads.wait()
        results = _collect(pixel_items)
        return ReadOut(
            items,
            "bitcost here, pixels in workers",
            pixel_reads.pixels,
            rows,
            results=FrameResults(pixels=results.pixels, grids=grid_results),
            decoder_log=tuple(log),  # the bitcost pass saw the same stream as the workers
        )
    except RuntimeError as exc:
        again = native.read_bitcost(
            info.path,
            uniq,
            export=native.ReaderExport(pixels=True, **request.reader_size),
            target_only=False,
            decoder_log=[],
        )
        bgr = {it.frame_index: it.pixels_bgr for it in again}
        return ReadOut(
            items,
            "serial (split failed)",
            bgr=bgr,
            results=FrameResults(grids=grid_results),
            split_failure=str(exc),
            decoder_log=tuple(log),
        )
