"""A log-domain z3 number system: scores are reals and exp is an uninterpreted function E.

It keeps the exp-domain substitution (A-EXP-ISO) out of the proof: an obligation adds ground
instances of the homomorphism law E(x)·E(y) = E(x + y), E(0) = 1 and E(x) > 0 (assumption A-EXP-HOM)
for the arguments the reference actually applied E to (recorded in ``exp_args``), case by case over the
order of the maxima. A ``sat`` answer is only a model of those instances, not of the real exp, so a
counterexample must be re-checked with a real exponential before it counts
(``proofs.obligations.attention.logdom``).
"""
from __future__ import annotations

import itertools

import z3

from flashproof.verified.expdomain import Z3ExpNum

__all__ = ["LogZ3Num"]


class LogZ3Num(Z3ExpNum):
    """z3 reals in the ordinary (log) domain; conditions and ``where`` as in ``Z3ExpNum``."""

    name = "z3-logdomain"

    def __init__(self):
        super().__init__()
        self.E = z3.Function("E", z3.RealSort(), z3.RealSort())
        self.exp_args: list = []

    # scores are plain reals here: undo the exp-domain score operations
    def to_score(self, x):
        return x

    def score_const(self, x):
        if x == float("-inf"):
            raise ValueError("the log-domain z3 system has no −∞; use nonempty summaries")
        return self.const(x)

    def score_sub(self, a, b):
        return a - b

    def score_add(self, a, b):
        return a + b

    def exp(self, s):
        self.exp_args.append(s)
        return self.E(s)

    def log(self, x):
        raise NotImplementedError("log is not modelled in the log-domain z3 system")

    def instances(self) -> list:
        """Ground instances of A-EXP-HOM over the recorded arguments."""
        E, args = self.E, self.exp_args
        out = [E(z3.RealVal(0)) == 1] + [E(x) > 0 for x in args]
        out += [E(x) * E(y) == E(x + y) for x, y in itertools.combinations_with_replacement(args, 2)]
        return out
