// run_id changed: open it through the server only when the viewer does not show it yet (a live
// re-selection drew its run itself, and a backend event costs the page a round trip).
(run, shown) => {
  if (run && run !== shown) document.querySelector('#open_run_btn')?.click();
  return [];
}
