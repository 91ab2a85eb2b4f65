"""EXT-FP-ERROR: the error-bounding and rounding number systems, the closed formula, its controls and
the fuzzer's proved rule. Numeric bounds come from ``verified/fp_bound.py`` only."""
from __future__ import annotations

import math

import pytest
import sympy as sp
import torch

from flashproof.fuzz import tolerance
from flashproof.fuzz.campaign import campaign
from flashproof.proofs.engine.core import Context
from flashproof.proofs.numbers import fperror as fe
from flashproof.proofs.numbers.fpround import RoundNum, round_to
from flashproof.proofs.obligations.attention import fp_error, fp_model
from flashproof.verified import attention as att
from flashproof.verified import fp_bound


def _ctx(ob_fn, deep=False):
    from flashproof.proofs.engine.core import OBLIGATIONS

    ob = next(o for o in OBLIGATIONS.values() if o.fn is ob_fn)
    base = OBLIGATIONS[ob.of] if ob.of else ob
    return Context(dict(base.deep_bounds if deep else base.bounds), 60_000, deep)


# ------------------------------------------------------------------ the derivation and the formula

def test_derived_counts_are_the_formulas_for_a_row_of_seven_keys_in_blocks_of_three():
    N, fw = fp_error.derive(7, 2, 3)
    l, t = fw.l[0], fp_bound.terms(7, 2, 3, "fp32", mq=1, mk=1, scale=1)
    assert (t.T, t.b1) == (3, 3)
    assert (l.ku, l.kin, l.ke) == (t.ku_l, 0, t.ke) == (2 + 4, 0, 3)
    assert sp.expand(l.phi - (fe.Es + 6 * fe.u * (fe.Sm + fe.Es))) == 0
    assert fp_error._check_case(7, 2, 3) is None


def test_masked_rows_stay_below_the_full_row_formula():
    assert fp_error._check_case(5, 1, 2, [{0}, {4}, {0, 4}, {1, 2, 3}]) is None


@pytest.mark.parametrize("n_k", [1, 2, 5, 16, 100])
def test_block_one_gives_the_largest_bound_so_the_fuzzer_may_use_it(n_k):
    kw = dict(mq=2.0, mk=3.0, mv=1.5, scale=0.25)
    worst = fp_bound.forward_error_bound(n_k, 4, 1, "bf16", **kw)
    for b in range(1, n_k + 1):
        fb = fp_bound.forward_error_bound(n_k, 4, b, "bf16", **kw)
        assert fb.out <= worst.out and fb.lse <= worst.lse, b


def test_the_bound_grows_with_n_k_and_is_led_by_the_input_format():
    kw = dict(mq=1.0, mk=1.0, mv=1.0, scale=0.5)
    outs = [fp_bound.forward_error_bound(n, 8, 4, "fp32", **kw).out for n in (4, 64, 1024)]
    assert outs[0] < outs[1] < outs[2]
    # bf16 inputs: the weight cast before P·V (u_in = 2^-8) dominates the fp32 accumulation
    assert fp_bound.forward_error_bound(64, 8, 4, "bf16", **kw).out > 50 * outs[1]


@pytest.mark.parametrize("kwargs, match", [(dict(n_k=0, d=1, block=1, fmt="fp32"), "n_k, d and block"),
                                           (dict(n_k=4, d=1, block=1, fmt="fp64"), "input format")])
def test_formula_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fp_bound.forward_error_bound(**kwargs, mq=1, mk=1, mv=1, scale=1)


def test_error_bound_system_needs_concrete_conditions_and_entries():
    N = fe.ErrBoundNum()
    with pytest.raises(TypeError, match="concrete conditions"):
        N.where(sp.Symbol("f"), N.zero(), N.zero())
    with pytest.raises(TypeError, match="Entry"):
        N.const(0.5)


# ------------------------------------------------------------------ the rounding emulation

def test_round_to_each_format_rounds_to_nearest_even():
    assert round_to("bf16", 1 + 2.0 ** -8) == 1.0           # a tie: to the even neighbour
    assert round_to("bf16", 1 + 3 * 2.0 ** -8) == 1 + 2.0 ** -6
    assert round_to("fp16", 1 + 2.0 ** -11) == 1.0
    assert round_to("fp16", 70000.0) == math.inf
    assert round_to("fp32", 0.1) != 0.1 and abs(round_to("fp32", 0.1) - 0.1) <= 2.0 ** -24 * 0.1


def test_rounding_system_rejects_inputs_not_in_the_format():
    with pytest.raises(ValueError, match="not representable in bf16"):
        att.tiled_forward([[fe.Entry("Q", None, 0.1)]], [[fe.Entry("K", None, 1.0)]], [[fe.Entry("V", None, 1.0)]],
                          scale=fe.Entry("c", None, 1.0, rounded=True), block=1, num=RoundNum("bf16"))


def test_the_emulation_rounds_the_weight_before_p_times_v():
    N = RoundNum("bf16")
    v = N.const(fe.Entry("V", None, 1.0))
    p = N.exp(-2.0 ** -7)  # ≈ 1 − 2^-7: not a bf16 value after fp32 rounding
    assert N.mul(p, v) == round_to("bf16", p) != p


# ------------------------------------------------------------------ the controls, by the stable fact

def test_a_formula_without_the_n_k_growth_is_refuted_by_its_counts():
    out = fp_error.derive_no_nk(_ctx(fp_error.derive_no_nk))
    assert out.status == "refuted" and "derived (ku, kin, ke, φ)" in out.counterexample


def test_half_u_is_refuted_by_a_single_multiplication():
    out = fp_model.fp_model_half_u(_ctx(fp_model.fp_model_half_u))
    assert out.status == "refuted" and out.counterexample["step"] == "fp32 mul"


def test_skipping_the_max_subtraction_breaks_the_bound_with_large_logits():
    out = fp_error.validate_no_max(_ctx(fp_error.validate_no_max))
    assert out.status == "refuted" and out.counterexample["format"] == "fp32"
    assert out.counterexample["error"] > out.counterexample["bound"]


def test_the_validation_holds_and_reports_its_tightness():
    out = fp_error.validate_bound(_ctx(fp_error.validate_bound))
    assert out.status == "proved" and "error/bound max" in out.detail


# ------------------------------------------------------------------ the fuzzer's proved rule

def _mags(n_k=4, d=2):
    q, k, v = torch.ones(1, 1, 2, d), torch.ones(1, 1, n_k, d), torch.ones(1, 1, n_k, 1)
    return tolerance.magnitudes(q, k, v, torch.ones(1, 1, 2, 1), torch.zeros(1, 1, 2), 0.5)


def test_proved_rule_is_the_formula_at_block_one():
    want = fp_bound.forward_error_bound(4, 2, 1, "fp16", mq=1.0, mk=1.0, mv=1.0, scale=0.5)
    assert tolerance.proved_bound("out", _mags(), torch.float16) == want.out
    assert tolerance.proved_bound("lse", _mags(), torch.float16) == want.lse


def test_proved_rule_judges_against_the_formula_not_the_baseline():
    ref = torch.zeros(1, 1, 2, 1, dtype=torch.float64)
    bound = tolerance.proved_bound("out", _mags(), torch.float32)
    huge_baseline = ref + 1.0  # the empirical rule would allow ~2
    v = tolerance.judge("out", ref + 2 * bound, ref, huge_baseline, torch.float32, _mags(), rule="proved")
    assert not v.ok and v.reason == "tolerance" and v.bound == bound


@pytest.mark.parametrize("name, dtype, match", [("dq", torch.float32, "out and lse only"),
                                                ("out", torch.float64, "fp32, bf16 and fp16")])
def test_proved_rule_refuses_what_it_does_not_cover(name, dtype, match):
    with pytest.raises(ValueError, match=match):
        tolerance.proved_bound(name, _mags(), dtype)


def test_campaign_refuses_the_proved_rule_for_fp64():
    with pytest.raises(ValueError, match="pass --dtype fp32/bf16/fp16"):
        campaign("torch", device="cpu", dtypes=("fp32", "fp64"), tolerance="proved")
