// Spreads the open run's options (one JSON text) over the Run tab's controls in the page: a
// frontend-only event, so the controls never become outputs of a backend event (see
// app.tabs.inspect.wiring on why that matters). undefined leaves a control as it is.
// Filled in: how many controls (app.tabs.option_form.OptionLayout.entries).
(text) => {
  let got = null;
  try { got = JSON.parse(text || 'null'); } catch (err) { got = null; }
  const n = __COUNT__;
  if (!got || !Array.isArray(got.values) || got.values.length !== n) return Array(n).fill(undefined);
  return got.values.map((v) => (v === null ? undefined : v));
}
