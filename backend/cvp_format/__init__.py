"""codec-video-prep's output folder format: writing it, and reading + importing it."""

from backend.cvp_format.read import (
    IMPORT_KEY,
    IMPORT_STATUS_KEY,
    ImportConfig,
    import_cvp,
    imported_view,
    read_cvp_dir,
)
from backend.cvp_format.write import canvas_name, check_out_dir, jsonable, write_output

__all__ = [
    "IMPORT_KEY",
    "IMPORT_STATUS_KEY",
    "ImportConfig",
    "canvas_name",
    "check_out_dir",
    "import_cvp",
    "imported_view",
    "jsonable",
    "read_cvp_dir",
    "write_output",
]
