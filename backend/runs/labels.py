"""What a run changed against its parent, in words: the label a run list shows beside a re-selection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from backend.store.runs import RunRow


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "–" if value is None else str(value)


def option_changes(parent: Mapping[str, Any], child: Mapping[str, Any]) -> list[str]:
    """The options that differ between two stored configs, each as ``name old→new``, in the child's
    option order (then options only the parent had)."""
    names = list(child) + [k for k in parent if k not in child]
    return [
        f"{name} {_value(parent.get(name))}→{_value(child.get(name))}"
        for name in names
        if parent.get(name) != child.get(name)
    ]


def change_label(run: RunRow, parent: RunRow | None) -> str:
    """What ``run`` changed against ``parent``: ``""`` for a first run; the selector when it is
    another one; otherwise the changed options (``same options`` when none differ)."""
    if parent is None:
        return ""
    if run.selector != parent.selector:
        return f"{run.selector} (from {parent.selector})"
    changes = option_changes(parent.config, run.config)
    return ", ".join(changes) if changes else "same options"


def change_labels(rows: Sequence[RunRow]) -> dict[str, str]:
    """:func:`change_label` of every run in ``rows`` (its parent looked up among them), by run id."""
    by_id = {r.run_id: r for r in rows}
    return {r.run_id: change_label(r, by_id.get(r.parent_run_id or "")) for r in rows}
