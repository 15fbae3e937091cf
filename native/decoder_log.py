"""Capture of what cvp's patched FFmpeg prints on stderr during a read, kept as a few log lines."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

_LOG_LOCK = threading.Lock()  # one redirected fd 2 at a time (see capture_decoder_log)


def _fresh_lock() -> None:
    # A fork copies the lock as it is; if another thread held it at that moment, the
    # single-threaded child would wait on it for ever.
    global _LOG_LOCK
    _LOG_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock)

DECODER_LOG_KEEP = 20  # lines of a read's decoder log kept (the rest are counted)
_LOG_PREFIX = re.compile(r"^\[[^\]]* @ 0x[0-9a-f]+\]\s*")  # "[h264 @ 0x55d0…] "


@contextmanager
def capture_decoder_log(into: list[str] | None) -> Iterator[None]:
    """Collect what cvp's FFmpeg prints on stderr (fd 2) during a read.

    Its log level cannot be set, and a damaged file makes it print a line per broken
    macroblock; the caller reports them as one warning or error instead. The first
    ``DECODER_LOG_KEEP`` lines (prefix "[h264 @ 0x…]" removed) go to ``into``, then
    one "… n more" line; None drops them.
    """
    with _LOG_LOCK, tempfile.TemporaryFile() as captured:
        # fd 2 is process-wide: two threads redirecting it at once could leave it pointing
        # at a deleted file. The reader holds the GIL while it runs, so nothing is lost.
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if into is not None:
                captured.seek(0)
                text = captured.read().decode("utf-8", errors="replace")
                lines = [_LOG_PREFIX.sub("", ln).strip() for ln in text.splitlines() if ln.strip()]
                into.extend(lines[:DECODER_LOG_KEEP])
                if len(lines) > DECODER_LOG_KEEP:
                    into.append(f"… {len(lines) - DECODER_LOG_KEEP} more lines")


_MORE_LINES = re.compile(r"^… (\d+) more lines$")


def decoder_log_count(lines: Sequence[str]) -> int:
    """How many lines the decoder printed, from what :func:`capture_decoder_log` kept of its reads."""
    return sum(int(m.group(1)) if (m := _MORE_LINES.match(line)) else 1 for line in lines)
