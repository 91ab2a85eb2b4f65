"""Planted bugs in the production Triton kernels' index logic, each a one-place edit of a kernel
function's own source (``kernel_exec.mutate``: the pattern must occur exactly once, so a mutant whose
line left the kernel fails loudly instead of testing nothing). The controls in
``proofs/obligations/kernels/`` run the obligation with the mutated function swapped in by name."""
from __future__ import annotations

from typing import NamedTuple

from flashproof.kernels.attention.triton import bwd, fwd, host, plan

from flashproof.proofs.support.kernel_exec import mutate

__all__ = ["KernelMutant", "MUTANTS", "overrides", "finish_lse_without_log"]

_MODULES = {"fwd": fwd, "bwd": bwd, "plan": plan, "host": host}


class KernelMutant(NamedTuple):
    """``function`` of kernels/attention/triton/``module``.py with ``old`` replaced by ``new``."""

    module: str
    function: str
    old: str
    new: str
    bug: str


MUTANTS = {
    "fwd-full-hi-wider": KernelMutant("fwd", "key_range", "full_hi = tl.minimum(p_lo + right + 1, k_len)",
                                      "full_hi = tl.minimum(p_lo + right + 2, k_len)",
                                      "forward/dQ: the unmasked stage ends one key past the right window edge of "
                                      "the block's first row"),
    "fwd-full-lo-wider": KernelMutant("fwd", "key_range", "full_lo = tl.maximum(p_hi - left, 0)",
                                      "full_lo = tl.maximum(p_hi - left - 1, 0)",
                                      "forward/dQ: the unmasked stage starts one key before the left window edge of "
                                      "the block's last row"),
    "fwd-edge-past-tile": KernelMutant("fwd", "key_range", "hi = tl.minimum(p_hi + right + 1, k_len)",
                                       "hi = tl.minimum(p_hi + right, k_len)",
                                       "forward/dQ: the key walk stops one key early, dropping the tile whose first "
                                       "key is the right window edge"),
    "bwd-full-hi-wider": KernelMutant("bwd", "query_range", "full_hi = tl.minimum(n0 + left - diag + 1, q_len)",
                                      "full_hi = tl.minimum(n0 + left - diag + 2, q_len)",
                                      "dK/dV: the unmasked query stage ends one row past the left window edge of "
                                      "the block's first key"),
    "bwd-full-lo-wider": KernelMutant("bwd", "query_range", "full_lo = tl.maximum(n_hi - right - diag, 0)",
                                      "full_lo = tl.maximum(n_hi - right - diag - 1, 0)",
                                      "dK/dV: the unmasked query stage starts one row before the right window edge "
                                      "of the block's last key"),
    "pair-edge": KernelMutant("fwd", "allowed_pairs", "ok = ok & (kj <= pos + right)", "ok = ok & (kj < pos + right)",
                              "the per-pair predicate drops the key exactly at the right window edge"),
    "plan-full-wider": KernelMutant("plan", "_classes", "full = full & (k1 <= r0 + diag + right)",
                                    "full = full & (k1 <= r0 + diag + right + 1)",
                                    "block-sparse: a tile one key past the right window edge counts as full "
                                    "(walked without the predicate)"),
    "plan-full-lo-wider": KernelMutant("plan", "_classes", "full = full & (k0 >= r1 + diag - left)",
                                       "full = full & (k0 >= r1 + diag - left - 1)",
                                       "block-sparse: a tile one key before the left window edge counts as full"),
    "plan-edge-past-tile": KernelMutant("plan", "_classes", "reach = reach & (k0 <= r1 + diag + right)",
                                        "reach = reach & (k0 < r1 + diag + right)",
                                        "block-sparse: a tile whose first key is the right window edge is not "
                                        "listed (its allowed pair is skipped)"),
    "varlen-k-start": KernelMutant("fwd", "seq_bounds", "k_start = tl.load(CU_K + b)", "k_start = tl.load(CU_Q + b)",
                                   "varlen: the key offset of a sequence is read from cu_seqlens_q"),
    "host-unclamped": KernelMutant("host", "_index_args", "min(w, cap)", "w",
                                   "the host passes window sides unclamped (an int32 side near 2^31 wraps the "
                                   "kernels' edge arithmetic)"),
}


def overrides(name: str) -> dict:
    """{function name: the mutated function} for ``MUTANTS[name]`` (built on demand)."""
    m = MUTANTS[name]
    return {m.function: mutate(getattr(_MODULES[m.module], m.function), m.old, m.new)}


def finish_lse_without_log(state, num):
    """_finish returns lse = m instead of m + log ℓ (a partial's weight loses the factor ℓ)."""
    ne = state.nonempty
    l_safe = num.where(ne, state.l, num.one())
    out = [num.where(ne, num.div(za, l_safe), num.zero()) for za in state.z]
    return out, state.m, state.l, num.where(ne, state.m, num.score_neg_inf())
