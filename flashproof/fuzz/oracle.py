"""The oracle: the verified reference (``flashproof.verified``) run head by head, and, only at
sizes the pure-Python reference cannot reach, the dense formula in float64 torch.

``reference(problem, num=...)`` runs ``tiled_forward`` and ``tiled_backward`` of the verified
package on every (batch, query head) pair, in the number system ``num``: ``"float"`` (IEEE
double), ``"mpmath"`` (60 digits) or ``"interval"`` (a certified mpmath enclosure; the result
holds the midpoints and ``radius`` the half-widths). ``dense(problem)`` is the float64 torch
evaluation of the same dense formula; ``tests/test_fuzz_oracle.py`` checks it against
``reference`` on every family, so using it beyond the reference's reach rests on that test.
``oracle(problem)`` picks between the two by problem size.

All results are float64 CPU tensors: out (B, Hq, Nq, Dv), lse (B, Hq, Nq) natural log,
dq (B, Hq, Nq, D), dk (B, Hkv, Nk, D), dv (B, Hkv, Nk, Dv). A row with no allowed key has
out = 0, lse = −inf and zero gradients (the extension ``empty_rows="zero"``).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from flashproof import verified

from .problem import Problem

__all__ = ["Expected", "reference", "dense", "oracle", "work", "read_inputs", "masked_attention", "REFERENCE_MAX_WORK"]

#: Problems up to this many scalar multiply-adds (B·Hq·Nq·Nk·(D+Dv)) go to the pure-Python
#: reference (about 1 s of forward + backward); bigger ones go to ``dense``.
REFERENCE_MAX_WORK = 2_000_000


class Expected(NamedTuple):
    """The oracle's answer (float64 CPU tensors, shapes in the module docstring)."""

    out: torch.Tensor
    lse: torch.Tensor
    dq: torch.Tensor
    dk: torch.Tensor
    dv: torch.Tensor
    source: str                    # "verified:<num>" or "dense-float64-torch"
    radius: "Expected | None" = None  # half-widths of a certified ("interval") run


def work(problem: Problem) -> int:
    """B·Hq·Nq·Nk·(D+Dv): the multiply-adds of one dense forward."""
    s = problem.spec
    return s.batch * s.heads_q * s.n_q * s.n_k * (s.d + s.dv)


def oracle(problem: Problem, *, max_work: int = REFERENCE_MAX_WORK, device: str = "cpu") -> Expected:
    """The verified reference in float64 when the problem is small enough, else ``dense`` (run in
    float64 on ``device``)."""
    return reference(problem) if work(problem) <= max_work else dense(problem, device=device)


def _mid_rad(x) -> tuple[float, float]:
    if hasattr(x, "a") and hasattr(x, "b"):  # an mpmath interval [a, b]
        a, b = float(x.a), float(x.b)
        if a == b:
            return a, 0.0
        return (a + b) / 2, (b - a) / 2
    return float(x), 0.0


def reference(problem: Problem, *, num: str = "float") -> Expected:
    """Run the verified ``tiled_forward``/``tiled_backward`` on each (batch, query head)."""
    s = problem.spec
    group = s.heads_q // s.heads_kv
    shapes = {"out": problem.dout.shape, "lse": problem.dout.shape[:3], "dq": problem.q.shape,
              "dk": problem.k.shape, "dv": problem.v.shape}
    mid = {n: torch.zeros(sh, dtype=torch.float64) for n, sh in shapes.items()}
    rad = {n: torch.zeros(sh, dtype=torch.float64) for n, sh in shapes.items()}

    def put(name, index, rows):
        """Add a list of rows (or, for lse, a list of scalars) into mid/rad at ``index``."""
        for i, row in enumerate(rows):
            for a, x in ([(None, row)] if name == "lse" else enumerate(row)):
                pos = index + (i,) if a is None else index + (i, a)
                m, r = _mid_rad(x)
                mid[name][pos] += m
                rad[name][pos] += r

    for b in range(s.batch):
        for h in range(s.heads_q):
            hk = h // group
            Q, K, V = problem.q[b, h].tolist(), problem.k[b, hk].tolist(), problem.v[b, hk].tolist()
            G = problem.dout[b, h].tolist()
            allowed = [set(torch.nonzero(row).flatten().tolist()) for row in problem.allowed[b, h]]
            fwd = verified.tiled_forward(Q, K, V, scale=problem.scale, block=s.block, allowed=allowed,
                                         num=num, empty_rows="zero")
            grads = verified.tiled_backward(Q, K, V, G, fwd, scale=problem.scale, block=s.block,
                                            allowed=allowed, num=num, empty_rows="zero")
            put("out", (b, h), fwd.out)
            put("lse", (b, h), fwd.lse)
            put("dq", (b, h), grads.dq)
            put("dk", (b, hk), grads.dk)  # query heads of one group sum into their kv head
            put("dv", (b, hk), grads.dv)
    radius = Expected(*(rad[n] for n in shapes), source="radius") if num == "interval" else None
    return Expected(*(mid[n] for n in shapes), source=f"verified:{num}", radius=radius)


def dense(problem: Problem, *, device: str = "cpu") -> Expected:
    """The dense formula in float64 torch with autograd (any size; used beyond the reference).

    Entries that no allowed pair reads are replaced by 0 first: they cannot change the real
    result, and 0·NaN would otherwise poison the gradients."""
    q, k, v = (t.to(device).requires_grad_() for t in read_inputs(problem))
    with torch.enable_grad():
        out, lse = masked_attention(q, k, v, problem.allowed.to(device), problem.scale)
        grads = torch.autograd.grad(out, (q, k, v), problem.dout.to(device))
    cpu = lambda t: t.detach().to("cpu")  # noqa: E731
    return Expected(cpu(out), cpu(lse), *(cpu(g) for g in grads), source="dense-float64-torch")


def read_inputs(problem: Problem) -> tuple:
    """q, k, v with every entry that no allowed pair reads set to 0 (poison removed)."""
    s = problem.spec
    group = s.heads_q // s.heads_kv
    B, Hkv = problem.k.shape[:2]
    key_read = problem.allowed.reshape(B, Hkv, group, s.n_q, s.n_k).any(dim=2).any(dim=2)  # (B, Hkv, Nk)
    row_read = problem.allowed.any(dim=-1)                                                   # (B, Hq, Nq)
    return (torch.where(row_read[..., None], problem.q, 0.0), torch.where(key_read[..., None], problem.k, 0.0),
            torch.where(key_read[..., None], problem.v, 0.0))


def masked_attention(q, k, v, allowed, scale, drop=None):
    """Dense masked softmax attention in the dtype of q, k, v (autograd-able), following the
    empty-row convention. q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv),
    allowed (B, Hq, Nq, Nk) → out (B, Hq, Nq, Dv), lse (B, Hq, Nq). drop: None, or dropout's
    multipliers r = keep/(1 − p) (B, Hq, Nq, Nk): out = (r ∘ P) V, lse undropped."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)   # (B, Hq, Nk, D)
    v = v.repeat_interleave(group, dim=1)   # (B, Hq, Nk, Dv)
    s = (q @ k.transpose(-1, -2)) * scale   # (B, Hq, Nq, Nk)
    s = s.masked_fill(~allowed, float("-inf"))
    empty = ~allowed.any(dim=-1, keepdim=True)                  # (B, Hq, Nq, 1)
    s_safe = s.masked_fill(empty, 0.0)                          # never softmax an all −inf row
    p = torch.softmax(s_safe, dim=-1).masked_fill(empty, 0.0)
    lse = torch.logsumexp(s_safe, dim=-1).masked_fill(empty.squeeze(-1), float("-inf"))
    if drop is not None:
        p = p * drop.to(p.dtype)
    return p @ v, lse
