"""Import a codec-video-prep output directory: validate it, recompute it with parity, store it as a run."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from backend import __version__
from backend.config import param, validate_fields
from backend.errors import InputError
from backend.pipeline import ProgressCallback, RunResult, SelectionOptions
from backend.records import TOKEN_COLUMNS, Canvases, RunWarning, VideoInfo
from backend.runs import run_columns, select_and_store
from backend.stages.probe import ProbeConfig, probe
from backend.stages.quality import psnr_db
from backend.store import SessionStore
from native import gateway

IMPORT_KEY = "imported_from"
"""Config key that marks a stored run as imported; its value is the cvp directory (absolute)."""
IMPORT_STATUS_KEY = "import_status"
"""Config key holding ``match`` or ``mismatch`` (see :class:`ImportCheck`)."""

# meta.json keys the import reads; all are written by cvp 0.2.x's public path (spec §13.3).
_META_KEYS = (
    "config",
    "metadata",
    "hb_wb",
    "S_full",
    "patch",
    "block_size",
    "processed_hw",
    "images_per_group",
    "sampled_frames",
    "total_images",
    "total_patches",
    "canvas_files",
    "groups",
)
# cvp config fields that map 1:1 onto SelectionOptions (spec §1.2), with the type to coerce to.
_OPTION_TYPES: dict[str, type] = {
    "num_sampled_frames": int,
    "group_size": int,
    "images_per_group": int,
    "patch": int,
    "max_pixels": int,
    "block_size": int,
    "min_group_frames": int,
    "max_group_frames": int,
    "bitcost_grid": str,
    "canvas_format": str,
    "grouping_mode": str,
    "frame_sampling_mode": str,
    "sample_fps": float,
    "readiness_sum_threshold_mode": str,
    "readiness_sum_threshold": float,
    "readiness_norm_sum_threshold": float,
    "iframe_score_clip_mode": str,
    "iframe_score_clip_percentile": float,
    "avoid_keyframes": bool,
}
# Values cvp's public CLI fixes (spec §1.5); any other value came from its Python API and
# is outside what parity reproduces, so the import names it instead of guessing.
_FIXED_CONFIG: dict[str, Any] = {
    "bitcost_pct": 99.0,
    "bitcost_log_scale": True,
    "readiness_coverage_bins": 3,
    "readiness_delta_ratio": 0.05,
    "frame_score_norm_mode": "none",
    "max_dim": 616,
    "no_resize": False,
    "bpppf_clamp_min": 0.015,
    "bpppf_clamp_max": 0.09,
    "avoid_keyframe_offset": 1,
    "min_group_sec": 0.0,
    "max_group_sec": 0.0,
    "ffmpeg_preprocess_frames": True,
}
_PKT_PEAK_CONFIG: dict[str, Any] = {
    "pkt_peak_bin_sec": 0.5,
    "pkt_peak_cap": 128,
    "pkt_peak_per_sec": 1.0,
    "pkt_peak_neighbor": 0,
    "pkt_peak_smooth_bins": 1,
}
_JPEG_QUALITY = 95  # cvp's IMWRITE_JPEG_QUALITY (spec §13.1)
_PNG_COMPRESSION = 3


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
class CvpOutput:
    """A validated cvp output directory (arrays as cvp wrote them)."""

    directory: Path
    meta: dict[str, Any] = field(repr=False)
    frame_ids: np.ndarray = field(repr=False)
    """(n,) int32, the sampled frame ids."""
    positions: np.ndarray = field(repr=False)
    """(C·S, 3) int32 ``[frame_index, patch_row, patch_col]`` per canvas-raster row, −1 rows for padding."""
    canvas_paths: tuple[Path, ...] = field(repr=False)
    canvas_format: str
    grid_hw: tuple[int, int]
    patch: int
    canvas_group_index: np.ndarray = field(repr=False)
    """(C,) int32, the group_idx each canvas belongs to."""

    @property
    def meta_path(self) -> Path:
        return self.directory / "meta.json"

    @property
    def canvas_hw(self) -> tuple[int, int]:
        return self.grid_hw[0] * self.patch, self.grid_hw[1] * self.patch


@dataclass(frozen=True)
class ImportCheck:
    """Our recomputation against cvp's files; every mismatch is a named warning."""

    frame_ids_differing: int
    """Ids that differ (the longer length when the counts differ)."""
    position_rows_differing: int
    canvases_differing: int
    canvas_max_abs_diff: int
    anchor_psnr_db: float
    """Lowest PSNR of cvp's anchor canvases against our decode of the same frames (inf if equal)."""
    anchors_checked: int
    warnings: tuple[RunWarning, ...]

    @property
    def status(self) -> str:
        """``match`` when ids, positions and canvas pixels all equal ours, else ``mismatch``."""
        return "match" if not self.warnings else "mismatch"


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
            f"frame ids, {c.tokens.shape[0]} positions, {c.images.shape[0]} canvases → run {self.run_id} "
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
            "canvases": int(self.result.canvases.images.shape[0]),
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


# -- reading and validating ------------------------------------------------------------------------


def _meta_int(meta: dict[str, Any], key: str, path: Path) -> int:
    value = meta[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise InputError(f"{key!r} is not an integer ({value!r})", path=path, stage="import")
    return int(value)


def _meta_pair(meta: dict[str, Any], key: str, path: Path) -> tuple[int, int]:
    value = meta[key]
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)):
        raise InputError(f"{key!r} is not a pair of integers ({value!r})", path=path, stage="import")
    return int(value[0]), int(value[1])


def _read_meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError("missing; not a codec-video-prep output directory", path=path, stage="import")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"is not valid JSON ({exc.msg} at line {exc.lineno})", path=path, stage="import"
        ) from exc
    except (UnicodeDecodeError, OSError) as exc:
        raise InputError(f"cannot be read as UTF-8 text ({exc})", path=path, stage="import") from exc
    if not isinstance(meta, dict):
        raise InputError("is not a JSON object", path=path, stage="import")
    for key in _META_KEYS:
        if key not in meta:
            raise InputError(
                f"has no {key!r} key; not a codec-video-prep 0.2 meta.json", path=path, stage="import"
            )
    if not isinstance(meta["config"], dict) or not isinstance(meta["metadata"], dict):
        raise InputError("'config' and 'metadata' must be JSON objects", path=path, stage="import")
    return meta


def _load_ints(path: Path, ndim: int) -> np.ndarray:
    """An integer .npy array of ``ndim`` dimensions as int32, or InputError naming the file."""
    if not path.is_file():
        raise InputError("missing", path=path, stage="import")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"is truncated or not a .npy array ({reason})", path=path, stage="import") from exc
    if array.dtype.kind not in "iu" or array.ndim != ndim:
        raise InputError(
            f"holds {array.dtype} with shape {array.shape}; expected {ndim}-D integers",
            path=path,
            stage="import",
        )
    return array.astype(np.int32, copy=False)


def _canvas_groups(meta: dict[str, Any], count: int, meta_path: Path) -> np.ndarray:
    """(C,) group_idx of each canvas from ``groups[*].global_img_offset/num_canvases``."""
    out = np.full(count, -1, dtype=np.int32)
    for g in meta["groups"]:
        try:
            offset, num, index = int(g["global_img_offset"]), int(g["num_canvases"]), int(g["group_idx"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"a 'groups' entry lacks global_img_offset/num_canvases/group_idx ({exc})",
                path=meta_path,
                stage="import",
            ) from exc
        if offset < 0 or offset + num > count:
            raise InputError(
                f"group {index} covers canvases {offset}..{offset + num - 1} of {count}",
                path=meta_path,
                stage="import",
            )
        out[offset : offset + num] = index
    if (out < 0).any():
        first = int(np.flatnonzero(out < 0)[0])
        raise InputError(f"canvas {first} belongs to no group", path=meta_path, stage="import")
    return out


def read_cvp_dir(cvp_dir: str | Path) -> CvpOutput:
    """Read and validate a cvp output directory (meta.json, frame_ids.npy, src_patch_position.npy, canvases).

    Canvas pixels are not decoded here (see :func:`read_canvases`); their files must exist.

    Returns
    -------
    CvpOutput with frame_ids (n,) and positions (C·S, 3), both int32.

    Raises
    ------
    InputError naming the file for a missing or corrupt file or shapes that disagree with meta.json.
    """
    directory = Path(cvp_dir).expanduser()
    if not directory.is_dir():
        raise InputError("is not a directory", path=directory, stage="import")
    meta_path = directory / "meta.json"
    meta = _read_meta(meta_path)
    hb, wb = _meta_pair(meta, "hb_wb", meta_path)
    patch = _meta_int(meta, "patch", meta_path)
    s = _meta_int(meta, "S_full", meta_path)
    total_images = _meta_int(meta, "total_images", meta_path)
    total_patches = _meta_int(meta, "total_patches", meta_path)
    sampled = _meta_int(meta, "sampled_frames", meta_path)
    processed = _meta_pair(meta, "processed_hw", meta_path)
    if s != hb * wb or processed != (hb * patch, wb * patch) or total_patches != total_images * s:
        raise InputError(
            f"sizes disagree: hb_wb {[hb, wb]}, S_full {s}, patch {patch}, processed_hw {list(processed)}, "
            f"total_images {total_images}, total_patches {total_patches}",
            path=meta_path,
            stage="import",
        )
    names = meta["canvas_files"]
    if not isinstance(names, list) or len(names) != total_images:
        raise InputError(
            f"lists {len(names) if isinstance(names, list) else names!r} canvas files for "
            f"{total_images} images",
            path=meta_path,
            stage="import",
        )
    suffixes = {Path(str(n)).suffix for n in names}
    if len(suffixes) > 1 or not suffixes <= {".jpg", ".png"}:
        raise InputError(
            f"canvas files must all be .jpg or all .png (got {sorted(suffixes)})",
            path=meta_path,
            stage="import",
        )
    canvas_format = suffixes.pop()[1:] if suffixes else str(meta["config"].get("canvas_format", "jpg"))
    canvas_paths = tuple(directory / Path(str(n)).name for n in names)
    for canvas in canvas_paths:
        if not canvas.is_file():
            raise InputError("missing (listed in meta.json)", path=canvas, stage="import")

    ids_path = directory / "frame_ids.npy"
    frame_ids = _load_ints(ids_path, 1)
    if frame_ids.shape != (sampled,):
        raise InputError(
            f"has {frame_ids.shape[0]} ids; meta.json says {sampled} sampled frames",
            path=ids_path,
            stage="import",
        )
    pos_path = directory / "src_patch_position.npy"
    positions = _load_ints(pos_path, 2)
    if positions.shape != (total_patches, 3):
        raise InputError(
            f"has shape {positions.shape}; meta.json says ({total_patches}, 3)", path=pos_path, stage="import"
        )
    valid = positions[:, 0] >= 0
    bad = np.flatnonzero(~valid & (positions != -1).any(axis=1))
    if bad.size:
        raise InputError(
            f"row {int(bad[0])} {positions[bad[0]].tolist()} is neither a source nor a [-1,-1,-1] pad",
            path=pos_path,
            stage="import",
        )
    outside = np.flatnonzero(
        valid
        & ((positions[:, 1] < 0) | (positions[:, 1] >= hb) | (positions[:, 2] < 0) | (positions[:, 2] >= wb))
    )
    if outside.size:
        raise InputError(
            f"row {int(outside[0])} {positions[outside[0]].tolist()} lies outside the {hb}x{wb} patch grid",
            path=pos_path,
            stage="import",
        )
    stray = np.flatnonzero(valid & ~np.isin(positions[:, 0], frame_ids))
    if stray.size:
        raise InputError(
            f"row {int(stray[0])} names frame {int(positions[stray[0], 0])}, not listed in frame_ids.npy",
            path=pos_path,
            stage="import",
        )
    return CvpOutput(
        directory=directory,
        meta=meta,
        frame_ids=frame_ids,
        positions=positions,
        canvas_paths=canvas_paths,
        canvas_format=canvas_format,
        grid_hw=(hb, wb),
        patch=patch,
        canvas_group_index=_canvas_groups(meta, total_images, meta_path),
    )


def read_canvases(cvp: CvpOutput) -> np.ndarray:
    """Decode cvp's canvas files.

    Returns
    -------
    (C, H, W, 3) uint8 RGB, H×W = the patch grid times the patch side.

    Raises
    ------
    InputError naming the canvas that does not decode or has the wrong size.
    """
    h, w = cvp.canvas_hw
    images = np.empty((len(cvp.canvas_paths), h, w, 3), dtype=np.uint8)
    for i, path in enumerate(cvp.canvas_paths):
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise InputError("cannot be decoded as an image", path=path, stage="import")
        if bgr.shape[:2] != (h, w):
            raise InputError(
                f"is {bgr.shape[1]}x{bgr.shape[0]}; meta.json says {w}x{h}", path=path, stage="import"
            )
        images[i] = bgr[:, :, ::-1]
    return images


def options_from_meta(cvp: CvpOutput, *, workers: int = 2) -> tuple[SelectionOptions, tuple[RunWarning, ...]]:
    """The parity options cvp ran with, recovered from meta.json's ``config``.

    Returns
    -------
    (options, warnings): one warning per cvp setting parity does not reproduce.

    Raises
    ------
    InputError naming meta.json when a needed option is missing or invalid.
    """
    config = cvp.meta["config"]
    given: dict[str, Any] = {}
    for key, kind in _OPTION_TYPES.items():
        if key not in config:
            raise InputError(f"config has no {key!r}", path=cvp.meta_path, stage="import")
        value = config[key]
        try:
            given[key] = value if kind is bool else kind(value)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"config {key!r} is not a {kind.__name__} ({value!r})", path=cvp.meta_path
            ) from exc
        if kind is bool and not isinstance(value, bool):
            raise InputError(
                f"config {key!r} is not a boolean ({value!r})", path=cvp.meta_path, stage="import"
            )
    try:
        options = SelectionOptions(
            profile="parity", pixel_source="fast_reader", score="bitcost", workers=workers, **given
        )
    except ValueError as exc:
        raise InputError(f"config: {exc}", path=cvp.meta_path, stage="import") from exc
    if options.canvas_format != cvp.canvas_format:
        raise InputError(
            f"config canvas_format is {options.canvas_format!r} but the canvases are .{cvp.canvas_format}",
            path=cvp.meta_path,
            stage="import",
        )
    warnings: list[RunWarning] = []
    backend = config.get("decode_backend", "cv_reader_pixels")
    if backend != "cv_reader_pixels":
        warnings.append(
            RunWarning(
                "cvp_decode_backend",
                f"cvp decoded pixels with {backend}; parity reads them with the fast reader "
                "(loop filter skipped), so canvas pixels can differ",
            )
        )
    segments = config.get("parallel_segments", 0)
    if isinstance(segments, (int, float)) and segments > 1:
        warnings.append(
            RunWarning(
                "cvp_parallel_segments",
                f"cvp decoded in {int(segments)} parallel segments, whose threading can change bitcost "
                "(spec §6.4); parity decodes in one pass",
            )
        )
    fixed = dict(_FIXED_CONFIG)
    if options.frame_sampling_mode in ("pkt_size_peak", "fps_plus_pkt_size_peak"):
        fixed |= _PKT_PEAK_CONFIG
    for key, expected in fixed.items():
        if key in config and config[key] != expected:
            warnings.append(
                RunWarning(
                    "cvp_option_not_reproduced",
                    f"cvp config {key} = {config[key]!r} (its CLI always uses {expected!r}); parity uses "
                    f"{expected!r}",
                )
            )
    return options, tuple(warnings)


def check_video(cvp: CvpOutput, info: VideoInfo) -> None:
    """Refuse a video whose stream facts differ from those cvp recorded in meta.json ``metadata``.

    Raises
    ------
    InputError naming the video and listing each fact that differs.
    """
    recorded = cvp.meta["metadata"]
    ours: dict[str, Any] = {
        "codec_name": info.codec_name,
        "width": info.width,
        "height": info.height,
        "total_frames": info.total_frames,
        "fps": info.fps,
        "duration": info.duration_secs,
        "stream_bit_rate": info.stream_bit_rate,
        "format_bit_rate": info.format_bit_rate,
    }
    diffs = []
    for key, value in ours.items():
        if key not in recorded or recorded[key] is None:
            continue
        theirs = recorded[key]
        if key == "codec_name":
            same = str(theirs).lower() == str(value).lower()
        elif key in ("fps", "duration"):
            same = math.isclose(float(theirs), float(value), rel_tol=1e-6, abs_tol=1e-3)
        else:
            same = round(float(theirs)) == round(float(value))
        if not same:
            diffs.append(f"{key} {value} here vs {theirs}")
    if diffs:
        raise InputError(
            f"is not the video cvp read for {cvp.directory} ({'; '.join(diffs)} in meta.json)",
            path=info.path,
            stage="import",
        )


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


# -- comparing -------------------------------------------------------------------------------------


def _as_written(rgb: np.ndarray, fmt: str) -> np.ndarray:
    """RGB pixels after the round trip through cvp's file format (JPEG q95 is lossy)."""
    if fmt == "png":
        return rgb
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, _JPEG_QUALITY])
    if not ok:  # pragma: no cover - OpenCV always encodes uint8 BGR
        raise RuntimeError("cv2.imencode failed")
    return cv2.imdecode(buf, cv2.IMREAD_COLOR)[:, :, ::-1]


def _psnr_db(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return psnr_db(mse)


def anchor_psnr(cvp: CvpOutput, cvp_images: np.ndarray, result: RunResult) -> tuple[float, int, str]:
    """Lowest PSNR of cvp's anchor canvases against our decode of the anchor frame.

    An anchor canvas is a whole frame in identity order (spec §12.2), so it compares with the
    decoded frame directly, whatever our own selection did.

    Returns
    -------
    (lowest PSNR in dB or inf, anchors compared, a note naming the worst canvas and frame).
    """
    hb, wb = cvp.grid_hw
    s = hb * wb
    ids = result.candidates.frame_indices.tolist()
    identity = np.stack(np.divmod(np.arange(s), wb), axis=1)
    h, w = cvp.canvas_hw
    worst, checked, note = math.inf, 0, ""
    groups = cvp.canvas_group_index
    anchors = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]]) if groups.size else groups
    for canvas in anchors.tolist():
        rows = cvp.positions[canvas * s : (canvas + 1) * s]
        fid = int(rows[0, 0])
        whole = fid >= 0 and (rows[:, 0] == fid).all() and np.array_equal(rows[:, 1:], identity)
        if not whole or fid not in ids:
            continue
        ours = _as_written(np.asarray(result.decoded.pixels[ids.index(fid), :h, :w]), cvp.canvas_format)
        psnr = _psnr_db(cvp_images[canvas], ours)
        checked += 1
        if checked == 1 or psnr < worst:
            worst, note = psnr, f"{cvp.canvas_paths[canvas].name} vs frame {fid}"
    return worst, checked, note


def compare_outputs(cvp: CvpOutput, cvp_images: np.ndarray, result: RunResult) -> ImportCheck:
    """Compare our recomputed run with cvp's files.

    Parameters
    ----------
    cvp : the validated directory.
    cvp_images : (C, H, W, 3) uint8 RGB from :func:`read_canvases`.
    result : our parity run with cvp's options.

    Returns
    -------
    ImportCheck with counts and one named warning per kind of difference
    (``cvp_frame_ids_differ``, ``cvp_positions_differ``, ``cvp_canvases_differ``).
    """
    warnings: list[RunWarning] = []
    ours_ids = result.candidates.frame_indices.astype(np.int32)
    if ours_ids.shape != cvp.frame_ids.shape:
        ids_diff = max(ours_ids.size, cvp.frame_ids.size)
        warnings.append(
            RunWarning(
                "cvp_frame_ids_differ",
                f"frame_ids.npy has {cvp.frame_ids.size} ids, our recomputation {ours_ids.size}",
            )
        )
    else:
        differing = np.flatnonzero(ours_ids != cvp.frame_ids)
        ids_diff = int(differing.size)
        if ids_diff:
            i = int(differing[0])
            warnings.append(
                RunWarning(
                    "cvp_frame_ids_differ",
                    f"frame_ids.npy: {ids_diff} of {ours_ids.size} ids differ from ours "
                    f"(first at {i}: cvp {int(cvp.frame_ids[i])}, ours {int(ours_ids[i])})",
                )
            )
    ours_pos = result.canvases.src_patch_position
    if ours_pos.shape != cvp.positions.shape:
        pos_diff = max(ours_pos.shape[0], cvp.positions.shape[0])
        warnings.append(
            RunWarning(
                "cvp_positions_differ",
                f"src_patch_position.npy has {cvp.positions.shape[0]} rows, our recomputation "
                f"{ours_pos.shape[0]}",
            )
        )
    else:
        rows = np.flatnonzero((ours_pos != cvp.positions).any(axis=1))
        pos_diff = int(rows.size)
        if pos_diff:
            r = int(rows[0])
            warnings.append(
                RunWarning(
                    "cvp_positions_differ",
                    f"src_patch_position.npy: {pos_diff} of {ours_pos.shape[0]} rows differ from ours "
                    f"(first at row {r}: cvp {cvp.positions[r].tolist()}, ours {ours_pos[r].tolist()})",
                )
            )
    ours_images = result.canvases.images
    canvas_diff, max_abs = 0, 0
    if ours_images.shape != cvp_images.shape:
        canvas_diff = max(ours_images.shape[0], cvp_images.shape[0])
        warnings.append(
            RunWarning(
                "cvp_canvases_differ",
                f"cvp wrote {cvp_images.shape[0]} canvases of {cvp_images.shape[2]}x{cvp_images.shape[1]}, "
                f"our recomputation {ours_images.shape[0]} of {ours_images.shape[2]}x{ours_images.shape[1]}",
            )
        )
    else:
        first = ""
        for i in range(ours_images.shape[0]):
            written = _as_written(ours_images[i], cvp.canvas_format)
            if not np.array_equal(written, cvp_images[i]):
                canvas_diff += 1
                first = first or cvp.canvas_paths[i].name
                diff = np.abs(written.astype(np.int16) - cvp_images[i].astype(np.int16))
                max_abs = max(max_abs, int(diff.max()))
        if canvas_diff:
            warnings.append(
                RunWarning(
                    "cvp_canvases_differ",
                    f"{canvas_diff} of {ours_images.shape[0]} canvases differ in pixels from ours written as "
                    f".{cvp.canvas_format} (first {first}, up to {max_abs} levels)",
                )
            )
    psnr, checked, _note = anchor_psnr(cvp, cvp_images, result)
    return ImportCheck(
        frame_ids_differing=ids_diff,
        position_rows_differing=pos_diff,
        canvases_differing=canvas_diff,
        canvas_max_abs_diff=max_abs,
        anchor_psnr_db=psnr,
        anchors_checked=checked,
        warnings=tuple(warnings),
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
        versions={"codec_lens": __version__, **gateway.versions()},
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
