"""The oracle: the verified reference (``flashproof.verified``) run head by head, and, only at
sizes the pure-Python reference cannot reach, the dense formula in float64 torch.

``reference(problem, num=...)`` runs ``tiled_forward`` and ``tiled_backward`` of the verified
package on every (batch, query head) pair, in the number system ``num``: ``"float"`` (IEEE
double), ``"mpmath"`` (60 digits) or ``"interval"`` (a certified mpmath enclosure; the result
holds the midpoints and ``radius`` the half-widths). ``dense(problem)`` is the float64 torch
evaluation of the same dense formula; ``tests/test_fuzz_oracle.py`` checks it against
``reference`` on every family, so using it beyond the reference's reach rests on that test.
``oracle(problem)`` picks between the two by problem size.

``oracles(problem)`` is what the checks use: both evaluations, held to agree (``tolerance.agree``)
before any verdict — the verified reference where it fits, and the dense float64 formula always.
A disagreement raises ``HarnessError`` (exit 4), never a pass. Beyond the reference's reach the
agreement is checked on sampled rows of the forward (``AGREEMENT_ROWS`` query rows: the
reference on one row costs Nk·(D + Dv) multiply-adds), and the summary says so. The dense result
is also the independent "gold" the naive baseline's error is measured against.

All results are float64 CPU tensors: out (B, Hq, Nq, Dv), lse (B, Hq, Nq) natural log,
dq (B, Hq, Nq, D), dk (B, Hkv, Nk, D), dv (B, Hkv, Nk, Dv): the gradients of
Φ = Σ dout·out + Σ dlse·lse (the problem's two cotangents). A row with no allowed key has
out = 0, lse = −inf and zero gradients (the extension ``empty_rows="zero"``).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from flashproof import verified

from .errors import HarnessError
from .problem import Problem

__all__ = ["Expected", "Oracles", "reference", "dense", "oracle", "oracles", "work", "read_inputs",
           "masked_attention", "vjp", "REFERENCE_MAX_WORK", "AGREEMENT_ROWS"]

#: Problems up to this many scalar multiply-adds (B·Hq·Nq·Nk·(D+Dv)) go to the pure-Python
#: reference (about 1 s of forward + backward); bigger ones go to ``dense``.
REFERENCE_MAX_WORK = 2_000_000
#: Query rows (of batch 0, head 0, counted from the last, which reads the most keys under a causal
#: mask) on which the reference checks the dense oracle's forward beyond ``max_work``: one row of
#: 1025 keys at d = 128 costs the pure-Python reference ~0.15 s, about what a GPU example may take.
AGREEMENT_ROWS = 1


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


class Oracles(NamedTuple):
    """expected: what the kernel is judged against (the reference, or dense beyond its reach);
    gold: the dense float64 evaluation (the baseline's error is measured against it);
    agreement: "full" (every tensor compared) or "rows:<n>" (n forward rows compared);
    mags: ``tolerance.magnitudes`` of the problem (from the poison-free inputs and gold's LSE)."""

    expected: Expected
    gold: Expected
    agreement: str
    mags: dict


def oracles(problem: Problem, *, max_work: int = REFERENCE_MAX_WORK, device: str = "cpu",
            reference_fn=None, dense_fn=None) -> Oracles:
    """Both oracles of ``problem``, held to ``tolerance.agree``; ``HarnessError`` when they
    disagree. ``reference_fn`` / ``dense_fn`` replace the two evaluations (a test plants a wrong
    one there)."""
    from .tolerance import agree, magnitudes

    ref_fn, den_fn = reference_fn or reference, dense_fn or dense
    gold = den_fn(problem, device=device)
    # on the oracle's device: M_dS and the row sums' sizes are (B, Hq, Nq, Nk) reductions (tolerance.magnitudes)
    mags = magnitudes(*(t.to(device) for t in read_inputs(problem)), problem.dout.to(device), gold.lse,
                      problem.scale, problem.dlse, allowed=problem.allowed.to(device))
    if work(problem) <= max_work:
        exp = ref_fn(problem)
        pairs = [(n, getattr(exp, n), getattr(gold, n)) for n in ("out", "lse", "dq", "dk", "dv")]
        agreement = "full"
    else:
        exp = gold
        rows = list(range(max(problem.spec.n_q - AGREEMENT_ROWS, 0), problem.spec.n_q))
        part = ref_fn(_rows(problem, rows), forward_only=True)
        pairs = [("out", part.out[0, 0], gold.out[0, 0, rows]), ("lse", part.lse[0, 0], gold.lse[0, 0, rows])]
        agreement = f"rows:{len(rows)}"
    for name, a, b in pairs:
        v = agree(name, a, b, mags)
        if not v.ok:
            raise HarnessError(
                f"the two oracles disagree on {name} at {list(v.first)}: verified reference {v.got!r}, dense float64 "
                f"{v.expected!r} (|difference| up to {v.error:.3g}, agreement bound {v.bound:.3g}; "
                f"{problem.spec.describe()}). No verdict is given on this problem.")
    return Oracles(exp, gold, agreement, mags)


def _rows(problem: Problem, rows: list) -> Problem:
    """Batch 0, query head 0, the given query rows only (with their kv head): a problem the
    reference answers in Nk·(D + Dv) multiply-adds per row."""
    s = problem.spec
    hk = 0
    sub = s._replace(batch=1, heads_q=1, heads_kv=1, n_q=len(rows), seqlens=None)
    pick = lambda t: t[0:1, 0:1, rows]  # noqa: E731
    return problem._replace(spec=sub, q=pick(problem.q), k=problem.k[0:1, hk:hk + 1], v=problem.v[0:1, hk:hk + 1],
                            dout=pick(problem.dout), allowed=pick(problem.allowed),
                            dlse=None if problem.dlse is None else pick(problem.dlse),
                            cu_seqlens_q=None, cu_seqlens_k=None)


def _mid_rad(x) -> tuple[float, float]:
    if hasattr(x, "a") and hasattr(x, "b"):  # an mpmath interval [a, b]
        a, b = float(x.a), float(x.b)
        if a == b:
            return a, 0.0
        return (a + b) / 2, (b - a) / 2
    return float(x), 0.0


def reference(problem: Problem, *, num: str = "float", forward_only: bool = False) -> Expected:
    """Run the verified ``tiled_forward``/``tiled_backward`` on each (batch, query head)
    (``forward_only``: gradients left 0).

    The LSE cotangent λ = ``problem.dlse`` enters the reverse pass through its only place,
    γ_ij = p_ij(⟨G_i, V_j⟩ − δ_i + λ_i) (∂lse_i/∂s_ij = p_ij): the reference's ``tiled_backward``
    runs with one extra value column of zeros, a cotangent column of ones and an output column
    holding −λ_i, so that its δ'_i = ⟨G'_i, Y'_i⟩ = δ_i − λ_i and ⟨G'_i, V'_j⟩ = ⟨G_i, V_j⟩; the
    extra column's dV is dropped. Nothing else of the reverse pass reads Y."""
    s = problem.spec
    n = verified.resolve(num)
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
            put("out", (b, h), fwd.out)
            put("lse", (b, h), fwd.lse)
            if forward_only:
                continue
            if problem.dlse is None or not problem.dlse[b, h].any():
                grads = verified.tiled_backward(Q, K, V, G, fwd, scale=problem.scale, block=s.block, allowed=allowed,
                                                num=num, empty_rows="zero")
                put("dq", (b, h), grads.dq)
                put("dk", (b, hk), grads.dk)
                put("dv", (b, hk), grads.dv)
                continue
            lam = problem.dlse[b, h].tolist()
            V1 = [row + [0.0] for row in V]
            G1 = [row + [1.0] for row in G]
            Y1 = [list(row) + [n.const(-x)] for row, x in zip(fwd.out, lam)]
            grads = verified.tiled_backward(Q, K, V1, G1, fwd._replace(out=Y1), scale=problem.scale, block=s.block,
                                            allowed=allowed, num=num, empty_rows="zero")
            put("dq", (b, h), grads.dq)
            put("dk", (b, hk), grads.dk)  # query heads of one group sum into their kv head
            put("dv", (b, hk), [row[:-1] for row in grads.dv])
    radius = Expected(*(rad[n] for n in shapes), source="radius") if num == "interval" else None
    return Expected(*(mid[n] for n in shapes), source=f"verified:{num}", radius=radius)


def dense(problem: Problem, *, device: str = "cpu") -> Expected:
    """The dense formula in float64 torch with autograd (any size; used beyond the reference).

    Entries that no allowed pair reads are replaced by 0 first: they cannot change the real
    result, and 0·NaN would otherwise poison the gradients."""
    q, k, v = (t.to(device).requires_grad_() for t in read_inputs(problem))
    with torch.enable_grad():
        out, lse = masked_attention(q, k, v, problem.allowed.to(device), problem.scale)
        grads = vjp(out, lse, (q, k, v), problem.dout.to(device),
                    None if problem.dlse is None else problem.dlse.to(device))
    cpu = lambda t: t.detach().to("cpu")  # noqa: E731
    return Expected(cpu(out), cpu(lse), *(cpu(g) for g in grads), source="dense-float64-torch")


def vjp(out, lse, leaves, dout, dlse=None) -> tuple:
    """Gradients of Σ dout·out + Σ dlse·lse with respect to ``leaves`` (dlse None: out only).
    A row with no allowed key has the constant LSE −inf: its cotangent must contribute nothing
    (a kernel that forms p·dlse with p = e^(s − (−inf)) there is caught)."""
    if dlse is None:
        return torch.autograd.grad(out, leaves, dout)
    lse = lse.reshape(dlse.shape)
    return torch.autograd.grad((out, lse), leaves, (dout, dlse.to(lse.dtype)))


def read_inputs(problem: Problem) -> tuple:
    """q, k, v with every entry that no allowed pair reads set to 0 (poison removed)."""
    s = problem.spec
    group = s.heads_q // s.heads_kv
    B, Hkv = problem.k.shape[:2]
    key_read = problem.allowed.reshape(B, Hkv, group, s.n_q, s.n_k).any(dim=2).any(dim=2)  # (B, Hkv, Nk)
    row_read = problem.allowed.any(dim=-1)                                                   # (B, Hq, Nq)
    return (torch.where(row_read[..., None], problem.q, 0.0), torch.where(key_read[..., None], problem.k, 0.0),
            torch.where(key_read[..., None], problem.v, 0.0))


def masked_attention(q, k, v, allowed, scale, drop=None, bias=None):
    """Dense masked softmax attention in the dtype of q, k, v (autograd-able), following the
    empty-row convention. q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv),
    allowed (B, Hq, Nq, Nk) → out (B, Hq, Nq, Dv), lse (B, Hq, Nq). drop: None, or dropout's
    multipliers r = keep/(1 − p) (B, Hq, Nq, Nk): out = (r ∘ P) V, lse undropped. bias: None, or an
    additive float mask broadcastable to (B, Hq, Nq, Nk), added to the scaled scores (its −inf
    entries must be False in ``allowed``)."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)   # (B, Hq, Nk, D)
    v = v.repeat_interleave(group, dim=1)   # (B, Hq, Nk, Dv)
    s = (q @ k.transpose(-1, -2)) * scale   # (B, Hq, Nq, Nk)
    if bias is not None:
        s = s + torch.where(allowed, bias.to(s.dtype), 0.0)  # −inf entries are masked below
    s = s.masked_fill(~allowed, float("-inf"))
    empty = ~allowed.any(dim=-1, keepdim=True)                  # (B, Hq, Nq, 1)
    s_safe = s.masked_fill(empty, 0.0)                          # never softmax an all −inf row
    p = torch.softmax(s_safe, dim=-1).masked_fill(empty, 0.0)
    lse = torch.logsumexp(s_safe, dim=-1).masked_fill(empty.squeeze(-1), float("-inf"))
    if drop is not None:
        p = p * drop.to(p.dtype)
    return p @ v, lse
