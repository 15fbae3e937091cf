"""The option form shared by the Run and Inspect tabs: controls generated from a selector's options
class, their values back into options, and a stored run's values spread over them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import gradio as gr

from app.static import load_js
from app.tabs.common import ui_error
from backend.errors import CodecLensError

if TYPE_CHECKING:
    from app.workspace import Workspace
    from backend.store.runs import RunRow

OptionControl = gr.Dropdown | gr.Checkbox | gr.Number
"""What :func:`option_controls` makes for one option field."""


class OptionForm(Protocol):
    """What holds the option form (the Run tab): the selector choice and every selector's controls."""

    selector: gr.Dropdown
    selector_controls: dict[str, dict[str, OptionControl]]


def option_controls(
    selector: str = "cvp", *, names: Sequence[str] | None = None, prefix: str | None = None
) -> dict[str, OptionControl]:
    """One control per field of ``selector``'s options class (or per field of ``names``), generated
    from the field metadata.

    cvp's controls are ``#opt_<name>``; another selector's ``#opt_<selector>_<name>``; ``prefix``
    replaces ``opt_`` (the inspector's live controls use ``live_``).
    """
    from backend.config import field_help
    from backend.selectors import SELECTORS

    controls: dict[str, OptionControl] = {}
    if prefix is None:
        prefix = "opt_" if selector == "cvp" else f"opt_{selector.replace('-', '_')}_"
    for name, meta in field_help(SELECTORS.lookup(selector).options_cls).items():
        if names is not None and name not in names:
            continue
        label, info, default = meta["label"], meta["help"], meta["default"]
        elem_id = f"{prefix}{name}"
        if meta["choices"]:
            controls[name] = gr.Dropdown(
                list(meta["choices"]), value=default, label=label, info=info, elem_id=elem_id
            )
        elif isinstance(default, bool):
            controls[name] = gr.Checkbox(value=default, label=label, info=info, elem_id=elem_id)
        else:
            controls[name] = gr.Number(
                value=default,
                label=label,
                info=info,
                minimum=meta["min"],
                maximum=meta["max"],
                precision=0 if isinstance(default, int) else None,
                elem_id=elem_id,
            )
    return controls


def selection_options(
    names: Sequence[str],
    values: Sequence[Any],
    selector: str = "cvp",
    *,
    base: dict[str, Any] | None = None,
) -> Any:
    """The options of ``selector`` from its option controls' values (numbers arrive as floats); the
    other options from ``base`` (a run's config) or their defaults."""
    from backend.selectors import options_for

    defaults = options_for(selector)
    fields = set(defaults.as_dict())
    try:
        raw = {k: v for k, v in (base or {}).items() if k in fields}
        raw |= dict(zip(names, values, strict=True))
        for name, value in raw.items():
            default = getattr(defaults, name)
            if isinstance(default, int) and not isinstance(default, bool) and value is not None:
                raw[name] = int(value)
        return options_for(selector, raw)
    except (ValueError, TypeError) as exc:
        raise gr.Error(str(exc)) from exc


@dataclass(frozen=True)
class OptionLayout:
    """The Run tab's selector choice and option controls in output order: ``entries`` holds one
    ``(selector, name, default)`` per control, the selector choice first as ``("", "selector", "cvp")``."""

    entries: tuple[tuple[str, str, Any], ...]

    @classmethod
    def of(cls, tab: OptionForm) -> OptionLayout:
        """The layout of ``tab``'s controls: its selector choice, then every selector's controls."""
        controls = [(s, n, c.value) for s, named in tab.selector_controls.items() for n, c in named.items()]
        return cls((("", "selector", tab.selector.value), *controls))

    def outputs(self, tab: OptionForm) -> list[gr.components.Component]:
        """``tab``'s components in the order of ``entries``."""
        return [tab.selector, *(tab.selector_controls[s][n] for s, n, _ in self.entries[1:])]


def opened_options(
    ws: Workspace, run_id: str, layout: OptionLayout, *, row: RunRow | None = None
) -> list[Any]:
    """The value each control of ``layout`` takes for stored run ``run_id``: the run's selector,
    then its option values; None leaves a control as it is (another selector's). ``row``: the
    run's store row, when the caller has it."""
    from backend.selectors import options_for

    try:
        row = row if row is not None and row.run_id == run_id else ws.store.get_run(run_id)
    except CodecLensError as exc:
        raise ui_error(exc) from exc
    # cvp's options read as they were stored (a run made before an option existed keeps the
    # control's default); another selector's through its options class.
    values = {} if row.selector == "cvp" else options_for(row.selector, row.config).as_dict()
    out: list[Any] = [row.selector]
    for selector, name, default in layout.entries[1:]:
        if selector != row.selector:
            out.append(None)
        else:
            out.append(row.config.get(name, default) if selector == "cvp" else values[name])
    return out


def opened_options_json(
    ws: Workspace, run_id: str, layout: OptionLayout, *, row: RunRow | None = None
) -> str:
    """:func:`opened_options` as the JSON text the page spreads over the controls (run_apply_options.js)."""
    values = opened_options(ws, run_id, layout, row=row)
    return json.dumps({"run": run_id, "values": values}, default=str)


def apply_options_js(layout: OptionLayout) -> str:
    """The Gradio ``js=`` function spreading :func:`opened_options_json`'s text over ``layout``'s controls."""
    return load_js("run_apply_options", count=len(layout.entries))
