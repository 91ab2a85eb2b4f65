"""The verified attention reference: the items of the theorem page, once, generic over a number system.

Page items (``../shared/seeds/004_b37f59f788102f1f.txt``) and where they live:

* *Stable summary of an attention key block* — ``Summary``, ``BOTTOM``, ``summarize``, ``merge``.
* *Exact tiled softmax attention with block-recomputed vector-Jacobian products* —
  ``tiled_forward`` (forward procedure), ``tiled_backward`` (reverse procedure).
* The dense masked attention of the exactness theorem — ``dense_attention``.
* The page's dropout remark, as an extension (``dropout.py``): ``dropout=Dropout(keep, p)`` on
  ``dense_attention``, ``tiled_forward`` and ``tiled_backward`` multiplies P_ij by r_ij = M_ij/(1 − p)
  (the statistics stay those of the undropped softmax); the reverse pass replays the SAME r_ij.
* Our extension (not on the page): a row with no allowed key gives Y = 0, LSE = −∞, m = −∞,
  ℓ = 0 and zero gradients; enabled by ``empty_rows="zero"``. In the default theorem mode
  (``empty_rows="error"``) such a row is a ``ValueError``.

Conventions. Indices are 0-based (the page counts from 1). Matrices are lists of rows: Q is
(n_q, d), K is (n_k, d), V is (n_k, v), G is (n_q, v); the page's square case is n_q = n_k = n.
Key block t covers keys ``[t·b, min((t+1)·b, n_k))``. ``allowed`` is ``None`` (every key), a
predicate ``(i, j) -> flag`` (a flag may be a solver formula: a symbolic mask) or one set of key
indices per query row. Every data-dependent choice goes through ``num.where``: there is no Python
``if`` on a number here, so the same code runs on floats and on z3 terms.

Non-finite inputs: an entry that an allowed (i, j) pair reads must be finite (``ValueError``
otherwise); entries that only masked pairs touch are never used, whatever they hold.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

from . import dropout as _dropout
from . import validate
from .dropout import Dropout
from .numbers import NumberSystem, resolve

__all__ = ["Dropout", "Summary", "BOTTOM", "TiledForward", "Gradients", "RowStats", "PairTerms", "summarize", "merge", "block_ranges",
           "dense_attention", "dense_attention_from_scores", "tiled_forward", "tiled_forward_from_scores",
           "tiled_backward"]


class Summary(NamedTuple):
    """Σ_i(S) = (m, ℓ, z) of a key set S for one query row, plus whether S is nonempty.

    m: score (the maximum of s_ij over S); l: linear, ℓ = Σ_S e^{s−m}; z: list of v linear values,
    z = Σ_S e^{s−m} v_j. The empty state ⊥ has ``nonempty`` false; it is *stored* as
    (m = −∞, ℓ = 0, z = 0) so that symbolic runs can carry it, but no coordinate of ⊥ is ever used
    as a number: ``merge`` guards every rescale by the flag.
    """

    m: Any
    l: Any
    z: Any
    nonempty: Any


#: The empty summary ⊥ (a two-sided identity of ``merge``), independent of number system.
BOTTOM = Summary(None, None, None, False)


class TiledForward(NamedTuple):
    """Forward result. out: (n_q, v) rows of Y; m, l, lse: n_q per-row statistics
    (lse = m + log ℓ, natural log)."""

    out: list
    m: list
    l: list
    lse: list


class Gradients(NamedTuple):
    """Reverse-pass result: dq (n_q, d), dk (n_k, d), dv (n_k, v)."""

    dq: list
    dk: list
    dv: list


def _bottom(num: NumberSystem, v: int) -> Summary:
    return Summary(num.score_neg_inf(), num.zero(), [num.zero() for _ in range(v)], num.false())


def _lift(s: Summary, num: NumberSystem, v: int) -> Summary:
    return _bottom(num, v) if s is BOTTOM else s


def block_ranges(n_k: int, block: int) -> list[range]:
    """The key blocks J_t = [t·b, min((t+1)·b, n_k)) for t = 0..⌈n_k/b⌉−1 (0-based)."""
    return [range(start, min(start + block, n_k)) for start in range(0, n_k, block)]


def summarize(scores: Sequence, values: Sequence, num: Any = None, *, allowed: Sequence | None = None,
              drop: Sequence | None = None) -> Summary:
    """Σ(S) for S = the keys whose flag in ``allowed`` holds (all keys when ``None``).

    scores: length-k list of scores s_j; values: (k, v) rows v_j; allowed: length-k flags; drop:
    None, or length-k dropout multipliers r_j that weight the value rows only (z = Σ e^{s−m} r_j v_j;
    m and ℓ stay those of the undropped softmax). Returns ⊥'s representation (flag false) when S is empty.
    """
    num = resolve(num)
    flags = [num.true()] * len(scores) if allowed is None else list(allowed)
    v = len(values[0])
    m = num.score_neg_inf()
    for s, f in zip(scores, flags):
        m = _max_step(num, m, s, f)
    nonempty = num.any_(flags)
    m_ref = num.where(nonempty, m, num.score_zero())  # ⊥ has no max: never subtract −∞ from −∞
    l, z = num.zero(), [num.zero() for _ in range(v)]
    drops = [None] * len(scores) if drop is None else list(drop)  # dropout weights the value row, not ℓ
    for s, vj, f, r in zip(scores, values, flags, drops):
        l, z = _sum_step(num, m_ref, l, z, s, vj, f, r)
    return Summary(m, l, z, nonempty)


def _max_step(num: NumberSystem, m, s, f):
    """One key of the block maximum: max(m, s) when the key's flag f holds, m otherwise."""
    return num.score_max(m, num.where(f, s, num.score_neg_inf()))


def _sum_step(num: NumberSystem, m_ref, l, z: list, s, vj: Sequence, f, r=None) -> tuple:
    """One key of ℓ and z (length v) against the block's reference m_ref: p = e^{s−m_ref} (0 when
    masked) is added to ℓ and p·v_j to z (p·r·v_j with a dropout multiplier r); returns (ℓ, z)."""
    p = num.exp(num.where(f, num.score_sub(s, m_ref), num.score_neg_inf()))  # e^{s−m} ≤ 1, or 0 when masked
    pv = p if r is None else num.mul(p, r)
    # a masked key's value row is never read: 0·NaN would be NaN
    return num.add(l, p), [num.where(f, num.add(za, num.mul(pv, va)), za) for za, va in zip(z, vj)]


def merge(a: Summary, b: Summary, num: Any = None) -> Summary:
    """Σ(S) ⋆ Σ(T): m' = max(m_S, m_T), ℓ' = e^{m_S−m'}ℓ_S + e^{m_T−m'}ℓ_T, z' likewise.

    ⊥ is a two-sided identity: a side whose flag is false contributes weight 0, and the rescale
    reference is guarded so that (−∞) − (−∞) is never formed.
    """
    num = resolve(num)
    if a is BOTTOM and b is BOTTOM:
        return BOTTOM
    v = len(b.z) if a is BOTTOM else len(a.z)
    a, b = _lift(a, num, v), _lift(b, num, v)
    nonempty = num.or_(a.nonempty, b.nonempty)
    m = num.score_max(a.m, b.m)
    m_ref = num.where(nonempty, m, num.score_zero())
    alpha = num.where(a.nonempty, num.exp(num.score_sub(a.m, m_ref)), num.zero())
    beta = num.where(b.nonempty, num.exp(num.score_sub(b.m, m_ref)), num.zero())
    l = num.add(num.mul(alpha, a.l), num.mul(beta, b.l))
    z = [num.add(num.mul(alpha, za), num.mul(beta, zb)) for za, zb in zip(a.z, b.z)]
    return Summary(m, l, z, nonempty)


def _finish(state: Summary, num: NumberSystem) -> tuple[list, Any, Any, Any]:
    """Y = z/ℓ and lse = m + log ℓ; the empty-row extension gives 0 and −∞ (guarded, no NaN)."""
    ne = state.nonempty
    l_safe = num.where(ne, state.l, num.one())
    out = [num.where(ne, num.div(za, l_safe), num.zero()) for za in state.z]
    lse = num.where(ne, num.score_add(state.m, num.log(l_safe)), num.score_neg_inf())
    return out, state.m, state.l, lse


def _coerce(num: NumberSystem, mat):
    return [[num.const(x) for x in row] for row in mat]


class _ScoredInputs(NamedTuple):
    """One call's validated inputs: n_q query rows, n_k keys, ``score(i, j)`` (s_ij, recomputed on
    demand, never stored as an n_q×n_k array), V (n_k, v) coerced, and ``flag(i, j)`` (key j allowed
    for row i)."""

    n_q: int
    n_k: int
    score: Callable[[int, int], Any]  # recomputes s_ij on demand
    V: list
    flag: Callable[[int, int], Any]


def _qk_inputs(Q, K, V, scale, allowed, num, empty_rows, G=None) -> tuple[_ScoredInputs, list, list]:
    n_q, d = validate.matrix("Q", Q)
    n_k, _ = validate.matrix("K", K, cols=d)
    validate.matrix("V", V, rows=n_k)
    if G is not None:
        validate.matrix("G", G, rows=n_q, cols=len(V[0]))
    flag = validate.mask(allowed, n_q, n_k)
    validate.nonempty_rows(flag, n_q, n_k, validate.empty_rows_mode(empty_rows))
    validate.finite_reads(num, flag, Q, K, V, n_q, n_k, G=G)
    validate.scale(num, scale)
    Qc, Kc, c = _coerce(num, Q), _coerce(num, K), num.const(scale)

    def score(i, j):
        return _score(num, c, Qc[i], Kc[j])

    return _ScoredInputs(n_q, n_k, score, _coerce(num, V), flag), Qc, Kc


def _score(num: NumberSystem, c, q_row: Sequence, k_row: Sequence):
    """s_ij = c·⟨Q_i, K_j⟩ read as a score (q_row, k_row: length d)."""
    return num.to_score(num.mul(c, _dot(num, q_row, k_row)))


def _scores_inputs(S, V, allowed, num, empty_rows) -> _ScoredInputs:
    n_q, n_k = validate.matrix("S", S)
    validate.matrix("V", V, rows=n_k)
    flag = validate.mask(allowed, n_q, n_k)
    validate.nonempty_rows(flag, n_q, n_k, validate.empty_rows_mode(empty_rows))
    Sc = [[x for x in row] for row in S]  # scores are passed through as given (weights in the exp domain)
    return _ScoredInputs(n_q, n_k, lambda i, j: Sc[i][j], _coerce(num, V), flag)


# ----------------------------------------------------------------------------------- dense

def _dense(p: _ScoredInputs, num: NumberSystem, r: Callable | None = None) -> list:
    """Y_i = Σ_{j∈A_i} e^{s_ij} V_j / Σ_{j∈A_i} e^{s_ij}, evaluated with every exponent shifted by
    the row maximum (the shift cancels; it keeps floats from overflowing). With dropout factors
    ``r(i, j)`` the numerator's terms are e^{s_ij} r_ij V_j (the denominator is unchanged)."""
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
        for wj in w:
            den = num.add(den, wj)
        den_safe = num.where(ne, den, num.one())
        wv = w if r is None else [num.mul(wj, r(i, j)) for j, wj in enumerate(w)]
        row = []
        for a in range(v):
            acc = num.zero()
            for wj, vj, fj in zip(wv, p.V, f):
                acc = num.where(fj, num.add(acc, num.mul(wj, vj[a])), acc)
            row.append(num.where(ne, num.div(acc, den_safe), num.zero()))
        rows.append(row)
    return rows


def _dense_dropped(p: _ScoredInputs, num: NumberSystem, dropout) -> list:
    """``_dense`` with dropout's factors r(i, j) = M_ij/(1 − p) (``dropout.factors``) when given."""
    if dropout is None:
        return _dense(p, num)
    return _dense(p, num, _dropout.factors(dropout, num, p.n_q, p.n_k))


def dense_attention(Q, K, V, *, scale, allowed=None, num=None, empty_rows: str = "error",
                    dropout: Dropout | None = None) -> list:
    """Dense masked attention (the right-hand side of the exactness theorem).

    Q (n_q, d), K (n_k, d), V (n_k, v) → rows of Y, (n_q, v), with s_ij = scale·⟨Q_i, K_j⟩ and
    Y_i the softmax over the allowed keys A_i of s_i·, applied to V. Materialises one row of n_k
    scores at a time (this is the specification, not the memory-efficient algorithm). ``dropout``:
    None, or ``Dropout(keep (n_q, n_k), p)``: Y_i = Σ_j r_ij P_ij V_j with r_ij = M_ij/(1 − p).
    """
    num = resolve(num)
    p, _, _ = _qk_inputs(Q, K, V, scale, allowed, num, empty_rows)
    return _dense_dropped(p, num, dropout)


def dense_attention_from_scores(S, V, *, allowed=None, num=None, empty_rows: str = "error",
                                dropout: Dropout | None = None) -> list:
    """``dense_attention`` from given scores S (n_q, n_k) — weights w = e^s in the exp domain."""
    num = resolve(num)
    p = _scores_inputs(S, V, allowed, num, empty_rows)
    return _dense_dropped(p, num, dropout)


# ----------------------------------------------------------------------------------- tiled forward

def _forward(p: _ScoredInputs, block: int, num: NumberSystem, r: Callable | None = None) -> TiledForward:
    v = len(p.V[0])
    out, ms, ls, lses = [], [], [], []
    blocks = block_ranges(p.n_k, block)
    for i in range(p.n_q):
        state = BOTTOM
        for J in blocks:
            num.note_alloc("block_scores", len(J))
            flags = [p.flag(i, j) for j in J]
            drop = {} if r is None else {"drop": [r(i, j) for j in J]}  # (no keyword without dropout)
            sigma = summarize([p.score(i, j) for j in J], [p.V[j] for j in J], num, allowed=flags, **drop)
            num.note_free("block_scores", len(J))
            # I = J_t ∩ A_i empty: skip (state unchanged); state ⊥: copy Σ(I); otherwise merge.
            state = _skip_or_merge(state, sigma, num, v)
        y, m, l, lse = _finish(_lift(state, num, v), num)
        out.append(y)
        ms.append(m)
        ls.append(l)
        lses.append(lse)
    return TiledForward(out, ms, ls, lses)


def _skip_or_merge(state: Summary, sigma: Summary, num: NumberSystem, v: int) -> Summary:
    """One step of the forward procedure: skip an empty block, copy into ⊥, merge otherwise."""
    state = _lift(state, num, v)
    merged = merge(state, sigma, num)

    def pick(if_merge, if_copy, if_skip):
        return num.where(sigma.nonempty, num.where(state.nonempty, if_merge, if_copy), if_skip)

    return Summary(pick(merged.m, sigma.m, state.m), pick(merged.l, sigma.l, state.l),
                   [pick(x, y, w) for x, y, w in zip(merged.z, sigma.z, state.z)],
                   num.or_(state.nonempty, sigma.nonempty))


def tiled_forward(Q, K, V, *, scale, block: int, allowed=None, num=None, empty_rows: str = "error",
                  dropout: Dropout | None = None) -> TiledForward:
    """The forward procedure of the exact tiled algorithm.

    Q (n_q, d), K (n_k, d), V (n_k, v), key-block size ``block`` = b ≥ 1 → ``TiledForward`` with
    out (n_q, v), and per-row m, ℓ, lse (n_q each). For each row it starts from ⊥ and visits the
    ⌈n_k/b⌉ key blocks in order, recomputing that block's scores only: retained storage is the
    inputs, Y and 2 statistics per row; live workspace is one block's b scores and one summary.
    ``dropout``: None, or ``Dropout(keep (n_q, n_k), p)``: each block's value sum weights key j by
    r_ij = M_ij/(1 − p); m, ℓ and lse stay those of the undropped softmax.
    """
    num = resolve(num)
    b = validate.block_size(block)
    p, _, _ = _qk_inputs(Q, K, V, scale, allowed, num, empty_rows)
    return _forward(p, b, num, None if dropout is None else _dropout.factors(dropout, num, p.n_q, p.n_k))


def tiled_forward_from_scores(S, V, *, block: int, allowed=None, num=None, empty_rows: str = "error",
                              dropout: Dropout | None = None) -> TiledForward:
    """``tiled_forward`` from given scores S (n_q, n_k) — weights w = e^s in the exp domain."""
    num = resolve(num)
    b = validate.block_size(block)
    p = _scores_inputs(S, V, allowed, num, empty_rows)
    return _forward(p, b, num, None if dropout is None else _dropout.factors(dropout, num, p.n_q, p.n_k))


# ----------------------------------------------------------------------------------- reverse pass
#
# The reverse pass is written as small steps so that a proof can run each one symbolically on its
# own (``proofs/obligations/attention/grad_pairs.py``): ``_schedule`` (which pairs are visited),
# ``_row_visit``/``_pair_visit`` (which rows a row or a pair reads and writes), ``_row_stats`` (a
# row's frozen statistics and δ_i), ``_pair_terms`` (p_ij, γ_ij of one pair) and ``_pair_update``
# (that pair's chain-rule terms accumulated into dQ_i, dK_j, dV_j).


class RowStats(NamedTuple):
    """One query row's frozen forward statistics as the reverse pass reads them: m_ref (m_i, or 0
    for an empty row), l_safe (ℓ_i, or 1 for an empty row) and delta (δ_i = ⟨G_i, Y_i⟩)."""

    m_ref: Any
    l_safe: Any
    delta: Any


class PairTerms(NamedTuple):
    """One (i, j) pair's reverse-pass scalars: p = e^{s_ij − m_i}/ℓ_i (the frozen softmax weight
    p_ij; 0 when masked) and gamma = p·(⟨G_i, V_j⟩ − δ_i) (γ_ij)."""

    p: Any
    gamma: Any


def _dot_step(num: NumberSystem, acc, x, y):
    """One step of a dot product: acc + x·y."""
    return num.add(acc, num.mul(x, y))


def _dot(num: NumberSystem, xs: Sequence, ys: Sequence):
    """⟨xs, ys⟩ as the left fold of ``_dot_step`` from 0 (xs, ys: equal lengths)."""
    acc = num.zero()
    for x, y in zip(xs, ys):
        acc = _dot_step(num, acc, x, y)
    return acc


def _accumulate(num: NumberSystem, f, acc, term):
    """acc + term when the pair is allowed (flag f), else acc unchanged (a masked pair's term is
    never added: it may be NaN when the pair reads poison)."""
    return num.where(f, num.add(acc, term), acc)


def _schedule(n_q: int, n_k: int, block: int):
    """The reverse pass's visiting order: each query row i < n_q with its keys j < n_k, block by
    block (``block_ranges(n_k, block)``). Yields (i, keys) with keys an iterator over j."""
    for i in range(n_q):
        yield i, (j for J in block_ranges(n_k, block) for j in J)


def _gradient_buffers(num: NumberSystem, n_q: int, n_k: int, d: int, v: int) -> Gradients:
    """Zero accumulators: dq (n_q, d), dk (n_k, d), dv (n_k, v)."""
    zeros = lambda rows, cols: [[num.zero() for _ in range(cols)] for _ in range(rows)]  # noqa: E731
    return Gradients(zeros(n_q, d), zeros(n_k, d), zeros(n_k, v))


def _row_stats(num: NumberSystem, ne, m, l, g_row: Sequence, y_row: Sequence) -> RowStats:
    """Row i's frozen statistics: m, ℓ from the forward (guarded for an empty row: ne false) and
    δ_i = ⟨G_i, Y_i⟩ (g_row, y_row: length v)."""
    m_ref = num.where(ne, m, num.score_zero())
    l_safe = num.where(ne, l, num.one())
    return RowStats(m_ref, l_safe, _dot(num, g_row, y_row))


def _pair_terms(num: NumberSystem, s, f, row: RowStats, g_row: Sequence, v_row: Sequence) -> PairTerms:
    """p_ij = e^{s_ij − m_i}/ℓ_i with the frozen m_i, ℓ_i (no derivative of the max: ties are
    fine) and γ_ij = p_ij·(⟨G_i, V_j⟩ − δ_i); a masked pair (flag f false) gets p = 0.
    g_row: G_i (v); v_row: V_j (v)."""
    p = num.div(num.exp(num.where(f, num.score_sub(s, row.m_ref), num.score_neg_inf())), row.l_safe)
    dp = _dot(num, g_row, v_row)
    return PairTerms(p, num.mul(p, num.sub(dp, row.delta)))


def _pair_update(num: NumberSystem, f, t: PairTerms, c, q_row: list, k_row: list, g_row: list,
                 dq_row: list, dk_row: list, dv_row: list) -> None:
    """Accumulate pair (i, j)'s chain-rule terms in place: dQ_i += c·γ·K_j, dK_j += c·γ·Q_i,
    dV_j += p·G_i, entry by entry (O(1) extra live scalars; rebuilding a row would hold d or v).
    q_row, k_row, dq_row, dk_row: length d; g_row, dv_row: length v."""
    cg = num.mul(c, t.gamma)
    for r in range(len(dq_row)):
        dq_row[r] = _accumulate(num, f, dq_row[r], num.mul(cg, k_row[r]))
        dk_row[r] = _accumulate(num, f, dk_row[r], num.mul(cg, q_row[r]))
    for a in range(len(dv_row)):
        dv_row[a] = _accumulate(num, f, dv_row[a], num.mul(t.p, g_row[a]))


def _replayed(dropout: Dropout, num: NumberSystem, n_q: int, n_k: int) -> Callable:
    """The reverse pass's dropout factors: the forward's realised mask, replayed (r_ij = M_ij/(1 − p))."""
    return _dropout.factors(dropout, num, n_q, n_k)


def tiled_backward(Q, K, V, G, forward: TiledForward, *, scale, block: int, allowed=None, num=None,
                   empty_rows: str = "error", dropout: Dropout | None = None) -> Gradients:
    """The reverse procedure: gradients of Φ = Σ_ia G_ia Y_ia with respect to Q, K, V.

    Q (n_q, d), K (n_k, d), V (n_k, v), G (n_q, v), ``forward`` from ``tiled_forward`` with the same
    inputs → ``Gradients`` dq (n_q, d), dk (n_k, d), dv (n_k, v). For each row, δ_i = ⟨G_i, Y_i⟩;
    for each allowed key the score is recomputed and p_ij = e^{s_ij − m_i}/ℓ_i uses the *frozen*
    forward statistics (no derivative of the max is taken, so ties are fine);
    γ_ij = p_ij(⟨G_i, V_j⟩ − δ_i); dQ_i += c·γ_ij·K_j, dK_j += c·γ_ij·Q_i, dV_j += p_ij·G_i.
    ``dropout`` (the forward's, replayed): ⟨G_i, V_j⟩ becomes r_ij⟨G_i, V_j⟩ and dV_j += r_ij·p_ij·G_i;
    δ_i = ⟨G_i, Y_i⟩ with the dropped-out Y (= Σ_j p_ij r_ij ⟨G_i, V_j⟩).
    """
    num = resolve(num)
    b = validate.block_size(block)
    p, Qc, Kc = _qk_inputs(Q, K, V, scale, allowed, num, empty_rows, G=G)
    Gc, c = _coerce(num, G), num.const(scale)
    if len(forward.out) != p.n_q:
        raise ValueError(f"forward holds {len(forward.out)} rows, expected {p.n_q} (one per query row)")
    grads = _gradient_buffers(num, p.n_q, p.n_k, len(Qc[0]), len(p.V[0]))
    r = None if dropout is None else _replayed(dropout, num, p.n_q, p.n_k)
    _drive(num, p, c, Qc, Kc, Gc, forward, grads, b, r)
    return grads


def _drive(num: NumberSystem, p: _ScoredInputs, c, Qc: list, Kc: list, Gc: list, forward: TiledForward,
           grads: Gradients, block: int, r: Callable | None = None) -> None:
    """Visit the pairs in ``_schedule`` order: row i's statistics once, then each of its keys'
    pair updates (with the replayed dropout factor r(i, j) when r is given), accumulated into
    ``grads`` in place."""
    for i, keys in _schedule(p.n_q, p.n_k, block):
        row = _row_visit(num, p, forward, Gc, i)
        for j in keys:
            if r is None:
                _pair_visit(num, p, c, Qc, Kc, Gc, grads, row, i, j)
            else:
                _dropped_pair_visit(num, p, c, Qc, Kc, Gc, grads, row, i, j, r(i, j))


def _row_visit(num: NumberSystem, p: _ScoredInputs, forward: TiledForward, Gc: list, i) -> RowStats:
    """Row i's statistics, read from row i of the forward and of G (every subscript is i)."""
    ne = num.any_(p.flag(i, j) for j in range(p.n_k))  # a generator: no n-long flag list is held
    return _row_stats(num, ne, forward.m[i], forward.l[i], Gc[i], forward.out[i])


def _pair_visit(num: NumberSystem, p: _ScoredInputs, c, Qc: list, Kc: list, Gc: list, grads: Gradients,
                row: RowStats, i, j) -> None:
    """Pair (i, j): reads Q_i, K_j, V_j, G_i, s_ij and the flag of (i, j); writes dQ_i, dK_j, dV_j.
    Only an allowed pair contributes (a masked pair's K_j, V_j are never read into a result)."""
    f = p.flag(i, j)
    t = _pair_terms(num, p.score(i, j), f, row, Gc[i], p.V[j])
    _pair_update(num, f, t, c, Qc[i], Kc[j], Gc[i], grads.dq[i], grads.dk[j], grads.dv[j])


def _dropped_pair_visit(num: NumberSystem, p: _ScoredInputs, c, Qc: list, Kc: list, Gc: list, grads: Gradients,
                        row: RowStats, i, j, rij) -> None:
    """``_pair_visit`` with dropout's replayed factor r_ij: dP_ij = r_ij⟨G_i, V_j⟩ (the pair's terms
    see V_j scaled by r_ij), γ_ij = p_ij(dP_ij − δ_i), and V's pullback dV_j += r_ij·p_ij·G_i."""
    f = p.flag(i, j)
    t = _pair_terms(num, p.score(i, j), f, row, Gc[i], [num.mul(rij, x) for x in p.V[j]])
    _pair_update(num, f, t._replace(p=num.mul(rij, t.p)), c, Qc[i], Kc[j], Gc[i], grads.dq[i], grads.dk[j],
                 grads.dv[j])
