"""Validation helpers and variant registries shared by the stage config dataclasses.

Every config is a frozen, keyword-only dataclass whose fields carry UI metadata
(``label``, ``min``, ``max``, ``step``, ``help``, ``choices``); the same metadata
drives validation here, the CLI and the app's generated controls. A field that names a
stage variant (sampler, grouper, scorer, …) takes its choices from that stage's
:class:`Registry`, so the two cannot drift.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

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


@dataclass(frozen=True)
class Variant:
    """One registry entry: a named implementation, a line of help and its own config class, if any.

    ``function`` has its stage's signature, ``function(inputs..., *, config)``; variants
    without a ``config_class`` of their own take the stage's config.
    """

    name: str
    function: Callable[..., Any]
    help: str
    config_class: type | None = None


V = TypeVar("V", bound=Variant)


class Registry(Mapping[str, V]):
    """The variants of one stage kind by name, in declaration order (the order of the choices).

    Parameters
    ----------
    what : the option the names are values of, as error messages say it (``grouping mode``).
    variants : the entries; names must be unique.

    Examples
    --------
    >>> table = Registry("colour", [Variant("red", str, "warm"), Variant("blue", str, "cold")])
    >>> table.names
    ('red', 'blue')
    >>> table.lookup("green")
    Traceback (most recent call last):
    ...
    ValueError: Invalid colour ('green'). Supported values are 'red', 'blue'.
    """

    def __init__(self, what: str, variants: Iterable[V]) -> None:
        self.what = what
        self._by_name: dict[str, V] = {}
        for variant in variants:
            if variant.name in self._by_name:
                raise ValueError(f"Invalid {what} ({variant.name!r}). Supported values are unique names.")
            self._by_name[variant.name] = variant

    def __getitem__(self, name: str) -> V:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._by_name)})"

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names, for a field's ``choices``."""
        return tuple(self._by_name)

    def lookup(self, name: str) -> V:
        """The entry called ``name``; unknown names raise the project's ValueError listing the known ones."""
        try:
            return self._by_name[name]
        except KeyError:
            raise ValueError(
                f"Invalid {self.what} ({name!r}). Supported values are {_fmt(self.names)}."
            ) from None
