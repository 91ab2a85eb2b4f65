"""Additive float bias (a float ``attn_mask``) on the kernels, judged against the oracle's dense formula
in float64 (``flashproof.fuzz.oracle.masked_attention`` with ``bias``) under the one tolerance rule, the
naive baseline being the same formula in the kernel's dtype (``tolerance.naive(..., bias=...)``).
No tolerance is stated here.

A case is a feature case of ``support.kernel_cases`` (its causal / window / mask / varlen / GQA
structure) plus a bias shape: the bias broadcasts over the size-1 dims, and ``expand`` makes a
(B, 1, 1, Nk) key-padding bias a stride-0 view over the query rows (as SDPA's front passes it).
The bias holds −inf entries (``neg_inf``: that fraction of pairs) and, with ``dead_rows``, query rows
whose every entry is −inf (out 0, lse −inf, dq 0: the empty-row convention).
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from support.kernel_cases import Case, leaves, problem_of

from flashproof.fuzz.oracle import masked_attention, read_inputs, vjp
from flashproof.fuzz.tolerance import judge, magnitudes, naive
from flashproof.kernels import attention

__all__ = ["BiasCase", "BIAS_CASES", "make_bias", "run", "verdicts", "failures"]


class BiasCase(NamedTuple):
    id: str
    case: Case        # the feature case (shapes, causal / window / mask / varlen)
    shape: str        # "full" (B, Hq, Nq, Nk) | "heads" (1, Hq, Nq, Nk) | "batch" (B, 1, Nq, Nk) |
                      # "2d" (Nq, Nk) | "key_padding" (B, 1, 1, Nk) expanded to (B, 1, Nq, Nk)
    neg_inf: float = 0.0
    dead_rows: tuple = ()


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
    BiasCase("varlen_causal", Case("varlen", (1, 2, 1, 0, 0, 16, 16), {"lens": ([5, 0, 19], [7, 3, 30]),
                                                                        "causal": True}), "heads", 0.1),
]


def make_bias(bc: BiasCase, B, Hq, Nq, Nk, dtype, seed=0) -> torch.Tensor:
    """The case's bias in ``dtype`` (values ~ 2·N(0, 1), ``neg_inf`` of them −inf, ``dead_rows`` all −inf)."""
    g = torch.Generator().manual_seed(seed)
    dims = {"full": (B, Hq, Nq, Nk), "heads": (1, Hq, Nq, Nk), "batch": (B, 1, Nq, Nk), "2d": (Nq, Nk),
            "key_padding": (B, 1, 1, Nk)}[bc.shape]
    b = 2.0 * torch.randn(dims, generator=g, dtype=torch.float64)
    if bc.neg_inf:
        b = b.masked_fill(torch.rand(dims, generator=g) < bc.neg_inf, float("-inf"))
    for r in bc.dead_rows:
        b[..., r, :] = float("-inf")
    b = b.to(dtype)
    return b.expand(B, 1, Nq, Nk) if bc.shape == "key_padding" else b


def run(bc: BiasCase, dtype, backend: str, device: str = "cpu", bias_override=None):
    """(problem with the bias's −inf folded into ``allowed``, bias (float64), results dict on the CPU) of
    one call forward + backward on ``device``. ``bias_override``: the bias given to the kernel instead
    of the case's (a negative control)."""
    prob, kw = problem_of(bc.case, dtype)
    B, Hq, Nq, Nk = prob.allowed.shape
    bias = make_bias(bc, B, Hq, Nq, Nk, dtype)
    b4 = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape)).to(torch.float64)
    prob = prob._replace(allowed=prob.allowed & (b4 != float("-inf")))
    q, k, v = (t.detach().to(device).requires_grad_() for t in leaves(prob, dtype))
    kw = {n: x.to(device) if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    given = bias if bias_override is None else bias_override
    res = attention(q, k, v, bias=given.to(device), return_lse=True, backend=backend, tuning="first", **kw)
    grads = torch.autograd.grad(res.out, (q, k, v), prob.dout.to(device, dtype))
    got = {n: t.cpu() for n, t in zip(("out", "lse", "dq", "dk", "dv"), (res.out, res.lse, *grads))}
    return prob, b4, got


def verdicts(prob, b4, dtype, got):
    """The rule on out, lse, dq, dk, dv: oracle = the dense formula in float64 with the bias, baseline
    the same formula in ``dtype``."""
    clean = read_inputs(prob)
    x64 = [t.clone().requires_grad_() for t in clean]
    out, lse = masked_attention(*x64, prob.allowed, prob.scale, bias=b4)
    expected = dict(zip(("out", "lse", "dq", "dk", "dv"), (out.detach(), lse.detach(), *vjp(out, lse, x64, prob.dout))))
    base = naive(*(t.to(dtype) for t in clean), prob.allowed, prob.scale, prob.dout.to(dtype), bias=b4.to(dtype))
    baseline = {"out": base[0], "lse": base[1], "dq": base[2][0], "dk": base[2][1], "dv": base[2][2]}
    mags = magnitudes(*clean, prob.dout, expected["lse"], prob.scale)
    empty = (~prob.allowed.any(-1))[..., None]
    return [judge(n, got[n], expected[n], baseline[n], dtype, mags, exact_zero=empty if n in ("out", "dq") else None)
            for n in ("out", "lse", "dq", "dk", "dv")]


def failures(label, bad):
    return f"{label}: " + "; ".join(f"{v.name} {v.reason} at {v.first}: got {v.got!r}, expected {v.expected!r} "
                                    f"(error {v.error:.3g}, bound {v.bound:.3g})" for v in bad)
