"""Wording shared by every view and command line: counts with their noun."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 warning``, ``2 warnings`` (``many``: the plural when it is not word + s)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"
