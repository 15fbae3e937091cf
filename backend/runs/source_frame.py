"""A stored run's source frame at its own size (the viewer's native-resolution view)."""

from __future__ import annotations

from typing import Any

import numpy as np

import native
from backend.codecs import canonical_codec
from backend.errors import DecodeError
from backend.records import VideoInfo
from native import FFmpegError


def source_frame(info: VideoInfo, frame_index: int) -> np.ndarray:
    """Decode frame ``frame_index`` of the probed video at its stored size.

    Seeks to the last keyframe at or before it when the packets map one to one onto frames
    (as :func:`backend.render.frame_facts` assumes), else decodes from the start.

    Returns
    -------
    (height, width, 3) uint8 RGB, ``info.height`` × ``info.width`` (storage size: an anamorphic
    video is not stretched to its display aspect).

    Raises
    ------
    DecodeError : the frame cannot be decoded (naming the file).
    """
    n = int(info.packet_pts_secs.size)
    if not 0 <= frame_index < max(n, info.total_frames):
        raise ValueError(f"Invalid frame_index ({frame_index}). Supported values are 0 to {max(n, 1) - 1}.")
    pts = seek = None
    if frame_index < n and n == info.total_frames:
        keys = np.flatnonzero(info.packet_is_keyframe[: frame_index + 1])
        if keys.size:
            pts = float(info.packet_pts_secs[frame_index])
            seek = float(info.packet_pts_secs[int(keys[-1])])
    try:
        return native.decode_frame_native(info.path, int(frame_index), pts_secs=pts, seek_secs=seek)
    except (FFmpegError, ValueError, OSError) as exc:
        raise DecodeError(
            f"cannot decode frame {frame_index} ({exc})", path=info.path, stage="native"
        ) from exc


def codec_side_data(info: VideoInfo, frame_indices: list[int]) -> dict[int, dict[str, Any]]:
    """Motion vectors and per-block QP of the wanted frames, in one decode pass.

    Only what the codec exports is read (``native.iter_side_data``: vectors for H.264 and MPEG-4,
    QP for H.264, VP9 and MPEG-2); others come back empty.

    Returns
    -------
    dict frame_index -> {``mvs``: (N, 8) int32 in ``side_data.MV_COLUMNS`` order (N = 0 without
    vectors), ``qp``: (rows, cols) int32 on the ``side_data.QP_UNIT`` grid or None, ``qp_unit``:
    that grid's cell side in source pixels}.

    Raises
    ------
    DecodeError : the file cannot be decoded (naming it).
    """
    codec = canonical_codec(info.codec_name)
    want_mv, want_qp = native.exports_motion_vectors(codec), native.exports_block_qp(codec)
    wanted = {int(f) for f in frame_indices}
    out: dict[int, dict[str, Any]] = {
        f: {"mvs": np.zeros((0, len(native.MV_COLUMNS)), np.int32), "qp": None, "qp_unit": 16} for f in wanted
    }
    if not wanted or not (want_mv or want_qp):
        return out
    try:
        for item in native.iter_side_data(
            info.path, luma=False, motion_vectors=want_mv, block_qp=want_qp, last_index=max(wanted)
        ):
            f = item["frame_index"]
            if f not in wanted:
                continue
            if want_mv:
                out[f]["mvs"] = item["mvs"]
            if want_qp and item.get("qp") is not None:
                out[f]["qp"] = item["qp"]
                out[f]["qp_unit"] = native.QP_UNIT.get(item["qp_type"] or "", 16)
    except native.SideDataError as exc:
        raise DecodeError(f"cannot read codec side data ({exc})", path=info.path, stage="native") from exc
    return out


def codec_layer_support(codec_name: str) -> dict[str, bool]:
    """Which codec layers the decoder of ``codec_name`` exports: ``mv`` (motion vectors), ``qp``
    (per-block QP)."""
    codec = canonical_codec(codec_name)
    return {"mv": native.exports_motion_vectors(codec), "qp": native.exports_block_qp(codec)}
