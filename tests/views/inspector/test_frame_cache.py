"""The viewer's JPEG cache: byte budget, LRU order, prefetch of neighbours."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
from PIL import Image

from views.inspector.frame_cache import JpegCache, encode_jpeg


def _frame(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (64, 96, 3), dtype=np.uint8)


def test_encode_jpeg_round_trips_size_and_colour() -> None:
    img = np.zeros((40, 60, 3), np.uint8)
    img[:, :, 0] = 200
    back = np.asarray(Image.open(io.BytesIO(encode_jpeg(img))))
    assert back.shape == (40, 60, 3)
    assert abs(int(back[20, 30, 0]) - 200) <= 3 and int(back[20, 30, 2]) <= 3


def test_get_renders_once_then_hits() -> None:
    calls = []
    cache = JpegCache(budget_bytes=1 << 20)

    def render() -> np.ndarray:
        calls.append(1)
        return _frame(0)

    a = cache.get("k", render)
    b = cache.get("k", render)
    assert a == b and len(calls) == 1
    assert (cache.hits, cache.misses) == (1, 1)


def test_budget_evicts_least_recently_used() -> None:
    one = len(encode_jpeg(_frame(0)))
    cache = JpegCache(budget_bytes=int(one * 2.5))
    for k in range(3):
        cache.get(k, lambda k=k: _frame(k))
    assert 0 not in cache and 1 in cache and 2 in cache
    assert cache.size_bytes <= cache.budget_bytes
    cache.get(1, lambda: _frame(1))  # touch 1: now 2 is the oldest
    cache.get(3, lambda: _frame(3))
    assert 2 not in cache and 1 in cache and 3 in cache


def test_prefetch_fills_neighbours_and_newer_requests_replace_older() -> None:
    cache = JpegCache(budget_bytes=1 << 24, idle_secs=0.0)
    cache.prefetch([(k, lambda k=k: _frame(k)) for k in range(5)])
    assert cache.wait_idle(10.0)
    assert all(k in cache for k in range(5))
    rendered = []
    cache.prefetch([(k, lambda k=k: rendered.append(k) or _frame(k)) for k in range(3, 8)])
    assert cache.wait_idle(10.0)
    assert sorted(rendered) == [5, 6, 7]  # 3 and 4 were cached already


def test_a_get_during_a_warm_render_waits_for_it_instead_of_rendering_again() -> None:
    cache = JpegCache(budget_bytes=1 << 24)
    started, release, calls = threading.Event(), threading.Event(), []

    def slow() -> np.ndarray:
        calls.append("warm")
        started.set()
        release.wait(10.0)
        return _frame(1)

    cache.warm("k", slow)
    assert started.wait(10.0)
    threading.Timer(0.2, release.set).start()
    data = cache.get("k", lambda: calls.append("get") or _frame(2))
    assert calls == ["warm"] and data == encode_jpeg(_frame(1))
    assert (cache.hits, cache.misses) == (1, 0)
    cache.warm("k", lambda: calls.append("again") or _frame(3))  # cached: nothing to do
    # A warm render that fails leaves the key to the get that wants it.
    cache.warm("bad", lambda: (_ for _ in ()).throw(OSError("gone")))
    assert cache.get("bad", lambda: _frame(4)) == encode_jpeg(_frame(4))
    assert calls == ["warm"]


@pytest.mark.parametrize(
    ("kwargs", "name"), [({"budget_bytes": 0}, "budget_bytes"), ({"quality": 0}, "quality")]
)
def test_bad_settings_are_refused(kwargs, name) -> None:
    with pytest.raises(ValueError, match=f"Invalid {name}"):
        JpegCache(**kwargs)
