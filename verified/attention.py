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

__all__ = ["Dropout", "Summary", "BOTTOM", "TiledForward", "Gradients", "summarize", "merge", "block_ranges",
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
    neg_inf = num.score_neg_inf()
    m = neg_inf
    for s, f in zip(scores, flags):
        m = num.score_max(m, num.where(f, s, neg_inf))
    nonempty = num.any_(flags)
    m_ref = num.where(nonempty, m, num.score_zero())  # ⊥ has no max: never subtract −∞ from −∞
    l = num.zero()
    z = [num.zero() for _ in range(v)]
    for t, (s, vj, f) in enumerate(zip(scores, values, flags)):
        p = num.exp(num.where(f, num.score_sub(s, m_ref), neg_inf))  # e^{s−m} ≤ 1, or 0 when masked
        l = num.add(l, p)
        pv = p if drop is None else num.mul(p, drop[t])  # dropout weights the value row, not ℓ
        # a masked key's value row is never read: 0·NaN would be NaN
        z = [num.where(f, num.add(za, num.mul(pv, va)), za) for za, va in zip(z, vj)]
    return Summary(m, l, z, nonempty)


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
        dot = num.zero()
        for qa, ka in zip(Qc[i], Kc[j]):
            dot = num.add(dot, num.mul(qa, ka))
        return num.to_score(num.mul(c, dot))

    return _ScoredInputs(n_q, n_k, score, _coerce(num, V), flag), Qc, Kc


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
    return _dense(p, num, None if dropout is None else _dropout.factors(dropout, num, p.n_q, p.n_k))


def dense_attention_from_scores(S, V, *, allowed=None, num=None, empty_rows: str = "error",
                                dropout: Dropout | None = None) -> list:
    """``dense_attention`` from given scores S (n_q, n_k) — weights w = e^s in the exp domain."""
    num = resolve(num)
    p = _scores_inputs(S, V, allowed, num, empty_rows)
    return _dense(p, num, None if dropout is None else _dropout.factors(dropout, num, p.n_q, p.n_k))


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
            drop = None if r is None else [r(i, j) for j in J]
            sigma = summarize([p.score(i, j) for j in J], [p.V[j] for j in J], num, allowed=flags, drop=drop)
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
    d, v = len(Qc[0]), len(p.V[0])
    dq = [[num.zero() for _ in range(d)] for _ in range(p.n_q)]
    dk = [[num.zero() for _ in range(d)] for _ in range(p.n_k)]
    dv = [[num.zero() for _ in range(v)] for _ in range(p.n_k)]
    neg_inf = num.score_neg_inf()
    rf = None if dropout is None else _replayed(dropout, num, p.n_q, p.n_k)
    for i in range(p.n_q):
        ne = num.any_(p.flag(i, j) for j in range(p.n_k))  # a generator: no n-long flag list is held
        m_ref = num.where(ne, forward.m[i], num.score_zero())
        l_safe = num.where(ne, forward.l[i], num.one())
        delta = num.zero()
        for ga, ya in zip(Gc[i], forward.out[i]):
            delta = num.add(delta, num.mul(ga, ya))
        for J in block_ranges(p.n_k, b):
            for j in J:
                f = p.flag(i, j)
                pij = num.div(num.exp(num.where(f, num.score_sub(p.score(i, j), m_ref), neg_inf)), l_safe)
                dp = num.zero()
                for ga, va in zip(Gc[i], p.V[j]):
                    dp = num.add(dp, num.mul(ga, va))
                pv = pij
                if rf is not None:  # dP_ij = r_ij⟨G_i, V_j⟩; V's pullback carries r_ij p_ij
                    rij = rf(i, j)
                    dp, pv = num.mul(rij, dp), num.mul(rij, pij)
                gamma = num.mul(pij, num.sub(dp, delta))
                cg = num.mul(c, gamma)
                # only allowed pairs contribute (a masked pair's K_j, V_j are never read)
                # entry by entry, in place: O(1) extra live scalars (rebuilding a row would hold d or v)
                for r in range(d):
                    dq[i][r] = num.where(f, num.add(dq[i][r], num.mul(cg, Kc[j][r])), dq[i][r])
                    dk[j][r] = num.where(f, num.add(dk[j][r], num.mul(cg, Qc[i][r])), dk[j][r])
                for a in range(v):
                    dv[j][a] = num.where(f, num.add(dv[j][a], num.mul(pv, Gc[i][a])), dv[j][a])
    return Gradients(dq, dk, dv)
