"""Compare-tab figure layout: the compared pairs' line styles and legends that sit under their rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from views.figure_style import GREY, OKABE_ITO, SCREEN_FULL_WIDTH_PX, SERIES, text_width_px

VARIANT_COLOURS = SERIES[:4]
"""Colours of the compared variants (Okabe–Ito, views.figure_style); pairs take others."""

PAIR_STYLES: tuple[tuple[str, str], ...] = tuple(
    (colour, dash)
    for dash in ("solid", "dash")
    for colour in (OKABE_ITO["sky_blue"], OKABE_ITO["vermillion"], OKABE_ITO["black"], GREY)
)
"""(colour, dash) of each compared pair's line: never a compared variant's colour
(:data:`VARIANT_COLOURS`), so a pair is not read as a selector; four selectors make six pairs."""


def pair_style(index: int) -> tuple[str, str]:
    """The (colour, dash) of pair ``index`` (cycles through :data:`PAIR_STYLES`)."""
    return PAIR_STYLES[int(index) % len(PAIR_STYLES)]


def legend_lines(names: Sequence[str], *, width_px: float, size_px: int = 12) -> int:
    """Lines a horizontal legend of ``names`` takes in ``width_px``. Plotly lays wrapping entries
    out in equal columns as wide as the widest entry (its text and about 45 px of swatch and gap),
    after the legend's title (about 90 px): measured in Chromium."""
    if not names:
        return 1
    entry = max(text_width_px(n, size_px=size_px) for n in names) + 45
    columns = max(1, int((width_px - 90) // entry))
    return math.ceil(len(names) / columns)


def legend_rows_layout(
    pairs: Sequence[str], selectors: Sequence[str]
) -> tuple[dict[str, Any], tuple[list[float], list[float]]]:
    """Height, margins and the two legends of the selector metric figure, each legend under its
    row; and the two rows' y domains. Sizes in pixels, at the narrowest screen width."""
    line_px, plot_px, title_px, axis_px = 20, 160, 24, 44
    width = SCREEN_FULL_WIDTH_PX - 70  # the figure less its side margins
    pair_px = legend_lines(pairs, width_px=width) * line_px + 8
    selector_px = legend_lines(selectors, width_px=width) * line_px + 8
    margin = {"l": 60, "r": 10, "t": title_px + 10, "b": 10}
    # From the bottom: selectors' legend, x axis, row 2, its title, pairs' legend, row 1.
    inner = selector_px + axis_px + plot_px + title_px + pair_px + plot_px
    height = inner + margin["t"] + margin["b"]

    def up(px: float) -> float:
        return round(px / inner, 6)

    row2 = [up(selector_px + axis_px), up(selector_px + axis_px + plot_px)]
    row1 = [up(inner - plot_px), 1.0]
    below = {"orientation": "h", "xanchor": "left", "x": 0.0, "yanchor": "top", "yref": "paper"}
    layout = {
        "height": height,
        "margin": margin,
        "legend": below | {"y": row1[0] - up(6), "title": {"text": "pairs "}},
        "legend2": below | {"y": up(selector_px), "title": {"text": "selectors "}},
    }
    return layout, (row1, row2)
