// A keyframe or group jump in the Inspect tab (the action filled in by app.tabs.inspect.wiring): the
// page has the candidates' keyframe rows and the group spans (the frames and groups boxes), so the
// row is found here (window.__lens.target, as views.inspector.navigation.navigate), no server event.
(row, framesJson, groupsJson) => {
  const L = window.__lens;
  return L && L.target ? L.target(__ACTION__, row, framesJson, groupsJson) : row;
}
