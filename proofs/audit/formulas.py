r"""Display formulas of the items, in TeX, rendered in the report by the vendored KaTeX.

``FORMULAS`` maps an item id to the formulas that state it, in the page's notation (our layout): the
summary and its merge, the tiled procedure's reverse updates, the exactness and memory claims, and
the speculative step's rule and laws. Each id must be a registered item (``unknown_ids`` finds the
ones that are not; a test requires none and a formula for every theorem-page item).
"""
from __future__ import annotations

__all__ = ["FORMULAS", "formulas_for", "unknown_ids"]

FORMULAS: dict[str, tuple[str, ...]] = {
    "DEF-SUMMARY": (
        r"\Sigma_i(S) = \bigl(m_i(S),\ \ell_i(S),\ z_i(S)\bigr),\quad m_i(S) = \max_{j\in S} s_{ij},\quad "
        r"\ell_i(S) = \sum_{j\in S} e^{s_{ij}-m_i(S)},\quad z_i(S) = \sum_{j\in S} e^{s_{ij}-m_i(S)}\,v_j",
        r"\Sigma_i(S)\star\Sigma_i(T) = (m',\ \ell',\ z'),\quad m' = \max\bigl(m_i(S), m_i(T)\bigr),\quad "
        r"\ell' = e^{m_i(S)-m'}\ell_i(S) + e^{m_i(T)-m'}\ell_i(T),\quad z' = e^{m_i(S)-m'}z_i(S) + e^{m_i(T)-m'}z_i(T)",
    ),
    "ALG-TILED": (
        r"J_t = \{(t-1)b+1,\ \dots,\ \min(tb, n)\},\quad t = 1,\dots,\lceil n/b\rceil,\qquad Y_i = z_i/\ell_i",
        r"p_{ij} = \frac{e^{s_{ij}-m_i}}{\ell_i},\quad \delta_i = \sum_a G_{ia}Y_{ia},\quad "
        r"\gamma_{ij} = p_{ij}\Bigl(\sum_a G_{ia}V_{ja} - \delta_i\Bigr)",
        r"(dQ)_{ir} \mathrel{+}= c\,\gamma_{ij}K_{jr},\quad (dK)_{jr} \mathrel{+}= c\,\gamma_{ij}Q_{ir},\quad "
        r"(dV)_{ja} \mathrel{+}= p_{ij}G_{ia}",
    ),
    "THM-EXACT": (
        r"Y_i = \frac{\sum_{j\in A_i} e^{c\,Q_i K_j^{\top}}\,V_j}{\sum_{j\in A_i} e^{c\,Q_i K_j^{\top}}}",
        r"\Phi(Q,K,V) = \sum_{i=1}^{n}\sum_{a=1}^{v} G_{ia}Y_{ia},\qquad (dQ, dK, dV) = "
        r"(\nabla_Q\Phi,\ \nabla_K\Phi,\ \nabla_V\Phi)",
    ),
    "THM-MEMORY": (
        r"\text{operations } O\bigl(n^2(d+v)\bigr),\quad \text{retained } O\bigl(n(d+v)\bigr),\quad "
        r"\text{extra live } O(b+v),\quad \text{no } n\times n \text{ array}",
    ),
    "REM-NOT-IO": (
        r"s_{ij} - m_i \le 0 \quad\text{(exact reals; rounding may still underflow)}",
    ),
    "EXT-EMPTY-ROW": (
        r"A_i = \emptyset \;\Rightarrow\; Y_i = 0,\quad m_i = -\infty,\quad \ell_i = 0,\quad "
        r"\operatorname{lse}_i = -\infty,\quad dQ_i = 0",
    ),
    "EXT-DROPOUT": (
        r"r_{ij} = \frac{M_{ij}}{1-p},\quad Y_i = \frac{\sum_{j\in A_i} e^{s_{ij}-m_i}\,r_{ij}\,V_j}{\ell_i},\quad "
        r"dV_j = \sum_i p_{ij}\,r_{ij}\,G_i,\quad \gamma_{ij} = p_{ij}\bigl(r_{ij}\,G_i V_j^\top - \delta_i\bigr),\quad "
        r"\delta_i = G_i Y_i^\top",
    ),
    "EXT-MERGE-COMM": (r"\Sigma(S)\star\Sigma(T) = \Sigma(T)\star\Sigma(S)",),
    "EXT-ANY-ORDER": (
        r"\bot\star x = x\star\bot = x,\quad (x\star y)\star w = x\star(y\star w),\quad "
        r"\Sigma(S)\star\Sigma(T) = \Sigma(S\cup T)\ \ (S\cap T=\emptyset)",
    ),
    "EXT-EXP2": (
        r"e^{x} = 2^{x\log_2 e},\qquad \operatorname{lse}_i = \ln 2\cdot\operatorname{lse}^{(2)}_i,\qquad "
        r"dQ = \ln 2\cdot dQ^{(2)},\quad dK = \ln 2\cdot dK^{(2)}",
    ),
    "EXT-FP-SAFETY": (
        r"\operatorname{fl}(s - m) \le 0,\quad e^{m - m'} \le 1,\quad \ell \ge 1,\quad "
        r"(-\infty) - (-\infty) = \mathrm{NaN}",
    ),
    "SPEC-DEF-STEP": (
        r"\text{accept } x \iff u\cdot p_{\mathrm{draft}}(x) < p_{\mathrm{target}}(x),\qquad "
        r"\text{else emit } y \sim \frac{\max(0,\ p_{\mathrm{target}} - p_{\mathrm{draft}})}"
        r"{\sum_{y'} \max(0,\ p_{\mathrm{target}}(y') - p_{\mathrm{draft}}(y'))}",
    ),
    "SPEC-THM-STEP": (
        r"P(\text{emit } y) = \min\bigl(p_{\mathrm{target}}(y), p_{\mathrm{draft}}(y)\bigr) + "
        r"\max\bigl(0, p_{\mathrm{target}}(y) - p_{\mathrm{draft}}(y)\bigr) = p_{\mathrm{target}}(y)",
    ),
    "SPEC-THM-CYCLE": (
        r"P(N = n) = \Bigl(\prod_{i\le n}\beta_i\Bigr)(1-\beta_{n+1})\ \ (n<k),\qquad "
        r"P(N = k) = \prod_{i\le k}\beta_i,\qquad \beta_i = \sum_x \min(p_{\mathrm{target}}, p_{\mathrm{draft}})",
    ),
    "SPEC-THM-TOKENS": (
        r"E[\text{tokens}] = \frac{1-\alpha^{k+1}}{1-\alpha},\qquad "
        r"\text{speed-up} = \frac{1-\alpha^{k+1}}{(1-\alpha)(kc+1)}",
    ),
}


def formulas_for(item_id: str) -> tuple[str, ...]:
    return FORMULAS.get(item_id, ())


def unknown_ids(items) -> list[str]:
    """Formula keys that are not registered items."""
    return sorted(k for k in FORMULAS if k not in items)
