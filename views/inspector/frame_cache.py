"""JPEG frame cache for the viewer: rendered frames kept under a byte budget, neighbours prefetched."""

from __future__ import annotations

import io
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

import numpy as np
from PIL import Image

from backend.errors import CodecLensError

Render = Callable[[], np.ndarray]


def encode_jpeg(image: np.ndarray, *, quality: int = 85) -> bytes:
    """JPEG bytes of an (H, W, 3) uint8 RGB image."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


class JpegCache:
    """LRU of encoded frames bounded by ``budget_bytes``, with a one-thread prefetcher.

    The viewer asks for the frame under the playhead with :meth:`get`, then hands the
    frames around it to :meth:`prefetch`. A newer prefetch request replaces the pending
    one, so scrubbing never builds a backlog of frames nobody will look at.
    """

    def __init__(self, *, budget_bytes: int = 128 << 20, quality: int = 85, idle_secs: float = 0.03) -> None:
        if budget_bytes < 1:
            raise ValueError(f"Invalid budget_bytes ({budget_bytes}). Supported values are at least 1")
        if not 1 <= quality <= 100:
            raise ValueError(f"Invalid quality ({quality}). Supported values are between 1 and 100")
        if idle_secs < 0:
            raise ValueError(f"Invalid idle_secs ({idle_secs}). Supported values are at least 0")
        self.budget_bytes = budget_bytes
        # The prefetcher waits this long after the last request, so a quick follow-up
        # request (a jump while scrubbing) never shares the CPU with guesses.
        self.idle_secs = idle_secs
        self._last_get = 0.0
        self.quality = quality
        self._items: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._pending: list[tuple[Hashable, Render]] = []
        self._wake = threading.Condition(self._lock)
        self._worker: threading.Thread | None = None
        self._busy = False
        # Keys being rendered by warm(): a get() of one waits for it instead of rendering twice.
        self._inflight: dict[Hashable, threading.Event] = {}
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def _put(self, key: Hashable, data: bytes) -> None:
        if len(data) > self.budget_bytes:
            return
        if key in self._items:
            self._bytes -= len(self._items.pop(key))
        self._items[key] = data
        self._bytes += len(data)
        while self._bytes > self.budget_bytes:
            _, old = self._items.popitem(last=False)
            self._bytes -= len(old)

    def get(self, key: Hashable, render: Render) -> bytes:
        """The cached JPEG for ``key``, rendering and storing it on a miss (or waiting for the
        render :meth:`warm` started)."""
        with self._lock:
            self._last_get = time.monotonic()
            inflight = self._inflight.get(key)
        if inflight is not None:
            inflight.wait(timeout=30.0)
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return data
            self.misses += 1
        data = encode_jpeg(render(), quality=self.quality)
        with self._lock:
            self._put(key, data)
        return data

    def warm(self, key: Hashable, render: Render) -> None:
        """Render ``key`` now on a thread of its own: the page is about to ask for it (a view
        being drawn names its URL), and a :meth:`get` meanwhile waits for this render."""
        with self._lock:
            if key in self._items or key in self._inflight:
                return
            done = self._inflight[key] = threading.Event()

        def run() -> None:
            try:
                data = encode_jpeg(render(), quality=self.quality)
                with self._lock:
                    self._put(key, data)
            except (CodecLensError, ValueError, OSError):
                pass  # the get that wants this frame renders it again and reports the error
            finally:
                with self._lock:
                    self._inflight.pop(key, None)
                done.set()

        threading.Thread(target=run, name="jpeg-warm", daemon=True).start()

    def prefetch(self, items: Sequence[tuple[Hashable, Render]]) -> None:
        """Render these in the background (nearest first), dropping any older request."""
        with self._lock:
            self._pending = [(k, r) for k, r in items if k not in self._items]
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="jpeg-prefetch", daemon=True)
                self._worker.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                quiet_for = time.monotonic() - self._last_get
            if quiet_for < self.idle_secs:
                time.sleep(self.idle_secs - quiet_for)
                continue
            with self._lock:
                if not self._pending and not self._wake.wait(timeout=30.0):
                    self._worker = None
                    return
                if not self._pending:
                    continue
                key, render = self._pending.pop(0)
                if key in self._items:
                    continue
                self._busy = True
            try:
                data = encode_jpeg(render(), quality=self.quality)
            finally:
                with self._lock:
                    self._busy = False
            with self._lock:
                self._put(key, data)

    def wait_idle(self, timeout_secs: float = 10.0) -> bool:
        """Block until the prefetcher has nothing pending or rendering (tests, benchmarks)."""
        stop = threading.Event()
        for _ in range(max(1, int(timeout_secs / 0.01))):
            with self._lock:
                if not self._pending and not self._busy:
                    return True
            stop.wait(0.01)
        return False
