"""Decoder-library errors, re-exported so backend code can catch them without importing PyAV."""

from av import FFmpegError

__all__ = ["FFmpegError"]
