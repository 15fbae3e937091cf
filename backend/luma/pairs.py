"""Built-in decoder pairs (fast reader vs full decode, encoder round trips) and folder batches."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

import native
from backend.codecs import canonical_codec
from backend.errors import (
    BitcostUnavailableError,
    CodecLensError,
    DecodeError,
    InputError,
    OutputError,
    UnsupportedVideoError,
)
from backend.luma.geometry import GopGeometry, LumaGeometry
from backend.luma.measure import MeasureConfig, StreamConfig, analyze_videos
from backend.luma.report import LumaAnalysis, _num
from backend.records import RunWarning, _check, _ShapeRepr
from backend.stages.probe import ProbeConfig, check_input_file, probe
from native import FFmpegError

VIDEO_SUFFIXES: tuple[str, ...] = (
    ".mp4",
    ".m4v",
    ".mov",
    ".mkv",
    ".webm",
    ".avi",
    ".ts",
    ".y4m",
    ".h264",
    ".hevc",
)

# encoder → (container suffix, default options). Scene-cut detection is left on: the GOP model
# reads the real keyframes of the encoded file.
ROUNDTRIP_CODECS: dict[str, tuple[str, dict[str, str]]] = {
    "libx264": (".mp4", {"crf": "23", "preset": "veryfast"}),
    "libx265": (".mp4", {"crf": "28", "preset": "veryfast", "x265-params": "log-level=error"}),
    "libvpx-vp9": (".webm", {"crf": "32", "b": "0", "deadline": "realtime", "cpu-used": "8"}),
    "libsvtav1": (".mp4", {"crf": "35", "preset": "10"}),
}


def fast_reader_pair(
    video: str | Path,
    *,
    geometry: LumaGeometry | None = None,
    config: MeasureConfig | None = None,
) -> LumaAnalysis:
    """cvp's fast reader (loop filter skipped) against a full FFmpeg decode of the same file.

    Both sides go through the same swscale conversion to RGB (the reader's), so the bias is
    the decoder's alone. With the default GOP model (boundaries at the file's keyframes) the drift grows
    within a GOP and resets at each keyframe on H.264 and HEVC. What the reader's decoder
    prints about a damaged stream is kept off stderr and reported as one ``decoder_errors``
    warning (how many lines, and the first).

    Raises
    ------
    BitcostUnavailableError : codec-video-prep's reader is not installed.
    UnsupportedVideoError : a codec the reader cannot read (it reads h264, hevc, vp9).
    InputError, DecodeError : unreadable video.
    """
    if not native.bitcost_reader_available():
        raise BitcostUnavailableError("codec-video-prep's fast reader is not installed", path=video)
    codec = probe(video, config=ProbeConfig()).codec_name
    if codec not in native.BITCOST_CODECS:
        supported = ", ".join(native.BITCOST_CODECS)
        raise UnsupportedVideoError(
            f"cvp's fast reader cannot read this codec ({canonical_codec(codec)}). "
            f"Supported codecs are {supported}.",
            path=video,
        )
    decoder_log: list[str] = []
    analysis = analyze_videos(
        video,
        video,
        geometry=geometry or GopGeometry(),
        config=config,
        streams=StreamConfig(
            test_reader=lambda path: native.iter_reader_rgb(path, decoder_log=decoder_log),
            # cvp's reader converts with swscale; the reference must use the same conversion.
            reference_reader=_swscale_rgb,
        ),
    )
    warning = _decoder_errors_warning(decoder_log)
    return analysis if warning is None else dataclasses.replace(analysis, warnings=(warning,))


def _decoder_errors_warning(decoder_log: Sequence[str]) -> RunWarning | None:
    """One ``decoder_errors`` warning for a read's decoder log (None when it printed nothing)."""
    if not decoder_log:
        return None
    count = native.decoder_log_count(decoder_log)
    lines = "line" if count == 1 else "lines"
    return RunWarning(
        "decoder_errors",
        f"the decoder reported a damaged stream ({count} log {lines}), first: {decoder_log[0]}",
    )


def _swscale_rgb(path: str | Path) -> Iterable[np.ndarray]:
    return native.iter_rgb(path, conversion="swscale")


def roundtrip_pair(
    source: str | Path,
    codec: str,
    out_dir: str | Path,
    *,
    options: dict[str, str] | None = None,
    frames: int | None = None,
    geometry: LumaGeometry | None = None,
    config: MeasureConfig | None = None,
) -> tuple[LumaAnalysis, Path]:
    """Encode a source with one of PyAV's encoders, decode it again and compare with the source.

    Parameters
    ----------
    source : the reference video (decoded to RGB, re-encoded as yuv420p).
    codec : libx264, libx265, libvpx-vp9 or libsvtav1.
    out_dir : folder for the encoded file (``<stem>.<codec><suffix>``).
    options : encoder options (default: ``ROUNDTRIP_CODECS[codec]``).
    frames : only the first ``frames`` frames (both sides).
    geometry : default GOP model at the encoded file's keyframes.

    Returns
    -------
    (analysis of the encoded file against the source, path of the encoded file).
    """
    if codec not in ROUNDTRIP_CODECS:
        choices = ", ".join(repr(c) for c in ROUNDTRIP_CODECS)
        raise ValueError(f"Invalid codec ({codec!r}). Supported values are {choices}.")
    src = check_input_file(source)
    suffix, default_options = ROUNDTRIP_CODECS[codec]
    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create folder ({exc.strerror or exc})", path=folder) from exc
    encoded = folder / f"{src.stem}.{codec}{suffix}"
    info = native.probe_container(src)
    if info.width % 2 or info.height % 2:
        raise InputError(
            f"frame size {info.width}x{info.height} is odd; yuv420p encoders need even sizes", path=src
        )
    if codec == "libsvtav1" and native.svt_av1_stalls(info.width, info.height):
        raise UnsupportedVideoError(
            f"SVT-AV1 stalls on frames under {native.SVT_AV1_MIN_SIDE} pixels on one side and over "
            f"{native.SVT_AV1_SMALL_FRAME} on the other ({info.width}x{info.height}). Supported sizes "
            f"have both sides at least {native.SVT_AV1_MIN_SIDE} pixels or both at most "
            f"{native.SVT_AV1_SMALL_FRAME}.",
            path=src,
        )

    def limited(path: str | Path) -> Iterable[np.ndarray]:
        return itertools.islice(native.iter_rgb(path), frames) if frames else native.iter_rgb(path)

    index = 0
    try:
        with native.VideoWriter(
            encoded,
            codec=codec,
            width=info.width,
            height=info.height,
            fps=info.avg_frame_rate or Fraction(25),
            options=options or dict(default_options),
        ) as writer:
            for frame in limited(src):
                writer.write(frame)
                index += 1
    except FFmpegError as exc:
        raise DecodeError(
            f"{codec} round trip failed ({exc.strerror or exc})", path=src, frame_index=index
        ) from exc
    analysis = analyze_videos(
        encoded,
        src,
        geometry=geometry or GopGeometry(),
        config=config,
        streams=StreamConfig(reference_reader=limited),
    )
    return analysis, encoded


# --------------------------------------------------------------------------- pairing and batches


def _videos(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)


def pair_by_name(
    tests: str | Path | Sequence[str | Path], references: str | Path
) -> tuple[list[tuple[Path, Path]], list[Path]]:
    """Pair test outputs with references of the same file name.

    A test pairs with the reference of the same name, else with the only reference of the
    same stem (``clip.webm`` ↔ ``clip.mp4``).

    Parameters
    ----------
    tests : a folder of test videos, or a list of test videos and folders.
    references : the folder of references.

    Returns
    -------
    ([(test, reference), …] in name order, tests without a reference).

    Raises
    ------
    InputError : a folder is missing, or a stem matches several references.
    """
    ref_dir = Path(references)
    if not ref_dir.is_dir():
        raise InputError("references folder does not exist or is not a folder", path=ref_dir)
    items = [tests] if isinstance(tests, (str, Path)) else list(tests)
    test_files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            test_files.extend(_videos(p))
        elif p.is_file():
            test_files.append(p)
        else:
            raise InputError("does not exist", path=p)
    refs = _videos(ref_dir)
    by_name = {r.name: r for r in refs}
    by_stem: dict[str, list[Path]] = {}
    for r in refs:
        by_stem.setdefault(r.stem, []).append(r)
    pairs: list[tuple[Path, Path]] = []
    missing: list[Path] = []
    for t in test_files:
        if t.name in by_name:
            pairs.append((t, by_name[t.name]))
        elif len(by_stem.get(t.stem, [])) == 1:
            pairs.append((t, by_stem[t.stem][0]))
        elif len(by_stem.get(t.stem, [])) > 1:
            names = ", ".join(r.name for r in by_stem[t.stem])
            raise InputError(f"several references share its stem: {names}", path=t)
        else:
            missing.append(t)
    return pairs, missing


BATCH_COLUMNS: tuple[str, ...] = (
    "frames",
    "mean_bias",
    "mean_abs_bias",
    "p95_all",
    "p95_steady",
    "jump_0_1",
    "y_psnr_db",
)


@dataclass(frozen=True, repr=False)
class BatchResult(_ShapeRepr):
    """Per-clip summaries of a folder batch and their medians."""

    clip: tuple[str, ...]
    """Test file names of the analysed clips."""
    reference: tuple[str, ...]
    values: np.ndarray
    """(k, len(BATCH_COLUMNS)) float64, one row per clip (NaN where undefined)."""
    failures: tuple[tuple[str, str], ...]
    """(test file, one-line error) of clips that could not be analysed."""
    unmatched: tuple[str, ...]
    """Test files without a reference."""
    analyses: tuple[LumaAnalysis, ...] = ()

    def __post_init__(self) -> None:
        k = len(self.clip)
        _check(self.values.shape == (k, len(BATCH_COLUMNS)), f"{self.values.shape = }, {k = }")
        _check(len(self.reference) == k, f"{len(self.reference) = } != {k}")

    @property
    def medians(self) -> dict[str, float]:
        """Median of every column over the clips where it is defined."""
        out = {}
        for j, name in enumerate(BATCH_COLUMNS):
            col = self.values[:, j]
            col = col[np.isfinite(col)]
            out[name] = float(np.median(col)) if col.size else math.nan
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "codec-lens/luma-batch",
            "columns": list(BATCH_COLUMNS),
            "clips": [
                {"test": c, "reference": r, **{n: _num(v) for n, v in zip(BATCH_COLUMNS, row, strict=True)}}
                for c, r, row in zip(self.clip, self.reference, self.values, strict=True)
            ],
            "medians": {k: _num(v) for k, v in self.medians.items()},
            "failures": [{"test": t, "error": e} for t, e in self.failures],
            "unmatched": list(self.unmatched),
        }


def _row(analysis: LumaAnalysis) -> list[float]:
    summary = analysis.report.summary()
    return [math.nan if summary[c] is None else float(summary[c]) for c in BATCH_COLUMNS]


def analyze_pairs(
    pairs: Sequence[tuple[Path, Path]],
    *,
    geometry: LumaGeometry,
    config: MeasureConfig | None = None,
    on_clip: Callable[[int, int, Path], None] | None = None,
) -> tuple[list[LumaAnalysis], list[tuple[str, str]]]:
    """Analyse (test, reference) pairs one after the other; failures are collected, not raised."""
    analyses: list[LumaAnalysis] = []
    failures: list[tuple[str, str]] = []
    for i, (test, ref) in enumerate(pairs):
        if on_clip is not None:
            on_clip(i, len(pairs), test)
        try:
            analyses.append(analyze_videos(test, ref, geometry=geometry, config=config))
        except CodecLensError as exc:
            failures.append((str(test), exc.one_line()))
        except ValueError as exc:
            failures.append((str(test), str(exc)))
    return analyses, failures


def analyze_batch(
    tests: str | Path | Sequence[str | Path],
    references: str | Path,
    *,
    geometry: LumaGeometry,
    config: MeasureConfig | None = None,
    on_clip: Callable[[int, int, Path], None] | None = None,
) -> BatchResult:
    """Analyse every test output against the reference of the same name.

    Returns
    -------
    BatchResult with one row per analysed clip, the medians, failures and unmatched tests.

    Raises
    ------
    InputError : missing folders, or no test has a reference.
    """
    pairs, missing = pair_by_name(tests, references)
    if not pairs:
        raise InputError(f"no test video has a reference of the same name in {references}", path=str(tests))
    analyses, failures = analyze_pairs(pairs, geometry=geometry, config=config, on_clip=on_clip)
    done = {a.test_name for a in analyses}
    kept = [(t, r) for t, r in pairs if str(t) in done]
    return BatchResult(
        clip=tuple(str(t) for t, _ in kept),
        reference=tuple(str(r) for _, r in kept),
        values=np.asarray([_row(a) for a in analyses], np.float64).reshape(len(analyses), len(BATCH_COLUMNS)),
        failures=tuple(failures),
        unmatched=tuple(str(m) for m in missing),
        analyses=tuple(analyses),
    )
