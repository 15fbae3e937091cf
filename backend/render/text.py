"""Text drawing: the anchor and bad-frame labels, and a cached bitmap font for stamps and legends."""

from __future__ import annotations

import functools
import threading

import cv2
import numpy as np


def draw_anchor_label(
    image: np.ndarray, x: int, y: int, rgb: tuple[int, int, int], *, scale: float = 1.0
) -> None:
    """Draw ``ANCHOR`` in black on a filled 62 × 16 px box (× ``scale``), top-left at (x, y), in place."""
    w, h = round(62 * scale), round(16 * scale)
    cv2.rectangle(image, (x, y), (x + w, y + h), rgb, thickness=-1)
    cv2.putText(
        image,
        "ANCHOR",
        (x + round(3 * scale), y + round(12 * scale)),
        cv2.FONT_HERSHEY_SIMPLEX,
        0.4 * scale,
        (0, 0, 0),
        max(1, round(scale)),
        cv2.LINE_AA,
    )


def draw_bad_label(image: np.ndarray, label: str, *, scale: float = 1.0) -> None:
    """Draw a bad-frame label in white near the bottom-left corner (text × ``scale``), in place."""
    h = image.shape[0]
    cv2.putText(
        image,
        label,
        (round(8 * scale), h - round(10 * scale)),
        cv2.FONT_HERSHEY_SIMPLEX,
        0.6 * scale,
        (255, 255, 255),
        max(1, round(2 * scale)),
        cv2.LINE_AA,
    )


class GlyphFont:
    """A tiny bitmap font: each character is rendered once with Pillow's bundled font, then reused.

    Pillow ships its default font inside the package (no download); drawing a label is a few
    NumPy blends of cached glyph masks.
    """

    def __init__(self, size_px: int) -> None:
        from PIL import ImageFont

        self.size_px = int(size_px)
        self._font = ImageFont.load_default(size=self.size_px)
        ascent, descent = self._font.getmetrics()
        self.height_px = int(ascent + descent)
        self._glyphs: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def glyph(self, char: str) -> np.ndarray:
        """(height_px, advance) float32 coverage in [0, 1] of one character."""
        with self._lock:
            hit = self._glyphs.get(char)
            if hit is not None:
                return hit
        from PIL import Image, ImageDraw

        advance = max(1, round(self._font.getlength(char)))
        canvas = Image.new("L", (advance, self.height_px), 0)
        ImageDraw.Draw(canvas).text((0, 0), char, font=self._font, fill=255)
        mask = np.asarray(canvas, np.float32) / 255.0
        mask.setflags(write=False)
        with self._lock:
            self._glyphs[char] = mask
        return mask

    def width_px(self, text: str) -> int:
        return sum(self.glyph(c).shape[1] for c in text)

    def draw(self, image: np.ndarray, text: str, x: int, y: int, rgb: tuple[int, int, int]) -> int:
        """Blend ``text`` into ``image`` (H, W, 3) uint8 with its top-left at (x, y), clipped.

        Returns
        -------
        The x just after the last character.
        """
        colour = np.asarray(rgb, np.float32)
        h_img, w_img = image.shape[:2]
        for char in text:
            mask = self.glyph(char)
            gh, gw = mask.shape
            x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + gw, w_img), min(y + gh, h_img)
            if x0 < x1 and y0 < y1 and char != " ":
                a = mask[y0 - y : y1 - y, x0 - x : x1 - x, None]
                region = image[y0:y1, x0:x1].astype(np.float32)
                image[y0:y1, x0:x1] = (region + a * (colour - region) + 0.5).astype(np.uint8)
            x += gw
        return x


@functools.lru_cache(maxsize=8)
def glyph_font(size_px: int) -> GlyphFont:
    """A shared :class:`GlyphFont` per pixel size."""
    return GlyphFont(size_px)
