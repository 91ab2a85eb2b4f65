"""The assumptions obligations rest on. Nothing checks them; the audit lists, for every item, the
assumptions it depends on (transitively), the way Lean's ``#print axioms`` does."""
from .registry import assumption

assumption("A-EXP-ISO", "exp is an order isomorphism onto the non-negative reals", statement="""
φ(s) = e^s, with φ(−∞) = 0, is a bijection from ℝ ∪ {−∞} onto ℝ≥0 that preserves order and turns
+ into · and − into ÷. Proofs in the exp domain therefore represent a score s by its weight w = e^s:
s − m becomes w / W, max stays max, m + log ℓ becomes W·ℓ, and no exponential reaches the solver.
""")

assumption("A-EXP-HOM", "exp turns sums into products", statement="""
E(x)·E(y) = E(x + y), E(0) = 1 and E(x) > 0 for real x — used as ground instances over the arguments
the reference applies exp to, by the log-domain cross-check that avoids the exp-domain substitution.
""")

assumption("A-NONEMPTY-ROW", "every query row has an allowed key (theorem mode)", statement="""
The exactness and memory theorems quantify over nonempty allowed-key sets A_i. Obligations about
them assume a row has at least one allowed key; rows without one are governed by the separate
empty-row extension (EXT-EMPTY-ROW).
""")

assumption("A-UNIT-COST", "unit-cost real arithmetic", statement="""
Counting model of the memory/arithmetic theorem: one scalar arithmetic operation, one exponential,
one comparison and one mask-membership query each cost 1; one stored scalar costs 1 unit of storage.
The counting backend counts exactly these events of the reference.
""", source="004_b37f59f788102f1f.txt")

assumption("A-MASK-ACCESSOR", "the mask is a read-only O(1) accessor owned by the caller", statement="""
Membership of key j in A_i is read on demand through a predicate; whatever represents the mask is the
caller's input storage, not workspace of the algorithm.
""", source="004_b37f59f788102f1f.txt")

assumption("A-FP-IEEE", "z3's FloatingPoint theory models the kernel's IEEE-754 arithmetic", statement="""
fp16 = FPSort(5, 11), bf16 = FPSort(8, 8), fp32 = FPSort(8, 24); + − × ÷ round to nearest, ties to
even; ±0, ±∞ and NaN behave as IEEE 754 prescribes. A kernel that accumulates in another format or
rounding mode is not covered.
""")

assumption("A-FP-EXP", "the device exponential, as modelled in the floating-point checks", statement="""
z3 has no floating-point exp, so each exp(x) is a fresh value constrained only by: exp(NaN) is NaN;
exp(−∞) = 0; exp(0) = 1 exactly; 0 ≤ exp(x) ≤ 1 for x ≤ 0; exp(x) ≥ 1 for finite x ≥ 0. Accuracy is
not assumed (no ulp bound): the safety checks need only these sign, range and special-value facts.
""")

assumption("A-SOLVER-TRUST", "the checkers are trusted", statement="""
A z3 `unsat` (negated claim) is taken as a proof, a z3 `sat` model is re-checked only where stated,
and sympy reducing a difference to 0 is taken as an identity. The versions are recorded in every
result; a second independent checker is not run.
""")
