"""The engine's scaling data structures against naive references: exact
small cases, then random operation sequences checked step by step."""

from __future__ import annotations

import random

import pytest

from ddl_gym.engine.job import Job
from ddl_gym.engine.pending import PendingQueue


def _job(index: int, arrival: float, gpus: int = 1) -> Job:
    return Job(index, f"j{index}", arrival, gpus, "resnet50", 10.0, 0.1)


def test_pending_queue_orders_by_arrival_then_index():
    q = PendingQueue(load=2)
    jobs = [_job(0, 5.0), _job(1, 1.0), _job(2, 5.0), _job(3, 0.0), _job(4, 1.0)]
    for job in jobs:
        q.add(job)
    assert [j.index for j in q] == [3, 1, 4, 0, 2]
    assert len(q) == 5 and bool(q)
    assert q[0].index == 3 and q[2].index == 4 and q[-1].index == 2
    assert [j.index for j in q[1:3]] == [1, 4]
    assert [j.index for j in q[::2]] == [3, 4, 2]
    assert [j.index for j in reversed(q)] == [2, 0, 4, 1, 3]
    assert jobs[0] in q
    assert dict(q.demands()) == {1: 5} and q.first(1) is jobs[3] and q.first(2) is None
    q.remove(jobs[4])
    assert [j.index for j in q] == [3, 1, 0, 2] and jobs[4] not in q
    with pytest.raises(KeyError, match="job 4 is not in the queue"):
        q.remove(jobs[4])
    with pytest.raises(IndexError):
        q[4]
    for job in list(q):
        q.remove(job)
    assert len(q) == 0 and not q and list(q) == [] and q[:3] == []


def test_pending_queue_matches_a_sorted_list_under_random_operations():
    rng = random.Random(7)
    jobs = [_job(i, float(rng.randrange(50)), rng.choice((1, 1, 2, 8))) for i in range(400)]
    q = PendingQueue(load=3)  # tiny chunks: many splits and emptied chunks
    ref: list[Job] = []
    for _ in range(3000):
        absent = [j for j in jobs if j not in ref]
        if ref and (not absent or rng.random() < 0.5):
            # mostly the head (FIFO starts), sometimes anywhere
            job = ref[0] if rng.random() < 0.5 else rng.choice(ref)
            q.remove(job)
            ref.remove(job)
        else:
            job = rng.choice(absent)
            q.add(job)
            ref.append(job)
            ref.sort(key=lambda j: (j.arrival, j.index))
        assert len(q) == len(ref)
        assert list(q) == ref
        if ref:
            i = rng.randrange(len(ref))
            assert q[i] is ref[i] and q[-1 - i] is ref[-1 - i]
            assert q[i : i + 5] == ref[i : i + 5]
        # per demand: how many wait, and the first in queue order
        counts: dict[int, int] = {}
        for job in ref:
            counts[job.gpus] = counts.get(job.gpus, 0) + 1
        assert dict(q.demands()) == counts
        for gpus in (1, 2, 8, 3):
            assert q.first(gpus) is next((j for j in ref if j.gpus == gpus), None)
        # chunks stay sorted, non-empty and within twice the load
        assert all(0 < len(c) <= 6 for c in q._chunks)
        assert q._maxes == [keys[-1] for keys in q._keys]


def test_free_index_matches_the_reference_packer_as_servers_change():
    """``FreeIndex.find`` (racks bucketed by free count) gives exactly
    ``find_placement``'s answer, on the engine's lists and on copies."""
    from ddl_gym.engine.packer import FreeIndex, find_placement
    from ddl_gym.perf import Level

    rng = random.Random(3)
    S, G, R = 4, 8, 9
    free = [G] * (R * S)
    rack_free = [S * G] * R
    index = FreeIndex(free, rack_free, S, G)
    for step in range(600):
        server = rng.randrange(R * S)
        new = rng.randrange(G + 1)
        index.move(server, free[server], new)
        rack_free[server // S] += new - free[server]
        free[server] = new
        target = index.copy() if step % 7 == 0 else index
        for gpus in (1, 2, 3, 8, 12, 16, 33, 70):
            for level in Level:
                want = find_placement(list(free), list(rack_free), S, G, gpus, level)
                assert target.find(gpus, level) == want, (step, gpus, level)
