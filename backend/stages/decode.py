"""Decode stage: candidate pixels and per-frame bitcost grids in one reader pass."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

# OpenCV and PyAV (native.gateway) load in the functions that decode: the option classes import
# this module for DecodeConfig, and a batch re-run that skips everything must not load a decoder.
from backend.config import PROFILES, Profile, Registry, Variant, param, validate_fields
from backend.errors import BitcostUnavailableError, DecodeError, UnsupportedVideoError
from backend.pipeline.quirks import quirk_on, quirk_warning, reproduces_cvp
from backend.records import Candidates, DecodedFrames, Geometry, RunWarning, VideoInfo
from backend.stages.signals import QP_MAX, SIGNALS, SignalConfig, canonical_codec, compute_signals
from native import frame_stats

BITCOST_GRIDS = ("adaptive", "sub", "mb", "ctu")
PIXEL_SOURCES = ("fast_reader", "full_decode")
GRID_KEYS = {"sub": "sub_mb_bit_cost", "mb": "mb_bit_cost", "ctu": "ctu_bit_cost"}
_FALLBACK_ORDER = ("sub_mb_bit_cost", "mb_bit_cost", "ctu_bit_cost")


def grid_for_codec(grid: str, codec_name: str) -> str:
    """Resolve ``adaptive`` to the codec's native grid: ctu for HEVC/VP9, mb otherwise."""
    if grid in ("adaptive", "auto"):
        return "ctu" if codec_name in ("hevc", "h265", "vp9") else "mb"
    return grid


def _signal_hint(codec: str) -> str:
    """``residual (or mv, mvres, pkt_energy)``: the signals that work for ``codec``, residual first.

    ``qp`` needs exported block QP, which FFmpeg gives for H.264 and VP9 only.
    """
    works = [n for n in SIGNALS.names if n != "qp" or codec in QP_MAX]
    first = "residual" if "residual" in works else works[0]
    rest = [n for n in works if n != first]
    return first + (f" (or {', '.join(rest[:-1])} or {rest[-1]})" if len(rest) > 1 else "")


def _check_supported(info: VideoInfo, config: DecodeConfig) -> None:
    from native import gateway

    if not gateway.bitcost_reader_available():
        raise BitcostUnavailableError(
            "bitcost needs codec-video-prep's patched reader, which is not installed on this "
            "platform (Linux x86-64 wheel only)",
            path=info.path,
            stage="decode",
        )
    if info.codec_name not in gateway.BITCOST_CODECS:
        codec = canonical_codec(info.codec_name)  # the decoder's name would say libdav1d for AV1
        raise UnsupportedVideoError(
            f"this codec has no bitcost ({codec}). Supported codecs are "
            f"{', '.join(gateway.BITCOST_CODECS)}; for {codec} use --profile clean --score "
            f"{_signal_hint(codec)} (docs/signals.md).",
            path=info.path,
            stage="decode",
        )
    if info.width % 16 and quirk_on(config.profile, "width_not_multiple_of_16"):
        raise UnsupportedVideoError(
            f"frame width {info.width} is not a multiple of 16 ({info.width}x{info.height}). Supported "
            "widths in the parity profile are multiples of 16 (partial macroblock columns misalign "
            "cvp's stretched bitcost grid); --profile clean takes any width.",
            path=info.path,
            stage="decode",
        )


def _to_processed(
    bgr: np.ndarray, processed_hw: tuple[int, int], *, out: np.ndarray
) -> frame_stats.PixelStats | None:
    """BGR reader output → RGB at the processed size (cvp's prepare_frames resize).

    At the processed size the frame only needs its channels swapped: the compiled kernel
    does that and gathers the bad-frame figures in the same pass (returned; None when
    the frame was resized or the kernel is not built).
    """
    import cv2

    h, w = processed_hw
    if bgr.shape[:2] == (h, w):
        stats = frame_stats.bgr_to_rgb_with_stats(bgr, out)
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


def _split_parts(info: VideoInfo, uniq: list[int], config: DecodeConfig) -> _Split | None:
    """Split the wanted frames in two reads that run in parallel, or None to read serially.

    MP4-family files split at the keyframe that best balances the two parts: the reader's
    seek maps timestamps to frames correctly there. Elsewhere (MPEG-TS, Matroska, WebM)
    its seek returned the wrong frames, so the second part is read from the start with a
    lead-in decode, worth it only when the wanted frames are dense.
    """
    if config.workers < 2 or len(uniq) < 24:
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
    compiled kernel (:func:`native.frame_stats.bgr_to_rgb_with_stats`), else None."""
    on_grid: Callable[[np.ndarray], Any] | None = None


@dataclass(frozen=True)
class FrameResults:
    """What :class:`FrameWork` returned, keyed by the frame index it ran on."""

    pixels: dict[int, Any] = field(default_factory=dict)
    grids: dict[int, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _ReadOut:
    items: list[dict[str, Any]]
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


def _score_key(bitcost: dict[str, Any], wanted: tuple[str, ...], score_key: str) -> str | None:
    """The grid the scorer uses: the codec's own if fetched, else the finest one present."""
    present = [k for k in wanted if k in bitcost]
    return score_key if score_key in present else next((k for k in _FALLBACK_ORDER if k in present), None)


def _grid_result(
    item: dict[str, Any], work: FrameWork, wanted: tuple[str, ...], score_key: str
) -> Any | None:
    bitcost = item.get("bitcost")
    if work.on_grid is None or bitcost is None:
        return None
    key = _score_key(bitcost, wanted, score_key)
    if key is None:
        return None
    grid = np.asarray(bitcost[key])
    return work.on_grid(grid) if grid.ndim == 2 else None


def _read(
    info: VideoInfo,
    ids: list[int],
    config: DecodeConfig,
    *,
    pixels: bool,
    w: int,
    h: int,
    processed_hw: tuple[int, int],
    keep_keys: tuple[str, ...],
    score_key: str,
    work: FrameWork,
) -> _ReadOut:
    """Reader dicts for the request, the pixels, per-frame work results and how it was read."""
    from native import gateway

    pruning = quirk_on(config.profile, "target_only_pruning")
    uniq = sorted(set(ids))
    log: list[str] = []  # the decoder's complaints about a damaged stream, reported once
    split_failure: str | None = None
    split = _split_parts(info, uniq, config) if gateway.can_fork() else None
    parts = split.parts if split is not None else None
    seek = split is None or split.seek
    size = {"out_width": w, "out_height": h}
    frame_shape = (*processed_hw, 3)
    rows = {fid: row for row, fid in enumerate(uniq)}  # split reads fill ``frames`` in this order

    def hook(item: dict[str, Any], bgr: np.ndarray | None, slot: np.ndarray | None) -> tuple[Any, Any]:
        # Runs in the reader processes: colour conversion, then the per-frame work.
        pix = None
        if slot is not None and bgr is not None:
            stats = _to_processed(bgr, processed_hw, out=slot)
            if work.on_pixels is not None:
                pix = work.on_pixels(slot, stats=stats)
        return pix, _grid_result(item, work, keep_keys, score_key)

    def collect(items: list[dict[str, Any]]) -> FrameResults:
        by_pixels: dict[int, Any] = {}
        by_grid: dict[int, Any] = {}
        for item in items:
            pix, grid = item.pop("frame_result", (None, None))
            fid = int(item["frame_idx"])
            if pix is not None:
                by_pixels[fid] = pix
            if grid is not None:
                by_grid[fid] = grid
        return FrameResults(pixels=by_pixels, grids=by_grid)

    if parts and (not pruning or pruning_cannot_drop(uniq)):
        # Nothing can be pruned, so unpruned halves give exactly the serial result.
        reads = gateway.SegmentReads(
            info.path,
            parts,
            export_bitcost=True,
            export_pixels=pixels,
            keep_keys=keep_keys,
            hook=hook,
            frame_shape=frame_shape,
            seek=seek,
            **size,
        )
        mode = "split" if seek else "split from start"
        try:
            items = reads.wait()
            return _ReadOut(
                items,
                mode,
                reads.pixels,
                rows if pixels else {},
                results=collect(items),
                decoder_log=tuple(reads.decoder_log),
            )
        except RuntimeError as exc:
            # Read serially below; a second split would most likely fail the same way.
            split_failure, parts = str(exc), None
    pixel_reads = None
    if parts and pixels:
        # Pixels dominate; children read them while this process runs the exact
        # (pruned, where cvp's pruning is reproduced) bitcost-only pass, which also skips the IDCT.
        pixel_reads = gateway.SegmentReads(
            info.path,
            parts,
            export_bitcost=False,
            export_pixels=True,
            read_first_here=False,
            hook=hook,
            frame_shape=frame_shape,
            seek=seek,
            **size,
        )
    # With pruning, ask exactly as cvp does (repeats included), because which frames
    # lose their map depends on the whole request.
    items = gateway.read_bitcost(
        info.path,
        ids if pruning else uniq,
        export_pixels=pixels and pixel_reads is None,
        target_only=pruning,
        decoder_log=log,
        **size,
    )
    if pixel_reads is None:
        mode = "serial" if split_failure is None else "serial (split failed)"
        return _ReadOut(items, mode, split_failure=split_failure, decoder_log=tuple(log))
    # The scorer's per-frame work overlaps the pixel workers; with repeats the
    # last dict of a frame is the one decode keeps.
    grid_results = {}
    for fid, item in {int(it["frame_idx"]): it for it in items}.items():
        if (res := _grid_result(item, work, keep_keys, score_key)) is not None:
            grid_results[fid] = res
    try:
        pixel_items = pixel_reads.wait()
        results = collect(pixel_items)
        return _ReadOut(
            items,
            "bitcost here, pixels in workers",
            pixel_reads.pixels,
            rows,
            results=FrameResults(pixels=results.pixels, grids=grid_results),
            decoder_log=tuple(log),  # the bitcost pass saw the same stream as the workers
        )
    except RuntimeError as exc:
        again = gateway.read_bitcost(
            info.path, uniq, export_pixels=True, target_only=False, decoder_log=[], **size
        )
        bgr = {int(it["frame_idx"]): it["pixels"] for it in again}
        return _ReadOut(
            items,
            "serial (split failed)",
            bgr=bgr,
            results=FrameResults(grids=grid_results),
            split_failure=str(exc),
            decoder_log=tuple(log),
        )


class DecodeResult(NamedTuple):
    """What the decode stage produced: the frames, and what the per-frame work returned."""

    decoded: DecodedFrames
    per_frame: FrameResults


def decoder_thread_count(workers: int) -> int:
    """FFmpeg's threads (decoder and swscale) for a run given ``workers``: 1 for a one-worker
    run (a batch runs one video per process and per core, so threads of FFmpeg's own would
    oversubscribe them), else 0 (FFmpeg's choice). Every selector's decode follows this rule."""
    return 1 if workers == 1 else 0


def decoder_threads(config: DecodeConfig) -> int:
    """FFmpeg threads of the decode stage's normal decode (:func:`decoder_thread_count`)."""
    return decoder_thread_count(config.workers)


def decode_signal(
    info: VideoInfo, candidates: Candidates, geometry: Geometry, *, config: DecodeConfig, work: FrameWork
) -> DecodeResult:
    """Pixels from a normal decode and grids from a decoder-side signal (no bitcost).

    The signal's own decode also scales the candidates' pixels (one pass over the video); a
    signal that decodes nothing (``pkt_energy``) has them decoded apart. ``work`` is not run:
    the quality and score stages then compute every frame themselves.
    """
    from native import gateway

    threads = decoder_threads(config)
    h, w = geometry.processed_hw
    signals = compute_signals(
        info,
        candidates.frame_indices,
        config=SignalConfig(kind=config.score, threads=threads),
        pixels_hw=(h, w),
    )
    ids = [int(i) for i in candidates.frame_indices]
    pixels = signals.pixels
    if pixels is None:
        frames = gateway.decode_frames_rgb(info.path, ids, out_width=w, out_height=h, thread_count=threads)
        pixels = np.empty((len(ids), h, w, 3), dtype=np.uint8)
        for row, fid in enumerate(ids):
            if fid not in frames:
                raise DecodeError("frame not reached by the decoder", path=info.path, frame_index=fid)
            pixels[row] = frames[fid]
    warnings = list(signals.warnings)
    if signals.exactness != "exact":
        warnings.append(
            RunWarning("signal_proxy", f"{config.score} on {info.codec_name}: {signals.exactness}")
        )
    decoded = DecodedFrames(
        frame_indices=np.asarray(ids, dtype=np.int32),
        pixels=pixels,
        grids=signals.grids,
        grid_key=config.score,
        pict_types=signals.pict_types,
        bitcost_source=np.asarray(ids, dtype=np.int32),
        pixel_source="full_decode",
        read_mode=f"signal {config.score} ({signals.exactness})",
        warnings=tuple(warnings),
    )
    return DecodeResult(decoded, FrameResults())


def decode_bitcost(
    info: VideoInfo, candidates: Candidates, geometry: Geometry, *, config: DecodeConfig, work: FrameWork
) -> DecodeResult:
    """Pixels and bitcost grids from cvp's patched reader (see :func:`decode_frames`)."""
    from native import gateway

    _check_supported(info, config)
    ids = [int(i) for i in candidates.frame_indices]
    backfill = quirk_on(config.profile, "bitcost_backfill")
    # cvp asks ffprobe for the codec name in a format that prints it once per program
    # too, so MPEG-TS streams resolve to the macroblock grid (why HEVC .ts fails there).
    ts_name = info.has_programs and quirk_on(config.profile, "ts_codec_name")
    reader_codec = "" if ts_name else info.codec_name
    fetch_grid = grid_for_codec(config.bitcost_grid, reader_codec)
    wanted = (GRID_KEYS[fetch_grid],) if fetch_grid in GRID_KEYS else _FALLBACK_ORDER
    score_key = GRID_KEYS[grid_for_codec(config.bitcost_grid, info.codec_name)]
    want_reader_pixels = config.pixel_source == "fast_reader"
    h, w = geometry.prepared_hw
    try:
        read = _read(
            info,
            ids,
            config,
            pixels=want_reader_pixels,
            w=w,
            h=h,
            processed_hw=geometry.processed_hw,
            keep_keys=wanted,
            score_key=score_key,
            work=work,
        )
    except OSError as exc:
        raise DecodeError(f"bitcost reader failed ({exc})", path=info.path, stage="decode") from exc
    lookup = {int(item["frame_idx"]): item for item in read.items}

    n = len(ids)
    warnings: list[RunWarning] = []
    if read.split_failure is not None:
        warnings.append(RunWarning("split_read_failed", f"read serially: {read.split_failure}"))
    damage = "; ".join(read.decoder_log[:3])
    if damage:
        warnings.append(RunWarning("decoder_errors", f"the decoder reported a damaged stream: {damage}"))
    source = np.full(n, -1, dtype=np.int32)
    grids: list[np.ndarray | None] = [None] * n
    pict: list[str] = ["?"] * n
    src_item: list[dict[str, Any] | None] = [None] * n
    last_good: int | None = None
    for row, fid in enumerate(ids):
        item = lookup.get(fid)
        if item is not None and item.get("bitcost") is not None:
            src_item[row] = item
            source[row] = fid
            last_good = row
        elif backfill and last_good is not None:
            src_item[row] = src_item[last_good]
            source[row] = source[last_good]
    if backfill:
        if last_good is None:
            raise BitcostUnavailableError(
                "no bitcost for any frame (cv_reader returned none)", path=info.path, stage="decode"
            )
        for row in range(n):
            if src_item[row] is None:  # leading misses copy the *last* valid frame (cvp)
                src_item[row] = src_item[last_good]
                source[row] = source[last_good]
    missing_rows = [r for r in range(n) if src_item[r] is None]
    if missing_rows and not backfill:
        said = f"; the decoder reported: {damage}" if damage else ""
        raise DecodeError(
            f"{len(missing_rows)} of {n} frames returned no bitcost (first: frame {ids[missing_rows[0]]})"
            + said,
            path=info.path,
            stage="decode",
        )
    for row in range(n):
        if source[row] != ids[row]:
            warnings.append(
                quirk_warning(
                    "bitcost_backfill",
                    f"frame {ids[row]}: bitcost missing, backfilled with frame {source[row]}'s "
                    "bitcost, picture type and pixels",
                )
            )
        item = src_item[row]
        assert item is not None
        bitcost = item["bitcost"]
        key = _score_key(bitcost, wanted, score_key)
        if key is None:
            has = ", ".join(sorted(k for k in bitcost if k.endswith("cost")))
            raise BitcostUnavailableError(
                f"cv_reader result missing bitcost data (the reader was asked for {', '.join(wanted)}; "
                f"the {info.codec_name} stream has {has})",
                path=info.path,
                stage="decode",
                frame_index=ids[row],
            )
        grid = np.asarray(bitcost[key])
        if grid.ndim != 2:
            raise DecodeError(
                f"bitcost grid is not 2-D ({grid.shape = })", path=info.path, frame_index=ids[row]
            )
        grids[row] = grid
        pict[row] = str(item.get("pict_type", "?"))
    grid_key = GRID_KEYS.get(fetch_grid, score_key)

    ph, pw = geometry.processed_hw
    results = read.results
    if want_reader_pixels and read.frames is not None:
        # Converted where they were read; a parity backfill carries its source's pixels.
        rows = np.asarray([read.frame_row[int(fid)] for fid in source], dtype=np.intp)
        same = rows.size == read.frames.shape[0] and bool(np.all(rows == np.arange(rows.size)))
        pixels = read.frames if same else read.frames[rows]
    elif want_reader_pixels:
        pixels = np.empty((n, ph, pw, 3), dtype=np.uint8)
        first: dict[int, int] = {}  # a parity backfill carries its source frame's pixels
        for row in range(n):
            first.setdefault(int(source[row]), row)

        def convert(fid: int) -> tuple[int, Any, Any]:
            # Read in this process: convert and run the per-frame work on threads
            # (OpenCV and numpy release the GIL for the heavy parts).
            row = first[fid]
            bgr = read.bgr[fid] if read.bgr else src_item[row]["pixels"]  # type: ignore[index]
            stats = _to_processed(bgr, geometry.processed_hw, out=pixels[row])
            pix = work.on_pixels(pixels[row], stats=stats) if work.on_pixels is not None else None
            need_grid = work.on_grid is not None and fid not in read.results.grids
            return fid, pix, work.on_grid(grids[row]) if need_grid else None  # type: ignore[misc]

        with ThreadPoolExecutor(max_workers=config.workers) as pool:
            done = list(pool.map(convert, first))
        results = FrameResults(
            pixels={fid: pix for fid, pix, _ in done if pix is not None},
            grids={**read.results.grids, **{fid: g for fid, _, g in done if g is not None}},
        )
        for row in range(n):
            if first[int(source[row])] != row:
                pixels[row] = pixels[first[int(source[row])]]
    else:
        pixels = np.empty((n, ph, pw, 3), dtype=np.uint8)
        frames = gateway.decode_frames_rgb(
            info.path, ids, out_width=pw, out_height=ph, thread_count=decoder_threads(config)
        )
        for row, fid in enumerate(ids):
            if fid not in frames:
                raise DecodeError("frame not reached by the decoder", path=info.path, frame_index=fid)
            pixels[row] = frames[fid]
        results = FrameResults(grids=results.grids)  # on_pixels saw no final pixels
    if quirk_on(config.profile, "meta_backend_mislabelled"):
        warnings.append(
            quirk_warning(
                "meta_backend_mislabelled",
                "meta.json decode_backend says ffmpeg_native (cvp hard-codes it); pixels came from "
                "cv_reader with the loop filter skipped",
            )
        )
    decoded = DecodedFrames(
        frame_indices=np.asarray(ids, dtype=np.int32),
        pixels=pixels,
        grids=tuple(grids),
        grid_key=grid_key,
        pict_types=tuple(pict),
        bitcost_source=source,
        pixel_source=config.pixel_source,
        read_mode=read.mode,
        warnings=tuple(warnings),
    )
    return DecodeResult(decoded, results)


@dataclass(frozen=True)
class Scorer(Variant):
    """A score source: the decode variant that reads its grids, and how the score stage scales them.

    ``function(info, candidates, geometry, *, config, work) -> DecodeResult``;
    ``normalisation`` names an entry of ``backend.stages.score.NORMALISERS``.
    """

    normalisation: str = "frame_percentile"


SCORERS: Registry[Scorer] = Registry(
    "score",
    (
        Scorer("bitcost", decode_bitcost, "bits the encoder spent per cell (cvp's patched reader)"),
        # Every signal of backend.stages.signals, computed on the candidates.
        *(
            Scorer(s.name, decode_signal, s.help, config_class=SignalConfig, normalisation=s.normalisation)
            for s in SIGNALS.values()
        ),
    ),
)
SCORE_SIGNALS = SCORERS.names


@dataclass(frozen=True, kw_only=True)
class DecodeConfig:
    """Which bitcost grid to read and where pixels come from."""

    bitcost_grid: str = param(
        "adaptive",
        label="Bitcost grid",
        help="adaptive: CTU/superblock for HEVC/VP9, macroblock otherwise; sub: 4×4 cells",
        choices=BITCOST_GRIDS,
    )
    score: str = param(
        "bitcost",
        label="Score signal",
        help="bitcost (cvp's patched reader) or a signal of backend.stages.signals: "
        f"{', '.join(SIGNALS)} (pixels then come from a normal decode)",
        choices=SCORE_SIGNALS,
    )
    pixel_source: str = param(
        "fast_reader",
        label="Pixels",
        help="fast_reader: cvp's reader (loop filter skipped); full_decode: a normal, "
        "deblocked decode (clean profile only)",
        choices=PIXEL_SOURCES,
    )
    workers: int = param(
        2,
        label="Decode workers",
        help="processes a read may split into (both profiles; threads for per-frame work read here)",
        min=1,
        max=64,
    )
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity reads like cvp (target-only pruning, copy backfill); clean gives "
        "every frame its own bitcost",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        # cvp selects by bitcost only, with its own reader's pixels.
        if reproduces_cvp(self.profile) and self.score != "bitcost":
            raise ValueError(
                f"Invalid score ({self.score!r}) for the parity profile. Supported values are 'bitcost'."
            )
        if reproduces_cvp(self.profile) and self.pixel_source != "fast_reader":
            raise ValueError(
                f"Invalid pixel source ({self.pixel_source!r}) for the parity profile. "
                "Supported values are 'fast_reader'."
            )


def decode(
    info: VideoInfo, candidates: Candidates, geometry: Geometry, *, config: DecodeConfig
) -> DecodedFrames:
    """Read pixels and bitcost grids for every candidate frame (see :func:`decode_frames`)."""
    return decode_frames(info, candidates, geometry, config=config).decoded


def decode_frames(
    info: VideoInfo,
    candidates: Candidates,
    geometry: Geometry,
    *,
    config: DecodeConfig,
    work: FrameWork | None = None,
) -> DecodeResult:
    """Read pixels and score grids for every candidate frame, running ``work`` per frame.

    Parameters
    ----------
    info : probe result.
    candidates : (n,) frame indices to read (repeats allowed).
    geometry : decoder output and processed sizes.
    config : grid, pixel source and profile.
    work : per-frame functions run where frames land (inside the reader workers of a
        split read); their results come back keyed by frame index.

    Returns
    -------
    DecodeResult (decoded, per_frame), from the scorer ``config.score`` names (:data:`SCORERS`).
    ``decoded``: DecodedFrames with ``pixels`` (n, H, W, 3) RGB uint8 at
    ``geometry.processed_hw`` and one raw grid per row. In parity, frames the reader
    returned without bitcost carry a copy of an earlier frame's bitcost, picture type and
    pixels (cvp quirk 7), each recorded as a ``bitcost_backfill`` warning. ``per_frame``:
    FrameResults of ``work`` for the frames it reached: ``on_pixels`` only on the rows'
    final pixels, ``on_grid`` only on the grids kept.

    Raises
    ------
    UnsupportedVideoError : codec without bitcost; parity with a width not multiple of 16.
    BitcostUnavailableError : no frame had the grid the scorer needs.
    DecodeError : the reader failed, or (clean) a frame came back without bitcost.
    ValueError : a negative frame index among the candidates.
    """
    if candidates.frame_indices.size and int(candidates.frame_indices.min()) < 0:
        raise ValueError(
            f"Invalid frame index ({int(candidates.frame_indices.min())}). Supported values are 0 and above."
        )
    scorer = SCORERS.lookup(config.score)
    return scorer.function(info, candidates, geometry, config=config, work=work or FrameWork())
