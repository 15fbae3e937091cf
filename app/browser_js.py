"""Browser-side snippets shared by the app's viewers."""

from __future__ import annotations


def step_js(slider_elem_id: str) -> dict[str, str]:
    """JS for the frame steps that need no server: the slider knows its own range.

    Keys: ``prev``, ``next``, ``home``, ``end``; each value is a Gradio ``js=`` function of the
    slider's value returning the new value.
    """
    slider_max = f"Number(document.querySelector('#{slider_elem_id} input[type=range]')?.max ?? r)"
    return {
        "prev": "(r) => Math.max(0, Math.round(r) - 1)",
        "next": f"(r) => Math.min({slider_max}, Math.round(r) + 1)",
        "home": "(r) => 0",
        "end": f"(r) => {slider_max}",
    }
