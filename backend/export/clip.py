"""Annotated clips: composing each output frame (panes, stamp, legend) and writing mp4/webm/gif/png."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np

import native
from backend.errors import DecodeError, InputError
from backend.export.config import ExportConfig, ExportRun
from backend.pipeline import RunResult
from backend.render import (
    LayerOptions,
    OverlayPlan,
    colormap_lut,
    crop_slices,
    draw_frame,
    frame_facts,
    glyph_font,
    plan_overlays,
    size_factor,
)

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
    fid, secs, pict = frame_facts(result, row)
    when = "t=?" if secs is None else f"t={secs:.3f} s"
    return f"frame {fid}  {when}  {pict}"


@dataclass
class _Pane:
    """One run's column of the clip: its plan, label and where it sits in the output frame."""

    run: ExportRun
    plan: OverlayPlan
    label: str
    x0: int
    width: int
    full_hw: tuple[int, int]
    """(height, width) the frame is drawn at, before the crop."""
    crop: tuple[slice, slice]
    """(rows, cols) of the drawn frame the pane shows (the whole frame without a zoom crop)."""


class ClipComposer:
    """Builds output frames: each run's annotated frame side by side, a stamp footer under each.

    Each frame is drawn by the viewer's renderer (:func:`backend.render.draw_frame`) at its pane's
    size, then cut to the zoom crop. The output buffer, the footer backgrounds and the legend
    bars are made once; per frame only the panes and the stamp text are written.
    """

    def __init__(
        self,
        runs: Sequence[ExportRun],
        options: LayerOptions,
        *,
        stamp: bool,
        pane_hw: Sequence[tuple[int, int]] | None = None,
        crop: Sequence[float] | None = None,
    ) -> None:
        first = runs[0].result
        # pane_hw: each run's frame size (clip_pane_sizes); by default the processed size, other
        # runs scaled to the first one's height. crop: the first run's processed pixels, the
        # same fractions of every pane.
        full = [
            tuple(pane_hw[k]) if pane_hw else _processed_pane_hw(run.result, first)
            for k, run in enumerate(runs)
        ]
        crops = [crop_slices(crop, first.geometry.processed_hw, hw) for hw in full]
        rows = crops[0][0]
        self.height = rows.stop - rows.start
        self.stamp = stamp
        self.options = options
        grow = size_factor(self.height)  # footer text and legend grow with frames taller than 720
        font_px = max(12, min(self.height // 18, round(24 * grow)))
        self.font = glyph_font(font_px)
        self.line_px = self.font.height_px + round(8 * grow)
        self.legend_bar_px = round(_LEGEND_BAR_PX * grow)
        panes: list[_Pane] = []
        x = 0
        for k, run in enumerate(runs):
            cols = crops[k][1]
            width = cols.stop - cols.start
            label = "" if len(runs) == 1 else f"{run.run_id} {run.result.info.codec_name}  "
            plan = plan_overlays(run.result, options=options)
            panes.append(_Pane(run, plan, label, x, width, full[k], crops[k]))  # type: ignore[arg-type]
            x += width + (_GAP_PX if k < len(runs) - 1 else 0)
        self.panes = panes
        # The stamp takes one footer line; the heatmap's legend goes to its right when every
        # pane has room for both, else on a second line (fewer footer rows to encode).
        legend_fits = all(
            self._stamp_width(p) + 24 + self._legend_width(p, self.legend_bar_px) + 12 <= p.width
            for p in panes
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
            bar_w = self.legend_bar_px
            x_low = pane.x0 + pane.width - 6 - self._legend_width(pane, bar_w)
        else:
            x_low = pane.x0 + 6
            bar_w = min(round(256 * size_factor(self.height)), pane.width - 12 - self._legend_width(pane, 0))
            if bar_w < 16:
                return  # too narrow for a colour bar
        x_bar = self.font.draw(self._template, low, x_low, y_text, _FOOTER_FG) + 6
        bar = colormap_lut(self.options.colormap)[np.linspace(0, 255, bar_w).astype(np.uint8)]
        self._template[y0 + 4 : y0 + self.line_px - 4, x_bar : x_bar + bar_w] = bar[None, :, :]
        self.font.draw(self._template, high, x_bar + bar_w + 6, y_text, _FOOTER_FG)

    def compose(
        self, rows: Sequence[int | None], pictures: Sequence[np.ndarray | None] | None = None
    ) -> np.ndarray:
        """The output frame for one row per run (None: that run did not sample this frame).

        ``pictures``: per run, the row's picture at its pane's size (``_pane_pictures``); the
        overlays are drawn over it at that size. Without one, the processed frame is drawn and
        scaled by nearest neighbour. Either is then cut to the pane's crop.

        Returns
        -------
        (H_out, W_out, 3) uint8 RGB; the same buffer is reused by the next call.
        """
        out = self._buffer
        np.copyto(out, self._template)
        y_text = self.height + (self.line_px - self.font.height_px) // 2
        pictures = pictures if pictures is not None else [None] * len(self.panes)
        for pane, row, picture in zip(self.panes, rows, pictures, strict=True):
            target = out[: self.height, pane.x0 : pane.x0 + pane.width]
            if row is None:
                target[:] = _NOT_SAMPLED_RGB
                self.font.draw(target, "not sampled", 8, 8, _FOOTER_FG)
                text = pane.label + "not sampled"
            else:
                image = draw_frame(pane.run.result, row, pane.plan, picture)
                if image.shape[:2] != pane.full_hw:
                    # Nearest keeps outlines and grid lines one colour.
                    h, w = pane.full_hw
                    image = cv2.resize(image, (w, h), interpolation=cv2.INTER_NEAREST)
                target[:] = image[pane.crop]
                text = pane.label + _stamp_text(pane.run.result, row)
            if self.stamp:
                # Drawn into the pane's columns, so a long stamp is clipped at the pane's edge.
                self.font.draw(out[:, pane.x0 : pane.x0 + pane.width], text, 6, y_text, _FOOTER_FG)
        return out


def _processed_pane_hw(result: RunResult, first: RunResult) -> tuple[int, int]:
    """A run's processed size, scaled to the first run's processed height."""
    height = first.geometry.processed_hw[0]
    h, w = result.geometry.processed_hw
    return height, (w if h == height else max(2, round(w * height / h)))


class _VideoSink:
    def __init__(self, path: Path, fmt: str, size: tuple[int, int], fps: Fraction, crf: int) -> None:
        if fmt == "mp4":
            codec, options = "libx264", {"crf": str(crf), **MP4_OPTIONS}
        else:
            codec, options = "libvpx-vp9", {"crf": str(crf), **WEBM_OPTIONS}
        self._writer = native.VideoWriter(
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


def clip_pane_sizes(runs: Sequence[ExportRun], config: ExportConfig) -> list[tuple[int, int]]:
    """(height, width) of each run's pane in the clip.

    The first run's pane is its video's own size (``config.size`` ``source``) or its processed
    size, times ``config.size_factor``, or ``config.width_px`` wide with the aspect ratio kept;
    the other runs' panes take its height and their own aspect ratio.
    """

    def base(result: RunResult) -> tuple[int, int]:
        return result.geometry.orig_hw if config.size == "source" else result.geometry.processed_hw

    bh, bw = base(runs[0].result)
    if config.width_px is not None:
        height, width = max(2, round(config.width_px * bh / bw)), int(config.width_px)
    else:
        height, width = max(2, round(bh * config.size_factor)), max(2, round(bw * config.size_factor))
    sizes = [(height, width)]
    for run in runs[1:]:
        h, w = base(run.result)
        sizes.append((height, max(2, round(w * height / h))))
    return sizes


def _fit(image: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """``image`` at (height, width): as it is, area-averaged down or bicubic up."""
    h, w = hw
    if image.shape[:2] == (h, w):
        return image
    smaller = h * w < image.shape[0] * image.shape[1]
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA if smaller else cv2.INTER_CUBIC)


def _pane_pictures(
    run: ExportRun, rows: Sequence[int | None], hw: tuple[int, int], size: str
) -> Iterator[np.ndarray | None]:
    """Each output frame's picture of one run at its pane size (None where the run has no row).

    ``processed``: the run's processed frames. ``source``: the run's video decoded again in one
    pass (PyAV, deblocked), each wanted frame kept until its last use, so any row order works.

    Raises
    ------
    InputError : the video is gone or no longer the size the run saw.
    DecodeError : the video ends before a wanted frame.
    """
    result = run.result
    if size != "source":
        for row in rows:
            yield None if row is None else _fit(result.decoded.pixels[row], hw)
        return
    video = Path(run.video_path)
    if not video.is_file():
        raise InputError(
            "no longer exists, so its frames cannot be decoded at the source size (--size processed "
            "exports the run's own frames)",
            path=video,
            stage="export",
        )
    fids = result.candidates.frame_indices
    order = [None if row is None else int(fids[row]) for row in rows]
    uses: dict[int, int] = {}
    for fid in order:
        if fid is not None:
            uses[fid] = uses.get(fid, 0) + 1
    decoded = native.iter_frames_rgb(video, sorted(uses))
    held: dict[int, np.ndarray] = {}
    for fid in order:
        if fid is None:
            yield None
            continue
        while fid not in held:
            got = next(decoded, None)
            if got is None:
                raise DecodeError(
                    f"the video ends before frame {fid} of run {run.run_id}", path=video, stage="export"
                )
            index, rgb = got
            if rgb.shape[:2] != tuple(result.geometry.orig_hw):
                raise InputError(
                    f"frames are now {rgb.shape[1]}x{rgb.shape[0]}, the run saw "
                    f"{result.geometry.orig_hw[1]}x{result.geometry.orig_hw[0]} (changed since the run)",
                    path=video,
                    stage="export",
                )
            held[index] = _fit(rgb, hw)
        picture = held[fid]
        uses[fid] -= 1
        if not uses[fid]:
            del held[fid]
        yield picture


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
        with native.VideoWriter(
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
    pane_hw = clip_pane_sizes(runs, config)
    composer = ClipComposer(
        runs, config.layer_options(), stamp=config.stamp, pane_hw=pane_hw, crop=config.crop
    )
    pictures = [
        _pane_pictures(run, rows, hw, config.size)
        for run, rows, hw in zip(runs, aligned, pane_hw, strict=True)
    ]
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
            frame = composer.compose(frame_rows, [next(p) for p in pictures])
            sink.write(frame, f"{k:05d}_frame{int(fids[aligned[0][k]]):06d}.png")
            if on_progress is not None and (k % 10 == 9 or k == n - 1):
                on_progress((k + 1) / n)
        sink.close()
    except BaseException:
        for source in pictures:
            source.close()  # ends a decode part-way (its container closes)
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
