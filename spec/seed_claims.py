"""The claims ledger: every numeric or quantitative claim of the four seed documents, as data.

Each ``Claim`` names its seed file, says what the seed claims *in our words*, copies only the
figures the seed prints (``Figure.stated``, decimal point normalised to ``.``), and says how we
check it. The recomputations live in ``flashproof.proofs.ledger.recompute`` (one function per
recomputable claim, looked up by id); verdicts are derived in ``flashproof.proofs.ledger.verdict``,
never typed here.

``check`` is one of

* ``value``     — the seed prints numbers; we recompute each and compare at the seed's own
  printed precision (half a unit in the last significant digit);
* ``bound``     — an inequality or comparison the seed asserts; we recompute both sides;
* ``identity``  — a formula or an exactness statement; proved symbolically (sympy / z3) or by
  exact enumeration / a concrete counterexample;
* ``citation``  — a figure measured or stated elsewhere (a paper, a datasheet); listed, never
  "confirmed"; a recomputation may add a *consistency* note;
* ``not-checkable`` — quantitative but not checkable here; ``method`` says why.

``expect`` (recomputable claims only) is ``holds`` or ``fails``. A claim the seed gets wrong is an
erratum (``fails``, with the reason in ``note``): the obligation then requires the recomputation
to *refute* it, like the theorem page's "false statements" section. ``make prove`` fails when a
recomputation disagrees with ``expect`` either way.

Units: MB/GB are decimal (10^6 / 10^9 bytes), as the seeds' figures imply (2·4096² B = 33.55 MB).

Every recomputable claim is also a registry item of kind ``example`` (id = claim id) checked by
the obligation ``RECOMPUTE-<id>``, so the name check and the derived status cover it.
"""
from __future__ import annotations

from typing import NamedTuple

from .registry import item

__all__ = ["Figure", "Claim", "CLAIMS", "CHECKS", "SEEDS", "obligation_id", "by_id", "recomputable"]

CHECKS = ("value", "bound", "identity", "citation", "not-checkable")
RECOMPUTABLE = ("value", "bound", "identity")

#: The four seed documents (in ``../shared/seeds/``) and what each is.
SEEDS = {
    "000_e62e61cc03dea00a.txt": "textbook chapter (English): streaming softmax and speculative decoding",
    "001_e3d31b95b8d0890d.txt": "explainer (French): flash attention without the score grid",
    "002_79338002cd58a0fb.txt": "article (Turkish): the memory wall, online softmax, FlashAttention 1–3",
    "004_b37f59f788102f1f.txt": "theorem page: exact tiled attention and memory-aware differentiation",
}
S0, S1, S2, S4 = sorted(SEEDS)


class Figure(NamedTuple):
    """One printed number: ``label`` (what it is, our words), ``stated`` (the seed's decimal,
    e.g. ``"33.6"``), ``unit`` (of the stated and of the recomputed value)."""

    label: str
    stated: str
    unit: str = ""


class Claim(NamedTuple):
    """One ledger entry (see the module docstring for ``check`` and ``expect``)."""

    id: str
    source: str
    topic: str
    claim: str
    check: str
    figures: tuple = ()
    expect: str = ""
    method: str = ""
    note: str = ""


def F(label: str, stated: str, unit: str = "") -> Figure:
    return Figure(label, stated, unit)


CLAIMS: tuple[Claim, ...] = (
    # ------------------------------------------------------------------ 000: textbook chapter
    Claim("CL-000-ATTN-FLOPS", S0, "Attention arithmetic 2n²d",
          "An earlier chapter (not in our seeds) is said to count attention's arithmetic as 2n²d.",
          "not-checkable",
          method="Refers to a counting convention of a chapter we do not have. For comparison: one "
                 "n×n×d matrix product is 2n²d FLOPs (multiply-add = 2), QKᵀ plus PV is 4n²d "
                 "(see CL-002-MATMUL-FLOPS)."),
    Claim("CL-000-SCORE-4096", S0, "Score matrix at n = 4096",
          "One head's n×n score matrix at n = 4096 in 2-byte half precision takes 2n² bytes.",
          "value", (F("2·4096² bytes", "33.6", "MB"),), "holds",
          "Exact integer arithmetic: 2·4096² = 33,554,432 bytes, in decimal MB."),
    Claim("CL-000-SCORE-VS-SRAM", S0, "Score matrix exceeds on-chip memory",
          "That score matrix is larger than the reference accelerator's 20 MB of on-chip fast memory.",
          "bound", (), "holds",
          "Compare 2·4096² bytes with 20·10⁶ bytes (the 20 MB is the seed's own cited figure).",
          "The 20 MB itself is a hardware citation (see CL-002-SRAM-SIZE)."),
    Claim("CL-000-STREAM1-STEPS", S0, "Streaming example {2,1} then {3,0}: the steps",
          "Running the online update on score blocks {2, 1} then {3, 0}: the first normaliser, the "
          "old sum rescaled into the new frame, the second block's sum and the final normaliser.",
          "value", (F("ℓ after block 1", "1.368"), F("ℓ·e^{m−m'}", "0.503"),
                    F("block 2 sum", "1.050"), F("ℓ'", "1.553")), "holds",
          "Run flashproof.verified.attention.summarize/merge on the two blocks in mpmath (60 digits); "
          "the rescaled term is e^{m−m'}·ℓ with the reference's m and m'."),
    Claim("CL-000-STREAM1-ONESHOT", S0, "Streaming example {2,1} then {3,0}: one shot",
          "The one-shot normaliser over all four scores (max 3), term by term and in total.",
          "value", (F("e^{-1}", "0.368"), F("e^{-2}", "0.135"), F("e^{-3}", "0.050"), F("sum", "1.553")),
          "holds", "mpmath, 60 digits: each term e^{s−3} and their sum."),
    Claim("CL-000-STREAM1-EXACT", S0, "Streaming example {2,1} then {3,0}: exactness",
          "Streaming and one-shot normalisers are identical for this example (not an approximation).",
          "identity", (), "holds",
          "Run the verified summarize/merge on sympy numbers (exact e^k symbols) and simplify the "
          "difference to the one-shot sum; also check the final maximum is 3."),
    Claim("CL-000-STREAM2-STEPS", S0, "Exercise {1,4} then {2,2,5}: the steps",
          "The worked exercise's online update on score blocks {1, 4} then {2, 2, 5}.",
          "value", (F("ℓ after block 1", "1.050"), F("ℓ·e^{m−m'}", "0.386"),
                    F("block 2 sum", "1.100"), F("ℓ'", "1.486")), "holds",
          "As CL-000-STREAM1-STEPS, on the exercise's blocks."),
    Claim("CL-000-STREAM2-ONESHOT", S0, "Exercise {1,4} then {2,2,5}: one shot",
          "The exercise's one-shot normaliser over all five scores (max 5).",
          "value", (F("e^{-4}", "0.018"), F("e^{-1}", "0.368"), F("e^{-3}", "0.050"), F("sum", "1.486")),
          "holds", "mpmath, 60 digits."),
    Claim("CL-000-STREAM2-EXACT", S0, "Exercise {1,4} then {2,2,5}: exactness",
          "Streaming and one-shot normalisers agree exactly for the exercise.",
          "identity", (), "holds", "As CL-000-STREAM1-EXACT (sympy, via the verified reference)."),
    Claim("CL-000-RESCALE-LE1", S0, "The rescale factor is at most 1",
          "The factor e^{m−m'} that moves the old sum into the new frame never exceeds 1.",
          "identity", (), "holds",
          "z3 over the reals: m' = max(m, x) implies m − m' ≤ 0; then e^{m−m'} ≤ e^0 = 1 by monotonicity "
          "of exp (the registry's exp assumption; exp never reaches the solver)."),
    Claim("CL-000-TRAFFIC-10X", S0, "Tiling cuts memory traffic ~10×",
          "Tiled attention cuts main-memory traffic by roughly an order of magnitude.",
          "not-checkable",
          method="The reduction depends on the memory model's constants (SRAM size M, head dim d, "
                 "sequence length); the seed gives none. See CL-002-IO-GAIN for the model's ratio."),
    Claim("CL-000-SPEC-EXACT", S0, "Accept/resample recovers p",
          "Accepted mass per token is q·min(1, p/q) = min(p, q), and min(p, q) + max(0, p − q) = p, "
          "so the emitted law is the target's.",
          "identity", (), "holds",
          "z3 over the reals, for every p ≥ 0 and q > 0: both identities (min/max as If-terms)."),
    Claim("CL-000-SPEC-2-3X", S0, "Speculation is 2–3× faster",
          "Speculative decoding makes a large model generate two to three times faster.",
          "not-checkable",
          method="An empirical speed claim with no cited measurement; the speed-up depends on α, k and c "
                 "(the seed's own worked example gives 2.4×, CL-000-ECON-08)."),
    Claim("CL-000-TOKENS-FORMULA", S0, "Expected tokens per cycle",
          "With independent acceptance rate α and k drafts, a cycle yields (1 − α^{k+1})/(1 − α) "
          "tokens in expectation (the accepted run plus the target's token).",
          "identity", (), "holds",
          "sympy: Σ_{i<k} (i+1)·α^i(1−α) + (k+1)·α^k − (1 − α^{k+1})/(1 − α) simplifies to 0 for "
          "every k = 1..24 (a rational-function identity in α per k)."),
    Claim("CL-000-ECON-08", S0, "Economics at α = 0.8, k = 4, c = 0.1",
          "The seed's end-to-end example: α^{k+1}, tokens per cycle, cycle cost in target forwards, "
          "and the speed-up.",
          "value", (F("0.8⁵", "0.328"), F("tokens per cycle", "3.36"), F("cycle cost", "1.4", "forwards"),
                    F("speed-up", "2.4", "×")), "holds",
          "Exact Fractions: (1 − α^{k+1})/(1 − α), k·c + 1, and their ratio."),
    Claim("CL-000-ECON-05", S0, "Sensitivity at α = 0.5",
          "The same configuration at α = 0.5: tokens per cycle and speed-up.",
          "value", (F("tokens per cycle", "1.94"), F("speed-up", "1.38", "×")), "holds", "Exact Fractions."),
    Claim("CL-000-EX-ACCEPT", S0, "Exercise: acceptance probability",
          "With q(A) = 0.5 and p(A) = 0.3 the draft token A is accepted with probability min(1, p/q).",
          "value", (F("min(1, 0.3/0.5)", "0.6"),), "holds", "Exact Fractions."),
    Claim("CL-000-EX-SPEEDUP", S0, "Exercise: speed-up at α = 0.7, k = 3, c = 0.15",
          "The exercise's α^{k+1}, tokens per cycle, cycle cost and speed-up.",
          "value", (F("0.7⁴", "0.2401"), F("tokens per cycle", "2.53"), F("cycle cost", "1.45", "forwards"),
                    F("speed-up", "1.75", "×")), "holds", "Exact Fractions."),
    Claim("CL-000-MARGINAL", S0, "Marginal value of one more draft",
          "Drafting one more token adds α^{k+1} expected tokens and costs c more target forwards.",
          "identity", (), "holds",
          "sympy: E(k+1) − E(k) − α^{k+1} simplifies to 0 for k = 1..24; cost((k+1)) − cost(k) = c."),
    Claim("CL-000-FLAT-OPTIMUM", S0, "The optimum in k is flat",
          "Near the optimal k the speed-up curve is flat, so a range of k performs about equally.",
          "not-checkable",
          method="No threshold for 'about equally' is given. The illustration recomputes the speed-up "
                 "for k = 1..10 at the seed's α = 0.8, c = 0.1."),
    # ------------------------------------------------------------------ 001: French explainer
    Claim("CL-001-THREE-TRIPS", S1, "Three round trips of the score grid",
          "Standard attention writes the full grid to slow memory and reads it back twice (to "
          "normalise, then to weight the values): three trips with the largest object.",
          "not-checkable",
          method="The count depends on whether the normalised matrix is written back as a separate "
                 "array; the Turkish article counts four N²-element transfers (write S, read S, write P, "
                 "read P; CL-002-HBM-LIST). Both are Θ(N²)."),
    Claim("CL-001-MEMORY-LINEAR", S1, "Memory falls from O(n²) to O(n)",
          "With tiling only a running maximum, a running sum and the output are kept: memory goes "
          "from quadratic to linear in n.",
          "not-checkable",
          method="An asymptotic statement, not a number: it is the theorem page's workspace theorem "
                 "(linear retained memory), reported with the theorem-page items."),
    Claim("CL-001-ROOFLINE", S1, "Time ≈ max(compute, transfer)",
          "Run time is approximately the larger of FLOPs/compute rate and bytes/bandwidth.",
          "not-checkable",
          method="A performance model, not a measurement. Its use with numbers is CL-002-TIME-16K."),
    # ------------------------------------------------------------------ 002: Turkish article
    Claim("CL-002-MATMUL-FLOPS", S2, "Attention's matrix products: 4N²d",
          "QKᵀ costs 2N²d FLOPs per head, PV the same, 4N²d together.",
          "value", (F("QKᵀ FLOPs / (N²d)", "2"), F("PV FLOPs / (N²d)", "2"), F("total / (N²d)", "4")), "holds",
          "Count the multiplications and additions that flashproof.verified.attention.dense_attention "
          "performs on a counting number system (N = 5, d = v = 3, every key allowed), counting a "
          "multiply and an add as 2 FLOPs; report products per N²d."),
    Claim("CL-002-TABLE-4096", S2, "Table row N = 4096",
          "N² and one head's FP16 matrix size at N = 4096.",
          "value", (F("N²", "1.68e7"), F("2N² bytes", "33.6", "MB")), "holds", "Exact integers."),
    Claim("CL-002-TABLE-16K", S2, "Table row N = 16,384",
          "N² and one head's FP16 matrix size at N = 16,384.",
          "value", (F("N²", "2.68e8"), F("2N² bytes", "537", "MB")), "holds", "Exact integers."),
    Claim("CL-002-TABLE-64K", S2, "Table row N = 65,536",
          "N² and one head's FP16 matrix size at N = 65,536.",
          "value", (F("N²", "4.29e9"), F("2N² bytes", "8.6", "GB")), "holds", "Exact integers."),
    Claim("CL-002-TABLE-128K", S2, "Table row N = 131,072 (128k context)",
          "N² and one head's FP16 matrix size at N = 131,072.",
          "value", (F("N²", "1.72e10"), F("2N² bytes", "34.4", "GB")), "holds", "Exact integers."),
    Claim("CL-002-128K-HALF-A100", S2, "128k matrix vs half an 80 GB A100",
          "At 128k context one head's probability matrix alone takes more than half of an 80 GB A100.",
          "bound", (), "fails",
          "Compare 2·131072² bytes with 40·10⁹ bytes.",
          "Erratum: 2·131072² B = 34.4 GB (the seed's own table), which is 43% of 80 GB, not more than "
          "half. The claim would hold for S and P together, or for FP32."),
    Claim("CL-002-GPT2-4096", S2, "N = 4096 as 'classic GPT-2'",
          "The table labels N = 4096 as the classic GPT-2 context.",
          "citation",
          method="External fact about a model; not checkable here.",
          note="Reader's note (not machine-checked): GPT-2's published context window is 1024 tokens."),
    Claim("CL-002-HBM-LIST", S2, "Standard forward HBM traffic",
          "The five listed transfers (read Q, K; write S; read S and write P; read P; write O) total "
          "Θ(N² + Nd) elements.",
          "identity", (), "holds",
          "sympy: sum the listed counts (2Nd + N² + 2N² + N² + Nd = 4N² + 3Nd) and check "
          "N² + Nd ≤ total ≤ 4(N² + Nd) for N, d ≥ 1 (z3).",
          "The list omits reading V (another Nd elements); the Θ claim is unaffected."),
    Claim("CL-002-MEMORY-WALL", S2, "Compute vs DRAM growth rates",
          "Peak FLOP rate grew ~52–60% a year over three decades while DRAM bandwidth grew ~10% a year.",
          "citation", method="Cites Patterson (2013) and Wulf & McKee (1995); historical measurements."),
    Claim("CL-002-A100-SPECS", S2, "A100 datasheet figures",
          "A100 SXM4 40 GB: 312 TFLOP/s FP16 tensor-core peak, 1.555 TB/s HBM2e; the 80 GB part ~2.0 TB/s.",
          "citation", method="NVIDIA A100 whitepaper figures; not measurable here (no A100)."),
    Claim("CL-002-RIDGE", S2, "A100 ridge point",
          "The A100's roofline ridge point is peak FLOP rate over bandwidth, about 200 FLOP/byte.",
          "value", (F("312e12 / 1.555e12", "200", "FLOP/byte"),), "holds",
          "Exact Fraction of the two cited figures (CL-002-A100-SPECS)."),
    Claim("CL-002-INTENSITY", S2, "Arithmetic intensity of standard attention",
          "4N²d FLOPs over ~4N² FP16 elements (8N² bytes) of matrix traffic gives I = d/2, ≈ 64 at "
          "d = 128, well under the ridge point.",
          "value", (F("I at d = 128", "64", "FLOP/byte"),), "holds",
          "sympy: (4N²d)/(2·4N²) simplifies to d/2; evaluate at d = 128 and compare with CL-002-RIDGE."),
    Claim("CL-002-SOFTMAX-INTENSITY", S2, "Softmax passes have I ≈ 1",
          "The element-wise softmax passes do only a few FLOPs per byte (I of order 1).",
          "not-checkable",
          method="Order of magnitude; which operations count as FLOPs (exp, max, compare) is not "
                 "specified. The illustration counts 5 operations per element over a 2-byte read and "
                 "a 2-byte write."),
    Claim("CL-002-TIME-16K", S2, "Compute vs IO time at N = 16,384",
          "At N = 16,384, d = 128, one head in FP16: matrix products at peak take ≈ 0.44 ms, the "
          "≈ 8N² bytes of traffic take ≈ 1.38 ms, so IO costs about three times the compute.",
          "value", (F("4N²d / 312e12", "0.44", "ms"), F("8N² / 1.555e12", "1.38", "ms"),
                    F("IO / compute", "3", "×")), "holds",
          "Exact Fractions with the cited A100 figures."),
    Claim("CL-002-FP32-OVERFLOW", S2, "FP32 overflow threshold",
          "FP32's largest finite value is ≈ 3.4·10³⁸, so e^x overflows for x above ≈ 88.7.",
          "value", (F("FP32 max", "3.4e38"), F("ln(FP32 max)", "88.7")), "holds",
          "Exact (2 − 2⁻²³)·2¹²⁷ and its natural log in mpmath."),
    Claim("CL-002-FP16-OVERFLOW", S2, "FP16 overflow threshold",
          "In FP16 the exponential overflows much earlier, around e^11.",
          "value", (F("ln(FP16 max)", "11"),), "holds", "ln(65504) in mpmath (65504 = (2 − 2⁻¹⁰)·2¹⁵)."),
    Claim("CL-002-EXP2", S2, "exp via exp2",
          "e^x = 2^{x·log₂e}; so scaling the scores by 1/(√d·ln 2) lets every exponential be an exp2.",
          "identity", (), "holds",
          "sympy: 2^{x·log₂e} − e^x and 2^{s/(√d·ln 2)} − e^{s/√d} simplify to 0 (x, s real, d > 0)."),
    Claim("CL-002-VARIANCE", S2, "Why scale by 1/√d",
          "For independent mean-0, variance-1 components, q·k has variance d; dividing by √d "
          "brings it back to 1.",
          "identity", (), "holds",
          "Exact enumeration with ±1 (Rademacher) components for d = 1..8 (2^{2d} cases): Var(q·k) = d "
          "and Var(q·k/√d) = 1 exactly. (The general case is linearity of variance; this checks one "
          "distribution, bounded in d.)"),
    Claim("CL-002-BITWISE", S2, "Online softmax is bit-identical",
          "The online recurrence gives a result bit-for-bit identical to the classic stable softmax.",
          "identity", (), "fails",
          "Run the verified reference in float64: one-shot summarize vs block-by-block summarize/merge "
          "on small fixed score rows; report the first row where the normalisers differ in bits.",
          "Erratum: exact in real arithmetic (the theorem page), but a different summation order "
          "changes floating-point bits; the theorem page's own remark says so."),
    Claim("CL-002-SRAM-SIZE", S2, "A100 on-chip SRAM",
          "~192 KB of shared memory/L1 per SM, ~20 MB across the chip.",
          "citation",
          method="NVIDIA A100 figures. Consistency: 108 SMs × 192 KiB = 21.2·10⁶ bytes ≈ 20 MB (the SM "
                 "count is also a datasheet figure)."),
    Claim("CL-002-BLOCK-SIZES", S2, "FlashAttention block sizes",
          "The paper's blocks are about B_r ≈ ⌈M/(4d)⌉ and B_c ≈ ⌈M/(4B_r)⌉.",
          "citation",
          method="Cites Dao et al. (2022), Algorithm 1.",
          note="Reader's note (not machine-checked): Algorithm 1 of the paper sets B_c = ⌈M/(4d)⌉ and "
               "B_r = min(⌈M/(4d)⌉, d); the seed's formulas differ."),
    Claim("CL-002-IO-GAIN", S2, "FlashAttention's IO gain",
          "HBM traffic Θ(N²d²/M) versus the standard Θ(N²) is a factor d²/M; the seed then calls this "
          "a gain of about d² for d = 64.",
          "value", (F("gain at d = 64", "4096", "×"),), "fails",
          "Self-consistency: a traffic ratio of d²/M is a gain of M/d². Evaluate M/d² with the seed's own "
          "SRAM figure (192 KB per SM = 98,304 FP16 elements) at d = 64.",
          "Erratum: the stated ratio d²/M means a gain of M/d² (24× with the seed's M), not d² = 4096×."),
    Claim("CL-002-LOWER-BOUND", S2, "IO lower bound",
          "Every exact attention algorithm needs Ω(N²d²/M) HBM accesses (red-blue pebble game), and "
          "Ω(N²) time when d ≳ log N.",
          "citation",
          method="Cites Dao et al. (2022) and Hong & Kung (1981). The theorem page's remark notes the "
                 "paper's range condition d ≤ M ≤ Nd; no lower bound is proved here."),
    Claim("CL-002-FA1-RESULTS", S2, "FlashAttention-1 reported results",
          "15% faster BERT-large training, 3× on GPT-2, better perplexity with longer sequences, and "
          "2.4× on Long Range Arena.",
          "citation",
          method="Training-run measurements from the paper; not reproducible here.",
          note="Reader's note (not machine-checked): the paper's abstract reports the LRA figure as a "
               "2.4× speed-up (sequence length 1K–4K), not as 2.4× longer sequences."),
    Claim("CL-002-BWD-FLOPS", S2, "Backward cost ≈ 2–2.5× forward",
          "The recomputing backward pass costs about twice the forward's FLOPs, ~2.5× in practice.",
          "value", (F("backward / forward without recompute", "2", "×"),
                    F("backward / forward with recompute", "2.5", "×")), "holds",
          "Count N×N×d matrix products: forward QKᵀ, PV (2); backward dV = PᵀdO, dP = dO·Vᵀ, "
          "dQ = dS·K, dK = dSᵀQ (4), plus recomputing S = QKᵀ (5). Exact ratios."),
    Claim("CL-002-LSE-MEMORY", S2, "Saving O and the LSE makes activation memory linear",
          "Keeping only the output and one log-sum-exp per row for the backward pass cuts the stored "
          "activations from Θ(N²) to Θ(N).",
          "not-checkable",
          method="Asymptotic, not a number: the theorem page's memory theorem (linear retained memory, "
                 "O(b + v) workspace) states it for the recomputing reverse pass; see that item's status."),
    Claim("CL-002-SOFTMAX-MINOR", S2, "Softmax FLOPs are of lower order",
          "The softmax's exp/sum/divide work is O(N²) in total, so the O(N²d) matrix products dominate.",
          "not-checkable",
          method="Only asymptotic in d: the products cost 4N²d against c·N² for the softmax with an unstated "
                 "per-element constant c, so the claim holds once d exceeds about c/4, not for every d ≥ 1."),
    Claim("CL-002-FA2-UTIL", S2, "FlashAttention-2 utilisation",
          "FA2 is ~2× faster than FA1 and reaches up to ~73% of the A100's FP16 peak.",
          "citation",
          method="Measurements from Dao (2023). Consistency: 73% of 312 TFLOP/s is computed in the "
                 "illustration."),
    Claim("CL-002-FA3-UTIL", S2, "FlashAttention-3 utilisation",
          "FA3 reaches ~75% of the H100's FP16 peak, ~740 TFLOP/s forward.",
          "value", (F("740 / H100 dense FP16 peak", "75", "%"),), "holds",
          "Exact Fraction 740/989.4 (989.4 TFLOP/s: H100 SXM dense FP16/BF16 tensor peak, NVIDIA's "
          "datasheet — an external figure the seed does not print).",
          "Only the consistency of the two figures is checked; 740 TFLOP/s is a measurement."),
    Claim("CL-002-FA3-OTHER", S2, "FlashAttention-3 speed-up and FP8",
          "FA3 is ~1.5–2× faster than FA2 on H100 and reaches ~1.2 PFLOP/s in FP8.",
          "citation", method="Measurements from Shah et al. (2024); no H100 here."),
    Claim("CL-002-TEN-X", S2, "~10× across three generations",
          "Across FA1–FA3 the constant factors shrank by about an order of magnitude.",
          "not-checkable",
          method="No baseline or measurement is given to compare against."),
    Claim("CL-002-6T-CELL", S2, "6T SRAM cell",
          "An SRAM cell is two cross-coupled inverters (four transistors) plus two access transistors.",
          "value", (F("transistors per cell", "6"),), "holds", "2 inverters × 2 transistors + 2 access."),
    Claim("CL-002-SRAM-BW", S2, "SRAM vs HBM bandwidth",
          "The A100's ~19 TB/s aggregate SRAM bandwidth is about 12× its HBM bandwidth.",
          "value", (F("19 / 1.555", "12", "×"),), "holds",
          "Exact Fraction of the two cited figures (the 19 TB/s is itself a citation)."),
    Claim("CL-002-KV-CACHE", S2, "KV-cache size of a 7B-class model",
          "32 layers, d_model = 4096, FP16: the K and V cache takes 2·4096·32·2 bytes per token, and a "
          "4096-token session about 2.1 GB.",
          "value", (F("per token", "0.52", "MB"), F("4096 tokens", "2.1", "GB")), "holds",
          "Exact integers: 2·4096·32·2 = 524,288 bytes; × 4096."),
    # ------------------------------------------------------------------ 004: theorem page
    Claim("CL-004-RESULT-COUNT", S4, "Two verified results",
          "The page reports two results, both machine-checked and AI-judged.",
          "citation",
          method="The page's verification is its own pipeline's claim; our own derived status for each "
                 "item is in the report. The illustration counts the theorem items in our registry."),
    Claim("CL-004-RETAINED", S4, "Retained scalars are O(n(d + v))",
          "The forward retains nd + nd + nv + nv + 2n scalars, which is O(n(d + v)) since d, v ≥ 1.",
          "identity", (), "holds",
          "z3 over the reals: for n > 0 and d, v ≥ 1, 2nd + 2nv + 2n ≤ 3n(d + v)."),
    Claim("CL-004-BLOCK-VISITS", S4, "Block visits ≤ n²",
          "There are at most n⌈n/b⌉ ≤ n² block visits for a positive block size b.",
          "identity", (), "holds",
          "Exact enumeration with the reference's own block_ranges: n·len(block_ranges(n, b)) ≤ n² for "
          "every n, b ≤ 48 (bounded)."),
)


def by_id() -> dict[str, Claim]:
    return {c.id: c for c in CLAIMS}


def recomputable(c: Claim) -> bool:
    return c.check in RECOMPUTABLE


def obligation_id(claim_id: str) -> str:
    """The obligation that recomputes claim ``claim_id``."""
    return f"RECOMPUTE-{claim_id}"


def _validate() -> None:
    seen = set()
    for c in CLAIMS:
        if c.id in seen:
            raise ValueError(f"claim id {c.id!r} appears twice")
        seen.add(c.id)
        if c.source not in SEEDS:
            raise ValueError(f"claim {c.id}: source {c.source!r} is not one of the seeds {sorted(SEEDS)}")
        if c.check not in CHECKS:
            raise ValueError(f"claim {c.id}: check must be one of {CHECKS}, received {c.check!r}")
        if recomputable(c) != (c.expect in ("holds", "fails")):
            raise ValueError(f"claim {c.id}: expect must be 'holds'/'fails' exactly for recomputable claims, "
                             f"received {c.expect!r} for check {c.check!r}")
        if (c.check == "value") != bool(c.figures):
            raise ValueError(f"claim {c.id}: figures are required for (and only for) 'value' claims")
        if c.expect == "fails" and not c.note:
            raise ValueError(f"claim {c.id}: an erratum needs a note saying why it fails")


_validate()

for _c in CLAIMS:
    if recomputable(_c):
        item(_c.id, "example", _c.topic, statement=_c.claim, source=_c.source,
             provenance=("Seed claim" + (" (erratum)" if _c.expect == "fails" else ""),),
             checked_by=(obligation_id(_c.id),), module=__name__)
