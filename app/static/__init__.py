"""The page's JavaScript, kept in real ``.js`` files beside this module and read once per name."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_PLACEHOLDER = re.compile(r"__[A-Z][A-Z0-9_]*__")


@functools.cache
def _source(name: str) -> str:
    return (HERE / f"{name}.js").read_text(encoding="utf-8")


def load_js(name: str, **values: Any) -> str:
    """The text of ``app/static/<name>.js``, each ``__KEY__`` placeholder replaced by ``json.dumps(value)``.

    A Gradio ``js=`` handler is the file's single function expression; a placeholder left without a
    value (or a value without its placeholder) raises, so a renamed placeholder cannot pass silently.

    Raises
    ------
    FileNotFoundError : no such file.
    KeyError : a placeholder without a value, or a value the file has no placeholder for.
    """
    text = _source(name)
    for key, value in values.items():
        mark = f"__{key.upper()}__"
        if mark not in text:
            raise KeyError(f"{name}.js has no placeholder {mark}")
        text = text.replace(mark, json.dumps(value))
    left = _PLACEHOLDER.search(text)
    if left:
        raise KeyError(f"{name}.js: no value for {left.group()}")
    return text


PAGE_SCRIPT = "page"
"""The page-level script (viewer, keys, plot clicks), served at ``lens/static/page.js``."""
STEP_ACTIONS = ("prev", "next", "home", "end")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def script_path(name: str) -> Path | None:
    """The file of script ``name`` (``app/static/<name>.js``), or None for a name that is not one."""
    if not _NAME.fullmatch(name):
        return None
    path = HERE / f"{name}.js"
    return path if path.is_file() else None


def step_js(slider_elem_id: str) -> dict[str, str]:
    """Gradio ``js=`` functions for the frame steps that need no server: the slider knows its own range.

    Keys: :data:`STEP_ACTIONS`; each value is a function of the slider's value returning the new one.
    """
    bounded = {"next", "end"}  # the steps that read the slider's maximum
    return {
        a: load_js(f"step_{a}", slider=slider_elem_id) if a in bounded else load_js(f"step_{a}")
        for a in STEP_ACTIONS
    }


def press_if_shown_js(shown: str, button: str) -> str:
    """A Gradio ``js=`` function that presses hidden button ``button`` (a selector) only while
    ``shown`` (a selector) is on screen."""
    return load_js("press_if_shown", shown=shown, button=button)
