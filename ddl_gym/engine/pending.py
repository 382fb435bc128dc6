"""The engine's waiting queue: jobs in ``(arrival, index)`` order.

A plain sorted list makes every start of a job at the head of the queue a
shift of the whole list (``del queue[0]``): at a million jobs, with tens of
thousands waiting, that is most of FIFO's cost per event. ``PendingQueue``
keeps the jobs in chunks of a few hundred (sorted within and across chunks,
with each chunk's last key indexed for bisection), so adding or removing a
job costs a bisection over the chunks plus a shift inside one chunk, and
reading the head, the length or the whole order in turn costs what a list
does. It is a read-only ``Sequence`` to the policies (``view.pending``).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain, islice
from typing import overload

from ddl_gym.engine.job import Job

Key = tuple[float, int]


class PendingQueue(Sequence[Job]):
    """Jobs sorted by ``(job.arrival, job.index)`` (unique keys).

    ``add`` and ``remove`` are the engine's; the rest is a ``Sequence``:
    ``len``, iteration in order, ``queue[i]`` (the head in O(1), any other
    position in O(chunks)), slices (as lists), ``reversed``.
    """

    __slots__ = ("_chunks", "_keys", "_maxes", "_len", "_load", "_demands", "_heads", "_members")

    def __init__(self, load: int = 256) -> None:
        if load < 2:
            raise ValueError(f"load must be >= 2, got {load}")
        self._load = load  # a chunk splits in two past 2 * load jobs
        self._chunks: list[list[Job]] = []
        self._keys: list[list[Key]] = []  # each chunk's keys, in step with it
        self._maxes: list[Key] = []  # each chunk's last key
        self._len = 0
        self._demands: dict[int, int] = {}  # GPU demand -> waiting jobs of it
        # per demand, a heap of (arrival, index, job) with entries of jobs
        # gone left in place until they reach the top (``first``)
        self._heads: dict[int, list[tuple[float, int, Job]]] = {}
        self._members: set[int] = set()  # indices of the queued jobs

    # -- the engine's --------------------------------------------------------
    def add(self, job: Job) -> None:
        """Insert ``job`` at its place (its key must not be in the queue)."""
        key = (job.arrival, job.index)
        maxes = self._maxes
        self._len += 1
        self._demands[job.gpus] = self._demands.get(job.gpus, 0) + 1
        self._members.add(job.index)
        heapq.heappush(self._heads.setdefault(job.gpus, []), (job.arrival, job.index, job))
        if not maxes:
            self._chunks.append([job])
            self._keys.append([key])
            maxes.append(key)
            return
        i = bisect_left(maxes, key)
        if i == len(maxes):  # past every key (an arrival, mostly): the last chunk's end
            i -= 1
            self._chunks[i].append(job)
            self._keys[i].append(key)
            maxes[i] = key
        else:
            keys = self._keys[i]
            pos = bisect_left(keys, key)
            keys.insert(pos, key)
            self._chunks[i].insert(pos, job)
        if len(self._keys[i]) > 2 * self._load:
            self._split(i)

    def _split(self, i: int) -> None:
        """Split chunk ``i`` in two halves (amortised: once per ``load`` adds)."""
        chunk, keys = self._chunks[i], self._keys[i]
        half = len(keys) // 2
        self._chunks[i : i + 1] = [chunk[:half], chunk[half:]]
        self._keys[i : i + 1] = [keys[:half], keys[half:]]
        self._maxes[i : i + 1] = [keys[half - 1], keys[-1]]

    def remove(self, job: Job) -> None:
        """Take ``job`` out (KeyError if it is not queued)."""
        key = (job.arrival, job.index)
        maxes = self._maxes
        i = bisect_left(maxes, key)
        keys = self._keys[i] if i < len(maxes) else None
        pos = bisect_left(keys, key) if keys is not None else 0
        if keys is None or pos == len(keys) or keys[pos] != key:
            raise KeyError(f"job {job.index} is not in the queue")
        del keys[pos]
        del self._chunks[i][pos]
        self._len -= 1
        n = self._demands[job.gpus] - 1
        if n == 0:
            del self._demands[job.gpus]
        else:
            self._demands[job.gpus] = n
        members = self._members
        members.discard(job.index)
        heap = self._heads[job.gpus]
        if len(heap) > 2 * n + 64:  # mostly gone entries: keep the live ones
            heap[:] = [e for e in heap if e[1] in members]
            heapq.heapify(heap)
        if not keys:  # (an empty chunk is dropped: amortised over its jobs)
            del self._chunks[i], self._keys[i], maxes[i]
        elif pos == len(keys):
            maxes[i] = keys[-1]

    def demands(self) -> Mapping[int, int]:
        """GPU demand -> how many waiting jobs ask for it (only demands some
        job asks for; the queue's own dict: read it, never write it)."""
        return self._demands

    def first(self, gpus: int) -> Job | None:
        """The first queued job (in the queue's order) asking for ``gpus``
        GPUs, or None."""
        heap = self._heads.get(gpus)
        if not heap:
            return None
        members = self._members
        while heap:
            entry = heap[0]
            if entry[1] in members:
                return entry[2]
            heapq.heappop(heap)
        return None

    # -- Sequence ------------------------------------------------------------
    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[Job]:
        return chain.from_iterable(self._chunks)

    def __reversed__(self) -> Iterator[Job]:
        for chunk in reversed(self._chunks):
            yield from reversed(chunk)

    @overload
    def __getitem__(self, index: int) -> Job: ...

    @overload
    def __getitem__(self, index: slice) -> list[Job]: ...

    def __getitem__(self, index: int | slice) -> Job | list[Job]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step == 1:
                return list(islice(self, start, max(start, stop)))
            return list(self)[index]
        n = self._len
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("pending queue index out of range")
        for chunk in self._chunks:
            if index < len(chunk):
                return chunk[index]
            index -= len(chunk)
        raise AssertionError("chunk lengths disagree with the count")

    def __contains__(self, job: object) -> bool:
        if not isinstance(job, Job):
            return False
        key = (job.arrival, job.index)
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return False
        keys = self._keys[i]
        pos = bisect_left(keys, key)
        return pos < len(keys) and self._chunks[i][pos] is job

    def __repr__(self) -> str:
        return f"PendingQueue({[job.index for job in self]})"
