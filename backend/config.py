"""Validation helpers shared by the stage config dataclasses.

Every config is a frozen, keyword-only dataclass whose fields carry UI metadata
(``label``, ``min``, ``max``, ``step``, ``help``, ``choices``); the same metadata
drives validation here, the CLI and the app's generated controls.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

Profile = Literal["parity", "clean"]
PROFILES: tuple[str, ...] = ("parity", "clean")


def param(
    default: Any,
    *,
    label: str,
    help: str,
    choices: Sequence[str] | None = None,
    min: float | None = None,
    max: float | None = None,
    step: float | None = None,
) -> Any:
    """A dataclass field with UI/validation metadata."""
    meta = {"label": label, "help": help, "choices": tuple(choices) if choices else None}
    meta.update({"min": min, "max": max, "step": step})
    return dataclasses.field(default=default, metadata=meta)


def option_of(config_cls: type, name: str, *, label: str | None = None, help: str | None = None) -> Any:
    """A field that repeats another config's own: same default and validation metadata.

    For parameters that several configs take (``SelectionOptions`` gathers them all; the
    select and pack stages take the group's ``images_per_group``), so each is declared
    once, by the stage that owns it. ``label`` may shorten the control's label; ``help``
    may say what the parameter means to the borrowing config.
    """
    for field in dataclasses.fields(config_cls):
        if field.name == name:
            meta = dict(field.metadata) | {k: v for k, v in (("label", label), ("help", help)) if v}
            return dataclasses.field(default=field.default, metadata=meta)
    raise ValueError(f"Invalid option ({name!r}). {config_cls.__name__} has no such field.")


def _fmt(values: Sequence[Any]) -> str:
    return ", ".join(repr(v) for v in values)


def validate_fields(config: Any) -> None:
    """Check every field against its metadata; raise the project's ValueError style."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        meta = field.metadata
        name = field.name.replace("_", " ")
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            raise ValueError(f"Invalid {name} ({value!r}). Supported values are {_fmt(choices)}.")
        lo, hi = meta.get("min"), meta.get("max")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value):  # NaN compares false with every bound and would pass
            raise ValueError(f"Invalid {name} ({value!r}). Supported values are finite numbers.")
        if lo is not None and value < lo:
            bound = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
            raise ValueError(f"Invalid {name} ({value!r}). Supported values are {bound}.")
        if hi is not None and value > hi:
            bound = f"at most {hi}" if lo is None else f"between {lo} and {hi}"
            raise ValueError(f"Invalid {name} ({value!r}). Supported values are {bound}.")


def field_help(config_cls: type) -> dict[str, dict[str, Any]]:
    """Field name -> metadata dict (label, help, choices, min, max, step, default)."""
    out: dict[str, dict[str, Any]] = {}
    for field in dataclasses.fields(config_cls):
        out[field.name] = dict(field.metadata) | {"default": field.default}
    return out


def parse_names(text: str | Sequence[str], choices: Sequence[str], *, what: str) -> tuple[str, ...]:
    """Split ``a,b,c`` (or take a sequence), strip, drop empties and duplicates, check each name.

    Raises ``ValueError("Invalid <what> (name). Supported values are …")`` for an unknown name.
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for item in items:
        name = str(item).strip()
        if not name:
            continue
        if name not in choices:
            raise ValueError(f"Invalid {what} ({name!r}). Supported values are {', '.join(choices)}.")
        if name not in out:
            out.append(name)
    return tuple(out)
