"""The verified speculative-decoding sampler (seed ``000_e62e61cc03dea00a.txt``), with injected randomness.

The rule (spec items SPEC-STEP and SPEC-CYCLE; proved in ``flashproof.proofs.obligations.speculative``):
    accept the drafted token x  iff  u · p_draft(x) < p_target(x)      (u ~ U[0, 1): prob min(1, p_target/p_draft))
    on the first rejection emit a draw from norm(max(0, p_target − p_draft)) and stop;
    if all k drafts are accepted, emit a bonus token drawn from the target's row k+1.

Names: ``p_target`` is the large model's distribution, ``p_draft`` the cheap proposer's (the two
standard papers swap p and q; we never use single letters in the API).

Policies (stated once, used by the production sampler too):

* p_draft(x) = 0 for the drafted x: the test u·0 < p_target(x) accepts iff p_target(x) > 0
  (the limit of min(1, p_target/p_draft)); no division is ever formed. A token with
  p_target(x) = 0 is never accepted, even with u = 0.0 exactly.
* Empty residual (Σ max(0, p_target − p_draft) = 0, e.g. p_target = p_draft bitwise and a drafted
  token outside the draft's support): the replacement is drawn from p_target itself. In exact
  arithmetic this branch has probability 0 whenever x ~ p_draft.
* ``p_draft=None`` means one-hot drafts (p_draft = δ_x, e.g. n-gram or greedy drafters).
* Greedy (temperature 0) is the explicit ``greedy=True`` branch: the target's choice is the first
  argmax of its row, a draft is accepted iff it equals that choice; no uniform is consumed.

Inverse-CDF draws (residual and bonus): token = min{y : u·T < C_y}, C the running sums of the
weights and T their total. On exact systems that is the textbook draw. On floats (the fuzzing
oracle, bit-identical to ``flashproof.kernels.rejection_sample``) the weights are first fixed to
integers W_y = ⌊w_y·2^40⌋ and the uniform to U = ⌊u·2^31⌋, C is an exact integer running sum, and
token = min{y : ⌊U·T/2^31⌋ < C_y}: the result does not depend on summation order (GPU == CPU),
at the cost of a bias ≤ 2^-40 per weight and ≤ 2^-31 per draw, documented in docs/speculative.md.

Every comparison of a uniform is a *decision* (``num.gt(t, num.mul(u, c))``): a Python bool on
concrete systems, a fork on the branching backend (``verified.branching``), which is how the exact
emission law of this very code is computed. All other data choices go through ``num.where``.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, NamedTuple, Sequence

from .branching import BranchingNum, Uniform
from .numbers import FloatNum, NumberSystem, resolve

__all__ = ["Step", "SpecStep", "CycleUniforms", "Rules", "RULES", "ROW_SUM_TOL", "WEIGHT_BITS",
           "UNIFORM_BITS", "accept_test", "residual", "inverse_cdf", "rejection_step", "verify",
           "speculative_cycle", "target_sample", "first_argmax", "draft_row"]

#: |Σ row − 1| allowed for float rows (exact systems require exactly 1).
ROW_SUM_TOL = 1e-4
#: Fixed-point resolution of float weights (W = ⌊w·2^40⌋) and of float uniforms (U = ⌊u·2^31⌋).
WEIGHT_BITS = 40
UNIFORM_BITS = 31


class Step(NamedTuple):
    """One rejection step: the emitted token and whether it is the drafted one."""

    token: int
    accepted: bool


class SpecStep(NamedTuple):
    """One verification cycle: tokens (length n_accepted + 1: the accepted drafts, then the
    replacement or the bonus) and n_accepted ∈ [0, k]."""

    tokens: tuple
    n_accepted: int


class CycleUniforms(NamedTuple):
    """The randomness of one cycle. accept: k uniforms (one per draft position); residual: one (used
    at the first rejection); bonus: one (used on full acceptance); draft: k uniforms for drafting
    (only ``speculative_cycle`` uses them). Each u ∈ [0, 1)."""

    accept: Sequence
    residual: Any
    bonus: Any
    draft: Sequence = ()


# --------------------------------------------------------------------------- number-system glue

class _Exact:
    """Exact systems (Fraction, mpmath, branching): weights as given, token = min{y : u·T < C_y}."""

    @staticmethod
    def zero(num):
        return num.zero()

    @staticmethod
    def quantize(num, w):
        return w

    @staticmethod
    def threshold(num, u, total):
        return num.mul(u, total)

    @staticmethod
    def below(num, thr, c):
        return num.gt(c, thr)


class _FixedPoint:
    """Floats: integer weights and threshold, so the draw is independent of summation order."""

    @staticmethod
    def zero(num):
        return 0  # Python ints: exact running sums

    @staticmethod
    def quantize(num, w):
        return math.floor(w * 2.0 ** WEIGHT_BITS)

    @staticmethod
    def threshold(num, u, total):
        return (math.floor(u * 2.0 ** UNIFORM_BITS) * total) >> UNIFORM_BITS

    @staticmethod
    def below(num, thr, c):
        return thr < c


def _glue(num: NumberSystem):
    if isinstance(num, FloatNum):
        return _FixedPoint
    if isinstance(num, BranchingNum) or not num.symbolic:
        return _Exact
    raise TypeError(f"the sampler runs on concrete systems or the branching backend, not {num.name!r}: "
                    "wrap a symbolic system as BranchingNum(base)")


def _concrete(num) -> bool:
    return not num.symbolic and not (isinstance(num, BranchingNum) and num.base.symbolic)


# --------------------------------------------------------------------------------- the pieces

def accept_test(num, p_target_x, p_draft_x, u) -> bool:
    """The decision u·p_draft(x) < p_target(x): probability min(1, p_target/p_draft) for
    p_draft(x) > 0, and [p_target(x) > 0] for p_draft(x) = 0."""
    return num.gt(p_target_x, num.mul(u, p_draft_x))


def residual(num, p_target_row, p_draft_row) -> list:
    """max(0, p_target − p_draft), unnormalised (the draw normalises). (V,) -> (V,)"""
    zero = num.zero()
    out = []
    for pt, pd in zip(p_target_row, p_draft_row):
        d = num.sub(pt, pd)
        out.append(num.where(num.ge(d, zero), d, zero))
    return out


def inverse_cdf(num, weights, u, *, fallback=None) -> int:
    """Draw y with probability w_y / Σw using one uniform: min{y : u·T < C_y} (see module doc).

    weights: (V,) non-negative; fallback: (V,) weights used instead when Σ weights = 0 (the
    empty-residual policy). Returns a token id (an int in every system; −1 only on a symbolic
    path whose total weight is 0, which a proof must show has probability 0)."""
    glue = _glue(num)
    zero = glue.zero(num)
    W = [glue.quantize(num, w) for w in weights]
    total = _sum(num, W, zero)
    if fallback is not None:
        Wf = [glue.quantize(num, w) for w in fallback]
        empty = num.not_(num.gt(total, zero))
        W = [num.where(empty, a, b) for a, b in zip(Wf, W)]
        total = num.where(empty, _sum(num, Wf, zero), total)
    thr = glue.threshold(num, u, total)
    c = zero
    for y, w in enumerate(W):
        c = num.add(c, w)
        if glue.below(num, thr, c):  # a decision (see module doc)
            return y
    if _concrete(num):
        raise RuntimeError("inverse CDF found no token: the weights sum to 0")
    return -1


def first_argmax(num, row) -> int:
    """The first index of the maximum of a concrete row (greedy decoding's choice)."""
    if not _concrete(num):
        raise TypeError("greedy decoding needs concrete probabilities (argmax of symbolic rows is a case split)")
    best, best_v = 0, row[0]
    for y in range(1, len(row)):
        better = num.gt(row[y], best_v)
        best, best_v = num.where(better, y, best), num.where(better, row[y], best_v)
    return best


def _sum(num, xs, zero):
    acc = zero
    for x in xs:
        acc = num.add(acc, x)
    return acc


def _one_hot(num, x: int, V: int) -> list:
    return [num.one() if y == x else num.zero() for y in range(V)]


# ------------------------------------------------------------------------------ rules + mutants

def draft_row(num, draft_tokens, p_draft_rows, i: int, V: int) -> list:
    """Position i's draft distribution: row i of ``p_draft_rows``, or one-hot at draft i's token
    when the drafter gives no probabilities (``p_draft_rows`` None). (V,)"""
    if p_draft_rows is None:
        return _one_hot(num, draft_tokens[i], V)
    return [num.const(v) for v in p_draft_rows[i]]


class Rules(NamedTuple):
    """The replaceable parts of ``verify``; ``RULES`` is the verified sampler. A negative control
    (``flashproof.proofs.mutants.speculative``) replaces exactly one field."""

    accept: Callable  # (num, p_target_x, p_draft_x, u) -> decision
    residual: Callable  # (num, p_target_row, p_draft_row) -> weights
    accept_uniform: Callable  # (uniforms, i) -> the uniform of position i
    bonus_after_rejection: bool = False
    draft_row: Callable = draft_row  # (num, draft_tokens, p_draft_rows, i, V) -> position i's draft row


RULES = Rules(accept_test, residual, lambda uniforms, i: uniforms.accept[i])


# -------------------------------------------------------------------------------- validation

def _check_row(num, row, name: str, V: int | None = None, tol: float = ROW_SUM_TOL) -> int:
    if not isinstance(row, Sequence) or isinstance(row, (str, bytes)) or len(row) == 0:
        raise ValueError(f"{name} must be a non-empty list of probabilities, received {type(row).__name__}")
    if V is not None and len(row) != V:
        raise ValueError(f"{name} has {len(row)} entries but the vocabulary has {V}")
    if not _concrete(num):
        return len(row)  # symbolic rows: the simplex is a hypothesis of the proof
    for y, x in enumerate(row):
        if isinstance(x, float) and math.isnan(x):
            raise ValueError(f"{name}[{y}] is NaN (policy: NaN probabilities are an error)")
        if x < 0:
            raise ValueError(f"{name}[{y}] = {x!r} is negative")
    s = sum(row)
    exact = isinstance(num, BranchingNum) or all(isinstance(x, (int, Fraction)) for x in row)
    if (s != 1) if exact else not abs(s - 1) <= tol:
        raise ValueError(f"{name} sums to {s!r}; a distribution must sum to 1 "
                         f"({'exactly' if exact else f'within {tol}'})")
    return len(row)


def _check_uniform(num, u, name: str):
    if isinstance(num, BranchingNum):
        if not isinstance(u, Uniform):
            raise TypeError(f"{name}: the branching backend takes num.uniform() objects, received {u!r}")
        return
    if not (isinstance(u, (int, float, Fraction)) and not isinstance(u, bool) and 0 <= u < 1):
        raise ValueError(f"{name} must be a uniform in [0, 1), received {u!r}")


def _check_token(x, V: int, name: str):
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < V:
        raise ValueError(f"{name} = {x!r} is not a token id in [0, {V})")


# ------------------------------------------------------------------------------ public entries

def rejection_step(p_target, p_draft, token: int, u_accept, u_residual, num: Any = None, *,
                   rules: "Rules" = None) -> Step:
    """One speculative step on a drafted ``token``. p_target, p_draft: (V,) rows (p_draft None:
    one-hot at ``token``); returns ``Step(token, accepted)``."""
    rules = RULES if rules is None else rules
    num = resolve(num)
    V = _check_row(num, p_target, "p_target")
    if p_draft is not None:
        _check_row(num, p_draft, "p_draft", V)
    _check_token(token, V, "token")
    _check_uniform(num, u_accept, "u_accept")
    _check_uniform(num, u_residual, "u_residual")
    pt = [num.const(x) for x in p_target]
    pd = _one_hot(num, token, V) if p_draft is None else [num.const(x) for x in p_draft]
    if rules.accept(num, pt[token], pd[token], u_accept):  # a decision
        return Step(token, True)
    return Step(inverse_cdf(num, rules.residual(num, pt, pd), u_residual, fallback=pt), False)


def verify(draft_tokens: Sequence[int], p_target_rows, p_draft_rows, uniforms: CycleUniforms, *,
           greedy: bool = False, num: Any = None, rules: Rules = RULES, sum_tol: float = ROW_SUM_TOL) -> SpecStep:
    """Verify k drafted tokens (what ``flashproof.kernels.rejection_sample`` computes per request).

    draft_tokens: (k,) ids, k ≥ 0; p_target_rows: (k+1, V), row i the target's distribution after
    the first i drafts, row k the bonus row; p_draft_rows: (k, V) or None (one-hot drafts);
    uniforms: ``CycleUniforms`` (ignored when greedy); sum_tol: |Σ row − 1| allowed for float rows
    (1e-2 suits fp16/bf16 rows). Returns ``SpecStep(tokens, n_accepted)``."""
    num = resolve(num)
    k = len(draft_tokens)
    if len(p_target_rows) != k + 1:
        raise ValueError(f"p_target_rows must have k+1 = {k + 1} rows (k drafts + the bonus row), "
                         f"received {len(p_target_rows)}")
    V = _check_row(num, p_target_rows[0], "p_target_rows[0]", tol=sum_tol)
    for i, row in enumerate(p_target_rows[1:], 1):
        _check_row(num, row, f"p_target_rows[{i}]", V, sum_tol)
    if p_draft_rows is not None:
        if len(p_draft_rows) != k:
            raise ValueError(f"p_draft_rows must have k = {k} rows, received {len(p_draft_rows)}")
        for i, row in enumerate(p_draft_rows):
            _check_row(num, row, f"p_draft_rows[{i}]", V, sum_tol)
    for i, x in enumerate(draft_tokens):
        _check_token(x, V, f"draft_tokens[{i}]")
    if not greedy:
        if len(uniforms.accept) < k:
            raise ValueError(f"uniforms.accept must hold k = {k} uniforms, received {len(uniforms.accept)}")
        for i in range(k):
            _check_uniform(num, uniforms.accept[i], f"uniforms.accept[{i}]")
        _check_uniform(num, uniforms.residual, "uniforms.residual")
        _check_uniform(num, uniforms.bonus, "uniforms.bonus")
    pt = [[num.const(x) for x in row] for row in p_target_rows]
    tokens: list[int] = []
    for i, x in enumerate(draft_tokens):
        if greedy:
            choice = first_argmax(num, pt[i])
            if choice == x:
                tokens.append(x)
                continue
            return SpecStep(tuple(tokens + [choice]), i)
        pd = rules.draft_row(num, draft_tokens, p_draft_rows, i, V)
        if rules.accept(num, pt[i][x], pd[x], rules.accept_uniform(uniforms, i)):  # a decision
            tokens.append(x)
            continue
        tokens.append(inverse_cdf(num, rules.residual(num, pt[i], pd), uniforms.residual, fallback=pt[i]))
        if rules.bonus_after_rejection:
            tokens.append(inverse_cdf(num, pt[i + 1], uniforms.bonus))
        return SpecStep(tuple(tokens), i)
    bonus = first_argmax(num, pt[k]) if greedy else inverse_cdf(num, pt[k], uniforms.bonus)
    return SpecStep(tuple(tokens + [bonus]), k)


def speculative_cycle(prefix: Sequence[int], k: int, p_target: Callable, p_draft: Callable,
                      uniforms: CycleUniforms, *, greedy: bool = False, num: Any = None,
                      rules: Rules = RULES) -> SpecStep:
    """A full cycle: draft k tokens autoregressively from ``p_draft(prefix)`` (inverse CDF with
    ``uniforms.draft``; first argmax when greedy), evaluate ``p_target`` on every drafted prefix
    (k+1 rows), then ``verify``. p_target, p_draft: callables from a token tuple to a (V,) row."""
    num = resolve(num)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, received {k!r}")
    if not greedy and len(uniforms.draft) < k:
        raise ValueError(f"uniforms.draft must hold k = {k} uniforms, received {len(uniforms.draft)}")
    ctx = tuple(prefix)
    drafts: list[int] = []
    draft_rows = []
    for i in range(k):
        row = p_draft(ctx + tuple(drafts))
        _check_row(num, row, f"p_draft({ctx + tuple(drafts)})")
        if not greedy:
            _check_uniform(num, uniforms.draft[i], f"uniforms.draft[{i}]")
        rowc = [num.const(x) for x in row]
        drafts.append(first_argmax(num, rowc) if greedy else inverse_cdf(num, rowc, uniforms.draft[i]))
        draft_rows.append(row)
    target_rows = [p_target(ctx + tuple(drafts[:i])) for i in range(k + 1)]
    return verify(drafts, target_rows, draft_rows, uniforms, greedy=greedy, num=num, rules=rules)


def target_sample(prefix: Sequence[int], n: int, p_target: Callable, uniforms: Sequence, *,
                  num: Any = None) -> tuple:
    """Plain autoregressive sampling of n tokens from ``p_target`` (the law speculation must keep)."""
    num = resolve(num)
    out: list[int] = []
    for i in range(n):
        row = p_target(tuple(prefix) + tuple(out))
        _check_row(num, row, "p_target(prefix)")
        _check_uniform(num, uniforms[i], f"uniforms[{i}]")
        out.append(inverse_cdf(num, [num.const(x) for x in row], uniforms[i]))
    return tuple(out)
