"""Codec names: the codec behind a decoder's name, shared by stages, render, compare and luma."""

from __future__ import annotations

# Decoder names (PyAV reports the decoder, e.g. libdav1d) → the codec they decode.
_CODEC_ALIASES = {
    "libdav1d": "av1",
    "libaom-av1": "av1",
    "av1_cuvid": "av1",
    "h265": "hevc",
    "libvpx-vp9": "vp9",
    "avc": "h264",
    "libopenh264": "h264",
}


def canonical_codec(codec_name: str) -> str:
    """The codec behind a probed decoder name (``libdav1d`` → ``av1``); others lower-cased.

    Examples
    --------
    >>> canonical_codec("libdav1d"), canonical_codec("H264")
    ('av1', 'h264')
    """
    name = codec_name.lower()
    return _CODEC_ALIASES.get(name, name)
