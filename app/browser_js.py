"""Browser-side snippets shared by the app's viewers: the page's key handler and frame steps."""

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


# Keys click hidden buttons; text inputs keep their keys. While the codec comparison panes
# are on screen the same keys drive them (buttons cmp_*). Plot clicks and frame clicks
# write into hidden textboxes and press hidden buttons. Gradio replaces the plotly div on
# every update, so a MutationObserver re-attaches the click handler.
KEY_JS = """
() => {
  const press = (id) => document.querySelector('#' + id)?.click();
  const visible = (sel) => { const el = document.querySelector(sel); return !!(el && el.offsetParent); };
  const fill = (sel, value) => {
    const box = document.querySelector(sel + ' textarea, ' + sel + ' input');
    if (!box) return false;
    box.value = value;
    box.dispatchEvent(new Event('input', {bubbles: true}));
    return true;
  };
  document.addEventListener('keydown', (e) => {
    const tag = (e.target && e.target.tagName) || '';
    if (['INPUT', 'TEXTAREA', 'SELECT'].includes(tag) && e.target.type !== 'range') return;
    const map = {
      ArrowLeft: e.shiftKey ? 'prev_key' : 'prev',
      ArrowRight: e.shiftKey ? 'next_key' : 'next',
      ',': 'prev', '.': 'next', '[': 'prev_group', ']': 'next_group',
      Home: 'home', End: 'end', '?': 'help',
    };
    const action = map[e.key];
    if (!action) return;
    const compare = visible('#compare_panes') && !visible('#frame_img');
    const id = action === 'help' ? 'k_help' : (compare ? 'cmp_' : 'k_') + action;
    if (!document.querySelector('#' + id)) return;
    e.preventDefault();
    e.stopPropagation();
    press(id);
  }, true);
  document.addEventListener('click', (e) => {
    const img = e.target;
    if (!img || img.id !== 'frame_img' || !img.naturalWidth) return;
    const r = img.getBoundingClientRect();
    const x = Math.floor((e.clientX - r.left) * img.naturalWidth / r.width);
    const y = Math.floor((e.clientY - r.top) * img.naturalHeight / r.height);
    if (fill('#block_xy', x + ',' + y)) setTimeout(() => press('block_btn'), 30);
  });
  const attach = () => {
    const gd = document.querySelector('#timeline .js-plotly-plot');
    if (!gd || gd.__lensClick || !gd.on) return;
    gd.__lensClick = true;
    gd.on('plotly_click', (ev) => {
      if (!ev.points.length) return;
      if (fill('#jump_frame', String(Math.round(ev.points[0].x)))) setTimeout(() => press('jump_btn'), 50);
    });
  };
  new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
  attach();
}
"""
