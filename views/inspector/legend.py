"""The viewer's legends: what each overlay colour means; the heat layers' colour bars with unit and range."""

from __future__ import annotations

from backend.pipeline import RunResult
from backend.render import (
    ANCHOR_RGB,
    BAD_TINT_RGB,
    BLOCK_GRID_RGB,
    CODEC_GRID_RGB,
    KEPT_RGB,
    LOST_FRACTION,
    LOST_RGB,
    PATCH_GRID_RGB,
    LayerOptions,
    colormap_lut,
)
from backend.render.heatmap import video_block_max, video_raw_max
from backend.render.staleness import video_staleness_top
from views.inspector.readout import heat_unit
from views.wording import plural

# (layer flag, colour, name, meaning)
_ENTRIES = (
    ("kept", KEPT_RGB, "kept", "block the selection kept (its pixels are in a canvas)"),
    ("lost", LOST_RGB, "lost", f"block scoring ≥ {LOST_FRACTION:.0%} of its group's cut-off, not kept"),
    ("anchor_badge", ANCHOR_RGB, "anchor", "the group's anchor frame, kept whole"),
    ("block_grid", BLOCK_GRID_RGB, "block grid", "2×2-patch blocks, the unit that is ranked"),
    ("patch_grid", PATCH_GRID_RGB, "patch grid", "patches (one token each)"),
    ("codec_grid", CODEC_GRID_RGB, "codec grid", "macroblocks (16 px) or CTUs/superblocks (64 px)"),
    ("bad_frames", BAD_TINT_RGB, "bad", "frame the quality stage marked bad (tinted, labelled)"),
)


def _swatch(rgb: tuple[int, int, int], *, outline: bool) -> str:
    style = f"border: 3px solid rgb{rgb}; background: transparent" if outline else f"background: rgb{rgb}"
    return f'<span class="lens-swatch" style="{style}"></span>'


def prepare_colour_legend(options: LayerOptions, codec: tuple[str, ...] = (), note: str = "") -> str:
    """HTML: one line per overlay colour, the layers that are on first, the others greyed; then
    the codec layers (``codec``: those on) and ``note`` (what this codec cannot show)."""
    from views.inspector.codec_layers import MV_FUTURE_RGB, MV_PAST_RGB

    lines = []
    for flag, rgb, name, meaning in sorted(_ENTRIES, key=lambda e: not getattr(options, e[0])):
        on = bool(getattr(options, flag))
        cls = "lens-on" if on else "lens-off"
        outline = flag in ("kept", "lost", "anchor_badge")
        lines.append(f'<div class="{cls}">{_swatch(rgb, outline=outline)} <b>{name}</b> — {meaning}</div>')
    codec_entries = (
        ("mv", MV_PAST_RGB, "motion vector", "arrow from the reference (past frame) to the block"),
        ("mv", MV_FUTURE_RGB, "motion vector", "… from a future reference (B-frames)"),
        ("qp", (253, 231, 37), "block QP", "tint: bright = fine quantisation (low QP), dark = coarse"),
    )
    for flag, rgb, name, meaning in codec_entries:
        cls = "lens-on" if flag in codec else "lens-off"
        lines.append(f'<div class="{cls}">{_swatch(rgb, outline=False)} <b>{name}</b> — {meaning}</div>')
    if note:
        lines.append(f"<div><i>{note}</i></div>")
    return '<div class="lens-legend">' + "".join(lines) + "</div>"


def _gradient(colormap: str) -> str:
    lut = colormap_lut(colormap)
    points = [*lut[::32].tolist(), lut[-1].tolist()]
    stops = ", ".join(f"rgb({r},{g},{b}) {i / 8:.0%}" for i, (r, g, b) in enumerate(points))
    return f"linear-gradient(to right, {stops})"


def prepare_heat_legend(result: RunResult, options: LayerOptions) -> str:
    """HTML colour bars of the heat layers that are on ('' when neither is): the score heatmap with
    what it shows, its unit and its range, then the staleness layer on the video's fixed scale."""
    bars = []
    if options.heatmap:
        bars.append(_score_bar(result, options))
    if options.staleness:
        bars.append(staleness_bar(result, options.colormap))
    return "".join(bars)


def staleness_bar(result: RunResult, colormap: str) -> str:
    """HTML colour bar of the staleness layer: 0 … the video's highest staleness, in frames."""
    top = video_staleness_top(result)
    what = (
        "Staleness: frames since a valid token last covered each patch position "
        "(never covered up to frame f: f + 1; off the picture: not drawn)"
    )
    return _bar(what, colormap, "0 = covered in this frame", f"{plural(top, 'frame')} = the video's highest")


def _bar(what: str, colormap: str, low: str, high: str) -> str:
    return (
        f'<div class="lens-heat"><div class="lens-heat-what">{what}</div>'
        f'<div class="lens-bar" style="background: {_gradient(colormap)}"></div>'
        f'<div class="lens-heat-range"><span>{low}</span><span>{high}</span></div></div>'
    )


def _score_bar(result: RunResult, options: LayerOptions) -> str:
    """The score heatmap's bar with what it shows, its unit and its range."""
    geo = result.geometry
    side = geo.patch * geo.block_size
    if options.heat == "block":
        what = f"2×2-block score (normalised signal summed over a {side}×{side} px block; the ranked value)"
        if options.scale == "video":
            low, high = "0", f"{video_block_max(result):.1f} = the run's highest block score"
        else:
            low, high = "0", "1 = this frame's highest block score"
    else:
        unit = heat_unit(result)
        if options.scale == "video":
            what = f"raw signal, {unit}, log scale"
            # The number carries its unit: a bare "97.46" said nothing of what it counts.
            low, high = "0", f"{video_raw_max(result):.6g} {unit} = the run's highest cell"
        else:
            what = f"signal per cell ({unit}), log1p and divided by the frame's 99th percentile"
            low, high = "0", "1 = the frame's 99th percentile"
    return _bar(f"Heatmap: {what}", options.colormap, low, high)
