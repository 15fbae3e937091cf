"""Selector comparison: 2–4 selectors (or presets, or option sets) on one video, what each kept and where.

Each entry runs and is stored as a run of its selector; the comparison is stored in the
codec comparisons' tables (kind ``selectors``): one variant per entry, the same per-pair and
per-frame kept-set Jaccard, plus each run's coverage (``comparison_coverage``): tokens,
canvases, temporal coverage (share of 1-second bins with at least one kept block, and the
longest stretch without one) and spatial coverage.

Selectors size their canvases differently (cvp 336×448 where llava-ov2 makes 336×420 of a
640×480 video), so blocks are compared on one grid, the first entry's: another run's kept
blocks are mapped onto it by area, and a reference block counts as kept when at least half of
it is covered. Runs of the same grid compare block for block. Only the blocks that show the
picture take part: a letterboxing selector's bars (onevision) are cut off first
(``backend.selectors.picture_of``), so that its blocks land where their pixels are.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd

import native
from backend import __version__
from backend.codecs import canonical_codec
from backend.compare.encode import Variant
from backend.compare.metrics import PairMetrics, first_rows, kept_masks, pair_from_masks, variant_metrics
from backend.compare.stored import pair_frame_rows
from backend.errors import CodecLensError
from backend.pipeline import RunResult
from backend.records import _ShapeRepr
from backend.runs import content_sha256, select_and_store
from backend.selectors import SELECTORS, check_options, option_names, options_for, picture_of
from backend.selectors.presets import PRESETS, preset_values
from backend.stages.probe import ProbeConfig, check_input_file, probe
from backend.store import SessionStore

MAX_ENTRIES = 4
BIN_SECS = 1.0
"""Width of the temporal-coverage bins."""
KEPT_AREA = 0.5
"""Share of a reference block a run's kept blocks must cover for it to count as kept there."""

ProgressCallback = Callable[[str, float], None]


@dataclass(frozen=True)
class SelectorEntry:
    """One compared run: its label, selector, options and how it was asked for."""

    label: str
    selector: str
    options: Any
    spec: str
    """The entry as written (``llava-ov2[score_mode=mvwarp]``, ``mage-vl``)."""


_ENTRY = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\[(.*)\])?\s*$")


def split_entries(text: str) -> list[str]:
    """``a,b[x=1,y=2],c`` → ``["a", "b[x=1,y=2]", "c"]`` (commas inside brackets stay).

    Examples
    --------
    >>> split_entries("cvp, llava-ov2[score_mode=mvwarp,gop_mode=bitcost],uniform")
    ['cvp', 'llava-ov2[score_mode=mvwarp,gop_mode=bitcost]', 'uniform']
    """
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [e for e in out if e]


def _value(text: str, default: Any) -> Any:
    if isinstance(default, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"Invalid flag value ({text!r}). Supported values are true, false, 1, 0.")
    try:
        return type(default)(text)
    except ValueError:
        raise ValueError(
            f"Invalid value ({text!r}). Supported values are {type(default).__name__} numbers."
        ) from None


def parse_entries(
    text: str | Sequence[str],
    *,
    shared: Mapping[str, Any] | None = None,
    total_frames: int | None = None,
) -> list[SelectorEntry]:
    """The compared entries: each a selector or preset name with optional ``[name=value,…]`` options.

    ``shared`` options apply to every entry whose selector takes them (an option no entry takes
    is refused). Labels are the entries as written, numbered when repeated.

    Raises
    ------
    ValueError : unknown names, options the entry's selector does not take, not 2 to 4 entries.

    Examples
    --------
    >>> [e.label for e in parse_entries("cvp,llava-ov2[gop_mode=bitcost]")]
    ['cvp', 'llava-ov2[gop_mode=bitcost]']
    """
    items = split_entries(text) if isinstance(text, str) else [str(t).strip() for t in text if str(t).strip()]
    if not 2 <= len(items) <= MAX_ENTRIES:
        raise ValueError(
            f"Invalid selectors ({', '.join(items) or 'none'}). Supported values are 2 to {MAX_ENTRIES} "
            "selectors, presets or option sets, comma-separated."
        )
    shared = dict(shared or {})
    used: set[str] = set()
    out: list[SelectorEntry] = []
    for item in items:
        m = _ENTRY.match(item)
        if m is None:
            raise ValueError(
                f"Invalid selector entry ({item!r}). Supported values look like name[option=value,…]."
            )
        name, extra = m.group(1), m.group(2) or ""
        if name in SELECTORS:
            selector, base = name, {}
        elif name in PRESETS:
            selector, base = PRESETS[name].selector, None
        else:
            known = ", ".join([*SELECTORS.names, *PRESETS])
            raise ValueError(f"Invalid selector ({name!r}). Supported values are {known}.")
        fields = {f.name: f.default for f in dataclasses.fields(SELECTORS.lookup(selector).options_cls)}
        own: dict[str, Any] = {}
        for pair in (p for p in extra.split(",") if p.strip()):
            key, sep, raw = pair.partition("=")
            key = key.strip()
            if not sep:
                raise ValueError(
                    f"Invalid option ({pair.strip()!r}) in {item!r}. Supported values are name=value."
                )
            check_options(selector, {key: None})
            own[key] = _value(raw.strip(), fields[key])
        given = {k: v for k, v in shared.items() if k in fields} | own
        used |= {k for k in shared if k in fields}
        values = preset_values(name, given, total_frames=total_frames) if base is None else given
        label = (
            item if item not in [e.spec for e in out] else f"{item} #{sum(e.spec == item for e in out) + 1}"
        )
        out.append(
            SelectorEntry(label=label, selector=selector, options=options_for(selector, values), spec=item)
        )
    unused = sorted(set(shared) - used)
    if unused:
        owners = [s for s in SELECTORS.names if unused[0] in option_names(s)]
        raise ValueError(
            f"Invalid option (--{unused[0]}): no compared selector takes it"
            + (f" (an option of {', '.join(owners)})." if owners else ".")
        )
    return out


# --------------------------------------------------------------------------- metrics


def masks_on(masks: np.ndarray, grid_hw: tuple[int, int]) -> np.ndarray:
    """Kept-block masks (frames, bh, bw) on another block grid (frames, BH, BW): a block there counts
    as kept when at least half of its area is covered by kept blocks (area resampling).

    Examples
    --------
    >>> m = np.zeros((1, 2, 2), bool); m[0, 0, 0] = True
    >>> masks_on(m, (4, 4))[0].astype(int).tolist()
    [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    """
    if masks.shape[1:] == tuple(grid_hw):
        return masks
    gh, gw = grid_hw
    out = np.empty((masks.shape[0], gh, gw), bool)
    for i, m in enumerate(masks):
        if not m.any():
            out[i] = False
            continue
        # Area interpolation gives each target block the covered share of its area (upscaling
        # repeats, which is the same thing for whole-block ratios).
        share = cv2.resize(m.astype(np.float32), (gw, gh), interpolation=cv2.INTER_AREA)
        out[i] = share >= KEPT_AREA - 1e-6
    return out


def picture_grid(result: RunResult) -> tuple[int, int]:
    """(rows, cols) of the run's blocks that show the picture (its whole block grid unless its
    selector adds bars)."""
    r0, r1, c0, c1 = picture_of(result.options, result.geometry)
    return r1 - r0, c1 - c0


def picture_masks(result: RunResult) -> np.ndarray:
    """:func:`kept_masks` cut to the blocks that show the picture, (total_frames, rows, cols) bool."""
    r0, r1, c0, c1 = picture_of(result.options, result.geometry)
    return kept_masks(result)[:, r0:r1, c0:c1]


def _whole_grid(result: RunResult) -> bool:
    return picture_grid(result) == tuple(result.geometry.block_grid_hw)


def kept_mask_on(result: RunResult, frame_index: int, grid_hw: tuple[int, int]) -> np.ndarray:
    """(BH, BW) bool: the blocks of one frame in a run's canvases (its picture's), on another
    picture's block grid."""
    masks = picture_masks(result)
    total = masks.shape[0]
    frame = (
        masks[frame_index : frame_index + 1]
        if 0 <= frame_index < total
        else np.zeros((1, *masks.shape[1:]), bool)
    )
    return masks_on(frame, grid_hw)[0]


def kept_mask_into(a: RunResult, frame_index: int, b: RunResult) -> np.ndarray:
    """A's kept blocks of one frame on B's whole block grid: A's picture mapped onto B's picture,
    nothing on B's bars. (block_rows, block_cols) of B, bool."""
    r0, r1, c0, c1 = picture_of(b.options, b.geometry)
    out = np.zeros(b.geometry.block_grid_hw, bool)
    out[r0:r1, c0:c1] = kept_mask_on(a, frame_index, (r1 - r0, c1 - c0))
    return out


def frame_times(result: RunResult) -> np.ndarray:
    """(total_frames,) seconds of each frame from the start: frame_index / fps (else packet times)."""
    info = result.info
    n = max(1, int(info.total_frames))
    if info.fps > 0:
        return np.arange(n) / info.fps
    pts = info.packet_pts_secs[:n] - info.start_pts_secs
    return np.concatenate([pts, np.full(n - pts.size, pts[-1] if pts.size else 0.0)])


@dataclass(frozen=True, repr=False)
class Coverage(_ShapeRepr):
    """What one run kept of a video, in time and in space."""

    variant_index: int
    selector: str
    canvases: int
    tokens: int
    valid_tokens: int
    kept_blocks: int
    """Block positions (frame, block) whose pixels reach a canvas, anchors counted whole."""
    bin_secs: float
    bins: int
    covered_bins: int
    temporal_coverage: float
    """covered_bins / bins: share of the video's 1-second bins holding a frame with a kept block."""
    longest_gap_secs: float
    """Longest stretch of the video between frames with a kept block (start and end included)."""
    spatial_coverage: float
    """Share of block positions (on the comparison grid) kept in at least one frame."""


def coverage(result: RunResult, grid_hw: tuple[int, int], *, variant_index: int, selector: str) -> Coverage:
    """The run's coverage figures (see :class:`Coverage`); blocks are its picture's."""
    info = result.info
    masks = picture_masks(result)[: max(1, int(info.total_frames))]
    per_frame = masks.reshape(masks.shape[0], -1).any(axis=1)
    times = frame_times(result)[: per_frame.size]
    duration = (
        info.total_frames / info.fps if info.fps > 0 else max(info.duration_secs, float(times.max(initial=0)))
    )
    bins = max(1, math.ceil(duration / BIN_SECS - 1e-9))
    kept_times = times[per_frame]
    covered = np.unique(np.minimum(bins - 1, (kept_times // BIN_SECS).astype(np.int64)))
    edges = np.concatenate([[0.0], kept_times, [duration]])
    gap = float(np.max(np.diff(edges))) if edges.size > 1 else duration
    union = masks_on(masks.any(axis=0, keepdims=True), grid_hw)[0]
    tok = result.canvases.tokens
    return Coverage(
        variant_index=variant_index,
        selector=selector,
        canvases=int(result.canvases.count),
        tokens=int(tok.shape[0]),
        valid_tokens=int(tok[:, 7].sum()),
        kept_blocks=int(masks.sum()),
        bin_secs=BIN_SECS,
        bins=int(bins),
        covered_bins=int(covered.size),
        temporal_coverage=float(covered.size / bins),
        longest_gap_secs=gap,
        spatial_coverage=float(union.mean()) if union.size else 0.0,
    )


def pair_on_grid(
    a: RunResult, b: RunResult, grid_hw: tuple[int, int], *, variant_a: int, variant_b: int
) -> PairMetrics:
    """Per-frame kept-set Jaccard of two runs on one block grid (frames that are candidates in either).

    Spearman of the block scores where both runs score that grid themselves, else NaN.
    """
    ma, mb = masks_on(picture_masks(a), grid_hw), masks_on(picture_masks(b), grid_hw)
    total = max(ma.shape[0], mb.shape[0])
    rows_a, rows_b = first_rows(a), first_rows(b)
    frames = np.asarray(sorted(f for f in set(rows_a) | set(rows_b) if f < total), np.int64)
    same = tuple(a.geometry.block_grid_hw) == tuple(grid_hw) == tuple(b.geometry.block_grid_hw)
    scored = same and _whole_grid(a) and _whole_grid(b)
    return pair_from_masks(
        a,
        b,
        ma,
        mb,
        frames,
        spearman_rows=(rows_a, rows_b) if scored else None,
        variants=(variant_a, variant_b),
    )


# --------------------------------------------------------------------------- the comparison


@dataclass(frozen=True, repr=False)
class SelectorComparison(_ShapeRepr):
    """A finished selector comparison."""

    comparison_id: str
    source_path: str
    width: int
    height: int
    fps: float
    frame_count: int
    entries: tuple[SelectorEntry, ...]
    run_ids: tuple[str, ...]
    grid_hw: tuple[int, int]
    """The block grid blocks are compared on (the first entry's)."""
    variants: tuple[Variant, ...]
    metrics: tuple[Any, ...]
    pairs: tuple[PairMetrics, ...]
    coverage: tuple[Coverage, ...]
    timings_secs: dict[str, float]

    def config(self) -> dict[str, Any]:
        return {
            "kind": "selectors",
            "entries": [e.spec for e in self.entries],
            "labels": [e.label for e in self.entries],
            "selectors": [e.selector for e in self.entries],
            "grid_hw": list(self.grid_hw),
            "bin_secs": BIN_SECS,
            "kept_area": KEPT_AREA,
        }


def _variant(index: int, entry: SelectorEntry, result: RunResult, size_bytes: int) -> Variant:
    info = result.info
    duration = info.total_frames / info.fps if info.fps > 0 else info.duration_secs
    spec = SELECTORS.lookup(entry.selector)
    return Variant(
        variant_index=index,
        label=entry.label,
        codec=canonical_codec(info.codec_name),
        encoder=None,
        video_path=info.path,
        encoder_options={k: str(v) for k, v in entry.options.as_dict().items()},
        structure_note=spec.help,
        frame_count=int(info.total_frames),
        keyframe_indices=info.keyframe_indices,
        size_bytes=int(size_bytes),
        bitrate_kbps=float(size_bytes * 8 / 1000 / duration) if duration > 0 else 0.0,
        encode_secs=0.0,
        score=entry.selector,
        score_note=f"{entry.spec} ({result.options.profile})",
    )


def compare_selectors(
    video: str | Path,
    store: SessionStore,
    *,
    entries: Sequence[SelectorEntry],
    on_progress: ProgressCallback | None = None,
    comparison_id: str | None = None,
) -> SelectorComparison:
    """Run every entry on ``video``, store the runs and the comparison, and return it.

    Parameters
    ----------
    video : the video every entry selects on.
    store : session store receiving the runs and the comparison.
    entries : 2 to 4 entries (:func:`parse_entries`).
    on_progress : ``on_progress(step, fraction)`` after each run and at the end.
    comparison_id : the id to store it under (default a new one).

    Returns
    -------
    The SelectorComparison, stored (a failure is stored as ``failed``).
    """
    comparison_id = comparison_id or uuid.uuid4().hex[:12]
    src = check_input_file(video)
    config = {"kind": "selectors", "entries": [e.spec for e in entries]}
    if not 2 <= len(entries) <= MAX_ENTRIES:
        raise ValueError(
            f"Invalid selectors ({len(entries)}). Supported values are 2 to {MAX_ENTRIES} entries."
        )
    started = time.perf_counter()
    timings: dict[str, float] = {}
    try:
        content = content_sha256(src)
        runs: list[tuple[str, RunResult]] = []
        for k, entry in enumerate(entries):
            t0 = time.perf_counter()
            runs.append(select_and_store(src, store, options=entry.options, content=content))
            timings[f"select {entry.label}"] = time.perf_counter() - t0
            if on_progress is not None:
                on_progress(f"select {entry.label}", (k + 1) / (len(entries) + 1))
        t0 = time.perf_counter()
        results = [r for _, r in runs]
        grid = tuple(int(v) for v in picture_grid(results[0]))
        pairs = tuple(
            pair_on_grid(results[i], results[j], grid, variant_a=i, variant_b=j)
            for i in range(len(results))
            for j in range(i + 1, len(results))
        )
        size = src.stat().st_size
        variants = tuple(
            _variant(i, e, r, size) for i, (e, r) in enumerate(zip(entries, results, strict=True))
        )
        metrics = tuple(
            variant_metrics(v, run_id, r, None, None) for v, (run_id, r) in zip(variants, runs, strict=True)
        )
        cover = tuple(
            coverage(r, grid, variant_index=i, selector=e.selector)
            for i, (e, r) in enumerate(zip(entries, results, strict=True))
        )
        timings["metrics"] = time.perf_counter() - t0
        timings["total"] = time.perf_counter() - started
        info = results[0].info
        comparison = SelectorComparison(
            comparison_id=comparison_id,
            source_path=str(src),
            width=int(info.width),
            height=int(info.height),
            fps=float(info.fps),
            frame_count=int(info.total_frames),
            entries=tuple(entries),
            run_ids=tuple(run_id for run_id, _ in runs),
            grid_hw=grid,  # type: ignore[arg-type]
            variants=variants,
            metrics=metrics,
            pairs=pairs,
            coverage=cover,
            timings_secs=timings,
        )
        store.insert_comparison(
            comparison_id, row=comparison_row(comparison, content), tables=comparison_tables(comparison)
        )
        if on_progress is not None:
            on_progress("store", 1.0)
        return comparison
    except (CodecLensError, ValueError, OSError, RuntimeError) as exc:
        message = exc.one_line() if isinstance(exc, CodecLensError) else str(exc)
        store.fail_comparison(comparison_id, source_path=str(src), config=config, error=message)
        raise
    except BaseException:
        store.fail_comparison(comparison_id, source_path=str(src), config=config, error="interrupted")
        raise


def comparison_row(comparison: SelectorComparison, source_sha256: str) -> dict[str, Any]:
    """The ``comparisons`` row of a selector comparison (kind ``selectors``)."""
    return {
        "kind": "selectors",
        "source_path": comparison.source_path,
        "source_sha256": source_sha256,
        "reference_path": comparison.source_path,
        "width": comparison.width,
        "height": comparison.height,
        "fps": comparison.fps,
        "frame_count": comparison.frame_count,
        "config_json": json.dumps(comparison.config()),
        "options_json": json.dumps({e.label: e.options.as_dict() for e in comparison.entries}),
        "settings_json": json.dumps(
            {"versions": {"codec_lens": __version__, **native.versions()}}, default=str
        ),
        "timings_json": json.dumps(comparison.timings_secs),
    }


def _records(items: Sequence[Any], rename: Mapping[str, str] | None = None) -> pd.DataFrame:
    rows = []
    for rec in items:
        row = {}
        for f in dataclasses.fields(rec):
            value = getattr(rec, f.name)
            row[(rename or {}).get(f.name, f.name)] = (
                json.dumps(value) if isinstance(value, (dict, tuple, list)) else value
            )
        rows.append(row)
    return pd.DataFrame(rows)


def comparison_tables(comparison: SelectorComparison) -> dict[str, pd.DataFrame]:
    """Rows of a selector comparison: variants, metrics, pairs, per-frame pairs and coverage."""
    return {
        "comparison_variants": _records(
            comparison.variants,
            {"encoder_options": "encoder_options_json", "keyframe_indices": "keyframe_indices_json"},
        ),
        "comparison_metrics": _records(comparison.metrics),
        "comparison_pairs": pd.DataFrame([p.summary() for p in comparison.pairs]),
        "comparison_pair_frames": pair_frame_rows(comparison.pairs),
        "comparison_coverage": _records(comparison.coverage),
    }


def probe_frames(video: str | Path) -> int:
    """The video's frame count (for presets that cap their sample count at it)."""
    return probe(video, config=ProbeConfig()).total_frames
