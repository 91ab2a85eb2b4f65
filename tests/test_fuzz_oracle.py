"""The oracle: the dense float64 torch formula (used beyond the reference's reach) agrees with the
verified reference on every family; mpmath and certified intervals agree with float64. Every comparison
is the tolerance module's agreement rule (``tolerance.agree``: two evaluations of one function, at least
float64), never a tolerance of this file's."""
import math

import torch
from hypothesis import given, settings

from flashproof.fuzz.oracle import dense, oracle, read_inputs, reference, work
from flashproof.fuzz.problem import ProblemSpec, build
from flashproof.fuzz.strategies import attention_problems
from flashproof.fuzz.tolerance import AGREEMENT, agree, magnitudes

SMALL = attention_problems(max_nq=6, max_nk=20, max_d=3, max_heads_kv=2, max_group=3, blocks=(4, 8))
FIELDS = ("out", "lse", "dq", "dk", "dv")


def _mags(p, ref):
    """The rule's magnitudes of problem ``p`` (the oracle's inputs, ``ref``'s LSE, p's cotangents)."""
    qi, ki, vi = read_inputs(p)
    return magnitudes(qi, ki, vi, p.dout, ref.lse, p.scale, dlse=p.dlse)


def _agree(name, a, b, mags):
    """``tolerance.agree`` (non-finite entries, the −inf LSE of empty rows, must be equal on both sides)."""
    v = agree(name, a, b, mags)
    assert v.ok, v


@settings(max_examples=40)
@given(SMALL)
def test_dense_float64_matches_the_verified_reference(spec):
    p = build(spec)
    ref, den = reference(p), dense(p)
    assert ref.source == "verified:float" and den.source == "dense-float64-torch"
    mags = _mags(p, ref)
    for f in FIELDS:
        _agree(f, getattr(den, f), getattr(ref, f), mags)


def test_empty_rows_follow_the_extension():
    spec = ProblemSpec(n_q=4, n_k=5, d=2, dv=2, seqlens=((2, 0), (2, 5)), seed=1)
    e = reference(build(spec))
    assert torch.equal(e.out[0, 0, :2], torch.zeros(2, 2))
    assert torch.isneginf(e.lse[0, 0, :2]).all() and torch.isfinite(e.lse[0, 0, 2:]).all()
    assert torch.equal(e.dq[0, 0, :2], torch.zeros(2, 2))


def test_interval_enclosure_contains_the_float64_oracle():
    spec = ProblemSpec(heads_q=2, heads_kv=1, n_q=4, n_k=9, d=3, dv=2, causal=True, mask_kind="random",
                       block=4, seed=7)
    p = build(spec)
    iv, f = reference(p, num="interval"), reference(p)
    mags = _mags(p, f)
    for name in FIELDS:
        mid, rad, val = getattr(iv, name), getattr(iv.radius, name), getattr(f, name)
        fin = torch.isfinite(mid)
        # the float run lies in the certified enclosure, up to its own float64 rounding: the agreement
        # rule's bound (AGREEMENT · M_T · (1 + S)) beyond the radius
        slack = AGREEMENT * mags[name] * (1.0 + mags["score"])
        assert ((val[fin] - mid[fin]).abs() <= rad[fin] + slack).all(), name


def test_mpmath_agrees_with_float64():
    p = build(ProblemSpec(n_q=3, n_k=6, d=2, dv=2, huge_logits=1e3, ties=True, block=4, seed=3))
    m, f = reference(p, num="mpmath"), reference(p)
    mags = _mags(p, f)
    for name in FIELDS:
        _agree(name, getattr(m, name), getattr(f, name), mags)


def test_oracle_switches_to_dense_beyond_the_reference_limit():
    p = build(ProblemSpec(n_q=3, n_k=4, d=2, dv=2, seed=0))
    assert oracle(p).source == "verified:float"
    assert oracle(p, max_work=work(p) - 1).source == "dense-float64-torch"


def test_poison_never_reaches_the_oracle():
    for poison in ("nan", "inf", "-inf", "1e30"):
        p = build(ProblemSpec(n_q=5, n_k=9, d=2, dv=2, mask_kind="late_keys", block=4, empty_rows=True,
                              poison=poison, seed=2))
        for e in (reference(p), dense(p)):
            assert not any(torch.isnan(getattr(e, f)).any() for f in FIELDS)
            assert math.isfinite(e.out.abs().max().item())


@settings(max_examples=25)
@given(SMALL)
def test_the_lse_cotangent_enters_both_oracles_alike(spec):
    """With an LSE cotangent the reference runs its reverse pass with the extra output column
    (oracle.reference's docstring); the dense float64 autograd of Σ dO·out + Σ dLSE·lse agrees."""
    from flashproof.fuzz.problem import lse_cotangent

    p = build(spec)
    p = p._replace(dlse=lse_cotangent(spec))
    ref, den = reference(p), dense(p)
    mags = _mags(p, ref)
    for f in ("dq", "dk", "dv"):
        _agree(f, getattr(den, f), getattr(ref, f), mags)


def test_build_leaves_the_lse_cotangent_zero():
    p = build(ProblemSpec(n_q=3, n_k=4, d=2, dv=2, seed=1))
    assert p.dlse is None  # the oracle's gradients are those of Σ dO·out unless a check sets it
