"""The re-selection plan: which options change, whether the cached decode and score maps still serve.

One decision used by every entry point (the CLI's ``reselect``, the Run tab, the Inspect tab's
live options, opening a stored run): a change of grouping, selection or threshold options of a
resumable selector re-runs only the cheap stages on the run's cached decode; a change of a front
option, another selector or an evicted cache means decoding the video again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from backend.pipeline.recipe import SelectorOptions
from backend.selectors import SELECTORS, check_options, options_for
from backend.store import SessionStore
from backend.store.runs import RunRow


def front_is_cached(store: SessionStore, key: str | None, memory: Mapping[str, Any] | None = None) -> bool:
    """Whether the decode cached under ``key`` can be read without decoding (in ``memory`` or on disk)."""
    if not key:
        return False
    if memory is not None and key in memory:
        return True
    folder = store.cache_lookup(key)
    return folder is not None and (folder / "records.json").is_file()


@dataclass(frozen=True)
class ReselectPlan:
    """What re-selecting ``parent`` with changed options does.

    ``options`` are the new run's options, built and validated once; ``changes`` the options whose
    value differs from the parent's (all given ones when the selector changes).
    """

    parent: RunRow
    selector: str
    options: SelectorOptions
    changes: Mapping[str, Any] = field(default_factory=dict)
    same_front: bool = False
    """Same selector, resumable, and every FRONT_OPTIONS value unchanged."""
    same_scores: bool = False
    """``same_front`` and every SCORE_OPTIONS value unchanged: the parent's score maps serve."""
    cached: bool = False
    """The parent's decode is in the cache (memory or disk) when the plan was made."""

    @property
    def decodes(self) -> bool:
        """Whether the re-selection must decode the video (a worker's job in the app)."""
        return not (self.same_front and self.cached)

    @property
    def unchanged(self) -> bool:
        """Nothing to do: same selector, no option differs."""
        return self.selector == self.parent.selector and not self.changes


def plan_reselection(
    store: SessionStore,
    parent: RunRow,
    changes: Mapping[str, Any],
    *,
    selector: str | None = None,
    memory: Mapping[str, Any] | None = None,
) -> ReselectPlan:
    """Plan re-selecting the stored run ``parent`` with ``changes`` (option name → new value).

    ``selector``: re-select the run's video with another selector (its options start from that
    selector's defaults plus ``changes``). Options equal to the parent's are dropped from
    ``changes``.

    Returns
    -------
    ReselectPlan with the new options and what they reuse.

    Raises
    ------
    ValueError : an option the selector does not take, or an invalid value.
    """
    target = selector or parent.selector
    check_options(target, changes)
    spec = SELECTORS.lookup(target)
    same_selector = target == parent.selector
    before = options_for(target, parent.config if same_selector else {})
    options = before.replace(**changes) if changes else before
    if same_selector:
        changes = {k: v for k, v in changes.items() if getattr(options, k) != getattr(before, k)}

    def unchanged(names: tuple[str, ...]) -> bool:
        return all(getattr(options, k) == getattr(before, k) for k in names)

    same_front = same_selector and spec.resumable and unchanged(spec.front_options)
    return ReselectPlan(
        parent=parent,
        selector=target,
        options=options,
        changes=dict(changes),
        same_front=same_front,
        same_scores=same_front and unchanged(spec.score_options),
        cached=same_front and front_is_cached(store, parent.cache_key, memory),
    )
