"""The verified reference against itself: dense vs tiled, split-and-merge, certified enclosures,
the reverse pass against finite differences, and the empty-row extension."""
from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashproof.verified import (BOTTOM, block_ranges, dense_attention, dense_attention_from_scores, merge,
                                 resolve, summarize, tiled_backward, tiled_forward, tiled_forward_from_scores)
from support.reference_problems import problems

U = 2.0 ** -53  # unit roundoff of float64


def max_abs_diff(A, B):
    return max(abs(a - b) for ra, rb in zip(A, B) for a, b in zip(ra, rb))


# ------------------------------------------------------------------ dense vs tiled

@given(problems())
@settings(max_examples=25)
def test_tiled_equals_dense_mpmath_60_digits(p):
    num = resolve("mpmath")  # 60 digits
    dense = dense_attention(p.Q, p.K, p.V, scale=p.scale, allowed=p.allowed, num=num)
    for b in range(1, len(p.K) + 2):
        tiled = tiled_forward(p.Q, p.K, p.V, scale=p.scale, block=b, allowed=p.allowed, num=num)
        assert max_abs_diff(tiled.out, dense) < 1e-40, b


@given(problems())
def test_tiled_equals_dense_float(p):
    dense = dense_attention(p.Q, p.K, p.V, scale=p.scale, allowed=p.allowed)
    vmax = max(abs(x) for row in p.V for x in row) or 1.0
    for b in range(1, len(p.K) + 2):
        tiled = tiled_forward(p.Q, p.K, p.V, scale=p.scale, block=b, allowed=p.allowed)
        # both are convex combinations of V computed with O(n + d) rounded steps
        assert max_abs_diff(tiled.out, dense) <= 64 * (len(p.K) + len(p.Q[0]) + 4) * U * vmax * 10


def _edge_cases(n=9):
    """(block, allowed key sets) where the lone allowed key sits at a block edge, or the allowed keys
    come only after several fully masked blocks."""
    cases = []
    for b in (2, 3, 4):
        for j in sorted({0, b - 1, b, n - 1}):
            cases.append((b, [{j}] * 3, f"b{b}-lone-key-{j}"))
        last = (n - 1) // b * b  # the last block's first key: ≥ 2 fully masked blocks before it
        cases.append((b, [set(range(last, n))] * 3, f"b{b}-only-in-last-block"))
        cases.append((b, [{n - 1}, {0, n - 1}, set(range(b, n, b))], f"b{b}-mixed"))
    return cases


@pytest.mark.parametrize("block,allowed,name", _edge_cases(), ids=[c[2] for c in _edge_cases()])
def test_tiled_equals_dense_at_block_edges(block, allowed, name):
    rng = random.Random(name)
    n, d, v = 9, 2, 2
    Q = [[rng.uniform(-2, 2) for _ in range(d)] for _ in range(3)]
    K = [[rng.uniform(-2, 2) for _ in range(d)] for _ in range(n)]
    V = [[rng.uniform(-2, 2) for _ in range(v)] for _ in range(n)]
    num = resolve("mpmath")
    dense = dense_attention(Q, K, V, scale=0.7, allowed=allowed, num=num)
    tiled = tiled_forward(Q, K, V, scale=0.7, block=block, allowed=allowed, num=num)
    assert max_abs_diff(tiled.out, dense) < 1e-40
    for i, A in enumerate(allowed):  # a lone key: Y is exactly that key's value row
        if len(A) == 1:
            (j,) = A
            assert max_abs_diff([tiled.out[i]], [V[j]]) < 1e-40


def test_every_mask_every_block_exact_fractions():
    """Exhaustive, exact: all nonempty masks of one row, every block size, n ≤ 5, w-domain."""
    rng = random.Random(0)
    cases = 0
    for n in range(1, 6):
        w = [Fraction(rng.randint(1, 50), rng.randint(1, 50)) for _ in range(n)]
        V = [[Fraction(rng.randint(-9, 9), rng.randint(1, 9))] for _ in range(n)]
        for bits in range(1, 2 ** n):
            A = [{j for j in range(n) if bits >> j & 1}]
            dense = dense_attention_from_scores([w], V, allowed=A, num="fraction")
            for b in range(1, n + 2):
                t = tiled_forward_from_scores([w], V, block=b, allowed=A, num="fraction")
                assert t.out == dense
                cases += 1
    assert cases == sum((2 ** n - 1) * (n + 1) for n in range(1, 6))


# ------------------------------------------------------------------ split and merge

@st.composite
def partitioned_rows(draw):
    n = draw(st.integers(1, 7))
    v = draw(st.integers(1, 3))
    w = draw(st.lists(st.fractions(min_value=Fraction(1, 50), max_value=100, max_denominator=50),
                      min_size=n, max_size=n))
    V = draw(st.lists(st.lists(st.fractions(min_value=-5, max_value=5, max_denominator=20),
                               min_size=v, max_size=v), min_size=n, max_size=n))
    parts = draw(st.integers(1, 4))
    owner = draw(st.lists(st.integers(0, parts - 1), min_size=n, max_size=n))
    order = draw(st.permutations(range(parts)))
    return w, V, owner, order


@given(partitioned_rows())
def test_split_and_merge_any_partition_any_order_exact(case):
    """Summaries of the parts of any partition (parts may be empty: ⊥), merged in any order, equal
    the one-pass summary — exactly, in the exp domain over Fractions."""
    w, V, owner, order = case
    num = resolve("fraction")
    whole = summarize(w, V, num)
    acc = BOTTOM
    for part in order:
        flags = [o == part for o in owner]
        acc = merge(acc, summarize(w, V, num, allowed=flags), num)
    assert (acc.m, acc.l, acc.z) == (whole.m, whole.l, whole.z)


@given(partitioned_rows())
def test_split_and_merge_float(case):
    w, V, owner, order = case
    s = [math.log(x) for x in w]
    Vf = [[float(x) for x in row] for row in V]
    whole = summarize(s, Vf)
    acc = BOTTOM
    for part in order:
        acc = merge(acc, summarize(s, Vf, allowed=[o == part for o in owner]))
    assert acc.m == whole.m  # the max is exact
    assert math.isclose(acc.l, whole.l, rel_tol=64 * U)
    for a, b in zip(acc.z, whole.z):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def test_bottom_is_a_two_sided_identity():
    s = summarize([0.3, -1.0], [[1.0], [2.0]])
    assert merge(BOTTOM, s) == s
    assert merge(s, BOTTOM) == s
    assert merge(BOTTOM, BOTTOM) is BOTTOM


# ------------------------------------------------------------------ certified enclosure

def float_error_bound(p) -> float:
    """The stated float64 bound: |Y − Y*| ≤ 4·((d + 2)·S + n_k + 4)·u·max|V|, where S bounds
    |c|·Σ_r |Q_ir K_jr| (the score's condition number) and u = 2⁻⁵³. Scores carry ≤ (d+2)·u·S
    absolute error, each weight e^{s−m} then a relative error of that plus u, the sums n_k·u, and a
    convex combination of V at most twice the weights' relative error."""
    d = len(p.Q[0])
    S = max(abs(p.scale) * sum(abs(q * k) for q, k in zip(qi, kj)) for qi in p.Q for kj in p.K)
    vmax = max(abs(x) for row in p.V for x in row)
    return 4 * ((d + 2) * S + len(p.K) + 4) * U * vmax


@given(problems(max_n=5), st.integers(1, 6))
@settings(max_examples=20)
def test_interval_encloses_100_digit_result_and_float_is_within_bound(p, block):
    exact = tiled_forward(p.Q, p.K, p.V, scale=p.scale, block=block, allowed=p.allowed, num=resolve_mp(100))
    box = tiled_forward(p.Q, p.K, p.V, scale=p.scale, block=block, allowed=p.allowed, num="interval")
    flt = tiled_forward(p.Q, p.K, p.V, scale=p.scale, block=block, allowed=p.allowed)
    bound = float_error_bound(p)
    for rx, rb, rf in zip(exact.out, box.out, flt.out):
        for x, b, f in zip(rx, rb, rf):
            assert b.a <= x <= b.b, (x, b)
            assert abs(f - x) <= bound, (f, x, bound)
    for x, b in zip(exact.lse, box.lse):
        assert b.a <= x <= b.b


def resolve_mp(dps):
    from flashproof.verified.numbers import MpmathNum
    return MpmathNum(dps)


# ------------------------------------------------------------------ reverse pass

def _phi(Q, K, V, G, allowed, scale, num):
    Y = dense_attention(Q, K, V, scale=scale, allowed=allowed, num=num)
    acc = num.zero()
    for gi, yi in zip(G, Y):
        for g, y in zip(gi, yi):
            acc = acc + g * y
    return acc


GRAD_CASES = {
    "generic": dict(seed=1, tie=False, allowed=None),
    "tied-row-max": dict(seed=2, tie=True, allowed=None),
    "tied-max-masked": dict(seed=3, tie=True, allowed=[{0, 1}, {1, 2}, {0, 2}]),
    "lone-keys": dict(seed=4, tie=False, allowed=[{2}, {0}, {1, 2}]),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_reverse_pass_matches_central_differences(name):
    """dQ, dK, dV from the reverse pass vs (Φ(x+h) − Φ(x−h))/2h at 50 digits, h = 1e-20 (error
    O(h²) = 1e-40). Tied maxima: key rows 0 and 1 are equal, so every row's max is attained twice."""
    case = GRAD_CASES[name]
    rng = random.Random(case["seed"])
    n, d, v, scale = 3, 2, 2, 0.8
    num = resolve_mp(50)
    Q = [[num.const(rng.uniform(-1, 1)) for _ in range(d)] for _ in range(n)]
    K = [[num.const(rng.uniform(-1, 1)) for _ in range(d)] for _ in range(n)]
    if case["tie"]:
        K[1] = list(K[0])
    V = [[num.const(rng.uniform(-1, 1)) for _ in range(v)] for _ in range(n)]
    G = [[num.const(rng.uniform(-1, 1)) for _ in range(v)] for _ in range(n)]
    allowed = case["allowed"]
    fw = tiled_forward(Q, K, V, scale=scale, block=2, allowed=allowed, num=num)
    if case["tie"]:
        s0 = [scale * sum(q * k for q, k in zip(Q[0], K[j])) for j in range(n)]
        assert s0[0] == s0[1]
    grads = tiled_backward(Q, K, V, G, fw, scale=scale, block=2, allowed=allowed, num=num)
    h = num.const("1e-20")
    for mat_name, analytic in (("Q", grads.dq), ("K", grads.dk), ("V", grads.dv)):
        for r in range(n):
            for c in range(len(analytic[r])):
                args = {"Q": [row[:] for row in Q], "K": [row[:] for row in K], "V": [row[:] for row in V]}
                base = args[mat_name][r][c]
                args[mat_name][r][c] = base + h
                up = _phi(args["Q"], args["K"], args["V"], G, allowed, scale, num)
                args[mat_name][r][c] = base - h
                down = _phi(args["Q"], args["K"], args["V"], G, allowed, scale, num)
                fd = (up - down) / (2 * h)
                assert abs(fd - analytic[r][c]) < 1e-30, (mat_name, r, c, fd, analytic[r][c])


def test_reverse_pass_exact_with_tied_scores_is_not_a_max_derivative():
    """With every score tied (q = 0), p is uniform and the reverse pass still returns the dense
    gradient: dV_j = Σ_i G_i / n exactly (as rationals via mpmath at high precision)."""
    n = 4
    Q = [[0.0, 0.0] for _ in range(n)]
    K = [[1.0, -2.0], [0.5, 0.5], [3.0, 1.0], [-1.0, 0.0]]
    V = [[1.0], [2.0], [3.0], [4.0]]
    G = [[1.0], [2.0], [3.0], [4.0]]
    fw = tiled_forward(Q, K, V, scale=1.0, block=3)
    g = tiled_backward(Q, K, V, G, fw, scale=1.0, block=3)
    assert all(row == [2.5] for row in g.dv)


# ------------------------------------------------------------------ empty-row extension

def test_empty_row_extension_zero_output_neg_inf_lse_zero_gradients():
    Q = [[1.0, 2.0], [0.5, -1.0], [3.0, 3.0]]
    K = [[1.0, 0.0], [0.0, 1.0], [1e3, 1e3]]
    V = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    G = [[1.0, 1.0], [1.0, -1.0], [2.0, 2.0]]
    allowed = [set(), {0, 1}, set()]
    fw = tiled_forward(Q, K, V, scale=1.0, block=2, allowed=allowed, empty_rows="zero")
    assert fw.out[0] == [0.0, 0.0] and fw.out[2] == [0.0, 0.0]
    assert fw.lse[0] == -math.inf and fw.l[0] == 0.0 and fw.m[0] == -math.inf
    assert all(math.isfinite(x) for row in fw.out for x in row)
    g = tiled_backward(Q, K, V, G, fw, scale=1.0, block=2, allowed=allowed, empty_rows="zero")
    assert g.dq[0] == [0.0, 0.0] and g.dq[2] == [0.0, 0.0]
    assert g.dk[2] == [0.0, 0.0] and g.dv[2] == [0.0, 0.0]  # key 2 is allowed nowhere
    dense = dense_attention(Q, K, V, scale=1.0, allowed=allowed, empty_rows="zero")
    assert dense[0] == [0.0, 0.0] and max_abs_diff(dense, fw.out) == 0.0   # one block holds both keys: the same sums


def test_masked_entries_are_never_read():
    """NaN and huge values in K/V rows that no allowed pair reads cannot change the result."""
    Q = [[1.0], [2.0]]
    K = [[1.0], [float("nan")], [1e300]]
    V = [[1.0], [float("inf")], [float("nan")]]
    allowed = [{0}, {0}]
    fw = tiled_forward(Q, K, V, scale=1.0, block=2, allowed=allowed)
    assert fw.out == [[1.0], [1.0]]


def test_symbolic_mask_tiled_equals_dense_z3():
    """A symbolic mask (one z3 Bool per key) and symbolic weights: tiled == dense for n = 3, every b
    (the obligations in `make prove` go to n = 6)."""
    import z3
    n = 3
    w = [z3.Real(f"w{j}") for j in range(n)]
    a = [z3.Bool(f"a{j}") for j in range(n)]
    V = [[z3.Real(f"v{j}")] for j in range(n)]
    dense = dense_attention_from_scores([w], V, allowed=lambda i, j: a[j], num="z3")
    for b in range(1, n + 2):
        t = tiled_forward_from_scores([w], V, block=b, allowed=lambda i, j: a[j], num="z3")
        s = z3.Solver()
        s.set("timeout", 60_000)  # ~0.1 s when run alone; `unknown` fails the test, never passes it
        s.add(*[x > 0 for x in w], z3.Or(*a), t.out[0][0] != dense[0][0])
        assert s.check() == z3.unsat, b
        s = z3.Solver()  # an empty row is the extension's 0, never an unconstrained 0/0
        s.set("timeout", 60_000)
        s.add(*[x > 0 for x in w], z3.Not(z3.Or(*a)), t.out[0][0] != 0)
        assert s.check() == z3.unsat


def test_block_ranges_partition_the_keys():
    for n, b in itertools.product(range(1, 12), range(1, 14)):
        blocks = block_ranges(n, b)
        assert [j for J in blocks for j in J] == list(range(n))
        assert len(blocks) == -(-n // b) and all(len(J) >= 1 for J in blocks)
