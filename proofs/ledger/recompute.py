"""Recomputations of the seed claims (``flashproof.spec.seed_claims``), one function per claim id.

A function ``f(control: bool) -> Recomputed`` recomputes what the claim asserts. For ``value``
claims it returns the numbers (``values``, in the figures' order and units) and ignores ``control``:
their negative control perturbs the *stated* figure instead (``proofs.ledger.verdict``). For
``bound`` and ``identity`` claims it returns ``holds``; with ``control=True`` it runs the same check
with the one planted bug named in its ``@recompute(..., bug=...)``, which must flip the answer.

``@illustrate`` functions add a computed (never typed) illustration to a citation or a
not-checkable claim; they decide nothing.

Exact arithmetic (Fraction, sympy) wherever the claim allows; mpmath at 60 digits for e^x and ln.
"""
from __future__ import annotations

import itertools
from fractions import Fraction as Fr
from typing import Any, Callable, NamedTuple

# Imported here, not lazily: `flashproof prove` forks one worker per obligation after importing
# this module, so every worker inherits these instead of paying the import again.
import mpmath  # noqa: F401
import sympy  # noqa: F401
import z3  # noqa: F401

from flashproof.verified import attention as _att, expdomain as _expdomain  # noqa: F401

__all__ = ["Recomputed", "RECOMPUTE", "BUGS", "ILLUSTRATE", "recompute", "illustrate"]


class Recomputed(NamedTuple):
    """values: recomputed numbers of a ``value`` claim (else ()); holds: the answer of a
    ``bound``/``identity`` claim (else None); solver: what computed it; detail: one line;
    counterexample: a JSON-able witness of a failure (or of an erratum), else None."""

    values: tuple = ()
    holds: bool | None = None
    solver: str = "exact"
    detail: str = ""
    counterexample: Any = None


RECOMPUTE: dict[str, Callable[[bool], Recomputed]] = {}
BUGS: dict[str, str] = {}
ILLUSTRATE: dict[str, Callable[[], str]] = {}


def recompute(claim_id: str, *, bug: str = ""):
    """Register the recomputation of ``claim_id``; ``bug`` names the planted bug of the control
    (required for bound/identity claims, whose control runs the function with ``control=True``)."""

    def deco(fn):
        if claim_id in RECOMPUTE:
            raise ValueError(f"claim {claim_id!r} has two recomputations")
        RECOMPUTE[claim_id] = fn
        if bug:
            BUGS[claim_id] = bug
        return fn
    return deco


def illustrate(claim_id: str):
    def deco(fn):
        ILLUSTRATE[claim_id] = fn
        return fn
    return deco


def _mp():
    import mpmath

    ctx = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    ctx.dps = 60
    return ctx


# ---------------------------------------------------------------------------- 000: textbook chapter

@recompute("CL-000-SCORE-4096")
def _score_4096(control=False):
    return Recomputed((Fr(2 * 4096 ** 2, 10 ** 6),), detail="2·4096² = 33,554,432 bytes")


@recompute("CL-000-SCORE-VS-SRAM", bug="score matrix at n = 2048 instead of 4096")
def _score_vs_sram(control=False):
    n = 2048 if control else 4096
    size, sram = 2 * n * n, 20 * 10 ** 6
    return Recomputed(holds=size > sram, detail=f"2·{n}² = {size:,} B vs {sram:,} B",
                      counterexample=None if size > sram else {"n": n, "bytes": size, "sram_bytes": sram})


def _stream(blocks, system="mpmath"):
    """Normalisers of the online update, from the verified reference (one query row, v = 1)."""
    from flashproof.verified import attention as att
    from flashproof.verified.numbers import resolve

    num = resolve(system)
    sums = [att.summarize([num.const(s) for s in b], [[num.one()] for _ in b], num) for b in blocks]
    state = att.BOTTOM
    for s in sums:
        state = att.merge(state, s, num)
    return num, sums, state


def _stream_steps(blocks):
    num, (s1, s2), final = _stream(blocks)
    rescaled = num.mul(num.exp(num.score_sub(s1.m, final.m)), s1.l)
    return Recomputed((s1.l, rescaled, s2.l, final.l), solver="mpmath+verified.attention",
                      detail=f"m = {s1.m}, m' = {final.m}")


def _oneshot(scores, picks):
    mp = _mp()
    top = max(scores)
    terms = {s: mp.exp(s - top) for s in scores}
    return Recomputed(tuple(terms[p] for p in picks) + (mp.fsum(mp.exp(s - top) for s in scores),),
                      solver="mpmath", detail=f"max = {top}")


def _stream_exact(blocks, control):
    """Streaming normaliser (verified reference on sympy) minus the one-shot sum, simplified."""
    import sympy as sp

    num, _, final = _stream(blocks, "sympy")
    scores = [s for b in blocks for s in b]
    top = max(scores)
    oneshot = sum(sp.exp(sp.Integer(s - top)) for s in scores)
    ell = final.l
    if control:  # planted bug: drop the rescale of the first block's sum
        s1 = _stream([blocks[0]], "sympy")[2]
        ell = final.l - s1.l * sp.exp(s1.m - final.m) + s1.l
    diff = sp.expand(sp.powsimp(sp.expand(ell - oneshot)))  # a sum of e^{integer} terms
    same_max = sp.expand(final.m - top) == 0
    ok = diff == 0 and same_max
    return Recomputed(holds=ok, solver="sympy+verified.attention",
                      detail=f"streaming − one-shot = {diff}; m' = {final.m}",
                      counterexample=None if ok else {"difference": str(diff), "m_final": str(final.m)})


@recompute("CL-000-STREAM1-STEPS")
def _s1_steps(control=False):
    return _stream_steps([[2, 1], [3, 0]])


@recompute("CL-000-STREAM1-ONESHOT")
def _s1_oneshot(control=False):
    return _oneshot([2, 1, 3, 0], [2, 1, 0])


@recompute("CL-000-STREAM1-EXACT", bug="the first block's sum is merged without its e^{m−m'} rescale")
def _s1_exact(control=False):
    return _stream_exact([[2, 1], [3, 0]], control)


@recompute("CL-000-STREAM2-STEPS")
def _s2_steps(control=False):
    return _stream_steps([[1, 4], [2, 2, 5]])


@recompute("CL-000-STREAM2-ONESHOT")
def _s2_oneshot(control=False):
    return _oneshot([1, 4, 2, 2, 5], [1, 4, 2])


@recompute("CL-000-STREAM2-EXACT", bug="the first block's sum is merged without its e^{m−m'} rescale")
def _s2_exact(control=False):
    return _stream_exact([[1, 4], [2, 2, 5]], control)


def _z3_valid(claim, hyps=()):
    """(holds, counterexample) for a z3 claim under hypotheses (unknown counts as not holding)."""
    import z3

    from flashproof.proofs.engine.core import Context, fresh_solver

    # through the engine's solver: the query is recorded for the second solver and checked for vacuity
    s = fresh_solver(list(hyps) + [z3.Not(claim)], Context({}, 5000, False))
    r = s.check()
    if r == z3.unsat:
        return True, None
    if r == z3.sat:
        m = s.model()
        return False, {str(d.name()): str(m[d]) for d in m.decls()}
    return False, {"z3": f"unknown: {s.reason_unknown()}"}


@recompute("CL-000-RESCALE-LE1", bug="the new reference m' is the minimum instead of the maximum")
def _rescale(control=False):
    import z3

    m, x = z3.Reals("m x")
    m_new = z3.If(m <= x, m, x) if control else z3.If(m >= x, m, x)
    ok, cex = _z3_valid(m - m_new <= 0)
    return Recomputed(holds=ok, solver="z3", detail="m − max(m, x) ≤ 0 over ℝ", counterexample=cex)


@recompute("CL-000-SPEC-EXACT", bug="the residual is max(0, q − p) instead of max(0, p − q)")
def _spec_exact(control=False):
    import z3

    p, q = z3.Reals("p q")
    mn = z3.If(p <= q, p, q)
    diff = q - p if control else p - q
    mx = z3.If(diff >= 0, diff, 0)
    accept = z3.If(p / q >= 1, 1, p / q)
    ok, cex = _z3_valid(z3.And(q * accept == mn, mn + mx == p), [p >= 0, q > 0])
    return Recomputed(holds=ok, solver="z3", detail="q·min(1, p/q) = min(p, q) ∧ min(p, q) + max(0, p − q) = p",
                      counterexample=cex)


def _tokens_series(a, k, bonus=True):
    """Σ_{i<k} (i+1)·α^i(1−α) + (k+1)·α^k, the expectation written out case by case."""
    head = sum((i + 1) * a ** i * (1 - a) for i in range(k))
    return head + ((k + 1) * a ** k if bonus else (k + 1) * a ** k * (1 - a))


@recompute("CL-000-TOKENS-FORMULA", bug="the full-acceptance run of length k is weighted α^k(1−α), as if truncated")
def _tokens_formula(control=False):
    import sympy as sp

    a = sp.Symbol("alpha")
    for k in range(1, 25):  # multiplied through by (1 − α): a polynomial identity per k
        diff = sp.expand(_tokens_series(a, k, bonus=not control) * (1 - a) - (1 - a ** (k + 1)))
        if diff != 0:
            return Recomputed(holds=False, solver="sympy", detail=f"fails at k = {k}",
                              counterexample={"k": k, "difference_times_(1-alpha)": str(sp.factor(diff))})
    return Recomputed(holds=True, solver="sympy", detail="identity for k = 1..24")


def _speedup(a, k, c):
    a, c = Fr(a), Fr(c)
    tokens = (1 - a ** (k + 1)) / (1 - a)
    cost = k * c + 1
    return a ** (k + 1), tokens, cost, tokens / cost


@recompute("CL-000-ECON-08")
def _econ_08(control=False):
    return Recomputed(_speedup("0.8", 4, "0.1"))


@recompute("CL-000-ECON-05")
def _econ_05(control=False):
    _, tokens, _, speed = _speedup("0.5", 4, "0.1")
    return Recomputed((tokens, speed))


@recompute("CL-000-EX-ACCEPT")
def _ex_accept(control=False):
    return Recomputed((min(Fr(1), Fr("0.3") / Fr("0.5")),))


@recompute("CL-000-EX-SPEEDUP")
def _ex_speedup(control=False):
    return Recomputed(_speedup("0.7", 3, "0.15"))


@recompute("CL-000-MARGINAL", bug="the marginal gain is taken to be α^k instead of α^{k+1}")
def _marginal(control=False):
    import sympy as sp

    a, c = sp.symbols("alpha c")
    E1 = lambda k: 1 - a ** (k + 1)  # noqa: E731  (1 − α)·E(k)
    for k in range(1, 25):  # multiplied through by (1 − α)
        gain = a ** k if control else a ** (k + 1)
        d = sp.expand(E1(k + 1) - E1(k) - gain * (1 - a))
        dc = sp.expand(((k + 1) * c + 1) - (k * c + 1) - c)
        if d != 0 or dc != 0:
            return Recomputed(holds=False, solver="sympy", detail=f"fails at k = {k}",
                              counterexample={"k": k, "difference": str(sp.factor(d))})
    return Recomputed(holds=True, solver="sympy", detail="E(k+1) − E(k) = α^{k+1} for k = 1..24")


@illustrate("CL-000-FLAT-OPTIMUM")
def _flat():
    rows = [(k, float(_speedup("0.8", k, "0.1")[3])) for k in range(1, 11)]
    best = max(rows, key=lambda r: r[1])
    return ("speed-up at α = 0.8, c = 0.1: " + ", ".join(f"k={k}: {s:.3f}" for k, s in rows)
            + f"; best k = {best[0]}; k = 3..8 all within "
            f"{100 * (1 - min(s for k, s in rows if 3 <= k <= 8) / best[1]):.1f}% of it")


# ---------------------------------------------------------------------------- 002: Turkish article

class _Counting:
    """A float number system that counts the linear additions and multiplications it performs."""

    def __new__(cls):
        from flashproof.verified.numbers import FloatNum

        class Counting(FloatNum):
            name = "float+count"

            def __init__(self):
                self.adds = self.muls = 0

            def add(self, a, b):
                self.adds += 1
                return a + b

            def mul(self, a, b):
                self.muls += 1
                return a * b

        return Counting()


def _dense_flops(n, d, v):
    from flashproof.verified.attention import dense_attention

    num = _Counting()
    Q = [[0.1 * (i + r) for r in range(d)] for i in range(n)]
    K = [[0.2 * (j - r) for r in range(d)] for j in range(n)]
    V = [[0.3 * (j + a) for a in range(v)] for j in range(n)]
    dense_attention(Q, K, V, scale=0.5, num=num)
    return num.adds + num.muls


@recompute("CL-002-MATMUL-FLOPS")
def _matmul_flops(control=False):
    n, d, v = 5, 3, 3
    base = _dense_flops(n, d, v)
    per_d = Fr(_dense_flops(n, d + 1, v) - base, n * n)
    per_v = Fr(_dense_flops(n, d, v + 1) - base, n * n)
    return Recomputed((per_d, per_v, per_d + per_v), solver="counting+verified.attention",
                      detail=f"adds+muls of dense_attention at N={n}: Δ per unit d = {per_d}·N², per unit v = {per_v}·N²")


def _table_row(n, unit):
    return Recomputed((n * n, Fr(2 * n * n, unit)), detail=f"N² = {n * n:,}; 2N² = {2 * n * n:,} bytes")


@recompute("CL-002-TABLE-4096")
def _t4096(control=False):
    return _table_row(4096, 10 ** 6)


@recompute("CL-002-TABLE-16K")
def _t16k(control=False):
    return _table_row(16384, 10 ** 6)


@recompute("CL-002-TABLE-64K")
def _t64k(control=False):
    return _table_row(65536, 10 ** 9)


@recompute("CL-002-TABLE-128K")
def _t128k(control=False):
    return _table_row(131072, 10 ** 9)


@recompute("CL-002-128K-HALF-A100", bug="4-byte (FP32) elements instead of FP16")
def _half_a100(control=False):
    elem = 4 if control else 2
    size, half = elem * 131072 ** 2, 40 * 10 ** 9
    holds = size > half
    return Recomputed(holds=holds, detail=f"{elem}·131072² = {size / 1e9:.2f} GB = {100 * size / (80 * 10 ** 9):.0f}% of 80 GB",
                      counterexample=None if holds else {"bytes": size, "half_of_80GB": half})


@recompute("CL-002-HBM-LIST", bug="the S write (N²) and P read (N²) are dropped from the sum")
def _hbm_list(control=False):
    import sympy as sp
    import z3

    N, d = sp.symbols("N d", positive=True)
    items = [2 * N * d, N ** 2, 2 * N ** 2, N ** 2, N * d]
    if control:
        items = [2 * N * d, 2 * N ** 2, N * d]
    total = sp.expand(sum(items))
    n, dd = z3.Reals("N d")
    zt = sum(sp.Poly(total, N, d).coeff_monomial(N ** i * d ** j) * n ** i * dd ** j for i in range(3) for j in range(2))
    ok, cex = _z3_valid(z3.And(n * n + n * dd <= zt, zt <= 4 * (n * n + n * dd)), [n >= 1, dd >= 1])
    ok = ok and total == 4 * N ** 2 + 3 * N * d
    return Recomputed(holds=ok, solver="sympy+z3", detail=f"listed total = {total}",
                      counterexample=cex or (None if ok else {"total": str(total)}))


_A100_PEAK, _A100_BW = Fr(312) * 10 ** 12, Fr("1.555") * 10 ** 12


@recompute("CL-002-RIDGE")
def _ridge(control=False):
    return Recomputed((_A100_PEAK / _A100_BW,))


@recompute("CL-002-INTENSITY")
def _intensity(control=False):
    import sympy as sp

    N, d = sp.symbols("N d", positive=True)
    intensity = sp.cancel((4 * N ** 2 * d) / (2 * 4 * N ** 2))
    at128 = Fr(int(intensity.subs(d, 128)))
    below = at128 < _A100_PEAK / _A100_BW
    return Recomputed((at128,), solver="sympy", detail=f"I = {intensity}; below the ridge point: {below}")


@illustrate("CL-002-SOFTMAX-INTENSITY")
def _softmax_intensity():
    return f"5 operations per element over 4 bytes moved gives I = {5 / 4:.2f} FLOP/byte"


@recompute("CL-002-TIME-16K")
def _time_16k(control=False):
    n, d = 16384, 128
    compute = Fr(4 * n * n * d) / _A100_PEAK * 1000
    io = Fr(8 * n * n) / _A100_BW * 1000
    return Recomputed((compute, io, io / compute), detail=f"compute {float(compute):.4f} ms, IO {float(io):.4f} ms")


@recompute("CL-002-FP32-OVERFLOW")
def _fp32(control=False):
    mp = _mp()
    big = (2 - Fr(1, 2 ** 23)) * 2 ** 127
    if _f32_max() != big:  # cross-check against the bit pattern 0x7F7FFFFF
        raise ValueError(f"float32 max from its bit pattern is {_f32_max()}, not (2 − 2⁻²³)·2¹²⁷")
    return Recomputed((big, mp.log(mp.mpf(big.numerator))), solver="mpmath",
                      detail="(2 − 2⁻²³)·2¹²⁷, equal to the float32 bit pattern 0x7F7FFFFF")


def _f32_max():
    import struct

    return Fr(struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0])


@recompute("CL-002-FP16-OVERFLOW")
def _fp16(control=False):
    import struct

    mp = _mp()
    big = struct.unpack("<e", struct.pack("<H", 0x7BFF))[0]  # largest finite binary16
    return Recomputed((mp.log(big),), solver="mpmath", detail=f"FP16 max = {big:g}")


@recompute("CL-002-EXP2", bug="the exponent uses ln 2 instead of log₂ e")
def _exp2(control=False):
    import sympy as sp

    x, s = sp.symbols("x s", real=True)
    d = sp.Symbol("d", positive=True)
    k = sp.log(2) if control else 1 / sp.log(2)
    # both sides are positive, so they are equal iff their natural logs are
    lg = lambda e: sp.expand_log(sp.log(e), force=True)  # noqa: E731
    e1 = sp.simplify(lg(2 ** (x * k)) - x)
    e2 = sp.simplify(lg(2 ** (s * k / sp.sqrt(d))) - s / sp.sqrt(d))
    ok = e1 == 0 and e2 == 0
    return Recomputed(holds=ok, solver="sympy", detail=f"log-differences: {e1}, {e2}",
                      counterexample=None if ok else {"x=1": str(sp.N((2 ** (x * k) - sp.exp(x)).subs(x, 1)))})


@recompute("CL-002-VARIANCE", bug="the scores are divided by d instead of √d")
def _variance(control=False):
    import sympy as sp

    for d in range(1, 9):
        dots = [sum(a * b for a, b in zip(c[:d], c[d:])) for c in itertools.product((-1, 1), repeat=2 * d)]
        n = len(dots)
        var = Fr(sum(x * x for x in dots), n) - Fr(sum(dots), n) ** 2
        scale2 = sp.Integer(d) ** 2 if control else sp.Integer(d)  # the scale's square
        scaled = sp.Rational(var.numerator, var.denominator) / scale2
        if var != d or scaled != 1:
            return Recomputed(holds=False, solver="exact", detail=f"fails at d = {d}",
                              counterexample={"d": d, "var": str(var), "scaled_var": str(scaled)})
    return Recomputed(holds=True, solver="exact", detail="Var = d and scaled Var = 1 for d = 1..8 (±1 entries)")


#: Small fixed score rows and block sizes searched (in order) for a float64 mismatch.
_BITWISE_ROWS = ([2, 1, 3, 0], [1, 4, 2, 2, 5], [0.1, 0.7, 0.3, 0.9, 0.2, 0.5],
                 [3.3, -1.2, 0.4, 2.8, 1.1, -0.6, 2.9, 0.05])


@recompute("CL-002-BITWISE", bug="the rows are evaluated in exact Fractions (exp-domain weights), where no rounding can differ")
def _bitwise(control=False):
    """Erratum check: ``holds`` is whether streaming and one-shot agree bitwise on every row tried."""
    from flashproof.verified import attention as att
    from flashproof.verified.numbers import resolve

    system = "fraction" if control else "float"
    num = resolve(system)
    for row in _BITWISE_ROWS:
        # exp domain (control): a score is its weight e^s; positive rationals stand in for the row
        vals = [num.const(Fr(i + 2, 3) if control else x) for i, x in enumerate(row)]
        ones = [[num.one()] for _ in row]
        whole = att.summarize(vals, ones, num)
        for b in range(1, len(row)):
            state = att.BOTTOM
            for r in att.block_ranges(len(row), b):
                state = att.merge(state, att.summarize([vals[j] for j in r], [ones[j] for j in r], num), num)
            same_m = state.m == whole.m
            if not (same_m and state.l == whole.l):
                return Recomputed(holds=False, solver=f"{system}+verified.attention",
                                  detail=f"row {row}, block {b}: streaming ℓ = {state.l!r}, one-shot ℓ = {whole.l!r}",
                                  counterexample={"scores": row, "block": b, "streaming_l": repr(state.l),
                                                  "oneshot_l": repr(whole.l)})
    return Recomputed(holds=True, solver=f"{system}+verified.attention",
                      detail=f"all {len(_BITWISE_ROWS)} rows agree bitwise for every block size")


@recompute("CL-002-IO-GAIN")
def _io_gain(control=False):
    m_elems = Fr(192 * 1024, 2)  # 192 KB per SM in 2-byte elements
    d = 64
    return Recomputed((m_elems / d ** 2,), detail=f"M = {m_elems} FP16 elements; M/d² at d = {d}")


@recompute("CL-002-BWD-FLOPS")
def _bwd_flops(control=False):
    forward = ("S = QKᵀ", "O = PV")
    backward = ("dV = PᵀdO", "dP = dO·Vᵀ", "dQ = dS·K", "dK = dSᵀQ")
    recomputed = ("S = QKᵀ (recomputed)",)
    f, b = len(forward), len(backward)
    return Recomputed((Fr(b, f), Fr(b + len(recomputed), f)),
                      detail=f"{f} forward products, {b} backward + {len(recomputed)} recomputed")


@illustrate("CL-002-FA2-UTIL")
def _fa2():
    return f"73% of 312 TFLOP/s = {0.73 * 312:.0f} TFLOP/s"


@recompute("CL-002-FA3-UTIL")
def _fa3(control=False):
    return Recomputed((Fr(740) / Fr("989.4") * 100,), detail="740 / 989.4 TFLOP/s")


@illustrate("CL-002-SRAM-SIZE")
def _sram():
    return f"108 × 192 KiB = {108 * 192 * 1024 / 1e6:.1f}·10⁶ bytes"


@recompute("CL-002-6T-CELL")
def _six_t(control=False):
    inverters, per_inverter, access = 2, 2, 2
    return Recomputed((Fr(inverters * per_inverter + access),))


@recompute("CL-002-SRAM-BW")
def _sram_bw(control=False):
    return Recomputed((Fr(19) / Fr("1.555"),))


@recompute("CL-002-KV-CACHE")
def _kv(control=False):
    per_token = 2 * 4096 * 32 * 2
    return Recomputed((Fr(per_token, 10 ** 6), Fr(per_token * 4096, 10 ** 9)),
                      detail=f"{per_token:,} bytes per token")


# ---------------------------------------------------------------------------- 004: theorem page

@illustrate("CL-004-RESULT-COUNT")
def _result_count():
    from flashproof.spec.registry import collect

    items = collect()
    thms = [i for i in items.values() if i.kind == "theorem" and i.source.startswith("004")]
    return f"our registry holds {len(thms)} theorem item(s) from this page"


@recompute("CL-004-RETAINED", bug="the bound is taken as n(d + v), too small by the 2n statistics")
def _retained(control=False):
    import z3

    n, d, v = z3.Reals("n d v")
    k = 1 if control else 3
    ok, cex = _z3_valid(2 * n * d + 2 * n * v + 2 * n <= k * n * (d + v), [n > 0, d >= 1, v >= 1])
    return Recomputed(holds=ok, solver="z3", detail=f"2nd + 2nv + 2n ≤ {k}·n(d + v) for n > 0, d, v ≥ 1",
                      counterexample=cex)


@recompute("CL-004-BLOCK-VISITS", bug="one extra (empty) block per row is counted")
def _block_visits(control=False):
    from flashproof.verified.attention import block_ranges

    for n in range(1, 49):
        for b in range(1, 49):
            visits = n * (len(block_ranges(n, b)) + (1 if control else 0))
            if visits > n * n:
                return Recomputed(holds=False, solver="verified.attention", detail=f"fails at n = {n}, b = {b}",
                                  counterexample={"n": n, "b": b, "visits": visits})
    return Recomputed(holds=True, solver="verified.attention", detail="n·⌈n/b⌉ ≤ n² for n, b ≤ 48")
