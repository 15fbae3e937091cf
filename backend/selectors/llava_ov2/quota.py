"""llava-ov2 selection stage: per GOP, the I-canvas frame and the P-canvases' blocks under temporal quotas.

P-canvas r of a GOP of n_g frames draws from the score rows round(r·n_g/P) … round((r+1)·n_g/P)
(the r-th share of the GOP in time; row j is GOP frame j + 1). Within each frame, blocks are
ranked by score and attenuated by 1/√(1 + 0.5·rank); blocks at a (row, col) an earlier
P-canvas of the GOP used are multiplied by 0.15; the canvas takes the top hp·wp of the range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.config import PROFILES, Profile, option_of, param, validate_fields
from backend.records import Groups, GroupSelection, RunWarning, ScoreMaps, Selection
from backend.selectors.llava_ov2.quirks import cite, quirk_on, quirk_warning
from backend.selectors.llava_ov2.sample import LlavaSampleConfig
from backend.selectors.llava_ov2.torch_order import argsort_desc, top_members

ATTENUATION_LAMBDA = 0.5
"""λ of the rank attenuation 1/√(1 + λ·rank)."""
REUSE_PENALTY = 0.15
"""Factor on blocks whose position an earlier P-canvas of the GOP already used."""

_F32 = np.float32


@dataclass(frozen=True, kw_only=True)
class QuotaConfig:
    """Canvases per GOP and the profile (tie order)."""

    images_per_group: int = option_of(LlavaSampleConfig, "images_per_group")
    profile: Profile = param(
        "clean",
        label="Profile",
        help="parity orders equal scores as torch's CPU sort and top-k do and skips one-frame GOPs "
        "(lmms-video-utils); clean orders them by position",
        choices=PROFILES,
    )

    def __post_init__(self) -> None:
        validate_fields(self)


def p_canvas_rows(n_g: int, p: int) -> list[tuple[int, int]]:
    """Score-row range [f0, f1) of each P-canvas of a GOP with ``n_g`` frames (rows 0 … n_g − 2).

    Examples
    --------
    >>> p_canvas_rows(32, 3)
    [(0, 11), (11, 21), (21, 31)]
    >>> p_canvas_rows(2, 3)  # one score row: the later canvases get none
    [(0, 1), (1, 1), (1, 1)]
    """
    rows = n_g - 1
    out = []
    for r in range(p):
        f0 = max(0, round(r * n_g / p))
        f1 = min(rows, round((r + 1) * n_g / p))
        out.append((min(f0, rows), max(min(f0, rows), f1)))
    return out


def attenuation(ranks: np.ndarray) -> np.ndarray:
    """1/√(1 + λ·rank) in float32, as the reference computes it.

    Examples
    --------
    >>> attenuation(np.array([0.0, 2.0, 6.0], np.float32)).tolist()
    [1.0, 0.7071067690849304, 0.5]
    """
    inner = (_F32(1.0) + (_F32(ATTENUATION_LAMBDA) * ranks.astype(_F32)).astype(_F32)).astype(_F32)
    return (_F32(1.0) / np.sqrt(inner)).astype(_F32)


def pick_blocks(
    rows: np.ndarray, seen: np.ndarray, budget: int, *, torch_order: bool
) -> tuple[np.ndarray, np.ndarray]:
    """One P-canvas: the attenuated, reuse-penalised top ``budget`` blocks of a range of score rows.

    Parameters
    ----------
    rows : (nf, nb) float32 block scores of the range's frames.
    seen : (nb,) bool, positions an earlier P-canvas of the GOP used.
    budget : blocks the canvas holds (hp·wp).
    torch_order : order equal values as torch does (parity) rather than by position.

    Returns
    -------
    (flat, values): indices into rows.ravel() of the kept blocks (ascending) and their
    attenuated, penalised values.
    """
    nf, nb = rows.shape
    ranks = np.empty((nf, nb), _F32)
    for i in range(nf):
        ranks[i, argsort_desc(rows[i], torch_order=torch_order)] = np.arange(nb, dtype=_F32)
    values = (rows * attenuation(ranks)).astype(_F32)
    if seen.any():
        penalty = np.where(seen, _F32(REUSE_PENALTY), _F32(1.0)).astype(_F32)
        values = (values * penalty[None, :]).astype(_F32)
    flat = values.ravel()
    kept = top_members(flat, budget, torch_order=torch_order)
    return kept, flat[kept]


def select_gop(
    block_rows: np.ndarray,
    frame_indices: np.ndarray,
    *,
    group_index: int,
    start: int,
    block_cols: int,
    images_per_group: int,
    torch_order: bool,
) -> GroupSelection:
    """The kept blocks of one GOP, each with the P-canvas it goes to.

    Parameters
    ----------
    block_rows : (n_g − 1, nb) float32 block scores; row j is GOP frame j + 1.
    frame_indices : (n_g,) the GOP's frames; position 0 is the I-canvas frame.

    Returns
    -------
    GroupSelection with ``kept`` rows [t, block_row, block_col] (t = GOP position), sorted by
    (canvas, t, block_row, block_col), and ``kept_canvas`` (1 … images_per_group − 1).
    """
    n_g = int(frame_indices.size)
    nb = block_rows.shape[1] if block_rows.ndim == 2 else 0
    p = images_per_group - 1
    seen = np.zeros(nb, bool)
    kept_t: list[np.ndarray] = []
    kept_b: list[np.ndarray] = []
    kept_c: list[np.ndarray] = []
    kept_v: list[np.ndarray] = []
    for r, (f0, f1) in enumerate(p_canvas_rows(n_g, p)):
        if f1 <= f0:
            continue
        flat, vals = pick_blocks(block_rows[f0:f1], seen, nb, torch_order=torch_order)
        t, b = flat // nb + f0 + 1, flat % nb
        kept_t.append(t)
        kept_b.append(b)
        kept_c.append(np.full(t.size, r + 1))
        kept_v.append(vals)
        seen[b] = True
    t = np.concatenate(kept_t) if kept_t else np.zeros(0, np.int64)
    b = np.concatenate(kept_b) if kept_b else np.zeros(0, np.int64)
    canvas = np.concatenate(kept_c) if kept_c else np.zeros(0, np.int64)
    vals = np.concatenate(kept_v) if kept_v else np.zeros(0, _F32)
    order = np.lexsort((b, t, canvas))
    t, b, canvas, vals = t[order], b[order], canvas[order], vals[order]
    ranked = np.argsort(-vals, kind="stable")
    kept = np.stack([t, b // block_cols, b % block_cols], axis=1).astype(np.int32).reshape(-1, 3)
    return GroupSelection(
        group_index=group_index,
        start=start,
        end=start + n_g,
        frame_indices=tuple(int(i) for i in frame_indices),
        anchor_swapped_with=None,
        kept=kept,
        kept_scores=vals.astype(_F32),
        ranked=np.stack([t[ranked], b[ranked]], axis=1).astype(np.int32).reshape(-1, 2),
        ranked_scores=vals[ranked].astype(_F32),
        candidate_count=int(max(0, n_g - 1) * nb),
        budget=int(p * nb),
        cutoff_score=float(vals.min()) if vals.size else float("-inf"),
        kept_canvas=canvas.astype(np.int32),
    )


def select_quota(
    scores: ScoreMaps, groups: Groups, frame_indices: np.ndarray, block_cols: int, *, config: QuotaConfig
) -> Selection:
    """Every GOP's selection; parity skips GOPs of one frame (lmms-video-utils defect 6).

    Parameters
    ----------
    scores : (n, nb) block scores, row i for candidate i (rows of GOP-first frames unused).
    groups : the GOPs.
    frame_indices : (n,) candidates.
    block_cols : blocks per canvas row.
    """
    torch_order = quirk_on(config.profile, "torch_tie_order")
    out: list[GroupSelection] = []
    skipped: list[int] = []
    warnings: list[RunWarning] = []
    for spec in groups.specs:
        if spec.frame_count < 2 and quirk_on(config.profile, "short_gops_vanish"):
            skipped.append(spec.group_index)
            warnings.append(
                quirk_warning(
                    "short_gops_vanish",
                    f"GOP {spec.group_index} (sampled frame {spec.start}) has one frame and produces no "
                    "canvas "
                    f"({cite('short_gops_vanish')})",
                )
            )
            continue
        sel = select_gop(
            scores.block_scores[spec.start + 1 : spec.end],
            frame_indices[spec.start : spec.end],
            group_index=spec.group_index,
            start=spec.start,
            block_cols=block_cols,
            images_per_group=config.images_per_group,
            torch_order=torch_order,
        )
        if sel.kept.shape[0] < sel.budget:
            warnings.append(
                RunWarning(
                    "p_canvas_empty",
                    f"GOP {spec.group_index}: {spec.frame_count} frames fill "
                    f"{int(np.unique(sel.kept_canvas).size)} "
                    f"of {config.images_per_group - 1} P-canvases; the rest is padding",
                )
            )
        out.append(sel)
    return Selection(tuple(out), tuple(skipped), tuple(warnings))
