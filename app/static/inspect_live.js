// A live option change: the page asks the app's own route (app.server, /lens/reselect) and hands
// the answer to Gradio as this frontend-only event's outputs. A backend event cost the page a
// queue round trip and, per answer, a pass over the loading status of every component any event
// ever updated (~100 ms of page CPU): re-selection took 357 ms p50 to show, this path 217-225 ms
// (docs/inspector.md). An error goes to #live_error, whose server event shows it as gr.Error.
// Filled in: the live options' names, in the order of the event's inputs after the viewer's.
async (run, row, layers, opacity, colormap, scale, heat, ...values) => {
  const names = __NAMES__;
  const options = Object.fromEntries(names.map((n, i) => [n, values[i]]));
  const seq = (window.__lensLive = (window.__lensLive || 0) + 1);
  let got = null;
  try {
    const r = await fetch('lens/reselect', {
      method: 'POST',
      headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({run, row, layers, opacity, colormap, scale, heat, options}),
    });
    const text = await r.text();
    try { got = JSON.parse(text); } catch (err) { got = null; }
    if (!r.ok && !(got && got.error)) {
      const why = 'HTTP ' + r.status + ': ' + text.slice(0, 200);
      got = {error: 'The server refused the re-selection (' + why + ').'};
    }
  } catch (err) {
    got = {error: 'The re-selection got no answer from the server (' + err + ').'};
  }
  if (seq !== window.__lensLive) return [];  // a later change is on its way: its answer draws
  const out = got.outputs || [];
  const L = window.__lens;
  if (!got.error && out.length && L && L.params && L.render) {
    // The frame first (SRC_JS then finds it shown).
    L.openRun(out[1]);
    L.params = Object.assign({}, L.params, {run: out[1]});
    L.render();
    // The new run's info line came with the answer: the frame shows with it once loaded (L.swapIn).
    if (!(got.info && L.giveInfo && L.giveInfo(L.infoKey(), got.info))) L.fetchInfo();
  }
  if (out.length) {
    // The Run tab's option controls (hidden behind their tab) follow once the frame shows.
    const options = out[out.length - 1];
    out[out.length - 1] = undefined;
    const img = document.querySelector('#frame_img');
    const apply = () => {
      const box = document.querySelector('#run_options textarea, #run_options input');
      if (!box || seq !== window.__lensLive) return;
      box.value = options;
      box.dispatchEvent(new Event('input', {bubbles: true}));
    };
    // When the page is idle: spread over the Run tab's ~70 controls it cost the page 20-40 ms,
    // which landed between the timeline's and the stepper's redraws.
    const idle = () => (window.requestIdleCallback ? requestIdleCallback(apply, {timeout: 1500}) : apply());
    const later = () => setTimeout(idle, 150);
    if (L && L.swap) L.swap.after.push(later);
    else if (img && !img.complete) img.addEventListener('load', later, {once: true});
    else later();
  }
  if (got.error) {
    const box = document.querySelector('#live_error textarea, #live_error input');
    if (box) {
      box.value = JSON.stringify([seq, got.error]);  // the sequence number: always a change
      box.dispatchEvent(new Event('input', {bubbles: true}));
    }
    return [];
  }
  return out;
}
