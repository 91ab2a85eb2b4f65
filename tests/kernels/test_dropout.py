"""Dropout in attention(): the torch kernels against the verified reference given the same keep bits
(tests/support/dropout_cases.py, the one tolerance rule), p = 0 identical to no dropout, p near 1,
deterministic replay, the counter-based bits (a Philox known answer; nothing mask-sized is saved for
the backward), the kept fraction (Hoeffding tests with a stated false-alarm rate, and their negative
controls), argument checks and the router's rule."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.dropout_cases import DROP_CASES, failures, reference, run, run_and_judge, verdicts
from support.kernel_cases import ids, leaves, problem_of

from flashproof.fuzz.oracle import read_inputs
from flashproof.fuzz.problem import ProblemSpec, build
from flashproof.fuzz.sampler_stat import ALPHA, MIN_POWER
from flashproof.fuzz.strategies import attention_problems
from flashproof.kernels import attention
from flashproof.kernels.attention import dispatch, dropout_mask
from flashproof.kernels.attention import dropout as D
from flashproof.kernels.attention.api import validate

# Each kept-fraction test below has the project's one false-alarm rate, sampler_stat's ALPHA, over
# the choice of seed: by Hoeffding's inequality P(|K/n − q| ≥ ε) ≤ 2·exp(−2nε²) for n independent
# Bernoulli(q) bits, so ε is set to make that bound ALPHA (no normal approximation involved); each
# negative control first shows the test's power against it is at least sampler_stat's MIN_POWER.


def hoeffding_eps(n: int) -> float:
    """ε(n) = sqrt(ln(2/ALPHA) / (2n)): the half-width at which 2·exp(−2nε²) = ALPHA."""
    return math.sqrt(math.log(2 / ALPHA) / (2 * n))


def hoeffding_ok(kept: int, n: int, q: float) -> bool:
    """Accept "kept ~ Binomial(n, q)" unless |kept/n − q| ≥ ε(n)."""
    return abs(kept / n - q) < hoeffding_eps(n)


def hoeffding_power(n: int, q: float, q_bad: float) -> float:
    """A lower bound on P(reject) when the bits are Bernoulli(q_bad) instead of q: accepting needs
    |K/n − q_bad| > |q_bad − q| − ε, which Hoeffding bounds by exp(−2n(|q_bad − q| − ε)²) (one side)."""
    gap = abs(q_bad - q) - hoeffding_eps(n)
    return 1 - math.exp(-2 * n * gap * gap) if gap > 0 else 0.0


def assert_powerful(n: int, q: float, q_bad: float) -> None:
    pw = hoeffding_power(n, q, q_bad)
    assert pw >= MIN_POWER, f"power {pw:.3f} < {MIN_POWER} against keep probability {q_bad} (vs {q}) at n = {n}"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", DROP_CASES, ids=ids(DROP_CASES))
def test_torch_dropout_meets_the_reference_with_the_same_bits(case, dtype):
    bad = run_and_judge(case, dtype, "torch", 0.3, 1234)
    assert not bad, failures(f"{case.id} {dtype}", bad)


@pytest.mark.parametrize("p", [0.9, 0.99, 1 - 2.0 ** -16], ids=["0.9", "0.99", "1-2^-16"])
def test_p_near_one(p):
    """Few or no kept pairs and a scale up to 2^16 (the largest: t = 2¹⁶ − 1): still the reference's values
    (the naive baseline in float32 carries the same scale); a row whose allowed pairs are all dropped has
    out = 0 exactly, and lse stays the undropped softmax's."""
    bad = run_and_judge(DROP_CASES[1], torch.float32, "torch", p, 7)
    assert not bad, failures(f"p={p}", bad)
    prob, _, got = run(DROP_CASES[1], torch.float32, "torch", p, 7)
    kept_rows = (dropout_mask(7, p, tuple(prob.allowed.shape)) & prob.allowed).any(-1)  # (B, Hq, Nq)
    assert (kept_rows | ~got["out"].any(-1)).all()  # no kept pair -> a zero row
    if p > 0.999:
        assert not kept_rows.all()  # the scale 2^16 case drops whole rows
        assert torch.isfinite(got["lse"]).any()  # the statistics stay those of the undropped softmax


def test_p_is_realised_at_16_bits():
    """The drop probability realised is round(p · 2¹⁶) / 2¹⁶ and the kept entries are scaled by its inverse
    keep probability (so E[r] = 1 exactly); p below 2⁻¹⁷ drops nothing (no Dropout: the undropped call)."""
    for p in (0.1, 0.5, 0.9, 0.3, 2.0 ** -16, 1 - 2.0 ** -16, 0.123456789):
        drop = D.make(p, 1)
        t = math.floor(p * 65536 + 0.5)
        assert drop.t == t and D.realised_p(p) == t / 65536 and abs(D.realised_p(p) - p) <= 2.0 ** -17
        assert drop.scale == 1 / (1 - t / 65536)  # both exact: t/2^16 and 1 - t/2^16 are dyadic
    assert D.make(2.0 ** -18, 1) is None and D.realised_p(2.0 ** -18) == 0.0
    assert D.make(0.0, 1) is None


def test_the_check_rejects_a_fresh_mask():
    """Negative control of the reference comparison: judged against another seed's bits, it fails."""
    assert run_and_judge(DROP_CASES[0], torch.float32, "torch", 0.3, 1234, mask_seed=1235)


def undropped(case, dtype, backend):
    """out, lse, dq, dk, dv of ``case`` called without any dropout argument."""
    prob, kw = problem_of(case, dtype)
    q, k, v = leaves(prob, dtype)
    res = attention(q, k, v, return_lse=True, backend=backend, tuning="first", **kw)
    grads = torch.autograd.grad(res.out, (q, k, v), prob.dout.to(dtype))
    return dict(zip(("out", "lse", "dq", "dk", "dv"), (res.out, res.lse, *grads)))


@pytest.mark.parametrize("seed", [None, 99])
def test_p_zero_is_the_undropped_call_bitwise(seed):
    plain = undropped(DROP_CASES[1], torch.float32, "torch")
    got = run(DROP_CASES[1], torch.float32, "torch", 0.0, seed)[2]
    for name in plain:
        assert torch.equal(got[name], plain[name]), name


def test_same_seed_replays_bitwise_and_another_seed_differs():
    a = run(DROP_CASES[1], torch.float32, "torch", 0.5, 42)[2]
    b = run(DROP_CASES[1], torch.float32, "torch", 0.5, 42)[2]
    c = run(DROP_CASES[1], torch.float32, "torch", 0.5, 43)[2]
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert not torch.equal(a["out"], c["out"])
    assert torch.equal(a["lse"], c["lse"])  # lse is the undropped softmax's


def test_seed_none_follows_torch_manual_seed():
    torch.manual_seed(5)
    a = run(DROP_CASES[0], torch.float32, "torch", 0.5, None)[2]["out"]
    torch.manual_seed(5)
    b = run(DROP_CASES[0], torch.float32, "torch", 0.5, None)[2]["out"]
    c = run(DROP_CASES[0], torch.float32, "torch", 0.5, None)[2]["out"]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_philox_known_answer():
    """Philox-4x32-10 with key 0 and counter 0: words 0x6627e8d5 0xe169c58d 0xbc57ac4c 0x9b00dbd8 (Salmon et
    al.'s known-answer vector; the first is the value Triton's tl.randint(0, 0) gives)."""
    words = [int(w) for w in D.philox(0, torch.zeros(1, dtype=torch.int64))]
    assert words == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    # the 16-bit split of the 32x32 products is exact at the extremes
    x = torch.tensor([0, 1, 2 ** 32 - 1], dtype=torch.int64)
    for a in (D._ROUND_A, D._ROUND_B):
        hi, lo = D._mulhilo(a, x)
        assert [(h << 32) + l for h, l in zip(hi.tolist(), lo.tolist())] == [a * int(t) for t in x]


def test_bit_layout_is_the_documented_one():
    """keep_bits against the module's formula written out per pair in plain ints: counter
    row · ⌈Nk/8⌉ + ⌊j/8⌋, key j takes half (j mod 2) of word ⌊(j mod 8)/2⌋; kept iff half ≥ t."""
    drop, Hq, Nq, Nk = D.make(0.4, 2 ** 40 + 3), 3, 5, 21
    mask = dropout_mask(drop.seed, drop.p, (2, Hq, Nq, Nk))
    for b, h, i, j in [(0, 0, 0, 0), (0, 0, 0, 7), (0, 0, 0, 8), (1, 2, 4, 20), (1, 0, 3, 13), (0, 1, 2, 5)]:
        counter = ((b * Hq + h) * Nq + i) * 3 + j // 8  # ⌈21 / 8⌉ = 3
        words = [int(w) for w in D.philox(drop.seed, torch.tensor([counter]))]
        half = (words[(j % 8) // 2] >> (16 * (j % 2))) & 0xFFFF
        assert bool(mask[b, h, i, j]) == (half >= drop.t), (b, h, i, j)


def test_varlen_key_columns_count_from_each_sequence():
    """With cu_seqlens_k, a sequence's keys take the bits of key columns 0, 1, … (the kernels count them
    from the sequence's start, so that groups of 8 keys align with their tiles); bad offsets are refused."""
    cu = [0, 5, 5, 21, 30]
    shape = (1, 2, 7, 30)
    packed = dropout_mask(3, 0.5, shape, cu_seqlens_k=cu)
    plain = dropout_mask(3, 0.5, shape)
    for s0, s1 in zip(cu, cu[1:]):
        assert torch.equal(packed[..., s0:s1], plain[..., :s1 - s0])
    for bad in ([0, 5, 29], [1, 30], [0, 20, 10, 30]):
        with pytest.raises(ValueError, match="cu_seqlens_k"):
            dropout_mask(3, 0.5, shape, cu_seqlens_k=bad)


def test_the_mask_is_regenerated_not_saved():
    """No tensor with one entry per (b, h, i, j) pair is saved for the backward."""
    prob, kw = problem_of(DROP_CASES[0], torch.float32)
    q, k, v = leaves(prob, torch.float32)
    pairs = prob.allowed.numel()
    sizes = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):
        attention(q, k, v, backend="torch", dropout_p=0.5, dropout_seed=1)
    assert sizes and all(n != pairs and n < pairs for n in sizes), (sizes, pairs)


def test_kernel_output_counts_the_kept_keys():
    """With q = 0 (every P_ij = 1/Nk) and v = 1, out_i · (1 − p) · Nk is the number of kept keys of
    row i: the kernel's own count equals dropout_mask's, exactly (float64)."""
    B, H, N, p, seed = 2, 3, 64, 0.25, 11
    q = torch.zeros(B, H, N, 16, dtype=torch.float64)
    k = torch.randn(B, H, N, 16, dtype=torch.float64)
    v = torch.ones(B, H, N, 1, dtype=torch.float64)
    out = attention(q, k, v, backend="torch", dropout_p=p, dropout_seed=seed)
    counts = out[..., 0] * (1 - p) * N
    assert torch.equal(counts.round(), dropout_mask(seed, p, (B, H, N, N)).sum(-1).to(torch.float64))
    assert (counts - counts.round()).abs().max() < 1e-9  # exactness of an integer count (not a tolerance)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_kept_fraction_is_one_minus_p(p):
    shape = (4, 4, 128, 128)  # n = 262144 bits: ε ≈ 0.0038 at ALPHA
    keep = dropout_mask(2024, p, shape)
    assert hoeffding_ok(int(keep.sum()), keep.numel(), 1 - D.realised_p(p))


def test_kept_fraction_control_is_rejected():
    """Negative control: bits drawn with keep probability 1 − p − 0.02 must fail the same test."""
    p, shape = 0.5, (4, 4, 128, 128)
    keep = dropout_mask(2024, p + 0.02, shape)
    assert_powerful(keep.numel(), 1 - p, 1 - D.realised_p(p + 0.02))
    assert not hoeffding_ok(int(keep.sum()), keep.numel(), 1 - p)


def test_bits_of_neighbouring_positions_are_independent():
    """Pairs (j, j+1), heads (h, h+1) and seeds (s, s+1) at the same position: both kept with
    probability q² (disjoint pairs: independent under the hypothesis), at ALPHA each; controls: a
    counter that ignores the head, and one that ignores the seed, are rejected."""
    p, q, shape = 0.5, 0.5, (2, 4, 128, 128)
    a = dropout_mask(7, p, shape)
    b = dropout_mask(8, p, shape)
    for name, both in (("keys", a[..., 0::2] & a[..., 1::2]), ("heads", a[:, 0::2] & a[:, 1::2]), ("seeds", a & b)):
        assert hoeffding_ok(int(both.sum()), both.numel(), q * q), name
    same_head = a[:, :1].expand(shape)  # a planted bug: every head reads head 0's bits
    both = same_head[:, 0::2] & same_head[:, 1::2]
    assert_powerful(both.numel(), q * q, q)  # both bits of a pair are one bit: kept with probability q
    assert not hoeffding_ok(int(both.sum()), both.numel(), q * q)
    both = a & a  # a planted bug: the seed is ignored (two seeds give the same bits)
    assert_powerful(both.numel(), q * q, q)
    assert not hoeffding_ok(int(both.sum()), both.numel(), q * q)


@pytest.mark.parametrize("kw, exc, words", [
    ({"dropout_p": -0.1}, ValueError, "[0, 1)"),
    ({"dropout_p": 1.0}, ValueError, "[0, 1)"),
    ({"dropout_p": 1.5}, ValueError, "[0, 1)"),
    ({"dropout_p": 1 - 2.0 ** -24}, ValueError, "1 - 2**-17"),
    ({"dropout_p": float("nan")}, ValueError, "[0, 1)"),
    ({"dropout_p": True}, TypeError, "float"),
    ({"dropout_p": "0.1"}, TypeError, "float"),
    ({"dropout_p": None}, TypeError, "float"),
    ({"dropout_p": 0.1, "dropout_seed": -1}, ValueError, "2**63"),
    ({"dropout_p": 0.1, "dropout_seed": 2 ** 63}, ValueError, "2**63"),
    ({"dropout_p": 0.1, "dropout_seed": 1.5}, TypeError, "int"),
    ({"dropout_p": 0.1, "dropout_seed": True}, TypeError, "int"),
], ids=["p_negative", "p_one", "p_above_one", "p_rounds_to_one", "p_nan", "p_bool", "p_str", "p_none", "seed_negative",
        "seed_too_big", "seed_float", "seed_bool"])
def test_bad_dropout_arguments(kw, exc, words):
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(exc, match=words.replace("[", r"\[").replace(")", r"\)").replace("*", r"\*")):
        attention(q, q, q, backend="torch", **kw)


def test_dropout_mask_needs_a_seed():
    with pytest.raises(ValueError, match="dropout_seed"):
        dropout_mask(None, 0.5, (1, 1, 2, 2))


def _gluon_sized(**kw):
    q = torch.zeros(1, 2, 128, 128, dtype=torch.bfloat16)
    return validate(q, q, q, **kw)


H200 = dispatch.Device("cuda", (9, 0), False, True, True)


def test_router_sends_dropout_to_triton_not_gluon():
    assert dispatch.plan(_gluon_sized(), H200).forward == "gluon"  # the same call without dropout
    route = dispatch.plan(_gluon_sized(dropout_p=0.1, dropout_seed=1), H200)
    assert (route.forward, route.backward) == ("triton", "triton")
    assert any("dropout" in r for r in route.reasons), route.reasons
    assert "dropout" in dispatch.gluon_rule(_gluon_sized(dropout_p=0.1, dropout_seed=1), H200)


def test_gluon_asked_for_with_dropout_raises_naming_the_rule():
    with pytest.raises(dispatch.BackendUnavailable, match="dropout"):
        dispatch.plan(_gluon_sized(dropout_p=0.1, dropout_seed=1, backend="gluon"), H200)


def test_p_zero_keeps_the_gluon_route():
    assert dispatch.plan(_gluon_sized(dropout_p=0.0, dropout_seed=3), H200).forward == "gluon"


FUZZ_FAMILIES = ("causal", "window", "mask", "empty_rows", "ties", "zero_q", "late_max", "poison", "gqa", "dv",
                 "batch", "huge_logits")


@settings(max_examples=25, deadline=None)
# a draw that failed CI once when the rule's magnitudes ignored dropout's 1/(1 - p) (float64, p = 0.9:
# error 8.9e-16 against a bound of 6.4e-16 on out)
@example(spec=ProblemSpec(heads_q=2, n_q=1, n_k=9, d=1, dv=1, window=(1, 0), block=16, seed=0), p=0.9, seed=217,
         dtype=torch.float64)
@given(spec=attention_problems(max_nq=20, max_nk=20, max_d=8, max_heads_kv=2, max_group=2,
                               families=FUZZ_FAMILIES),
       p=st.sampled_from([0.1, 0.5, 0.9]), seed=st.integers(0, D.MAX_SEED - 1),
       dtype=st.sampled_from([torch.float64, torch.float32]))
def test_fuzz_torch_dropout_against_the_reference(spec, p, seed, dtype):
    """Drawn problems (the fuzzer's strategy: masks, empty rows, ties, poison in unread entries, huge
    logits, GQA) with the problem's allowed set passed as a dense mask: out, lse and the gradients
    meet the reference with the same bits under the tolerance rule."""
    prob = build(spec).rounded(dtype)
    xs = [t.to(dtype).requires_grad_() for t in (prob.q, prob.k, prob.v)]
    res = attention(*xs, mask=prob.allowed, scale=prob.scale, return_lse=True, backend="torch",
                    dropout_p=p, dropout_seed=seed)
    grads = torch.autograd.grad(res.out, xs, prob.dout.to(dtype))
    got = dict(zip(("out", "lse", "dq", "dk", "dv"), (res.out, res.lse, *grads)))
    keep = dropout_mask(seed, p, tuple(prob.allowed.shape))
    clean = prob._replace(**dict(zip(("q", "k", "v"), read_inputs(prob))))
    bad = [x for x in verdicts(clean, dtype, reference(clean, keep, p), got, keep, p) if not x.ok]
    assert not bad, failures(f"{spec.describe()} p={p} seed={seed} {dtype}", bad)
