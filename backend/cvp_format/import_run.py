"""Import a codec-video-prep folder as a stored run: recompute with parity, check, store cvp's tokens."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import native
from backend import __version__
from backend.config import param, validate_fields
from backend.cvp_format.check import ImportCheck, anchor_psnr, compare_outputs
from backend.cvp_format.read import check_video, options_from_meta, read_canvases, read_cvp_dir
from backend.errors import InputError
from backend.pipeline import ProgressCallback, RunResult, SelectionOptions
from backend.records import TOKEN_COLUMNS, Canvases, RunWarning
from backend.runs import run_columns, select_and_store
from backend.stages.probe import ProbeConfig, probe
from backend.store import SessionStore

IMPORT_KEY = "imported_from"
"""Config key that marks a stored run as imported; its value is the cvp directory (absolute)."""
IMPORT_STATUS_KEY = "import_status"
"""Config key holding ``match`` or ``mismatch`` (see :class:`ImportCheck`)."""


@dataclass(frozen=True, kw_only=True)
class ImportConfig:
    """How an import checks the video and recomputes the run."""

    content_psnr_db: float = param(
        30.0,
        label="Content PSNR floor (dB)",
        help="an anchor canvas further than this from our decode of the same frame, written as cvp "
        "writes it, means the video is not the one cvp read (measured: equal pixels for the same video, "
        "49 dB when cvp decoded with ffmpeg_native, 9-21 dB for another video)",
        min=0.0,
        max=100.0,
    )
    workers: int = param(
        2, label="Workers", help="processes/threads the recomputation may use", min=1, max=64
    )

    def __post_init__(self) -> None:
        validate_fields(self)


@dataclass(frozen=True)
class CvpImport:
    """A finished import: the stored runs, the verdict and the run as the viewers should show it."""

    run_id: str
    """The imported run (config ``imported_from``); its tokens are cvp's."""
    recomputed_run_id: str
    """Our parity recomputation with cvp's options (the imported run's parent)."""
    cvp_dir: str
    video: str
    status: str
    warnings: tuple[RunWarning, ...]
    """Option and comparison warnings (the pipeline's own warnings are on the run)."""
    options: SelectionOptions
    comparison: ImportCheck
    result: RunResult = field(repr=False)

    def describe(self) -> list[str]:
        """Lines for people: the verdict and run ids, then one line per warning."""
        c = self.result.canvases
        head = (
            f"{self.cvp_dir} ({self.video}): {self.status} — {self.result.candidates.frame_indices.size} "
            f"frame ids, {c.tokens.shape[0]} positions, {c.count} canvases → run {self.run_id} "
            f"(recomputed as {self.recomputed_run_id})"
        )
        return [head, *(f"  {w.code}: {w.message}" for w in self.warnings)]

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        tokens = self.result.canvases.tokens
        return {
            "run_id": self.run_id,
            "recomputed_run_id": self.recomputed_run_id,
            "cvp_dir": self.cvp_dir,
            "video": self.video,
            "status": self.status,
            "frame_ids": int(self.result.candidates.frame_indices.size),
            "canvases": int(self.result.canvases.count),
            "tokens": int(tokens.shape[0]),
            "valid_tokens": int(tokens[:, 7].sum()),
            "frame_ids_differing": c.frame_ids_differing,
            "position_rows_differing": c.position_rows_differing,
            "canvases_differing": c.canvases_differing,
            "canvas_max_abs_diff": c.canvas_max_abs_diff,
            "anchor_psnr_db": None if math.isinf(c.anchor_psnr_db) else round(c.anchor_psnr_db, 2),
            "anchors_checked": c.anchors_checked,
            "options": self.options.as_dict(),
            "warnings": [w.as_dict() for w in self.warnings],
        }


# -- tokens and canvases ---------------------------------------------------------------------------


def tokens_from_positions(
    positions: np.ndarray, grid_hw: tuple[int, int], canvas_group_index: np.ndarray
) -> np.ndarray:
    """Token rows (:data:`TOKEN_COLUMNS`) from cvp's canvas-raster src_patch_position.

    Parameters
    ----------
    positions : (C·S, 3) int32, −1 rows for padding.
    grid_hw : (hb, wb) patch grid; S = hb·wb.
    canvas_group_index : (C,) group of each canvas.

    Returns
    -------
    (C·S, 8) int32: source position, canvas index and packed (row, col) from the row number, group, valid.
    """
    hb, wb = grid_hw
    s = hb * wb
    n = positions.shape[0]
    row = np.arange(n)
    canvas, local = np.divmod(row, s)
    tokens = np.empty((n, len(TOKEN_COLUMNS)), dtype=np.int32)
    tokens[:, :3] = positions
    tokens[:, 3] = canvas
    tokens[:, 4], tokens[:, 5] = np.divmod(local, wb)
    tokens[:, 6] = canvas_group_index[canvas]
    tokens[:, 7] = positions[:, 0] >= 0
    return tokens


def _patch_view(images: np.ndarray, patch: int, grid_hw: tuple[int, int]) -> np.ndarray:
    """(N, hb, wb, p, p, 3) view of (N, hb·p, wb·p, 3) images (writes go through)."""
    hb, wb = grid_hw
    return images.reshape(images.shape[0], hb, patch, wb, patch, 3).transpose(0, 1, 3, 2, 4, 5)


def with_tokens(
    result: RunResult,
    tokens: np.ndarray,
    canvas_group_index: np.ndarray,
    *,
    warnings: tuple[RunWarning, ...] | None = None,
) -> RunResult:
    """The run with its canvases rebuilt from other token rows (cvp's) and our decoded pixels.

    Patches whose source frame is not among our decoded candidates stay black; their tokens
    are kept, so viewers still name the source.

    Parameters
    ----------
    tokens : (C·S, 8) int32 canvas-raster token rows.
    canvas_group_index : (C,) int32.
    warnings : replaces the run's warnings when given.

    Returns
    -------
    RunResult whose ``canvases`` are (C, H, W, 3) uint8 built from ``tokens``.
    """
    geometry = result.geometry
    grid_hw = geometry.grid_hw
    count = int(canvas_group_index.shape[0])
    h, w = grid_hw[0] * geometry.patch, grid_hw[1] * geometry.patch
    images = np.zeros((count, h, w, 3), dtype=np.uint8)
    ids = result.candidates.frame_indices
    # First candidate row of each frame (repeats carry the same pixels).
    uniq, first = np.unique(ids, return_index=True)
    valid = tokens[:, 7] != 0
    pos = np.searchsorted(uniq, tokens[:, 0])
    decoded = valid & (pos < uniq.size) & (uniq[np.minimum(pos, uniq.size - 1)] == tokens[:, 0])
    t = tokens[decoded]
    rows = first[pos[decoded]]
    pixels = result.decoded.pixels
    if pixels.shape[1:3] != (h, w):  # never for cvp geometry (multiples of patch·block), kept for safety
        pixels = np.ascontiguousarray(pixels[:, :h, :w])
    sources = _patch_view(pixels, geometry.patch, grid_hw)
    _patch_view(images, geometry.patch, grid_hw)[t[:, 3], t[:, 4], t[:, 5]] = sources[rows, t[:, 1], t[:, 2]]
    canvases = Canvases(
        images=images,
        tokens=np.ascontiguousarray(tokens, dtype=np.int32),
        canvas_group_index=canvas_group_index.astype(np.int32),
    )
    return dataclasses.replace(
        result, canvases=canvases, warnings=result.warnings if warnings is None else warnings
    )


# -- the import ------------------------------------------------------------------------------------


def import_cvp(
    cvp_dir: str | Path,
    video: str | Path,
    store: SessionStore,
    *,
    config: ImportConfig,
    on_progress: ProgressCallback | None = None,
) -> CvpImport:
    """Import a cvp output directory with its source video as a stored run.

    Steps: validate the directory; recover cvp's options; probe the video and check it is the
    one meta.json describes; recompute with the ``parity`` profile via
    :func:`backend.runs.session.select_and_store` (stores that run and its decode cache); check the
    video's pixels against cvp's anchor canvases; compare frame ids, positions and canvases;
    store the imported run, a child of the recomputation, whose config carries
    ``imported_from`` and ``import_status`` and whose tokens are cvp's (authoritative when
    they differ from ours; canvases are then rebuilt from cvp's tokens and our pixels).

    Returns
    -------
    CvpImport with both run ids, the verdict and the RunResult as viewers should show it.

    Raises
    ------
    InputError (one line, naming the file) for a bad directory or a video that does not match;
    the pipeline's errors for a video it cannot run.
    """
    progress: Callable[[str, float], None] = on_progress or (lambda _stage, _fraction: None)
    cvp = read_cvp_dir(cvp_dir)
    options, option_warnings = options_from_meta(cvp, workers=config.workers)
    video = Path(video).expanduser()
    info = probe(video, config=ProbeConfig(profile="parity"))
    check_video(cvp, info)
    cvp_images = read_canvases(cvp)
    progress("import: read", 0.0)
    recomputed_id, result = select_and_store(video, store, options=options, on_progress=on_progress)
    psnr, checked, note = anchor_psnr(cvp, cvp_images, result)
    if checked == 0 or psnr < config.content_psnr_db:
        store.delete_run(recomputed_id)
        why = (
            f"anchor canvas {note} is {psnr:.1f} dB from this video's pixels "
            f"(floor {config.content_psnr_db:g} dB)"
            if checked
            else "none of cvp's anchor frames is among the frames decoded here"
        )
        raise InputError(f"content does not match {cvp.directory}: {why}", path=video, stage="import")
    comparison = compare_outputs(cvp, cvp_images, result)
    import_warnings = option_warnings + comparison.warnings
    tokens = tokens_from_positions(cvp.positions, cvp.grid_hw, cvp.canvas_group_index)
    all_warnings = result.warnings + import_warnings
    if np.array_equal(tokens, result.canvases.tokens) and np.array_equal(
        cvp.canvas_group_index, result.canvases.canvas_group_index
    ):
        imported = dataclasses.replace(result, warnings=all_warnings)
    else:
        imported = with_tokens(result, tokens, cvp.canvas_group_index, warnings=all_warnings)
    parent = store.get_run(recomputed_id)
    # The recomputation stored the same score maps; scores_run_id points there.
    tables = run_columns(imported, score_grids=False)
    status = comparison.status
    run_config = options.as_dict() | {IMPORT_KEY: str(cvp.directory.resolve()), IMPORT_STATUS_KEY: status}
    run_id = store.insert_finished_run(
        parent.session_id,
        profile=options.profile,
        config=run_config,
        versions={"codec_lens": __version__, **native.versions()},
        parent_run_id=recomputed_id,
        tables=tables,
        summary={
            "scores_run_id": parent.scores_run_id or recomputed_id,
            "threshold": result.groups.threshold,
            "timings": result.timings_secs,
            "warnings": [w.as_dict() for w in all_warnings],
            "processed_hw": result.geometry.processed_hw,
            "patch": result.geometry.patch,
            "block_size": result.geometry.block_size,
            "cache_key": parent.cache_key,
        },
    )
    progress("import: stored", 1.0)
    return CvpImport(
        run_id=run_id,
        recomputed_run_id=recomputed_id,
        cvp_dir=str(cvp.directory.resolve()),
        video=str(video),
        status=status,
        warnings=import_warnings,
        options=options,
        comparison=comparison,
        result=imported,
    )


def imported_view(store: SessionStore, run_id: str, result: RunResult) -> RunResult:
    """A stored run as viewers should show it: for imported runs, cvp's tokens and the stored warnings.

    ``result`` is what :func:`backend.runs.session.open_run` rebuilt (our recomputation); runs that
    were not imported come back unchanged.

    Returns
    -------
    RunResult whose canvases follow the stored tokens table (C·S rows, canvas-raster order).
    """
    row = store.get_run(run_id)
    if IMPORT_KEY not in row.config:
        return result
    frame = store.table("tokens", run_id).sort_values(
        ["canvas_index", "packed_row", "packed_col"], kind="stable"
    )
    tokens = frame[list(TOKEN_COLUMNS)].to_numpy().astype(np.int32)
    warnings = tuple(RunWarning(w["code"], w["message"]) for w in row.warnings)
    s = result.geometry.patches_per_canvas
    groups = tokens[::s, 6].copy() if tokens.size else np.zeros(0, np.int32)
    if np.array_equal(tokens, result.canvases.tokens):
        return result if result.warnings == warnings else dataclasses.replace(result, warnings=warnings)
    return with_tokens(result, tokens, groups, warnings=warnings)
