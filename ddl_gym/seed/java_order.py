"""The order the seed's hash maps return their keys in.

The seed's Dally walks its slot and machine maps (commons-collections
``MultiKeyMap``) in their iteration order, not in cluster order; placing
like the seed means walking them the same way.
"""

from __future__ import annotations

from functools import lru_cache

_M32 = 0xFFFFFFFF


def _multikey_hash(keys: tuple[int, ...]) -> int:
    """``MultiKeyMap.hash`` of Integer keys (commons-collections4), as an
    unsigned 32-bit value."""
    h = 0
    for k in keys:
        h ^= k & _M32
    h = (h + (~(h << 9) & _M32)) & _M32
    h ^= h >> 14
    h = (h + (h << 4)) & _M32
    h ^= h >> 10
    return h


@lru_cache(maxsize=65536)
def java_multikey_order(keys: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    """The order a commons-collections ``MultiKeyMap`` (a ``HashedMap``:
    16 buckets, load factor 0.75, new entries at the head of their bucket,
    doubling that re-links buckets from the last one down) returns its keys
    in after ``keys`` were put in this order: buckets from the last one down,
    each bucket's chain from its head. The seed's Dally walks its slot and
    machine maps in this order (``consolidatedGPUAllocation``)."""
    cap = 16
    buckets: list[list[tuple[tuple[int, ...], int]]] = [[] for _ in range(cap)]
    size = 0
    for key in keys:
        h = _multikey_hash(key)
        buckets[h & (cap - 1)].insert(0, (key, h))
        size += 1
        if size >= int(cap * 0.75):
            cap *= 2
            new: list[list[tuple[tuple[int, ...], int]]] = [[] for _ in range(cap)]
            for chain in reversed(buckets):
                for entry in chain:
                    new[entry[1] & (cap - 1)].insert(0, entry)
            buckets = new
    return tuple(key for chain in reversed(buckets) for key, _ in chain)
