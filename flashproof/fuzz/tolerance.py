"""The tolerance rule — stated here once; no check anywhere carries its own atol.

For each compared tensor T (out, lse, dq, dk, dv) of a kernel run in dtype τ:

    max |T_kernel − T_oracle|  ≤  FACTOR[T] · max |T_naive − T_oracle|  +  floor(T_oracle, τ)

* T_oracle is float64 (the verified reference, or the dense float64 evaluation checked against
  it) on the *same* τ-rounded inputs the kernel receives;
* T_naive is the plain dense formula evaluated in τ (``naive``): scores, softmax and both matmuls
  in τ, so its error is the rounding error a straightforward τ implementation makes;
* FACTOR is 2 for the forward (out, lse) and 3 for the gradients — FlashAttention's own rule;
* floor(T, τ) = eps(τ) · M_T, one unit of τ's precision at the natural magnitude M_T of the terms
  that make up T (``magnitudes``): out — max|V|; lse — max|lse|; dv — max|dO|; dq —
  |scale|·max|dO|·max|V|·max|K|; dk — |scale|·max|dO|·max|V|·max|Q| (maxima over finite entries;
  at least τ's smallest normal), plus, for every T but lse, M_T · eps_stat · S, where S is the
  largest |score| and eps_stat the precision of the saved statistics (fp32; fp64 for fp64
  inputs): a kernel that saves LSE and recomputes p = exp(s − lse) (FlashAttention's backward,
  split-KV merging) perturbs every probability by that relative amount, which a naive softmax
  never does. The floor keeps a lucky exact baseline (e.g. a one-hot softmax whose gradient the
  naive run gets exactly 0) from demanding an exact kernel; bugs give O(1) relative errors.

Exact parts of the convention are not tolerances: where the oracle is non-finite (LSE = −inf of a
row with no allowed key) the kernel must return the same value, rows with no allowed key must be
exactly 0 in ``out`` and ``dq``, and a NaN anywhere is a deviation. If the naive baseline itself
overflows (its error is not finite) the bound is infinite and only those exact parts and
finiteness are checked; the verdict says so (``bounded=False``).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["FACTOR", "floor", "magnitudes", "Verdict", "judge", "naive"]

FACTOR = {"out": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0}


def _absmax(t: torch.Tensor) -> float:
    t = t.detach()
    fin = t[torch.isfinite(t)]
    return fin.abs().max().item() if fin.numel() else 0.0


def magnitudes(q, k, v, dout, lse, scale: float) -> dict:
    """M_T for each compared tensor T, and "score" = S = max |score| ≈ max |scale·q·k| (bounded by
    |scale|·max|q|·max|k|·D); arguments as the oracle sees them (unread entries zeroed)."""
    mq, mk, mv, mo = _absmax(q), _absmax(k), _absmax(v), _absmax(dout)
    mlse = _absmax(lse)
    return {"out": mv, "lse": mlse, "dv": mo, "dq": abs(scale) * mo * mv * mk,
            "dk": abs(scale) * mo * mv * mq, "score": max(mlse, abs(scale) * mq * mk * q.shape[-1])}


def floor(name: str, mags: dict, dtype: torch.dtype) -> float:
    """The noise floor of tensor ``name`` (module docstring), at least dtype's smallest normal."""
    info = torch.finfo(dtype)
    eps_stat = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps
    m = mags[name]
    stat = 0.0 if name == "lse" else m * eps_stat * mags["score"]
    return max(info.eps * m + stat, info.tiny)


class Verdict(NamedTuple):
    """One tensor's comparison. ``first`` is the first offending index (row-major), or None."""

    name: str
    ok: bool
    error: float          # max |kernel − oracle| over entries where the oracle is finite
    bound: float          # FACTOR · baseline_error + floor (inf when the baseline overflowed)
    baseline_error: float
    bounded: bool
    first: tuple | None
    got: float | None
    expected: float | None
    reason: str           # "", "nan", "non-finite", "convention", "tolerance"


def judge(name: str, got: torch.Tensor, ref: torch.Tensor, baseline: torch.Tensor, dtype: torch.dtype,
          mags: dict, exact_zero: torch.Tensor | None = None) -> Verdict:
    """Apply the rule to one tensor. got/baseline are moved to float64 CPU; ``mags`` is
    ``magnitudes(...)`` of the problem; ``exact_zero`` marks entries (broadcastable to ref) that the
    convention fixes to exactly 0."""
    if got.shape != ref.shape:
        raise ValueError(f"{name}: kernel returned shape {tuple(got.shape)}, oracle has {tuple(ref.shape)}")
    got = got.detach().to("cpu", torch.float64)
    baseline = baseline.detach().to("cpu", torch.float64)
    fin = torch.isfinite(ref)
    diff = torch.where(fin, (got - ref).abs(), torch.zeros_like(ref))
    diff = torch.where(fin & ~torch.isfinite(got), torch.full_like(ref, float("inf")), diff)
    base = torch.where(fin, (baseline - ref).abs(), torch.zeros_like(ref))
    base_err = base.max().item() if base.numel() else 0.0
    if base_err != base_err:  # NaN in the baseline
        base_err = float("inf")
    bounded = base_err != float("inf")
    bound = FACTOR[name] * base_err + floor(name, mags, dtype) if bounded else float("inf")
    error = diff.max().item() if diff.numel() else 0.0

    nan = torch.isnan(got)
    nonfinite_mismatch = ~fin & (got != ref)
    over = fin & (diff > bound)
    over = over | (fin & ~torch.isfinite(got))
    conv = torch.zeros_like(fin)
    if exact_zero is not None:
        conv = exact_zero.expand_as(ref) & (got != 0)
    for reason, bad in (("nan", nan), ("convention", nonfinite_mismatch | conv), ("non-finite", over & ~torch.isfinite(got)),
                        ("tolerance", over)):
        if bad.any():
            idx = tuple(int(i) for i in torch.nonzero(bad)[0])
            return Verdict(name, False, error, bound, base_err, bounded, idx, got[idx].item(), ref[idx].item(), reason)
    return Verdict(name, True, error, bound, base_err, bounded, None, None, None, "")


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, scale: float,
          dout: torch.Tensor | None = None, drop: torch.Tensor | None = None):
    """The baseline: the dense formula in the dtype of q, k, v (no upcast), on their device.

    q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv), allowed (B, Hq, Nq, Nk), dout like
    out, drop None or dropout's multipliers keep/(1 − p) (B, Hq, Nq, Nk) → ``(out, lse, grads)``
    where grads is (dq, dk, dv) when ``dout`` is given, else None."""
    from .oracle import masked_attention

    q, k, v = (t.detach().clone().requires_grad_(dout is not None) for t in (q, k, v))
    with torch.enable_grad():
        out, lse = masked_attention(q, k, v, allowed, scale, drop)
        grads = torch.autograd.grad(out, (q, k, v), dout) if dout is not None else None
    return out.detach(), lse.detach(), grads
