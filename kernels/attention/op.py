"""``attention()`` as torch.library custom ops, so that ``torch.compile(fullgraph=True)`` and
``torch.export`` see one opaque op per direction instead of tracing the kernels' hosts:

* ``flashproof::attention(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k,
  scale, left, right, causal, deterministic, requires_grad, backend, tuning, bugs) -> (out, lse)``
  (``bugs``: the mutants' bug switches, comma-separated, "" for every user call; ``dropout_p``,
  ``dropout_seed``: the call's dropout, the seed resolved before the op, so that the backward op
  regenerates the forward's keep bits)
* ``flashproof::attention_backward(q, k, v, out, lse, dout, dlse, <the same arguments>) -> (dq, dk, dv)``

The call's non-tensor structure travels as schema arguments: a ``BlockSparseMask`` as ``tiles`` +
``block_q``/``block_k`` (its ``dense`` part as ``mask``), varlen as the two ``cu_seqlens`` tensors, the
window as ``left``/``right`` (None = unbounded). Each op body validates the whole call (``api.validate``,
including the checks that read tensor values, such as ``cu_seqlens.tolist()``), asks ``dispatch.plan``
for the kernels and runs them; so nothing data-dependent is traced. The fake (meta) implementations
give the output shapes; the autograd formula calls the backward op.

The backward op re-validates and re-plans (``plan`` is a pure function of the call, so it picks the
backward that the forward's plan named); the launch data a Triton call derives (``prob.cache``) is
rebuilt by the backward instead of being shared with the forward.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import api
from .dispatch import device_of, plan

if __name__ != "flashproof.kernels.attention.op":  # a checkout's kernels/ imported by another name
    raise ImportError(f"the flashproof custom ops must be imported as flashproof.kernels.attention.op, not {__name__} "
                      "(a second import would register flashproof::attention twice)")

__all__ = ["attention_op", "attention_backward_op", "call"]


def call(q, k, v, prob_args: dict):
    """Run the forward op on ``prob_args`` (``api._op_args``' dict) -> (out, lse)."""
    return attention_op(q, k, v, **prob_args)


def _problem(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left, right, causal,
             deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed):
    if tiles is not None:
        mask = api.BlockSparseMask(tiles, block_q, block_k, mask)
    prob = api.validate(q, k, v, causal=causal, window=(left, right), mask=mask, bias=bias, scale=scale,
                        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, backend=backend, tuning=tuning,
                        deterministic=deterministic, bugs=frozenset(b for b in bugs.split(",") if b),
                        requires_grad=requires_grad, dropout_p=dropout_p, dropout_seed=dropout_seed)
    return prob, plan(prob, device_of(q))


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


@torch.library.custom_op("flashproof::attention", mutates_args=())
def attention_op(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], bias: Optional[Tensor],
                 tiles: Optional[Tensor], block_q: int, block_k: int, cu_seqlens_q: Optional[Tensor],
                 cu_seqlens_k: Optional[Tensor], scale: Optional[float], left: Optional[int], right: Optional[int],
                 causal: bool, deterministic: bool, requires_grad: bool, backend: str, tuning: str,
                 bugs: str, dropout_p: float, dropout_seed: Optional[int]) -> tuple[Tensor, Tensor]:
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv) in q's dtype and
    layout (``_like``), lse (B, Hq, Nq) float32 (float64 for float64 inputs), contiguous."""
    prob, route = _problem(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left,
                           right, causal, deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed)
    out, lse = _kernels("forward", route.forward).forward(q, k, v, prob, route)
    return _laid_out_like(out, q), lse.contiguous()


def _like(x_shape, ref, dtype=None):
    """An empty tensor of ``x_shape`` laid out as ``torch.empty_like(ref)`` lays ``ref`` out (its strides
    when ref is dense, e.g. a (B, N, H, D) transposed view; else compact in ref's stride order, e.g.
    (B, N, H, D) for a slice of a packed QKV buffer, as SDPA's cuDNN path allocates) when the shapes
    agree, else contiguous: the layout of every result of these ops (out like q, dq/dk/dv like
    q/k/v), in the real and the fake implementations alike."""
    if tuple(x_shape) == tuple(ref.shape):
        return torch.empty_like(ref, dtype=dtype)
    return ref.new_empty(x_shape, dtype=dtype)


def _laid_out_like(x, ref):
    """``x`` itself when it already has ``_like``'s layout (the Gluon and Triton kernels allocate so),
    else a copy in it."""
    want = _like(x.shape, ref, x.dtype)
    return x if want.stride() == x.stride() else want.copy_(x)


def _lse_dtype(q):
    return torch.float64 if q.dtype == torch.float64 else torch.float32


@attention_op.register_fake
def _(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left, right, causal,
      deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed):
    B, Hq, Nq, _ = q.shape
    return _like((B, Hq, Nq, v.shape[3]), q), q.new_empty(B, Hq, Nq, dtype=_lse_dtype(q))


@torch.library.custom_op("flashproof::attention_backward", mutates_args=())
def attention_backward_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dout: Tensor,
                          dlse: Optional[Tensor], mask: Optional[Tensor], bias: Optional[Tensor],
                          tiles: Optional[Tensor], block_q: int, block_k: int, cu_seqlens_q: Optional[Tensor],
                          cu_seqlens_k: Optional[Tensor], scale: Optional[float], left: Optional[int],
                          right: Optional[int], causal: bool, deterministic: bool, requires_grad: bool,
                          backend: str, tuning: str, bugs: str, dropout_p: float,
                          dropout_seed: Optional[int]) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients (dq, dk, dv), shaped, typed and laid out like (q, k, v) (``_like``)."""
    prob, route = _problem(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left,
                           right, causal, deterministic, True, backend, tuning, bugs, dropout_p, dropout_seed)
    if route.backward == "none":
        raise RuntimeError(f"no backward was planned for this call: {'; '.join(route.reasons)}")
    dq, dk, dv = _kernels("backward", route.backward).backward(q, k, v, out, lse, dout, dlse, prob, route)
    return _laid_out_like(dq, q), _laid_out_like(dk, k), _laid_out_like(dv, v)


@attention_backward_op.register_fake
def _(q, k, v, out, lse, dout, dlse, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left,
      right, causal, deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed):
    return _like(q.shape, q), _like(k.shape, k), _like(v.shape, v)


#: the forward op's arguments after (q, k, v), in schema order
_ARGS = ("mask", "bias", "tiles", "block_q", "block_k", "cu_seqlens_q", "cu_seqlens_k", "scale", "left", "right",
         "causal", "deterministic", "requires_grad", "backend", "tuning", "bugs", "dropout_p", "dropout_seed")


def _setup_context(ctx, inputs, output):
    q, k, v, *rest = inputs
    args = dict(zip(_ARGS, rest))
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, args["mask"], args["bias"], args["tiles"], args["cu_seqlens_q"],
                          args["cu_seqlens_k"])
    ctx.args = {n: a for n, a in args.items() if n not in ("mask", "bias", "tiles", "cu_seqlens_q", "cu_seqlens_k")}


def _backward(ctx, dout, dlse):
    q, k, v, out, lse, mask, bias, tiles, cu_q, cu_k = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    a = ctx.args
    dq, dk, dv = attention_backward_op(q, k, v, out, lse, dout, dlse, mask, bias, tiles, a["block_q"], a["block_k"],
                                       cu_q, cu_k, a["scale"], a["left"], a["right"], a["causal"], a["deterministic"],
                                       True, a["backend"], a["tuning"], a["bugs"], a["dropout_p"], a["dropout_seed"])
    return (dq, dk, dv) + (None,) * len(_ARGS)


attention_op.register_autograd(_backward, setup_context=_setup_context)
