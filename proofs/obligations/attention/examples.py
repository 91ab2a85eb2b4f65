"""The streaming-softmax worked examples of seed ``000_e62e61cc03dea00a.txt`` (EX-STREAMING-000),
recomputed by running ``summarize`` and ``merge`` on exact sympy numbers: the printed 3-decimal values
must match, and the streaming ℓ must equal the one-shot sum exactly."""
from __future__ import annotations

from unittest.mock import patch

import sympy as sp

from flashproof.verified import attention as att
from flashproof.verified.numbers import SympyNum

from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.engine.core import Outcome, control, obligation

#: (block 1 scores, block 2 scores, printed ℓ after block 1, printed final ℓ, printed m after each block)
EXAMPLES = [((2, 1), (3, 0), "1.368", "1.553", (2, 3)),
            ((1, 4), (2, 2, 5), "1.050", "1.486", (4, 5))]


def _run_example(first, second, l1_txt, l2_txt, ms):
    N = SympyNum()
    s1, s2 = [sp.Integer(x) for x in first], [sp.Integer(x) for x in second]
    sig1 = att.summarize(s1, [[1]] * len(s1), N)
    sig = att.merge(sig1, att.summarize(s2, [[1]] * len(s2), N), N)
    m_all = max(first + second)
    one_shot = sum(sp.exp(sp.Integer(x - m_all)) for x in first + second)
    half_ulp = sp.Rational(1, 2000)
    facts = {"m1": sp.simplify(sig1.m - ms[0]) == 0, "m2": sp.simplify(sig.m - ms[1]) == 0,
             "l1_printed": abs(sp.N(sig1.l, 30) - sp.Rational(l1_txt)) <= half_ulp,
             "l2_printed": abs(sp.N(sig.l, 30) - sp.Rational(l2_txt)) <= half_ulp,
             "streaming_equals_one_shot": sp.simplify(sig.l - one_shot) == 0}
    bad = [k for k, ok in facts.items() if not ok]
    if bad:
        return {"scores": [list(first), list(second)], "failed": bad, "l1": str(sp.N(sig1.l, 8)),
                "l2": str(sp.N(sig.l, 8)), "one_shot": str(sp.N(one_shot, 8))}
    return None


@obligation("ATT-STREAMING-EXAMPLES", checks=["EX-STREAMING-000"], bounds={"examples": 2}, solver="sympy",
            assumptions=["A-SOLVER-TRUST"], scope="unbounded", why_unbounded="the item states these two examples only")
def streaming_examples(ctx):
    """{2,1},{3,0} → ℓ 1.368 then 1.553; {1,4},{2,2,5} → 1.050 then 1.486; each equals the one-shot sum."""
    for ex in EXAMPLES:
        bad = _run_example(*ex)
        if bad is not None:
            return Outcome("refuted", counterexample=bad, solver="sympy", detail="worked example does not recompute")
    return Outcome("proved", solver="sympy", detail="both examples: printed values within half a unit; exact equality")


@control("ATT-STREAMING-EXAMPLES/no-rescale", of="ATT-STREAMING-EXAMPLES",
         bug="merge adds ℓ without the e^{m−m'} rescale")
def streaming_examples_no_rescale(ctx):
    with patch.object(att, "merge", mutants.merge_no_rescale):
        return streaming_examples(ctx)
