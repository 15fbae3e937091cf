"""Benchmark: the inspector as the user sees it, the real app driven in headless Debian Chromium.

Usage::

    .venv/bin/python bench/browser.py VIDEO [--json OUT] [--steps 40] [--reselects 12] [--zooms 8]

Runs VIDEO once (clean profile, default options) into a throwaway session file, serves the app
on 127.0.0.1 and opens it at 1600×1000, then measures in the page (performance.now()):

* ``step``: a → key press until the next frame's image has loaded and decoded;
* ``reselect``: a change of a grouping/selection option (the Inspect tab's live re-selection,
  images_per_group) until the page shows the new run: the new frame image decoded, the summary,
  timeline, groups table and group stepper (its readiness plot) replaced; the per-part times
  say when each of these first showed (``img_src``: the frame image names the new run), when the
  page sent its request to the re-selection route, had the answer, and the server's own time (its
  Server-Timing), when the new frame's preloaded image and its info line were in
  (``swap_image_loaded``, ``swap_info_in``; ``info_wait``: how long the line held the frame back,
  page.js ``L.swapIn``), the ``/lens/info`` request's times when the page made one, the server's
  parts (``server_open`` the session file, ``server_select``, ``server_view``, ``server_outputs``,
  ``server_info``) and ``page_after_answer`` (from the answer until everything showed);
* ``zoom``: wheel zoom (4 notches) on a frame not seen zoomed before until the image shown is the
  source frame decoded at its own size (a decode in the worker pool);
* ``timeline_click_errors``: clicks at 50 points spread over the timeline's x range, at heights
  inside the group spans too; an error is a click after which the viewer does not show the
  candidate nearest the click within 10 s, or any component shows Gradio's error state.

* ``jump``: group jumps (``]``/``[``) and keyframe jumps (``Shift+→``/``Shift+←``) until the new frame
  decoded; ``far_click``: a timeline click between the first and last fifth of the clip until
  the frame decoded; ``compare_step``: ``→`` in the Compare tab (a four-codec comparison of the
  clip's first ``--compare-frames`` frames at its size) until all four panes decoded.

Prints p50/p95 in ms and writes them, every sample, the machine's load average and the CPU time
its hypervisor stole meanwhile (``cpu_steal_percent``: on a shared virtual machine the tails follow
it) to OUT as JSON. Targets (issues 15 and 27, quiet 2-core machine, 720p): step p95 ≤ 50 ms,
reselect p95 ≤ 300 ms, jump p95 ≤ 150 ms, far click p95 ≤ 250 ms, compare step p95 ≤ 120 ms,
zero timeline click errors.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip

# Resolves with the ms from the key or mouse press (a window capture listener) until every image
# named by the selector list has a new src, loaded and decoded (the inspector's frame, or the
# Compare tab's panes).
STEP_JS = """
([event, selectors]) => new Promise((resolve) => {
  const imgs = () => selectors.map((s) => document.querySelector(s));
  const before = imgs().map((i) => i && i.getAttribute('src'));
  let t0 = null;
  window.addEventListener(event, () => { t0 = performance.now(); }, {capture: true, once: true});
  const check = () => {
    const now = imgs();
    const ready = now.every(
      (i, k) => i && i.getAttribute('src') !== before[k] && i.complete && i.naturalWidth > 0);
    if (t0 !== null && ready) {
      const end = () => resolve(performance.now() - t0);
      Promise.all(now.map((i) => i.decode())).then(end, end);
    } else if (t0 !== null && performance.now() - t0 > 10000) { resolve(-1); } else { setTimeout(check, 1); }
  };
  check();
})
"""
FRAME = ["#frame_img"]
PANES = [f"#cmp_pane_{i} img" for i in range(4)]

# Resolves with {total, parts}: parts are the ms until each sign of the new run first showed
# (where the time goes: the server's answer, the plots drawn, the frame image fetched).
# The probe must not slow the page it times: it polls only cheap reads (a value, an attribute,
# a reference, textContent) and learns of the groups table's change from a MutationObserver.
# Serialising the table's innerHTML and reading innerText (a forced layout) every 2 ms, as it
# once did, took the page's main thread from the page itself.
RESELECT_JS = """
(value) => new Promise((resolve) => {
  const q = (s) => document.querySelector(s);
  const runBox = () => q('#run_id textarea, #run_id input');
  const run0 = runBox().value, summary0 = q('#summary').textContent;
  // A plot counts as redrawn once its div or its data changed (Gradio may reuse the div).
  const plot = (sel) => q(sel + ' .js-plotly-plot');
  const drawn = (sel) => { const gd = plot(sel); return [gd, gd && gd.data]; };
  const redrawn = (sel, [gd0, data0]) => {
    const gd = plot(sel);
    return !!gd && (gd !== gd0 || gd.data !== data0);
  };
  const plot0 = drawn('#timeline'), stepper0 = drawn('#readiness_plot');
  let tableChanged = false;
  const watch = new MutationObserver(() => { tableChanged = true; });
  watch.observe(q('#groups_table'), {subtree: true, childList: true, characterData: true});
  const frameRun = (img) =>
    new URLSearchParams((img.getAttribute('src') || '').split('?')[1] || '').get('run');
  const input = q('#live_images_per_group input');
  const parts = {};
  performance.clearResourceTimings();  // its buffer (250) fills with frame requests
  const t0 = performance.now();
  input.value = String(value);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  const check = () => {
    const run = runBox().value, img = q('#frame_img'), now = performance.now() - t0;
    const signs = {
      run: run !== run0,
      summary: q('#summary').textContent !== summary0,
      timeline: redrawn('#timeline', plot0),
      table: tableChanged,
      stepper: redrawn('#readiness_plot', stepper0),
      // The frame may show before Gradio has applied the rest (run_id among it): its own run.
      img_src: !!img && frameRun(img) !== run0 && (run === run0 || frameRun(img) === run),
    };
    signs.img_loaded = signs.img_src && img.complete;
    for (const [k, v] of Object.entries(signs)) if (v && parts[k] === undefined) parts[k] = now;
    if (Object.values(signs).every(Boolean)) {
      watch.disconnect();
      // The re-selection route's request, when the page used it: sent, answered (and the
      // server's own time, its Server-Timing).
      // The new run's frame is swapped in with its info line (page.js, L.swapIn): when the image
      // had loaded and when the info line had come, and so how long the line held the frame up.
      const swap = window.__lens && window.__lens.lastSwap;
      if (swap && swap.start >= t0) {
        if (swap.loaded !== undefined) parts.swap_image_loaded = swap.loaded - t0;
        if (swap.info !== undefined) parts.swap_info_in = swap.info - t0;
        if (swap.loaded !== undefined && swap.info !== undefined) {
          parts.info_wait = Math.max(0, swap.info - swap.loaded);
        }
      }
      const asked = performance.getEntriesByType('resource')
        .filter((e) => e.name.includes('lens/reselect') && e.startTime >= t0);
      if (asked.length) {
        const e = asked[asked.length - 1];
        parts.request_sent = e.startTime - t0;
        parts.answer_in = e.responseEnd - t0;
        for (const st of e.serverTiming || []) {
          // The whole, then its parts (app.tabs.inspect.live.reselect_route): server_open …
          if (st.name === 'reselect') parts.server = st.duration;
          else parts['server_' + st.name] = st.duration;
        }
      }
      // The new frame's info line (lens/info): asked, answered, and the server's own time.
      const lines = performance.getEntriesByType('resource')
        .filter((e) => e.name.includes('lens/info') && e.name.includes('run=' + run) && e.startTime >= t0);
      if (lines.length) {
        const e = lines[0];
        parts.info_sent = e.startTime - t0;
        parts.info_in = e.responseEnd - t0;
        const st = (e.serverTiming || []).find((x) => x.name === 'info');
        if (st) parts.info_server = st.duration;
      }
      const end = () => {
        const total = performance.now() - t0;
        // The page's own part: from the answer until everything shows.
        if (parts.answer_in !== undefined) parts.page_after_answer = total - parts.answer_in;
        resolve({total, parts});
      };
      img.decode().then(end, end);
    } else if (now > 15000) { watch.disconnect(); resolve({total: -1, parts}); }
    else setTimeout(check, 2);
  };
  check();
})
"""

ZOOM_JS = """
() => new Promise((resolve) => {
  const st = document.querySelector('#frame_stage'), r = st.getBoundingClientRect();
  const t0 = performance.now();
  for (let i = 0; i < 4; i++) {
    st.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2,
      clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));
  }
  const check = () => {
    const i = document.querySelector('#frame_img');
    if (i.src.includes('lens/native') && i.complete && i.naturalWidth > Number(i.dataset.pw)) {
      i.decode().then(() => resolve(performance.now() - t0), () => resolve(performance.now() - t0));
    } else if (performance.now() - t0 > 30000) resolve(-1);
    else setTimeout(check, 2);
  };
  check();
})
"""

FIRST_FRAME_JS = (
    "() => { const i = document.querySelector('#frame_img'); return i && i.complete && i.naturalWidth; }"
)
# The click lands on a whole CSS pixel: ``f`` is the frame under that pixel (what the app reads
# off the axis), so a click near a half frame expects the frame it really hit.
CLICK_POINT_JS = """
([f, fy]) => {
  const gd = document.querySelector('#timeline .js-plotly-plot');
  const xa = gd._fullLayout.xaxis, size = gd._fullLayout._size, r = gd.getBoundingClientRect();
  const x = Math.round(r.left + xa._offset + xa.c2p(f));
  return {x: x, y: Math.round(r.top + size.t + size.h * fy), f: xa.p2c(x - r.left - xa._offset)};
}
"""


def cpu_times() -> list[int]:
    """The machine's CPU time counters (/proc/stat's first line: user … steal), [] off Linux."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return []


def steal_percent(before: list[int], after: list[int]) -> float | None:
    """The share of CPU time the hypervisor gave to others between two :func:`cpu_times` (a
    virtual machine's noise: a run with much steal is slower than the code)."""
    if len(before) < 8 or len(after) < 8 or sum(after) <= sum(before):
        return None
    return round(100.0 * (after[7] - before[7]) / (sum(after) - sum(before)), 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def timed_press(page: Any, key: str, images: list[str] = FRAME) -> float:
    """ms from pressing ``key`` until ``images`` show their new frames (-1 after 10 s)."""
    page.evaluate(f"(a) => {{ window.__step = ({STEP_JS})(a); }}", ["keydown", images])  # armed
    page.keyboard.press(key)
    return float(page.evaluate("() => window.__step"))


def measure_keys(page: Any, keys: list[str], n: int, images: list[str] = FRAME) -> list[float]:
    """``n`` timed presses cycling through ``keys`` from the first frame (an unchanged image, at a
    run's end, is skipped: a key that leads nowhere has nothing to time)."""
    page.locator(
        "#cmp_slider input[type=range]" if images is PANES else "#frame_slider input[type=range]"
    ).fill("0")
    page.wait_for_timeout(500)
    page.locator("#cmp_info_0" if images is PANES else "#frame_info").click()  # focus the page
    out = []
    for i in range(n):
        ms = timed_press(page, keys[i % len(keys)], images)
        if ms >= 0:
            out.append(ms)
        page.wait_for_timeout(40)  # a user's key repeat is ≥ 30 ms apart
    return out


def measure_steps(page: Any, n: int) -> list[float]:
    return measure_keys(page, ["ArrowRight"], n)


def measure_far_clicks(page: Any, total: int, n: int) -> list[float]:
    """ms from a timeline click until the viewer shows the frame, clicks alternating between the
    first and the last fifth of the clip (never the frame shown)."""
    page.locator("#timeline").scroll_into_view_if_needed()
    out = []
    for i in range(n):
        f = (0.1 + 0.02 * i if i % 2 == 0 else 0.9 - 0.02 * i) * (total - 1)
        point = page.evaluate(CLICK_POINT_JS, [float(f), 0.5])
        page.evaluate(f"(a) => {{ window.__step = ({STEP_JS})(a); }}", ["mousedown", FRAME])
        page.mouse.click(point["x"], point["y"])
        ms = float(page.evaluate("() => window.__step"))
        if ms >= 0:
            out.append(ms)
        page.wait_for_timeout(200)
    page.locator("#frame").scroll_into_view_if_needed()
    return out


def measure_reselects(page: Any, n: int) -> tuple[list[float], list[dict[str, float]]]:
    page.locator("#live_box").get_by_text("Re-select live").click()
    page.wait_for_selector("#live_images_per_group input", state="visible")
    out, parts = [], []
    for i in range(n):
        got = page.evaluate(RESELECT_JS, 3 + i % 3)
        if got["total"] >= 0:
            out.append(float(got["total"]))
            parts.append(got["parts"])
        page.wait_for_timeout(300)
    return out, parts


def measure_zooms(page: Any, n: int, rows: int) -> list[float]:
    out = []
    for k in range(n):
        page.evaluate("() => window.__lens.zoom_fit()")
        page.locator("#frame_slider input[type=range]").fill(str((7 + k * 13) % rows))
        page.wait_for_timeout(400)
        ms = float(page.evaluate(ZOOM_JS))
        if ms >= 0:
            out.append(ms)
    page.evaluate("() => window.__lens.zoom_fit()")
    return out


def timeline_click_errors(page: Any, frames: np.ndarray, total: int, n: int = 50) -> list[dict[str, Any]]:
    """The failed clicks: the frame clicked, the candidate wanted, what the info line showed and
    why (``timeout``: the viewer did not get there in 10 s; ``error``: a component shows an error)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.locator("#timeline").scroll_into_view_if_needed()
    errors = []
    for i, f in enumerate(np.linspace(0, total - 1, n)):
        point = page.evaluate(CLICK_POINT_JS, [float(f), (0.15, 0.5, 0.85)[i % 3]])
        page.mouse.click(point["x"], point["y"])
        hit = int(np.floor(point["f"] + 0.5))  # Math.round, as the page rounds
        want = int(frames[np.argmin(np.abs(frames - hit))])
        kind = None
        try:
            page.wait_for_function(
                f"() => document.querySelector('#frame_info').innerText.includes(' · frame {want} · ')",
                timeout=10_000,
            )
        except PlaywrightTimeout:  # the click did not move the viewer to that frame
            kind = "timeout"
        if kind is None and page.evaluate(
            "() => document.querySelectorAll('.error, .validation-error').length"
        ):
            kind = "error"
        if kind is not None:
            shown = page.evaluate("() => document.querySelector('#frame_info').innerText")
            errors.append({"clicked": round(float(f), 1), "want": want, "kind": kind, "shown": shown[:80]})
    return errors


def stored_comparison(ws: Any, video: Path, frames: int) -> None:
    """Encode the first ``frames`` frames of ``video`` in the four codecs at its own size, select
    each and store the comparison (the Compare tab opens the newest one)."""
    from backend.compare import CompareConfig, compare
    from backend.pipeline import SelectionOptions

    out = ws.output_path("bench_compare")
    compare(
        video,
        ws.store,
        config=CompareConfig(max_frames=frames),
        options=SelectionOptions(profile="clean"),
        out_dir=out,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("video", type=Path)
    parser.add_argument("--json", type=Path, default=None, dest="json_out")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--reselects", type=int, default=12)
    parser.add_argument("--zooms", type=int, default=8)
    parser.add_argument("--jumps", type=int, default=24)
    parser.add_argument("--far-clicks", type=int, default=12)
    parser.add_argument(
        "--compare-frames", type=int, default=48, help="frames of the four-codec comparison (0: none)"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from app.main import build_app, stop_pool
    from app.server import serve
    from app.workspace import ensure_run, make_workspace

    load_before, cpu_before = os.getloadavg(), cpu_times()
    with tempfile.TemporaryDirectory() as tmp:
        video = args.video.resolve()
        ws = make_workspace(
            session_db=Path(tmp) / "s.duckdb", input_dirs=(video.parent,), output_dir=Path(tmp) / "w"
        )
        run_id = ensure_run(ws, video)
        if args.compare_frames:
            stored_comparison(ws, video, args.compare_frames)
        result = ws.result(run_id)
        demo = build_app(ws, run_id=run_id)
        port = free_port()
        serve(demo, ws, host="127.0.0.1", port=port, block=False)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/", timeout=120_000)
                page.wait_for_function(FIRST_FRAME_JS, timeout=120_000)
                page.wait_for_selector("#timeline .js-plotly-plot", timeout=120_000)
                rows = int(result.candidates.frame_indices.size)
                print("page open; steps", flush=True)
                steps = measure_steps(page, min(args.steps, rows - 1))
                print(f"steps p50 {pct(steps, 50):.1f} ms; clicks", flush=True)
                clicks = timeline_click_errors(
                    page, result.candidates.frame_indices.astype(np.int64), result.info.total_frames
                )
                page.locator("#frame").scroll_into_view_if_needed()
                print(f"{len(clicks)} click errors; zooms", flush=True)
                zooms = measure_zooms(page, args.zooms, rows)
                print(f"zooms p50 {pct(zooms, 50):.1f} ms; reselects", flush=True)
                reselects, parts = measure_reselects(page, args.reselects)
                print(f"reselects p50 {pct(reselects, 50):.1f} ms; jumps", flush=True)
                jumps = measure_keys(page, ["]", "]", "]", "[", "[", "["], args.jumps)
                key_jumps = measure_keys(
                    page,
                    ["Shift+ArrowRight", "Shift+ArrowRight", "Shift+ArrowLeft", "Shift+ArrowLeft"],
                    args.jumps,
                )
                far = measure_far_clicks(page, result.info.total_frames, args.far_clicks)
                compare_steps: list[float] = []
                if args.compare_frames:
                    print(f"far clicks p50 {pct(far, 50):.1f} ms; compare steps", flush=True)
                    page.get_by_role("tab", name="Compare codecs").click()
                    page.wait_for_selector(f"{PANES[-1]}", timeout=120_000)
                    compare_steps = measure_keys(
                        page, ["ArrowRight"], min(args.steps, args.compare_frames - 1), PANES
                    )
                browser.close()
        finally:
            demo.close(verbose=False)
            stop_pool(ws)
            ws.close()
    h, w = result.geometry.processed_hw
    part_names = list(dict.fromkeys(k for p in parts for k in p))
    report = {
        "video": str(args.video),
        "source": f"{result.info.width}x{result.info.height}",
        "processed": f"{w}x{h}",
        "candidates": int(result.candidates.frame_indices.size),
        "step_p50_ms": pct(steps, 50),
        "step_p95_ms": pct(steps, 95),
        "reselect_p50_ms": pct(reselects, 50),
        "reselect_p95_ms": pct(reselects, 95),
        "zoom_p50_ms": pct(zooms, 50),
        "zoom_p95_ms": pct(zooms, 95),
        # Jumps: group (] and [) and keyframe (Shift+→/←) jumps together; each kind beside.
        "jump_p50_ms": pct(jumps + key_jumps, 50),
        "jump_p95_ms": pct(jumps + key_jumps, 95),
        "group_jump_p95_ms": pct(jumps, 95),
        "keyframe_jump_p95_ms": pct(key_jumps, 95),
        "far_click_p50_ms": pct(far, 50),
        "far_click_p95_ms": pct(far, 95),
        "compare_step_p50_ms": pct(compare_steps, 50),
        "compare_step_p95_ms": pct(compare_steps, 95),
        "timeline_click_errors": len(clicks),
        "timeline_click_error_details": clicks,
        "reselect_parts_p50_ms": {k: pct([p[k] for p in parts if k in p], 50) for k in part_names},
        "reselect_parts_p95_ms": {k: pct([p[k] for p in parts if k in p], 95) for k in part_names},
        "samples": {
            "step": len(steps),
            "reselect": len(reselects),
            "zoom": len(zooms),
            "jump": len(jumps) + len(key_jumps),
            "far_click": len(far),
            "compare_step": len(compare_steps),
            "clicks": 50,
        },
        # Every measurement in order, to see where the slow ones fall.
        "step_ms": [round(v, 1) for v in steps],
        "reselect_ms": [round(v, 1) for v in reselects],
        "group_jump_ms": [round(v, 1) for v in jumps],
        "keyframe_jump_ms": [round(v, 1) for v in key_jumps],
        "far_click_ms": [round(v, 1) for v in far],
        "compare_step_ms": [round(v, 1) for v in compare_steps],
        "reselect_parts_ms": [{k: round(v, 1) for k, v in p.items()} for p in parts],
        "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
        "cpu_steal_percent": steal_percent(cpu_before, cpu_times()),
    }
    print(
        f"{args.video.name}: source {report['source']}, processed {report['processed']}, "
        f"{report['candidates']} candidates"
    )
    print(f"{'measure':22s} {'p50 ms':>8s} {'p95 ms':>8s} {'n':>4s}")
    for name in ("step", "reselect", "zoom", "jump", "far_click", "compare_step"):
        n = report["samples"][name]
        print(f"{name:22s} {report[name + '_p50_ms']:8.1f} {report[name + '_p95_ms']:8.1f} {n:4d}")
    print(f"{'timeline click errors':22s} {len(clicks):8d} of 50  {clicks}")
    for q in (50, 95):
        shown = ", ".join(f"{k} {v:.0f}" for k, v in report[f"reselect_parts_p{q}_ms"].items())
        print(f"reselect p{q} ms until: {shown}")
    print(f"load average before/after: {report['load_average']}; CPU steal {report['cpu_steal_percent']} %")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
