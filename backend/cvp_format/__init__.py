"""codec-video-prep's output folder: write it, read it, check a recomputation against it, import it."""

from typing import Any

from backend.cvp_format.read import read_cvp_dir
from backend.cvp_format.write import canvas_name, check_out_dir, jsonable, write_output

# Importing a folder into a session needs the store (DuckDB and pandas, ~0.45 s to import):
# those names load on first use, so `codec-lens select --out` never pays for them.
_IMPORT_RUN_NAMES = ("IMPORT_KEY", "IMPORT_STATUS_KEY", "ImportConfig", "import_cvp", "imported_view")


def __getattr__(name: str) -> Any:
    if name in _IMPORT_RUN_NAMES:
        from backend.cvp_format import import_run

        return getattr(import_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
