"""Compare a parity recomputation with a cvp folder: frame ids, positions, canvas pixels, anchor PSNR."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from backend.cvp_format.read import CvpOutput
from backend.imaging import psnr_db
from backend.pipeline import RunResult
from backend.records import RunWarning

_JPEG_QUALITY = 95  # cvp's IMWRITE_JPEG_QUALITY (spec §13.1)


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
