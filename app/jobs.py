"""The app's jobs for its worker processes (app.workers): module-level calls into native work, small results.

Each job takes picklable arguments and ``progress`` (``progress(stage, fraction)`` for the
handler's bar, ``progress.enter(stage)`` to name what runs), writes to the session file itself
and returns ids, paths or summaries; the app then opens what was stored as it always does.
``store`` is the session file's path in a worker, or the app's open SessionStore when a
handler runs the job in its own process (no pool).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

# veryfast: 150 frames at 504×280 encode in 0.85 s instead of 1.9 s (medium), files 1.3× larger.
SPARSE_X264 = {"preset": "veryfast"}


@contextmanager
def _opened(store: Any) -> Iterator[Any]:
    """The store a job writes to: opened from its path (closed again), or the one given."""
    if isinstance(store, (str, PathLike)):
        from backend.store import SessionStore

        with SessionStore(store) as opened:
            yield opened
    else:
        yield store


def probe_video(path: str | PathLike[str], *, progress: Any) -> dict[str, Any]:
    """Probe an uploaded video (clean profile): its codec, size and frame count."""
    from backend.stages.probe import ProbeConfig, probe

    progress.enter("probe")
    info = probe(path, config=ProbeConfig(profile="clean"))
    return {
        "codec_name": info.codec_name,
        "width": info.width,
        "height": info.height,
        "total_frames": info.total_frames,
    }


def source_frame(info: Any, frame_index: int, *, progress: Any) -> Any:
    """Frame ``frame_index`` of a probed video at its stored size, (H, W, 3) uint8 RGB (the
    viewer's native-resolution view)."""
    from backend.runs.source_frame import source_frame as decode

    progress.enter("decode")
    return decode(info, frame_index)


def codec_side_data(info: Any, frame_indices: list[int], *, progress: Any) -> Any:
    """Motion vectors and per-block QP of a run's candidate frames (the viewer's codec layers)."""
    from backend.runs.source_frame import codec_side_data as read

    progress.enter("decode")
    return read(info, frame_indices)


def select_run(video: str, store: Any, options: Any, *, progress: Any) -> dict[str, Any]:
    """Run and store a selection of ``video``: the new run's id, ``how`` and its stage times."""
    from backend.runs import select_and_store
    from backend.selectors.fallback import default_fallback

    progress.enter("probe")
    with _opened(store) as opened:
        # The app's default: a declared fallback (signal, then uniform; none for parity).
        fallback = default_fallback(options)
        run_id, result = select_and_store(
            video, opened, options=options, on_progress=progress, fallback=fallback
        )
    return {"run_id": run_id, "how": "full", "timings_secs": dict(result.timings_secs)}


def restore_decode(store: Any, run_id: str, *, progress: Any) -> str:
    """Decode stored run ``run_id`` again and cache its decode (it had been evicted): the run id."""
    from backend.runs import open_run

    progress.enter("decode")
    with _opened(store) as opened:
        open_run(opened, run_id)
    return run_id


def sparse_video(
    store: Any, run_id: str, path: str, dim: float, fps: int, *, imported: bool, progress: Any
) -> str:
    """Encode the reconstruction of every candidate of ``run_id`` as an H.264 mp4 at ``path``.

    The run is rebuilt here from its decode cache; an imported run shows cvp's tokens, as the
    Canvases tab does.
    """
    from backend.export import write_video
    from backend.runs import open_run
    from views.canvases import iter_reconstructions

    progress.enter("open")
    with _opened(store) as opened:
        result = open_run(opened, run_id)
        if imported:
            from backend.cvp_format import imported_view

            result = imported_view(opened, run_id, result)
    h, w = result.geometry.processed_hw
    n = max(1, int(result.candidates.frame_indices.size))

    def frames() -> Iterator[Any]:
        for i, recon in enumerate(iter_reconstructions(result, dim=dim)):
            if i % 8 == 0:
                progress("encoding", (i + 1) / n)
            yield recon.image

    progress.enter("encoding")
    # yuv420p needs even sides; processed sizes are multiples of patch·block, so crop only odd edges.
    written = write_video(
        frames(), Path(path), width=w - w % 2, height=h - h % 2, fps=fps, options=SPARSE_X264
    )
    return str(written)


def reselect_run(store: Any, run_id: str, changes: dict[str, Any], *, progress: Any) -> dict[str, Any]:
    """Re-select stored run ``run_id`` with ``changes`` (decoding when its cache cannot serve)."""
    from backend.runs import reselect

    with _opened(store) as opened:
        new_id, result, how = reselect(opened, run_id, changes, on_progress=progress)
    return {"run_id": new_id, "how": how, "timings_secs": dict(result.timings_secs)}


def compare_codecs(
    source: str, store: Any, config: Any, options: Any, comparison_id: str, *, progress: Any
) -> dict[str, Any]:
    """Encode, select and compare ``source``, stored under ``comparison_id``: a summary."""
    from backend.compare import compare

    progress.enter("encode")
    with _opened(store) as opened:
        result = compare(
            source, opened, config=config, options=options, on_progress=progress, comparison_id=comparison_id
        )
    return {
        "comparison_id": result.comparison_id,
        "variants": len(result.variants),
        "total_secs": float(result.timings_secs["total"]),
    }


def compare_selectors(
    source: str, store: Any, entries: str, shared: dict[str, Any], comparison_id: str, *, progress: Any
) -> dict[str, Any]:
    """Run the selectors ``entries`` on ``source`` and store their comparison under ``comparison_id``."""
    from backend.compare import compare_selectors as run_comparison
    from backend.compare import parse_entries
    from backend.compare.selectors import probe_frames

    progress.enter("select")
    entry_list = parse_entries(entries, shared=shared, total_frames=probe_frames(source))
    with _opened(store) as opened:
        result = run_comparison(
            source, opened, entries=entry_list, on_progress=progress, comparison_id=comparison_id
        )
    return {
        "comparison_id": result.comparison_id,
        "entries": len(result.entries),
        "total_secs": float(result.timings_secs["total"]),
    }


def luma_analyze(
    store: Any,
    test: str,
    reference: str,
    official: str | None,
    geometry: str,
    offset: int,
    truncate: bool,
    *,
    progress: Any,
) -> str:
    """Analyse and store the luma bias of ``test`` against its references: the analysis id."""
    from backend.luma import MeasureConfig, analyze_videos, make_geometry, store_analysis

    progress.enter("measure")
    config = MeasureConfig(offset=offset, truncate=truncate)
    analysis = analyze_videos(
        test, reference, official=official, geometry=make_geometry(geometry), config=config
    )
    with _opened(store) as opened:
        return store_analysis(opened, analysis, config=config)


def luma_fit(
    store: Any, train_ids: Sequence[str], test_ids: Sequence[str], coeffs_path: str, *, progress: Any
) -> tuple[str, Any]:
    """Fit a correction on stored analyses (coefficients written to ``coeffs_path``): (fit id, FitResult)."""
    from backend.luma import fit_stored

    progress.enter("fit")
    with _opened(store) as opened:
        return fit_stored(opened, list(train_ids), list(test_ids), coeffs_path=coeffs_path)


@dataclass(frozen=True)
class LumaApplyRequest:
    """What :func:`luma_apply` corrects: a stored fit applied to a stored analysis's test video."""

    fit_id: str
    analysis_id: str
    test: str | PathLike[str]
    """The analysis's test video (the one corrected)."""
    reference: str | PathLike[str]
    official: str | PathLike[str] | None
    out: str | PathLike[str]
    """Where the corrected video is written."""
    lossless: bool
    """Lossless RGB output (libx264rgb) rather than the default encode."""


def luma_apply(store: Any, request: LumaApplyRequest, *, progress: Any) -> Any:
    """Correct a stored analysis's test video with a stored fit into ``request.out`` and re-measure:
    AppliedFit."""
    from backend.luma import apply_stored

    progress.enter("correct")
    with _opened(store) as opened:
        return apply_stored(
            opened,
            request.fit_id,
            request.analysis_id,
            test=request.test,
            reference=request.reference,
            official=request.official,
            out=request.out,
            lossless=request.lossless,
        )


def export_run(
    store: Any,
    run_id: str,
    config: Any,
    *,
    imported: bool = False,
    result: Any = None,
    progress: Any,
) -> list[str]:
    """Write the export of ``run_id``: the file paths.

    ``result``: the run as the app shows it (in the app's process); otherwise it is rebuilt from
    the store, with cvp's tokens when ``imported`` (as the app shows a run it just imported).
    """
    from backend.export import load_export_run, write_export

    progress.enter("encoding")
    with _opened(store) as opened:
        run = load_export_run(opened, run_id, result=result)
        if result is None and imported:
            from backend.cvp_format import imported_view

            run = dataclasses.replace(run, result=imported_view(opened, run_id, run.result))
    written = write_export([run], config=config, on_progress=lambda fraction: progress("encoding", fraction))
    return [str(p) for p in written.files]


def import_cvp_dir(folder: str, source: str, store: Any, *, progress: Any) -> dict[str, Any]:
    """Import a cvp output folder with its video as a stored run: its id, verdict and warnings."""
    from backend.cvp_format import ImportConfig, import_cvp

    progress.enter("import")
    with _opened(store) as opened:
        outcome = import_cvp(folder, source, opened, config=ImportConfig(), on_progress=progress)
    return {
        "run_id": outcome.run_id,
        "status": outcome.status,
        "lines": outcome.describe(),
        "warnings": [(w.code, w.message) for w in outcome.warnings],
        "timings_secs": dict(outcome.result.timings_secs),
    }
