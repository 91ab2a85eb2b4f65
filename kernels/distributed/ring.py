"""Ring attention over torch.distributed: ``ring_attention(q, k, v, group=...)``.

Each rank of ``group`` (W ranks) holds its shard of the sequence (``layout.py``):

    q (B, Hq, n, D)   k (B, Hkv, n, D)   v (B, Hkv, n, Dv)     n = N / W on every rank
    -> out (B, Hq, n, Dv) in q's dtype, or AttnOut(out, lse) with lse (B, Hq, n) float32 (float64
       for float64 inputs), natural log: the rows of dense attention over the whole sequence.

Forward, W steps (``schedule.ring_plan``): at step s the rank holds the key/value shard of rank
(r − s) mod W; it posts the hop that passes that shard on to r + 1 (``p2p.Hop``), runs the local
``flashproof.kernels.attention(..., return_lse=True)`` on every non-skipped block while the hop is
in flight, and merges each block's (out, lse) into its query slot's accumulator (``merge.py``).

Backward, the same W steps with the shards travelling again. The forward kept each block call's
autograd graph without its tensors (``graph.record``); the backward runs attention's own backward of
each block with the merged (O, L) in place of the block's (out, lse), the gradients dO and dL, and the
shard present at that step. That backward computes p = e^{s − L} and δ = rowsum(dO ∘ O) − dL, hence
e^{s − L}(dO·v − δ + dL): the dense gradient's share of the block, with no forward recomputed. dK/dV
of a shard accumulate in float32 in a buffer that travels with the shard, one hop behind it: after
its W-th hop it is back on the rank that owns the shard.
"""
from __future__ import annotations

import math
import struct

import torch
import torch.distributed as dist

from .. import AttnOut, attention
from .graph import grads, record
from .merge import bottom, finish, merge
from .p2p import Hop
from .schedule import LAYOUTS, local_causal, ring_plan, slots

__all__ = ["ring_attention"]

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def ring_attention(q, k, v, *, group=None, causal=False, scale=None, layout="contiguous", return_lse=False):
    """Exact attention over a sequence sharded across the ranks of ``group`` (module docstring).

    causal: bottom-right aligned over the whole sequence (Nq = Nk, so query i sees keys j ≤ i);
    layout: "contiguous" (rank r holds chunk r of W) or "zigzag" (chunks r and 2W − 1 − r of 2W);
    every rank must pass the same shapes, dtype, causal, scale and layout (checked with one small
    all_gather). Differentiable in q, k, v (and through lse with ``return_lse=True``)."""
    world, rank = _group(group)
    scale = _validate(q, k, v, causal=causal, scale=scale, layout=layout, return_lse=return_lse)
    _same_everywhere(q, k, v, causal, scale, layout, group, world)
    plan = ring_plan(world, rank, layout, causal)
    keep_graphs = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    out, lse = _RingFn.apply(q, k, v, (group, world, plan, slots(layout), scale, keep_graphs))
    return AttnOut(out, lse) if return_lse else out


def _group(group):
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("ring_attention needs torch.distributed initialised (dist.init_process_group(...)); "
                           "it is not")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError(f"group must be None (the default group) or a torch.distributed.ProcessGroup, "
                        f"got {type(group).__name__}")
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("this process is not a member of the given group")
    return dist.get_world_size(group), rank


def _validate(q, k, v, *, causal, scale, layout, return_lse) -> float:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (B, H, n, D) with n this rank's shard length, "
                             f"got shape {tuple(t.shape)}")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in _DTYPES:
        raise TypeError(f"q, k, v must share one dtype out of {_DTYPES}, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    B, Hq, n, D = q.shape
    if k.shape[0] != B or v.shape[0] != B:
        raise ValueError(f"batch mismatch: q has B={B}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v (B, Hkv, n, Dv) must match k in B, Hkv, n: k {tuple(k.shape)}, v {tuple(v.shape)}")
    if k.shape[3] != D:
        raise ValueError(f"head dim mismatch: q has D={D}, k has D={k.shape[3]}")
    if k.shape[2] != n:
        raise ValueError(f"ring attention shards one sequence: q and k/v need the same shard length, "
                         f"got q n={n}, k n={k.shape[2]}")
    Hkv = k.shape[1]
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"GQA needs Hq % Hkv == 0, got Hq={Hq}, Hkv={Hkv}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if n == 0 or n % slots(layout):
        raise ValueError(f"layout {layout!r} needs a shard length that is a positive multiple of "
                         f"{slots(layout)}, got n={n}")
    for name, flag in (("causal", causal), ("return_lse", return_lse)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite real number, got {scale!r}")
    return float(scale)


def _same_everywhere(q, k, v, causal, scale, layout, group, world):
    """One all_gather of this rank's call signature; raise on every rank if any two differ."""
    sig = [*q.shape, *k.shape, v.shape[3], _DTYPES.index(q.dtype), int(causal), LAYOUTS.index(layout),
           struct.unpack("<q", struct.pack("<d", scale))[0]]
    mine = torch.tensor(sig, dtype=torch.int64, device=q.device)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine, group=group)
    rows = [tuple(t.tolist()) for t in every]
    if len(set(rows)) > 1:
        fields = "q shape (4), k shape (4), Dv, dtype, causal, layout, scale bits"
        raise ValueError("ring_attention was called with different arguments on different ranks "
                         f"({fields}): " + "; ".join(f"rank {i}: {r}" for i, r in enumerate(rows)))


def _acc_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


class _RingFn(torch.autograd.Function):
    """Forward saves this rank's (k, v, out, lse) and, when gradients are wanted, every block call's
    graph (``graph.record``); backward re-runs the ring with those graphs (module docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, cfg):
        group, world, plan, nslot, scale, keep_graphs = cfg
        acc_t = _acc_dtype(q.dtype)
        q_sl = q.chunk(nslot, dim=2)                                       # slots × (B, Hq, n/slots, D)
        accs = [bottom(qs.shape[:3], v.shape[3], acc_t, q.device) for qs in q_sl]
        graphs = []                                                        # per step: one BlockGraph per block
        kc, vc = k, v
        for st in plan:
            hop = Hop.start([kc, vc], group) if st.step < world - 1 else None
            k_sl, v_sl = kc.chunk(nslot, dim=2), vc.chunk(nslot, dim=2)
            step_graphs = []
            for blk in st.blocks:
                a, b, causal = blk.q_slot, blk.k_slot, local_causal(blk.kind)
                if keep_graphs:
                    o, l, g = record(q_sl[a], k_sl[b], v_sl[b], causal=causal, scale=scale)
                    step_graphs.append(g)
                else:
                    o, l = attention(q_sl[a], k_sl[b], v_sl[b], causal=causal, scale=scale, return_lse=True)
                accs[a] = merge(accs[a], o, l)
            graphs.append(step_graphs)
            if hop is not None:
                kc, vc = hop.wait()
        parts = [finish(a) for a in accs]
        out = torch.cat([p[0] for p in parts], dim=2).to(q.dtype)         # (B, Hq, n, Dv)
        lse = torch.cat([p[1] for p in parts], dim=2)                      # (B, Hq, n)
        ctx.save_for_backward(k, v, out, lse)
        ctx.cfg, ctx.graphs = cfg, graphs
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        k, v, out, lse = ctx.saved_tensors
        group, world, plan, nslot, scale, keep_graphs = ctx.cfg
        if not keep_graphs:
            raise RuntimeError("ring_attention was called without gradients enabled for q, k or v; it kept no graph")
        acc_t = _acc_dtype(out.dtype)
        if dout is None:
            dout = torch.zeros_like(out)
        if dlse is None:
            dlse = torch.zeros_like(lse)
        # the merged results and their gradients, per query slot, as attention's backward reads them
        O_sl, L_sl = [t.contiguous() for t in out.chunk(nslot, dim=2)], [t.contiguous() for t in lse.chunk(nslot, dim=2)]
        dO_sl = [t.contiguous() for t in dout.chunk(nslot, dim=2)]
        dL_sl = [t.to(lse.dtype).contiguous() for t in dlse.chunk(nslot, dim=2)]
        dq = [None] * nslot
        kc, vc = k, v
        travelling = None                                                 # Hop carrying dK/dV accumulators
        for st, step_graphs in zip(plan, ctx.graphs):
            hop = Hop.start([kc, vc], group) if st.step < world - 1 else None
            k_sl, v_sl = kc.chunk(nslot, dim=2), vc.chunk(nslot, dim=2)
            dk = torch.zeros(kc.shape, dtype=acc_t, device=kc.device)
            dv = torch.zeros(vc.shape, dtype=acc_t, device=vc.device)
            dk_sl, dv_sl = dk.chunk(nslot, dim=2), dv.chunk(nslot, dim=2)   # views into dk, dv
            for blk, g in zip(st.blocks, step_graphs):
                a, b = blk.q_slot, blk.k_slot
                gq, gk, gv = grads(g, k=k_sl[b], v=v_sl[b], out=O_sl[a], lse=L_sl[a], dout=dO_sl[a], dlse=dL_sl[a])
                dq[a] = gq.to(acc_t) if dq[a] is None else dq[a] + gq
                dk_sl[b].add_(gk)
                dv_sl[b].add_(gv)
            if travelling is not None:                                    # what rank r − 1 summed so far
                dk_in, dv_in = travelling.wait()
                dk, dv = dk + dk_in, dv + dv_in
            travelling = Hop.start([dk, dv], group) if world > 1 else None
            if hop is not None:
                kc, vc = hop.wait()
        ctx.graphs = None
        dk, dv = travelling.wait() if travelling is not None else (dk, dv)
        return torch.cat(dq, dim=2).to(out.dtype), dk.to(k.dtype), dv.to(v.dtype), None
