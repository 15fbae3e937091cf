"""Codec Lens backend: the selection pipeline and analyses as pure functions over records."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# A constant, not importlib.metadata: that import alone costs ~90 ms of every CLI start
# (tests/backend/test_stages.py keeps it equal to pyproject.toml's version).
__version__ = "0.1.0"


def lazy_exports(
    package: str, homes: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) that import each name of ``homes``
    (name → submodule) on first use, then keep it in ``namespace`` (the package's globals)."""

    def getattr_(name: str) -> Any:
        try:
            home = homes[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value  # later lookups skip this hook
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return getattr_, dir_
