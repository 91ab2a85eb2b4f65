"""Items of seed ``000_e62e61cc03dea00a.txt`` on speculative decoding, with our stated policies, each
with the obligations (``flashproof.proofs.obligations.speculative``) that check it. ``p_target`` is
the large model's distribution, ``p_draft`` the proposer's (the papers disagree on which is p and
which is q)."""
from .registry import assumption, item

SEED = "000_e62e61cc03dea00a.txt"
LIT = ("Statement: Literature-sourced", "Proof: Not applicable")
OURS = ("Statement: ours (extension, not in the seed)",)

assumption("A-UNIFORM", "the sampler's uniforms are independent and uniform on [0, 1)", statement="""
Each accept test, residual draw, bonus draw and draft draw consumes its own uniform, independent of the
others and of the tables. The branching backend computes laws under exactly this model (an interval per
uniform); real generators (Philox, Mersenne) are trusted to approximate it.
""")

assumption("A-IID-ACCEPT", "independent acceptance with a fixed rate α", statement="""
For the economics only: every drafted token is accepted with the same probability α, independently of
the others (β_i = α for every position and prefix). Real drafts violate this; the formula is then a model.
""", source=SEED)

assumption("A-LINEAR-SUM", "finite sums are linear", statement="""
Σ_x (a_x + b_x) = Σ_x a_x + Σ_x b_x and Σ_x c·a_x = c·Σ_x a_x for any finite vocabulary. Used to lift the
per-token identities to the whole vocabulary without unrolling it (the step for every V).
""")

item("SPEC-DEF-STEP", "definition", "One speculative rejection step", source=SEED, provenance=LIT, statement="""
Given a drafted token x with draft probability p_draft(x) and target probability p_target(x): accept x with
probability min(1, p_target(x)/p_draft(x)); otherwise emit a token drawn from max(0, p_target − p_draft)
normalised to sum 1. Our code decides acceptance by u·p_draft(x) < p_target(x) for a uniform u.
""", checked_by=("SPEC-ACCEPT-LEMMA", "SPEC-DRAW-STEP", "SPEC-STEP-EXACT"), assumptions=("A-UNIFORM",))

item("SPEC-THM-STEP", "theorem", "One step emits exactly the target's distribution", source=SEED, provenance=LIT,
     uses=("SPEC-DEF-STEP",), statement="""
If x is drawn from p_draft, the token the step emits has distribution p_target, for every vocabulary size:
the accepted mass at y is min(p_target(y), p_draft(y)), rejection happens with probability
Σ max(0, p_target − p_draft), and the residual draw restores the difference.
""", checked_by=("SPEC-ACCEPT-LEMMA", "SPEC-DRAW-STEP", "SPEC-STEP-COMPOSE", "SPEC-STEP-SYMBOLIC", "SPEC-STEP-EXACT"),
     assumptions=("A-UNIFORM", "A-LINEAR-SUM"))

item("SPEC-ALG-CYCLE", "algorithm", "A verification cycle", source=SEED, provenance=LIT, uses=("SPEC-DEF-STEP",),
     statement="""
The draft proposes k tokens one after another, each from its distribution given the prefix so far. The target
scores all k+1 prefixes at once. Steps run left to right and stop at the first rejection, which emits the
residual draw; if all k are accepted, one more token is drawn from the target's distribution after all k.
""", checked_by=("SPEC-CYCLE-LAW",))

item("SPEC-THM-CYCLE", "theorem", "A cycle keeps the target's sequence law; the law of the accepted count",
     source=SEED, provenance=("Statement: Literature-sourced", "Proof: AI-generated"), uses=("SPEC-THM-STEP", "SPEC-ALG-CYCLE"),
     statement="""
The tokens a cycle emits, continued by plain target sampling up to k+1 tokens, have exactly the target's
autoregressive law. The number N of accepted drafts satisfies P(N = n) = (Π_{i≤n} β_i)(1 − β_{n+1}) for
n < k and P(N = k) = Π_{i≤k} β_i, with β_i = Σ_x min(p_target, p_draft) at position i (for prefix-dependent
distributions: the same products summed over the drafted prefixes).
""", checked_by=("SPEC-CYCLE-LAW", "SPEC-ACCEPT-COUNT", "SPEC-ONE-HOT-CYCLE"), assumptions=("A-UNIFORM",))

item("SPEC-THM-TOKENS", "theorem", "Expected tokens per cycle, speed-up and the choice of k", source=SEED,
     provenance=("Statement: Literature-sourced", "Proof: AI-generated"), uses=("SPEC-THM-CYCLE",), statement="""
With independent acceptance rate α, a cycle yields (1 − α^{k+1})/(1 − α) tokens in expectation; with a draft
costing c target forwards per token the speed-up is that over k·c + 1. One more draft adds α^{k+1} expected
tokens for c more cost, and raises the speed-up exactly when α^{k+1}/c exceeds the current speed-up.
""", checked_by=("SPEC-TOKENS-PER-CYCLE", "SPEC-MARGINAL-K"), assumptions=("A-IID-ACCEPT",))

item("SPEC-EX-ECON", "example", "The seed's worked numbers", source=SEED, provenance=LIT, uses=("SPEC-THM-TOKENS",),
     statement="""
α = 0.8, k = 4, c = 0.1: 3.36 tokens per cycle, cost 1.4, speed-up 2.4×. α = 0.5: 1.94 tokens, 1.38×.
p_draft(A) = 0.5, p_target(A) = 0.3: acceptance 0.6. α = 0.7, k = 3, c = 0.15: 2.53 tokens, cost 1.45, 1.75×.
""", checked_by=("SPEC-ECON-NUMBERS",), assumptions=("A-IID-ACCEPT",))

item("SPEC-EXT-POLICY", "extension", "Stated policies: p_draft(x) = 0, empty residual, one-hot drafts, greedy",
     provenance=OURS, uses=("SPEC-DEF-STEP",), statement="""
No division is formed: p_draft(x) = 0 accepts iff p_target(x) > 0, and a token with p_target(x) = 0 is never
accepted, even for u = 0. An empty residual (p_target = p_draft) draws from p_target. Missing draft
probabilities mean one-hot drafts, for which the step still emits p_target for any fixed x. Temperature 0
is a separate branch: accept iff the draft is the target's first argmax.
""", checked_by=("SPEC-STEP-EXACT", "SPEC-ONE-HOT-CYCLE", "SPEC-GREEDY-TIES"), assumptions=("A-UNIFORM",))

item("SPEC-EXT-QUANTISED", "extension", "The float draw's exact law (fixed point, floor)", provenance=OURS,
     uses=("SPEC-DEF-STEP",), statement="""
On floats the inverse-CDF draw fixes each weight to W_y = ⌊w_y·2^40⌋ and the uniform to U = ⌊u·2^31⌋ and
returns the first y with ⌊U·T/2^31⌋ < C_y (T = ΣW, C the running sums), so its law is exactly
P(y) = (⌈C_y·2^31/T⌉ − ⌈C_{y−1}·2^31/T⌉)/2^31, within 2^−31 of W_y/T and independent of summation order.
Both roundings are floors: rounding to nearest instead gives a different law.
""", checked_by=("SPEC-QUANTISED-DRAW",), assumptions=("A-UNIFORM",))
