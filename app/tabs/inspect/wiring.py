"""Inspect tab wiring: the events that open a run, step frames, follow keys and plot clicks, the group
stepper, the legends and live re-selection (its route: app.tabs.inspect.live)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gradio as gr

from app.static import load_js, step_js
from app.tabs.inspect.handlers import (
    VIEW_OUTPUTS,
    LastViewed,
    ViewOutputs,
    follow_group,
    legends_of,
    show_group,
    show_run,
)
from app.tabs.inspect.layout import LATER_OUTPUTS, PLOT_HEIGHT_PX, InspectTab, SharedControls
from app.tabs.inspect.live import LiveRoute, raise_live_error
from app.tabs.inspect.routes import ViewSettings
from app.tabs.option_form import OptionLayout, opened_options_json

if TYPE_CHECKING:
    from app.workspace import Workspace

Component = gr.components.Component


def view_output_components(
    shared: SharedControls, tab: InspectTab, video_path: gr.Textbox
) -> ViewOutputs[Component]:
    """The components the view outputs fill (:class:`ViewOutputs`), the Run tab's video path last."""
    return ViewOutputs(
        summary=shared.summary,
        slider=tab.slider,
        frames=shared.frames,
        groups=shared.groups,
        frame=tab.frame,
        info=tab.info,
        colour_legend=tab.colour_legend,
        heat_legend=tab.heat_legend,
        timeline=shared.figures["timeline"],
        signal_plots=shared.figures["signal_plots"],
        groups_table=tab.groups_table,
        group_pick=tab.group_pick,
        readiness_plot=shared.figures["readiness_plot"],
        shown_run=shared.shown_run,
        video_path=video_path,
    )


def _wire_open(
    ws: Workspace,
    shared: SharedControls,
    tab: InspectTab,
    outputs: ViewOutputs[Component],
    layout: OptionLayout,
    viewed: LastViewed,
) -> None:
    """Opening a run: its view, its viewer as left, the Run tab's options and the live controls;
    ``viewed`` learns the run shown (a new page opens it)."""

    # Every backend event costs the page a pass over the loading status of each component any
    # event ever updated (Gradio 6's update_loading_stati_state, a tree search per component):
    # the dozens of Run-tab controls are therefore filled by one JSON text and a page-side
    # function, not as outputs of this event, and a live re-selection (shown == r) changes none.
    def on_run(r, shown, row, lay, op, cm, sc, ht):
        if not r:
            return (gr.update(),) * (len(VIEW_OUTPUTS) + 4 + len(tab.live))
        with ws.store.held():  # one open of the file for all three
            out = show_run(ws, r, shown, row, ViewSettings(lay, op, cm, sc, ht))
            config = ws.store.get_run(r).config
            options = opened_options_json(ws, r, layout)
        viewed.saw(r)
        # A live re-selection (shown == r) drew the view and set the live controls itself.
        live = (gr.update(value=config[n]) if n in config and shown != r else gr.update() for n in tab.live)
        return (*out, options, *live)

    rid = shared.run_id
    # Only a run the viewer does not show yet opens through the server: a live re-selection drew
    # its run itself, and a backend event costs the page a round trip and two status passes.
    shared.open_btn.click(
        on_run,
        [rid, shared.shown_run, *tab.view_controls],
        [*outputs, tab.layers, tab.opacity, tab.colormap, shared.run_options, *tab.live.values()],
        api_name=False,
    )
    rid.change(None, [rid, shared.shown_run], None, js=load_js("inspect_open_if_new"), api_name=False)


def _wire_viewer(ws: Workspace, shared: SharedControls, tab: InspectTab) -> None:
    """The plots drawn from their figure boxes, the frame image and the legends following the
    controls, and the group stepper following the viewer."""
    rid = shared.run_id
    plots = {"timeline": tab.plot, "signal_plots": tab.signal_plot, "readiness_plot": tab.steps_plot}
    for name, box in shared.figures.items():
        js = load_js("inspect_plot", plot=name, later=name in LATER_OUTPUTS, height=PLOT_HEIGHT_PX)
        box.change(None, box, plots[name], js=js, api_name=False)
    src_inputs = [tab.slider, rid, tab.layers, tab.opacity, tab.colormap, tab.scale, tab.heat, shared.frames]
    src_inputs += [tab.codec, shared.groups]
    src_js = load_js("inspect_src")
    for c in [tab.slider, rid, *tab.view_controls[1:], tab.codec]:
        c.change(None, src_inputs, None, js=src_js, api_name=False)
    for c in [*tab.view_controls[1:], tab.codec]:
        c.change(
            lambda r, lay, op, cm, sc, ht, k: legends_of(ws, r, ViewSettings(lay, op, cm, sc, ht), k),
            [rid, tab.layers, tab.opacity, tab.colormap, tab.scale, tab.heat, tab.codec],
            [tab.colour_legend, tab.heat_legend],
            api_name=False,
            show_progress="hidden",
        )
    # Not on every slider change: frame steps make no Gradio event (inspect_src.js fills
    # follow_row when the viewer enters another group).
    shared.follow_row.change(
        lambda r, text, g: follow_group(ws, r, (text or "0").split()[0], g),
        [rid, shared.follow_row, tab.group_pick],
        [tab.group_pick, shared.figures["readiness_plot"]],
        api_name=False,
        show_progress="hidden",
    )


def _wire_steps(ws: Workspace, shared: SharedControls, tab: InspectTab) -> None:
    """Frame steps and jumps (buttons and keys) and the group pick; plot clicks move the slider in
    the page (page.js)."""
    rid = shared.run_id
    steps = step_js("frame_slider")
    for action, button in [*shared.key_buttons.items(), *tab.steps.items()]:
        if action in steps:
            # One-frame steps and the ends need no server: the slider knows its range.
            button.click(None, tab.slider, tab.slider, js=steps[action], api_name=False)
        else:
            # Nor do keyframe and group jumps: the page has the marks (views.inspector.navigation
            # computes the same rows, app.tabs.inspect.handlers.step). Through the server a jump
            # took 230-730 ms to show against ~40 ms for a step (issue 27, item 11).
            button.click(
                None,
                [tab.slider, shared.frames, shared.groups],
                tab.slider,
                js=load_js("step_jump", action=action),
                api_name=False,
            )
    tab.group_pick.input(
        lambda r, g: show_group(ws, r, g),
        [rid, tab.group_pick],
        [shared.figures["readiness_plot"], tab.slider],
        api_name=False,
    )


def _wire_live(
    shared: SharedControls,
    tab: InspectTab,
    outputs: ViewOutputs[Component],
    layout: OptionLayout,
    viewed: LastViewed,
) -> LiveRoute:
    """Live re-selection: a change of a live control posts to ``/lens/reselect`` from the page
    (inspect_live.js) and hands the answer to Gradio as the frontend-only event's outputs."""
    names = tuple(tab.live)
    # shown_run goes first: Gradio applies an answer's outputs in order and starts run_id's change
    # events as it applies run_id, so they must already read the new shown_run (inspect_open_if_new.js).
    others = [c for name, c in zip(VIEW_OUTPUTS[:-1], outputs[:-1], strict=True) if name != "shown_run"]
    targets = (shared.shown_run, shared.run_id, *others, shared.run_options)
    live_js = load_js("inspect_live", names=list(names))
    for control in tab.live.values():
        control.input(
            None,
            [shared.run_id, *tab.view_controls, *tab.live.values()],
            list(targets),
            js=live_js,
            api_name=False,
        )
    shared.live_error.change(
        raise_live_error, shared.live_error, None, api_name=False, show_progress="hidden"
    )
    return LiveRoute(names=names, targets=targets, layout=layout, viewed=viewed)


def wire_inspect_tab(
    ws: Workspace,
    shared: SharedControls,
    tab: InspectTab,
    video_path: gr.Textbox,
    layout: OptionLayout,
    viewed: LastViewed | None = None,
) -> LiveRoute:
    """Opening a run (which also fills the Run tab's ``video_path`` and, through
    ``shared.run_options``, the option controls ``layout`` lists), frame steps, keys, plot clicks,
    the group stepper, legends and live re-selection. ``viewed`` learns every run a page shows.

    Returns what the ``/lens/reselect`` route answers for (app.tabs.inspect.live.reselect_route,
    registered by app.server): a live option change is re-selected there, not in a Gradio event.
    """
    viewed = LastViewed() if viewed is None else viewed
    outputs = view_output_components(shared, tab, video_path)
    _wire_open(ws, shared, tab, outputs, layout, viewed)
    _wire_viewer(ws, shared, tab)
    _wire_steps(ws, shared, tab)
    return _wire_live(shared, tab, outputs, layout, viewed)
