"""Versions of the decoders behind native/: PyAV, its libavcodec, and cvp's patched FFmpeg."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import av

from native.bitcost_reader import bitcost_reader_available


def _dist_version(package: str) -> str | None:
    """An installed package's version from its ``*.dist-info`` folder name.

    Cheaper than importlib.metadata (~90 ms to import), which every CLI run would pay.
    """
    module = sys.modules.get(package)
    if module is None or module.__file__ is None:
        return None
    site = Path(module.__file__).resolve().parent.parent
    for info in site.glob(f"{package}-*.dist-info"):
        return info.name[len(package) + 1 : -len(".dist-info")]
    return None


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """Versions of the decoders behind ``native``."""
    cvp_version = _dist_version("codec_video_prep") if bitcost_reader_available() else None
    libav = av.library_versions.get("libavcodec")
    return {
        "pyav": av.__version__,
        "pyav_libavcodec": ".".join(map(str, libav)) if libav else None,
        "codec_video_prep": cvp_version,
        "cvp_ffmpeg": "5.1 (patched, bundled in codec-video-prep)" if bitcost_reader_available() else None,
    }
