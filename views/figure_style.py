"""Figure style shared by every plotly figure: one colour-blind-safe palette, fonts, integer count axes."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import plotly.graph_objects as go

# Okabe & Ito (2008), "Color Universal Design": eight colours told apart with every common
# colour-vision deficiency.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}
GREY = "#999999"

COLOURS: dict[str, str] = {
    # What the frame overlays draw in the same hue (backend.render.colors): kept blocks red-orange,
    # lost blocks yellow, anchors cyan.
    "kept": OKABE_ITO["vermillion"],
    "lost": OKABE_ITO["yellow"],
    "anchor": OKABE_ITO["sky_blue"],
    # Picture types: none of them shares a hue with kept, lost or anchor.
    "I": OKABE_ITO["blue"],
    "P": OKABE_ITO["bluish_green"],
    "B": OKABE_ITO["reddish_purple"],
    "?": GREY,
    "candidate": OKABE_ITO["black"],
    "threshold": OKABE_ITO["black"],
    "moved": OKABE_ITO["orange"],
    "passed": OKABE_ITO["bluish_green"],
    "failed": GREY,
    "before": OKABE_ITO["vermillion"],
    "after": OKABE_ITO["bluish_green"],
    "neutral": GREY,
    # The coverage audit's figure (views.coverage_figure).
    "coverage": OKABE_ITO["blue"],
    "never_observed": GREY,
    "mean_staleness": OKABE_ITO["orange"],
    "max_staleness": OKABE_ITO["reddish_purple"],
}
"""Fixed colour of each meaning, in every figure (timeline, readiness trace, coverage, compare, luma,
exports)."""

SERIES: tuple[str, ...] = (
    OKABE_ITO["blue"],
    OKABE_ITO["orange"],
    OKABE_ITO["bluish_green"],
    OKABE_ITO["reddish_purple"],
    OKABE_ITO["sky_blue"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["black"],
    OKABE_ITO["yellow"],
)
"""Colours of numbered series (compared variants, luma slots), in order; yellow last (faint on white)."""

GROUP_FILLS: tuple[str, str] = ("rgba(230, 159, 0, 0.14)", "rgba(0, 114, 178, 0.10)")
"""Alternating shades of neighbouring groups' spans (Okabe–Ito orange and blue, translucent)."""

FONT_FAMILY = "DejaVu Sans, Arial, sans-serif"
"""DejaVu ships with the system Chromium kaleido drives, so exported text matches the screen."""


def _sizes(paper: bool) -> dict[str, int]:
    # Paper: figures export at PAPER_WIDTH_PX; printed at single-column width (3.5 in) that is
    # 200 px per inch, so 20 px text is 7.2 pt and 18 px ticks 6.5 pt — the smallest size journals
    # accept is 6–7 pt.
    return (
        {"base": 20, "tick": 18, "legend": 18, "title": 20}
        if paper
        else {
            "base": 13,
            "tick": 12,
            "legend": 12,
            "title": 14,
        }
    )


SCREEN_HALF_WIDTH_PX = 600
"""The narrowest a figure in one of two side-by-side columns is drawn on screen: a 1280 px wide
window gives each column about 600 px. Titles of such figures are wrapped to fit it."""
SCREEN_FULL_WIDTH_PX = 1200
"""The narrowest a full-width figure is drawn on screen (a 1280 px window)."""
TITLE_SIDE_PX = 0.05
"""Plotly's white template starts a title at 5 % of the figure's width."""

PAPER_WIDTH_PX = 700
PAPER_HEIGHT_PX = 420
PAPER_PNG_SCALE = 3
"""PNG figures are rendered at 3× their layout size (2100 px wide: 600 dpi at 3.5 in)."""


@functools.cache
def _font(size_px: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.truetype("DejaVuSans.ttf", size_px)
    except OSError:  # no DejaVu on this machine: Pillow's own font, of similar width
        return ImageFont.load_default(size=size_px)


def text_width_px(text: str, *, size_px: int) -> float:
    """Width of ``text`` (one line, tags such as ``<b>`` dropped) in DejaVu Sans at ``size_px``:
    the font every figure names first (:data:`FONT_FAMILY`), so it measures what the browser draws."""
    return float(_font(int(size_px)).getlength(re.sub(r"<[^>]+>", "", text)))


def wrap_text(text: str, *, width_px: float, size_px: int) -> list[str]:
    """``text`` broken at spaces into lines each at most ``width_px`` wide (a word longer than
    that stays whole on its own line)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_width_px(f"{lines[-1]} {word}", size_px=size_px) <= width_px:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines


def fitted_title(
    text: str, *, figure_width_px: int = SCREEN_HALF_WIDTH_PX, size_px: int | None = None
) -> dict[str, Any]:
    """A layout ``title`` dict whose text fits a figure ``figure_width_px`` wide: wrapped onto as
    many lines as it needs (plotly never wraps a title, it runs off the figure's edge), starting
    where the template starts titles and ending 10 px short of the right edge.

    ``size_px``: the title's font size (default: the screen title size). Give the figure
    :func:`title_margin_px` of the dict as its top margin.
    """
    size = size_px or _sizes(False)["title"]
    room = figure_width_px * (1 - TITLE_SIDE_PX) - 10
    lines = wrap_text(text, width_px=room, size_px=size)
    return {"text": "<br>".join(lines), "font": {"size": size}, "x": TITLE_SIDE_PX, "xanchor": "left"}


def title_margin_px(title: dict[str, Any], *, base_px: int = 40) -> int:
    """The top margin a :func:`fitted_title` needs: ``base_px`` for one line, one line's height
    (1.3 × the font size) more for each further line."""
    lines = str(title.get("text", "")).count("<br>") + 1
    size = int(title.get("font", {}).get("size", _sizes(False)["title"]))
    return base_px + math.ceil((lines - 1) * 1.3 * size)


def series_colour(index: int) -> str:
    """The colour of series ``index`` (cycles through :data:`SERIES`)."""
    return SERIES[int(index) % len(SERIES)]


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``, ``102nd`` …"""
    n = int(n)
    if 10 <= abs(n) % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(abs(n) % 10, 'th') }"


def integer_step(top: float, *, ticks: int = 5) -> int:
    """A 1, 2 or 5 × 10^k step (≥ 1) giving about ``ticks`` ticks from 0 to ``top``."""
    raw = max(float(top), 1.0) / max(int(ticks), 1)
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return max(1, int(factor * power))
    return max(1, int(10 * power))  # unreachable: factor 10 always fits


def integer_axis_range(top: float, *, ticks: int = 5) -> tuple[int, int, int]:
    """(range top, tick step, tick count) of a count axis from 0: whole-number ticks only.

    The top is the first multiple of the step above ``top``, so the largest value never sits on
    the plot's edge.
    """
    step = integer_step(top, ticks=ticks)
    upper = step * (math.floor(max(float(top), 0.0) / step) + 1)
    return upper, step, upper // step


def integer_axis_props(top: float, *, ticks: int = 5, tickformat: str = "d") -> dict[str, Any]:
    """The axis properties of a count axis from 0 (see :func:`integer_axis`), as a plain dict."""
    upper, step, _ = integer_axis_range(top, ticks=ticks)
    return {
        "range": [0, upper],
        "tickmode": "linear",
        "tick0": 0,
        "dtick": step,
        "tickformat": tickformat,
        "rangemode": "tozero",
    }


def integer_axis(
    fig: go.Figure, top: float, *, ticks: int = 5, tickformat: str = "d", **selector: Any
) -> tuple[int, int]:
    """Make the y axis chosen by ``selector`` (``update_yaxes`` arguments) a count axis from 0.

    Whole-number ticks at a 1/2/5 step, the range [0, top rounded up to a step], labels in
    ``tickformat`` (``d``; ``~s`` writes 20k for 20000). Returns (range top, step).
    """
    props = integer_axis_props(top, ticks=ticks, tickformat=tickformat)
    fig.update_yaxes(**props, **selector)
    return props["range"][1], props["dtick"]


def style_layout(*, paper: bool = False, legend_below: bool = True) -> dict[str, Any]:
    """The layout :func:`apply_style` gives a figure, without its axes (:func:`axis_style`), as
    plain dicts: for figures built by :func:`plain_figure`."""
    import plotly.io as pio

    size = _sizes(paper)
    legend: dict[str, Any] = {"font": {"size": size["legend"]}}
    if legend_below:
        # Anchored to the container's bottom edge: plotly grows the bottom margin to fit it,
        # whatever the axis titles take.
        legend |= {"orientation": "h", "yref": "container", "y": 0.0, "yanchor": "bottom", "x": 0.0}
        legend["xanchor"] = "left"
    return {
        # The template object, not its name: a figure built without validation keeps values as given.
        "template": pio.templates["plotly_white"],
        "font": {"family": FONT_FAMILY, "size": size["base"], "color": "#222222"},
        "title": {"font": {"size": size["title"]}},
        "legend": legend,
        "hoverlabel": {"font": {"size": 12}},
    }


def axis_style(*, paper: bool = False, x: bool = False) -> dict[str, Any]:
    """The shared look of one x (``x``) or y axis, as a plain dict."""
    size = _sizes(paper)
    style: dict[str, Any] = {
        "tickfont": {"size": size["tick"]},
        "title": {"font": {"size": size["base"]}},
        "gridcolor": "#e6e6e6",
    }
    return style | {"zeroline": False} if x else style


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``extra``, nested dicts merged key by key (neither is changed)."""
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        out[key] = merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


@dataclass(frozen=True)
class FigureDicts:
    """A figure's plain trace and layout dicts under plotly's own names, never validated: what the
    app's live path draws from (``go.Figure``'s own set-up costs ~4.5 ms a figure, three figures on
    every re-selection)."""

    data: list[dict[str, Any]]
    layout: dict[str, Any]

    def figure(self) -> go.Figure:
        """These dicts as a Figure (:func:`plain_figure`)."""
        return plain_figure(self.data, self.layout)

    @classmethod
    def of(cls, fig: go.Figure) -> FigureDicts:
        """The dicts of a Figure built otherwise."""
        return cls(list(fig._data), dict(fig._layout))


def plain_figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """A Figure of plain trace and layout dicts, taken as given: plotly's per-property validation
    makes building the inspector's plots cost ~0.3 s, and they are rebuilt on every re-selection.

    The dicts must use plotly's own names; ``go.Figure(fig.to_plotly_json())`` validates such a
    figure in tests.
    """
    return go.Figure(data=data, layout=layout, _validate=False)


def figure_json(fig: go.Figure | FigureDicts | None) -> str:
    """``fig`` as the JSON text a page hands to ``Plotly.react``; "" for none.

    ``Figure.to_json`` deep-copies the figure first (~10 ms a figure); this encodes its trace and
    layout dicts as they are (for a :func:`plain_figure`, the very dicts it was given), with
    orjson (plotly's encoder took ~3 ms a figure, most of it on the template, serialised anew
    each time). NaN and ±inf become null, as plotly's encoder writes them.
    """
    if fig is None:
        return ""
    data, layout = (fig.data, fig.layout) if isinstance(fig, FigureDicts) else (fig._data, fig._layout)
    return orjson.dumps(
        {"data": data, "layout": layout}, option=orjson.OPT_SERIALIZE_NUMPY, default=_json_value
    ).decode()


@functools.cache
def _template_json(name: str) -> dict[str, Any]:
    """A plotly template as plain dicts, built once (templates do not change while we run)."""
    import plotly.io as pio

    return pio.templates[name].to_plotly_json()


def _json_value(value: Any) -> Any:
    """What orjson cannot write itself: non-contiguous arrays, plotly objects (the template)."""
    import plotly.io as pio

    if isinstance(value, np.ndarray):
        return value.tolist()
    if value is pio.templates["plotly_white"]:
        return _template_json("plotly_white")
    if hasattr(value, "to_plotly_json"):
        return value.to_plotly_json()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def apply_style(fig: go.Figure, *, paper: bool = False, legend_below: bool = True) -> go.Figure:
    """Give ``fig`` the shared look, in place, and return it.

    White template, DejaVu Sans, the screen or paper font sizes, light grid lines, and (with
    ``legend_below``) a horizontal legend under the plot, clear of the panel label Gradio draws
    at the top left of a plot.
    """
    fig.update_layout(style_layout(paper=paper, legend_below=legend_below))
    fig.update_xaxes(axis_style(paper=paper, x=True))
    fig.update_yaxes(axis_style(paper=paper))
    if paper:
        fig.update_layout(
            width=PAPER_WIDTH_PX,
            height=fig.layout.height if fig.layout.height else PAPER_HEIGHT_PX,
            margin={"l": 80, "r": 80, "t": 40 if fig.layout.title.text else 20, "b": 20},
        )
    return fig
