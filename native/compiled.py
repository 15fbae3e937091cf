"""The optional compiled kernels (``native/_kernels.c``), or None where they were not built."""

from __future__ import annotations

from types import ModuleType

kernels: ModuleType | None
try:
    import native._kernels as kernels
except ImportError:  # built by setup.py when a C compiler is present (optional extension)
    kernels = None

COMPILED_KERNEL = kernels is not None
"""Whether the extension was built at install (the numpy/OpenCV paths serve otherwise)."""
