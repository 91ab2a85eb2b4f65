"""Our extension for the KV-cache kernel (``flashproof.kernels.kvcache``): split-KV over a request's
keys, merged by ⋆, is exact. Checked by ``flashproof.proofs.obligations.attention.kvcache``."""
from .registry import item

item("EXT-SPLIT-KV", "extension", "Split-KV decoding with the merge rule is exact for every length and split count",
     provenance=("Statement: ours (extension, not on the page)",), uses=("DEF-SUMMARY", "EXT-ANY-ORDER", "THM-EXACT"),
     statement="""
The KV-cache kernel cuts the n keys a request's queries may read into S consecutive splits, split t being
[t·c, min(t·c + c, n)) with c = ⌈⌈n/b⌉/S⌉·b for its tile size b, so later splits may be empty. Each split's
summary (⊥ when empty) is merged into a running state with ⋆ in split order, and the result is finished as
z/ℓ and m + log ℓ. For every n ≥ 0, S ≥ 1 and b ≥ 1 the splits extend the prefix of processed keys one after
another and end with all n keys, so the merged state is the summary of all allowed keys and the output is
dense attention. The kernel keeps each split as (out, lse) and merges the pairs as lse = log Σ e^{lse_s},
out = Σ e^{lse_s − lse}·out_s, which is ⋆ read in those coordinates.
""",
     checked_by=("KV-SPLIT-PLAN", "KV-SPLIT-MERGE-STEP", "KV-SPLIT-LSE-FORM", "KV-SPLIT-FINISH", "KV-SPLIT-BOUNDED"),
     assumptions=("A-EXP-ISO",))
