"""One hop of the ring: send tensors to rank r + 1 and receive the same shapes from rank r − 1, as
one ``torch.distributed.batch_isend_irecv`` batch that runs while the caller computes.

    hop = Hop.start([k, v], group)   # posts the sends and the receives, returns at once
    ...                              # local attention on k, v (they must not be written meanwhile)
    k, v = hop.wait()                # the tensors rank r − 1 sent
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.distributed as dist

__all__ = ["Hop"]


class Hop(NamedTuple):
    """Pending requests of one hop and the buffers the receives fill."""

    requests: list
    received: tuple

    @staticmethod
    def start(tensors, group) -> "Hop":
        """Post isend(t → r + 1) and irecv(← r − 1) for every tensor t (group-local ranks)."""
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        sends = [t.contiguous() for t in tensors]
        bufs = tuple(torch.empty_like(t) for t in sends)
        ops = [dist.P2POp(dist.isend, t, group=group, group_peer=nxt) for t in sends]
        ops += [dist.P2POp(dist.irecv, b, group=group, group_peer=prv) for b in bufs]
        return Hop(dist.batch_isend_irecv(ops), bufs)

    def wait(self) -> tuple:
        for r in self.requests:
            r.wait()
        return self.received
