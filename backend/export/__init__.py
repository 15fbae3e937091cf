"""Export for papers: annotated clips, tables, YUView statistics and figures."""

from backend.export.run import (
    CLIP_FORMATS,
    DEFAULT_LAYERS,
    EXPORT_LAYERS,
    FIGURE_FORMATS,
    MP4_OPTIONS,
    ClipComposer,
    ExportConfig,
    ExportRun,
    export_rows,
    load_export_run,
    parse_frame_range,
    parse_names,
    write_export,
    write_video,
)

__all__ = [
    "CLIP_FORMATS",
    "DEFAULT_LAYERS",
    "EXPORT_LAYERS",
    "FIGURE_FORMATS",
    "MP4_OPTIONS",
    "ClipComposer",
    "ExportConfig",
    "ExportRun",
    "export_rows",
    "load_export_run",
    "parse_frame_range",
    "parse_names",
    "write_export",
    "write_video",
]
