"""A stored run's source frame at its own size (the viewer's native-resolution view)."""

from __future__ import annotations

import numpy as np

from backend.errors import DecodeError
from backend.records import VideoInfo
from native import gateway
from native.errors import FFmpegError


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
        return gateway.decode_frame_native(info.path, int(frame_index), pts_secs=pts, seek_secs=seek)
    except (FFmpegError, ValueError, OSError) as exc:
        raise DecodeError(
            f"cannot decode frame {frame_index} ({exc})", path=info.path, stage="native"
        ) from exc
