"""The kernel index obligations (KER-TILES, KER-BOUNDS, KER-SPLIT): each is proved and each of its controls
refuted with a counterexample, in-process with the obligation's own bounds; the executor's own rules
(branch forking, the one-iteration loop, loud mutants); and the symbolic run of the kernels' integer
helpers agrees bit for bit with Triton's interpreter on concrete inputs."""
from __future__ import annotations

import itertools

import pytest
import z3

from flashproof.proofs.engine import core
from flashproof.proofs.obligations.kernels import bounds, plan_bounds, split, tiles  # noqa: F401 (register them)
from flashproof.proofs.support import kernel_exec as kx, radix, triton_sym as ts

KER_OBS = sorted(o for o in core.OBLIGATIONS if o.startswith("KER-"))
#: the ones that take more than a few seconds (whole-kernel runs, every block size): under -m slow
SLOW = ("KER-BOUNDS-FWD", "KER-BOUNDS-DQ", "KER-BOUNDS-DKDV", "KER-BOUNDS-PLAN", "KER-TILES-KEY-RANGE",
        "KER-TILES-QUERY-RANGE")


def _slow(oid):
    base = core.OBLIGATIONS[oid].of or oid
    return any(base.startswith(s) for s in SLOW)


@pytest.mark.parametrize("oid", [pytest.param(o, marks=pytest.mark.slow) if _slow(o) else o for o in KER_OBS])
def test_obligation_outcome(oid):
    """Every KER obligation is proved and every control refuted with a counterexample."""
    ob = core.resolve_control(core.OBLIGATIONS[oid])
    out = ob.fn(core.Context(ob.bounds, 60_000, False))
    assert out.status == ob.expected, (oid, out.detail)
    if ob.expected == "refuted":
        assert out.counterexample


def test_every_kernel_obligation_has_a_control():
    bases = {i for i in KER_OBS if core.OBLIGATIONS[i].of is None}
    assert len(bases) == 30 and bases <= {core.OBLIGATIONS[i].of for i in KER_OBS}


# ------------------------------------------------------------------------------------ the executor

def _branchy(x, y):
    if x > y:
        return x - y
    return y - x


def test_a_branch_on_a_symbolic_condition_forks_both_ways():
    x, y = ts.arg("x"), ts.arg("y")
    paths = kx.execute(_branchy, dict(x=x, y=y), hyps=[x.e >= 0, y.e >= 0, x.e < 100, y.e < 100])
    assert len(paths) == 2
    for p in paths:  # on each path the result is |x − y|
        s = z3.Solver()
        s.add(*p.hyps, p.result.e != z3.If(x.e > y.e, x.e - y.e, y.e - x.e))
        assert s.check() == z3.unsat


def _carries_an_integer(n):
    total = n * 0
    for i in range(0, n):
        total = total + i
    return total


def test_a_loop_that_carries_an_integer_is_refused():
    n = ts.arg("n")
    with pytest.raises(kx.Unsupported, match="carries integer state 'total'"):
        kx.execute(_carries_an_integer, dict(n=n), hyps=[n.e >= 1, n.e < 10])


def _counts_up(n):
    total = n * 0
    for i in range(0, n):
        total = total + 1
    return total


def _invariant(holds):
    return {("_counts_up", "for i in range(0, n):"): kx.Loop(holds)}


def _proved(claim, hyps):
    s = z3.Solver()
    s.add(*hyps, z3.Not(claim))
    return s.check() == z3.unsat


def test_a_loop_with_an_inductive_invariant_runs_by_induction():
    """total = v at the start of the iteration with loop variable v: checked at entry and after the body
    (side conditions, all valid), and after the loop total = n."""
    n = ts.arg("n")
    (path,) = kx.execute(_counts_up, dict(n=n), hyps=[n.e >= 1, n.e < 10],
                         loops=_invariant(lambda v, state, env: state["total"].e == v))
    whats = [w for w, _, _ in path.side if "invariant" in w]
    assert len(whats) == 2 and "at entry" in whats[0] and "re-established by the body" in whats[1]
    for _, cond, at in path.side:
        assert _proved(cond, list(path.base) + list(at))
    assert _proved(path.result.e == n.e, path.hyps)


def test_a_loop_invariant_that_is_not_inductive_is_refused():
    n = ts.arg("n")
    with pytest.raises(kx.Unsupported, match="not inductive"):
        kx.execute(_counts_up, dict(n=n), hyps=[n.e >= 1, n.e < 10],
                   loops=_invariant(lambda v, state, env: state["total"].e == 0))


def test_a_loop_invariant_that_fails_at_entry_is_a_false_side_condition():
    n = ts.arg("n")
    (path,) = kx.execute(_counts_up, dict(n=n), hyps=[n.e >= 1, n.e < 10],
                         loops=_invariant(lambda v, state, env: state["total"].e == v + 1))
    entry = [(c, at) for w, c, at in path.side if "at entry" in w]
    assert len(entry) == 1 and not _proved(entry[0][0], list(path.base) + list(entry[0][1]))


def _counted(C, BLOCK: int = 4):
    n = C * 0
    for c0 in range(0, C, BLOCK):
        cols = c0 + tl_sym.arange(0, BLOCK)
        flag = (cols < C).to(tl_sym.int32)
        n += tl_sym.sum(flag, 0)
    return n


tl_sym = ts.TL


def test_a_count_needs_a_ghost_and_its_sums_are_ghost_differences():
    C = ts.arg("C")
    with pytest.raises(kx.Unsupported, match="carries integer state 'n'"):
        kx.execute(_counted, dict(C=C), hyps=[C.e >= 1, C.e < 100])
    G = z3.Function("G", z3.IntSort(), z3.IntSort())
    loops = {("_counted", "for c0 in range(0, C, BLOCK):"): kx.Loop(lambda v, s, env: s["n"].e == G(v),
                                                                       lambda env: G)}
    (path,) = kx.execute(_counted, dict(C=C), hyps=[C.e >= 1, C.e < 100], loops=loops)
    (cnt,) = path.counts
    # the flag as a function of the position is cols < C at cols = p
    assert _proved(cnt.flag == (cnt.pos < C.e), [cnt.pos >= 0])
    formulas = list(path.base) + [x for _, c, at in path.side for x in (c, *at)]
    facts = plan_bounds._instances(path.counts, C.e, formulas)  # the counting lemmas' instances
    for what, cond, at in path.side:  # the invariant by itself; no wrap-around of n with the lemmas
        assert _proved(cond, list(path.base) + list(at) + (facts if "wrap-around" in what else [])), what
    # after the loop, 1 <= n <= C (the lemmas bound a count; they do not evaluate it)
    assert _proved(z3.And(path.result.e >= 1, path.result.e <= C.e), list(path.base) + facts)
    assert not _proved(path.result.e <= C.e - 1, list(path.base) + facts)


def _counted_twice(C, BLOCK: int = 4):
    n = C * 0
    for _ in tl_sym.static_range(2):
        for c0 in range(0, C, BLOCK):
            cols = c0 + tl_sym.arange(0, BLOCK)
            n += tl_sym.sum((cols < C).to(tl_sym.int32), 0)
    return n


def test_one_ghost_count_for_two_walks_is_refused():
    C = ts.arg("C")
    G = z3.Function("G3", z3.IntSort(), z3.IntSort())
    loops = {("_counted_twice", "for c0 in range(0, C, BLOCK):"): kx.Loop(lambda v, s, env: s["n"].e == G(v),
                                                                             lambda env: G)}
    with pytest.raises(kx.Unsupported, match="bound to two walks"):
        kx.execute(_counted_twice, dict(C=C), hyps=[C.e >= 1, C.e < 100], loops=loops)


def _counted_fresh(C, BLOCK: int = 4):
    n = C * 0
    for c0 in range(0, C, BLOCK):
        cols = c0 + tl_sym.arange(0, BLOCK)
        flag = (cols < ts.Sym(z3.FreshInt("made_inside"))).to(tl_sym.int32)
        n += tl_sym.sum(flag, 0)
    return n


def test_a_count_of_a_flag_made_from_a_value_of_the_iteration_is_refused():
    C = ts.arg("C")
    G = z3.Function("G2", z3.IntSort(), z3.IntSort())
    loops = {("_counted_fresh", "for c0 in range(0, C, BLOCK):"): kx.Loop(lambda v, s, env: s["n"].e == G(v),
                                                                             lambda env: G)}
    with pytest.raises(kx.Unsupported, match="made inside the loop"):
        kx.execute(_counted_fresh, dict(C=C), hyps=[C.e >= 1, C.e < 100], loops=loops)


def test_the_counting_lemmas_are_proved_and_a_wrong_one_is_not():
    for name, claim in plan_bounds._lemma_queries():
        assert _proved(claim, []), name
    f, g = z3.Function("wf", z3.IntSort(), z3.BoolSort()), z3.Function("wg", z3.IntSort(), z3.BoolSort())
    F, G = z3.Function("wF", z3.IntSort(), z3.IntSort()), z3.Function("wG", z3.IntSort(), z3.IntSort())
    k = z3.Int("k")
    step = lambda C, h, p: C(p + 1) - C(p) == z3.If(h(p), 1, 0)  # noqa: E731
    no_disjointness = z3.Implies(z3.And(k >= 0, F(k) + G(k) <= k, step(F, f, k), step(G, g, k)),
                                 F(k + 1) + G(k + 1) <= k + 1)
    assert not _proved(no_disjointness, [])


def test_mixed_radix_digits_and_lemma():
    B, H, R, C, b, h, r, j = z3.Ints("B H R C b h r j")
    e = ((b * H + h) * R + r) * C + j
    assert [str(z3.simplify(d)) for d in radix.digits(e, (B, H, R, C))] == ["b", "h", "r", "j"]
    assert _proved(z3.And(*radix.claims(e, (B, H, R, C))),
                   [b >= 0, b < B, h >= 0, h < H, r >= 0, r < R, j >= 0, j < C])
    swapped = ((b * H + h) * C + r) * R + j  # R and C exchanged: the digit read for R is no longer r
    assert not _proved(z3.And(*radix.claims(swapped, (B, H, R, C))),
                       [b >= 0, b < B, h >= 0, h < H, r >= 0, r < R, j >= 0, j < C])
    assert _proved(radix.lemma(), []) and not _proved(radix.lemma(strict=False), [])


def test_a_mutant_whose_pattern_is_gone_fails_loudly():
    from flashproof.kernels.attention.triton import fwd

    with pytest.raises(ValueError, match="occurs 0 times"):
        kx.mutate(fwd.key_range, "no such line", "x")


def test_signed_division_truncates_like_triton():
    for a, b in itertools.product((-7, -1, 0, 5, 9), (2, 3, -2)):
        q = z3.simplify((ts.Sym.lift(a) // b).e).as_long()
        r = z3.simplify((ts.Sym.lift(a) % b).e).as_long()
        assert (q, r) == (int(a / b), a - b * int(a / b)), (a, b)


def test_an_int32_overflow_is_unsafe_and_int64_is_not():
    x = ts.Sym(z3.Int("x"), False)
    s = z3.Solver()
    s.add(x.e == 2 ** 31 - 1, z3.Not((x + 1).safe))
    assert s.check() == z3.sat
    s = z3.Solver()
    s.add(x.e == 2 ** 31 - 1, z3.Not((x.to(ts.INT64) + 1).safe))
    assert s.check() == z3.unsat


# ----------------------------------------------------- symbolic run = Triton's interpreter, bit for bit

triton = pytest.importorskip("triton")
tl = triton.language
from flashproof.kernels.attention.triton import bwd as _bwd, fwd as _fwd  # noqa: E402

_key_range, _query_range = _fwd.key_range, _bwd.query_range  # the kernels' helpers, called by _ranges_kernel


def _concrete(fn, args):
    """The symbolic run of ``fn`` on concrete integers, evaluated to Python ints."""
    sym = {k: (ts.Sym.lift(v) if isinstance(v, int) and not isinstance(v, bool) and k.upper() != k else v)
           for k, v in args.items()}
    (path,) = kx.execute(fn, sym)
    out = path.result
    return [z3.simplify(o.e).as_long() if isinstance(o, ts.Sym) else bool(z3.is_true(z3.simplify(o.e))) for o in out]


@triton.jit
def _ranges_kernel(OUT, x0, q_len, k_len, left, right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, FWD: tl.constexpr):
    if FWD:
        a, b, c, hi = _key_range(x0, q_len, k_len, left, right, BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT, False)
    else:
        a, b, c, hi = _query_range(x0, q_len, k_len, left, right, BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT, False)
    tl.store(OUT + 0, a)
    tl.store(OUT + 1, b)
    tl.store(OUT + 2, c)
    tl.store(OUT + 3, hi)


def test_key_and_query_ranges_agree_with_the_interpreter():
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the comparison runs Triton's interpreter (CPU)")
    torch = pytest.importorskip("torch")
    cases = itertools.product((0, 16, 48), (1, 17, 64), (0, 5, 40, 70), (0, 3, 20), (0, 1, 33),
                              ((False, False), (True, True), (False, True), (True, False)), (True, False))
    for x0, q_len, k_len, left, right, (hl, hr), is_fwd in cases:
        limit = q_len if is_fwd else k_len
        if x0 >= limit:
            continue
        out = torch.zeros(4, dtype=torch.int32)
        _ranges_kernel[(1,)](out, x0, q_len, k_len, left, right, BLOCK_M=16, BLOCK_N=32, HAS_LEFT=hl,
                             HAS_RIGHT=hr, FWD=is_fwd)
        fn = _fwd.key_range if is_fwd else _bwd.query_range
        args = dict(q_len=q_len, k_len=k_len, left=left, right=right, BLOCK_M=16, BLOCK_N=32, HAS_LEFT=hl,
                    HAS_RIGHT=hr, ALL_MASKED=False)
        args["m0" if is_fwd else "n0"] = x0
        assert out.tolist() == _concrete(fn, args), (x0, q_len, k_len, left, right, hl, hr, is_fwd)


# --------------------------------------------- the findings of KER-TILES-HOST, as regressions of the kernel

def test_a_window_side_near_int32_max_is_the_unbounded_window_bitwise():
    """Before host._index_args clamped the sides, window right = 2^31 − 1 wrapped key_range's edge and the
    forward returned zeros; clamped, it runs the very same stages as no window."""
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("runs the Triton kernels in the interpreter (CPU)")
    torch = pytest.importorskip("torch")
    from flashproof.kernels import attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 16, generator=g) for n in (40, 37, 37))
    free = attention(q, k, v, backend="triton")
    for window in ((None, 2 ** 31 - 1), (2 ** 31 - 1, None), (2 ** 31 - 1, 2 ** 40)):
        assert torch.equal(attention(q, k, v, window=window, backend="triton"), free), window


def test_the_host_refuses_lengths_its_int32_index_arithmetic_cannot_hold():
    from flashproof.kernels.attention.triton import host

    assert host._index_args((None, 2 ** 31 - 1), 40, 37) == (0, 40)
    with pytest.raises(ValueError, match="sequence lengths up to"):
        host._index_args((None, None), host.MAX_LEN + 1, 1)
