"""Production attention: ``attention(q, k, v, ...)``: validation, the router's plan, and the autograd op
over the torch, Triton and Gluon kernels.

Shapes follow ``torch.nn.functional.scaled_dot_product_attention``::

    q (B, Hq, Nq, D)   k (B, Hkv, Nk, D)   v (B, Hkv, Nk, Dv)   ->   out (B, Hq, Nq, Dv)
                                                                      lse (B, Hq, Nq) float32, natural log

Conventions (``docs/kernel.md`` has the long form):

* GQA/MQA: ``Hq % Hkv == 0``; query head h reads kv head ``h // (Hq // Hkv)``.
* A key j is *allowed* for query i when every constraint given holds: ``causal`` (bottom-right
  aligned: j ≤ i + Nk − Nq), ``window=(left, right)`` (i + Nk − Nq − left ≤ j ≤ i + Nk − Nq +
  right; ``None`` on a side means unbounded), ``mask`` (boolean, True = allowed, broadcastable to
  (B, Hq, Nq, Nk); or a ``BlockSparseMask``), and, with ``cu_seqlens``, i and j in the same
  sequence (the causal/window alignment is then per sequence).
* A row with no allowed key: out 0, lse −inf, gradients 0, never NaN. Values planted in
  positions that only masked pairs read (NaN, ±inf, 1e30) never reach the results.
* Varlen: ``cu_seqlens_q``/``cu_seqlens_k`` (S + 1,) int32/int64 with q ``(1, Hq, total_q, D)``
  and k/v ``(1, Hkv, total_k, ·)``: sequence s owns rows ``cu[s]:cu[s+1]``.

Backends: ``backend="auto" | "gluon" | "triton" | "torch"``; ``dispatch.plan`` is the one place
that routes a call (its docstring states the rules). A backend asked for by name runs the call or
raises naming the rule that failed; nothing falls back silently. ``tuning="autotune" | "first"``:
Triton's autotuner times every configuration of a new launch key, or the first configuration that
fits runs (correctness runs that would otherwise compile every configuration).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch

from .dispatch import BACKENDS, TUNINGS, device_of, plan

__all__ = ["AttnOut", "BlockSparseMask", "AttentionProblem", "attention", "validate", "BUGS"]

#: Deliberate bugs the torch/Triton kernels can switch on, reached only through ``_attention``
#: (``flashproof/fuzz/kernel_mutants.py``); not part of ``attention()``'s signature.
BUGS = frozenset({"no_alpha", "no_max", "tile_floor", "unguarded_inf", "gqa_map"})
MAX_HEAD_DIM = 256
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class AttnOut(NamedTuple):
    """out (B, Hq, Nq, Dv) in q's dtype; lse (B, Hq, Nq) float32 (float64 for float64 inputs),
    natural log, −inf for a row with no allowed key."""

    out: torch.Tensor
    lse: torch.Tensor


class BlockSparseMask(NamedTuple):
    """A mask given by tiles: key j is allowed for query i iff ``tiles[b, h, i // block_q,
    j // block_k]`` (and ``dense[b, h, i, j]`` when ``dense`` is given). Absent tiles are never
    visited by the Triton kernel.

    tiles: bool (B or 1, Hq or 1, ceil(Nq / block_q), ceil(Nk / block_k)).
    block_q, block_k: powers of two ≥ 16. dense: None or a bool mask broadcastable to (B, Hq, Nq, Nk).
    """

    tiles: torch.Tensor
    block_q: int
    block_k: int
    dense: Optional[torch.Tensor] = None


class AttentionProblem(NamedTuple):
    """The validated call, as the router and every kernel read it.

    B, Hq, Hkv, Nq, Nk, D, Dv: the shapes (q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv));
    dtype; scale; window: (left, right) with None = unbounded, causal folded in; causal: the allowed
    pairs are exactly the causal triangle (window (None, 0), no mask, no varlen: Gluon's CAUSAL);
    mask: None or a bool (B|1, Hq|1, Nq, Nk) view; tiles: None or a BlockSparseMask; seqlens: None
    or (cu_q, cu_k, max_q, max_k) with cu_* int32 on q's device; groups = Hq // Hkv; deterministic;
    requires_grad: some input needs a gradient; dense_layout: q, k, v contiguous on 16-byte
    boundaries; bugs (mutants only); backend, tuning: as asked for; cache: launch data a kernel
    derives once per call (the Triton arguments and block-sparse walk lists) and its backward
    reuses; it lives as long as the call's autograd graph."""

    B: int
    Hq: int
    Hkv: int
    Nq: int
    Nk: int
    D: int
    Dv: int
    dtype: torch.dtype
    scale: float
    window: tuple
    causal: bool
    mask: Optional[torch.Tensor]
    tiles: Optional[BlockSparseMask]
    seqlens: Optional[tuple]
    groups: int
    deterministic: bool
    requires_grad: bool
    dense_layout: bool
    bugs: frozenset
    backend: str
    tuning: str
    cache: dict


def attention(q, k, v, *, causal=False, window=None, mask=None, scale=None, cu_seqlens_q=None,
              cu_seqlens_k=None, return_lse=False, deterministic=False, backend="auto", tuning="autotune"):
    """Exact softmax attention (FlashAttention-2 schedule), differentiable in q, k, v.

    q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv), or
    ``AttnOut(out, lse)`` with ``return_lse=True`` (lse (B, Hq, Nq)). See the module docstring
    for the masking conventions. ``deterministic=True`` promises bitwise-identical gradients run to
    run; ``False`` lets the Gluon backward (sm_90, the dense d = 128 calls with Hq = Hkv) add dQ with
    fp32 reductions (5 instead of 7 N²d products; dQ may differ in its last bits between runs).
    backend: "auto" | "gluon" | "triton" | "torch" (``dispatch.plan`` states the rules; a backend
    that cannot take the call raises ``dispatch.BackendUnavailable``). tuning: "autotune" | "first"
    (Triton launches only).
    """
    return _attention(q, k, v, causal=causal, window=window, mask=mask, scale=scale, cu_seqlens_q=cu_seqlens_q,
                      cu_seqlens_k=cu_seqlens_k, return_lse=return_lse, deterministic=deterministic,
                      backend=backend, tuning=tuning, bugs=frozenset())


def _attention(q, k, v, *, bugs, **kwargs):
    """``attention`` with deliberate bugs switched on (``BUGS``): the entry of the fuzzer's kernel
    mutants (``flashproof/fuzz/kernel_mutants.py``), never of users."""
    return_lse = kwargs.pop("return_lse", False)
    prob = validate(q, k, v, bugs=bugs, return_lse=return_lse, **kwargs)
    route = plan(prob, device_of(q))
    out, lse = _AttentionFn.apply(q, k, v, prob, route)
    return AttnOut(out, lse) if return_lse else out


def _check_tensor(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D (B, H, N, D), got shape {tuple(t.shape)}")


def validate(q, k, v, *, causal=False, window=None, mask=None, scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
             backend="auto", tuning="autotune", deterministic=False, bugs=frozenset(),
             return_lse=False) -> AttentionProblem:
    """The checked, normalised call (``AttentionProblem``); a TypeError/ValueError naming what was
    expected and what was received for bad input. Arguments as ``attention``'s."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in DTYPES:
        raise TypeError(f"dtype {q.dtype} is not supported (supported: {', '.join(str(d) for d in DTYPES)})")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if tuning not in TUNINGS:
        raise ValueError(f"tuning must be one of {TUNINGS}, got {tuning!r}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    B, Hq, Nq, D = q.shape
    Bk, Hkv, Nk, Dk = k.shape
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v (B, Hkv, Nk, Dv) must match k in B, Hkv, Nk: k {tuple(k.shape)}, v {tuple(v.shape)}")
    Dv = v.shape[3]
    if Bk != B:
        raise ValueError(f"batch mismatch: q has B={B}, k/v have B={Bk}")
    if Dk != D:
        raise ValueError(f"head dim mismatch: q has D={D}, k has D={Dk}")
    for name, d in (("D", D), ("Dv", Dv)):
        if not 1 <= d <= MAX_HEAD_DIM:
            raise ValueError(f"head dim {name}={d} unsupported: need 1 <= {name} <= {MAX_HEAD_DIM}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"GQA needs Hq % Hkv == 0, got Hq={Hq}, Hkv={Hkv}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    for name, flag in (("return_lse", return_lse), ("deterministic", deterministic)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite real number, got {scale!r}")
    left, right = _window(window)
    if causal:
        right = 0 if right is None else min(right, 0)
    bugs = frozenset(bugs)
    if not bugs <= BUGS:
        raise ValueError(f"unknown bug switches {sorted(bugs - BUGS)}")
    seqlens = _seqlens(cu_seqlens_q, cu_seqlens_k, q, Nq, Nk)
    tiles = None
    if isinstance(mask, BlockSparseMask):
        tiles = _block_sparse(mask, q, B, Hq, Nq, Nk)
        if seqlens is not None:
            raise ValueError("a BlockSparseMask cannot be combined with cu_seqlens (tiles would straddle sequences)")
        mask = tiles.dense
    elif mask is not None:
        mask = _dense_mask(mask, q, B, Hq, Nq, Nk, "mask")
    pure_causal = (left, right) == (None, 0) and mask is None and tiles is None and seqlens is None
    requires_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    dense_layout = all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v))
    return AttentionProblem(B, Hq, Hkv, Nq, Nk, D, Dv, q.dtype, float(scale), (left, right), pure_causal, mask, tiles,
                            seqlens, Hq // Hkv, deterministic, requires_grad, dense_layout, bugs, backend, tuning, {})


def _window(window):
    if window is None:
        return None, None
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise ValueError(f"window must be None or (left, right), got {window!r}")
    out = []
    for side, w in zip(("left", "right"), window):
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise ValueError(f"window {side} must be None (unbounded) or an int >= 0, got {w!r}")
        out.append(w)
    return tuple(out)


def _dense_mask(mask, q, B, Hq, Nq, Nk, name):
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool tensor or a BlockSparseMask, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must be boolean (True = allowed); got dtype {mask.dtype} "
                        "(additive float masks are not accepted)")
    if mask.device != q.device:
        raise ValueError(f"{name} is on {mask.device}, q on {q.device}")
    if mask.dim() > 4:
        raise ValueError(f"{name} must have at most 4 dims, got shape {tuple(mask.shape)}")
    shape = (1,) * (4 - mask.dim()) + tuple(mask.shape)
    for got, want, dim in zip(shape, (B, Hq, Nq, Nk), "BHQK"):
        if got not in (1, want) or (dim in "QK" and got != want):
            raise ValueError(f"{name} of shape {tuple(mask.shape)} does not broadcast to "
                             f"(B, Hq, Nq, Nk) = {(B, Hq, Nq, Nk)} (the last two dims must match exactly)")
    return mask.reshape(shape)  # (B|1, Hq|1, Nq, Nk), a view when possible


def _block_sparse(bm, q, B, Hq, Nq, Nk):
    for name in ("block_q", "block_k"):
        b = getattr(bm, name)
        if isinstance(b, bool) or not isinstance(b, int) or b < 16 or b & (b - 1):
            raise ValueError(f"BlockSparseMask.{name} must be a power of two >= 16, got {b!r}")
    t = bm.tiles
    if not isinstance(t, torch.Tensor) or t.dtype != torch.bool or t.dim() != 4:
        raise TypeError("BlockSparseMask.tiles must be a 4-D bool tensor (B|1, Hq|1, Tq, Tk)")
    if t.device != q.device:
        raise ValueError(f"BlockSparseMask.tiles is on {t.device}, q on {q.device}")
    tq, tk = -(-Nq // bm.block_q), -(-Nk // bm.block_k)
    if t.shape[0] not in (1, B) or t.shape[1] not in (1, Hq) or tuple(t.shape[2:]) != (tq, tk):
        raise ValueError(f"BlockSparseMask.tiles has shape {tuple(t.shape)}, expected "
                         f"(1 or {B}, 1 or {Hq}, {tq}, {tk}) for Nq={Nq}, Nk={Nk}")
    dense = None if bm.dense is None else _dense_mask(bm.dense, q, B, Hq, Nq, Nk, "BlockSparseMask.dense")
    return BlockSparseMask(t, bm.block_q, bm.block_k, dense)


def _seqlens(cu_q, cu_k, q, Nq, Nk):
    if cu_q is None and cu_k is None:
        return None
    if cu_q is None or cu_k is None:
        raise ValueError("cu_seqlens_q and cu_seqlens_k must be given together")
    if q.shape[0] != 1:
        raise ValueError(f"with cu_seqlens the batch dim must be 1 (packed sequences), got B={q.shape[0]}")
    cus = []
    for name, cu, total in (("cu_seqlens_q", cu_q, Nq), ("cu_seqlens_k", cu_k, Nk)):
        if not isinstance(cu, torch.Tensor) or cu.dtype not in (torch.int32, torch.int64) or cu.dim() != 1:
            raise TypeError(f"{name} must be a 1-D int32/int64 tensor")
        if cu.numel() < 2:
            raise ValueError(f"{name} needs at least 2 entries (S + 1 for S >= 1 sequences), got {cu.numel()}")
        vals = cu.tolist()
        if vals[0] != 0 or vals[-1] != total or any(b < a for a, b in zip(vals, vals[1:])):
            raise ValueError(f"{name} must start at 0, be non-decreasing and end at {total} "
                             f"(the packed length), got {vals[:8]}{'...' if len(vals) > 8 else ''}")
        cus.append((cu.to(device=q.device, dtype=torch.int32), vals))
    (cq, vq), (ck, vk) = cus
    if len(vq) != len(vk):
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k differ in length: {len(vq)} vs {len(vk)}")
    max_q = max(b - a for a, b in zip(vq, vq[1:]))
    max_k = max(b - a for a, b in zip(vk, vk[1:]))
    return cq, ck, max_q, max_k


def _kernels(direction, name):
    """The host module of the kernels a plan names for ``direction`` ("forward" | "backward"), imported
    on first use (the Triton and Gluon modules import triton)."""
    if name == "torch":
        from . import torch as mod
    elif name == "triton":
        from .triton import host as mod
    elif direction == "forward":
        from .gluon import fwd as mod
    else:
        from .gluon import bwd as mod
    return mod


class _AttentionFn(torch.autograd.Function):
    """Forward saves (q, k, v, out, lse); backward recomputes P tile by tile from lse. The kernels of
    each direction are the ones ``plan`` chose."""

    @staticmethod
    def forward(ctx, q, k, v, prob, route):
        ctx.set_materialize_grads(False)  # an unused lse (or out) gives None, not a zero tensor to read
        out, lse = _kernels("forward", route.forward).forward(q, k, v, prob, route)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.prob, ctx.route = prob, route
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        route = ctx.route
        if route.backward == "none":
            raise RuntimeError(f"no backward was planned for this call: {'; '.join(route.reasons)}")
        if dout is None:
            dout = torch.zeros_like(out)
        dq, dk, dv = _kernels("backward", route.backward).backward(q, k, v, out, lse, dout, dlse, ctx.prob, route)
        return dq, dk, dv, None, None
