"""Feature cases for the attention kernel tests and the one checker they share.

A case's tensors and its causal / window / varlen structure come from the fuzzer's problem builder
(``flashproof.fuzz.problem.build``); a case may add a dense mask or a ``BlockSparseMask`` on top.
``check_case`` runs ``attention`` forward and backward and judges out, lse, dq, dk and dv against the
oracle (``flashproof.fuzz.oracle.oracle``: the verified reference at these sizes) with the one
tolerance rule (``flashproof.fuzz.tolerance.judge``): no tolerance is stated here.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from flashproof.fuzz.oracle import masked_attention, oracle, read_inputs
from flashproof.fuzz.problem import ProblemSpec, build
from flashproof.fuzz.tolerance import judge, magnitudes, naive
from flashproof.kernels import BlockSparseMask, attention
from flashproof.kernels.attention.api import _attention

__all__ = ["Case", "CASES", "HALF", "CONFIG_CASES", "problem_of", "leaves", "check_case", "verdicts",
           "poison_case", "mutant_problem", "mutant_verdicts", "lse_gradient_verdicts", "ids"]


class Case(NamedTuple):
    id: str
    shape: tuple  # (B, Hq, Hkv, Nq, Nk, D, Dv); Nq, Nk are ignored with "lens"
    kw: dict      # causal, window, scale, lens=(lens_q, lens_k), mask=bool tensor | BlockSparseMask, noncontig


def _mask(B, H, Nq, Nk, p, seed):
    return torch.rand(B, H, Nq, Nk, generator=torch.Generator().manual_seed(seed)) < p


def _late_keys(Nq, Nk, first):
    """bool (1, 1, Nq, Nk): only keys >= first allowed (several fully masked tiles first)."""
    m = torch.zeros(1, 1, Nq, Nk, dtype=torch.bool)
    m[..., first:] = True
    return m


def _tiles(B, H, Nq, Nk, bq, bk, seed):
    t = torch.rand(B, H, -(-Nq // bq), -(-Nk // bk), generator=torch.Generator().manual_seed(seed)) < 0.4
    return BlockSparseMask(t, bq, bk)


def _all_but_one(Nq, Nk, bq, bk):
    t = torch.ones(1, 1, -(-Nq // bq), -(-Nk // bk), dtype=torch.bool)
    t[..., 1, 0] = False
    return BlockSparseMask(t, bq, bk)


CASES = [
    Case("plain", (2, 2, 2, 37, 37, 16, 16), {}),
    Case("causal_square", (1, 2, 2, 70, 70, 32, 32), {"causal": True}),
    Case("causal_nq_lt_nk", (1, 2, 1, 20, 75, 16, 24), {"causal": True}),
    Case("causal_nq_gt_nk", (1, 2, 2, 75, 20, 16, 16), {"causal": True}),
    Case("window_both", (1, 2, 2, 66, 66, 16, 16), {"window": (9, 5)}),
    Case("window_left_causal", (1, 1, 1, 80, 80, 24, 8), {"window": (17, None), "causal": True}),
    # 16-key tiles (the interpreter's and the smallest GPU config): the diagonal offsets put a window
    # edge one key past a tile boundary, so a tile classified "unmasked" one key too early is visible
    Case("causal_diag_14_tile_edge", (1, 2, 1, 30, 44, 16, 16), {"causal": True}),
    Case("window_left_diag_2_tile_edge", (1, 2, 2, 40, 60, 16, 16), {"window": (18, None)}),
    Case("gqa_4_odd_dims", (1, 8, 2, 33, 41, 40, 24), {}),
    Case("mqa_head_dim_1", (2, 3, 1, 9, 12, 1, 3), {"causal": True}),
    Case("head_dim_256", (1, 1, 1, 17, 17, 256, 256), {}),
    Case("dense_mask", (2, 2, 1, 30, 45, 16, 16), {"mask": _mask(2, 1, 30, 45, 0.3, 1)}),
    Case("mask_late_keys", (1, 2, 2, 12, 150, 16, 16), {"mask": _late_keys(12, 150, 131)}),
    Case("mask_empty_rows", (1, 2, 2, 20, 20, 16, 16), {"mask": _mask(1, 2, 20, 20, 0.1, 2)}),
    Case("block_sparse", (1, 2, 2, 40, 70, 16, 16), {"mask": _tiles(1, 2, 40, 70, 16, 32, 3)}),
    Case("block_sparse_dense", (1, 2, 1, 40, 70, 16, 16),
         {"mask": BlockSparseMask(_tiles(1, 1, 40, 70, 16, 16, 4).tiles, 16, 16, _mask(1, 2, 40, 70, 0.5, 5))}),
    # block-sparse with a window: tiles the window cuts must take the predicated path (the forward
    # walks the host's "full" tiles without one), here with 16-key kernel blocks inside 32-key tiles
    # (every tile present but one; Nk − Nq and the window put a tile one key past a window edge: an
    # off-by-one in the host's full-tile test, planted on either side, fails one of these two cases)
    Case("block_sparse_causal", (1, 2, 1, 40, 70, 16, 16), {"mask": _all_but_one(40, 70, 16, 32), "causal": True}),
    Case("block_sparse_window", (1, 2, 2, 70, 40, 16, 16), {"mask": _all_but_one(70, 40, 16, 16), "window": (32, 3)}),
    Case("varlen", (1, 2, 1, 0, 0, 16, 16), {"lens": ([5, 0, 1, 40, 17], [7, 3, 0, 40, 70]), "causal": True}),
    Case("varlen_window_mask", (1, 2, 2, 0, 0, 16, 16),
         {"lens": ([33, 2, 20], [33, 50, 1]), "window": (6, 3), "mask_p": 0.7}),
    Case("seq_len_1", (1, 1, 1, 1, 1, 16, 16), {"causal": True}),
    Case("scale_large", (1, 1, 1, 20, 20, 16, 16), {"scale": 30.0}),
    Case("noncontig_causal_gqa", (2, 4, 2, 19, 40, 16, 16), {"causal": True, "noncontig": True}),
]
#: the cases the Triton kernels also run in float16 under the interpreter
HALF = [c for c in CASES if c.id in {"causal_nq_lt_nk", "gqa_4_odd_dims", "mask_late_keys", "varlen", "block_sparse"}]

_TILES_128 = torch.tensor([[True, False], [True, True]])[None, None]
#: every kernel block size divides these tiles (128) and D <= 128, so no tuned configuration is pruned
CONFIG_CASES = [
    Case("causal_gqa_ragged", (1, 2, 1, 150, 170, 48, 32), {"causal": True}),
    Case("window_ragged", (1, 1, 1, 140, 130, 32, 16), {"window": (40, 20)}),
    Case("block_sparse_128_causal", (1, 1, 1, 200, 180, 32, 32), {"mask": BlockSparseMask(_TILES_128, 128, 128),
                                                                   "causal": True}),
]


def ids(cases):
    return [c.id for c in cases]


def _expand(bm: BlockSparseMask, Nq, Nk):
    """The dense (B|1, H|1, Nq, Nk) meaning of a BlockSparseMask (without its ``dense`` part)."""
    return bm.tiles.repeat_interleave(bm.block_q, 2)[:, :, :Nq].repeat_interleave(bm.block_k, 3)[..., :Nk]


def problem_of(case: Case, dtype: torch.dtype):
    """(fuzz Problem rounded through ``dtype``, attention() keywords on CPU)."""
    B, Hq, Hkv, Nq, Nk, D, Dv = case.shape
    kw = dict(case.kw)
    kw.pop("noncontig", None)
    lens = kw.pop("lens", None)
    mask_p = kw.pop("mask_p", None)
    if lens is not None:
        Nq, Nk = sum(lens[0]), sum(lens[1])
    window = kw.get("window")
    if window is not None:  # the builder's window takes ints; a reach past every key is unbounded
        window = tuple(max(Nq, Nk) + 1 if w is None else w for w in window)
    spec = ProblemSpec(batch=B, heads_q=Hq, heads_kv=Hkv, n_q=Nq, n_k=Nk, d=D, dv=Dv,
                       causal=kw.get("causal", False), window=window,
                       seqlens=None if lens is None else tuple(zip(*lens)), seed=sum(case.id.encode()))
    prob = build(spec)
    allowed = prob.allowed
    if mask_p is not None:
        kw["mask"] = _mask(1, 1, Nq, Nk, mask_p, 6)
    mask = kw.get("mask")
    if isinstance(mask, BlockSparseMask):
        allowed = allowed & _expand(mask, Nq, Nk)
        if mask.dense is not None:
            allowed = allowed & mask.dense
    elif mask is not None:
        allowed = allowed & mask
    if prob.cu_seqlens_q is not None:
        kw["cu_seqlens_q"], kw["cu_seqlens_k"] = prob.cu_seqlens_q, prob.cu_seqlens_k
    scale = kw.get("scale", prob.scale)
    return prob._replace(allowed=allowed.expand(B, Hq, Nq, Nk).clone(), scale=float(scale)).rounded(dtype), kw


def leaves(prob, dtype, noncontig=False, grad=True):
    """The kernel's q, k, v in ``dtype`` (non-contiguous (B, N, H, D)-strided views with ``noncontig``)."""
    out = []
    for t in (prob.q, prob.k, prob.v):
        y = t.to(dtype)
        if noncontig:
            y = y.transpose(1, 2).contiguous().transpose(1, 2)
        out.append(y.requires_grad_(grad))
    return out


@functools.lru_cache(maxsize=None)
def _expected(case_id: str, dtype: torch.dtype):
    case = next(c for c in CASES + CONFIG_CASES if c.id == case_id)
    prob, _ = problem_of(case, dtype)
    return oracle(prob)


def verdicts(prob, dtype, expected, out, lse, grads):
    """The rule applied to out, lse and (dq, dk, dv) of one run (grads for ``prob.dout``)."""
    clean = read_inputs(prob)
    base = naive(*(t.to(dtype) for t in clean), prob.allowed, prob.scale, prob.dout.to(dtype))
    mags = magnitudes(*clean, prob.dout, expected.lse, prob.scale)
    empty = prob.empty_rows[..., None]
    return [judge("out", out, expected.out, base[0], dtype, mags, exact_zero=empty),
            judge("lse", lse, expected.lse, base[1], dtype, mags),
            judge("dq", grads[0], expected.dq, base[2][0], dtype, mags, exact_zero=empty),
            judge("dk", grads[1], expected.dk, base[2][1], dtype, mags),
            judge("dv", grads[2], expected.dv, base[2][2], dtype, mags)]


def _fail_message(label, bad):
    return f"{label}: " + "; ".join(f"{v.name} {v.reason} at {v.first}: got {v.got!r}, expected {v.expected!r} "
                                    f"(error {v.error:.3g}, bound {v.bound:.3g})" for v in bad)


def check_case(case: Case, dtype: torch.dtype, backend: str, **call):
    """Run ``case`` forward and backward with ``backend`` (``call``: more attention() keywords) and
    assert that every tensor meets the oracle under the tolerance rule."""
    prob, kw = problem_of(case, dtype)
    q, k, v = leaves(prob, dtype, case.kw.get("noncontig", False))
    res = attention(q, k, v, return_lse=True, backend=backend, **{"tuning": "first", **kw, **call})
    grads = torch.autograd.grad(res.out, (q, k, v), prob.dout.to(dtype))
    bad = [x for x in verdicts(prob, dtype, _expected(case.id, dtype), res.out, res.lse, grads) if not x.ok]
    assert not bad, _fail_message(f"{case.id} {dtype} {backend}", bad)
    return res


def lse_gradient_verdicts(case: Case, dtype: torch.dtype, backend: str):
    """The gradients of Σ out·dO + Σ_finite lse·g (the lse cotangent reaches the backward's dlse)
    judged against the oracle's dense formula in float64 (``masked_attention``, which
    tests/test_fuzz_oracle.py checks against the verified reference), the naive baseline being the
    same formula in ``dtype``."""
    prob, kw = problem_of(case, dtype)
    g = torch.randn(prob.dout.shape[:3], generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    g = torch.where(prob.empty_rows, 0.0, g)

    def grads_of(out, lse, xs):
        loss = (out.double() * prob.dout).sum() + torch.where(lse.isfinite(), lse.double() * g, 0).sum()
        return torch.autograd.grad(loss, xs)
    q, k, v = leaves(prob, dtype, case.kw.get("noncontig", False))
    res = attention(q, k, v, return_lse=True, backend=backend, tuning="first", **kw)
    got = grads_of(res.out, res.lse, (q, k, v))
    clean = read_inputs(prob)
    runs = []
    for dt in (torch.float64, dtype):
        xs = [t.to(dt).requires_grad_() for t in clean]
        out, lse = masked_attention(*xs, prob.allowed, prob.scale)
        runs.append(grads_of(out, lse, xs))
    mags = magnitudes(*clean, prob.dout, res.lse, prob.scale)
    empty = prob.empty_rows[..., None]
    return [judge(n, a, w.detach(), b.detach(), dtype, mags, exact_zero=empty if n == "dq" else None)
            for n, a, w, b in zip(("dq", "dk", "dv"), got, runs[0], runs[1])]


def poison_case(dtype: torch.dtype, backend: str):
    """NaN / inf / 1e30 planted where only masked pairs read (q rows of an empty query row, k/v rows
    of keys nobody may read, keys outside every row's window) must not leak: every result is judged
    against the oracle on the clean inputs."""
    B, H, Nq, Nk, D = 1, 2, 24, 100, 16
    prob = build(ProblemSpec(batch=B, heads_q=H, heads_kv=H, n_q=Nq, n_k=Nk, d=D, dv=D, window=(50, 0), seed=11))
    mask = torch.ones(1, 1, Nq, Nk, dtype=torch.bool)
    mask[..., 3, :] = False  # empty row 3
    mask[..., :, 40:47] = False  # keys 40..46 unread by anyone
    q, k, v = (t.clone() for t in (prob.q, prob.k, prob.v))
    q[:, :, 3] = math.nan
    k[:, :, 40:47] = math.inf
    v[:, :, 40:47] = math.nan
    v[:, :, 0:20] = 1e30  # keys 0..19 lie outside every row's window (rows see >= 76 − 50 = 26)
    k[:, :, 0:20] = math.nan
    prob = prob._replace(q=q, k=k, v=v, allowed=prob.allowed & mask).rounded(dtype)
    xs = leaves(prob, dtype)
    res = attention(*xs, window=(50, 0), mask=mask, return_lse=True, backend=backend, tuning="first")
    grads = torch.autograd.grad(res.out, xs, prob.dout.to(dtype))
    expected = oracle(prob)
    return [x for x in verdicts(prob, dtype, expected, res.out, res.lse, grads) if not x.ok]


def mutant_problem(bug: str):
    """(fuzz Problem in float32, attention() keywords): an input on which ``bug`` is visible (the
    fuzzer must find such inputs by itself)."""
    causal = bug != "unguarded_inf"
    prob = build(ProblemSpec(batch=1, heads_q=4, heads_kv=2, n_q=70, n_k=130, d=16, dv=16, causal=causal, seed=5))
    q, k, allowed = prob.q, prob.k.clone(), prob.allowed
    kw = {"causal": causal}
    if bug == "no_max":
        q = q * 40  # logits far above 88: e^s overflows float32
    if bug == "unguarded_inf":
        # row i may read keys >= 2 i: later rows start after fully masked tiles
        mask = (torch.arange(130)[None] >= 2 * torch.arange(70)[:, None]).expand(1, 1, 70, 130)
        kw["mask"], allowed = mask, allowed & mask
    if bug == "no_alpha":
        k[:, :, 64:] += 3 * q[:, ::2].mean(2, keepdim=True)  # the max grows in a later tile
    return prob._replace(q=q, k=k, allowed=allowed).rounded(torch.float32), kw


def mutant_verdicts(bug: str, backend: str, with_bug: bool):
    """The rule's verdicts on out and lse of ``mutant_problem(bug)``, run with or without ``bug``."""
    prob, kw = mutant_problem(bug)
    q, k, v = leaves(prob, torch.float32, grad=False)
    res = _attention(q, k, v, backend=backend, tuning="first", return_lse=True,
                     bugs=frozenset({bug}) if with_bug else frozenset(), **kw)
    expected = oracle(prob)
    clean = read_inputs(prob)
    base = naive(*(t.to(torch.float32) for t in clean), prob.allowed, prob.scale)
    mags = magnitudes(*clean, prob.dout, expected.lse, prob.scale)
    return [judge("out", res.out, expected.out, base[0], torch.float32, mags, exact_zero=prob.empty_rows[..., None]),
            judge("lse", res.lse, expected.lse, base[1], torch.float32, mags)]
