"""What the tabs share: backend errors as the one-line messages the page shows."""

from __future__ import annotations

import gradio as gr

from backend.errors import CodecLensError


def ui_error(exc: BaseException, *, single_line: bool = False) -> gr.Error:
    """A ``gr.Error`` for ``exc``: a backend error's one line (``path: problem``), else its text
    (on one line with ``single_line``)."""
    if isinstance(exc, CodecLensError):
        return gr.Error(exc.one_line())
    text = str(exc)
    return gr.Error(text.replace("\n", " ") if single_line else text)
