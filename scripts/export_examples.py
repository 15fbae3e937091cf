"""Regenerate the example export figures in ``docs/figures/`` (referenced from docs/export.md).

Usage::

    python scripts/export_examples.py [--out docs/figures]

Recipe: the bundled sample (``sample_videos/flower_timelapse_cc0.mp4``, 960×540, 150 frames)
through the default pipeline with 48 sampled frames (processed at 504×280, two readiness
groups), then, as ``codec-lens export … --frames 60:150`` would write them:

* ``timeline.svg`` and ``timeline.png`` — the timeline over frames 60–149, paper style (PNG at
  1.5× its 700 px layout, to keep the file small; exports default to 3×);
* ``readiness_g1.svg`` and ``readiness_g1.png`` — the readiness trace of group 1;
* ``frame_source_crop.png`` — a 360×240 crop of the first candidate frame from 100 on with kept
  blocks, exported at ``--scale 2`` of the source
  (1920×1080) with kept blocks and the block grid, around a kept block: lines stay one colour and sharp;
* ``frame_upscaled_crop.png`` — the same crop of the processed frame with its overlays, scaled up
  to 1920×1080 by nearest neighbour (what a viewer screenshot enlarged for a paper looks like).

Static figures need the system Chromium (``/usr/bin/chromium``) that kaleido drives.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from PIL import Image  # noqa: E402

import backend.render as render  # noqa: E402
from backend.export import ExportConfig, ExportRun, write_export  # noqa: E402
from backend.pipeline import SelectionOptions, run  # noqa: E402
from views.export_figures import prepare_export_figures  # noqa: E402

SAMPLE = REPO / "sample_videos" / "flower_timelapse_cc0.mp4"
FRAMES = (60, 150)
LAYERS = ("kept", "grid")


def _crop_around(result, block: np.ndarray, out_hw: tuple[int, int]) -> tuple[slice, slice]:
    """A 240 × 360 window of the output frame with kept block ``block`` (row, col) at its centre."""
    f = result.geometry.patch * result.geometry.block_size
    (ph, pw), (h, w) = result.geometry.processed_hw, out_hw
    cy, cx = round((block[0] + 0.5) * f * h / ph), round((block[1] + 0.5) * f * w / pw)
    y0, x0 = min(max(cy - 120, 0), h - 240), min(max(cx - 180, 0), w - 360)
    return slice(y0, y0 + 240), slice(x0, x0 + 360)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "figures")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    result = run(SAMPLE, options=SelectionOptions(num_sampled_frames=48))
    export_run = ExportRun(
        run_id="sample", result=result, config={}, versions={}, video_path=str(SAMPLE), cache_key=None
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        figures = prepare_export_figures([("sample", result)], ["timeline", "readiness"], frames=FRAMES)
        figures = {name: fig for name, fig in figures.items() if name in ("timeline", "readiness_g1")}
        config = ExportConfig(
            out_path=tmp / "fig",
            format="none",
            frames=FRAMES,
            plot_formats=("svg", "png"),
            figure_png_scale=1.5,
        )
        write_export([export_run], config=config, figures=figures)
        for name in figures:
            for fmt in ("svg", "png"):
                (tmp / f"fig.{name}.{fmt}").replace(out / f"{name}.{fmt}")
        kept, anchors = render.kept_blocks_by_row(result), render.anchor_rows(result)
        fids = result.candidates.frame_indices
        frame = next(int(fids[r]) for r in sorted(kept) if fids[r] >= 100 and r not in anchors)
        config = ExportConfig(
            out_path=tmp / "f.png", format="png", frames=(frame, frame + 1), layers=LAYERS, size_factor=2.0
        )
        write_export([export_run], config=config)
        sharp = np.asarray(Image.open(tmp / "f.png").convert("RGB"))
    row = int(np.flatnonzero(result.candidates.frame_indices == frame)[0])
    crop = _crop_around(result, kept[row][0], sharp.shape[:2])
    Image.fromarray(sharp[crop]).save(out / "frame_source_crop.png", optimize=True)
    plan = render.plan_overlays(result, options=render.layer_options(LAYERS))
    small = render.draw_frame(result, row, plan)
    big = np.asarray(Image.fromarray(small).resize((1920, 1080), Image.Resampling.NEAREST))
    Image.fromarray(big[crop]).save(out / "frame_upscaled_crop.png", optimize=True)
    for path in sorted(out.iterdir()):
        print(f"{path.stat().st_size / 1000:7.1f} kB  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
