"""Annotated clips: composing each output frame (panes, stamp, legend) and writing mp4/webm/gif/png."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from backend.export.config import ExportConfig, ExportRun
from backend.pipeline import RunResult
from backend.render import (
    LayerOptions,
    OverlayPlan,
    colormap_lut,
    draw_overlays,
    frame_facts,
    glyph_font,
    plan_overlays,
)
from native import gateway

_FOOTER_BG = (24, 24, 24)
_FOOTER_FG = (255, 255, 255)
_GAP_RGB = (64, 64, 64)
_GAP_PX = 4
_NOT_SAMPLED_RGB = (48, 48, 48)
_LEGEND_BAR_PX = 160

MP4_OPTIONS: dict[str, str] = {"preset": "fast"}
"""libx264 settings besides the CRF. ``fast`` rather than x264's ``medium``: annotated frames
change in many macroblocks every frame (heatmap, outlines), where medium's extra analysis
costs about 2x the encode time of the plain video and fast about 1.4x, at a similar size."""
WEBM_OPTIONS: dict[str, str] = {"b": "0", "deadline": "good", "cpu-used": "4", "row-mt": "1"}


def _even(n: int) -> int:
    return n + (n & 1)


def _stamp_text(result: RunResult, row: int) -> str:
    fid, pts, pict = frame_facts(result, row)
    when = "t=?" if pts is None else f"t={pts:.3f} s"
    return f"frame {fid}  {when}  {pict}"


@dataclass
class _Pane:
    """One run's column of the clip: its plan, label and where it sits in the output frame."""

    run: ExportRun
    plan: OverlayPlan
    label: str
    x0: int
    width: int


class ClipComposer:
    """Builds output frames: each run's annotated frame side by side, a stamp footer under each.

    The output buffer, the footer backgrounds and the legend bars are made once; per frame
    only the panes and the stamp text are written.
    """

    def __init__(self, runs: Sequence[ExportRun], options: LayerOptions, *, stamp: bool) -> None:
        first = runs[0].result
        self.height = first.geometry.processed_hw[0]
        self.stamp = stamp
        self.options = options
        font_px = max(12, min(24, self.height // 18))
        self.font = glyph_font(font_px)
        self.line_px = self.font.height_px + 8
        panes: list[_Pane] = []
        x = 0
        for k, run in enumerate(runs):
            h, w = run.result.geometry.processed_hw
            width = w if h == self.height else max(2, round(w * self.height / h))
            label = "" if len(runs) == 1 else f"{run.run_id} {run.result.info.codec_name}  "
            panes.append(_Pane(run, plan_overlays(run.result, options=options), label, x, width))
            x += width + (_GAP_PX if k < len(runs) - 1 else 0)
        self.panes = panes
        # The stamp takes one footer line; the heatmap's legend goes to its right when every
        # pane has room for both, else on a second line (fewer footer rows to encode).
        legend_fits = all(
            self._stamp_width(p) + 24 + self._legend_width(p, _LEGEND_BAR_PX) + 12 <= p.width for p in panes
        )
        self.legend_line = 0 if legend_fits else 1
        lines = 2 if options.heatmap and not legend_fits else 1
        self.footer = _even(self.line_px * lines) if stamp else 0
        self.size = (_even(self.height + self.footer), _even(x))
        self._template = np.zeros((*self.size, 3), np.uint8)
        self._template[:] = _GAP_RGB
        self._template[self.height :] = _FOOTER_BG
        for pane in panes:
            self._template[: self.height, pane.x0 : pane.x0 + pane.width] = 0
            if stamp and options.heatmap:
                self._draw_legend(pane)
        self._buffer = self._template.copy()

    def _stamp_width(self, pane: _Pane) -> int:
        """Width of the widest stamp this pane can show (six-digit frame, five-digit seconds)."""
        return self.font.width_px(pane.label + "frame 000000  t=00000.000 s  B")

    def _legend_width(self, pane: _Pane, bar_px: int) -> int:
        low, high = pane.plan.legend_labels
        return self.font.width_px(low) + 6 + bar_px + 6 + self.font.width_px(high)

    def _draw_legend(self, pane: _Pane) -> None:
        low, high = pane.plan.legend_labels
        y0 = self.height + self.line_px * self.legend_line
        y_text = y0 + (self.line_px - self.font.height_px) // 2
        if self.legend_line == 0:
            bar_w = _LEGEND_BAR_PX
            x_low = pane.x0 + pane.width - 6 - self._legend_width(pane, bar_w)
        else:
            x_low = pane.x0 + 6
            bar_w = min(256, pane.width - 12 - self._legend_width(pane, 0))
            if bar_w < 16:
                return  # too narrow for a colour bar
        x_bar = self.font.draw(self._template, low, x_low, y_text, _FOOTER_FG) + 6
        bar = colormap_lut(self.options.colormap)[np.linspace(0, 255, bar_w).astype(np.uint8)]
        self._template[y0 + 4 : y0 + self.line_px - 4, x_bar : x_bar + bar_w] = bar[None, :, :]
        self.font.draw(self._template, high, x_bar + bar_w + 6, y_text, _FOOTER_FG)

    def compose(self, rows: Sequence[int | None]) -> np.ndarray:
        """The output frame for one row per run (None: that run did not sample this frame).

        Returns
        -------
        (H_out, W_out, 3) uint8 RGB; the same buffer is reused by the next call.
        """
        out = self._buffer
        np.copyto(out, self._template)
        y_text = self.height + (self.line_px - self.font.height_px) // 2
        for pane, row in zip(self.panes, rows, strict=True):
            target = out[: self.height, pane.x0 : pane.x0 + pane.width]
            if row is None:
                target[:] = _NOT_SAMPLED_RGB
                self.font.draw(target, "not sampled", 8, 8, _FOOTER_FG)
                text = pane.label + "not sampled"
            else:
                image = draw_overlays(pane.run.result, row, pane.plan)
                if image.shape[:2] != target.shape[:2]:
                    # Nearest keeps outlines and grid lines one colour.
                    image = cv2.resize(image, (pane.width, self.height), interpolation=cv2.INTER_NEAREST)
                target[:] = image
                text = pane.label + _stamp_text(pane.run.result, row)
            if self.stamp:
                # Drawn into the pane's columns, so a long stamp is clipped at the pane's edge.
                self.font.draw(out[:, pane.x0 : pane.x0 + pane.width], text, 6, y_text, _FOOTER_FG)
        return out


class _VideoSink:
    def __init__(self, path: Path, fmt: str, size: tuple[int, int], fps: Fraction, crf: int) -> None:
        if fmt == "mp4":
            codec, options = "libx264", {"crf": str(crf), **MP4_OPTIONS}
        else:
            codec, options = "libvpx-vp9", {"crf": str(crf), **WEBM_OPTIONS}
        self._writer = gateway.VideoWriter(
            path, codec=codec, width=size[1], height=size[0], fps=fps, options=options
        )

    def write(self, frame: np.ndarray, name: str) -> None:
        self._writer.write(frame)

    def close(self) -> None:
        self._writer.close()


class _GifSink:
    def __init__(self, path: Path, fps: Fraction) -> None:
        self._path = path
        self._frames: list[Any] = []
        self._duration_ms = max(20, round(1000 / float(fps)))

    def write(self, frame: np.ndarray, name: str) -> None:
        from PIL import Image

        # An adaptive palette per frame keeps the overlay colours close to exact.
        self._frames.append(Image.fromarray(frame).quantize(256, method=Image.Quantize.FASTOCTREE))

    def close(self) -> None:
        first, rest = self._frames[0], self._frames[1:]
        first.save(self._path, save_all=True, append_images=rest, duration=self._duration_ms, loop=0)


class _PngSink:
    def __init__(self, path: Path, single: bool) -> None:
        self._path = path
        self._single = single
        self.written: list[Path] = []
        if not single:
            path.mkdir(parents=True, exist_ok=True)

    def write(self, frame: np.ndarray, name: str) -> None:
        from PIL import Image

        target = self._path if self._single else self._path / name
        self.written.append(target)  # before the save: a file cut short by a full disk is removed too
        Image.fromarray(frame).save(target, compress_level=3)

    def close(self) -> None:
        pass


def clip_fps(result: RunResult, fps: float | None) -> Fraction:
    """The clip frame rate: ``fps`` when given, else the video's (25 when unknown), as a fraction."""
    value = fps if fps is not None else (result.info.fps or 25.0)
    return Fraction(value).limit_denominator(1001)


def write_video(
    frames: Iterable[np.ndarray],
    path: Path,
    *,
    width: int,
    height: int,
    fps: float,
    options: dict[str, str] | None = None,
) -> Path:
    """Encode RGB frames as an H.264 mp4, written aside and renamed into place.

    Parameters
    ----------
    frames : (H, W, 3) uint8 RGB arrays, cropped to ``height`` × ``width`` (both even).
    path : the mp4 to write.

    Returns
    -------
    ``path``, complete; on failure nothing is left at ``path``.
    """
    if width % 2 or height % 2 or width < 2 or height < 2:
        raise ValueError(f"Invalid size ({width}x{height}). Supported values are even sides of at least 2")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}.partial.mp4")
    try:
        with gateway.VideoWriter(
            partial, codec="libx264", width=width, height=height, fps=fps, options=options or {}
        ) as writer:
            for image in frames:
                writer.write(image[:height, :width])
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def write_clip(
    runs: Sequence[ExportRun],
    aligned: list[list[int]] | list[Any],
    path: Path,
    config: ExportConfig,
    on_progress: Callable[[float], None] | None,
) -> tuple[tuple[int, int], list[Path]]:
    """Write the annotated clip of the aligned rows in ``config.format``.

    Parameters
    ----------
    runs : the run first, then the runs beside it.
    aligned : per run, the candidate row shown in each output frame (None: not sampled).
    path : the clip file, or the png folder (or single png file).
    config : the export's settings (format, layers, stamp, fps, crf).
    on_progress : called with the fraction of frames written.

    Returns
    -------
    ((height, width) of the output frames, files written). Video files are written under a
    temporary name and renamed when complete.
    """
    composer = ClipComposer(runs, config.layer_options(), stamp=config.stamp)
    primary = runs[0].result
    fps = clip_fps(primary, config.fps)
    n = len(aligned[0])
    fmt = config.format
    # Video files are written under a temporary name and renamed when complete.
    tmp = path.with_name(f".{path.stem}.partial{path.suffix}") if fmt in ("mp4", "webm", "gif") else path
    sink: _VideoSink | _GifSink | _PngSink
    if fmt in ("mp4", "webm"):
        sink = _VideoSink(tmp, fmt, composer.size, fps, config.crf)
    elif fmt == "gif":
        sink = _GifSink(tmp, fps)
    else:
        sink = _PngSink(path, single=path.suffix.lower() == ".png")
    fids = primary.candidates.frame_indices
    try:
        for k in range(n):
            frame_rows = [a[k] for a in aligned]
            frame = composer.compose(frame_rows)
            sink.write(frame, f"{k:05d}_frame{int(fids[aligned[0][k]]):06d}.png")
            if on_progress is not None and (k % 10 == 9 or k == n - 1):
                on_progress((k + 1) / n)
        sink.close()
    except BaseException:
        if tmp != path:
            tmp.unlink(missing_ok=True)
        elif isinstance(sink, _PngSink):
            for written in sink.written:
                written.unlink(missing_ok=True)
        raise
    if tmp != path:
        os.replace(tmp, path)
        return composer.size, [path]
    assert isinstance(sink, _PngSink)
    return composer.size, sink.written
