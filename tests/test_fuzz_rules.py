"""The tolerance rule, the strategies and the split-merge formula (fast, no kernel)."""
import math

import pytest
import torch
from hypothesis import find, given, settings, strategies as st

from flashproof.fuzz.checks import merge_partials
from flashproof.fuzz.oracle import oracles, read_inputs, reference
from flashproof.fuzz.problem import ProblemSpec, build, lse_cotangent
from flashproof.fuzz.strategies import FAMILIES, attention_problems
from flashproof.fuzz.tolerance import FACTOR, RowSums, _dot_magnitude, _row_sums, agree, floor, judge, magnitudes, naive

MAGS = {"out": 1.0, "lse": 1.0, "dq": 1.0, "dk": 1.0, "dv": 1.0, "score": 1.0, "dot_len": 1,
        "sum": {"dq": 0.0, "dk": 0.0, "dv": 0.0}, "sum_len": {"dq": 1, "dk": 1, "dv": 1}}
REF = torch.tensor([0.5, -0.25, 1.0], dtype=torch.float64)
BASE = REF + torch.tensor([1e-3, 0.0, 0.0], dtype=torch.float64)  # naive error 1e-3


@pytest.mark.parametrize("got, ok, reason", [
    (REF.clone(), True, ""),
    (REF + 1.9e-3, True, ""),                                     # inside 2 × 1e-3 + floor
    (REF + torch.tensor([0.0, 2.2e-3, 0.0]), False, "tolerance"),
    (torch.tensor([0.5, float("nan"), 1.0]), False, "nan"),
    (torch.tensor([0.5, float("inf"), 1.0]), False, "non-finite"),
], ids=["exact", "within-2x", "over-2x", "nan", "inf"])
def test_forward_rule(got, ok, reason):
    v = judge("out", got, REF, BASE, torch.float16, {**MAGS, "out": 0.0})
    assert (v.ok, v.reason) == (ok, reason)
    # M_out = 0 here, so the floor is fp16's smallest normal
    assert v.bound == pytest.approx(FACTOR["out"] * 1e-3 + torch.finfo(torch.float16).tiny, rel=1e-6)


def test_gradients_get_three_times():
    v = judge("dq", REF + 2.9e-3, REF, BASE, torch.float16, {**MAGS, "dq": 0.0})
    assert v.ok and v.bound == pytest.approx(3e-3 + torch.finfo(torch.float16).tiny, rel=1e-6)


def test_empty_row_conventions_are_exact():
    ref = torch.tensor([float("-inf"), 0.3], dtype=torch.float64)
    for bad in (float("inf"), 0.0):  # FA2's +inf and a zero LSE both break merging
        v = judge("lse", torch.tensor([bad, 0.3]), ref, ref, torch.float32, MAGS)
        assert (v.ok, v.reason, v.first) == (False, "convention", (0,))
    out_ref = torch.zeros(2, 2, dtype=torch.float64)
    v = judge("out", torch.tensor([[0.0, 0.0], [1e-30, 0.0]]), out_ref, out_ref, torch.float32, MAGS,
              exact_zero=torch.tensor([[True], [True]]))
    assert (v.ok, v.reason, v.first) == (False, "convention", (1, 0))


def test_overflowing_baseline_checks_only_finiteness():
    v = judge("out", REF + 5.0, REF, REF + float("inf"), torch.float16, MAGS)
    assert v.ok and not v.bounded


def test_a_value_beyond_the_dtype_range_rounds_to_its_infinity():
    # found on the H200 (fp16, GQA 2:1, huge logits): the exact dK entry -67662 is beyond fp16's
    # range, so the correctly rounded fp16 result is -inf; +inf there, or -inf at an entry fp16 can
    # hold, is still a deviation
    ref = torch.tensor([-67662.05, 3.0, 70000.0], dtype=torch.float64)
    inf = float("inf")
    ok = judge("dk", torch.tensor([-inf, 3.0, inf]), ref, torch.tensor([-inf, 3.0, inf]), torch.float16, MAGS)
    assert ok.ok and ok.error == 0.0
    for got, at in (([inf, 3.0, inf], 0), ([-inf, -inf, inf], 1)):
        v = judge("dk", torch.tensor(got), ref, ref, torch.float16, MAGS)
        assert (v.ok, v.reason, v.first) == (False, "non-finite", (at,))
    # fp32 holds -67662: an infinity there is a deviation
    v = judge("dk", torch.tensor([-inf, 3.0, 70000.0]), ref, ref, torch.float32, MAGS)
    assert (v.ok, v.reason, v.first) == (False, "non-finite", (0,))


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        judge("out", REF[:2], REF, REF, torch.float32, MAGS)


@settings(max_examples=30)
@given(attention_problems(max_nq=5, max_nk=12, max_d=2, blocks=(4,)), st.data())
def test_merging_any_key_partition_in_any_order_gives_the_whole(spec, data):
    p = build(spec)
    whole = reference(p)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, spec.n_k), max_size=3))) | {0, spec.n_k})
    outs, lses = [], []
    for a, b in zip(cuts, cuts[1:]):
        sub = p._replace(k=p.k[:, :, a:b], v=p.v[:, :, a:b], allowed=p.allowed[..., a:b],
                         spec=spec._replace(n_k=b - a, seqlens=None))
        part = reference(sub)
        outs.append(part.out)
        lses.append(part.lse)
    order = data.draw(st.permutations(range(len(outs))))
    out, lse = merge_partials([outs[i] for i in order], [lses[i] for i in order])
    qi, ki, vi = read_inputs(p)
    mags = magnitudes(qi, ki, vi, p.dout, whole.lse, p.scale)   # two float64 evaluations: the agreement rule
    for v in (agree("out", out, whole.out, mags), agree("lse", lse, whole.lse, mags)):
        assert v.ok, v


def test_every_family_can_switch_on():
    strat = attention_problems(max_nq=70, max_nk=70, max_d=4, blocks=(16,))
    probes = {
        "causal": lambda s: s.causal, "window": lambda s: s.window is not None, "varlen": lambda s: s.seqlens is not None,
        "mask": lambda s: s.mask_kind != "none", "empty_rows": lambda s: s.empty_rows,
        "huge_logits": lambda s: s.huge_logits > 0, "ties": lambda s: s.ties, "zero_q": lambda s: s.zero_q, "late_max": lambda s: s.late_max,
        "poison": lambda s: s.poison is not None, "noncontig": lambda s: s.noncontig,
        "gqa": lambda s: s.heads_q > s.heads_kv, "special_lengths": lambda s: s.n_k in (63, 64, 65),
        "dv": lambda s: s.dv != s.d, "batch": lambda s: s.batch > 1, "sparse": lambda s: s.sparse,
    }
    assert set(probes) == set(FAMILIES)
    for fam, pred in probes.items():
        found = find(strat, pred, settings=settings(max_examples=2000, database=None))
        assert pred(found), fam


def test_shrinks_toward_the_smallest_problem():
    strat = attention_problems(max_nq=130, max_nk=130, max_d=8)
    s = find(strat, lambda s: s.n_k > 64, settings=settings(max_examples=500, database=None))
    # minimal sizes, every adversarial family off (a one-sequence varlen packing may survive: it is
    # the same problem through the cu_seqlens path)
    assert s._replace(seqlens=None) == ProblemSpec(n_q=1, n_k=65, d=1, dv=1)
    assert s.seqlens in (None, ((1, 65),))
    s = find(strat, lambda s: s.mask_kind == "single_key" and s.causal, settings=settings(max_examples=1000, database=None))
    assert (s.n_q, s.n_k, s.d, s.window, s.empty_rows, s.poison, s.seed) == (1, 1, 1, None, False, None, 0)


@pytest.mark.parametrize("kwargs, match", [
    ({"max_nq": 0}, "max_nq"), ({"max_d": 1.5}, "max_d"), ({"families": ("causal", "bogus")}, "bogus"),
    ({"blocks": ()}, "blocks"),
], ids=["zero-nq", "float-d", "unknown-family", "no-blocks"])
def test_strategy_arguments_are_validated(kwargs, match):
    with pytest.raises(ValueError, match=match):
        attention_problems(**kwargs)


@pytest.mark.parametrize("spec, match", [
    (ProblemSpec(heads_q=3, heads_kv=2), "multiple"), (ProblemSpec(mask_kind="diagonal"), "mask_kind"),
    (ProblemSpec(batch=2, n_q=2, n_k=2, seqlens=((1, 1), (1, 1))), "batch 1"),
    (ProblemSpec(n_q=3, n_k=2, seqlens=((1, 1), (1, 1))), "sum"), (ProblemSpec(poison="zero"), "poison"),
], ids=["gqa", "mask-kind", "varlen-batch", "varlen-sum", "poison"])
def test_bad_specs_are_rejected(spec, match):
    with pytest.raises(ValueError, match=match):
        build(spec)


def test_build_is_deterministic_and_plants_the_families():
    spec = ProblemSpec(heads_q=4, heads_kv=2, n_q=7, n_k=40, d=3, dv=2, mask_kind="late_keys", block=16,
                       empty_rows=True, poison="nan", ties=True, huge_logits=6e4, seed=11)
    a, b = build(spec), build(spec)
    for f in ("q", "k", "v", "dout", "allowed"):
        assert torch.equal(getattr(a, f).nan_to_num(7.0), getattr(b, f).nan_to_num(7.0))
    assert not a.allowed[..., :32].any()             # the first two 16-key tiles are masked for all rows
    assert torch.isnan(a.k[..., :32, :]).all()        # poison planted where nobody reads
    assert a.empty_rows.any()
    scores = (a.q.nan_to_num(0) @ a.k.repeat_interleave(2, 1).nan_to_num(0).transpose(-1, -2)) * a.scale
    assert math.isclose(scores[a.allowed].abs().max().item(), 6e4, rel_tol=1e-9)  # over allowed pairs


# ------------------------------------------------------------------ M_dS: the size of dP and δ

def test_dot_magnitude_is_the_largest_abs_dot_product_of_a_query_head_and_its_kv_head():
    g = torch.Generator().manual_seed(0)
    dout = torch.randn(2, 4, 3, 5, generator=g, dtype=torch.float64)  # (B, Hq, Nq, Dv), GQA group 2
    v = torch.randn(2, 2, 7, 5, generator=g, dtype=torch.float64)     # (B, Hkv, Nk, Dv)
    dout[0, 1, 2, 0] = float("nan")                                   # non-finite entries count 0
    want = max(sum(abs(dout[b, h, i, d].nan_to_num(0.0).item()) * abs(v[b, h // 2, j, d].item()) for d in range(5))
               for b in range(2) for h in range(4) for i in range(3) for j in range(7))
    assert _dot_magnitude(dout, v) == pytest.approx(want, rel=1e-12)
    assert _dot_magnitude(torch.zeros(1), v) == 0.0  # the placeholder cotangent of forward-only callers
    with pytest.raises(ValueError, match=r"dout must be \(B, Hq, Nq, Dv\)"):
        _dot_magnitude(torch.ones(2, 3, 3, 5), v)


def test_the_floor_carries_the_dot_product_and_the_row_sum_bounds():
    """floor = eps(τ)·M + M·eps_acc·S + M·2γ_Dv (dq, dk, dbias) + M_sum·γ_n (dq, dk, dv; n the
    reduction's length), γ_n = n·u/(1 − n·u), u = eps_acc/2; out has neither γ term; bf16 inputs are
    computed in fp32 (eps_acc = 2⁻²³)."""
    mags = {**MAGS, "dq": 2.0, "dk": 3.0, "dbias": 5.0, "dv": 7.0, "score": 0.5, "dot_len": 64,
            "sum": {"dq": 11.0, "dk": 13.0, "dv": 17.0}, "sum_len": {"dq": 100, "dk": 1032, "dv": 1032}}
    gamma = lambda n, u: n * u / (1 - n * u)  # noqa: E731
    for dtype, u in ((torch.float32, 2.0 ** -24), (torch.bfloat16, 2.0 ** -24), (torch.float64, 2.0 ** -53)):
        eps, acc = torch.finfo(dtype).eps, 2 * u
        for name in ("dq", "dk", "dbias", "dv", "out"):
            m = mags[name]
            want = eps * m + m * acc * 0.5
            want += m * 2 * gamma(64, u) if name in ("dq", "dk", "dbias") else 0.0
            want += mags["sum"][name] * gamma(mags["sum_len"][name], u) if name in ("dq", "dk", "dv") else 0.0
            assert floor(name, mags, dtype) == pytest.approx(want, rel=1e-12), (dtype, name)


def test_row_sums_are_the_largest_abs_sums_of_each_reduction():
    """dv: max over (b, kv head, j, d) of Σ over the group's heads h and rows i of P_hij·|dO_hid|;
    dk: |scale|·the same with |dS_hij|·|Q_hid|; dq: |scale|·max|K|·max over (b, h, i) of Σ_j |dS_hij|,
    with P rebuilt from the LSE on allowed pairs and dS = P(dP − δ + dLSE) in float64."""
    g = torch.Generator().manual_seed(1)
    B, Hq, Hkv, Nq, Nk, D, Dv, sc = 2, 4, 2, 5, 6, 3, 2, 0.7
    q = torch.randn(B, Hq, Nq, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, Hkv, Nk, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, Hkv, Nk, Dv, generator=g, dtype=torch.float64)
    dout = torch.randn(B, Hq, Nq, Dv, generator=g, dtype=torch.float64)
    dlse = torch.randn(B, Hq, Nq, generator=g, dtype=torch.float64)
    allowed = torch.rand(B, Hq, Nq, Nk, generator=g) < 0.6
    allowed[0, 1, 2] = False                                         # a row with no allowed key
    kq, vq = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    s = ((q @ kq.transpose(-1, -2)) * sc).masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, -1)                                     # −inf on the empty row
    P = torch.softmax(s, -1).nan_to_num(0.0)
    dP = dout @ vq.transpose(-1, -2)
    dS = P * (dP - (P * dP).sum(-1, keepdim=True) + dlse[..., None])

    def over_rows(w, x):  # max over (b, kv head, j, d) of Σ_{h of the group, i} |w_hij|·|x_hid|
        return max(sum(abs(w[b, h, i, j].item()) * abs(x[b, h, i, d].item()) for h in range(2 * hk, 2 * hk + 2)
                       for i in range(Nq)) for b in range(B) for hk in range(Hkv) for j in range(Nk)
                   for d in range(x.shape[-1]))
    want = RowSums(over_rows(P, dout), sc * over_rows(dS, q), sc * dS.abs().sum(-1).max().item() * k.abs().max().item())
    got = _row_sums(q, k, v, dout, lse, sc, dlse, allowed=allowed)
    assert got == pytest.approx(want, rel=1e-12)
    # without the mask (masked pairs keep min(1, e^(s − lse)) ≥ their 0), without an LSE (every P̄ is
    # 1) and with dropout (dS by its bound P̄(r|dP| + r·max|dP| + |dLSE|)): over-estimates, never under
    for loose in (_row_sums(q, k, v, dout, lse, sc, dlse), _row_sums(q, k, v, dout, torch.zeros(0), sc, dlse),
                  _row_sums(q, k, v, dout, lse, sc, dlse, drop=1.25, allowed=allowed)):
        assert all(a <= b * (1 + 1e-12) for a, b in zip(want, loose)), (want, loose)
    assert _row_sums(q, k, v, torch.zeros(B, Hq, Nq, Dv), lse, sc) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"lse must have B·Hq·Nq = 40 entries"):
        _row_sums(q, k, v, dout, lse[:, :1], sc)
    with pytest.raises(ValueError, match=r"allowed must be \(B, Hq, Nq, Nk\)"):
        magnitudes(q, k, v, dout, lse, sc, allowed=allowed[:, :1])


@settings(max_examples=25, deadline=None)
@given(attention_problems(max_nq=6, max_nk=20, max_d=4, max_heads_kv=2, max_group=2, blocks=(4,)))
def test_the_row_sums_sizes_bound_the_terms_of_dq_dk_and_dv(spec):
    """"sum" ≥ Σ|x||y| of each reduction (the quantity γ_n multiplies), from the oracle's own P and dS:
    dv_j = Σ_i P_ij dO_i, dk_j = scale·Σ_i dS_ij Q_i over the group's rows, dq_i = scale·Σ_j dS_ij K_j;
    "sum_len" ≥ the number of non-zero terms of each."""
    p = build(spec)
    q, k, v = read_inputs(p)
    dlse = lse_cotangent(spec)
    e = reference(p)
    m = magnitudes(q, k, v, p.dout, e.lse, p.scale, dlse, allowed=p.allowed)
    G = spec.heads_q // spec.heads_kv
    kq, vq = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
    s = ((q @ kq.transpose(-1, -2)) * p.scale).masked_fill(~p.allowed, float("-inf"))
    P = torch.softmax(s, -1).nan_to_num(0.0)                                       # (B, Hq, Nq, Nk)
    dP = p.dout @ vq.transpose(-1, -2)
    dS = P * (dP - (p.dout * e.out).sum(-1, keepdim=True) + dlse[..., None])
    per_kv = lambda t: t.unflatten(1, (spec.heads_kv, G)).sum(2)  # noqa: E731  over the group's heads
    sizes = {"dv": per_kv(P.transpose(-1, -2) @ p.dout.abs()),
             "dk": abs(p.scale) * per_kv(dS.abs().transpose(-1, -2) @ q.abs()),
             "dq": abs(p.scale) * (dS.abs() @ kq.abs())}
    for name, t in sizes.items():
        assert t.max().item() <= m["sum"][name] * (1 + 1e-9) + 1e-300, name
    assert p.allowed.sum(-1).max().item() <= m["sum_len"]["dq"]
    assert per_kv(p.allowed.sum(2, keepdim=True)).max().item() <= m["sum_len"]["dv"] == m["sum_len"]["dk"]


@settings(max_examples=25, deadline=None)
@given(attention_problems(max_nq=6, max_nk=20, max_d=4, max_heads_kv=2, max_group=2, blocks=(4,)))
def test_m_ds_bounds_every_dp_and_delta_of_the_problem(spec):
    """M_dS ≥ |dP_ij| = |⟨dO_i, V_j⟩| and ≥ |δ_i| = |⟨dO_i, O_i⟩| (plus |dLSE|): what dS is formed from."""
    p = build(spec)
    q, k, v = read_inputs(p)
    e = reference(p)
    dlse = lse_cotangent(spec)
    mg = magnitudes(q, k, v, p.dout, e.lse, p.scale, dlse)["dbias"]
    vq = v.repeat_interleave(spec.heads_q // spec.heads_kv, dim=1)
    dp = (p.dout @ vq.transpose(-1, -2))[p.allowed]            # the allowed pairs' dP
    delta = (p.dout * e.out).sum(-1)
    largest = max(dp.abs().max().item() if dp.numel() else 0.0, delta.abs().max().item())
    assert largest + dlse.abs().max().item() <= mg * (1 + 1e-12)  # float64 rounding of the two sides only


# ------------------------------------------------------------------ sums over many rows: the γ_n terms

#: found by the Triton backward on an H200 in fp32 (docs/fuzz.md, "Findings of long campaigns"): the
#: one key's dV sums the group's 8 × 129 rows of dO (P = 1)
GQA_ONE_KEY = ProblemSpec(heads_q=8, n_q=129, n_k=1, d=64, dv=64, seed=22)


def _sequential_dv(p, dtype, drop_row=None):
    """dV_j = Σ over the group's heads h and rows i of P_hij·dO_hi, accumulated one (h, i) row at a
    time in ``dtype`` (a plain loop of τ multiplies and adds: legitimate arithmetic, whose error the
    classical bound γ_n·Σ|P||dO| covers, and the order a kernel that walks query blocks accumulates
    in). P is the τ softmax of the τ scores. ``drop_row``: skip that (h, i) row — a planted bug.
    p: a ``Problem`` (float64 tensors already rounded to τ) → (B, Hkv, Nk, Dv) in float64."""
    q, k, v = (t.to(dtype) for t in read_inputs(p))
    B, Hq, Nq, _ = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    group = Hq // Hkv
    s = (q @ k.repeat_interleave(group, 1).transpose(-1, -2)) * p.scale           # (B, Hq, Nq, Nk)
    s = s.masked_fill(~p.allowed, float("-inf"))
    P = torch.softmax(s, dim=-1).nan_to_num(0.0)                                  # empty rows: 0
    P = P.unflatten(1, (Hkv, group)).flatten(2, 3)                                # (B, Hkv, G·Nq, Nk)
    dout = p.dout.to(dtype).unflatten(1, (Hkv, group)).flatten(2, 3)              # (B, Hkv, G·Nq, Dv)
    acc = torch.zeros(B, Hkv, Nk, v.shape[-1], dtype=dtype)
    for r in range(group * Nq):
        if r != drop_row:
            acc = acc + P[:, :, r, :, None] * dout[:, :, r, None, :]
    return acc.to(torch.float64)


def _judge_dv(spec, dtype, **kw):
    p = build(spec).rounded(dtype)
    orc = oracles(p)
    q, k, v = (t.to(dtype) for t in read_inputs(p))
    base = naive(q, k, v, p.allowed, p.scale, p.dout.to(dtype))[2][2]
    return judge("dv", _sequential_dv(p, dtype, **kw), orc.expected.dv, base, dtype, orc.mags, gold=orc.gold.dv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_a_sequential_sum_of_the_dv_rows_passes_the_rule(dtype):
    v = _judge_dv(GQA_ONE_KEY, dtype)
    assert v.ok, v
    # an example where the floor decides: the sequential sum is off by more than FACTOR × the naive
    # run's (blocked, library) error, so the rule must size the accumulation's own rounding
    assert v.error > FACTOR["dv"] * v.baseline_error, v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_a_sequential_sum_that_skips_one_row_is_still_caught(dtype):
    v = _judge_dv(GQA_ONE_KEY, dtype, drop_row=500)
    assert (v.ok, v.reason) == (False, "tolerance"), v
