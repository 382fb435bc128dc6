"""Deterministic best-fit gang placement.

``find_placement(free, servers_per_rack, gpus, level)`` returns the tightest
placement of ``gpus`` GPUs whose span is at most ``level``, as a list of
``(server, gpus)``, or ``None``:

1. one server, if the job fits on one: the server with the fewest free GPUs
   that still fit it (best fit keeps big holes for big jobs);
2. otherwise (level rack or network) one rack: the rack needing the fewest
   servers, then the one left with the fewest free GPUs, then the lowest
   index; inside it the servers with most free GPUs, the last share going to
   the best-fitting server;
3. otherwise (level network) several racks: fewest racks first (racks with
   most free GPUs), each filled as in 2.

Ties always go to the lowest index, so the same state gives the same answer.
"""

from __future__ import annotations

from ddl_gym.perf import Level


def _fill(free: list[int], servers: range, gpus: int) -> list[tuple[int, int]]:
    """Take ``gpus`` GPUs from ``servers`` (which hold enough): largest free
    first, then the best-fitting server for the remainder."""
    order = sorted((s for s in servers if free[s] > 0), key=lambda s: (-free[s], s))
    placement: list[tuple[int, int]] = []
    need = gpus
    for i, s in enumerate(order):
        if free[s] >= need:
            # the remainder goes to the tightest server that holds it
            rest = [t for t in order[i:] if free[t] >= need]
            best = min(rest, key=lambda t: (free[t], t))
            placement.append((best, need))
            return placement
        placement.append((s, free[s]))
        need -= free[s]
    raise AssertionError("servers do not hold enough free GPUs")


def _servers_needed(free: list[int], servers: range, gpus: int) -> int:
    need = gpus
    for count, f in enumerate(sorted((free[s] for s in servers), reverse=True), start=1):
        need -= f
        if need <= 0:
            return count
    return 1 << 30


def find_placement(
    free: list[int],
    rack_free: list[int],
    servers_per_rack: int,
    gpus_per_server: int,
    gpus: int,
    level: Level,
) -> list[tuple[int, int]] | None:
    if gpus <= gpus_per_server:
        best = -1
        best_free = gpus_per_server + 1
        for s, f in enumerate(free):
            if gpus <= f < best_free:
                best, best_free = s, f
                if f == gpus:
                    break
        if best >= 0:
            return [(best, gpus)]
    if level == Level.MACHINE:
        return None
    S = servers_per_rack
    best_rack = None
    best_key = None
    for r, rf in enumerate(rack_free):
        if rf < gpus:
            continue
        servers = range(r * S, (r + 1) * S)
        key = (_servers_needed(free, servers, gpus), rf - gpus, r)
        if best_key is None or key < best_key:
            best_rack, best_key = r, key
    if best_rack is not None:
        return _fill(free, range(best_rack * S, (best_rack + 1) * S), gpus)
    if level == Level.RACK or sum(rack_free) < gpus:
        return None
    placement: list[tuple[int, int]] = []
    need = gpus
    for r in sorted(range(len(rack_free)), key=lambda r: (-rack_free[r], r)):
        if rack_free[r] == 0:
            break
        take = min(need, rack_free[r])
        placement.extend(_fill(free, range(r * S, (r + 1) * S), take))
        need -= take
        if need == 0:
            return placement
    raise AssertionError("racks do not hold enough free GPUs")
