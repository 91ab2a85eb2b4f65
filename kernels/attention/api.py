"""Production attention: ``attention(q, k, v, ...)``, an autograd op with a torch and a Triton backend.

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

Backend selection is explicit and never falls back: ``backend="triton" | "torch"``; the default
is ``"triton"`` for CUDA tensors and ``"torch"`` otherwise. ``"triton"`` on CPU tensors needs
``TRITON_INTERPRET=1`` (the CI mode) and raises otherwise.
"""
from __future__ import annotations

import math
import os
from typing import NamedTuple, Optional

import torch

__all__ = ["AttnOut", "BlockSparseMask", "attention", "BUGS"]

#: Deliberate bugs the torch/Triton paths can switch on (``kernels/mutants.py``); never set by users.
BUGS = frozenset({"no_alpha", "no_max", "tile_floor", "unguarded_inf", "gqa_map"})
MAX_HEAD_DIM = 256
_DTYPES = {"torch": (torch.float16, torch.bfloat16, torch.float32, torch.float64),
           "triton": (torch.float16, torch.bfloat16, torch.float32)}


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


class Problem(NamedTuple):
    """The validated call, as both backends read it. mask: None or bool (B|1, Hq|1, Nq, Nk) view;
    tiles: None or BlockSparseMask; window: (left, right) with None = unbounded (causal folded in);
    seqlens: None or (cu_q, cu_k, max_q, max_k) with cu_* int32 on q's device. plans: a
    backend's derived launch data (the Triton block-sparse walk lists), built by the forward and
    reused by the backward of the same call; it lives as long as the call's autograd graph."""

    scale: float
    window: tuple
    mask: Optional[torch.Tensor]
    tiles: Optional[BlockSparseMask]
    seqlens: Optional[tuple]
    groups: int
    deterministic: bool
    bugs: frozenset
    plans: dict


def attention(q, k, v, *, causal=False, window=None, mask=None, scale=None, cu_seqlens_q=None,
              cu_seqlens_k=None, return_lse=False, deterministic=False, backend=None,
              _bugs=frozenset()):
    """Exact softmax attention (FlashAttention-2 schedule), differentiable in q, k, v.

    q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv), or
    ``AttnOut(out, lse)`` with ``return_lse=True`` (lse (B, Hq, Nq)). See the module docstring
    for the masking conventions. ``deterministic=True`` promises bitwise-identical gradients run to
    run. ``False`` allows a backward that adds dQ up with fp32 atomics (5 instead of 7 N²d products;
    dQ may then differ in its last bits between runs): on an sm_90 GPU the Gluon backward for the
    dense d = 128 calls ``kernels.attention_gluon.reason`` accepts with Hq = Hkv, and the Triton
    atomic-dQ kernel when ``attention_triton.ATOMIC_DQ`` is on (off by default: it measured slower
    on the H200); every other call takes the deterministic two-kernel Triton backward.
    """
    backend = _resolve_backend(backend, q)
    prob = _validate(q, k, v, causal=causal, window=window, mask=mask, scale=scale,
                     cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, backend=backend,
                     deterministic=deterministic, bugs=_bugs, return_lse=return_lse)
    out, lse = _AttentionFn.apply(q, k, v, prob, backend)
    return AttnOut(out, lse) if return_lse else out


def _resolve_backend(backend, q):
    if backend is None:
        backend = "triton" if isinstance(q, torch.Tensor) and q.is_cuda else "torch"
    if backend not in ("torch", "triton"):
        raise ValueError(f"backend must be 'torch' or 'triton', got {backend!r}")
    if backend == "triton":
        try:
            import triton  # noqa: F401
        except ImportError as e:
            raise RuntimeError("backend='triton' was asked for but triton is not installed") from e
        if isinstance(q, torch.Tensor) and not q.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("backend='triton' needs CUDA tensors (or TRITON_INTERPRET=1 for CPU "
                             f"tensors); got q on {q.device}")
    return backend


def _check_tensor(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D (B, H, N, D), got shape {tuple(t.shape)}")


def _validate(q, k, v, *, causal, window, mask, scale, cu_seqlens_q, cu_seqlens_k, backend,
              deterministic, bugs, return_lse) -> Problem:
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in _DTYPES[backend]:
        raise TypeError(f"dtype {q.dtype} is not supported by backend {backend!r} "
                        f"(supported: {', '.join(str(d) for d in _DTYPES[backend])})")
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
    return Problem(float(scale), (left, right), mask, tiles, seqlens, Hq // Hkv, deterministic, bugs, {})


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


def _backend_module(backend):
    if backend == "torch":
        from . import torch as mod
    else:
        from .triton import host as mod
    return mod


class _AttentionFn(torch.autograd.Function):
    """Forward saves (q, k, v, out, lse); backward recomputes P tile by tile from lse."""

    @staticmethod
    def forward(ctx, q, k, v, prob, backend):
        ctx.set_materialize_grads(False)  # an unused lse (or out) gives None, not a zero tensor to read
        mod = _backend_module(backend)
        out, lse = mod.forward(q, k, v, prob)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.prob, ctx.backend = prob, backend
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        mod = _backend_module(ctx.backend)
        if dout is None:
            dout = torch.zeros_like(out)
        dq, dk, dv = mod.backward(q, k, v, out, lse, dout, dlse, ctx.prob)
        return dq, dk, dv, None, None
