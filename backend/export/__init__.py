"""Export for papers: annotated clips, tables, YUView statistics and figures."""

from backend.config import parse_names
from backend.export.clip import MP4_OPTIONS, ClipComposer, clip_pane_sizes, write_video
from backend.export.config import (
    CLIP_FORMATS,
    CLIP_SIZES,
    EXPORT_LAYERS,
    FIGURE_FORMATS,
    ExportConfig,
    ExportRun,
    load_export_run,
    parse_frame_range,
)
from backend.export.run import export_groups, export_rows, write_export
from backend.render import DEFAULT_LAYERS

__all__ = [
    "CLIP_FORMATS",
    "CLIP_SIZES",
    "DEFAULT_LAYERS",
    "EXPORT_LAYERS",
    "FIGURE_FORMATS",
    "MP4_OPTIONS",
    "ClipComposer",
    "ExportConfig",
    "ExportRun",
    "clip_pane_sizes",
    "export_groups",
    "export_rows",
    "load_export_run",
    "parse_frame_range",
    "parse_names",
    "write_export",
    "write_video",
]
