"""Dropout checks shared by tests/kernels/test_dropout*.py: the kernels' dropout judged against the
verified reference given the SAME keep bits, under the one tolerance rule.

``run_and_judge(case, dtype, backend, p, seed)`` calls ``attention(..., dropout_p=p, dropout_seed=seed)``
forward and backward on a feature case (``support.kernel_cases``), reads the call's keep bits from
``dropout_mask(seed, p, shape, cu_seqlens_k=…)`` (the kernels' own counter-based bits, as a tensor), runs the
verified ``tiled_forward``/``tiled_backward`` with ``dropout=Dropout(keep, realised_p(p))`` on every (batch, query head) in
float64, and applies ``tolerance.judge`` to out, lse, dq, dk, dv, the naive baseline being the dense
dropped-out formula in the kernel's dtype (``tolerance.naive(..., drop=r)``). No tolerance is stated here.
"""
from __future__ import annotations

import torch
from support.kernel_cases import Case, leaves, problem_of

from flashproof import verified
from flashproof.fuzz.oracle import read_inputs
from flashproof.fuzz.tolerance import judge, magnitudes, naive
from flashproof.kernels import attention
from flashproof.kernels.attention import dropout_mask
from flashproof.kernels.attention.dropout import realised_p

__all__ = ["DROP_CASES", "reference", "verdicts", "run", "run_and_judge", "failures"]

#: small feature cases (B, Hq, Hkv, Nq, Nk, D, Dv): tiles of 16 keys cross several times
DROP_CASES = [
    Case("plain", (1, 2, 2, 20, 37, 16, 16), {}),
    Case("causal_gqa", (2, 4, 2, 19, 33, 16, 8), {"causal": True}),
    Case("window_mask_empty_rows", (1, 2, 1, 18, 40, 16, 16),
         {"window": (9, 5), "mask": torch.rand(1, 2, 18, 40, generator=torch.Generator().manual_seed(3)) < 0.5}),
    Case("varlen", (1, 2, 1, 0, 0, 16, 16), {"lens": ([5, 0, 1, 20], [7, 3, 0, 30]), "causal": True}),
]


def reference(prob, keep: torch.Tensor, p: float, num: str = "float") -> dict:
    """The verified reference with ``dropout=Dropout(keep[b, h], realised_p(p))`` per (batch, query head),
    p the call's dropout_p (the kernels realise the drop probability t/2¹⁶ and scale by its inverse keep
    probability): float64 CPU tensors out, lse, dq, dk, dv (empty rows: 0 / −inf, the extension)."""
    p = realised_p(p)
    s = prob.spec
    group = s.heads_q // s.heads_kv
    res = {"out": torch.zeros(prob.dout.shape, dtype=torch.float64),
           "lse": torch.zeros(prob.dout.shape[:3], dtype=torch.float64),
           "dq": torch.zeros(prob.q.shape, dtype=torch.float64), "dk": torch.zeros(prob.k.shape, dtype=torch.float64),
           "dv": torch.zeros(prob.v.shape, dtype=torch.float64)}
    for b in range(s.batch):
        for h in range(s.heads_q):
            hk = h // group
            Q, K, V = prob.q[b, h].tolist(), prob.k[b, hk].tolist(), prob.v[b, hk].tolist()
            allowed = [set(torch.nonzero(row).flatten().tolist()) for row in prob.allowed[b, h]]
            drop = verified.Dropout(keep[b, h].to(torch.int64).tolist(), p)
            kw = dict(scale=prob.scale, block=s.block, allowed=allowed, num=num, empty_rows="zero", dropout=drop)
            fw = verified.tiled_forward(Q, K, V, **kw)
            gr = verified.tiled_backward(Q, K, V, prob.dout[b, h].tolist(), fw, **kw)
            res["out"][b, h] = torch.tensor(fw.out, dtype=torch.float64).reshape(res["out"][b, h].shape)
            res["lse"][b, h] = torch.tensor([float(x) for x in fw.lse], dtype=torch.float64)
            res["dq"][b, h] = torch.tensor(gr.dq, dtype=torch.float64).reshape(res["dq"][b, h].shape)
            res["dk"][b, hk] += torch.tensor(gr.dk, dtype=torch.float64).reshape(res["dk"][b, hk].shape)
            res["dv"][b, hk] += torch.tensor(gr.dv, dtype=torch.float64).reshape(res["dv"][b, hk].shape)
    return res


def verdicts(prob, dtype, expected: dict, got: dict, keep: torch.Tensor, p: float):
    """The tolerance rule on each of out, lse, dq, dk, dv; the baseline is the dropped-out dense
    formula in ``dtype`` with the same keep bits and the realised drop probability of the call's p."""
    p = realised_p(p)
    clean = read_inputs(prob)
    r = keep.to(torch.float64) / (1.0 - p)
    base = naive(*(t.to(dtype) for t in clean), prob.allowed, prob.scale, prob.dout.to(dtype), drop=r)
    mags = magnitudes(*clean, prob.dout, expected["lse"], prob.scale, drop=1.0 / (1.0 - p))
    empty = prob.empty_rows[..., None]
    baseline = {"out": base[0], "lse": base[1], "dq": base[2][0], "dk": base[2][1], "dv": base[2][2]}
    return [judge(n, got[n], expected[n], baseline[n], dtype, mags, exact_zero=empty if n in ("out", "dq") else None)
            for n in ("out", "lse", "dq", "dk", "dv")]


def run(case: Case, dtype, backend: str, p: float, seed: int | None, device: str = "cpu"):
    """(problem, kw, results dict out/lse/dq/dk/dv on the CPU) of one dropout call forward +
    backward, its tensors on ``device``."""
    prob, kw = problem_of(case, dtype)
    q, k, v = (t.detach().to(device).requires_grad_() for t in leaves(prob, dtype))
    kw = {n: x.to(device) if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    res = attention(q, k, v, return_lse=True, backend=backend, tuning="first", dropout_p=p, dropout_seed=seed, **kw)
    grads = torch.autograd.grad(res.out, (q, k, v), prob.dout.to(device, dtype))
    return prob, kw, {n: t.cpu() for n, t in zip(("out", "lse", "dq", "dk", "dv"), (res.out, res.lse, *grads))}


def failures(label, bad):
    return f"{label}: " + "; ".join(f"{v.name} {v.reason} at {v.first}: got {v.got!r}, expected {v.expected!r} "
                                    f"(error {v.error:.3g}, bound {v.bound:.3g})" for v in bad)


def run_and_judge(case: Case, dtype, backend: str, p: float, seed: int, mask_seed: int | None = None,
                  device: str = "cpu"):
    """Judge one dropout call (tensors on ``device``) against the reference run with the keep bits of
    ``mask_seed`` (default: the call's own seed); returns the failing verdicts."""
    prob, _, got = run(case, dtype, backend, p, seed, device)
    keep = dropout_mask(seed if mask_seed is None else mask_seed, p, tuple(prob.allowed.shape),
                        cu_seqlens_k=prob.cu_seqlens_k)
    expected = reference(prob, keep, p)
    return [v for v in verdicts(prob, dtype, expected, got, keep, p) if not v.ok]
