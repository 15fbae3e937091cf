"""Read a codec-video-prep output folder: validate its files, decode its canvases, recover its options."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from backend.errors import InputError
from backend.pipeline import SelectionOptions
from backend.records import RunWarning, VideoInfo

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


def _canvas_files(meta: dict[str, Any], directory: Path, total_images: int) -> tuple[str, tuple[Path, ...]]:
    """The canvas format (``jpg``/``png``) and the canvas files meta.json lists, each checked to exist."""
    meta_path = directory / "meta.json"
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
    return canvas_format, canvas_paths


def _check_positions(
    positions: np.ndarray, frame_ids: np.ndarray, grid_hw: tuple[int, int], pos_path: Path
) -> None:
    """Refuse a src_patch_position row that is neither a pad nor a patch of a listed frame inside the grid."""
    hb, wb = grid_hw
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
    canvas_format, canvas_paths = _canvas_files(meta, directory, total_images)

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
    _check_positions(positions, frame_ids, (hb, wb), pos_path)
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
