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

An eager call that nothing traces (``traced``: no compile/export, no dispatch mode, no functorch
transform, plain tensors) skips the custom op's dispatch: ``run`` calls the same bodies (``_forward``,
``_backward_kernels``) through a plain ``torch.autograd.Function`` (``_Eager``), whose backward takes
the forward's validated problem and plan (``Launch``) from ``ctx``. Measured on a (shared) CPU with
the kernels' launches stubbed out, a block-sparse training step's host time was 0.31 ms through the
custom ops and 0.17 ms without them (torch's ``fill_defaults`` over this 21-argument schema, run by the
custom op's autograd on every forward, took ~0.19 ms a call on its own); ``lab/probe.py``'s sparse part
measures both on the GPU machine.

Through the custom op, the backward also reuses its forward's ``Launch`` (and with it the launch data
the forward derived in ``prob.cache``: the Triton arguments, the block-sparse walk lists): the forward
op body leaves it in a per-thread slot that ``setup_context`` moves onto ``ctx`` when the output there
is the one the body returned, and the autograd formula hands it to the backward op body the same way,
which takes it only when its ``q`` and ``lse`` are the tensors it was handed (an op body reached
another way — ``torch.compile``'s graphs, ``opcheck``, a direct call — finds no match and re-validates
and re-plans: ``plan`` is a pure function of the call, so it picks the backward the forward's plan
named). Nothing but identity decides, so a stale slot is never used.
"""
from __future__ import annotations

import threading
import weakref
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from . import api
from . import dropout as _dropout
from .dispatch import Plan, device_of, plan

if __name__ != "flashproof.kernels.attention.op":  # a checkout's kernels/ imported by another name
    raise ImportError(f"the flashproof custom ops must be imported as flashproof.kernels.attention.op, not {__name__} "
                      "(a second import would register flashproof::attention twice)")

__all__ = ["attention_op", "attention_backward_op", "call", "run"]


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


class Launch(NamedTuple):
    """A forward's validated call and the kernels its plan named, reused by its backward."""

    prob: api.AttentionProblem
    route: Plan


#: the per-thread hand-over slots: ``forward`` = (weakref to the forward's lse, Launch), left by the
#: forward op body for ``_setup_context``; ``backward`` = (q, lse, Launch), set by ``_backward`` around
#: its call of the backward op
_SLOTS = threading.local()


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
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv) in q's dtype and
    layout (``_like``), lse (B, Hq, Nq) float32 (float64 for float64 inputs), contiguous."""
    out, lse, launch = _forward(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale,
                                left, right, causal, deterministic, requires_grad, backend, tuning, bugs, dropout_p,
                                dropout_seed, bias_grad)
    _SLOTS.forward = (weakref.ref(lse), launch) if requires_grad else None
    return out, lse


def _forward(q, k, v, *args):
    """The forward op's body: ``args`` as the schema's after (q, k, v) -> (out, lse, Launch)."""
    prob, route = _problem(q, k, v, *args)
    out, lse = _kernels("forward", route.forward).forward(q, k, v, prob, route)
    return _laid_out_like(out, q), lse.contiguous(), Launch(prob, route)


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
      deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed, bias_grad=False):
    B, Hq, Nq, _ = q.shape
    return _like((B, Hq, Nq, v.shape[3]), q), q.new_empty(B, Hq, Nq, dtype=_lse_dtype(q))


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
    handed = getattr(_SLOTS, "backward", None)
    if handed is not None and handed[0] is q and handed[1] is lse:
        prob, route = handed[2]  # the forward's (``_backward`` checked nothing else changed: autograd did)
    else:
        prob, route = _problem(q, k, v, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale,
                               left, right, causal, deterministic, True, backend, tuning, bugs, dropout_p,
                               dropout_seed, bias_grad)
    return _backward_kernels(q, k, v, out, lse, dout, dlse, bias, Launch(prob, route))


def _backward_kernels(q, k, v, out, lse, dout, dlse, bias, launch):
    """The backward op's body once the call is validated and planned -> (dq, dk, dv, dbias): the
    gradients laid out like (q, k, v) (``_like``); dbias like ``bias`` when the call asked for its
    gradient, else an empty tensor."""
    prob, route = launch
    mod = _kernels("backward", route.backward)
    if not prob.bias_grad:
        dq, dk, dv = mod.backward(q, k, v, out, lse, dout, dlse, prob, route)
        return _laid_out_like(dq, q), _laid_out_like(dk, k), _laid_out_like(dv, v), q.new_empty(0)
    # dS, the gradient of the scaled scores (B, Hq, Nq, Nk), written by the torch / Triton backward (the only
    # backends a bias reaches: dispatch.gluon_rule), then summed over the dims the bias broadcasts
    ds = torch.zeros(*q.shape[:3], k.shape[2], dtype=_lse_dtype(q), device=q.device)
    dq, dk, dv = mod.backward(q, k, v, out, lse, dout, dlse, prob, route, ds=ds)
    dims = [i for i in range(4) if prob.bias.shape[i] == 1]
    dbias = ds.sum(dim=dims, keepdim=True) if dims else ds  # (sum over an empty dim list sums everything)
    return (_laid_out_like(dq, q), _laid_out_like(dk, k), _laid_out_like(dv, v),
            dbias.reshape(bias.shape).to(bias.dtype))


@attention_backward_op.register_fake
def _(q, k, v, out, lse, dout, dlse, mask, bias, tiles, block_q, block_k, cu_seqlens_q, cu_seqlens_k, scale, left,
      right, causal, deterministic, requires_grad, backend, tuning, bugs, dropout_p, dropout_seed, bias_grad=False):
    dbias = bias.new_empty(bias.shape) if bias_grad else q.new_empty(0)
    return _like(q.shape, q), _like(k.shape, k), _like(v.shape, v), dbias


#: the forward op's arguments after (q, k, v), in schema order
_ARGS = ("mask", "bias", "tiles", "block_q", "block_k", "cu_seqlens_q", "cu_seqlens_k", "scale", "left", "right",
         "causal", "deterministic", "requires_grad", "backend", "tuning", "bugs", "dropout_p", "dropout_seed",
         "bias_grad")

#: the forward op's optional tensor arguments (saved for the backward op; the seed so that it replays the bits)
_TENSOR_ARGS = ("mask", "bias", "tiles", "cu_seqlens_q", "cu_seqlens_k", "dropout_seed")


def _save(ctx, inputs, output):
    """What both autograd formulas keep: the tensors (version-checked by autograd) and the rest."""
    q, k, v, *rest = inputs
    args = {"bias_grad": False, **dict(zip(_ARGS, rest))}
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, *(args[n] for n in _TENSOR_ARGS))
    ctx.args = {n: a for n, a in args.items() if n not in _TENSOR_ARGS}


def _grads(dq, dk, dv, dbias, bias_grad):
    """The forward's input gradients: q, k, v, mask, bias, then None for the rest of ``_ARGS``."""
    return (dq, dk, dv, None, dbias if bias_grad else None) + (None,) * (len(_ARGS) - 2)


def _setup_context(ctx, inputs, output):
    _save(ctx, inputs, output)
    lse = output[1]
    handed = getattr(_SLOTS, "forward", None)
    _SLOTS.forward = None
    ctx.launch = handed[1] if handed is not None and handed[0]() is lse else None


def _backward(ctx, dout, dlse):
    q, k, v, out, lse, mask, bias, tiles, cu_q, cu_k, seed = ctx.saved_tensors  # autograd checks their versions
    if dout is None:
        dout = torch.zeros_like(out)
    a = ctx.args
    _SLOTS.backward = None if ctx.launch is None else (q, lse, ctx.launch)
    try:
        dq, dk, dv, dbias = attention_backward_op(q, k, v, out, lse, dout, dlse, mask, bias, tiles, a["block_q"],
                                                  a["block_k"], cu_q, cu_k, a["scale"], a["left"], a["right"],
                                                  a["causal"], a["deterministic"], True, a["backend"], a["tuning"],
                                                  a["bugs"], a["dropout_p"], seed, a["bias_grad"])
    finally:
        _SLOTS.backward = None
    return _grads(dq, dk, dv, dbias, a["bias_grad"])


attention_op.register_autograd(_backward, setup_context=_setup_context)


class _Eager(torch.autograd.Function):
    """``attention_op`` and its autograd formula for an eager call: the same bodies (``_forward``,
    ``_backward_kernels``) without torch's custom-op dispatch (module docstring: what it costs). The
    backward runs on the forward's ``Launch``, kept on ``ctx``."""

    @staticmethod
    def forward(ctx, q, k, v, *args):
        out, lse, launch = _forward(q, k, v, *args)
        _save(ctx, (q, k, v, *args), (out, lse))
        ctx.launch = launch
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse, mask, bias, *_ = ctx.saved_tensors  # autograd checks their versions (and the masks')
        if dout is None:
            dout = torch.zeros_like(out)
        return _grads(*_backward_kernels(q, k, v, out, lse, dout, dlse, bias, ctx.launch), ctx.args["bias_grad"])


#: the positions in the forward op's arguments (q, k, v first) of its tensors and of ``requires_grad``
_TENSORS = (0, 1, 2) + tuple(3 + _ARGS.index(n) for n in _TENSOR_ARGS)
_REQUIRES_GRAD = 3 + _ARGS.index("requires_grad")


def traced(args) -> bool:
    """Whether something may be tracing or transforming a call with the forward op's ``args``: then it
    must see the custom op (``torch.compile``/``torch.export``, a dispatch mode such as FakeTensorMode
    or make_fx's proxy mode, a functorch transform, a tensor subclass)."""
    return (torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0
            or torch._C._are_functorch_transforms_active()
            or any(args[i] is not None and type(args[i]) is not torch.Tensor for i in _TENSORS))


def run(*args):
    """``attention_op(*args)`` -> (out, lse): the custom op when the call may be traced (``traced``),
    else the same bodies directly (``_Eager``; without autograd when no gradient was asked for)."""
    if traced(args):
        return attention_op(*args)
    if args[_REQUIRES_GRAD]:
        return _Eager.apply(*args)
    out, lse, _ = _forward(*args)
    return out, lse
