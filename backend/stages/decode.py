"""Decode stage: candidate pixels and per-frame bitcost grids in one reader pass."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

# OpenCV and PyAV (through native) load in the functions that decode: the option classes import
# this module for DecodeConfig, and a batch re-run that skips everything must not load a decoder.
from backend.codecs import canonical_codec
from backend.config import PROFILES, Profile, Registry, Variant, param, validate_fields
from backend.errors import BitcostUnavailableError, DecodeError, UnsupportedVideoError
from backend.quirks import quirk_on, quirk_warning, reproduces_cvp
from backend.records import Candidates, DecodedFrames, Geometry, RunWarning, VideoInfo
from backend.stages.decode_reads import (
    FALLBACK_ORDER,
    FrameResults,
    FrameWork,
    ReadOut,
    ReadRequest,
    read_frames,
    score_grid_name,
    to_processed,
)
from backend.stages.signals import QP_MAX, SIGNALS, SignalConfig, compute_signals

if TYPE_CHECKING:
    from native import BitcostFrame

BITCOST_GRIDS = ("adaptive", "sub", "mb", "ctu")
PIXEL_SOURCES = ("fast_reader", "full_decode")
GRID_KEYS = {"sub": "sub_mb_bit_cost", "mb": "mb_bit_cost", "ctu": "ctu_bit_cost"}


def grid_for_codec(grid: str, codec_name: str) -> str:
    """Resolve ``adaptive`` to the codec's native grid: ctu for HEVC/VP9, mb otherwise."""
    if grid in ("adaptive", "auto"):
        return "ctu" if codec_name in ("hevc", "h265", "vp9") else "mb"
    return grid


def _signal_hint(codec: str) -> tuple[str, str]:
    """``("residual", " (or mv, mvres or pkt_energy)")``: the signal to suggest for ``codec``
    (residual first) and the others that work for it.

    ``qp`` needs exported block QP, which FFmpeg gives for H.264 and VP9 only.
    """
    works = [n for n in SIGNALS.names if n != "qp" or codec in QP_MAX]
    first = "residual" if "residual" in works else works[0]
    rest = [n for n in works if n != first]
    return first, (f" (or {', '.join(rest[:-1])} or {rest[-1]})" if len(rest) > 1 else "")


class OptionFixError(UnsupportedVideoError):
    """A video the chosen options cannot select on, and the options that would.

    ``message`` words the fix as the CLI's flags; ``problem``, ``fix`` (``(option name,
    value)`` pairs, in the order to name them) and ``fix_note`` (what follows the fix) let
    another surface word it for its own controls (app.tabs.common.error_line).
    """

    def __init__(
        self,
        message: str,
        *,
        problem: str = "",
        fix: tuple[tuple[str, str], ...] = (),
        fix_note: str = "",
        path: str | Path | None = None,
        stage: str | None = None,
    ) -> None:
        # Defaults throughout: a pickled error (from a worker process) is rebuilt from its
        # message alone, then gets these attributes back from its __dict__.
        self.problem = problem
        self.fix = fix
        self.fix_note = fix_note
        super().__init__(message, path=path, stage=stage)


def _check_supported(info: VideoInfo, config: DecodeConfig) -> None:
    import native

    if not native.bitcost_reader_available():
        raise BitcostUnavailableError(
            "bitcost needs codec-video-prep's patched reader, which is not installed on this "
            "platform (Linux x86-64 wheel only)",
            path=info.path,
            stage="decode",
        )
    if info.codec_name not in native.BITCOST_CODECS:
        codec = canonical_codec(info.codec_name)  # the decoder's name would say libdav1d for AV1
        signal, others = _signal_hint(codec)
        problem = (
            f"this codec has no bitcost ({codec}). Supported codecs are "
            f"{', '.join(native.BITCOST_CODECS)}; for {codec}"
        )
        raise OptionFixError(
            f"{problem} use --profile clean --score {signal}{others} (docs/signals.md).",
            problem=problem,
            fix=(("profile", "clean"), ("score", signal)),
            fix_note=f"{others} (docs/signals.md).",
            path=info.path,
            stage="decode",
        )
    if info.width % 16 and quirk_on(config.profile, "width_not_multiple_of_16"):
        problem = (
            f"frame width {info.width} is not a multiple of 16 ({info.width}x{info.height}). Supported "
            "widths in the parity profile are multiples of 16 (partial macroblock columns misalign "
            "cvp's stretched bitcost grid);"
        )
        raise OptionFixError(
            f"{problem} --profile clean takes any width.",
            problem=problem,
            fix=(("profile", "clean"),),
            fix_note=" to take any width.",
            path=info.path,
            stage="decode",
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
        pixels = _full_decode_pixels(info, ids, (h, w), threads=threads)
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


def _match_bitcost(
    info: VideoInfo, ids: list[int], read: ReadOut, *, backfill: bool, damage: str
) -> tuple[np.ndarray, list[BitcostFrame]]:
    """Each requested row's reader record and the frame it came from (a parity backfill's source).

    Returns
    -------
    source : (n,) int32, the frame whose bitcost, picture type and pixels each row carries.
    items : n reader records (shared by the rows a backfill copied).
    """
    lookup = {item.frame_index: item for item in read.items}
    n = len(ids)
    source = np.full(n, -1, dtype=np.int32)
    src_item: list[BitcostFrame | None] = [None] * n
    last_good: int | None = None
    for row, fid in enumerate(ids):
        item = lookup.get(fid)
        if item is not None and item.grids is not None:
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
    return source, src_item  # type: ignore[return-value]


def _row_grids(
    info: VideoInfo,
    ids: list[int],
    source: np.ndarray,
    src_item: list[BitcostFrame],
    wanted: tuple[str, ...],
    score_key: str,
) -> tuple[list[np.ndarray], list[str], list[RunWarning]]:
    """Each row's raw 2-D score grid and picture type, and a warning per backfilled row."""
    n = len(ids)
    warnings: list[RunWarning] = []
    grids: list[np.ndarray | None] = [None] * n
    pict: list[str] = ["?"] * n
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
        bitcost = item.grids
        assert bitcost is not None  # rows without a map were backfilled or refused above
        key = score_grid_name(bitcost, wanted, score_key)
        if key is None:
            has = ", ".join(sorted(k for k in item.grid_names if k.endswith("cost")))
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
        pict[row] = item.pict_type
    return grids, pict, warnings  # type: ignore[return-value]


def _convert_here(
    read: ReadOut,
    source: np.ndarray,
    src_item: list[BitcostFrame],
    grids: list[np.ndarray],
    processed_hw: tuple[int, int],
    work: FrameWork,
    *,
    workers: int,
) -> tuple[np.ndarray, FrameResults]:
    """(n, H, W, 3) RGB of the reader pixels read in this process, and the per-frame work on them."""
    n = source.shape[0]
    ph, pw = processed_hw
    pixels = np.empty((n, ph, pw, 3), dtype=np.uint8)
    first: dict[int, int] = {}  # a parity backfill carries its source frame's pixels
    for row in range(n):
        first.setdefault(int(source[row]), row)

    def convert(fid: int) -> tuple[int, Any, Any]:
        # Read in this process: convert and run the per-frame work on threads
        # (OpenCV and numpy release the GIL for the heavy parts).
        row = first[fid]
        bgr = read.bgr[fid] if read.bgr else src_item[row].pixels_bgr
        stats = to_processed(bgr, processed_hw, out=pixels[row])
        pix = work.on_pixels(pixels[row], stats=stats) if work.on_pixels is not None else None
        need_grid = work.on_grid is not None and fid not in read.results.grids
        return fid, pix, work.on_grid(grids[row]) if need_grid else None  # type: ignore[misc]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = list(pool.map(convert, first))
    results = FrameResults(
        pixels={fid: pix for fid, pix, _ in done if pix is not None},
        grids={**read.results.grids, **{fid: g for fid, _, g in done if g is not None}},
    )
    for row in range(n):
        if first[int(source[row])] != row:
            pixels[row] = pixels[first[int(source[row])]]
    return pixels, results


def _full_decode_pixels(info: VideoInfo, ids: list[int], hw: tuple[int, int], *, threads: int) -> np.ndarray:
    """(n, H, W, 3) uint8 RGB of the frames ``ids`` from a normal decode, scaled to ``hw``."""
    import native

    h, w = hw
    pixels = np.empty((len(ids), h, w, 3), dtype=np.uint8)
    frames = native.decode_frames_rgb(info.path, ids, out_width=w, out_height=h, thread_count=threads)
    for row, fid in enumerate(ids):
        if fid not in frames:
            raise DecodeError("frame not reached by the decoder", path=info.path, frame_index=fid)
        pixels[row] = frames[fid]
    return pixels


def decode_bitcost(
    info: VideoInfo, candidates: Candidates, geometry: Geometry, *, config: DecodeConfig, work: FrameWork
) -> DecodeResult:
    """Pixels and bitcost grids from cvp's patched reader (see :func:`decode_frames`)."""
    _check_supported(info, config)
    ids = [int(i) for i in candidates.frame_indices]
    backfill = quirk_on(config.profile, "bitcost_backfill")
    # cvp asks ffprobe for the codec name in a format that prints it once per program
    # too, so MPEG-TS streams resolve to the macroblock grid (why HEVC .ts fails there).
    ts_name = info.has_programs and quirk_on(config.profile, "ts_codec_name")
    reader_codec = "" if ts_name else info.codec_name
    fetch_grid = grid_for_codec(config.bitcost_grid, reader_codec)
    wanted = (GRID_KEYS[fetch_grid],) if fetch_grid in GRID_KEYS else FALLBACK_ORDER
    score_key = GRID_KEYS[grid_for_codec(config.bitcost_grid, info.codec_name)]
    want_reader_pixels = config.pixel_source == "fast_reader"
    request = ReadRequest(
        ids=ids,
        pixels=want_reader_pixels,
        prepared_hw=geometry.prepared_hw,
        processed_hw=geometry.processed_hw,
        keep_keys=wanted,
        score_key=score_key,
        workers=config.workers,
        pruning=quirk_on(config.profile, "target_only_pruning"),
    )
    try:
        read = read_frames(info, request, work)
    except OSError as exc:
        raise DecodeError(f"bitcost reader failed ({exc})", path=info.path, stage="decode") from exc

    warnings: list[RunWarning] = []
    if read.split_failure is not None:
        warnings.append(RunWarning("split_read_failed", f"read serially: {read.split_failure}"))
    damage = "; ".join(read.decoder_log[:3])
    if damage:
        warnings.append(RunWarning("decoder_errors", f"the decoder reported a damaged stream: {damage}"))
    source, src_item = _match_bitcost(info, ids, read, backfill=backfill, damage=damage)
    grids, pict, backfilled = _row_grids(info, ids, source, src_item, wanted, score_key)
    warnings.extend(backfilled)
    grid_key = GRID_KEYS.get(fetch_grid, score_key)

    results = read.results
    if want_reader_pixels and read.frames is not None:
        # Converted where they were read; a parity backfill carries its source's pixels.
        rows = np.asarray([read.frame_row[int(fid)] for fid in source], dtype=np.intp)
        same = rows.size == read.frames.shape[0] and bool(np.all(rows == np.arange(rows.size)))
        pixels = read.frames if same else read.frames[rows]
    elif want_reader_pixels:
        pixels, results = _convert_here(
            read, source, src_item, grids, geometry.processed_hw, work, workers=config.workers
        )
    else:
        pixels = _full_decode_pixels(info, ids, geometry.processed_hw, threads=decoder_threads(config))
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
