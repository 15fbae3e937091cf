"""Export settings and inputs: ExportConfig, the frame-range syntax and loading a stored run to export."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.config import param, parse_names, validate_fields
from backend.pipeline import RunResult
from backend.render import (
    COLORMAPS,
    DEFAULT_HEAT,
    DEFAULT_LAYERS,
    HEAT_SOURCES,
    LAYER_NAMES,
    SCALES,
    LayerOptions,
    canonical_heat,
    check_crop,
    layer_options,
)
from backend.runs import open_run
from backend.store import SessionStore

CLIP_FORMATS: tuple[str, ...] = ("mp4", "webm", "gif", "png", "none")
"""``none`` writes no clip (tables, YUView statistics or figures only)."""
FIGURE_FORMATS: tuple[str, ...] = ("png", "svg", "pdf", "html")
EXPORT_LAYERS = LAYER_NAMES
YUVIEW_COORDINATES: tuple[str, ...] = ("source", "processed")
CLIP_SIZES: tuple[str, ...] = ("source", "processed")
"""What a clip's size is based on: the video's own resolution (frames decoded again at it) or the
run's processed frames (no decode); ``size_factor`` or ``width_px`` scale it."""
DEFAULT_CHROMIUM = "/usr/bin/chromium"
VIEW_SIDES: tuple[str, ...] = ("A", "B")
"""The viewer's A/B flip: which side an export of the view showed."""
VIEW_FIELDS: tuple[str, ...] = ("heat", "scale", "colormap", "opacity", "layers", "crop", "side")
"""The ExportConfig fields that are the viewer's settings (the sidecar's ``view``)."""


# -- names and ranges --------------------------------------------------------------------------


def parse_frame_range(text: str | None) -> tuple[int, int | None] | None:
    """``A:B`` → (A, B), frame_index from A up to B exclusive; ``A:`` → (A, None); ``:B`` → (0, B).

    None or an empty string mean every candidate frame.
    """
    if text is None or not str(text).strip():
        return None
    bad = ValueError(
        f"Invalid frames ({text!r}). Supported values are A:B, A: or :B with frame_index 0 ≤ A < B "
        "(B exclusive)."
    )
    parts = str(text).strip().split(":")
    if len(parts) != 2:
        raise bad
    try:
        start = int(parts[0]) if parts[0].strip() else 0
        stop = int(parts[1]) if parts[1].strip() else None
    except ValueError:
        raise bad from None
    if start < 0 or (stop is not None and stop <= start):
        raise bad
    return start, stop


# -- config and records ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """What one export writes, and where.

    Every file goes next to ``out_path``: the clip is ``out_path`` itself; companions are
    ``<stem>.frames.csv``, ``<stem>.blocks.csv``, ``<stem>.yuview.csv`` (compared runs:
    ``<stem>.<run_id>.yuview.csv``), ``<stem>.<figure>.<fmt>``; the sidecar is ``<out_path>.json``.
    """

    out_path: str | Path
    """Clip file (``png``: a folder of frames, or one ``.png`` file for a one-frame range)."""
    allowed_roots: tuple[str | Path, ...] | None = None
    """Folders exports may write into; anything resolving outside them is refused, and a relative
    ``out_path`` is taken relative to the first. None (the CLI): no sandbox, a relative path is
    relative to the current directory. The app always gives its output folder."""
    format: str = param("mp4", label="Format", help="clip format", choices=CLIP_FORMATS)
    size: str = param(
        "source",
        label="Size",
        help="source: the video's own resolution (frames decoded again at it); processed: the run's "
        "processed frames (no decode)",
        choices=CLIP_SIZES,
    )
    size_factor: float = param(
        1.0, label="Scale", help="clip size × this (e.g. 2); not with a width", min=0.1, max=8.0
    )
    width_px: int | None = param(
        None,
        label="Width",
        help="clip width in pixels, the height keeping the aspect ratio; not with a scale",
        min=16,
        max=16384,
    )
    frames: tuple[int, int | None] | None = None
    """(start, stop) frame_index range, stop exclusive or None for the end; None = every candidate."""
    layers: tuple[str, ...] = DEFAULT_LAYERS
    """Layer names (``backend.render.LAYER_NAMES``); the viewer's defaults."""
    heat: str = param(
        DEFAULT_HEAT,
        label="Heatmap shows",
        help="block: the ranked 2×2-block score (the viewer's default); cell: the signal per codec cell",
        choices=HEAT_SOURCES,
    )
    opacity: float = param(0.5, label="Heatmap opacity", help="heatmap weight", min=0.0, max=1.0)
    colormap: str = param("turbo", label="Colormap", help="heatmap colours", choices=tuple(COLORMAPS))
    scale: str = param("frame", label="Heatmap scale", help="frame or video", choices=SCALES)
    crop: tuple[float, float, float, float] | None = None
    """The viewer's zoom: (x, y, width, height) in the first run's processed-frame pixels, cut out
    of each frame after drawing at the clip's size (other runs: the same fractions); None: whole."""
    side: str | None = None
    """Which side of the viewer's A/B flip the exported run was (:data:`VIEW_SIDES`), recorded in
    the sidecar; None: not exported from the viewer."""
    fps: float | None = None
    """Clip frame rate; None = the video's (25 when unknown)."""
    crf: int = param(18, label="CRF", help="mp4/webm constant quality (lower is better)", min=0, max=51)
    stamp: bool = param(True, label="Stamp", help="draw frame index and timestamp under each frame")
    tables: bool = param(False, label="Tables", help="per-frame and per-block CSV")
    yuview: bool = param(False, label="YUView", help="per-block statistics in YUView's CSV format")
    yuview_coordinates: str = param(
        "source",
        label="YUView coordinates",
        help="source: blocks scaled onto the original video; processed: the processed frame",
        choices=YUVIEW_COORDINATES,
    )
    plot_formats: tuple[str, ...] = ("png",)
    """Formats of the figures passed to :func:`write_export` (see :data:`FIGURE_FORMATS`)."""
    chromium_path: str = DEFAULT_CHROMIUM
    """Browser kaleido drives for png/svg/pdf figures (never downloaded)."""
    figure_width_px: int | None = param(
        None, label="Figure width", help="static figure width (default: the figure's own)", min=100, max=8000
    )
    figure_height_px: int | None = param(
        None,
        label="Figure height",
        help="static figure height (default: the figure's own)",
        min=100,
        max=8000,
    )
    figure_png_scale: float = param(
        3.0, label="PNG scale", help="png figures are rendered at this multiple of their size", min=1, max=8
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "heat", canonical_heat(self.heat))  # "signal" is read as "cell"
        validate_fields(self)
        object.__setattr__(self, "crop", check_crop(self.crop))
        if self.side is not None and self.side not in VIEW_SIDES:
            raise ValueError(f"Invalid side ({self.side!r}). Supported values are {', '.join(VIEW_SIDES)}.")
        object.__setattr__(self, "layers", parse_names(self.layers, EXPORT_LAYERS, what="layer"))
        object.__setattr__(
            self, "plot_formats", parse_names(self.plot_formats, FIGURE_FORMATS, what="plot format")
        )
        if self.frames is not None:
            pair = isinstance(self.frames, (tuple, list)) and len(self.frames) == 2
            start, stop = self.frames if pair else (None, None)
            if (
                not pair
                or not isinstance(start, int)
                or start < 0
                or (stop is not None and (not isinstance(stop, int) or stop <= start))
            ):
                raise ValueError(
                    f"Invalid frames ({self.frames!r}). Supported values are (start, stop) with "
                    "0 ≤ start < stop, or (start, None)."
                )
            object.__setattr__(self, "frames", (start, stop))
        if self.fps is not None and not (isinstance(self.fps, (int, float)) and 0 < self.fps <= 1000):
            raise ValueError(f"Invalid fps ({self.fps!r}). Supported values are above 0 up to 1000.")
        if self.allowed_roots is not None:
            if isinstance(self.allowed_roots, (str, Path)) or not self.allowed_roots:
                raise ValueError(
                    f"Invalid allowed roots ({self.allowed_roots!r}). Supported values are a tuple of "
                    "folders, or None."
                )
            object.__setattr__(self, "allowed_roots", tuple(self.allowed_roots))
        self._check_size()
        if not str(self.out_path).strip():
            raise ValueError("Invalid out path (''). Supported values are a file path.")
        self.layer_options()  # opacity/colormap/scale/heat checks

    def _check_size(self) -> None:
        if self.width_px is not None and (
            isinstance(self.width_px, bool) or not isinstance(self.width_px, int)
        ):
            raise ValueError(
                f"Invalid width px ({self.width_px!r}). Supported values are whole pixels, 16 to 16384."
            )
        if self.width_px is not None and self.size_factor != 1.0:
            raise ValueError(
                f"Invalid size (scale {self.size_factor:g} and width {self.width_px}). Supported values "
                "are a scale or a width, not both."
            )
        for name in ("figure_width_px", "figure_height_px"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(
                    f"Invalid {name.replace('_', ' ')} ({value!r}). Supported values are whole pixels."
                )

    def layer_options(self) -> LayerOptions:
        """The renderer's options for these settings (the viewer's for the same values)."""
        return layer_options(
            self.layers, opacity=self.opacity, colormap=self.colormap, scale=self.scale, heat=self.heat
        )

    def view(self) -> dict[str, Any]:
        """The viewer's settings this export draws with (:data:`VIEW_FIELDS`), for the sidecar."""
        return {name: getattr(self, name) for name in VIEW_FIELDS}


@dataclass(frozen=True)
class ExportRun:
    """A stored run to export: its records and what the store says about it."""

    run_id: str
    result: RunResult
    config: dict[str, Any]
    """Selection options the run was made with (the store's ``config_json``)."""
    versions: dict[str, Any]
    """Versions recorded when the run was made."""
    video_path: str
    cache_key: str | None


def load_export_run(
    store: SessionStore,
    run_id: str,
    *,
    memory: dict[str, Any] | None = None,
    result: RunResult | None = None,
) -> ExportRun:
    """A stored run with its records (rebuilt by ``open_run`` unless ``result`` is given)."""
    row = store.get_run(run_id)
    if result is None:
        result = open_run(store, run_id, memory=memory)
    return ExportRun(
        run_id=row.run_id,
        result=result,
        config=dict(row.config),
        versions=dict(row.versions),
        video_path=row.video_path,
        cache_key=row.cache_key,
    )
