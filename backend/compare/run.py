"""Codec comparison: encode one source in H.264/HEVC/VP9/AV1, select on each, measure agreement."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import native
from backend import __version__
from backend.codecs import canonical_codec
from backend.compare.config import CompareConfig, score_for
from backend.compare.encode import Variant, default_output_dir, encode_variants, given_variants
from backend.compare.metrics import LumaSeries, compare_runs, measure_luma, variant_metrics
from backend.compare.records import CodecComparison
from backend.compare.stored import comparison_row, comparison_tables
from backend.errors import CodecLensError
from backend.pipeline import RunResult, SelectionOptions
from backend.runs import content_sha256, select_and_store
from backend.stages.probe import ProbeConfig, check_input_file, probe
from backend.store import SessionStore

ProgressCallback = Callable[[str, float], None]


_STEPS = 4
"""Progress steps of a comparison: encode, select, luma, store."""


def _step(on_progress: ProgressCallback | None, name: str, k: int) -> None:
    if on_progress is not None:
        on_progress(name, k / _STEPS)


def _planned(encoded: Sequence[str | Path] | None, config: CompareConfig) -> list[tuple[str, Any]]:
    """(codec, name) of every variant to be selected on: the given files' codecs, or the configured ones."""
    return (
        [(canonical_codec(probe(p, config=ProbeConfig()).codec_name), p) for p in encoded]
        if encoded
        else [(codec, codec) for codec in config.codecs]
    )


def _check_profile(
    options: SelectionOptions, config: CompareConfig, planned: Sequence[tuple[str, Any]]
) -> None:
    """Parity selects with bitcost only: refuse a variant that needs another signal before encoding."""
    if options.profile != "parity":
        return
    for codec, name in planned:
        score, _ = score_for(codec, config)
        if score != "bitcost":
            raise ValueError(
                f"Invalid profile ('parity') for {name}: {codec} is selected with {score}, and parity "
                "supports bitcost only. Supported values are 'clean'."
            )


def _variants(
    src: Path, folder: Path, encoded: Sequence[str | Path] | None, config: CompareConfig
) -> tuple[tuple[Variant, ...], Path, dict[str, Any]]:
    """The variants, the luma reference and the settings: ``src`` encoded into ``folder``, or given."""
    if not encoded:
        return encode_variants(src, folder, config=config)
    variants = given_variants(encoded, config=config)
    info = probe(src, config=ProbeConfig())
    settings: dict[str, Any] = {
        "source_width": info.width,
        "source_height": info.height,
        "width": info.width,
        "height": info.height,
        "fps": info.fps,
        "frames": info.total_frames,
        "reference": {"encoder": None, "lossless": None, "note": "the source itself"},
    }
    return variants, src, settings


def _luma_series(
    reference: Path, variants: Sequence[Variant], config: CompareConfig
) -> tuple[tuple[LumaSeries, ...], tuple[LumaSeries, ...]]:
    """Luma series of every variant's full decode and, where cvp's fast reader reads it, of the reader."""
    full = measure_luma(reference, variants, decoder="full_decode")
    readable = [v for v in variants if v.codec in native.BITCOST_CODECS]
    reader = (
        measure_luma(reference, readable, decoder="fast_reader")
        if config.measure_reader and readable and native.bitcost_reader_available()
        else ()
    )
    return full, reader


def compare(
    source: str | Path,
    store: SessionStore,
    *,
    config: CompareConfig,
    options: SelectionOptions,
    out_dir: str | Path | None = None,
    encoded: Sequence[str | Path] | None = None,
    on_progress: ProgressCallback | None = None,
    comparison_id: str | None = None,
) -> CodecComparison:
    """Encode (or take) variants of a source, select on each, measure and store everything.

    Parameters
    ----------
    source : the source video; with ``encoded`` it is the luma reference of the given files.
    store : session store receiving the runs and the comparison tables.
    config : encoding and signal choice.
    options : selection options shared by every run (``score`` is set per variant).
    out_dir : folder for the encodes (default :func:`default_output_dir`).
    encoded : pre-encoded variants of ``source`` (then nothing is encoded).
    on_progress : ``on_progress(step, fraction)`` after each step (``encode``, ``select <codec>``
        after each variant's selection, ``select``, ``luma``, ``store``).
    comparison_id : the id to store it under (default a new one); a caller that names it knows
        its encodes folder before they are written (to remove them if the process dies).

    Returns
    -------
    The CodecComparison, already stored under ``comparison_id`` (a failure is stored as ``failed``).
    """
    comparison_id = comparison_id or uuid.uuid4().hex[:12]
    timings: dict[str, float] = {}
    src = check_input_file(source)
    folder = Path(out_dir) if out_dir is not None else default_output_dir(store, comparison_id)
    started = time.perf_counter()
    try:
        _check_profile(options, config, _planned(encoded, config))
        t0 = time.perf_counter()
        variants, reference, settings = _variants(src, folder, encoded, config)
        timings["encode"] = time.perf_counter() - t0
        _step(on_progress, "encode", 1)
        t0 = time.perf_counter()
        runs: list[tuple[str, RunResult]] = []
        for k, v in enumerate(variants):
            runs.append(select_and_store(v.video_path, store, options=options.replace(score=v.score)))
            if on_progress is not None:  # one report per variant: a selection takes seconds at 720p
                on_progress(f"select {v.codec}", (1 + (k + 1) / len(variants)) / _STEPS)
        timings["select"] = time.perf_counter() - t0
        _step(on_progress, "select", 2)
        t0 = time.perf_counter()
        results = [r for _, r in runs]
        pairs = compare_runs(results, labels=[v.label for v in variants])
        timings["metrics"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        full, reader = _luma_series(reference, variants, config)
        timings["luma"] = time.perf_counter() - t0
        _step(on_progress, "luma", 3)
        by_reader = {s.variant_index: s for s in reader}
        metrics = tuple(
            variant_metrics(v, run_id, result, full[i], by_reader.get(v.variant_index))
            for i, (v, (run_id, result)) in enumerate(zip(variants, runs, strict=True))
        )
        timings["total"] = time.perf_counter() - started
        first = results[0]
        comparison = CodecComparison(
            comparison_id=comparison_id,
            source_path=str(src),
            reference_path=str(reference),
            width=int(settings["width"]),
            height=int(settings["height"]),
            fps=float(Fraction(str(settings["fps"]))) if settings.get("fps") else float(first.info.fps),
            frame_count=int(settings["frames"]),
            config=config,
            options=options,
            variants=variants,
            metrics=metrics,
            pairs=pairs,
            luma=full + reader,
            settings=settings | {"versions": {"codec_lens": __version__, **native.versions()}},
            timings_secs=timings,
        )
        store.insert_comparison(
            comparison_id,
            row=comparison_row(comparison, content_sha256(src)),
            tables=comparison_tables(comparison),
        )
        _step(on_progress, "store", 4)
        return comparison
    except (CodecLensError, ValueError, OSError, RuntimeError) as exc:
        message = exc.one_line() if isinstance(exc, CodecLensError) else str(exc)
        store.fail_comparison(comparison_id, source_path=str(src), config=config.as_dict(), error=message)
        raise
    except BaseException:  # Ctrl-C: stored as failed, and the encodes nothing refers to removed
        store.fail_comparison(
            comparison_id, source_path=str(src), config=config.as_dict(), error="interrupted"
        )
        if out_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
