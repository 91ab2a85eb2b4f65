"""Items about the production Triton kernels' index logic (``kernels/attention/triton/``): which pairs
the tile classification visits, that every load and store stays inside its tensor, and that any split
of the keys merges exactly. Checked by ``flashproof.proofs.obligations.kernels`` on the kernels' own
integer code, run on z3 integers (``proofs/support/kernel_exec.py``)."""
from .registry import item

OURS = ("Statement: ours (production kernels, not on the page)",)

item("KER-TILES", "extension", "The kernels' tile classification visits exactly the allowed pairs", provenance=OURS,
     uses=("ALG-TILED",), statement="""
For every sequence length, window (left, right or both sides, causal included), varlen offsets and block
size the host may launch, the Triton kernels' walk visits every allowed (query, key) pair of a program's
block exactly once and runs a pair without the per-pair predicate only when it is allowed: the
forward and dQ kernels' key stages (fwd.key_range), the dK/dV kernel's query stages (bwd.query_range),
the predicate itself (fwd.allowed_pairs, which is the API's rule; a dense mask only removes pairs), the
block-sparse plan's reach and full classes (plan._classes, any tile sizes), the varlen sequence bounds
(fwd.seq_bounds) and the window arguments the host passes (host._index_args: sides clamped to
max(Nq, Nk), which allows the same pairs, lengths at most 2^29), with no integer operation wrapping
around in its Triton width. The three stage loops range(a, b, ·), range(b, c, ·), range(c, hi, ·) are
the kernels' code as stated, not executed; the plan's lists are modelled as listing exactly the present
tiles that are reached (A-KER-PLAN-LISTS).
""",
     checked_by=("KER-TILES-HOST", "KER-TILES-KEY-RANGE", "KER-TILES-QUERY-RANGE", "KER-TILES-PAIRS",
                 "KER-TILES-PLAN", "KER-TILES-VARLEN"),
     assumptions=("A-TRITON-INT", "A-TRITON-DIV", "A-KER-HOST-LIMITS", "A-KER-PLAN-LISTS", "A-KER-CU-VALID"))

item("KER-BOUNDS", "extension", "Every load and store of the kernels stays inside its tensor", provenance=OURS,
     uses=("KER-TILES",), statement="""
In the forward (attn_fwd), dK/dV (attn_bwd_dkdv), dQ (attn_bwd_dq) and δ (attn_bwd_delta) kernels, run as
a whole on symbolic batch, heads (GQA), lengths, head dims, non-negative strides (storage up to 2^62
elements, so tensors above 2^31 elements are covered), window, varlen offsets, dense and block-sparse
masks, an additive float bias (batch and head dims broadcast or not, four non-negative strides) and the
dS store of its gradient, pointer and TMA-descriptor paths, program ids and loop iterations: every pointer load or store
whose mask is on addresses an element of its tensor (Σ index·stride with each index inside its
dimension, or a broadcast dimension of stride 0), its offset and its mask are computed without integer
wrap-around, and descriptor coordinates fit int32. An offset into the flat block-sparse walk lists
((b·Hq + h)·R + r)·C + j is checked digit by digit (each of b, h, r, j inside its size, the offset equal
to its digits' value, and the mixed-radix lemma 0 ≤ x < X ∧ 0 ≤ y < Y ⇒ 0 ≤ x·Y + y < X·Y, all proved in
the record); the lists' counts and entries read are what A-KER-PLAN-LISTS says (counts of a row summing to
at most its width, entries below it). Bounded to the BLOCK_M × BLOCK_N rows of the
autotuning tables named in each record (the first row by default, every row under --deep), block-sparse
launches to mask tiles twice the kernel's block, no bias, no dense mask and the pointer path by default
(mask tiles of 1 and 4 blocks too, and at 2 blocks the bias, a dense mask and TMA, under --deep), and the
launch
in which an H200 reported an illegal memory access (packed varlen with zero-length segments, no window, a
dense mask, dv = 8 < d = 64 padded to 16 and 64 lanes) checked as launched in the forward, dQ and dK/dV
kernels. The plan kernel plan.tile_plan, which writes the walk lists, is covered too (its column loop by
induction: the count it carries equals a ghost count of the columns taken so far, checked at entry and
after the body, with four counting lemmas proved by induction and their premises checked), for symbolic
batch, heads, lengths, window, tile-grid strides, tile sizes from 16 to 2^20, both directions, no dense mask
and 1024 lanes a step by default (the dense switch on too and 1, 2, 16 and 1024 lanes under --deep):
every access inside its tensor,
every list entry a column below the row's width, the partial tiles in slots [0, n_partial), the full ones in
[n_partial, n_partial + n_full), and n_partial + n_full ≤ the width. Not covered: that tile_plan writes
every slot below n_partial + n_full (the rest of A-KER-PLAN-LISTS), tile sizes above 2^20 in tile_plan;
below the kernels' source semantics (what Triton compiles them to: shared memory, tensor-core operands)
nothing is claimed (A-TRITON-CODEGEN).
The Gluon kernels (the default route on an H200), run from their hosts (gluon.fwd.forward, gluon.bwd.backward,
executed with the row-view builder, the host's allocations and views and the launch line) for every shape
dispatch.gluon_rule admits (symbolic batch, heads with GQA, N =
128·NB, each tensor's row-view kind and row stride; causal and not; the backward deterministic and not) at each
head dim the kernel takes, one host run per head dim — each kernel at D = Dv = 64 and at D = Dv = 128 (gluon.fwd.HEAD_DIMS,
gluon.bwd.HEAD_DIMS; no other head dim is claimed) —, every partition of warp_specialize
(the consumer warpgroups, the TMA producer and the backward's dQ writer) and every helper, one arbitrary loop
iteration: every TMA box — loads, stores and the backward's dQ reduce-add — has int32 coordinates computed
without wrap-around and lies inside its descriptor's global shape and inside the rows and columns of its own
(batch, head) — the program's query block for Q, its warpgroup's rows for O (the forward is persistent: a
CTA's (batch, head, query block) is that of each work item of its row of the host's schedule, whose every read —
the count and the four fields of an entry — addresses the CTA's own row below its count, A-KER-SCHED); for the backward's Q, dO, lse, δ
boxes and its dQ reduce-add (64 whole rows) one of the CTA's own query heads: the backward splits a GQA
group's G heads over S = head_splits(G, deterministic) CTAs (S symbolic, every value the host chooses, shown
to divide G), GS = G / S heads each from hk·G + s·GS —; the lse, dK and dV stores address elements of the
program's (batch, head) rows (the warpgroup's query rows for lse, its keys for dK and dV; with S > 1 dK and dV
go to the fp32 partials' rows of (b, hk·S + s), inside the buffer the host allocates); the deterministic
backward's semaphore loads and adds (inline PTX ld.acquire / red.release) address one int32 of the CTA's
(head, query block) semaphores, inside the tensor the host allocates; every shared-memory ring index and slice lies inside
its allocation, each warpgroup's dQ staging in its own D/2 columns (and its D/2-column slice of the K tile
inside it); and layout.row_view, executed on symbolic shapes and strides, maps every element of a tensor it
accepts to its own view cell. The same for their block-sparse calls (SPARSE: 128 × 128 tiles, no dense mask,
causal or not, never deterministic; the backward with one query head per CTA, S = G): the hosts run with the
walk lists tile_lists returns, int32 contiguous (B, Hq, N/128, 2) counts and (B, Hq, N/128, N/128) entries, and
every list read — the counts and entries of the query tile's KV list in the forward (its kernel top and
producer), of the key tile's Q list in the backward (its kernel top, producer and dQ writer) — addresses an
element of its list tensor inside the program's own row ((b, h, query tile) of the KV lists, (b, h0, key
tile) of the Q lists), given only what A-KER-PLAN-LISTS says of the values (the row's two counts ≥ 0 summing to
at most its width, every count in the tensor at most the width, the entries at slots below the sum tiles
0 … N/128 − 1; an entry past the counts is unspecified); and under those values every TMA box and store of the
block-sparse path meets the claims above (the K/V boxes at the listed tile, the Q, dO, lse, δ boxes and the dQ
reduce-add at 64-row block 2·entry + t mod 2, the forward's out and lse of a query block with an empty list).
The block-sparse calls at D = 128 in the quick run (the backward's non-causal ones), at both head dims, causal
and not, under --deep. Their int32 row indices rest on the row bound B·Hq·N ≤ 2^30
(A-GLUON-DEVICE-MEMORY), which the router checks (both rules). Not covered there: the synchronisation (mbarrier
phases, the staging buffers' full/empty protocol), the semaphores' ordering and forward progress (a schedule
property, not a bounds claim: that dQ is bitwise repeatable is measured on the GPU, not proved), which pairs the
causal schedules visit (KER-TILES runs the Triton kernels' walk only), the δ kernel (Triton's,
KER-BOUNDS-DELTA) and the Triton kernel that sums the GQA backward's dK / dV partials into the gradients
(partials.sum_partials_kernel, KER-BOUNDS-PSUM: symbolic batch, KV heads, split count S, length, head dim up to
256 lanes and the strides of both tensors, one arbitrary iteration of its loop over the splits).
""",
     checked_by=tuple(f"KER-BOUNDS-{k}{g}" for k in ("FWD", "DQ", "DKDV")
                      for g in ("", "-VARLEN", "-TMA", "-REPORTED", "-BIAS", "-SPARSE"))
     + ("KER-BOUNDS-DELTA", "KER-BOUNDS-PSUM", "KER-BOUNDS-PLAN", "KER-BOUNDS-GLUON-VIEW", "KER-BOUNDS-GLUON-FWD",
        "KER-BOUNDS-GLUON-BWD"),
     assumptions=("A-TRITON-INT", "A-TRITON-DIV", "A-TRITON-MASKED-LOAD", "A-TRITON-TMA", "A-TRITON-LAUNCH",
                  "A-TRITON-CODEGEN", "A-KER-HOST-LIMITS", "A-KER-CU-VALID", "A-KER-PLAN-LISTS", "A-GLUON-SEMANTICS",
                  "A-GLUON-TMA", "A-GLUON-EMPTY-LIKE", "A-GLUON-DEVICE-MEMORY", "A-KER-SCHED"))

item("KER-SPLIT", "extension", "Any split of the keys into contiguous ranges, merged by ⋆, is exact", provenance=OURS,
     uses=("DEF-SUMMARY", "EXT-ANY-ORDER", "THM-EXACT"), statement="""
Cut a row's keys [lo, hi) at any points lo = c_0 ≤ c_1 ≤ … ≤ c_P = hi (empty ranges allowed), let each
range return its partial (out, lse) — lse = −∞ for a range with no allowed key — and merge the partials,
read back as summaries (lse, 1, out), by ⋆ from ⊥: the result carries exactly the sums over all allowed
keys, so its final division is the attention of the whole row, for every P. A split plan (split-KV,
context parallel, the kernels' own block walk) is exact once it shows its ranges are such cuts.
""",
     checked_by=("KER-SPLIT-CUTS", "KER-SPLIT-PARTIAL", "KER-SPLIT-FOLD"),
     assumptions=("A-EXP-ISO",))
