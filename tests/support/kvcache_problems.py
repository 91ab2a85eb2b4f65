"""KV-cache problems for the tests: the cache a kernel is handed (contiguous or paged, poison past
every request's length) and the same problem as the oracle sees it (``flashproof.fuzz``'s dense
``Problem``), judged by the one tolerance rule.

``make(...)`` draws float64 q (B, Hq, Nq, D) and per-request keys/values, rounds them through the
kernel dtype, and builds

* the dense ``Problem``: k, v (B, Hkv, Nk, ·) with Nk = max(1, longest length), ``allowed``
  (B, Hq, Nq, Nk) by the API's rule (query i of request b at position L_b − Nq + i; causal, window;
  positions ≥ L_b never allowed);
* the kernel's inputs: a contiguous cache (B, Hkv, Nmax, ·) with Nmax > Nk, or pages
  (num_pages, page_size, Hkv, ·) in a random order with spare pages, and an int32 block table
  whose entries past a request's last page point at a poison page or are −1. Every position no
  request owns holds ``poison``.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch

from flashproof.fuzz.oracle import oracle, read_inputs
from flashproof.fuzz.problem import Problem, ProblemSpec
from flashproof.fuzz.tolerance import judge, magnitudes, naive

__all__ = ["KVProblem", "Reference", "make", "run", "reference", "verdicts", "failures", "CASES", "SPLITS"]


class KVProblem(NamedTuple):
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    cache_seqlens: torch.Tensor
    block_table: Optional[torch.Tensor]
    causal: bool
    window: Optional[tuple]
    scale: float
    dtype: torch.dtype
    dense: Problem          # float64, inputs already rounded through dtype
    kv_layout: Optional[str] = None   # paged: None/"NHD" (num_pages, page_size, Hkv, ·) or "HND" (num_pages, Hkv, page_size, ·)


def _allowed(lengths, Hq, Nq, Nk, causal, window):
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    ok = torch.zeros(len(lengths), Hq, Nq, Nk, dtype=torch.bool)
    j = torch.arange(Nk)[None, :]
    for b, L in enumerate(lengths):
        diag = (L - Nq + torch.arange(Nq))[:, None]
        row = (j < L).expand(Nq, Nk).clone()
        if right is not None:
            row &= j <= diag + right
        if left is not None:
            row &= j >= diag - left
        ok[b] = row
    return ok


def make(*, lengths, heads_q=4, heads_kv=2, n_q=1, d=16, dv=16, page_size=0, causal=True, window=None,
         poison=float("nan"), dtype=torch.float32, seed=0, scale=None, kv_layout=None) -> KVProblem:
    B, Hq, Hkv, Nq = len(lengths), heads_q, heads_kv, n_q
    Nk = max(1, max(lengths))
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype).to(torch.float64)  # noqa: E731
    q, k, v = rnd(B, Hq, Nq, d), rnd(B, Hkv, Nk, d), rnd(B, Hkv, Nk, dv)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    allowed = _allowed(lengths, Hq, Nq, Nk, causal, window)
    spec = ProblemSpec(batch=B, heads_q=Hq, heads_kv=Hkv, n_q=Nq, n_k=Nk, d=d, dv=dv, causal=causal, window=window)
    dense = Problem(spec, q, k, v, torch.zeros(B, Hq, Nq, dv, dtype=torch.float64), allowed, scale, None, None)
    fill = float("nan") if poison is None else poison   # no poison asked: still never read, so any value
    if not page_size:
        n_max = Nk + 5
        kc = torch.full((B, Hkv, n_max, d), fill, dtype=torch.float64)
        vc = torch.full((B, Hkv, n_max, dv), fill, dtype=torch.float64)
        for b, L in enumerate(lengths):
            kc[b, :, :L], vc[b, :, :L] = k[b, :, :L], v[b, :, :L]
        table = None
    else:
        need = [-(-L // page_size) for L in lengths]
        spare = 3
        num_pages = sum(need) + spare
        order = torch.randperm(num_pages, generator=g).tolist()        # a permuted page table
        max_pages = max(need) + 1
        table = torch.full((B, max_pages), -1, dtype=torch.int32)
        kc = torch.full((num_pages, page_size, Hkv, d), fill, dtype=torch.float64)
        vc = torch.full((num_pages, page_size, Hkv, dv), fill, dtype=torch.float64)
        it = iter(order)
        for b, L in enumerate(lengths):
            for p in range(need[b]):
                pg = next(it)
                table[b, p] = pg
                n = min(page_size, L - p * page_size)
                kc[pg, :n] = k[b, :, p * page_size:p * page_size + n].transpose(0, 1)
                vc[pg, :n] = v[b, :, p * page_size:p * page_size + n].transpose(0, 1)
            if need[b] < max_pages and b % 2:
                table[b, need[b]] = order[-1]                           # an entry past the end: a poison page
    if kv_layout == "HND":  # the same pages stored heads first: (num_pages, Hkv, page_size, ·), contiguous
        kc, vc = kc.transpose(1, 2).contiguous(), vc.transpose(1, 2).contiguous()
    lens = torch.tensor(lengths, dtype=torch.int32)
    return KVProblem(q.to(dtype), kc.to(dtype), vc.to(dtype), lens, table, causal, window, scale, dtype, dense,
                     kv_layout)


def run(p: KVProblem, **kw):
    """Call ``attention_with_kvcache`` on the problem (keyword arguments pass through)."""
    from flashproof.kernels.kvcache import attention_with_kvcache
    if p.kv_layout is not None:
        kw = {"kv_layout": p.kv_layout, **kw}
    return attention_with_kvcache(p.q, p.k_cache, p.v_cache, cache_seqlens=p.cache_seqlens, block_table=p.block_table,
                                  causal=p.causal, window=p.window, scale=p.scale, return_lse=True, **kw)


class Reference(NamedTuple):
    """What the rule compares with: the oracle's out/lse, the naive same-dtype baseline, M_T."""

    out: torch.Tensor
    lse: torch.Tensor
    b_out: torch.Tensor
    b_lse: torch.Tensor
    mags: dict


def reference(p: KVProblem) -> Reference:
    """The oracle (the verified reference at these sizes) and the naive baseline of the problem."""
    e = oracle(p.dense)
    qi, ki, vi = read_inputs(p.dense)
    b_out, b_lse, _ = naive(qi.to(p.dtype), ki.to(p.dtype), vi.to(p.dtype), p.dense.allowed, p.scale)
    return Reference(e.out, e.lse, b_out, b_lse, magnitudes(qi, ki, vi, p.dense.dout, e.lse, p.scale))


def verdicts(p: KVProblem, got, ref: Reference | None = None) -> list:
    """The tolerance rule's verdicts for out and lse of ``got`` (a KVCacheOut)."""
    r = reference(p) if ref is None else ref
    return [judge("out", got.out, r.out, r.b_out, p.dtype, r.mags, exact_zero=p.dense.empty_rows[..., None]),
            judge("lse", got.lse, r.lse, r.b_lse, p.dtype, r.mags)]


def failures(vs, label="") -> str:
    """The failed verdicts of ``vs`` as one readable line ('' when all passed)."""
    return "; ".join(f"{label}{v.name}: {v.reason} at {v.first}: got {v.got}, expected {v.expected} "
                     f"(error {v.error:.3g} > bound {v.bound:.3g})" for v in vs if not v.ok)


#: named problems both paths are checked on: (id, make() keyword arguments, call keyword arguments)
CASES = [
    ("decode/ragged-0-1-2-17-40/G2", dict(lengths=[0, 1, 2, 17, 40]), {}),
    ("decode/ragged/paged16-permuted", dict(lengths=[0, 1, 2, 17, 40], page_size=16), {}),
    ("decode/paged32/len-at-page-edges", dict(lengths=[31, 32, 33, 64], page_size=32), {}),
    ("verify/Nq5/G4", dict(lengths=[5, 9, 37, 70], heads_q=8, heads_kv=2, n_q=5), {}),
    ("verify/Nq16/paged16", dict(lengths=[16, 20, 50], n_q=16, page_size=16), {}),
    ("verify/Nq2-length-below-Nq", dict(lengths=[0, 1, 3], n_q=2), {}),
    ("gqa/ratio1", dict(lengths=[7, 30], heads_q=2, heads_kv=2, n_q=3), {}),
    ("gqa/ratio3", dict(lengths=[7, 30], heads_q=6, heads_kv=2, n_q=3), {}),
    ("gqa/ratio8-mqa", dict(lengths=[7, 30], heads_q=8, heads_kv=1, n_q=3), {}),
    ("window/left4-causal", dict(lengths=[3, 20, 45], n_q=3, window=(4, None)), {}),
    ("window/left3-right2-noncausal", dict(lengths=[3, 20, 45], n_q=3, window=(3, 2), causal=False), {}),
    ("window/left0-paged16", dict(lengths=[1, 17, 40], n_q=4, window=(0, None), page_size=16), {}),
    ("noncausal/all-keys", dict(lengths=[0, 5, 33], n_q=4, causal=False), {}),
    ("poison/inf-contig", dict(lengths=[0, 1, 21], n_q=2, poison=float("inf")), {}),
    ("poison/1e30-paged16", dict(lengths=[0, 1, 21], n_q=2, poison=1e30, page_size=16), {}),
    ("poison/-inf-paged16", dict(lengths=[2, 40], n_q=2, poison=float("-inf"), page_size=16), {}),
    ("dv-differs/d24-dv8", dict(lengths=[9, 30], d=24, dv=8, n_q=2), {}),
    ("huge-logits/scale30", dict(lengths=[10, 33], n_q=2, scale=30.0), {}),
]

#: split counts the merge is checked at (1 = no merge; more splits than key tiles leaves some empty)
SPLITS = (1, 2, 3, 7)
