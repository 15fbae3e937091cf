"""Error hierarchy shared by every backend stage.

Each error is both a Codec Lens error and the builtin a caller would expect, so
``except ValueError`` keeps working for bad inputs while the CLI and app can tell
ours apart from programming errors.
"""

from __future__ import annotations

from pathlib import Path


class CodecLensError(Exception):
    """Base class; carries the offending path, the stage and the frame when known."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        stage: str | None = None,
        frame_index: int | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.stage = stage
        self.frame_index = frame_index
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The message as one line: ``path: [frame N: ]problem``."""
        parts = []
        if self.path is not None:
            parts.append(self.path)
        if self.frame_index is not None:
            parts.append(f"frame {self.frame_index}")
        parts.append(self.message)
        return ": ".join(parts).replace("\n", " ")


class InputError(CodecLensError, ValueError):
    """The input file cannot be used (missing, a directory, empty, not a video)."""


class ProbeError(InputError):
    """The container or its video stream cannot be read."""


class UnsupportedVideoError(InputError):
    """The video is readable but outside what the pipeline supports (codec, size)."""


class BitcostUnavailableError(CodecLensError, RuntimeError):
    """The patched bitcost reader is missing or returned no bitcost for the video."""


class DecodeError(CodecLensError, RuntimeError):
    """Decoding failed part-way through."""


class PipelineError(CodecLensError, RuntimeError):
    """A stage could not produce its record (e.g. no group had enough frames)."""


class OutputError(CodecLensError, OSError):
    """The output directory cannot be written."""


class StoreError(CodecLensError, ValueError):
    """The session database cannot be used (foreign file, newer schema, unknown run)."""
