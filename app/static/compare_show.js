// The Compare tab's slider or a view control changed (app.tabs.compare): the panes' images and
// captions come from the app's own routes (window.__cmp.show, page.js), no server event.
// Inputs: comparison id, position, layers, opacity, colormap, scale, difference, reference, nav JSON.
(cid, pos, layers, opacity, cmap, scale, diff, ref, navJson) => {
  const C = window.__cmp;
  if (C && C.show) C.show(cid, pos, layers, opacity, cmap, scale, diff, ref, navJson);
  return [];
}
