// A keyframe or group jump in the Compare tab (the action filled in by app.tabs.compare): on the
// reference pane's marks from the #cmp_nav box (window.__cmp.target), no server event.
(pos, navJson) => {
  const C = window.__cmp;
  return C && C.target ? C.target(__ACTION__, pos, navJson) : pos;
}
