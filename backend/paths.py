"""Path sandbox: user-typed paths and uploads resolve only inside allowed folders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from backend.errors import InputError, OutputError


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_within(path: str | Path, roots: Sequence[str | Path], *, kind: str = "input") -> Path:
    """Resolve ``path`` (relative paths against the first root) and refuse it outside ``roots``.

    Symlinks and ``..`` are resolved first, so neither can escape a root.

    Parameters
    ----------
    path : what the user typed or the upload's temporary path.
    roots : allowed folders; at least one.
    kind : ``input`` (raises InputError) or ``output`` (raises OutputError).

    Returns
    -------
    The resolved absolute path (it need not exist).
    """
    if kind not in ("input", "output"):
        raise ValueError(f"Invalid kind ({kind!r}). Supported values are 'input', 'output'")
    if not roots:
        raise ValueError("Invalid roots (empty). Supported values are one or more folders")
    error = InputError if kind == "input" else OutputError
    text = str(path).strip()
    if not text or "\x00" in text:
        raise error("is not a usable path", path=repr(text), stage="paths")
    resolved_roots = [Path(r).expanduser().resolve() for r in roots]
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = resolved_roots[0] / candidate
    resolved = candidate.resolve()
    if not any(_within(resolved, r) for r in resolved_roots):
        allowed = ", ".join(str(r) for r in resolved_roots)
        raise error(f"is outside the allowed folders ({allowed})", path=text, stage="paths")
    return resolved
