"""Wording shared by every view and command line: counts with their noun, shares as fractions."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 warning``, ``2 warnings`` (``many``: the plural when it is not word + s)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


SHARE_CONVENTION = (
    "Coverage and other shares are fractions from 0 to 1 (0.25 = a quarter) everywhere: as stored, "
    "as SQL filters compare them and as tables and plots show them."
)
"""The one convention for shares: a dataset's ``temporal_coverage < 0.2`` filter reads the same
numbers its table and the Compare tab's tables show."""


def share(value: float, *, digits: int = 3) -> float:
    """A share (0–1) rounded for a table, as :data:`SHARE_CONVENTION` shows shares."""
    return round(float(value), digits)
