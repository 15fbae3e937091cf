// A figure box's change (app.tabs.inspect.wiring): Plotly.react on the plot's div. Until the gr.Plot
// has a div (its first figure) the figure goes to Gradio as the plot's value instead, which mounts
// it; Gradio's value then never changes again, so it never redraws over what the page drew.
// Filled in: the plot's elem_id, and whether it draws only once on screen (a plot below the viewer).
(text) => {
  const gd = document.querySelector('#' + __PLOT__ + ' .js-plotly-plot');
  if (!text) return undefined;
  if (!gd || !window.Plotly) return {type: 'plotly', plot: text};
  // The figure drawn last (or waiting to draw) again: nothing to redraw (a draw costs 40-100 ms).
  if (gd.__lensText === text) return undefined;
  gd.__lensText = text;
  const fig = JSON.parse(text);
  const layout = fig.layout || {};
  // As Gradio's plot component draws a figure (its label shown).
  layout.autosize = true;
  layout.margin = Object.assign({}, layout.margin || {}, {autoexpand: true});
  // A height of its own, always: with responsive autosize and no layout height, Plotly sizes its
  // container to 100 % of the plot's div, whose height is its content's, so every second react
  // on the same div collapsed the plot to 0 px (the readiness trace vanished, issue 27).
  if (!layout.height) layout.height = __HEIGHT__;
  if (layout.title && (layout.title.text || typeof layout.title === 'string')) {
    layout.margin.t = Math.max(100, layout.margin.t || 0);
  }
  const config = Object.assign({}, fig.config || {}, {responsive: true});
  const draw = () => window.Plotly.react(gd, fig.data || [], layout, config);
  if (!__LATER__) {
    // After the next paint, and only the latest figure: a redraw costs the page 40-100 ms, and
    // drawn within Gradio's apply of a live re-selection it held the new frame's load event (and
    // so the frame) back until both plots had drawn (page.js, L.swapIn).
    gd.__lensNow = draw;
    requestAnimationFrame(() => setTimeout(() => {
      if (gd.__lensNow !== draw) return;
      gd.__lensNow = null;
      draw();
    }, 0));
    return undefined;
  }
  // A plot below the viewer draws when it comes on screen (after the frame has shown), else once
  // the page has been idle a while: a draw costs the page 40-80 ms, which would hold up the
  // frame, the timeline and the stepper. Only the latest figure draws.
  gd.__lensPending = draw;
  const run = () => {
    if (gd.__lensPending !== draw) return;
    gd.__lensPending = null;
    draw();
    const L = window.__lens;
    if (L && L.cursor && L.frameIndex) L.cursor(L.frameIndex());  // the viewer may have moved on
  };
  const idle = () => (window.requestIdleCallback ? requestIdleCallback(run, {timeout: 1000}) : run());
  const afterFrame = () => {
    const img = document.querySelector('#frame_img');
    if (!img || (img.complete && img.naturalWidth)) idle();
    else img.addEventListener('load', idle, {once: true});
  };
  const seen = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) { seen.disconnect(); afterFrame(); }
  });
  seen.observe(gd);
  setTimeout(() => { seen.disconnect(); idle(); }, 1500);
  return undefined;
}
