"""Real clip pairs for the luma-bias store, view and app tests: a reference and a streaming-decoder output.

Recipe: the reference is ``render_frame`` content encoded with libx264 (crf 16, yuv420p). The test
output is that reference as the analyzer decodes it, plus a known offset per frame (and optionally a
gain) following the H3 latent-window geometry, rounded with a fixed dither and encoded losslessly
(libx264rgb, qp 0), so the measured bias equals the applied offset up to the dither noise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import native
from helpers.clips import encode_clip

# Written out from the spec, independently of backend.luma.geometry.
STEADY_OFFSETS = {2: 0.3, 3: 0.54, 4: 1.0, 5: -0.63, 6: 0.2}
HEAD_OFFSET = -1.5
"""Offset of every frame of latents 0..5 (frames 0..17)."""


def latent_of(t: int) -> int:
    c, r = divmod(t, 17)
    return 5 * c + (0 if r == 0 else 1 + (r - 1) // 4)


def slot_of(k: int) -> int:
    return k if k < 7 else k - 5 * ((k - 2) // 5)


def offset_of(t: int) -> float:
    k = latent_of(t)
    return HEAD_OFFSET if k < 6 else STEADY_OFFSETS[slot_of(k)]


def gain_of(t: int, gain: float) -> float:
    """Relative gain of frame t: ``gain·(slot − 4)`` in steady state, none in the first window."""
    k = latent_of(t)
    return gain * (slot_of(k) - 4) if k >= 6 else 0.0


def expected_bias(reference_mean_y: np.ndarray, gain: float) -> np.ndarray:
    """(n,) bias the synthetic decoder applies to frames 0..n−1 whose reference mean luma is given."""
    return np.asarray(
        [offset_of(t) + gain_of(t, gain) * float(y) for t, y in enumerate(reference_mean_y)], np.float64
    )


def make_pair(
    folder: Path,
    name: str,
    *,
    frames: int = 72,
    width: int = 256,
    height: int = 192,
    pattern: str = "moving",
    gain: float = 0.0,
    seed: int = 0,
) -> tuple[Path, Path]:
    """Write ``<name>.reference.mp4`` and ``<name>.test.mp4`` in ``folder``; return (reference, test).

    The test frame t is ``reference_t · (1 + gain·(slot − 4)) + offset_of(t)`` (slot of steady-state
    frames; no gain in the first window), dithered, clipped to [0, 255].
    """
    folder.mkdir(parents=True, exist_ok=True)
    reference = encode_clip(
        folder / f"{name}.reference.mp4",
        codec="h264",
        width=width,
        height=height,
        frames=frames,
        gop=frames,
        crf=16,
        pattern=pattern,  # type: ignore[arg-type]
    )
    test = folder / f"{name}.test.mp4"
    rng = np.random.default_rng(seed)
    with native.VideoWriter(
        test,
        codec="libx264rgb",
        width=width,
        height=height,
        fps=24,
        options={"qp": "0", "preset": "veryfast"},
        pix_fmt="rgb24",
    ) as writer:
        for t, ref in enumerate(native.iter_rgb(reference)):
            x = ref.astype(np.float64)
            y = x * (1.0 + gain_of(t, gain)) + offset_of(t)
            writer.write(np.clip(np.floor(y + rng.random(ref.shape)), 0, 255).astype(np.uint8))
    return reference, test
