"""codec-video-prep's output folder: write it, read it, check a recomputation against it, import it."""

from backend.cvp_format.import_run import (
    IMPORT_KEY,
    IMPORT_STATUS_KEY,
    ImportConfig,
    import_cvp,
    imported_view,
)
from backend.cvp_format.read import read_cvp_dir
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
