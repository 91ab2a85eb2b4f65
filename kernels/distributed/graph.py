"""Keep a block's autograd graph from the forward without keeping the block's tensors.

The ring's backward needs the backward of every block call of its forward, run with the *merged*
(out, lse) in place of the block's own and with the key/value shard that is present at that backward
step (the shards travel again). ``record`` runs ``attention(..., return_lse=True)`` under
``torch.autograd.graph.saved_tensors_hooks`` that put named slots in place of what the call saves for
its backward (its k, v, out and lse; q is this rank's own and stays), and then drops the storage of
the block's k, v, out and lse (zero-stride shells of the same shape). ``grads`` fills the slots and
runs attention's own backward through ``torch.autograd.grad``. With out = O and lse = L (the merged
results) and the gradients dO, dL, that backward computes p = e^{s − L}, δ = rowsum(dO ∘ O) − dL and
from them exactly the dense gradient's share of the block; nothing is recomputed.

``record`` checks that the call saved its k, v, out and lse (each found by identity): if attention()
ever saves something else for them, it raises instead of running a backward on the wrong tensors.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .. import attention

__all__ = ["BlockGraph", "record", "grads"]

_NAMES = ("k", "v", "out", "lse")


class _Slots:
    """Pack/unpack hooks: a saved tensor is kept, or replaced by a name filled in at backward time."""

    def __init__(self):
        self.saved: list = []
        self.fill: dict = {}

    def pack(self, t):
        self.saved.append(t)
        return len(self.saved) - 1

    def unpack(self, i):
        x = self.saved[i]
        return self.fill[x] if isinstance(x, str) else x


class BlockGraph(NamedTuple):
    """One block call's graph: roots (out, lse) and leaves (q, k, v), both shells where noted above."""

    roots: tuple
    leaves: tuple
    slots: _Slots


def _shell(t: torch.Tensor) -> None:
    t.data = torch.zeros((), dtype=t.dtype, device=t.device).expand(t.shape)


def record(q, k, v, *, causal: bool, scale: float) -> tuple:
    """Run the block call, keep its graph. q (B, Hq, m, D), k/v (B, Hkv, m', ·) →
    (out (B, Hq, m, Dv), lse (B, Hq, m), BlockGraph); out and lse are detached values."""
    qa, kb, vb = (t.detach().requires_grad_() for t in (q, k, v))
    slots = _Slots()
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(slots.pack, slots.unpack):
        o, l = attention(qa, kb, vb, causal=causal, scale=scale, return_lse=True)
    found = []
    for i, t in enumerate(slots.saved):
        for name, x in zip(_NAMES, (kb, vb, o, l)):
            if t is x:
                slots.saved[i] = name
                found.append(name)
    if sorted(found) != sorted(_NAMES):
        raise RuntimeError("ring_attention's backward relies on attention() saving its k, v, out and lse for the "
                           f"backward; this attention() saved {found} of them among {len(slots.saved)} tensors")
    out, lse = o.detach(), l.detach()
    for t in (kb, vb, o, l):
        _shell(t)
    return out, lse, BlockGraph((o, l), (qa, kb, vb), slots)


def grads(g: BlockGraph, *, k, v, out, lse, dout, dlse) -> tuple:
    """(dq, dk, dv) of the block with k, v present now and the merged out (B, Hq, m, Dv) and lse
    (B, Hq, m) in the slots; dout like out, dlse like lse (zeros when lse gets no gradient)."""
    g.slots.fill = {"k": k, "v": v, "out": out, "lse": lse}
    try:
        return torch.autograd.grad(g.roots, g.leaves, (dout, dlse))
    finally:
        g.slots.fill = {}
