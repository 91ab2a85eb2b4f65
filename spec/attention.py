"""Items of the theorem page ``004_b37f59f788102f1f.txt`` (exact tiled attention) and our
extensions of it, each with the obligations (``flashproof.proofs.obligations.attention``) that
check it."""
from .registry import item

PAGE = "004_b37f59f788102f1f.txt"
LIT = ("Statement: Literature-sourced", "Proof: Not applicable")
LIT_AI = ("Statement: Literature-sourced", "Proof: AI-generated")
OURS = ("Statement: ours (extension, not on the page)",)

FP_FORMATS = ("fp16", "bf16", "fp32")

item("DEF-SUMMARY", "definition", "Stable summary of an attention key block", source=PAGE, provenance=LIT,
     statement="""
For one query row and a nonempty key set S, the summary Σ(S) = (m, ℓ, z) holds the largest score in S,
the sum over S of e^{s_j − m}, and the same exponentially weighted sum of the value rows. The empty set
gets a separate symbol ⊥ with no numbers. Two summaries of disjoint sets combine by ⋆: take the larger
maximum m', rescale each side's ℓ and z by e^{(its m) − m'} and add. z/ℓ is the attention output on S.
""",
     checked_by=("ATT-MERGE-IDENTITY", "ATT-MERGE-UNION", "ATT-SUMMARIZE-ANY-B", "ATT-SUMMARIZE-BLOCK"),
     assumptions=("A-EXP-ISO",))

item("ALG-TILED", "algorithm", "Exact tiled softmax attention with block-recomputed reverse pass", source=PAGE,
     provenance=LIT, uses=("DEF-SUMMARY",), statement="""
Keys are cut into consecutive blocks of b (the last may be shorter). Forward, per query row: start at ⊥;
for each block take its allowed keys I; skip the block when I is empty, copy Σ(I) when the state is ⊥,
otherwise merge with ⋆; finally output z/ℓ and keep m and ℓ. Reverse: with the frozen m, ℓ recompute each
allowed score, p = e^{s−m}/ℓ, γ = p(⟨G_i, V_j⟩ − ⟨G_i, Y_i⟩), and accumulate c·γ·K_j into dQ_i, c·γ·Q_i
into dK_j and p·G_i into dV_j. No n×n array is stored.
""",
     checked_by=("ATT-PARTITION", "ATT-SUMMARIZE-ANY-B", "ATT-SUMMARIZE-BLOCK", "ATT-TILED-STEP",
                 "ATT-GRAD-SCHEDULE"))

item("THM-EXACT", "theorem", "The tiled forward and its recomputed reverse pass are exact", source=PAGE,
     provenance=LIT_AI, uses=("DEF-SUMMARY", "ALG-TILED"), statement="""
For every n, d, v, block size b ≥ 1, scale c and nonempty allowed sets, the tiled forward returns exactly
the dense masked softmax attention rows, and the reverse procedure returns exactly the gradients of
Φ = Σ G∘Y with respect to Q, K and V, also when the row maximum is tied (the maxima are frozen shifts).
""",
     checked_by=("ATT-MERGE-UNION", "ATT-TILED-STEP", "ATT-TILED-BASE-FINAL", "ATT-PARTITION",
                 "ATT-TILED-BOUNDED", "ATT-TILED-MASKS", "ATT-GRAD-SCHEDULE", "ATT-GRAD-SOFTMAX", "ATT-GRAD-CHAIN",
                 "ATT-GRAD", "ATT-GRAD-ROUTING"),
     assumptions=("A-NONEMPTY-ROW",))

item("THM-MEMORY", "theorem", "Linear retained memory, O(b+v) workspace and quadratic arithmetic", source=PAGE,
     provenance=LIT_AI, uses=("ALG-TILED", "THM-EXACT"), statement="""
Counting unit-cost scalar operations and stored scalars, both procedures retain O(n(d+v)) input and output
scalars, hold at most O(b+v) extra live scalars (one block's scores and one summary), perform
O(n²(d+v)) operations, and never allocate an n×n score or probability array. Mask storage is the caller's.
""",
     checked_by=("ATT-MEMORY-FWD", "ATT-MEMORY-BWD"),
     assumptions=("A-UNIT-COST", "A-MASK-ACCESSOR"))

item("REM-NOT-IO", "remark", "The workspace count is not a hardware I/O bound", source=PAGE, provenance=LIT,
     uses=("THM-MEMORY",), statement="""
The scalar count says nothing about HBM/SRAM traffic or speed. Subtracting the maximum makes every exponent
argument non-positive, but rounded arithmetic may still underflow, and different accumulation orders can give
different bits. Checked parts: the non-positive exponent arguments (also after rounding) and a witness that
two merge orders round differently.
""",
     checked_by=tuple(f"ATT-FP-SHIFT-{f}" for f in FP_FORMATS) + ("ATT-FP-MERGE-ORDER-fp16",))

item("EXT-EMPTY-ROW", "extension", "A row with no allowed key gives 0, LSE −∞ and zero gradients", provenance=OURS,
     uses=("ALG-TILED",), statement="""
The page asserts nothing for an all-masked row. We define: output 0, log-sum-exp −∞, m = −∞, ℓ = 0 and zero
gradient contributions, never NaN; the empty state ⊥ and every (−∞) − (−∞) are guarded.
""",
     checked_by=("ATT-EMPTY-ROW",) + tuple(f"ATT-FP-GUARD-{f}" for f in FP_FORMATS))

item("EXT-MERGE-COMM", "extension", "Merging summaries is commutative", provenance=OURS, uses=("DEF-SUMMARY",),
     statement="Σ(S) ⋆ Σ(T) = Σ(T) ⋆ Σ(S) for any two summaries, coordinate by coordinate.",
     checked_by=("ATT-MERGE-COMM",), assumptions=("A-EXP-ISO",))

item("EXT-ANY-ORDER", "extension", "Any partition of the keys, merged in any order, gives the same summary",
     provenance=OURS, uses=("DEF-SUMMARY", "EXT-MERGE-COMM"), statement="""
⋆ is associative and commutative with two-sided identity ⊥, and merging summaries of disjoint sets gives the
summary of their union; so splitting the keys into any parts (split-KV, multi-GPU) and merging the partial
summaries in any order or tree shape gives exactly Σ of all keys.
""",
     checked_by=("ATT-MERGE-ASSOC", "ATT-MERGE-ASSOC-LOGDOM", "ATT-MERGE-COMM", "ATT-MERGE-IDENTITY",
                 "ATT-MERGE-UNION"),
     assumptions=("A-EXP-ISO",))

item("EXT-EXP2", "extension", "Base-2 exponentials with a folded log2(e) are the natural-exp algorithm",
     provenance=OURS, uses=("THM-EXACT",), statement="""
Kernels scale scores by c·log2(e) and use exp2/log2. The outputs are unchanged, the stored base-2
log-sum-exp times ln 2 is the natural one, and gradients taken with the folded scale must be multiplied by
ln 2 to give dQ and dK.
""",
     checked_by=("ATT-EXP2",))

item("EXT-FP-SAFETY", "extension", "Floating-point safety of the online update (fp16, bf16, fp32)",
     provenance=OURS, uses=("ALG-TILED",), statement="""
In IEEE arithmetic: after subtracting the running maximum every exponent argument is ≤ 0 and no rescale
factor exceeds 1; ℓ ≥ 1 once a row has an allowed key; (−∞) − (−∞) is NaN, so the empty state needs its
guard, and with the guard no update or final division produces NaN.
""",
     checked_by=tuple(f"ATT-FP-{k}-{f}" for k in ("SHIFT", "ELL", "NAN-WITNESS", "GUARD") for f in FP_FORMATS),
     assumptions=("A-FP-IEEE", "A-FP-EXP"))

item("EX-STREAMING-000", "example", "The streaming-softmax worked examples (1.553 and 1.486)",
     source="000_e62e61cc03dea00a.txt", provenance=("Statement: Literature-sourced",), uses=("DEF-SUMMARY",),
     statement="""
Scores {2, 1} then {3, 0}: after the first block m = 2, ℓ ≈ 1.368; after the second m = 3, ℓ ≈ 1.553, equal
to the one-shot sum. Scores {1, 4} then {2, 2, 5}: ℓ ≈ 1.050, then m = 5, ℓ ≈ 1.486, equal to the one-shot sum.
""",
     checked_by=("ATT-STREAMING-EXAMPLES",))

item("EXT-ORACLE-DENSE", "extension", "The oracle's dense formula is the theorem's right-hand side", provenance=OURS,
     uses=("THM-EXACT",), statement="""
The reference's dense_attention — the formula the fuzzer and the tests compare kernels with — returns, for
every query row with an allowed key, Σ_{j∈A_i} e^{s_ij} V_j / Σ_{j∈A_i} e^{s_ij} (masked keys in neither sum,
any shift of the scores), and 0 for a row with none; also when the number of queries and keys differ.
""",
     checked_by=("ATT-ORACLE-DENSE",), assumptions=("A-EXP-ISO",))

item("EXT-ORACLE-NUMBERS", "extension", "The oracle's number systems round or enclose as they say", provenance=OURS,
     statement="""
Against exact rational arithmetic: the double-precision system rounds +, −, ×, ÷ and constants correctly and
is within one ulp for exp and log; the 60-digit mpmath system is within one ulp of its precision; the
interval system encloses the exact result — also for inputs that are not binary fractions (1/3, 0.1) and
through the whole reference's forward and reverse pass.
""",
     checked_by=("ATT-ORACLE-FLOAT", "ATT-ORACLE-INTERVAL"))

item("EXT-FP-POISON", "extension", "Poison in unread entries cannot reach a result", provenance=OURS,
     uses=("ALG-TILED", "EXT-EMPTY-ROW"), statement="""
In IEEE arithmetic, a NaN or infinity in an entry that no allowed pair reads — a masked key's K_j and V_j, a
padded (all-masked) row's Q_i and G_i — reaches none of Y, the log-sum-exp, dQ, dK or dV: each is a function
of the read entries alone, because the reference guards every masked contribution instead of multiplying it
by a zero weight.
""",
     checked_by=("ATT-FP-POISON-fp16",), assumptions=("A-FP-IEEE", "A-FP-EXP"))

item("EXT-FP-ERROR", "extension", "A proved error bound for the tiled forward in floating point", provenance=OURS,
     uses=("THM-EXACT", "EXT-FP-SAFETY"), statement="""
For inputs in fp32, bf16 or fp16, fp32 accumulation, key blocks of b and the weights rounded to the input
format before P·V, every output entry of a row with n_k keys satisfies |Ŷ − Y| ≤ e + u_div(M_v + e), with
e = M_v(ρ_z + ρ_ℓ + 2H·e^{E_s})/(1 − ρ_ℓ − H·e^{E_s}), where T = ⌈n_k/b⌉, b₁ = min(b, n_k),
S = |c|·d·M_q·M_k, E_s = ((1+u)^{d+2} − 1)·S, φ = E_s + 2uT(S + E_s),
ρ_ℓ = (1+u)^{b₁−1+2(T−1)}(1+u_e)^T e^φ − 1, ρ_z = (1+u)^{b₁+2(T−1)}(1+u_in)(1+u_e)^T e^φ − 1 and H the
weights' underflow; the log-sum-exp's error is bounded beside it (verified/fp_bound.py). Derived by running the
reference on an error-bounding number system; no first-order truncation.
""",
     checked_by=("ATT-FP-ERROR-DERIVE", "ATT-FP-ERROR-MODEL", "ATT-FP-ERROR-MODEL-ADD", "ATT-FP-ERROR-VALID"),
     assumptions=("A-FP-IEEE", "A-FP-EXP-ACC", "A-FP-NORMAL"))
