"""Draw figures and HTML fragments in headless Chromium, with the page's plotly.js, and measure them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import plotly
import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
"""The plotly.js of the installed plotly package: the one Gradio's plot component draws with is
the same major version, and the measurements below are of text, not of styling."""

BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="Debian chromium not installed; run scripts/setup.sh"
    ),
]

# Every text plotly drew outside the data (titles, legend, annotations, shape labels), with its
# box in the figure's pixels; and each subplot's plot area.
_MEASURE_JS = """
(gd) => {
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const box = (el) => {
    const r = el.getBoundingClientRect();
    const x = svg.left, y = svg.top;
    return {left: r.left - x, right: r.right - x, top: r.top - y, bottom: r.bottom - y};
  };
  const where = '.infolayer text, .annotation text, .shapelayer text, .g-gtitle text';
  const texts = [...gd.querySelectorAll(where)]
    .filter((t) => t.textContent.trim())
    .map((t) => Object.assign({text: t.textContent, cls: t.getAttribute('class') || ''}, box(t)));
  const fl = gd._fullLayout;
  const plots = Object.keys(fl._plots).map((k) => {
    const p = fl._plots[k];
    return {id: k, top: p.yaxis._offset, bottom: p.yaxis._offset + p.yaxis._length,
            left: p.xaxis._offset, right: p.xaxis._offset + p.xaxis._length};
  });
  return {width: fl.width, height: fl.height, texts, plots};
}
"""


@contextmanager
def chromium_page(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A blank page in headless Debian Chromium with plotly.js loaded."""
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_content("<html><body style='margin:0'></body></html>")
            page.add_script_tag(path=str(PLOTLY_JS))
            yield page
        finally:
            browser.close()


def draw_figure(page: Any, fig: Any, *, width_px: int) -> dict[str, Any]:
    """Draw ``fig`` in a ``width_px`` wide box (its layout height kept) and return the measures of
    :data:`_MEASURE_JS`: ``width``, ``height``, ``texts`` (text, class, box) and ``plots``."""
    spec = json.loads(fig.to_json())
    layout = spec.get("layout", {}) | {"width": width_px}
    page.evaluate(
        "([data, layout]) => { document.body.innerHTML = '<div id=fig></div>';"
        " return Plotly.newPlot('fig', data, layout, {staticPlot: true}); }",
        [spec.get("data", []), layout],
    )
    return page.evaluate(_MEASURE_JS, page.query_selector("#fig"))


def clipped_texts(measures: dict[str, Any], *, slack_px: float = 1.0) -> list[dict[str, Any]]:
    """The texts that run past the figure's edges (the browser cuts them off there)."""
    w, h = measures["width"], measures["height"]
    return [
        t
        for t in measures["texts"]
        if t["left"] < -slack_px
        or t["top"] < -slack_px
        or t["right"] > w + slack_px
        or t["bottom"] > h + slack_px
    ]


def overlapping_texts(measures: dict[str, Any]) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes overlap (one drawn over the other)."""
    texts = measures["texts"]
    out = []
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            if (
                a["left"] < b["right"]
                and b["left"] < a["right"]
                and a["top"] < b["bottom"]
                and b["top"] < a["bottom"]
            ):
                out.append((a["text"], b["text"]))
    return out


def text_of(measures: dict[str, Any], cls: str) -> dict[str, Any]:
    """The one text drawn with class ``cls`` (``gtitle``, ``ytitle``, ``x4title`` …)."""
    (found,) = [t for t in measures["texts"] if t["cls"].split()[0] == cls]
    return found
