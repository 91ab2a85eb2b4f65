"""The assumptions obligations rest on. No proof checks them (the router refuses calls beyond one of them,
A-GLUON-DEVICE-MEMORY); the audit lists, for every item, the
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

assumption("A-SOLVER-TRUST", "what is still trusted in the solvers", statement="""
With the cross-check on (``flashproof prove --cross-check``, the default of ``--deep`` and of CI), every
z3 query is decided again by a second, independently written solver from the same SMT-LIB text (cvc5;
Bitwuzla for floating point), a disagreement fails the run, and a record where the second solver could
not decide every query reads "one solver" in the audit. Still trusted: z3's SMT-LIB export of the query
and the engine's one rewrite of it (a one-argument + * and or becomes its argument); where a verdict
says "rewritten", the rewrite of the same formula the second solver decided (field normalisation of
real queries with division, engine.normalize; hypothesis slicing of integer queries, engine.slicing:
sound steps whose side conditions the second solver decides, but their code and z3's parse-and-print
round trip are trusted); for every record
that reads "one solver" (including every run without the cross-check), z3 alone; the shared SMT-LIB
semantics both solvers implement (e.g. x/0 is an unspecified value, FP rounding as IEEE 754); sympy
reducing a difference to 0 (the sympy and exact checks have no second checker); the exact Fraction and
integer arithmetic of Python. No proof certificates are checked; sat models are re-checked only where
an obligation says so.
""")

assumption("A-COORDINATEWISE", "a claim proved at one vector width holds at every width", statement="""
Obligations about summaries and states of width v (the value dimension) are proved at one width (v = 16,
or 1) and read for every v. The reference computes each of the v coordinates of z, and of the output
z/ℓ, by the same expression of that coordinate's inputs and the shared scalars m and ℓ, never mixing
coordinates; so the claim at width v is the conjunction of v renamed copies of the claim for one
coordinate, and holds for every v when it holds for one. This is an argument about the code's shape
(the list comprehensions in ``merge`` and ``_finish``), checked by reading, not by a solver.
""")

# --- the production Triton kernels' index logic (items KER-*, spec/kernels.py) ---------------------

assumption("A-TRITON-INT", "Triton's integer semantics, as the kernel index obligations model them", statement="""
Kernel integers are two's-complement i32 or i64. An integer argument is passed as i32 when its value fits
in [−2^31, 2^31), else as i64; a Python int constant is i32 when it fits; i32 ⊕ i32 gives i32 and any i64
operand gives i64; .to(tl.int64) sign-extends, .to(tl.int32) keeps the low 32 bits. tl.arange(0, n) holds
the lanes 0 … n−1; x[:, None] and x[None, :] broadcast along rows and columns; tl.minimum, tl.maximum,
tl.where and the comparisons are exact; range(lo, hi, step) inside a kernel visits lo, lo + step, … < hi
and tl.static_range is unrolled; tl.program_id(a) lies in [0, grid_a) and tl.num_programs(a) is grid_a;
tl.cumsum(x, 0) and tl.sum(x, 0) of a 0/1 integer tile are its inclusive prefix sums and its total.
(Triton 3.6; the obligations require every operation to stay inside its width instead of modelling the
wrap-around.)
""")

assumption("A-TRITON-DIV", "Triton's signed integer // and % truncate toward zero", statement="""
On signed integers Triton lowers // to LLVM sdiv and % to srem (C semantics: the quotient is truncated
toward zero, the remainder has the dividend's sign); the interpreter computes the same. Python's floor
division differs for negative operands; the symbolic model uses the truncating form.
""")

assumption("A-TRITON-MASKED-LOAD", "a masked lane of tl.load / tl.store touches no memory", statement="""
tl.load(p, mask=m, other=x) reads only the lanes where m holds and gives x elsewhere; tl.store(p, v, mask=m)
writes only where m holds. A masked-off lane's address may be anything (even wrapped): it is never
dereferenced. Unmasked loads and stores read or write every lane.
""")

assumption("A-TRITON-TMA", "a TMA descriptor load reads only inside the described tensor", statement="""
A tensor descriptor built by the host from a tensor's true shape and strides (host._descriptors) loads a
block at int32 coordinates with hardware bounds checks: elements outside the shape are not read and come
back as zeros. The obligations check that the coordinates fit int32; the rest is this assumption.
""")

assumption("A-TRITON-LAUNCH", "CUDA's grid limits", statement="""
A launch has grid.x < 2^31 and grid.y ≤ 65535 programs (a larger grid fails to launch with an error,
never silently); the kernels' program ids are i32.
""")

assumption("A-TRITON-CODEGEN", "Triton compiles a kernel to code that has the kernel's source semantics", statement="""
The loads, stores and integer operations the compiled kernel performs are the ones its source describes
under A-TRITON-INT and A-TRITON-MASKED-LOAD, and the shared memory the compiler itself manages (operand
tiles, layout conversions, pipelining buffers) is synchronised between warps. The index obligations run
the source, so a fault in the compiled code is outside what they show. Known exception, avoided by the
host without its cause found: on the H200 (Triton 3.6) the varlen forward with BLOCK_DV < BLOCK_D faulted
(illegal memory accesses, NaN rows, run to run) at in-bounds indices; varlen V tiles are now padded to
BLOCK_D (host._pad_dv), the width that passed there.
""")

assumption("A-KER-HOST-LIMITS", "what the Triton host passes to the kernels", statement="""
The validated call (kernels/attention/api.validate): q, k, v 4-D with matching B, Nk and head dims
1 ≤ D, Dv ≤ 256, Hq = GROUPS·Hkv, varlen only with batch 1; the Triton host (host.py): lengths at most
host.MAX_LEN = 2^29 and window sides clamped to [0, max(Nq, Nk)] (host._index_args, executed symbolically
by KER-TILES-HOST), head dims padded to BLOCK_D ≥ D, forward calls with Nq ≥ 1, backward calls with
Nq, Nk ≥ 1, mask strides 0 on broadcast dims, and the launch grids host.forward/backward build. torch's
layouts: strides are non-negative and a tensor's storage span Σ (size − 1)·stride is below 2^62 elements.
""")

assumption("A-GLUON-SEMANTICS", "Gluon's language as the Gluon index obligations model it", statement="""
Triton 3.6's Gluon (triton.experimental.gluon), as proofs/support/gluon_sym.py runs it: integers, pointers,
program ids and truncating division as in A-TRITON-INT and A-TRITON-DIV; gl.arange(0, n, layout) holds the lanes
0 … n−1 whatever the layout, gl.expand_dims(x, a) broadcasts along the other axis, gl.convert_layout and the
layouts change no value; gl.warp_specialize runs each partition function on its argument tuple (the addresses a
partition forms do not depend on the others' progress; the synchronisation itself — mbarriers, fences, the
wgmma waits — is not modelled and not claimed); shared-memory descriptors' .index(i) and .slice(s, n, dim) pick
rows i and s … s + n − 1 of their allocation; in gl.inline_asm_elementwise with pack = 1, "ld.….b32 $r, [$k]" /
"red.….s32 [$k]" (the semaphores) read / add one 32-bit word at operand k's address, and an asm's other
instructions (fences, bulk-group waits, branches) touch no memory.
""")

assumption("A-GLUON-TMA", "what a Gluon TMA copy reads or writes", statement="""
tma.async_copy_global_to_shared / async_copy_shared_to_global, and common.tma_reduce_add (Triton's
async_tma_reduce, add: it writes the cells a store would), with a TensorDescriptor of global shape S, row
stride R (elements) and block shape K, at int32 coordinates c, touch the cells c + i (0 ≤ i < K) that lie inside
S, at base + row·R + column; cells outside S are not touched (loads fill zeros). The obligations prove every
box inside S and inside its own (batch, head), so the clipping is never relied on.
""")

assumption("A-GLUON-EMPTY-LIKE", "torch.empty_like of a tensor the Gluon host reads through a row view", statement="""
torch.empty_like(t) (preserve_format) of a (B, H, N, D) tensor that layout.row_view accepts is laid out
compactly as (B, H, N, D) or as (B, N, H, D) (size-1 dims aside): its row view has row stride D or H·D. The
forward's out and the backward's dK, dV are made so; the Gluon index obligations take their row stride to be
one of these two (the dK/dV epilogue forms row·stride in int32, which this bounds by 65535·128·127 < 2^31).
""")

assumption("A-GLUON-DEVICE-MEMORY", "the Gluon kernels' tensors fit a device", statement="""
q's elements are distinct memory (row_view admits no overlapping rows), so B·Hq·N·128·2 bytes ≤ the device's
memory ≤ 2^38 bytes (an H200 has 141 GB), i.e. B·Hq·N ≤ 2^30. The Gluon kernels compute row indices (b·H + h)·N
+ n in int32 (the lse offset, the backward's δ/lse rows, the TMA row coordinates): this is what keeps them
below 2^31. Checked by the router: dispatch.gluon_rule refuses a call with B·Hq·N > 2^30
(GLUON_MAX_ROWS), so the Gluon kernels never run beyond it (tests/kernels/test_kernel_dispatch.py); the
obligations assume it. (At head dim 64 a device could hold 2^31 rows of q:
there the bound is the router's check alone.)
""")

assumption("A-KER-CU-VALID", "cu_seqlens as the host validated them", statement="""
The int32 cu_seqlens_q / cu_seqlens_k tables the kernels load are the ones api._seqlens checked: they
start at 0, never decrease and end at the packed length; max_q / max_k are the longest sequence. The
obligations model a load of entry b as a value in [0, total], monotone in b, with consecutive entries at
most max_q (max_k) apart.
""")

assumption("A-KER-PLAN-LISTS", "the block-sparse walk lists as plan.tile_plan writes them", statement="""
For each row of the tile grid, tile_plan writes n_partial + n_full ≤ the row's width entries: the present,
reached tiles that are not full (ascending), then the full ones (ascending), each present column at most
once, every entry a column index below the width. KER-BOUNDS-PLAN runs tile_plan symbolically (its column
loop by induction) and proves the bound on the counts, that every entry it writes is a column below the
width and that the partial ones go to slots [0, n_partial), the full ones to [n_partial, n_partial +
n_full); what stays assumed is that every one of those slots is written (and the order and uniqueness,
which KER-TILES uses). tests/kernels/test_kernel_walk_lists.py checks the lists against brute-force
enumeration of every pair. The Gluon records (KER-BOUNDS-GLUON-FWD, -BWD) use the same statement and no more:
the program's row's counts ≥ 0 summing to at most the width, every count at most the width, the entries at
slots below the sum columns below the width, every other entry (past the counts: the lists are torch.empty's)
unspecified.
""")

assumption("A-KER-SCHED", "the persistent Gluon forward's schedule as gluon/schedule.py deals it", statement="""
For each of the P CTAs of the forward's 1-D grid, count[c] ≤ W entries; entry i < count[c] of row c names an
item of the call — batch b < B, query head h < Hq, query block m < N/128 — and base in [0, 2^30) (the key tiles
the CTA ran before it, mod 2^30); every item once. P ≥ 1 is at most the item count, W at most every item, and
P·W below 2^31 (the schedule raises otherwise). KER-BOUNDS-GLUON-FWD models each schedule read that its own
claim shows to lie in the CTA's row below its count as such an entry. tests/kernels/test_gluon_schedule.py
checks both ways of dealing (rounds, in order) on random tile grids: every item exactly once, the counts, the
fields' ranges, base the running sum of the CTA's earlier items' tiles.
""")

assumption("A-FP-EXP-ACC", "accuracy of the device exp, log and division (the error bound's non-IEEE steps)", statement="""
exp, log and the kernels' fp32 division are device approximations, not IEEE operations, so no solver
checks them. The error bound EXT-FP-ERROR assumes: for an argument x ≤ 0, the computed exp is
e^x(1 + δ) + η with |δ| ≤ u_e = 2⁻²¹ (eight fp32 units; the MUFU ex2.approx the kernels use is
documented at about two) and 0 ≤ η ≤ 2⁻¹²⁶ (a result below fp32's smallest normal may be flushed
to 0); the kernels' base-2 folding (c·log2 e rounded once to fp32) is charged to the scale as one
rounding; log returns ln x with absolute error ≤ u_e·(1 + |ln x|); the division returns
(a/b)(1 + δ), |δ| ≤ 2⁻²² (div.full.f32: two ulps). The validation's emulation uses exp and log
within an ulp of fp32, so it does not probe these constants.
""")

assumption("A-FP-NORMAL", "no underflow or overflow in the fp32 accumulation", statement="""
The error bound EXT-FP-ERROR models each fp32 +, × as (exact)(1 + δ), |δ| ≤ u = 2⁻²⁴, which holds
(ATT-FP-ERROR-MODEL) when the exact result is normal: products of weights and values, and the
scores, must not fall below 2⁻¹²⁶ in magnitude unless exactly 0 (sums below it are exact and need
nothing), and nothing overflows. Weights that underflow — an exp result flushed to 0, a weight
rounded into fp16's or bf16's subnormals by the cast before P·V — are modelled (absolute η). The
kernels' tensor-core accumulation is assumed to round each addition to nearest in fp32 in some
order; any order of summing b terms has the same bound as the reference's left-to-right order.
""")
