"""Sequence layouts: cut a full tensor into ranks' shards and put the shards back together.

``contiguous``: rank r holds chunk r of W equal chunks. ``zigzag``: the sequence is cut into 2W
equal chunks and rank r holds chunks r and 2W − 1 − r, in that order, so that under a causal mask
every rank has the same amount of work (PyTorch's context-parallel "head-tail" load balancer uses the
same order). The chunk ↔ (rank, slot) maps are ``schedule.chunk_of`` / ``schedule.owner_of``.

    shard(x, world=W, rank=r, layout=...)      x (…, N, …) → (…, N / W, …)   (along ``dim``)
    unshard([s_0, …, s_{W−1}], layout=...)     W shards (…, N / W, …) → (…, N, …)
    gather(local, group=..., layout=...)       all_gather of the shards, then unshard
"""
from __future__ import annotations

import torch

from .schedule import chunk_of, num_chunks, owner_of, slots

__all__ = ["shard", "unshard", "gather"]


def _dim(x: torch.Tensor, dim: int) -> int:
    if not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim={dim} is out of range for a tensor of shape {tuple(x.shape)}")
    return dim % x.dim()


def shard(x: torch.Tensor, *, world: int, rank: int, layout: str = "contiguous", dim: int = 2) -> torch.Tensor:
    """Rank ``rank``'s shard of the full tensor ``x`` (a new contiguous tensor; autograd flows)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world must be an int >= 1, got {world!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world:
        raise ValueError(f"rank must be an int in [0, {world}), got {rank!r}")
    dim = _dim(x, dim)
    c = num_chunks(world, layout)
    n = x.shape[dim]
    if n % c:
        raise ValueError(f"layout {layout!r} on {world} ranks cuts the sequence into {c} equal chunks: "
                         f"length {n} (dim {dim}) is not a multiple of {c}")
    pieces = x.chunk(c, dim=dim)                                   # C × (…, N / C, …)
    return torch.cat([pieces[chunk_of(rank, a, world, layout)] for a in range(slots(layout))], dim=dim)


def unshard(shards, *, layout: str = "contiguous", dim: int = 2) -> torch.Tensor:
    """The full tensor from ``shards[r]`` = rank r's shard, for every rank r (W = len(shards))."""
    shards = list(shards)
    if not shards or not all(isinstance(s, torch.Tensor) for s in shards):
        raise TypeError("shards must be a non-empty sequence of tensors, one per rank")
    world = len(shards)
    dim = _dim(shards[0], dim)
    if any(s.shape != shards[0].shape for s in shards):
        raise ValueError(f"every shard must have one shape; got {[tuple(s.shape) for s in shards]}")
    k = slots(layout)
    if shards[0].shape[dim] % k:
        raise ValueError(f"layout {layout!r} shards hold {k} equal chunks: shard length {shards[0].shape[dim]} "
                         f"(dim {dim}) is not a multiple of {k}")
    pieces = [s.chunk(k, dim=dim) for s in shards]                 # W × slots × (…, N / C, …)
    order = [owner_of(c, world, layout) for c in range(num_chunks(world, layout))]
    return torch.cat([pieces[r][a] for r, a in order], dim=dim)


def gather(local: torch.Tensor, *, group=None, layout: str = "contiguous", dim: int = 2) -> torch.Tensor:
    """Every rank's ``local`` shard gathered over ``group`` and unsharded (no autograd)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    bufs = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(bufs, local.contiguous(), group=group)
    return unshard(bufs, layout=layout, dim=dim)
