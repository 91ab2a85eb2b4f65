"""The tolerance rule, the strategies and the split-merge formula (fast, no kernel)."""
import math

import pytest
import torch
from hypothesis import find, given, settings, strategies as st

from flashproof.fuzz.checks import merge_partials
from flashproof.fuzz.oracle import read_inputs, reference
from flashproof.fuzz.problem import ProblemSpec, build, lse_cotangent
from flashproof.fuzz.strategies import FAMILIES, attention_problems
from flashproof.fuzz.tolerance import FACTOR, _dot_magnitude, floor, judge, magnitudes

MAGS = {"out": 1.0, "lse": 1.0, "dq": 1.0, "dk": 1.0, "dv": 1.0, "score": 1.0, "dot_len": 1}
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
    assert torch.equal(torch.isneginf(lse), torch.isneginf(whole.lse))
    fin = torch.isfinite(whole.lse)
    assert torch.allclose(lse[fin], whole.lse[fin], atol=1e-12, rtol=1e-12)
    assert torch.allclose(out, whole.out, atol=1e-12, rtol=1e-12)


def test_every_family_can_switch_on():
    strat = attention_problems(max_nq=70, max_nk=70, max_d=4, blocks=(16,))
    probes = {
        "causal": lambda s: s.causal, "window": lambda s: s.window is not None, "varlen": lambda s: s.seqlens is not None,
        "mask": lambda s: s.mask_kind != "none", "empty_rows": lambda s: s.empty_rows,
        "huge_logits": lambda s: s.huge_logits > 0, "ties": lambda s: s.ties, "zero_q": lambda s: s.zero_q, "late_max": lambda s: s.late_max,
        "poison": lambda s: s.poison is not None, "noncontig": lambda s: s.noncontig,
        "gqa": lambda s: s.heads_q > s.heads_kv, "special_lengths": lambda s: s.n_k in (63, 64, 65),
        "dv": lambda s: s.dv != s.d, "batch": lambda s: s.batch > 1,
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


def test_the_gradients_through_ds_carry_the_dot_product_bound_in_their_floor():
    """floor = eps(τ)·M + M·eps_acc·S + M·2γ_Dv for dq, dk, dbias (γ_n = n·u/(1 − n·u), u = eps_acc/2);
    dv and out have no γ term; bf16 inputs are computed in fp32 (eps_acc = 2⁻²³)."""
    mags = {**MAGS, "dq": 2.0, "dk": 3.0, "dbias": 5.0, "dv": 7.0, "score": 0.5, "dot_len": 64}
    for dtype, u in ((torch.float32, 2.0 ** -24), (torch.bfloat16, 2.0 ** -24), (torch.float64, 2.0 ** -53)):
        eps, acc = torch.finfo(dtype).eps, 2 * u
        gamma = 64 * u / (1 - 64 * u)
        for name in ("dq", "dk", "dbias"):
            m = mags[name]
            assert floor(name, mags, dtype) == pytest.approx(eps * m + m * acc * 0.5 + m * 2 * gamma, rel=1e-12)
        assert floor("dv", mags, dtype) == pytest.approx(eps * 7.0 + 7.0 * acc * 0.5, rel=1e-12)


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
