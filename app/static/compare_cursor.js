// The metric plot's cursor follows the slider in the browser: the figure carries the positions' frame
// indices in layout.meta.frames. Debounced, so a relayout never delays the pane images while scrubbing.
(pos) => {
  const gd = document.querySelector('#cmp_metrics .js-plotly-plot');
  if (!gd || !window.Plotly || !gd.layout || !gd.layout.shapes) return [];
  const frames = (gd.layout.meta && gd.layout.meta.frames) || [];
  if (!frames.length) return [];
  const f = frames[Math.max(0, Math.min(frames.length - 1, Math.round(pos)))];
  const i = gd.layout.shapes.findIndex((s) => s.name === 'cursor');
  clearTimeout(window.__cmpCursorTimer);
  window.__cmpCursorTimer = setTimeout(() => {
    if (i >= 0) window.Plotly.relayout(gd, {[`shapes[${i}].x0`]: f, [`shapes[${i}].x1`]: f});
  }, 200);
  return [];
}
