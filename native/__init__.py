"""The one door to compiled decoders and encoders (cvp's patched FFmpeg reader, PyAV, the C kernels).

``backend/`` imports native code from here only (``from native import read_bitcost``); the
modules behind it wrap one concept each, as PyAV does (``bitcost_reader``: cvp's reader,
``split_read``: its reads across forked processes, ``probe``, ``pyav_decode``, ``writer``,
``encoding``, ``scheduling``, ``decoder_log``, ``side_data``, ``stream_decode``, …).

The names load on first use (PEP 562): importing this package loads neither PyAV, OpenCV nor
codec-video-prep, so a batch re-run that skips every video never loads a decoder; callers
that decode import the names they use inside their functions.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from native.bitcost_frame import BitcostFrame
    from native.bitcost_reader import (
        BITCOST_CODECS,
        READER_NATIVE_WIDTH_ALIGN,
        ReaderExport,
        bitcost_reader_available,
        iter_reader_rgb,
        read_bitcost,
        read_segment,
    )
    from native.compiled import COMPILED_KERNEL
    from native.decoder_log import DECODER_LOG_KEEP, decoder_log_count
    from native.encode import EncodeOutcome, EncodeTarget, TranscodeFacts, frames_rgb, source_size, transcode
    from native.encoding import SVT_AV1_MIN_SIDE, SVT_AV1_SMALL_FRAME, encode_frame, svt_av1_stalls
    from native.errors import FFmpegError
    from native.frame_stats import PixelStats, bgr_to_rgb_with_stats
    from native.library_versions import versions
    from native.luma_frames import Yuv420Frame, iter_luma_frames, measure_yuv420_pair
    from native.motion import (
        CELL_MODES,
        RESIDUAL_SCALE,
        MotionResidual,
        MotionScratch,
        MvresFusion,
        ResidualOutputs,
        block_unit,
        cell_sums,
        motion_kernel_available,
        motion_residual,
        residual_order_statistics,
    )
    from native.probe import ContainerProbe, probe_container
    from native.pyav_decode import (
        count_decoded_frames,
        decode_frame_native,
        decode_frames_rgb,
        decode_unfiltered_bgr,
        iter_frames_rgb,
        iter_rgb,
    )
    from native.scheduling import drop_realtime_scheduling
    from native.side_data import (
        BLOCK_QP_CODECS,
        MOTION_VECTOR_CODECS,
        MV_COLUMNS,
        QP_UNIT,
        RgbFrames,
        SideDataError,
        decode_luma_frames,
        exports_block_qp,
        exports_motion_vectors,
        frame_side_data,
        iter_side_data,
        paint_blocks,
        read_block_qp,
        read_motion_vectors,
        side_data_support,
    )
    from native.split_read import FrameHook, SegmentReads, can_fork
    from native.stream_decode import StreamFacts, attributed_sizes, iter_stream, stream_facts
    from native.torch_math import bilinear, bilinear_u8, block_sums, luma, motion_field, warp
    from native.writer import VideoWriter

# name -> module of this package that defines it
_HOMES = {
    "BitcostFrame": "bitcost_frame",
    "BITCOST_CODECS": "bitcost_reader",
    "READER_NATIVE_WIDTH_ALIGN": "bitcost_reader",
    "ReaderExport": "bitcost_reader",
    "bitcost_reader_available": "bitcost_reader",
    "iter_reader_rgb": "bitcost_reader",
    "read_bitcost": "bitcost_reader",
    "read_segment": "bitcost_reader",
    "COMPILED_KERNEL": "compiled",
    "DECODER_LOG_KEEP": "decoder_log",
    "decoder_log_count": "decoder_log",
    "EncodeOutcome": "encode",
    "EncodeTarget": "encode",
    "TranscodeFacts": "encode",
    "frames_rgb": "encode",
    "source_size": "encode",
    "transcode": "encode",
    "SVT_AV1_MIN_SIDE": "encoding",
    "SVT_AV1_SMALL_FRAME": "encoding",
    "encode_frame": "encoding",
    "svt_av1_stalls": "encoding",
    "FFmpegError": "errors",
    "PixelStats": "frame_stats",
    "bgr_to_rgb_with_stats": "frame_stats",
    "versions": "library_versions",
    "Yuv420Frame": "luma_frames",
    "iter_luma_frames": "luma_frames",
    "measure_yuv420_pair": "luma_frames",
    "CELL_MODES": "motion",
    "MotionResidual": "motion",
    "MotionScratch": "motion",
    "MvresFusion": "motion",
    "ResidualOutputs": "motion",
    "RESIDUAL_SCALE": "motion",
    "block_unit": "motion",
    "cell_sums": "motion",
    "motion_kernel_available": "motion",
    "motion_residual": "motion",
    "residual_order_statistics": "motion",
    "ContainerProbe": "probe",
    "probe_container": "probe",
    "count_decoded_frames": "pyav_decode",
    "decode_frame_native": "pyav_decode",
    "decode_frames_rgb": "pyav_decode",
    "decode_unfiltered_bgr": "pyav_decode",
    "iter_frames_rgb": "pyav_decode",
    "iter_rgb": "pyav_decode",
    "drop_realtime_scheduling": "scheduling",
    "BLOCK_QP_CODECS": "side_data",
    "MOTION_VECTOR_CODECS": "side_data",
    "MV_COLUMNS": "side_data",
    "QP_UNIT": "side_data",
    "RgbFrames": "side_data",
    "SideDataError": "side_data",
    "decode_luma_frames": "side_data",
    "exports_block_qp": "side_data",
    "exports_motion_vectors": "side_data",
    "frame_side_data": "side_data",
    "iter_side_data": "side_data",
    "paint_blocks": "side_data",
    "read_block_qp": "side_data",
    "read_motion_vectors": "side_data",
    "side_data_support": "side_data",
    "FrameHook": "split_read",
    "SegmentReads": "split_read",
    "can_fork": "split_read",
    "StreamFacts": "stream_decode",
    "attributed_sizes": "stream_decode",
    "iter_stream": "stream_decode",
    "stream_facts": "stream_decode",
    "bilinear": "torch_math",
    "bilinear_u8": "torch_math",
    "block_sums": "torch_math",
    "luma": "torch_math",
    "motion_field": "torch_math",
    "warp": "torch_math",
    "VideoWriter": "writer",
}

__all__ = [
    "BITCOST_CODECS",
    "BLOCK_QP_CODECS",
    "CELL_MODES",
    "COMPILED_KERNEL",
    "DECODER_LOG_KEEP",
    "MOTION_VECTOR_CODECS",
    "MV_COLUMNS",
    "QP_UNIT",
    "READER_NATIVE_WIDTH_ALIGN",
    "RESIDUAL_SCALE",
    "SVT_AV1_MIN_SIDE",
    "SVT_AV1_SMALL_FRAME",
    "BitcostFrame",
    "ContainerProbe",
    "EncodeOutcome",
    "EncodeTarget",
    "FFmpegError",
    "FrameHook",
    "MotionResidual",
    "MotionScratch",
    "MvresFusion",
    "PixelStats",
    "ReaderExport",
    "ResidualOutputs",
    "RgbFrames",
    "SegmentReads",
    "SideDataError",
    "StreamFacts",
    "TranscodeFacts",
    "VideoWriter",
    "Yuv420Frame",
    "attributed_sizes",
    "bgr_to_rgb_with_stats",
    "bilinear",
    "bilinear_u8",
    "bitcost_reader_available",
    "block_sums",
    "block_unit",
    "can_fork",
    "cell_sums",
    "count_decoded_frames",
    "decode_frame_native",
    "decode_frames_rgb",
    "decode_luma_frames",
    "decode_unfiltered_bgr",
    "decoder_log_count",
    "drop_realtime_scheduling",
    "encode_frame",
    "exports_block_qp",
    "exports_motion_vectors",
    "frame_side_data",
    "frames_rgb",
    "iter_frames_rgb",
    "iter_luma_frames",
    "iter_reader_rgb",
    "iter_rgb",
    "iter_side_data",
    "iter_stream",
    "luma",
    "measure_yuv420_pair",
    "motion_field",
    "motion_kernel_available",
    "motion_residual",
    "paint_blocks",
    "probe_container",
    "read_bitcost",
    "read_block_qp",
    "read_motion_vectors",
    "read_segment",
    "residual_order_statistics",
    "side_data_support",
    "source_size",
    "stream_facts",
    "svt_av1_stalls",
    "transcode",
    "versions",
    "warp",
]


def __getattr__(name: str) -> Any:
    # An AttributeError (not KeyError) for other names: ``from native import _kernels`` relies
    # on it to fall back to importing the submodule.
    try:
        home = _HOMES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
