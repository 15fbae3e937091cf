"""What the tabs share: backend errors as the one-line messages the page shows, kept in a status line."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gradio as gr

from backend.errors import CodecLensError

FixWording = Callable[[Sequence[tuple[str, str]]], str]
"""Renders an error's fix (``(option name, value)`` pairs) as the surface that shows it words it."""

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]<>#|~])")


def option_labels(selector: str = "cvp") -> dict[str, str]:
    """The Run tab's control label of each option of ``selector`` (``profile`` → ``Profile``)."""
    from backend.config import field_help
    from backend.selectors import SELECTORS

    return {name: meta["label"] for name, meta in field_help(SELECTORS.lookup(selector).options_cls).items()}


def controls_wording(fix: Sequence[tuple[str, str]], labels: Mapping[str, str] | None = None) -> str:
    """``set Profile to clean and Score to residual``: a fix named by the option controls' labels."""
    labels = option_labels() if labels is None else labels
    parts = [f"{labels.get(name, name)} to {value}" for name, value in fix]
    return "set " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


def error_line(exc: BaseException, *, wording: FixWording | None = None) -> str:
    """The one line the page shows for ``exc``.

    A backend error that carries a fix (``problem``: its message up to the CLI's flags, ``fix``:
    option names and values, ``fix_note``: what follows the fix) is worded for the app, as
    ``problem``, the controls to change (``wording``, default :func:`controls_wording`) and
    ``fix_note``: never the CLI's flags.
    """
    fix = getattr(exc, "fix", None)
    if isinstance(exc, CodecLensError) and fix:
        rendered = (wording or controls_wording)(fix)
        head = ": ".join(p for p in (exc.path, getattr(exc, "problem", exc.message)) if p)
        return f"{head} {rendered}{getattr(exc, 'fix_note', '')}".replace("\n", " ")
    if isinstance(exc, CodecLensError):
        return exc.one_line()
    return _text(exc).replace("\n", " ")


def _text(exc: BaseException) -> str:
    """The text of ``exc``: a gr.Error's message (its str() is the message's repr, quotes and all)."""
    return str(exc.message) if isinstance(exc, gr.Error) else str(exc)


def ui_error(exc: BaseException, *, single_line: bool = False, wording: FixWording | None = None) -> gr.Error:
    """A ``gr.Error`` for ``exc``: a backend error's one line (``path: problem``, a fix worded for
    the app), else its text (on one line with ``single_line``)."""
    if isinstance(exc, CodecLensError):
        return gr.Error(error_line(exc, wording=wording))
    text = _text(exc)
    return gr.Error(text.replace("\n", " ") if single_line else text)


def error_status(line: str) -> str:
    """A status line (Markdown) that keeps ``line``, a refused input's reason, on the page."""
    escaped = _MARKDOWN_SPECIALS.sub(r"\\\1", line)  # a path's _ or * must not turn into emphasis
    return f"**Error:** {escaped}"


def reported(
    fn: Callable[..., Any],
    outputs: Sequence[Any],
    status: Any,
    *,
    on_error: Mapping[Any, Any] | None = None,
) -> Callable[..., Any]:
    """``fn`` for an event whose outputs are ``outputs``, its errors kept in ``status``.

    Gradio paints every output of an event that raised ``gr.Error`` red and shows the reason
    only in a toast that fades. Wrapped, a refused input (``gr.Error``, a backend error)
    instead writes its reason into ``status``, shows it once as a warning toast and leaves
    every other output as it was, or as ``on_error`` says (component → value, e.g. a table
    that would otherwise show a stale result). Other exceptions (bugs) propagate.
    """
    where = list(outputs).index(status)
    replaced = {list(outputs).index(c): v for c, v in (on_error or {}).items()}

    @functools.wraps(fn)  # Gradio reads the signature (gr.Request, gr.Progress) through __wrapped__
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (gr.Error, CodecLensError) as exc:
            line = error_line(exc)
            gr.Warning(line)
            out = [replaced.get(i, gr.update()) for i in range(len(outputs))]
            out[where] = error_status(line)
            return out[0] if len(outputs) == 1 else out

    return wrapped
