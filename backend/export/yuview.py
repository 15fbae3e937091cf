"""YUView statistics: per-block scores, the selection and the raw signal in YUView's CSV format."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from backend import __version__
from backend.export.config import ExportRun
from backend.export.tables import kept_as_grids
from backend.pipeline import RunResult
from backend.render import ANCHOR_RGB, KEPT_RGB, LOST_RGB, lost_blocks

YUVIEW_SCORE_SCALE = 1000
"""YUView statistics hold integers: a block's score is written as its mean per-pixel score in
per mille, round(1000 · score / block_px²), which is 0 … 1000 on the frame scale."""
YUVIEW_TYPES: dict[str, int] = {"block_score": 0, "selection": 1, "raw_signal": 2}
YUVIEW_SELECTION: dict[str, int] = {"kept": 1, "lost": 2, "anchor": 3}
"""Values of the ``selection`` map type; blocks that are none of these are not written."""


def _cell_edges(cells: int, length_px: int) -> np.ndarray:
    """(cells + 1,) pixel edges of a nearest-neighbour stretch of ``cells`` over ``length_px``.

    Uses the same resize as the pipeline's upsampling, so the cells are exactly the pixels
    each grid value covers.
    """
    ramp = cv2.resize(
        np.arange(cells, dtype=np.float32).reshape(1, cells), (length_px, 1), interpolation=cv2.INTER_NEAREST
    )[0].astype(np.int64)
    edges = np.searchsorted(ramp, np.arange(cells), side="left")
    return np.append(edges, length_px)


def yuview_block_edges(result: RunResult, coordinates: str) -> tuple[np.ndarray, np.ndarray]:
    """Pixel edges of the block grid in YUView coordinates.

    Returns
    -------
    ys : (block_rows + 1,) int64; xs : (block_cols + 1,) int64. Source coordinates scale the
    processed block edges by orig/processed and round, so neighbouring blocks share an edge.
    """
    geo = result.geometry
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    ys, xs = np.arange(bh_n + 1) * f, np.arange(bw_n + 1) * f
    if coordinates == "processed":
        return ys, xs
    (oh, ow), (h, w) = geo.orig_hw, geo.processed_hw
    return np.round(ys * oh / h).astype(np.int64), np.round(xs * ow / w).astype(np.int64)


def _yuview_lines(kind: int, poc: int, ys: np.ndarray, xs: np.ndarray, values: np.ndarray) -> list[str]:
    """Data lines ``POC;x;y;w;h;type;value`` for every non-masked cell (values: (rows, cols) int)."""
    rr, cc = np.nonzero(values != np.iinfo(np.int64).min)
    x0, y0 = xs[cc], ys[rr]
    w, h = xs[cc + 1] - x0, ys[rr + 1] - y0
    keep = (w > 0) & (h > 0)
    vals = values[rr, cc]
    return [
        f"{poc};{a};{b};{c};{d};{kind};{v}"
        for a, b, c, d, v in zip(
            x0[keep].tolist(),
            y0[keep].tolist(),
            w[keep].tolist(),
            h[keep].tolist(),
            vals[keep].tolist(),
            strict=True,
        )
    ]


def yuview_text(run: ExportRun, rows: np.ndarray, *, coordinates: str) -> str:
    """A YUView statistics file (CSV, ``;``-separated) for the exported frames of one run.

    Types: 0 ``block_score`` (see :data:`YUVIEW_SCORE_SCALE`, range), 1 ``selection`` (map: 1 kept,
    2 lost, 3 anchor; other blocks absent), 2 the raw signal (its grid key, range) on the
    cells of the pipeline's nearest stretch. POC is the frame_index; each frame once.
    """
    result = run.result
    geo = result.geometry
    (oh, ow), (h, w) = geo.orig_hw, geo.processed_hw
    width, height = (ow, oh) if coordinates == "source" else (w, h)
    ys, xs = yuview_block_edges(result, coordinates)
    bh_n, bw_n = geo.block_grid_hw
    f = geo.patch * geo.block_size
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(result.info.path).stem) or "video"
    raw_key = result.decoded.grid_key
    raw_max = max((float(np.max(g)) for g in result.decoded.grids if g is not None), default=0.0)
    fps = result.info.fps or 25.0
    header = [
        "%;syntax-version;v1.22",
        f"%;seq-specs;{name};0;{width};{height};{fps:.6g}",
        f"%;codec-lens;{__version__};run;{run.run_id};score-scale;{YUVIEW_SCORE_SCALE};coordinates;{coordinates}",
        f"%;type;{YUVIEW_TYPES['block_score']};block_score;range",
        f"%;defaultRange;0;{YUVIEW_SCORE_SCALE};jet",
        f"%;type;{YUVIEW_TYPES['selection']};selection;map",
        f"%;mapColor;{YUVIEW_SELECTION['kept']};{KEPT_RGB[0]};{KEPT_RGB[1]};{KEPT_RGB[2]};255",
        f"%;mapColor;{YUVIEW_SELECTION['lost']};{LOST_RGB[0]};{LOST_RGB[1]};{LOST_RGB[2]};255",
        f"%;mapColor;{YUVIEW_SELECTION['anchor']};{ANCHOR_RGB[0]};{ANCHOR_RGB[1]};{ANCHOR_RGB[2]};255",
        f"%;type;{YUVIEW_TYPES['raw_signal']};{raw_key};range",
        f"%;defaultRange;0;{max(1, int(np.ceil(raw_max)))};jet",
    ]
    lines = list(header)
    missing = np.iinfo(np.int64).min
    kept_as = kept_as_grids(result, rows)
    seen: set[int] = set()
    # YUView needs each POC's lines together: frames in frame_index order, each once.
    order = rows[np.argsort(result.candidates.frame_indices[rows], kind="stable")]
    for row in order.tolist():
        fid = int(result.candidates.frame_indices[row])
        if fid in seen:
            continue
        seen.add(fid)
        scores = np.rint(result.scores.block_scores[row].astype(np.float64) * (YUVIEW_SCORE_SCALE / (f * f)))
        lines += _yuview_lines(
            YUVIEW_TYPES["block_score"], fid, ys, xs, scores.astype(np.int64).reshape(bh_n, bw_n)
        )
        sel = np.full((bh_n, bw_n), missing, np.int64)
        sel[lost_blocks(result, row)] = YUVIEW_SELECTION["lost"]
        roles = kept_as[row]
        sel[roles == "block"] = YUVIEW_SELECTION["kept"]
        sel[roles == "anchor"] = YUVIEW_SELECTION["anchor"]
        lines += _yuview_lines(YUVIEW_TYPES["selection"], fid, ys, xs, sel)
        raw = result.decoded.grids[row]
        if raw is not None:
            gh, gw = raw.shape
            lines += _yuview_lines(
                YUVIEW_TYPES["raw_signal"],
                fid,
                _cell_edges(gh, height),
                _cell_edges(gw, width),
                np.rint(np.asarray(raw, np.float64)).astype(np.int64),
            )
    return "\n".join(lines) + "\n"
