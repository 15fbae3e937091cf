"""Codec layers of the frame viewer: the decoder's motion vectors as arrows and its per-block QP as a tint."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from backend.render import colormap_lut

CODEC_LAYERS: tuple[str, ...] = ("mv", "qp")
CODEC_LAYER_LABELS: dict[str, str] = {"mv": "motion vectors", "qp": "block QP"}
MV_PAST_RGB = (0, 255, 120)
"""Vectors predicting from a past frame (list 0)."""
MV_FUTURE_RGB = (255, 120, 255)
"""Vectors predicting from a future frame (list 1)."""
QP_OPACITY = 0.45
MAX_ARROWS = 6000
MIN_ARROW_PX = 0.5


def parse_codec_layers(text: str | list[str] | None) -> tuple[str, ...]:
    """The codec layers named in ``text`` (``mv,qp`` or a list), known names only, in table order."""
    names = text.split(",") if isinstance(text, str) else list(text or [])
    return tuple(n for n in CODEC_LAYERS if n in {x.strip() for x in names})


def _draw_qp(image: np.ndarray, qp: np.ndarray, unit: int, scale: tuple[float, float]) -> None:
    h, w = image.shape[:2]
    lo, hi = float(qp.min()), float(qp.max())
    # Fine quantisation (low QP, many bits) bright, coarse dark; the frame's own range.
    levels = (255 - np.round((qp - lo) / max(hi - lo, 1.0) * 255)).astype(np.uint8)
    colour = colormap_lut("viridis")[levels]
    rows, cols = qp.shape
    size = (max(1, round(cols * unit * scale[0])), max(1, round(rows * unit * scale[1])))
    tint = cv2.resize(colour, size, interpolation=cv2.INTER_NEAREST)[:h, :w]
    th, tw = tint.shape[:2]
    image[:th, :tw] = cv2.addWeighted(tint, QP_OPACITY, image[:th, :tw], 1.0 - QP_OPACITY, 0.0)


def _draw_vectors(image: np.ndarray, mvs: np.ndarray, scale: tuple[float, float]) -> None:
    sx, sy = scale
    scale_div = np.maximum(mvs[:, 6], 1).astype(np.float32)
    dx, dy = mvs[:, 4] / scale_div, mvs[:, 5] / scale_div
    keep = np.hypot(dx, dy) >= MIN_ARROW_PX
    idx = np.flatnonzero(keep)
    if idx.size > MAX_ARROWS:
        idx = idx[:: int(np.ceil(idx.size / MAX_ARROWS))]
    thickness = 1 if image.shape[1] < 1000 else 2
    for i in idx.tolist():
        # From where the block's content was in the reference to where it is now.
        x1, y1 = float(mvs[i, 0]) * sx, float(mvs[i, 1]) * sy
        x0, y0 = x1 + float(dx[i]) * sx, y1 + float(dy[i]) * sy
        colour = MV_PAST_RGB if mvs[i, 7] < 0 else MV_FUTURE_RGB
        cv2.arrowedLine(
            image,
            (round(x0), round(y0)),
            (round(x1), round(y1)),
            colour,
            thickness,
            cv2.LINE_AA,
            tipLength=0.35,
        )


def draw_codec_layers(
    image: np.ndarray, side: dict[str, Any] | None, source_hw: tuple[int, int], layers: tuple[str, ...]
) -> np.ndarray:
    """Draw the codec layers over a frame image.

    Parameters
    ----------
    image : (H, W, 3) uint8 RGB, the rendered frame (processed or source size); not modified.
    side : one frame of :func:`backend.runs.source_frame.codec_side_data` (None: nothing to draw).
    source_hw : the source frame's (height, width), the space the side data is in.
    layers : names from :data:`CODEC_LAYERS`.

    Returns
    -------
    (H, W, 3) uint8 RGB.
    """
    if not layers or side is None:
        return image
    out = np.array(image, copy=True)
    scale = (out.shape[1] / source_hw[1], out.shape[0] / source_hw[0])
    if "qp" in layers and side.get("qp") is not None:
        _draw_qp(out, np.asarray(side["qp"], np.float32), int(side.get("qp_unit", 16)), scale)
    if "mv" in layers and side.get("mvs") is not None and len(side["mvs"]):
        _draw_vectors(out, np.asarray(side["mvs"]), scale)
    return out


def codec_layer_note(support: dict[str, bool], codec: str, layers: tuple[str, ...]) -> str:
    """What the chosen codec layers cannot show for this codec ('' when all are available);
    ``support``: layer name → whether the codec's decoder exports it."""
    missing = [CODEC_LAYER_LABELS[n] for n in layers if not support.get(n, False)]
    return f"{codec} exports no {' or '.join(missing)} (FFmpeg's decoder)" if missing else ""
