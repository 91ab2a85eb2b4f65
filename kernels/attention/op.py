"""``attention()`` as torch.library custom ops, so that ``torch.compile(fullgraph=True)`` and
``torch.export`` see one opaque op per direction instead of tracing the kernels' hosts:

* ``flashproof::attention(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k,
  scale, left, right, causal, deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed,
  bias_grad) -> (out, lse)``
  (``bugs``: the mutants' bug switches, comma-separated, "" for every user call; ``dropout_p``,
  ``dropout_seed``: the call's dropout, the seed an int64 (1,) CPU tensor drawn or made in front of the
  op (``dropout.seed_tensor``: a tensor, so that a seed drawn per call is traced by torch.compile
  instead of read as a Python int) and saved for the backward op, which regenerates the forward's keep
  bits from it)
* ``flashproof::attention_backward(q, k, v, out, lse, dout, dlse, <the same arguments>) -> (dq, dk, dv, dbias)``
  (``bias_grad``: the bias requires a gradient; dbias is then shaped like ``bias``, else an empty
  tensor: a custom op returns no None)

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
from . import dropout as _dropout
from .dispatch import device_of, plan

if __name__ != "flashproof.kernels.attention.op":  # a checkout's kernels/ imported by another name
    raise ImportError(f"the flashproof custom ops must be imported as flashproof.kernels.attention.op, not {__name__} "
                      "(a second import would register flashproof::attention twice)")

__all__ = ["attention_op", "attention_backward_op", "call"]


def call(q, k, v, prob_args: dict):
    """Run the forward op on ``prob_args`` (``api._op_args``' dict) -> (out, lse)."""
    return attention_op(q, k, v, **prob_args)


def _problem(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left, right, causal,
             deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed, bias_grad):
    if tiles is not None:
        mask = api.BlockSparseMask(tiles, block_q, block_k, mask)
    prob = api.validate(q, k, v, causal=causal, window=(left, right), mask=mask, bias=bias, scale=scale,
                        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, backend=backend, tuning=tuning,
                        deterministic=deterministic, bugs=frozenset(b for b in bugs.split(",") if b),
                        requires_grad=requires_grad, dropout_p=dropout_p,
                        dropout_seed=_dropout.seed_value(dropout_seed), bias_grad=bias_grad)
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
                 bugs: str, dropout_p: float, dropout_seed: Optional[Tensor],
                 bias_grad: bool = False) -> tuple[Tensor, Tensor]:
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv) in q's dtype,
    lse (B, Hq, Nq) float32 (float64 for float64 inputs)."""
    prob, route = _problem(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left,
                           right, causal, deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed,
                           bias_grad)
    out, lse = _kernels("forward", route.forward).forward(q, k, v, prob, route)
    return out.contiguous(), lse.contiguous()


def _lse_dtype(q):
    return torch.float64 if q.dtype == torch.float64 else torch.float32


@attention_op.register_fake
def _(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left, right, causal,
      deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed, bias_grad=False):
    B, Hq, Nq, _ = q.shape
    return q.new_empty(B, Hq, Nq, v.shape[3]), q.new_empty(B, Hq, Nq, dtype=_lse_dtype(q))


@torch.library.custom_op("flashproof::attention_backward", mutates_args=())
def attention_backward_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dout: Tensor,
                          dlse: Optional[Tensor], mask: Optional[Tensor], bias: Optional[Tensor],
                          tiles: Optional[Tensor], block_q: int, block_k: int, cu_seqlens_q: Optional[Tensor],
                          cu_seqlens_k: Optional[Tensor], scale: Optional[float], left: Optional[int],
                          right: Optional[int], causal: bool, deterministic: bool, requires_grad: bool,
                          backend: str, tuning: str, bugs: str, dropout_p: float,
                          dropout_seed: Optional[Tensor],
                          bias_grad: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The gradients (dq, dk, dv), shaped and typed like (q, k, v), contiguous, and dbias: shaped and
    typed like ``bias`` when ``bias_grad``, else an empty tensor."""
    prob, route = _problem(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left,
                           right, causal, deterministic, True, backend, tuning, bugs, dropout_p, dropout_seed,
                           bias_grad)
    if route.backward == "none":
        raise RuntimeError(f"no backward was planned for this call: {'; '.join(route.reasons)}")
    mod = _kernels("backward", route.backward)
    if not prob.bias_grad:
        dq, dk, dv = mod.backward(q, k, v, out, lse, dout, dlse, prob, route)
        return dq.contiguous(), dk.contiguous(), dv.contiguous(), q.new_empty(0)
    # dS, the gradient of the scaled scores (B, Hq, Nq, Nk), written by the torch / Triton backward (the only
    # backends a bias reaches: dispatch.gluon_rule), then summed over the dims the bias broadcasts
    ds = torch.zeros(*q.shape[:3], k.shape[2], dtype=_lse_dtype(q), device=q.device)
    dq, dk, dv = mod.backward(q, k, v, out, lse, dout, dlse, prob, route, ds=ds)
    dims = [i for i in range(4) if prob.bias.shape[i] == 1]
    dbias = ds.sum(dim=dims, keepdim=True) if dims else ds  # (sum over an empty dim list sums everything)
    return dq.contiguous(), dk.contiguous(), dv.contiguous(), dbias.reshape(bias.shape).to(bias.dtype)


@attention_backward_op.register_fake
def _(q, k, v, out, lse, dout, dlse, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left,
      right, causal, deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed, bias_grad=False):
    dbias = bias.new_empty(bias.shape) if bias_grad else q.new_empty(0)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dbias


#: the forward op's arguments after (q, k, v), in schema order
_ARGS = ("mask", "bias", "tiles", "block_q", "block_k", "cu_seqlens_q", "cu_seqlens_k", "scale", "left", "right",
         "causal", "deterministic", "requires_grad", "backend", "tuning", "bugs", "dropout_p", "dropout_seed",
         "bias_grad")


#: the forward op's optional tensor arguments (saved for the backward op; the seed so that it replays the bits)
_TENSOR_ARGS = ("mask", "bias", "tiles", "cu_seqlens_q", "cu_seqlens_k", "dropout_seed")


def _setup_context(ctx, inputs, output):
    q, k, v, *rest = inputs
    args = dict(zip(_ARGS, rest))
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, *(args[n] for n in _TENSOR_ARGS))
    ctx.args = {"bias_grad": False, **{n: a for n, a in args.items() if n not in _TENSOR_ARGS}}


def _backward(ctx, dout, dlse):
    q, k, v, out, lse, mask, bias, tiles, cu_q, cu_k, seed = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    a = ctx.args
    dq, dk, dv, dbias = attention_backward_op(q, k, v, out, lse, dout, dlse, mask, bias, tiles, a["block_q"],
                                              a["block_k"], cu_q, cu_k, a["scale"], a["left"], a["right"], a["causal"],
                                              a["deterministic"], True, a["backend"], a["tuning"], a["bugs"],
                                              a["dropout_p"], seed, a["bias_grad"])
    # the forward's inputs: q, k, v, mask, bias, then the rest of _ARGS
    return (dq, dk, dv, None, dbias if a["bias_grad"] else None) + (None,) * (len(_ARGS) - 2)


attention_op.register_autograd(_backward, setup_context=_setup_context)
