"""The mutant corpus: deliberately wrong pieces of the reference, each planted by a control.

Every mutant is a drop-in replacement for ONE small function of ``flashproof.verified.attention``
(or of a number system), with a one-line docstring naming the planted bug. Controls patch it in
with ``unittest.mock.patch.object`` and re-run the obligation's own checker, which must refute it.
"""
from __future__ import annotations

from flashproof.verified import attention as A
from flashproof.verified.attention import BOTTOM, Summary, _pair_visit, _row_visit, _schedule
from flashproof.verified.numbers import resolve


def merge_no_rescale(a, b, num=None):
    """merge adds ℓ and z of both sides without the e^{m−m'} rescale."""
    num = resolve(num)
    if a is BOTTOM and b is BOTTOM:
        return BOTTOM
    v = len(b.z) if a is BOTTOM else len(a.z)
    a, b = A._lift(a, num, v), A._lift(b, num, v)
    return Summary(num.score_max(a.m, b.m), num.add(a.l, b.l), [num.add(x, y) for x, y in zip(a.z, b.z)],
                   num.or_(a.nonempty, b.nonempty))


def merge_second_not_rescaled(a, b, num=None):
    """merge rescales the first operand but adds the second operand's ℓ and z unscaled."""
    num = resolve(num)
    if a is BOTTOM and b is BOTTOM:
        return BOTTOM
    v = len(b.z) if a is BOTTOM else len(a.z)
    a, b = A._lift(a, num, v), A._lift(b, num, v)
    ne = num.or_(a.nonempty, b.nonempty)
    m = num.score_max(a.m, b.m)
    m_ref = num.where(ne, m, num.score_zero())
    alpha = num.where(a.nonempty, num.exp(num.score_sub(a.m, m_ref)), num.zero())
    beta = num.where(b.nonempty, num.one(), num.zero())
    return Summary(m, num.add(num.mul(alpha, a.l), num.mul(beta, b.l)),
                   [num.add(num.mul(alpha, x), num.mul(beta, y)) for x, y in zip(a.z, b.z)], ne)


def merge_max_from_second(a, b, num=None):
    """merge keeps the second operand's maximum as m' instead of max(m_S, m_T)."""
    num = resolve(num)
    if a is BOTTOM and b is BOTTOM:
        return BOTTOM
    v = len(b.z) if a is BOTTOM else len(a.z)
    a, b = A._lift(a, num, v), A._lift(b, num, v)
    ne = num.or_(a.nonempty, b.nonempty)
    m = num.where(b.nonempty, b.m, a.m)
    m_ref = num.where(ne, m, num.score_zero())
    alpha = num.where(a.nonempty, num.exp(num.score_sub(a.m, m_ref)), num.zero())
    beta = num.where(b.nonempty, num.exp(num.score_sub(b.m, m_ref)), num.zero())
    return Summary(m, num.add(num.mul(alpha, a.l), num.mul(beta, b.l)),
                   [num.add(num.mul(alpha, x), num.mul(beta, y)) for x, y in zip(a.z, b.z)], ne)


def merge_unguarded(a, b, num=None):
    """merge rescales by e^{m−m'} without the empty-state guard, so ⊥⋆⊥ forms (−∞)−(−∞)."""
    num = resolve(num)
    if a is BOTTOM and b is BOTTOM:
        return BOTTOM
    v = len(b.z) if a is BOTTOM else len(a.z)
    a, b = A._lift(a, num, v), A._lift(b, num, v)
    m = num.score_max(a.m, b.m)
    alpha = num.exp(num.score_sub(a.m, m))
    beta = num.exp(num.score_sub(b.m, m))
    return Summary(m, num.add(num.mul(alpha, a.l), num.mul(beta, b.l)),
                   [num.add(num.mul(alpha, x), num.mul(beta, y)) for x, y in zip(a.z, b.z)],
                   num.or_(a.nonempty, b.nonempty))


def bottom_weight_one(num, v):
    """⊥ is stored with maximum score 0 (weight 1) instead of −∞ (weight 0)."""
    return Summary(num.score_zero(), num.zero(), [num.zero() for _ in range(v)], num.false())


def skip_or_merge_copy(state, sigma, num, v):
    """a nonempty block's summary replaces the state (copied) even when the state is nonempty."""
    state = A._lift(state, num, v)
    pick = lambda new, old: num.where(sigma.nonempty, new, old)  # noqa: E731
    return Summary(pick(sigma.m, state.m), pick(sigma.l, state.l), [pick(x, y) for x, y in zip(sigma.z, state.z)],
                   num.or_(state.nonempty, sigma.nonempty))


def skip_or_merge_no_skip_unguarded(state, sigma, num, v):
    """an empty block is not skipped: every block goes through an unguarded merge."""
    return merge_unguarded(A._lift(state, num, v), sigma, num)


def block_ranges_overlap(n_k, block):
    """block boundary off by one: each block also takes the first key of the next block."""
    return [range(s, min(s + block + 1, n_k)) for s in range(0, n_k, block)]


def block_ranges_short(n_k, block):
    """block boundary off by one: each block stops one key early (its last key is never visited)."""
    return [range(s, min(s + block, n_k) - (1 if min(s + block, n_k) - s > 1 else 0)) for s in range(0, n_k, block)]


def block_ranges_untiled(n_k, block):
    """the key loop is not tiled: one block holds the whole row of scores whatever b is."""
    return [range(0, n_k)]


def finish_no_guard(state, num):
    """_finish divides z by ℓ without the empty-row guard (0/0 for an all-masked row)."""
    out = [num.div(za, state.l) for za in state.z]
    lse = num.score_add(state.m, num.log(state.l))
    return out, state.m, state.l, lse


def summarize_max_ignores_mask(scores, values, num=None, *, allowed=None):
    """summarize takes the block maximum over all keys, masked ones included."""
    num = resolve(num)
    flags = [num.true()] * len(scores) if allowed is None else list(allowed)
    v = len(values[0])
    neg_inf = num.score_neg_inf()
    m = neg_inf
    for s in scores:
        m = num.score_max(m, s)
    nonempty = num.any_(flags)
    m_ref = num.where(nonempty, m, num.score_zero())
    l = num.zero()
    z = [num.zero() for _ in range(v)]
    for s, vj, f in zip(scores, values, flags):
        p = num.exp(num.where(f, num.score_sub(s, m_ref), neg_inf))
        l = num.add(l, p)
        z = [num.where(f, num.add(za, num.mul(p, va)), za) for za, va in zip(z, vj)]
    return Summary(m, l, z, nonempty)


def finish_lse_without_max(state, num):
    """_finish forgets the maximum in the log-sum-exp (lse = log ℓ instead of m + log ℓ)."""
    ne = state.nonempty
    l_safe = num.where(ne, state.l, num.one())
    out = [num.where(ne, num.div(za, l_safe), num.zero()) for za in state.z]
    lse = num.where(ne, num.log(l_safe), num.score_neg_inf())
    return out, state.m, state.l, lse


def _rotated(xs):
    return xs[1:] + xs[:1]


_REAL_TILED_BACKWARD = A.tiled_backward  # captured at import, before any control patches it


def backward_delta_wrong_row(Q, K, V, G, forward, **kw):
    """δ_i = ⟨G_i, Y_{i+1}⟩: the reverse pass reads the next row's output."""
    return _REAL_TILED_BACKWARD(Q, K, V, G, forward._replace(out=_rotated(forward.out)), **kw)


def backward_l_wrong_row(Q, K, V, G, forward, **kw):
    """p_ij = e^{s_ij − m_i}/ℓ_{i+1}: the reverse pass divides by the next row's normalizer."""
    return _REAL_TILED_BACKWARD(Q, K, V, G, forward._replace(l=_rotated(forward.l)), **kw)


_REAL_QK_INPUTS = A._qk_inputs  # captured at import, before any control patches it


def qk_inputs_score_cache(*args, **kw):
    """scores are cached across rows in a dict: an n×n score array is kept alive."""
    p, Qc, Kc = _REAL_QK_INPUTS(*args, **kw)
    cache = {}

    def score(i, j):
        if (i, j) not in cache:
            cache[(i, j)] = p.score(i, j)
        return cache[(i, j)]

    return p._replace(score=score), Qc, Kc



# ------------------------------------------------------------------ reverse pass, per step (issue 15)

def pair_terms_delta_from_values(num, s, f, row, g_row, v_row):
    """δ is taken as ⟨G_i, V_j⟩ (the pair's value row) instead of ⟨G_i, Y_i⟩, so γ_ij = 0."""
    p = num.div(num.exp(num.where(f, num.score_sub(s, row.m_ref), num.score_neg_inf())), row.l_safe)
    dp = A._dot(num, g_row, v_row)
    return A.PairTerms(p, num.mul(p, num.sub(dp, A._dot(num, g_row, v_row))))


def pair_terms_dv_unnormalized(num, s, f, row, g_row, v_row):
    """the weight handed to the dV update is e^{s−m} without the 1/ℓ (γ unchanged)."""
    e = num.exp(num.where(f, num.score_sub(s, row.m_ref), num.score_neg_inf()))
    p = num.div(e, row.l_safe)
    return A.PairTerms(e, num.mul(p, num.sub(A._dot(num, g_row, v_row), row.delta)))


def pair_update_dk_unscaled(num, f, t, c, q_row, k_row, g_row, dq_row, dk_row, dv_row):
    """dK accumulates γ·Q_i without the scale c."""
    cg = num.mul(c, t.gamma)
    for r in range(len(dq_row)):
        dq_row[r] = A._accumulate(num, f, dq_row[r], num.mul(cg, k_row[r]))
        dk_row[r] = A._accumulate(num, f, dk_row[r], num.mul(t.gamma, q_row[r]))
    for a in range(len(dv_row)):
        dv_row[a] = A._accumulate(num, f, dv_row[a], num.mul(t.p, g_row[a]))


def pair_update_dq_unguarded(num, f, t, c, q_row, k_row, g_row, dq_row, dk_row, dv_row):
    """dQ adds c·γ·K_j for masked pairs too (no mask guard: a masked pair's NaN reaches dQ)."""
    cg = num.mul(c, t.gamma)
    for r in range(len(dq_row)):
        dq_row[r] = num.add(dq_row[r], num.mul(cg, k_row[r]))
        dk_row[r] = A._accumulate(num, f, dk_row[r], num.mul(cg, q_row[r]))
    for a in range(len(dv_row)):
        dv_row[a] = A._accumulate(num, f, dv_row[a], num.mul(t.p, g_row[a]))


def accumulate_ignores_mask(num, f, acc, term):
    """the accumulation step adds the term whatever the pair's flag."""
    return num.add(acc, term)


def gradient_buffers_dk_nq_rows(num, n_q, n_k, d, v):
    """dK is allocated with n_q rows instead of n_k."""
    zeros = lambda rows, cols: [[num.zero() for _ in range(cols)] for _ in range(rows)]  # noqa: E731
    return A.Gradients(zeros(n_q, d), zeros(n_q, d), zeros(n_k, v))


def schedule_keys_up_to_nq(n_q, n_k, block):
    """the reverse pass loops keys up to n_q instead of n_k."""
    for i in range(n_q):
        yield i, (j for J in A.block_ranges(n_q, block) for j in J)


# ------------------------------------------------------------------ the oracle itself (issue 15 §6)

def summarize_z_unguarded(scores, values, num=None, *, allowed=None):
    """summarize adds p·v for masked keys too (p = 0, but 0·NaN = NaN reaches z)."""
    num = resolve(num)
    flags = [num.true()] * len(scores) if allowed is None else list(allowed)
    v = len(values[0])
    neg_inf = num.score_neg_inf()
    m = neg_inf
    for s, f in zip(scores, flags):
        m = num.score_max(m, num.where(f, s, neg_inf))
    nonempty = num.any_(flags)
    m_ref = num.where(nonempty, m, num.score_zero())
    l = num.zero()
    z = [num.zero() for _ in range(v)]
    for s, vj, f in zip(scores, values, flags):
        p = num.exp(num.where(f, num.score_sub(s, m_ref), neg_inf))
        l = num.add(l, p)
        z = [num.add(za, num.mul(p, va)) for za, va in zip(z, vj)]
    return Summary(m, l, z, nonempty)


def dense_den_sums_masked(p, num):
    """the dense formula's denominator sums e^{s−shift} over masked keys too."""
    v = len(p.V[0])
    neg_inf = num.score_neg_inf()
    rows = []
    for i in range(p.n_q):
        s = [p.score(i, j) for j in range(p.n_k)]
        f = [p.flag(i, j) for j in range(p.n_k)]
        shift = neg_inf
        for sj, fj in zip(s, f):
            shift = num.score_max(shift, num.where(fj, sj, neg_inf))
        ne = num.any_(f)
        shift = num.where(ne, shift, num.score_zero())
        w = [num.exp(num.where(fj, num.score_sub(sj, shift), neg_inf)) for sj, fj in zip(s, f)]
        den = num.zero()
        for sj in s:
            den = num.add(den, num.exp(num.score_sub(sj, shift)))
        den_safe = num.where(ne, den, num.one())
        row = []
        for a in range(v):
            acc = num.zero()
            for wj, vj, fj in zip(w, p.V, f):
                acc = num.where(fj, num.add(acc, num.mul(wj, vj[a])), acc)
            row.append(num.where(ne, num.div(acc, den_safe), num.zero()))
        rows.append(row)
    return rows


def float_log_base2(self, x):
    """FloatNum.log returns log2 x instead of the natural log."""
    import math
    return math.log2(x) if x > 0 else float("-inf")


def interval_const_via_float(self, x):
    """IntervalNum.const rounds a Fraction to the nearest double first (1/3 is no longer enclosed)."""
    import math
    from fractions import Fraction
    if isinstance(x, Fraction):
        return self.ctx.mpf(float(x))
    if isinstance(x, float) and not math.isfinite(x):
        return self.ctx.mpf(str(x))
    return self.ctx.mpf(x)


def summarize_exp_unguarded(scores, values, num=None, *, allowed=None):
    """summarize exponentiates a masked key's score too and adds that weight to ℓ (poison reaches ℓ through exp)."""
    num = resolve(num)
    flags = [num.true()] * len(scores) if allowed is None else list(allowed)
    v = len(values[0])
    neg_inf = num.score_neg_inf()
    m = neg_inf
    for s, f in zip(scores, flags):
        m = num.score_max(m, num.where(f, s, neg_inf))
    nonempty = num.any_(flags)
    m_ref = num.where(nonempty, m, num.score_zero())
    l = num.zero()
    z = [num.zero() for _ in range(v)]
    for s, vj, f in zip(scores, values, flags):
        p = num.exp(num.score_sub(s, m_ref))
        l = num.add(l, p)
        z = [num.where(f, num.add(za, num.mul(p, va)), za) for za, va in zip(z, vj)]
    return Summary(m, l, z, nonempty)


def pair_visit_dk_row_i(num, p, c, Qc, Kc, Gc, grads, row, i, j):
    """the pair's dK update goes to row i (the query's index) instead of row j."""
    f = p.flag(i, j)
    t = A._pair_terms(num, p.score(i, j), f, row, Gc[i], p.V[j])
    A._pair_update(num, f, t, c, Qc[i], Kc[j], Gc[i], grads.dq[i], grads.dk[i], grads.dv[j])


# ----------------------------------------------------------------------------------- dropout (EXT-DROPOUT)

def dropout_replayed_fresh(dropout, num, n_q, n_k):
    """the reverse pass draws a fresh dropout mask instead of replaying the forward's realised one."""
    import random

    from flashproof.verified import dropout as D

    rng = random.Random(0)
    fresh = [[rng.randint(0, 1) for _ in range(n_k)] for _ in range(n_q)]
    return D.factors(D.Dropout(fresh, dropout.p), num, n_q, n_k)


def dropout_factors_unscaled(dropout, num, n_q, n_k):
    """kept probabilities are not scaled by 1/(1 − p) (r_ij = M_ij)."""
    from flashproof.verified import dropout as D

    D.check(dropout, n_q, n_k)
    bits = [[num.const(x) for x in row] for row in dropout.keep]
    return lambda i, j: bits[i][j]


def backward_delta_undropped(Q, K, V, G, forward, **kw):
    """δ_i = ⟨G_i, Y_i⟩ with the undropped output Y (Σ_j P_ij V_j) instead of the dropped-out one."""
    undropped = A.tiled_forward(Q, K, V, **{k: x for k, x in kw.items() if k != "dropout"})
    return _REAL_TILED_BACKWARD(Q, K, V, G, forward._replace(out=undropped.out), **kw)


# ------------------------------------------------------------------ issue 15: unbounded scope

def block_ranges_step_plus_one(n_k, block):
    """the block loop steps by b + 1, so the key between two blocks is skipped."""
    return [range(start, min(start + block, n_k)) for start in range(0, n_k, block + 1)]


def drive_pair_swapped(num, p, c, Qc, Kc, Gc, forward, grads, block, r=None):
    """the reverse pass's driver visits pair (j, i) instead of (i, j)."""
    for i, keys in _schedule(p.n_q, p.n_k, block):
        row = _row_visit(num, p, forward, Gc, i)
        for j in keys:
            if r is None:
                _pair_visit(num, p, c, Qc, Kc, Gc, grads, row, j, i)
            else:
                A._dropped_pair_visit(num, p, c, Qc, Kc, Gc, grads, row, i, j, r(i, j))


def summarize_skips_last_key(scores, values, num=None, *, allowed=None, drop=None):
    """summarize's sum loop stops before the block's last key (its weight never reaches ℓ or z)."""
    num = resolve(num)
    flags = [num.true()] * len(scores) if allowed is None else list(allowed)
    v = len(values[0])
    m = num.score_neg_inf()
    for s, f in zip(scores, flags):
        m = A._max_step(num, m, s, f)
    nonempty = num.any_(flags)
    m_ref = num.where(nonempty, m, num.score_zero())
    l, z = num.zero(), [num.zero() for _ in range(v)]
    drops = [None] * len(scores) if drop is None else list(drop)
    for s, vj, f, r in zip(scores[:-1], values[:-1], flags[:-1], drops[:-1]):
        l, z = A._sum_step(num, m_ref, l, z, s, vj, f, r)
    return Summary(m, l, z, nonempty)


def max_step_ignores_mask(num, m, s, f):
    """the block maximum's step takes every key, masked or not."""
    return num.score_max(m, s)


def sum_step_unweighted(num, m_ref, l, z, s, vj, f, r=None):
    """the sum step adds v_j to z without the weight p = e^{s−m}."""
    p = num.exp(num.where(f, num.score_sub(s, m_ref), num.score_neg_inf()))
    return num.add(l, p), [num.where(f, num.add(za, va), za) for za, va in zip(z, vj)]
