"""The tolerance rule — stated here once; no check anywhere carries its own atol.

For each compared tensor T (out, lse, dq, dk, dv, and dbias, the gradient of an additive bias) of a
kernel run in dtype τ:

    max |T_kernel − T_oracle|  ≤  FACTOR[T] · max |T_naive − T_oracle|  +  floor(T_oracle, τ)

* T_oracle is float64 (the verified reference, or the dense float64 evaluation beyond its reach)
  on the *same* τ-rounded inputs the kernel receives;
* T_naive is the plain dense formula evaluated in τ (``naive``): scores, softmax and both matmuls
  in τ, so its error is the rounding error a straightforward τ implementation makes. That error is
  measured against T_gold, an evaluation independent of the oracle (the dense float64 formula,
  ``oracle.dense``), never against T_oracle itself: a wrong oracle would otherwise widen its own
  bound (the naive run sits near the kernel, so |naive − wrong oracle| ≈ |kernel − wrong oracle|
  and every kernel passed at error/bound ≈ 0.5). Before any verdict the two oracles must agree
  (``agree`` below); a disagreement is a harness error, never a pass;
* FACTOR is 2 for the forward (out, lse) and 3 for the gradients (dbias included) — FlashAttention's
  own rule;
* floor(T, τ) = eps(τ)·M_T + M_T·eps_acc·S (T ≠ lse) + M_T·2γ_Dv (T ∈ dq, dk, dbias)
  + R_T·γ_(n_T) (T ∈ dq, dk, dv), where M_T is the natural magnitude of the terms that make up T
  (``magnitudes``), S the largest |score|, eps_acc the precision the kernel computes and saves its
  statistics in (fp32; fp64 for fp64 inputs) and γ_n = n·u/(1 − n·u), u = eps_acc/2, the
  classical bound on the relative rounding error of an n-term dot product in any order (Higham,
  Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1: |fl(xᵀy) − xᵀy| ≤ γ_n·|x|ᵀ|y|).
  The four terms:

  - eps(τ)·M_T, one unit of τ's precision at M_T. M_T: out — max|V|; lse — S + 2 ln Nk + 1
    (lse = m + log ℓ is the sum of the running max m, a score, |m| ≤ S, and log ℓ ∈ [0, ln Nk]: a
    correct kernel rounds terms of that size, and its scores, summed in another order than the
    naive run's, differ by units of eps·S; the + 1 is log's argument: a relative rounding of ℓ is
    an absolute error of lse. In float64, where the naive logsumexp is often exact, our
    online-softmax LSE was 1.1–1.6 units off at |lse| ≈ 11 and ≈ 6e4); dv — max|dO|; dbias
    (= dS = P ∘ (dP − δ + dLSE), summed over the bias's broadcast dims) — M_dS = max_ij Σ_d
    |dO_id|·|V_jd| + max|dLSE|; dq — |scale|·M_dS·max|K|; dk — the same with max|Q| (maxima over
    finite entries; at least τ's smallest normal). With dropout every M_T but lse's is multiplied
    by the largest multiplier r = 1/(1 − p) (a kept probability is scaled by r, so out, dV and dP
    are sums of terms up to r times larger).
  - M_T·eps_acc·S: a kernel that saves LSE and recomputes p = exp(s − lse) (FlashAttention's
    backward, split-KV merging) perturbs every probability by that relative amount, which a
    naive softmax never does.
  - M_T·2γ_Dv: dS is formed from dP_ij = ⟨dO_i, V_j⟩ and δ_i = ⟨dO_i, O_i⟩, two Dv-term dot
    products whose |dO_i|ᵀ|V_j| and |dO_i|ᵀ|O_i| are at most M_dS (O_i is a convex combination of
    the V_j), so each is off by at most γ_Dv·M_dS whatever the order. A kernel that forms δ from O
    (FlashAttention's backward: δ must be known before the key loop) and dP from a matmul
    rounds the two in different orders, where the naive softmax backward's Σ_j P_ij dP_ij may
    cancel dP exactly (a row with one allowed key: P = 1, the naive dS is exactly dLSE). Through
    dq_i = scale·Σ_j dS_ij K_j that is at most M_dq·2γ_Dv, since Σ_j P_ij = 1; dk and dbias take
    the same relative term. Found by a long campaign (docs/fuzz.md, "Findings of long campaigns"):
    our dP − δ on such a row was 1 ulp of |dP| ≈ 9.3 off at Dv = 32 and 4 ulp of 23.5 (1.2
    eps_acc·M_dS) at Dv = 64, beyond one unit of eps(τ) at any M_dS.

  - R_T·γ_(n_T): dq, dk and dv are long sums, dQ_i = scale·Σ_j dS_ij K_j over the keys, and
    dK_j = scale·Σ_i dS_ij Q_i and dV_j = Σ_i r_ij P_ij dO_i over every query row of every head of
    the kv head's group, and a sum of n products computed in any order is off by at most
    γ_n·Σ|x||y| (the bound above, Higham §3.1), where a library matmul (the naive run) sums in
    blocks or pairs and lands far closer: FACTOR × its error does not cover a correct kernel that
    accumulates sequentially, and one unit of eps at M_T (the size of one term) does not either.
    R_T = Σ|x||y|, maximised over T's entries (``RowSums``): dv — r·Σ_i P_ij|dO_id|; dk —
    |scale|·Σ_i |dS_ij||Q_id|; dq — |scale|·max|K|·Σ_j |dS_ij| (≥ |scale|·Σ_j |dS_ij||K_jd|, at a
    row sum's cost). P is rebuilt from the scores and the oracle's LSE, P_ij = e^(s_ij − lse_i) on
    the allowed pairs (cheap: one (Nq × D)·(D × Nk) product per chunk of rows, and honest: that is
    the probability itself), and dS is the float64
    P(dP − δ + dLSE) itself, not a bound on it: a one-key column's dP − δ is 0, and 2·max|dP| in its
    place had inflated dk's term 80-fold. The computed dS differs from it by the 2γ_Dv term above,
    whose product with γ_n is negligible. n_T is the largest number of allowed terms any entry
    sums (terms of a masked pair are exact zeros and add no rounding): dq — the most allowed keys
    of a row (Nk without the mask); dk, dv — the most allowed (head, row) pairs of a key over its
    group (G·Nq without the mask; a varlen key sees its own sequence's rows only). Without the mask
    or the LSE, or with dropout (whose multipliers the rule does not see), ``magnitudes`` falls back
    to upper bounds (module functions' docstrings), never to smaller values.
    Found on an H200 (docs/fuzz.md, "Findings of long campaigns"): the Triton backward's fp32 dV of
    a GQA one-key column (8 heads × 129 rows, P = 1) was 1.23e-4 off, bit for bit a sequential fp32
    loop over the 1,032 rows, against a bound of 5.2e-5 (the naive run's blocked sums: 1.6e-5).
    What it costs: γ_n·Σ|x||y| is a worst case (that sequential sum's error is 1/440 of it); on the
    specs of docs/fuzz.md the fp32 and fp64 dv floors grew 1.5–7× (430–1,600× on one-key GQA
    columns), dq's and dk's 1.0–1.5× (10–32× on those columns); bf16 and fp16 floors (eps(τ) ≫
    eps_acc) barely move. Every planted bug is still caught, but a dV whose inputs are rounded to TF32 (10
    mantissa bits) inside an fp32 kernel now passes on large sums (docs/fuzz.md). Not covered: out
    (Σ_j P_ij V_j) and lse (log Σ_j e^(s_ij − m)) are sums over keys too and carry no γ_Nk term
    (no finding has needed one; for out the proved rule is the a-priori bound); dbias's sum over the
    bias's broadcast dims has no γ term (``magnitudes`` does not see the bias's shape).

  The floor keeps a lucky exact baseline (e.g. a one-hot softmax whose gradient the naive run gets
  exactly 0) from demanding an exact kernel; bugs give O(1) relative errors.

Exact parts of the convention are not tolerances: where the oracle is non-finite (LSE = −inf of a
row with no allowed key) the kernel must return the same value, rows with no allowed key must be
exactly 0 in ``out`` and ``dq``, and a NaN anywhere is a deviation. Where the oracle's finite value
lies beyond τ's range (|T_oracle| at or above τ's overflow threshold, e.g. 65520 in fp16: a GQA dK
sums its query heads' contributions and can exceed fp16 while each is finite), the correctly
rounded τ result is that signed infinity, so a kernel returning exactly it has no error there; any
other infinity is a deviation. If the naive baseline itself
overflows (its error is not finite) the bound is infinite and only those exact parts and
finiteness are checked; the verdict says so (``bounded=False``).

The proved rule (``--tolerance proved``, ``rule="proved"``) replaces the bound of ``out`` and ``lse``
by the a-priori floating-point error bound of EXT-FP-ERROR (``verified/fp_bound.py``, derived by
running the reference on an error-bounding number system): for inputs in fp32, bf16 or fp16 with
fp32 accumulation, per entry, from n_k = Nk, d = D, the maxima of |Q|, |K|, |V| and the scale, at
block size b = 1 (the kernel's block is not known here; b = 1 gives the largest bound of every block
size). It depends on no baseline and no oracle. The gradients have no proved bound: they keep the
empirical rule. fp64 inputs are not covered (their accumulation is fp64): asking for it is an error.

Oracle agreement (``agree``): the verified reference and the dense float64 formula, two
independent float64 evaluations of one function, must satisfy for every T

    max |T_reference − T_dense|  ≤  AGREEMENT · M_T · (1 + S)

with AGREEMENT = 2⁻³⁰ (float64 carries 52 bits; two correct evaluations differ by a few units of
2⁻⁵² times the conditioning factor 1 + S, so 2⁻³⁰ leaves a million-fold margin for rounding while
any error of the formula — a wrong sign, base, mask or index — is O(1) relative), and the same
non-finite entries (the LSE −inf of rows with no allowed key).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

__all__ = ["FACTOR", "AGREEMENT", "RULES", "RowSums", "floor", "magnitudes", "proved_bound", "Verdict", "judge", "agree", "naive"]

RULES = ("empirical", "proved")
_PROVED_FORMATS = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}

FACTOR = {"out": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dbias": 3.0}
AGREEMENT = 2.0 ** -30


def _absmax(t: torch.Tensor) -> float:
    t = t.detach()
    fin = t[torch.isfinite(t)]
    return fin.abs().max().item() if fin.numel() else 0.0


def _finite_abs(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().to(torch.float64)
    return torch.where(torch.isfinite(t), t.abs(), torch.zeros_like(t))


#: entries of |dO| @ |V|ᵀ formed at once by ``_dot_magnitude`` (query rows are taken in chunks)
_DOT_CHUNK = 1 << 24


def _dot_magnitude(dout: torch.Tensor, v: torch.Tensor) -> float:
    """max over (b, h, i, j) of Σ_d |dO[b, h, i, d]|·|V[b, h // G, j, d]| (G = Hq // Hkv; non-finite
    entries count 0): the largest |dP_ij| = |⟨dO_i, V_j⟩| can be, which also bounds |δ_i| (module
    docstring). dout (B, Hq, Nq, Dv), v (B, Hkv, Nk, Dv); a cotangent with no finite non-zero entry
    (callers that judge out and lse only pass a zero placeholder) gives 0."""
    ado = _finite_abs(dout)
    if not ado.any():
        return 0.0
    if ado.dim() != 4 or v.dim() != 4 or ado.shape[-1] != v.shape[-1] or ado.shape[1] % v.shape[1]:
        raise ValueError(f"dout must be (B, Hq, Nq, Dv) for v (B, Hkv, Nk, Dv) = {tuple(v.shape)} with Hq a "
                         f"multiple of Hkv, received dout of shape {tuple(dout.shape)}")
    B, Hq, Nq, _ = ado.shape
    Hkv, Nk = v.shape[1], v.shape[2]
    ado = ado.unflatten(1, (Hkv, Hq // Hkv))                  # (B, Hkv, G, Nq, Dv)
    avt = _finite_abs(v).to(ado.device).unsqueeze(2).transpose(-1, -2)  # (B, Hkv, 1, Dv, Nk)
    rows = max(1, _DOT_CHUNK // max(1, B * Hq * Nk))
    return max((ado[..., i0:i0 + rows, :] @ avt).max().item() for i0 in range(0, Nq, rows))


#: entries of one (B, Hq, rows, Nk) chunk of ``_row_sums`` (it holds four such tensors at once)
_SUM_CHUNK = 1 << 22


class RowSums(NamedTuple):
    """The sizes Σ|x||y| of the reductions that form the gradients (module docstring), each a max
    over the gradient's entries: dv — Σ over a kv head's query rows (all heads of its group) of
    r·P_ij·|dO_id|; dk — |scale|·Σ over those rows of |dS_ij|·|Q_id|; dq — |scale|·max|K|·Σ over
    keys of |dS_ij|, which bounds Σ_j |dS_ij|·|K_jd| at a row sum's cost instead of a matmul's."""

    dv: float
    dk: float
    dq: float


def _finite(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().to(torch.float64)
    return torch.where(torch.isfinite(t), t, torch.zeros_like(t))


def _row_sums(q, k, v, dout, lse, scale: float, dlse=None, drop: float = 1.0, allowed=None) -> RowSums:
    """``RowSums`` of a problem, from the probabilities rebuilt from the scores and the LSE,
    P̄_ij = min(1, e^(scale·⟨q_i, k_j⟩ − lse_i)): P itself on an allowed pair; 0 on a pair ``allowed``
    (B, Hq, Nq, Nk) excludes and on a row whose LSE is −inf (no allowed key). Without ``allowed`` a
    masked pair keeps that upper bound of its 0; without an LSE (``lse.numel() == 0``: callers that
    have none) every P̄ is 1. dS_ij = P_ij(r_ij·dP_ij − δ_i + dlse_i), dP_ij = ⟨dO_i, V_j⟩, is the
    float64 value itself when P̄ = P on every pair (``allowed`` and an LSE given) and there is no
    dropout (δ_i = Σ_j P_ij dP_ij); otherwise the upper bound P̄_ij(r·|dP_ij| + r·max_j' |dP_ij'| +
    |dlse_i|), the max over the row's pairs with P̄ > 0 (|δ_i| ≤ Σ_j P_ij r |dP_ij|). Query rows are
    taken in chunks (``_SUM_CHUNK`` entries). q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv),
    dout (B, Hq, Nq, Dv), lse and dlse (B, Hq, Nq) or as many entries; non-finite entries of q, k, v,
    dout count 0; a zero cotangent (the placeholder of forward-only callers) gives zeros."""
    B, Hq, Nq, _ = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    dev = q.device
    go = _finite(dout).to(dev)
    if not go.any() or not Nq * Nk:
        return RowSums(0.0, 0.0, 0.0)
    if go.shape[:3] != (B, Hq, Nq):
        raise ValueError(f"dout must be (B, Hq, Nq, Dv) = ({B}, {Hq}, {Nq}, Dv) like q, received {tuple(dout.shape)}")
    for name, t in (("lse", lse), ("dlse", dlse)):
        if t is not None and t.numel() not in (0, B * Hq * Nq):
            raise ValueError(f"{name} must have B·Hq·Nq = {B * Hq * Nq} entries (or none), received shape "
                             f"{tuple(t.shape)}")
    G = Hq // Hkv
    qf = _finite(q).to(dev)
    kt = _finite(k).to(dev).repeat_interleave(G, dim=1)                   # (B, Hq, Nk, D)
    vt = _finite(v).to(dev).repeat_interleave(G, dim=1).transpose(-1, -2)  # (B, Hq, Dv, Nk)
    lse = None if lse.numel() == 0 else lse.detach().to(device=dev, dtype=torch.float64).reshape(B, Hq, Nq, 1)
    lam = (torch.zeros(B, Hq, Nq, 1, dtype=torch.float64, device=dev) if dlse is None or dlse.numel() == 0
           else _finite(dlse).to(dev).reshape(B, Hq, Nq, 1))
    exact = lse is not None and allowed is not None and drop == 1.0
    col_do = torch.zeros(B, Hq, Nk, go.shape[-1], dtype=torch.float64, device=dev)
    col_q = torch.zeros(B, Hq, Nk, q.shape[-1], dtype=torch.float64, device=dev)
    dq = 0.0
    rows = max(1, _SUM_CHUNK // max(1, B * Hq * Nk))
    for i0 in range(0, Nq, rows):
        sl = slice(i0, min(i0 + rows, Nq))
        if lse is None:
            pb = torch.ones(B, Hq, sl.stop - i0, Nk, dtype=torch.float64, device=dev)
        else:
            s = (qf[:, :, sl] @ kt.transpose(-1, -2)) * scale                   # (B, Hq, rows, Nk)
            ls = lse[:, :, sl]
            pb = torch.where(torch.isfinite(ls), torch.exp(s - ls).clamp(max=1.0), 1.0)
            pb = torch.where(ls == float("-inf"), 0.0, pb)                      # a row with no allowed key
        if allowed is not None:
            pb = torch.where(allowed[:, :, sl].to(dev), pb, 0.0)
        dp = go[:, :, sl] @ vt                                                  # (B, Hq, rows, Nk)
        if exact:
            ds = (pb * (dp - (pb * dp).sum(-1, keepdim=True) + lam[:, :, sl])).abs()
        else:
            row_max = torch.where(pb > 0, dp.abs(), 0.0).amax(-1, keepdim=True)
            ds = pb * (drop * dp.abs() + drop * row_max + lam[:, :, sl].abs())
        col_do += pb.transpose(-1, -2) @ go[:, :, sl].abs()                     # (B, Hq, Nk, Dv)
        col_q += ds.transpose(-1, -2) @ qf[:, :, sl].abs()                      # (B, Hq, Nk, D)
        dq = max(dq, ds.sum(-1).max().item())                                   # max_i Σ_j |dS_ij|
    per_kv = lambda t: t.unflatten(1, (Hkv, G)).sum(2).max().item()  # noqa: E731  over the group's heads
    return RowSums(drop * per_kv(col_do), abs(scale) * per_kv(col_q), abs(scale) * dq * _absmax(k))


def magnitudes(q, k, v, dout, lse, scale: float, dlse=None, drop: float = 1.0, allowed=None) -> dict:
    """M_T for each compared tensor T, and "score" = S = max |score| ≈ max |scale·q·k| (bounded by
    |scale|·max|q|·max|k|·D); arguments as the oracle sees them (unread entries zeroed). ``dlse``
    (the LSE cotangent, or None) enters dq and dk as γ_ij = p_ij(⟨dO_i, V_j⟩ − δ_i + dlse_i) does.
    ``drop``: dropout's largest multiplier 1/(1 − p) (1 without dropout), which scales every M_T
    but lse's (module docstring). ``allowed`` (B, Hq, Nq, Nk) bool or None: the mask, which makes the
    row sums' sizes and lengths those of the allowed pairs (None: every pair counts, an over-estimate).
    "dot_len" is Dv, the length of the dot products dP and δ that dS is formed from; "sum" and
    "sum_len" are, for dq, dk and dv, the size Σ|x||y| of the reduction over keys (dq) or over the
    group's query rows (dk, dv) and its largest number of terms (the floor's γ_n terms)."""
    if not drop >= 1.0:
        raise ValueError(f"drop is dropout's multiplier 1/(1 - p) >= 1, received {drop!r}")
    if allowed is not None and tuple(allowed.shape) != (*q.shape[:3], k.shape[-2]):
        raise ValueError(f"allowed must be (B, Hq, Nq, Nk) = {(*q.shape[:3], k.shape[-2])}, received "
                         f"{tuple(allowed.shape)}")
    mq, mk, mv0, mo = _absmax(q), _absmax(k), _absmax(v), _absmax(dout)
    mv = drop * mv0
    mlse = _absmax(lse)
    mdlse = 0.0 if dlse is None else _absmax(dlse)
    dot = _dot_magnitude(dout, v)
    mg = drop * dot + mdlse  # M_dS
    sums = _row_sums(q, k, v, dout, lse, scale, dlse, drop, allowed)
    Hkv, group = k.shape[1], q.shape[1] // max(k.shape[1], 1)
    if allowed is None:
        keys, rows = k.shape[-2], group * q.shape[-2]
    else:
        keys = int(allowed.sum(-1).max().item()) if allowed.numel() else 0
        rows = int(allowed.unflatten(1, (Hkv, group)).sum((2, 3)).max().item()) if allowed.numel() else 0
    score = max(mlse, abs(scale) * mq * mk * q.shape[-1])
    return {"out": mv, "lse": score + 2.0 * math.log(max(k.shape[-2], 1)) + 1.0, "dv": drop * mo, "dbias": mg,
            "dq": abs(scale) * mg * mk,
            "dk": abs(scale) * mg * mq, "score": score, "dot_len": v.shape[-1],
            "sum": sums._asdict(),
            "sum_len": {"dq": keys, "dk": rows, "dv": rows},
            "bound_inputs": {"n_k": k.shape[-2], "d": q.shape[-1], "mq": mq, "mk": mk, "mv": mv0, "scale": float(scale)}}


def proved_bound(name: str, mags: dict, dtype: torch.dtype) -> float:
    """The proved bound (module docstring) on |T − T_exact| per entry, T = "out" or "lse"."""
    if name not in ("out", "lse"):
        raise ValueError(f"the proved rule bounds out and lse only, received {name!r}")
    if dtype not in _PROVED_FORMATS:
        raise ValueError(f"the proved rule covers fp32, bf16 and fp16 inputs, received {dtype}")
    from flashproof.verified.fp_bound import forward_error_bound

    b = mags["bound_inputs"]
    fb = forward_error_bound(max(b["n_k"], 1), b["d"], 1, _PROVED_FORMATS[dtype], mq=b["mq"], mk=b["mk"],
                             mv=b["mv"], scale=b["scale"])
    return fb.out if name == "out" else fb.lse


def floor(name: str, mags: dict, dtype: torch.dtype) -> float:
    """The noise floor of tensor ``name`` (module docstring), at least dtype's smallest normal."""
    info = torch.finfo(dtype)
    eps_acc = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps
    m = mags[name]
    stat = 0.0 if name == "lse" else m * eps_acc * mags["score"]
    dots = m * 2.0 * _gamma(mags["dot_len"], eps_acc / 2) if name in _THROUGH_DS else 0.0
    sums = mags["sum"][name] * _gamma(mags["sum_len"][name], eps_acc / 2) if name in _SUMS else 0.0
    return max(info.eps * m + stat + dots + sums, info.tiny)


#: the gradients formed from dS = P ∘ (dP − δ + dLSE), whose two dot products the floor's γ term covers
_THROUGH_DS = ("dq", "dk", "dbias")
#: the gradients that are sums over keys (dq) or over a kv head's query rows (dk, dv), whose
#: accumulation the floor's γ_n term covers
_SUMS = ("dq", "dk", "dv")


def _gamma(n: int, u: float) -> float:
    """γ_n = n·u / (1 − n·u): the relative error bound of an n-term dot product at unit roundoff u."""
    if not 0 <= n * u < 1:
        raise ValueError(f"γ_n needs 0 <= n·u < 1, received n={n}, u={u}")
    return n * u / (1 - n * u)


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
          mags: dict, exact_zero: torch.Tensor | None = None, gold: torch.Tensor | None = None,
          rule: str = "empirical") -> Verdict:
    """Apply the rule to one tensor. got/baseline are moved to float64 CPU; ``mags`` is
    ``magnitudes(...)`` of the problem; ``exact_zero`` marks entries (broadcastable to ref) that the
    convention fixes to exactly 0; ``gold`` is the independent evaluation the baseline's error is
    measured against (module docstring; None: ``ref``, for callers that have checked ref == gold);
    ``rule``: "empirical" or "proved" (out and lse only)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, received {rule!r}")
    if got.shape != ref.shape:
        raise ValueError(f"{name}: kernel returned shape {tuple(got.shape)}, oracle has {tuple(ref.shape)}")
    got = got.detach().to("cpu", torch.float64)
    baseline = baseline.detach().to("cpu", torch.float64)
    gold = ref if gold is None else gold.detach().to("cpu", torch.float64)
    rounded_inf = torch.isinf(ref.to(dtype).to(torch.float64))  # finite oracle values τ rounds to ±inf
    got = torch.where(rounded_inf & torch.isfinite(ref) & (got == ref.to(dtype).to(torch.float64)), ref, got)
    fin = torch.isfinite(ref)
    diff = torch.where(fin, (got - ref).abs(), torch.zeros_like(ref))
    diff = torch.where(fin & ~torch.isfinite(got), torch.full_like(ref, float("inf")), diff)
    base = torch.where(fin, (baseline - gold).abs(), torch.zeros_like(ref))
    base_err = base.max().item() if base.numel() else 0.0
    if base_err != base_err:  # NaN in the baseline
        base_err = float("inf")
    bounded = base_err != float("inf")
    bound = FACTOR[name] * base_err + floor(name, mags, dtype) if bounded else float("inf")
    if rule == "proved":
        bound, bounded = proved_bound(name, mags, dtype), True
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


def agree(name: str, a: torch.Tensor, b: torch.Tensor, mags: dict) -> Verdict:
    """The oracle-agreement rule (module docstring) for tensor ``name`` of two float64 oracles a, b
    (same shape). ``ok`` False with reason "disagree" names the first entry outside it."""
    a, b = a.detach().to("cpu", torch.float64), b.detach().to("cpu", torch.float64)
    bound = AGREEMENT * mags[name] * (1.0 + mags["score"])
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    diff = torch.where(fa & fb, (a - b).abs(), torch.zeros_like(a))
    error = diff.max().item() if diff.numel() else 0.0
    bad = (fa != fb) | (~fa & ~fb & ~((a == b) | (torch.isnan(a) & torch.isnan(b)))) | (diff > bound)
    if bad.any():
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        return Verdict(name, False, error, bound, 0.0, True, idx, a[idx].item(), b[idx].item(), "disagree")
    return Verdict(name, True, error, bound, 0.0, True, None, None, None, "")


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, scale: float,
          dout: torch.Tensor | None = None, dlse: torch.Tensor | None = None, drop: torch.Tensor | None = None,
          bias: torch.Tensor | None = None):
    """The baseline: the dense formula in the dtype of q, k, v (no upcast), on their device.

    q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv), allowed (B, Hq, Nq, Nk), dout like
    out, dlse (B, Hq, Nq) or None, drop None or dropout's multipliers keep/(1 − p) (B, Hq, Nq, Nk),
    bias None or an additive float mask (``oracle.masked_attention``)
    → ``(out, lse, grads)`` where grads is (dq, dk, dv) of Σ dout·out (+ Σ dlse·lse) when ``dout``
    is given, else None."""
    from .oracle import masked_attention, vjp

    q, k, v = (t.detach().clone().requires_grad_(dout is not None) for t in (q, k, v))
    with torch.enable_grad():
        out, lse = masked_attention(q, k, v, allowed, scale, drop, bias)
        grads = vjp(out, lse, (q, k, v), dout, dlse) if dout is not None else None
    return out.detach(), lse.detach(), grads
