"""Compare tab's components: the forms, the view controls, the panes and the hidden buttons, as handles."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from views import compare as cv
from views import compare_difference as cd

SCALE_CHOICES = (
    ("per frame", "frame"),
    ("per video", "video"),
    ("across compared runs", "all"),
)
# Buttons the app's key handler presses while #compare_panes is on screen
# (views.inspector.navigation.ACTIONS).
KEY_BUTTONS: dict[str, str] = {
    a: f"cmp_{a}" for a in ("prev", "next", "prev_key", "next_key", "prev_group", "next_group", "home", "end")
}
STEP_LABELS = {
    "home": "first",
    "prev_group": "◀ group",
    "prev_key": "◀ key",
    "prev": "◀",
    "next": "▶",
    "next_key": "key ▶",
    "next_group": "group ▶",
    "end": "last",
}
# Hidden, not invisible: Gradio leaves visible=False components out of the page, and the
# key handler must be able to click them. The app's CSS hides the row too; this keeps the tab
# self-contained when mounted elsewhere.
CSS = (
    "#compare_hidden { display: none !important; }"
    # Wrapped table headers break between words, never inside one ("canvas|es").
    " #cmp_variants th *, #cmp_pairs th * { word-break: keep-all; overflow-wrap: normal; }"
    # A pane: its label over the frame, the frame as wide as its column.
    " .cmp-pane { position: relative; } .cmp-pane img { display: block; width: 100%; height: auto; }"
    " .cmp-pane-label { position: absolute; top: 0; left: 0; padding: 1px 6px; font-size: 12px;"
    " background: rgba(255, 255, 255, 0.85); border-bottom-right-radius: 4px; }"
    " .cmp-caption { font-size: 14px; padding: 2px 0 6px; }"
)

DEFAULT_SELECTORS = "cvp,llava-ov2,uniform"


@dataclass(frozen=True, kw_only=True)
class PaneControls:
    """The view controls every pane shares, as the browser sends them (:class:`ViewControls`)."""

    layers: Sequence[str] | None = None
    """Names of the layers to draw (``backend.render.LAYER_NAMES``)."""
    opacity: float = 0.5
    """Heatmap opacity, 0 to 1."""
    colormap: str = "turbo"
    scale: str = "frame"
    """One of :data:`SCALE_CHOICES`' values."""
    difference: bool = False
    """Difference mode: tint the blocks only the reference pane or only this pane kept."""
    reference: Any = None
    """The reference pane's index as the dropdown sends it (a string; empty or None: none)."""


NUMBER_FIELDS = (
    "gop",
    "bframes",
    "crf_h264",
    "crf_hevc",
    "crf_vp9",
    "crf_av1",
    "bitrate",
    "max_frames",
    "max_side",
)
"""The new-comparison form's number boxes: ``run_new``'s ``numbers``."""


@dataclass
class NewForm:
    """A new-comparison form: its inputs by the name its handler reads them by, the button, the status."""

    fields: dict[str, Any]
    run_btn: Any
    status: Any

    def read(self, values: dict[Any, Any]) -> dict[str, Any]:
        """The form's values by field name, from a handler's values keyed by component."""
        return {name: values[component] for name, component in self.fields.items()}


def _build_new_form(open_form: bool) -> NewForm:
    from backend.compare import CODECS, FALLBACK_SCORES, SPEEDS, CompareConfig

    with gr.Accordion("New comparison", open=open_form):
        with gr.Row():
            path = gr.Textbox(label="Video path (inside the allowed folders)", elem_id="cmp_path", scale=3)
            codecs = gr.CheckboxGroup(list(CODECS), value=list(CODECS), label="Codecs", elem_id="cmp_codecs")
        defaults = CompareConfig()
        with gr.Row():
            gop = gr.Number(defaults.gop, label="GOP (frames)", precision=0, minimum=1)
            bframes = gr.Number(defaults.bframes, label="B-frames", precision=0, minimum=0, maximum=16)
            crfs = {
                f"crf_{c}": gr.Number(defaults.crf(c), label=f"CRF {c}", precision=0, minimum=0, maximum=63)
                for c in CODECS
            }
            bitrate = gr.Number(0, label="Target kb/s (0: CRF)", precision=0, minimum=0)
        with gr.Row():
            speed = gr.Radio(list(SPEEDS), value=defaults.speed, label="Speed")
            max_frames = gr.Number(0, label="Max frames (0: all)", precision=0, minimum=0)
            max_side = gr.Number(0, label="Max side px (0: source)", precision=0, minimum=0)
            fallback = gr.Dropdown(list(FALLBACK_SCORES), value=defaults.fallback_score, label="AV1 signal")
        run_btn = gr.Button("Encode, select and compare", variant="primary", elem_id="cmp_run")
        status = gr.Markdown("", elem_id="cmp_status")
    fields = {"path": path, "codecs": codecs, "gop": gop, "bframes": bframes, **crfs, "bitrate": bitrate}
    fields |= {"speed": speed, "max_frames": max_frames, "max_side": max_side, "fallback": fallback}
    return NewForm(fields=fields, run_btn=run_btn, status=status)


def _build_selector_form() -> NewForm:
    """The new-selector-comparison form: video path, entries, profile."""
    from backend.config import PROFILES
    from backend.selectors import SELECTORS
    from backend.selectors.presets import PRESETS

    with gr.Accordion("New selector comparison", open=False):
        gr.Markdown(
            f"2–4 of {', '.join(SELECTORS.names)} or the presets {', '.join(PRESETS)}, comma-separated, "
            "each with optional options in brackets, e.g. "
            "`cvp,llava-ov2[gop_mode=bitcost],uniform[num_frames=16]`. "
            "AV1 has no bitcost: give cvp `[score=residual]` there."
        )
        with gr.Row():
            path = gr.Textbox(
                label="Video path (inside the allowed folders)", elem_id="cmp_sel_path", scale=3
            )
            entries = gr.Textbox(DEFAULT_SELECTORS, label="Selectors", elem_id="cmp_sel_entries", scale=3)
            profile = gr.Radio(list(PROFILES), value="clean", label="Profile", elem_id="cmp_sel_profile")
        run_btn = gr.Button("Run the selectors and compare", variant="primary", elem_id="cmp_sel_run")
        status = gr.Markdown("", elem_id="cmp_sel_status")
    fields = {"path": path, "entries": entries, "profile": profile}
    return NewForm(fields=fields, run_btn=run_btn, status=status)


@dataclass
class ViewControls:
    """The view controls' components, one per :class:`PaneControls` field (the panes' inputs)."""

    layers: Any
    opacity: Any
    colormap: Any
    scale: Any
    difference: Any
    reference: Any

    @property
    def components(self) -> list[Any]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]

    def read(self, values: dict[Any, Any]) -> PaneControls:
        """The controls' values, from a handler's values keyed by component."""
        return PaneControls(**{f.name: values[getattr(self, f.name)] for f in dataclasses.fields(self)})


def _build_view_controls() -> ViewControls:
    """Layers, opacity, colormap, scale, difference mode and reference pane."""
    from backend.render import DEFAULT_LAYERS, LAYER_LABELS, LAYER_NAMES
    from views.inspector.frame_layers import COLORMAPS

    with gr.Row():
        layers = gr.CheckboxGroup(
            [(LAYER_LABELS[n], n) for n in LAYER_NAMES],
            value=list(DEFAULT_LAYERS),
            label="Layers",
            elem_id="cmp_layers",
        )
        with gr.Column():
            opacity = gr.Slider(0, 1, value=0.5, step=0.05, label="Heatmap opacity", elem_id="cmp_opacity")
            colormap = gr.Dropdown(list(COLORMAPS), value="turbo", label="Colormap", elem_id="cmp_colormap")
        scale = gr.Radio(list(SCALE_CHOICES), value="frame", label="Heatmap scale", elem_id="cmp_scale")
        with gr.Column():
            diff = gr.Checkbox(False, label="Difference vs reference pane", elem_id="cmp_diff")
            ref = gr.Dropdown([], label="Reference pane (A)", elem_id="cmp_diff_ref")
    return ViewControls(
        layers=layers, opacity=opacity, colormap=colormap, scale=scale, difference=diff, reference=ref
    )


def pane_html(url: str, label: str, picture_hw: tuple[int, int]) -> str:
    """A pane: its label over its frame, a plain ``<img>`` fed by the app's pane route
    (``url``: app.tabs.compare.pane_url), whose ``src`` the page moves as the panes step
    (page.js, ``window.__cmp.show``); ``picture_hw``: the picture's size, for its aspect."""
    h, w = picture_hw
    return (
        f'<div class="cmp-pane"><div class="cmp-pane-label">{html.escape(label)}</div>'
        f'<img src="{html.escape(url)}" alt="{html.escape(label)}" width="{w}" height="{h}"'
        ' draggable="false"></div>'
    )


def caption_html(text: str) -> str:
    """A pane's caption line (the page replaces ``.cmp-caption``'s text as the panes step)."""
    return f'<div class="cmp-caption">{html.escape(text)}</div>'


def _build_panes() -> tuple[list[Any], list[Any], list[Any]]:
    """The four pane slots (two visible until a comparison says otherwise): columns, images, captions.

    Each pane is HTML holding a plain image, not a ``gr.Image``: a step then costs the page four
    cached GETs of the pane route instead of a Gradio event that writes four JPEG files
    (270-550 ms a step, issue 27 item 12)."""
    pane_images, pane_infos, pane_columns = [], [], []
    with gr.Row(elem_id="compare_panes"):
        for i in range(cv.MAX_PANES):
            with gr.Column(visible=i < 2, min_width=240) as column:
                pane_images.append(gr.HTML("", elem_id=f"cmp_pane_{i}", padding=False))
                pane_infos.append(gr.HTML("", elem_id=f"cmp_info_{i}", padding=False))
            pane_columns.append(column)
    return pane_columns, pane_images, pane_infos


@dataclass
class CompareTab:
    """The tab's components that its events read or write."""

    pick: Any
    refresh: Any
    form: NewForm
    selector_form: NewForm
    settings_md: Any
    view: ViewControls
    legend_img: Any
    pane_columns: list[Any]
    pane_images: list[Any]
    pane_infos: list[Any]
    slider: Any
    visible_steps: dict[str, Any]
    plot: Any
    variants_table: Any
    pairs_table: Any
    cid: Any
    nav: Any
    """The open comparison's navigation data as JSON (app.tabs.compare.nav_json), for the page."""
    key_buttons: dict[str, Any]
    loaded: Any

    @property
    def load_outputs(self) -> list[Any]:
        """What :func:`load` returns, in its order."""
        return [
            self.settings_md,
            # Before the slider: the slider's change (compare_show.js) reads it.
            self.nav,
            self.slider,
            *self.pane_columns,
            *self.pane_images,
            *self.pane_infos,
            self.plot,
            self.variants_table,
            self.pairs_table,
            self.view.reference,
            self.legend_img,
        ]


def build_layout(existing: list[tuple[str, str]]) -> CompareTab:
    """Every component of the tab, top to bottom, the hidden ones last; ``existing``: the stored
    comparisons' picker choices, newest first."""
    gr.HTML(
        "",
        html_template=f"<style>{CSS}</style>",
        elem_id="cmp_setup",
        padding=False,
    )
    gr.Markdown(
        "Encode one source in H.264, HEVC, VP9 and AV1 with matched GOP and B-frames, select on each and "
        "compare what they keep — or run several selectors (cvp, llava-ov2, uniform, presets) on one "
        "video and compare those. AV1 has no bitcost: its variant is selected with the fallback signal. "
        "Keys and the step buttons move every pane."
    )
    with gr.Row():
        pick = gr.Dropdown(
            existing,
            value=existing[0][1] if existing else None,
            label="Stored comparison",
            elem_id="cmp_pick",
            scale=4,
        )
        refresh = gr.Button("Refresh", elem_id="cmp_refresh", scale=1)
    form = _build_new_form(open_form=not existing)
    selector_form = _build_selector_form()
    settings_md = gr.Markdown("", elem_id="cmp_settings")
    view = _build_view_controls()
    gr.Markdown(
        f"Difference mode: <span style='color:rgb{cd.A_ONLY_RGB}'>■</span> kept only by the reference pane, "
        f"<span style='color:rgb{cd.B_ONLY_RGB}'>■</span> kept only by this pane (anchors count whole); "
        f"selector comparisons also outline <span style='color:rgb{cd.BOTH_RGB}'>□</span> kept by both."
    )
    legend_img = gr.Image(
        label="Heatmap scale", interactive=False, height=70, format="png", elem_id="cmp_legend"
    )
    pane_columns, pane_images, pane_infos = _build_panes()
    slider = gr.Slider(0, 1, value=0, step=1, label="Frame position (all panes)", elem_id="cmp_slider")
    with gr.Row(elem_id="cmp_steps"):
        visible_steps = {
            a: gr.Button(label, elem_id=f"cmp_step_{a}", size="sm", min_width=60)
            for a, label in STEP_LABELS.items()
        }
    plot = gr.Plot(elem_id="cmp_metrics", label="Per-frame metrics (click a frame to jump)")
    # One table per row: side by side, the variants' 13 columns got half the width and showed
    # half of them, the rest behind a scroll bar. wrap lets a long header or label take two lines.
    variants_table = gr.Dataframe(label="Variants", interactive=False, wrap=True, elem_id="cmp_variants")
    pairs_table = gr.Dataframe(label="Pairs", interactive=False, wrap=True, elem_id="cmp_pairs")
    with gr.Row(elem_id="compare_hidden"):
        cid = gr.Textbox(value=pick.value or "", elem_id="cmp_id", label="comparison id")
        # One line: a multi-line box measures its text on every change (a forced layout).
        nav = gr.Textbox("", elem_id="cmp_nav", lines=1, max_lines=1)
        key_buttons = {a: gr.Button(a, elem_id=elem) for a, elem in KEY_BUTTONS.items()}
        loaded = gr.Textbox("", elem_id="cmp_loaded")
    return CompareTab(
        pick=pick,
        refresh=refresh,
        form=form,
        selector_form=selector_form,
        settings_md=settings_md,
        view=view,
        legend_img=legend_img,
        pane_columns=pane_columns,
        pane_images=pane_images,
        pane_infos=pane_infos,
        slider=slider,
        visible_steps=visible_steps,
        plot=plot,
        variants_table=variants_table,
        pairs_table=pairs_table,
        cid=cid,
        nav=nav,
        key_buttons=key_buttons,
        loaded=loaded,
    )
