"""Ring (context-parallel) attention: the item that its obligations check
(``flashproof.proofs.obligations.attention.ring``), and the assumption about the runtime that no proof
covers."""
from .registry import assumption, item

assumption("A-RING-RUNTIME", "the ring's local calls and transport do what they are documented to do", statement="""
Each local ``attention(..., return_lse=True)`` call returns its block's (out, lse) under its documented
mask convention (non-causal, or causal aligned on an n × n block), and every torch.distributed hop
delivers the tensors that were sent. Both are tested (the fuzzer and tests/test_ring_*.py on gloo),
not proved; the proofs are in real arithmetic, the float32 merge rounds.
""")

item("EXT-RING", "extension", "Ring attention's schedule merges every allowed block exactly once, for every world size",
     provenance=("Statement: ours (extension, not on the page)",), uses=("DEF-SUMMARY", "EXT-ANY-ORDER", "THM-EXACT"),
     statement="""
The sequence is cut into C equal chunks held by W ranks (contiguous: chunk r on rank r, C = W; zigzag:
chunks r and 2W − 1 − r on rank r, C = 2W). At step s = 0 … W − 1 rank r holds the key/value chunks of
rank (r − s) mod W and runs, for each of its query chunks, one local attention call per key chunk:
none when no pair of the block is allowed, a causal call on the diagonal block, a full call otherwise.
For every W ≥ 1 and every rank, each key chunk meets each query chunk in exactly one step, and the
calls admit exactly the pairs dense (causal) attention allows; so the partial (out, lse) results of a
query row are summaries of disjoint key sets whose union is the row's allowed set, and merging them
with ⋆ (in any order) gives the dense row.
""",
     checked_by=("RING-LAYOUT", "RING-SCHEDULE", "RING-FOLD-EXACT"),
     assumptions=("A-EXP-ISO", "A-RING-RUNTIME"))
