"""The order torch's CPU ``argsort`` and ``topk`` give to equal values, reproduced for parity.

lmms-video-utils ranks blocks with ``torch.argsort(descending=True)`` (not stable) and keeps
them with ``torch.topk``; equal scores (static regions, letterbox bars, repeated frames: exact
zeros are common) are then ordered by how libstdc++'s ``std::sort`` and ``std::nth_element``
(introsort / introselect with median-of-three pivots; ``std::partial_sort`` when k·64 ≤ n) move
elements, which torch's CPU kernels call with a "greater than" comparator. When a row holds no
ties, any correct sort agrees, so these emulations run only where values repeat; they follow
the libstdc++ algorithms step by step (checked against torch 2.13 on random tie-heavy arrays in
the parity test).
"""

from __future__ import annotations

import numpy as np

_THRESHOLD = 16  # libstdc++'s _S_threshold


def _lg(n: int) -> int:
    return n.bit_length() - 1


class _Seq:
    """Values and their original indices, moved together (torch sorts key-value pairs)."""

    __slots__ = ("ix", "v")

    def __init__(self, values: list[float]) -> None:
        self.v = values
        self.ix = list(range(len(values)))

    def swap(self, i: int, j: int) -> None:
        v, ix = self.v, self.ix
        v[i], v[j] = v[j], v[i]
        ix[i], ix[j] = ix[j], ix[i]


def _median_to_first(s: _Seq, result: int, a: int, b: int, c: int) -> None:
    v = s.v
    if v[a] > v[b]:
        if v[b] > v[c]:
            s.swap(result, b)
        elif v[a] > v[c]:
            s.swap(result, c)
        else:
            s.swap(result, a)
    elif v[a] > v[c]:
        s.swap(result, a)
    elif v[b] > v[c]:
        s.swap(result, c)
    else:
        s.swap(result, b)


def _unguarded_partition(s: _Seq, first: int, last: int, pivot: int) -> int:
    v = s.v
    pv = v[pivot]
    while True:
        while v[first] > pv:
            first += 1
        last -= 1
        while pv > v[last]:
            last -= 1
        if not first < last:
            return first
        s.swap(first, last)
        first += 1


def _partition_pivot(s: _Seq, first: int, last: int) -> int:
    mid = first + (last - first) // 2
    _median_to_first(s, first, first + 1, mid, last - 1)
    return _unguarded_partition(s, first + 1, last, first)


def _unguarded_linear_insert(s: _Seq, last: int) -> None:
    v, ix = s.v, s.ix
    val, vi = v[last], ix[last]
    nxt = last - 1
    while val > v[nxt]:
        v[last], ix[last] = v[nxt], ix[nxt]
        last = nxt
        nxt -= 1
    v[last], ix[last] = val, vi


def _insertion_sort(s: _Seq, first: int, last: int) -> None:
    v, ix = s.v, s.ix
    for i in range(first + 1, last):
        if v[i] > v[first]:
            val, vi = v[i], ix[i]
            v[first + 1 : i + 1] = v[first:i]
            ix[first + 1 : i + 1] = ix[first:i]
            v[first], ix[first] = val, vi
        else:
            _unguarded_linear_insert(s, i)


def _adjust_heap(s: _Seq, first: int, hole: int, length: int, val: float, vi: int) -> None:
    v, ix = s.v, s.ix
    top = second = hole
    while second < (length - 1) // 2:
        second = 2 * (second + 1)
        if v[first + second] > v[first + second - 1]:
            second -= 1
        v[first + hole], ix[first + hole] = v[first + second], ix[first + second]
        hole = second
    if length % 2 == 0 and second == (length - 2) // 2:
        second = 2 * (second + 1)
        v[first + hole], ix[first + hole] = v[first + second - 1], ix[first + second - 1]
        hole = second - 1
    parent = (hole - 1) // 2
    while hole > top and v[first + parent] > val:
        v[first + hole], ix[first + hole] = v[first + parent], ix[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    v[first + hole], ix[first + hole] = val, vi


def _make_heap(s: _Seq, first: int, last: int) -> None:
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(s, first, parent, length, s.v[first + parent], s.ix[first + parent])
        if parent == 0:
            return
        parent -= 1


def _pop_heap(s: _Seq, first: int, last: int, result: int) -> None:
    val, vi = s.v[result], s.ix[result]
    s.v[result], s.ix[result] = s.v[first], s.ix[first]
    _adjust_heap(s, first, 0, last - first, val, vi)


def _heap_select(s: _Seq, first: int, middle: int, last: int) -> None:
    _make_heap(s, first, middle)
    for i in range(middle, last):
        if s.v[i] > s.v[first]:
            _pop_heap(s, first, middle, i)


def _sort_heap(s: _Seq, first: int, last: int) -> None:
    while last - first > 1:
        last -= 1
        _pop_heap(s, first, last, last)


def _introsort_loop(s: _Seq, first: int, last: int, depth: int) -> None:
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_select(s, first, last, last)
            _sort_heap(s, first, last)
            return
        depth -= 1
        cut = _partition_pivot(s, first, last)
        _introsort_loop(s, cut, last, depth)
        last = cut


def std_sort_desc(values: np.ndarray) -> np.ndarray:
    """Indices of ``values`` in the order libstdc++'s std::sort with ``a > b`` leaves them (torch argsort).

    Examples
    --------
    >>> std_sort_desc(np.zeros(20, np.float32)).tolist()[:12]
    [10, 19, 18, 17, 16, 15, 14, 13, 12, 11, 0, 9]
    """
    s = _Seq([float(x) for x in values])
    n = len(s.v)
    if n:
        _introsort_loop(s, 0, n, 2 * _lg(n))
        if n > _THRESHOLD:
            _insertion_sort(s, 0, _THRESHOLD)
            for i in range(_THRESHOLD, n):
                _unguarded_linear_insert(s, i)
        else:
            _insertion_sort(s, 0, n)
    return np.asarray(s.ix, dtype=np.int64)


def topk_members(values: np.ndarray, k: int) -> np.ndarray:
    """Indices torch's CPU ``topk(values, k)`` returns (as a set; order not significant).

    torch uses std::partial_sort when k·64 ≤ n, else std::nth_element, both with ``a > b``.
    """
    n = int(values.size)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.int64)
    s = _Seq([float(x) for x in values])
    if k * 64 <= n:
        _heap_select(s, 0, k, n)
        return np.asarray(s.ix[:k], np.int64)
    first, last, nth = 0, n, k - 1
    depth = 2 * _lg(n)
    while last - first > 3:
        if depth == 0:
            _heap_select(s, first, nth + 1, last)
            s.swap(first, nth)
            return np.asarray(s.ix[:k], np.int64)
        depth -= 1
        cut = _partition_pivot(s, first, last)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(s, first, last)
    return np.asarray(s.ix[:k], np.int64)


def argsort_desc(values: np.ndarray, *, torch_order: bool) -> np.ndarray:
    """Descending order of a row: torch's tie order (``torch_order``) or stable (ties by position)."""
    if torch_order and np.unique(values).size < values.size:
        return std_sort_desc(values)
    return np.argsort(-values, kind="stable")


def top_members(values: np.ndarray, k: int, *, torch_order: bool) -> np.ndarray:
    """The k largest values' indices: torch's choice among ties at the k-th value (``torch_order``), or
    the earliest positions; sorted ascending."""
    n = int(values.size)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.int64)
    if k == n:
        return np.arange(n)
    kth = np.partition(values, n - k)[n - k]
    above = np.flatnonzero(values > kth)
    tied = np.flatnonzero(values == kth)
    if above.size + tied.size == k:  # no tie straddles the cut: every method agrees
        return np.sort(np.concatenate([above, tied]))
    if torch_order:
        return np.sort(topk_members(values, k))
    return np.sort(np.concatenate([above, tied[: k - above.size]]))
