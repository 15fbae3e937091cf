// The viewer's controls changed (app.tabs.inspect.wiring): the frame image is a plain <img> fed by
// the app's own JPEG route, its src set here through window.__lens.show (page.js), so a frame step
// costs one cached GET instead of a queued Gradio event plus a file copy (measured: bench/scrub.py).
// Inputs: row, run, layers, opacity, colormap, scale, heat, frames JSON, codec layers, groups JSON.
(row, run, layers, opacity, cmap, scale, heat, framesJson, codec, groupsJson) => {
  const L = window.__lens;
  if (L && L.show) L.show(row, run, layers, opacity, cmap, scale, heat, framesJson, codec);
  // The group stepper follows the viewer with one server event when the row enters another
  // group (groupsJson: [start, end, group_index] of each), not one per frame step, and only once
  // the viewer rests there 250 ms: while keys scrub through groups, a stepper redraw (~40 ms of
  // page time) at each boundary would hold up the next frame (as the plots' cursor, L.cursor).
  let group = null;
  try {
    for (const [s, e, g] of JSON.parse(groupsJson || '[]')) if (row >= s && row < e) { group = g; break; }
  } catch (err) { group = null; }
  // The groups table marks the viewed group's row.
  for (const tr of document.querySelectorAll('#groups_table tr[data-group]')) {
    tr.classList.toggle('lens-current', group !== null && Number(tr.dataset.group) === group);
  }
  const key = run + ':' + group;
  // Whatever opened another run drew its stepper: only a move within one run follows.
  const sameRun = window.__lensGroupRun === run;
  window.__lensGroupRun = run;
  if (!sameRun) window.__lensGroup = key;
  if (run && group !== null && window.__lensGroup !== key) {
    window.__lensGroup = key;
    window.__lensFollowRow = null;
  }
  if (!sameRun) window.__lensFollowRow = undefined;  // nothing pending for the run left behind
  if (window.__lensFollowRow !== undefined) {
    // Pending until the viewer rests: every step starts the wait again.
    window.__lensFollowRow = Math.round(row);
    clearTimeout(window.__lensFollowTimer);
    window.__lensFollowTimer = setTimeout(() => {
      const pending = window.__lensFollowRow;
      window.__lensFollowRow = undefined;
      if (pending === undefined || pending === null || window.__lensGroupRun !== run) return;
      window.__lensFollow = (window.__lensFollow || 0) + 1;
      const box = document.querySelector('#follow_row textarea, #follow_row input');
      if (box) {
        box.value = pending + ' ' + window.__lensFollow;  // always a new value: a change
        box.dispatchEvent(new Event('input', {bubbles: true}));
      }
    }, 250);
  }
  return [];
}
