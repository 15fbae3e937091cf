// The page's script (served at lens/static/page.js, loaded once through the page head): the frame
// viewer's zoom, pan, hover and playback (state in window.__lens), the key handler and plot clicks.
(() => {
  const press = (id) => document.querySelector('#' + id)?.click();
  const visible = (sel) => {
    const el = document.querySelector(sel);
    return !!(el && el.offsetParent);
  };

  const L = (window.__lens = window.__lens || {z: 1, tx: 0, ty: 0, native: false, pin: null, hover: null,
    params: null, playing: null, b: null, flipped: false, seq: 0});
  const q = (o) => new URLSearchParams(o).toString();
  const stage = () => document.querySelector('#frame_stage');
  const img = () => document.querySelector('#frame_img');
  L.urlFor = (p, nat) => (nat ? 'lens/native?' : 'lens/frame?') + q(p);
  L.shown = () => (L.flipped && L.b ? Object.assign({}, L.b, {f: String(L.frameIndex())}) : L.params);
  L.frameIndex = () => {
    const fr = L.frames || [];
    return fr[Math.max(0, Math.min(fr.length - 1, L.row))] ?? L.row;
  };
  L.wantNative = () => {
    const im = img(), st = stage();
    if (!im || !st || !L.nativeAllowed() || L.z <= 1.01) return false;
    const pw = Number(im.dataset.pw || 0), nw = Number(im.dataset.nw || 0);
    // Native pixels once the processed frame would be magnified on screen, if the source has more.
    return nw > pw && L.z * st.clientWidth > pw;
  };
  L.nativeAllowed = () => {
    const c = document.querySelector('#native_toggle input');
    return !c || c.checked;
  };
  const runOf = (src) => new URLSearchParams((src || '').split('?')[1] || '').get('run');
  // A frame of another run than the one on screen (a live re-selection, the A/B flip to another
  // run) is shown together with its info line: it is loaded off screen and swapped in once its
  // info has arrived too, so the line never names the other run's kept blocks under the new frame
  // (issue 27: the old run's line stayed ~3 s). Steps within one run set the src at once.
  L.swapIn = (im, url) => {
    if (L.swap && L.swap.url === url) return;
    const swap = (L.swap = {url: url, loaded: false, info: undefined, key: L.infoKey(), after: []});
    // When the image and the info line arrived, and when both showed (bench/browser.py reads it).
    const times = (L.lastSwap = {url: url, start: performance.now()});
    const done = () => {
      if (L.swap !== swap || !swap.loaded || swap.info === undefined) return;
      L.swap = null;
      times.shown = performance.now();
      const el = document.querySelector('#frame_info_text');
      const target = img();
      if (target) target.setAttribute('src', url);
      if (el && swap.info !== null) el.innerHTML = swap.info;
      swap.after.forEach((f) => f());
    };
    swap.done = done;
    const pre = new Image();
    pre.onload = pre.onerror = () => { swap.loaded = true; times.loaded = performance.now(); done(); };
    pre.src = url;
    // Not held for ever: a lost info answer shows the frame alone.
    setTimeout(() => { if (swap.info === undefined) { swap.info = null; done(); } }, 5000);
  };
  L.render = () => {
    const im = img();
    if (!im || !L.params) return;
    const nat = L.wantNative();
    L.native = nat;
    const url = L.urlFor(L.shown(), nat);
    const src = im.getAttribute('src');
    if (src !== url) {
      if (src && runOf(src) !== runOf(url)) L.swapIn(im, url);
      else { L.swap = null; im.setAttribute('src', url); }
    } else if (L.swap) L.swap = null;
    const tag = document.querySelector('#frame_mode');
    const side = L.flipped ? 'B · ' : (L.b ? 'A · ' : '');
    const zoomed = L.z > 1.01 ? ' · ×' + L.z.toFixed(1) : '';
    if (tag) tag.textContent = side + (nat ? 'native pixels' : 'processed pixels') + zoomed;
  };
  L.fit = () => {
    const st = stage(), im = img();
    if (!st || !im) return;
    const dar = Number(im.dataset.dar || 0) || (im.naturalWidth / Math.max(1, im.naturalHeight)) || 16 / 9;
    const availW = st.parentElement.clientWidth;
    if (!availW) return;  // a hidden tab: fitted again when it shows (ResizeObserver below)
    const maxH = Math.max(200, window.innerHeight * Number(st.dataset.vh || 0.56));
    const w = Math.min(availW, maxH * dar);
    st.style.width = w + 'px';
    st.style.height = (w / dar) + 'px';
    L.applyZoom();
  };
  L.applyZoom = () => {
    const st = stage(), zoom = document.querySelector('#frame_zoom');
    if (!st || !zoom) return;
    const w = st.clientWidth, h = st.clientHeight;
    L.tx = Math.min(0, Math.max(w - w * L.z, L.tx));
    L.ty = Math.min(0, Math.max(h - h * L.z, L.ty));
    zoom.style.transform = `translate(${L.tx}px, ${L.ty}px) scale(${L.z})`;
    L.drawBoxes();
  };
  L.zoomAt = (factor, cx, cy) => {
    const st = stage();
    if (!st) return;
    const z = Math.max(1, Math.min(16, L.z * factor));
    const r = st.getBoundingClientRect();
    const x = (cx ?? r.left + r.width / 2) - r.left, y = (cy ?? r.top + r.height / 2) - r.top;
    L.tx = x - (x - L.tx) * z / L.z;
    L.ty = y - (y - L.ty) * z / L.z;
    L.z = z;
    L.applyZoom();
    L.render();
  };
  L.zoom_in = () => L.zoomAt(1.5);
  L.zoom_out = () => L.zoomAt(1 / 1.5);
  L.zoom_fit = () => { L.z = 1; L.tx = 0; L.ty = 0; L.applyZoom(); L.render(); };
  // Processed-frame pixel under a mouse event (null outside the image).
  L.pixelOf = (ev) => {
    const im = img();
    if (!im || !im.dataset.pw) return null;
    const r = im.getBoundingClientRect();
    const fx = (ev.clientX - r.left) / r.width, fy = (ev.clientY - r.top) / r.height;
    if (fx < 0 || fy < 0 || fx >= 1 || fy >= 1) return null;
    return [Math.floor(fx * Number(im.dataset.pw)), Math.floor(fy * Number(im.dataset.ph)), fx, fy];
  };
  L.box = (el, b) => {
    const im = img();
    if (!el) return;
    if (!b || !im || !im.dataset.pw) { el.style.display = 'none'; return; }
    const sx = 100 / Number(im.dataset.pw), sy = 100 / Number(im.dataset.ph);
    Object.assign(el.style, {display: 'block', left: b[0] * sx + '%', top: b[1] * sy + '%',
      width: b[2] * sx + '%', height: b[3] * sy + '%'});
  };
  L.drawBoxes = () => {
    L.box(document.querySelector('#block_pin'), L.pin && L.pin.row === L.row ? L.pin.box : null);
    L.box(document.querySelector('#block_hover'), L.hover && L.hover.row === L.row ? L.hover.box : null);
  };
  L.fetchBlock = (xy, then) => {
    if (!L.params) return;
    const seq = ++L.seq;
    const p = L.shown();
    const o = {run: p.run, row: p.row, x: xy[0], y: xy[1], h: p.h || 'block', n: L.native ? '1' : '0'};
    if (p.f !== undefined) o.f = p.f;
    fetch('lens/block?' + q(o)).then((r) => (r.ok ? r.json() : null)).then((d) => {
      if (d && (seq === L.seq || then === 'pin')) (then === 'pin' ? L.showPin : L.showHover)(d, xy);
    }).catch(() => {});
  };
  L.showHover = (d, xy) => {
    L.hover = {row: L.row, box: d.box, key: d.key};
    const el = document.querySelector('#block_info');
    if (el) el.innerHTML = d.html;
    const px = document.querySelector('#pixel_info');
    if (px) px.innerHTML = d.pixel;
    L.drawBoxes();
  };
  L.showPin = (d, xy) => {
    L.pin = {row: L.row, box: d.box, xy: xy, html: d.html};
    const el = document.querySelector('#block_info');
    if (el) el.innerHTML = d.html;
    const px = document.querySelector('#pixel_info');
    if (px) px.innerHTML = d.pixel;
    L.drawBoxes();
  };
  L.onLeave = () => {
    L.hover = null;
    const el = document.querySelector('#block_info');
    if (el && L.pin && L.pin.row === L.row) el.innerHTML = L.pin.html;
    L.drawBoxes();
  };
  // The info line of the frame shown: A's candidate, or, flipped to another run, B's candidate
  // nearest A's frame (the row the frame route picks for f=).
  L.infoParams = () => {
    const p = {run: L.params.run, row: L.params.row};
    if (L.flipped && L.b && L.b.run !== L.params.run) {
      const fr = L.bFrames || [], f = L.frameIndex();
      let best = 0;
      fr.forEach((x, i) => { if (Math.abs(x - f) < Math.abs(fr[best] - f)) best = i; });
      Object.assign(p, {run: L.b.run, row: String(best)});
    }
    return p;
  };
  L.infoKey = () => (L.params ? q(L.infoParams()) : '');
  L.fetchInfo = () => {
    const key = L.infoKey();
    const seq = (L.infoSeq = (L.infoSeq || 0) + 1);
    fetch('lens/info?' + key)
      .then((r) => (r.ok ? r.text() : null))
      .catch(() => null)
      .then((t) => {
        if (seq !== L.infoSeq) return;
        const swap = L.swap;
        // The frame this line belongs to is still loading: they show together (L.swapIn).
        if (swap && swap.key === key) {
          swap.info = t;
          if (L.lastSwap) L.lastSwap.info = performance.now();
          swap.done();
          return;
        }
        const el = document.querySelector('#frame_info_text');
        if (t !== null && el) el.innerHTML = t;
      });
  };
  // Navigation computed in the page, as views.inspector.navigation does on the server: keyframe and
  // group jumps and plot clicks set the slider at once, as a frame step does. Through a Gradio
  // backend event they took 230-730 ms against ~40 ms for a step (issue 27, item 11).
  const parsed = {};
  const parseOnce = (name, text) => {
    const hit = parsed[name];
    if (hit && hit[0] === text) return hit[1];
    let value = null;
    try { value = JSON.parse(text || 'null'); } catch (err) { value = null; }
    parsed[name] = [text, value];
    return value;
  };
  // The frames box: the candidates' frame indices and the rows showing each keyframe
  // (app.tabs.inspect.handlers; a bare list is the frame indices alone).
  L.candidates = (framesJson) => {
    const d = parseOnce('frames', framesJson);
    if (Array.isArray(d)) return {frames: d, keyframe_rows: []};
    return {frames: (d && d.frames) || [], keyframe_rows: (d && d.keyframe_rows) || []};
  };
  // The index of the value nearest x (the first of equals), as numpy's argmin of |values - x|.
  L.nearest = (values, x) => {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (Math.abs(values[i] - x) < Math.abs(values[best] - x)) best = i;
    return best;
  };
  // The mark after (or before) row, else row: navigation.navigate over sorted marks.
  L.nextMark = (marks, row, forward) => {
    if (forward) { for (const m of marks) if (m > row) return m; return row; }
    for (let i = marks.length - 1; i >= 0; i--) if (marks[i] < row) return marks[i];
    return row;
  };
  // The row a keyframe or group jump leads to from row (groupsJson: [start, end, group] each).
  L.target = (action, row, framesJson, groupsJson) => {
    const c = L.candidates(framesJson);
    const last = c.frames.length - 1;
    if (last < 0) return row;
    row = Math.max(0, Math.min(last, Math.round(row)));
    let marks;
    if (action.endsWith('_key')) marks = c.keyframe_rows;
    else marks = [...new Set((parseOnce('groups', groupsJson) || []).map((g) => g[0]))].sort((a, b) => a - b);
    return L.nextMark(marks, row, action.startsWith('next'));
  };
  // A slider moved from the page (as a drag would): its change shows the frame, no server event.
  L.setSlider = (sel, value) => {
    const input = document.querySelector(sel + ' input[type=range]');
    if (!input || Number(input.value) === value) return;
    input.value = String(value);
    input.dispatchEvent(new Event('input', {bubbles: true}));
  };
  // A click on the timeline or the signal plots: the candidate nearest the frame clicked, among
  // the candidates the frames box holds now (L.frames is only as new as the last slider change).
  L.jumpToFrame = (gd, f) => {
    const box = document.querySelector('#frames_json textarea, #frames_json input');
    const frames = L.candidates(box ? box.value : '').frames;
    if (frames.length) L.setSlider('#frame_slider', L.nearest(frames, f));
  };
  // The info line of `key` known without asking (a live re-selection's answer carries the new
  // run's): the frame waiting for it shows as soon as it has loaded. Fetched after the answer, the
  // line came only once Gradio had applied the answer (~100-150 ms of page work, plots included),
  // and held the frame back that long (bench/browser.py's info_wait).
  L.giveInfo = (key, text) => {
    const swap = L.swap;
    if (!swap || swap.key !== key || swap.info !== undefined) return false;
    swap.info = text;
    if (L.lastSwap) L.lastSwap.info = performance.now();
    swap.done();
    return true;
  };
  // Another run opened (a stored run, a new run, a live re-selection): the viewer shows it, as
  // side A. B stays set, so `b` compares the new run with it; left flipped, the frame and the info
  // line stayed B's under the new run's header (issue 27).
  L.openRun = (run) => {
    if (L.params && L.params.run !== run) L.flipped = false;
  };
  // Called by the slider's change (SRC_JS) and the controls: show row `row` with these layers.
  L.show = (row, run, layers, opacity, cmap, scale, heat, framesJson, codec) => {
    if (!run) return;
    L.openRun(run);
    L.frames = L.candidates(framesJson).frames;
    L.row = Math.round(row);
    L.params = {run: run, row: String(L.row), l: (layers || []).join(','), o: String(opacity), c: cmap,
      s: scale, h: heat || 'block', k: (codec || []).join(',')};
    L.render();
    L.fetchInfo();
    if (L.pin) {
      if (L.pin.row !== L.row) L.fetchBlock(L.pin.xy, 'pin');
    }
    L.drawBoxes();
    L.cursor(L.frameIndex());
  };
  // Plot cursors follow the viewer; debounced, since a relayout redraws the plot (~60 ms), and
  // skipped where the cursor already stands there (a plot the server just drew for this frame).
  L.cursor = (f) => {
    clearTimeout(L.cursorTimer);
    L.cursorTimer = setTimeout(() => {
      for (const sel of ['#timeline', '#signal_plots']) {
        const gd = document.querySelector(sel + ' .js-plotly-plot');
        if (!gd || !window.Plotly || !gd.layout || !gd.layout.shapes) continue;
        const upd = {};
        gd.layout.shapes.forEach((s, i) => {
          if (s.name === 'cursor' && (s.x0 !== f || s.x1 !== f)) {
            upd[`shapes[${i}].x0`] = f;
            upd[`shapes[${i}].x1`] = f;
          }
        });
        if (Object.keys(upd).length) window.Plotly.relayout(gd, upd);
      }
      L.markViewed(f);
    }, 250);
  };
  // The readiness trace marks the viewed candidate (shape "viewed", drawn by the server when the
  // group's plot is made): moved here while the viewer steps inside that group.
  L.markViewed = (f) => {
    const gd = document.querySelector('#readiness_plot .js-plotly-plot');
    const meta = gd && gd.layout && gd.layout.meta;
    if (!window.Plotly || !meta || !meta.group_rows || !gd.layout.shapes) return;
    const [start, end] = meta.group_rows;
    if (L.row < start || L.row >= end || meta.viewed_row === L.row) return;
    const i = gd.layout.shapes.findIndex((s) => s.name === 'viewed');
    if (i < 0) return;
    meta.viewed_row = L.row;
    window.Plotly.relayout(gd, {
      [`shapes[${i}].x0`]: L.row + 1, [`shapes[${i}].x1`]: L.row + 1,
      [`shapes[${i}].label.text`]: `viewed: candidate ${L.row} (frame ${f})`,
    });
  };
  // The zoomed view as a processed-pixel box [x, y, w, h] (null when not zoomed), for "Export this view".
  L.viewCrop = () => {
    const st = stage(), im = img();
    if (!st || !im || L.z <= 1.01 || !im.dataset.pw) return null;
    const pw = Number(im.dataset.pw), ph = Number(im.dataset.ph), w = st.clientWidth, h = st.clientHeight;
    return [-L.tx / (w * L.z) * pw, -L.ty / (h * L.z) * ph, pw / L.z, ph / L.z];
  };
  L.play = () => {
    const btn = document.querySelector('#play_btn');
    if (L.playing) {
      clearInterval(L.playing);
      L.playing = null;
      if (btn) btn.textContent = '▶ play';
      return;
    }
    const fps = Number(document.querySelector('#play_rate')?.value || 4);
    if (btn) btn.textContent = '❚❚ pause';
    // The slider itself is moved (as a drag would): its change shows the frame, no server event.
    L.playing = setInterval(() => {
      const input = document.querySelector('#frame_slider input[type=range]');
      if (!input || Number(input.value) >= Number(input.max)) { L.play(); return; }
      input.value = String(Number(input.value) + 1);
      input.dispatchEvent(new Event('input', {bubbles: true}));
    }, 1000 / fps);
  };
  L.setB = () => {
    if (!L.params) return;
    L.b = Object.assign({}, L.params);
    delete L.b.row;
    L.bFrames = (L.frames || []).slice();  // B's candidates, for its info line when flipped
    const tag = document.querySelector('#b_label');
    if (tag) tag.textContent = 'B = run ' + L.b.run + ' · ' + (L.b.l || 'no layers') + ' · heat ' + L.b.h;
    L.render();
  };
  L.flip = () => {
    if (!L.b) L.setB();
    L.flipped = !L.flipped;
    L.render();
    L.fetchInfo();
  };
  // The Compare tab's panes (app.tabs.compare): each pane's image from the app's own route
  // (lens/pane), the captions from lens/pane_info, set here when the slider or a view control
  // changes (compare_show.js). A Gradio event returning four images took 270-550 ms a step
  // (issue 27, item 12). navJson (the hidden #cmp_nav box): the open comparison, its panes, the
  // slider positions' frames and the reference pane's candidates, keyframe rows and group starts.
  const C = (window.__cmp = window.__cmp || {seq: 0});
  C.nav = (navJson) => parseOnce('cmp_nav', navJson) || {};
  C.query = (cid, pos, layers, opacity, cmap, scale, diff, ref) => ({cmp: cid, pos: String(Math.round(pos)),
    l: (layers || []).join(','), o: String(opacity), c: cmap, s: scale, d: diff ? '1' : '0', r: ref ?? ''});
  C.show = (cid, pos, layers, opacity, cmap, scale, diff, ref, navJson) => {
    const nav = C.nav(navJson);
    // Until the comparison's load has set its panes, they show what the load drew.
    if (!cid || nav.comparison !== cid) return;
    const p = C.query(cid, pos, layers, opacity, cmap, scale, diff, ref);
    for (let i = 0; i < nav.panes; i++) {
      const im = document.querySelector('#cmp_pane_' + i + ' img');
      const url = 'lens/pane?' + q(Object.assign({i: String(i)}, p));
      if (im && im.getAttribute('src') !== url) im.setAttribute('src', url);
    }
    const seq = ++C.seq;
    fetch('lens/pane_info?' + q(p))
      .then((r) => (r.ok ? r.json() : null))
      .catch(() => null)
      .then((d) => {
        if (seq !== C.seq || !d) return;
        d.captions.forEach((text, i) => {
          const el = document.querySelector('#cmp_info_' + i + ' .cmp-caption');
          if (el) el.textContent = text;
        });
      });
  };
  // A keyframe or group jump: on the reference pane's marks, as views.compare.navigate_position.
  C.target = (action, pos, navJson) => {
    const nav = C.nav(navJson), positions = nav.positions || [], ref = nav.reference_frames || [];
    const last = positions.length - 1;
    if (last < 0 || !ref.length) return pos;
    pos = Math.max(0, Math.min(last, Math.round(pos)));
    const row = L.nearest(ref, positions[pos]);
    const marks = (action.endsWith('_key') ? nav.keyframe_rows : nav.group_starts) || [];
    const next = L.nextMark(marks, row, action.startsWith('next'));
    return next === row ? pos : L.nearest(positions, ref[next]);
  };
  // A click on the metric plots: the position nearest the frame clicked (its meta holds them).
  C.jumpToFrame = (gd, f) => {
    const frames = (gd.layout && gd.layout.meta && gd.layout.meta.frames) || [];
    if (frames.length) L.setSlider('#cmp_slider', L.nearest(frames, f));
  };
  document.addEventListener('click', (ev) => {
    const id = ev.target && ev.target.id;
    const acts = {zoom_in_btn: 'zoom_in', zoom_out_btn: 'zoom_out', zoom_fit_btn: 'zoom_fit',
      play_btn: 'play', set_b_btn: 'setB', flip_btn: 'flip'};
    if (acts[id]) { ev.preventDefault(); L[acts[id]](); }
  });
  // Drag pans; a click without a drag pins the block under the cursor.
  let drag = null;
  document.addEventListener('mousedown', (ev) => {
    const st = stage();
    if (!st || !st.contains(ev.target) || ev.button !== 0) return;
    drag = {x: ev.clientX, y: ev.clientY, tx: L.tx, ty: L.ty, moved: false};
    ev.preventDefault();
  });
  document.addEventListener('mousemove', (ev) => {
    if (drag) {
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.hypot(dx, dy) > 3) drag.moved = true;
      if (drag.moved && L.z > 1) { L.tx = drag.tx + dx; L.ty = drag.ty + dy; L.applyZoom(); }
      return;
    }
    const st = stage();
    if (!st || !st.contains(ev.target)) return;
    const xy = L.pixelOf(ev);
    if (!xy) return;
    const now = performance.now();
    if (L.lastMove && now - L.lastMove < 40) return;
    L.lastMove = now;
    L.fetchBlock(xy, 'hover');
  });
  document.addEventListener('mouseup', (ev) => {
    const d = drag;
    drag = null;
    if (!d || d.moved) return;
    const xy = L.pixelOf(ev);
    if (xy) L.fetchBlock(xy, 'pin');
  });
  document.addEventListener('mouseout', (ev) => {
    const st = stage();
    if (st && st.contains(ev.target) && !st.contains(ev.relatedTarget)) L.onLeave();
  });
  document.addEventListener('wheel', (ev) => {
    const st = stage();
    if (!st || !st.contains(ev.target)) return;
    ev.preventDefault();
    L.zoomAt(ev.deltaY < 0 ? 1.25 : 0.8, ev.clientX, ev.clientY);
  }, {passive: false});
  document.addEventListener('load', (ev) => {
    if (ev.target && ev.target.id === 'frame_img') L.fit();
  }, true);
  window.addEventListener('resize', () => L.fit());
  const help = () => document.querySelector('#key_map');
  const toggleHelp = () => { const h = help(); if (h) h.classList.toggle('lens-open'); };

  const textTypes = ['', 'text', 'number', 'search', 'email', 'password', 'url', 'tel', 'date', 'time'];
  const typing = (el) => {
    if (!el) return false;
    if (el.isContentEditable || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') return true;
    return el.tagName === 'INPUT' && textTypes.includes((el.getAttribute('type') || '').toLowerCase());
  };
  document.addEventListener('keydown', (e) => {
    if (typing(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
    const map = {
      ArrowLeft: e.shiftKey ? 'prev_key' : 'prev',
      ArrowRight: e.shiftKey ? 'next_key' : 'next',
      ',': 'prev', '.': 'next', '[': 'prev_group', ']': 'next_group',
      Home: 'home', End: 'end', '?': 'help', ' ': 'play', 'b': 'flip', 'B': 'flip',
      '+': 'zoom_in', '=': 'zoom_in', '-': 'zoom_out', '0': 'zoom_fit',
    };
    const action = map[e.key];
    if (!action) return;
    // Space keeps its own meaning on a focused control (toggle a checkbox, press a button).
    if (action === 'play' && e.target && ['INPUT', 'BUTTON'].includes(e.target.tagName)) return;
    const compare = visible('#compare_panes') && !visible('#frame_img');
    const viewerActions = ['play', 'flip', 'zoom_in', 'zoom_out', 'zoom_fit'];
    if (action === 'help') {
      toggleHelp();
    } else if (viewerActions.includes(action)) {
      if (compare || !visible('#frame_img')) return;
      L[action]();
    } else {
      const id = (compare ? 'cmp_' : 'k_') + action;
      if (!document.querySelector('#' + id)) return;
      press(id);
    }
    e.preventDefault();
    e.stopPropagation();
  }, true);

  const plotX = (gd, ev) => {
    const xa = gd._fullLayout && gd._fullLayout.xaxis;
    if (!xa || !xa.p2c) return null;
    const r = gd.getBoundingClientRect();
    const px = ev.clientX - r.left - xa._offset;
    const size = gd._fullLayout._size;
    const py = ev.clientY - r.top;
    if (px < 0 || px > xa._length || py < size.t || py > gd._fullLayout.height - size.b) return null;
    const x = xa.p2c(px);
    return Number.isFinite(x) ? x : null;
  };
  const clickable = [['#timeline', (gd, f) => L.jumpToFrame(gd, f)], ['#signal_plots', (gd, f) => L.jumpToFrame(gd, f)],
                     ['#cmp_metrics', (gd, f) => C.jumpToFrame(gd, f)]];
  const attach = () => {
    const holder = document.querySelector('#frame');
    if (holder && !holder.__lensFit && window.ResizeObserver) {
      holder.__lensFit = true;
      new ResizeObserver(() => L.fit()).observe(holder);
    }
    for (const [sel, jumpTo] of clickable) {
      const gd = document.querySelector(sel + ' .js-plotly-plot');
      if (!gd || gd.__lensClick) continue;
      gd.__lensClick = true;
      let down = null;
      // The frame is read off the axis at the press: a second click within Plotly's double-click
      // delay resets the axes on release, before the click event (measured: 19 of 50 quick
      // clicks of bench/browser.py landed up to 6 frames off).
      gd.addEventListener('mousedown', (ev) => { down = [ev.clientX, ev.clientY, plotX(gd, ev)]; }, true);
      gd.addEventListener('click', (ev) => {
        // A drag (zoom box, pan) is not a click.
        if (!down || Math.hypot(ev.clientX - down[0], ev.clientY - down[1]) > 4) return;
        const x = down[2];
        down = null;
        if (x === null) return;
        jumpTo(gd, Math.round(x));
      }, true);
    }
  };
  new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
  attach();
})();
