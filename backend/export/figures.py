"""Export figures: plotly figures built by the views, written as html or as png/svg/pdf via kaleido."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from backend.errors import OutputError


def write_figures(
    figures: Mapping[str, Any],
    stem: Path,
    *,
    formats: Sequence[str],
    chromium_path: str,
    width_px: int | None = None,
    height_px: int | None = None,
    png_scale: float = 1.0,
) -> list[Path]:
    """Write plotly figures as ``<stem>.<name>.<fmt>``: html self-contained, png/svg/pdf via kaleido.

    Static formats run kaleido on the given Chromium in one batch (one browser start). Each is
    ``width_px`` × ``height_px`` when given, else the figure's own layout size (700 × 500 when it
    has none); png is rendered at ``png_scale`` times that (more pixels, same layout), svg and pdf
    are vector.

    Raises
    ------
    OutputError : static formats without that Chromium or kaleido, or a failed render.
    """
    written: list[Path] = []
    static: list[dict[str, Any]] = []
    for name, fig in figures.items():
        for fmt in formats:
            path = stem.parent / f"{stem.name}.{name}.{fmt}"
            if fmt == "html":
                # include_plotlyjs=True embeds plotly.js: the file opens offline.
                fig.write_html(str(path), include_plotlyjs=True, full_html=True)
                written.append(path)
            else:
                opts = {
                    "format": fmt,
                    "width": width_px or fig.layout.width or 700,
                    "height": height_px or fig.layout.height or 500,
                    "scale": png_scale if fmt == "png" else 1,
                }
                static.append({"fig": fig, "path": str(path), "opts": opts})
                written.append(path)
    if static:
        if not Path(chromium_path).exists():
            raise OutputError(
                f"Chromium not found at {chromium_path}: png/svg/pdf figures need it (html does not)",
                path=stem.parent,
                stage="export",
            )
        try:
            import kaleido
        except ImportError as exc:
            raise OutputError("kaleido is not installed (pip install kaleido)", stage="export") from exc
        try:
            # mathjax=False: kaleido would otherwise load MathJax from a CDN.
            kaleido.write_fig_from_object_sync(
                static, kopts={"path": chromium_path, "mathjax": False}, cancel_on_error=True
            )
        except (RuntimeError, OSError, ValueError) as exc:
            raise OutputError(
                f"static figure export failed ({exc})", path=stem.parent, stage="export"
            ) from exc
    return written
