"""Additive float bias (a float ``attn_mask``) on the kernels, judged against the oracle's dense formula
in float64 (``flashproof.fuzz.oracle.masked_attention`` with ``bias``) under the one tolerance rule, the
naive baseline being the same formula in the kernel's dtype (``tolerance.naive(..., bias=...)``).
No tolerance is stated here.

A case is a feature case of ``support.kernel_cases`` (its causal / window / mask / varlen / GQA
structure) plus a bias shape: the bias broadcasts over the size-1 dims, and ``expand`` makes a
(B, 1, 1, Nk) key-padding bias a stride-0 view over the query rows (as SDPA's front passes it).
The bias holds −inf entries (``neg_inf``: that fraction of pairs) and, with ``dead_rows``, query rows
whose every entry is −inf (out 0, lse −inf, dq 0: the empty-row convention).

With ``bias_grad=True`` the bias (the unexpanded tensor, for the key-padding case) requires grad and
its gradient dbias is judged too: the oracle's is autograd's through the dense float64 formula (the
broadcast dims summed by autograd), the baseline's the same formula in the kernel's dtype.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from support.kernel_cases import Case, leaves, problem_of

from flashproof.fuzz.oracle import masked_attention, read_inputs
from flashproof.fuzz.tolerance import judge, magnitudes
from flashproof.kernels import attention

__all__ = ["BiasCase", "BIAS_CASES", "make_bias", "run", "verdicts", "failures"]


class BiasCase(NamedTuple):
    id: str
    case: Case        # the feature case (shapes, causal / window / mask / varlen)
    shape: str        # "full" (B, Hq, Nq, Nk) | "heads" (1, Hq, Nq, Nk) | "batch" (B, 1, Nq, Nk) |
                      # "2d" (Nq, Nk) | "key_padding" (B, 1, 1, Nk) expanded to (B, 1, Nq, Nk)
    neg_inf: float = 0.0
    dead_rows: tuple = ()
    dead_keys: tuple = ()  # (start, stop): keys −inf for every query (a key tile the kernels skip)


BIAS_CASES = [
    BiasCase("full_gqa", Case("gqa", (2, 4, 2, 20, 37, 16, 16), {}), "full"),
    BiasCase("heads_causal_nq_lt_nk", Case("causal", (1, 2, 1, 20, 45, 16, 8), {"causal": True}), "heads", 0.2),
    BiasCase("batch_window_dead_rows", Case("window", (2, 2, 2, 33, 30, 16, 16), {"window": (9, 5)}), "batch",
             0.3, (0, 17, 32)),
    BiasCase("2d_neg_inf_dead_rows", Case("plain", (1, 2, 2, 24, 40, 16, 16), {}), "2d", 0.5, (3, 4, 23)),
    BiasCase("key_padding_expanded", Case("plain", (3, 2, 2, 18, 50, 16, 16), {}), "key_padding", 0.3),
    BiasCase("with_bool_mask", Case("mask", (1, 2, 2, 20, 33, 16, 16),
                                    {"mask": torch.rand(1, 2, 20, 33, generator=torch.Generator().manual_seed(4)) < 0.6}),
             "full", 0.2),
    # keys 64..127 −inf throughout: the torch path drops that key tile and walks the others as an index
    # list (its dS is written through it), the Triton kernels mask every pair of it
    BiasCase("dead_key_tile", Case("plain", (1, 2, 1, 20, 200, 16, 16), {}), "batch", 0.1, (), (64, 128)),
    BiasCase("varlen_causal", Case("varlen", (1, 2, 1, 0, 0, 16, 16), {"lens": ([5, 0, 19], [7, 3, 30]),
                                                                        "causal": True}), "heads", 0.1),
]


def make_bias(bc: BiasCase, B, Hq, Nq, Nk, dtype, seed=0, grad=False) -> torch.Tensor:
    """The case's bias in ``dtype`` (values ~ 2·N(0, 1), ``neg_inf`` of them −inf, ``dead_rows`` all −inf);
    ``grad``: the tensor before the key-padding case's expand requires grad."""
    g = torch.Generator().manual_seed(seed)
    dims = {"full": (B, Hq, Nq, Nk), "heads": (1, Hq, Nq, Nk), "batch": (B, 1, Nq, Nk), "2d": (Nq, Nk),
            "key_padding": (B, 1, 1, Nk)}[bc.shape]
    b = 2.0 * torch.randn(dims, generator=g, dtype=torch.float64)
    if bc.neg_inf:
        b = b.masked_fill(torch.rand(dims, generator=g) < bc.neg_inf, float("-inf"))
    for r in bc.dead_rows:
        b[..., r, :] = float("-inf")
    if bc.dead_keys:
        b[..., bc.dead_keys[0]:bc.dead_keys[1]] = float("-inf")
    b = b.to(dtype).requires_grad_(grad)
    return b.expand(B, 1, Nq, Nk) if bc.shape == "key_padding" else b


def _leaf(bias):
    """The tensor before the key-padding case's expand (where a bias's gradient lands; moved to the
    device and expanded there, so that the kernel reads the stride-0 view), else the bias itself."""
    return bias._base if bias._base is not None else bias


def run(bc: BiasCase, dtype, backend: str, device: str = "cpu", bias_override=None, bias_grad=False):
    """(problem with the bias's −inf folded into ``allowed``, the case's bias (on the CPU),
    results dict on the CPU: out, lse, dq, dk, dv, and dbias with ``bias_grad``) of one call forward +
    backward on ``device``. ``bias_override``: the bias given to the kernel instead of the case's (a
    negative control)."""
    prob, kw = problem_of(bc.case, dtype)
    B, Hq, Nq, Nk = prob.allowed.shape
    bias = make_bias(bc, B, Hq, Nq, Nk, dtype, grad=bias_grad)
    b4 = bias.detach().reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
    prob = prob._replace(allowed=prob.allowed & (b4 != float("-inf")))
    q, k, v = (t.detach().to(device).requires_grad_() for t in leaves(prob, dtype))
    kw = {n: x.to(device) if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    kernel_bias = bias if bias_override is None else bias_override
    leaf = _leaf(kernel_bias)
    given = leaf.detach().to(device).requires_grad_(bias_grad)
    given_view = given.expand(kernel_bias.shape) if leaf is not kernel_bias else given
    res = attention(q, k, v, bias=given_view, return_lse=True, backend=backend, tuning="first", **kw)
    inputs = (q, k, v, given) if bias_grad else (q, k, v)
    grads = torch.autograd.grad(res.out, inputs, prob.dout.to(device, dtype))
    names = ("out", "lse", "dq", "dk", "dv", "dbias")
    got = {n: t.cpu() for n, t in zip(names, (res.out, res.lse, *grads))}
    return prob, bias, got


def _dense(x64, bias, prob, dtype):
    """out, lse and the gradients (of Σ dout·out) of the dense formula with the bias, in ``dtype``; the
    bias's (in its own, unexpanded shape) last when it requires grad."""
    xs = [t.detach().to(dtype).requires_grad_() for t in x64]
    leaf = _leaf(bias).detach().to(dtype).requires_grad_()
    b = leaf.expand(bias.shape) if bias._base is not None else leaf
    with torch.enable_grad():
        out, lse = masked_attention(*xs, prob.allowed, prob.scale, bias=b.reshape((1,) * (4 - b.dim()) + tuple(b.shape)))
        grads = torch.autograd.grad(out, (*xs, leaf), prob.dout.to(dtype))
    return (out.detach(), lse.detach(), *grads)


def verdicts(prob, bias, dtype, got):
    """The rule on out, lse, dq, dk, dv (and dbias when ``got`` has it): oracle = the dense formula in
    float64 with the bias, baseline the same formula in ``dtype``."""
    clean = read_inputs(prob)
    names = [n for n in ("out", "lse", "dq", "dk", "dv", "dbias") if n in got]
    expected = dict(zip(names, _dense(clean, bias, prob, torch.float64)))
    baseline = dict(zip(names, _dense(clean, bias, prob, dtype)))
    mags = magnitudes(*clean, prob.dout, expected["lse"], prob.scale)
    empty = (~prob.allowed.any(-1))[..., None]
    return [judge(n, got[n], expected[n], baseline[n], dtype, mags, exact_zero=empty if n in ("out", "dq") else None)
            for n in names]


def failures(label, bad):
    return f"{label}: " + "; ".join(f"{v.name} {v.reason} at {v.first}: got {v.got!r}, expected {v.expected!r} "
                                    f"(error {v.error:.3g}, bound {v.bound:.3g})" for v in bad)
