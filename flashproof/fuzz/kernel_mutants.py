"""Deliberately broken variants of ``attention`` — the corpus the fuzzer must catch.

Each mutant has ``attention``'s signature and a one-line docstring naming its bug; it calls the
kernels' internal entry ``flashproof.kernels.attention.api._attention`` with the bug switched on (the
public ``attention()`` has no such argument). They run the torch backend by default;
``backend="triton"`` runs the same bug as a ``tl.constexpr`` switch of the Triton kernel (the router
never sends a mutant to Gluon). ``MUTANTS`` maps the bug switch name to the callable.
"""
from __future__ import annotations

from flashproof.kernels.attention.api import BUGS, _attention


def _mutant(bug, doc):
    def run(q, k, v, *, backend="torch", **kwargs):
        return _attention(q, k, v, backend=backend, bugs=frozenset({bug}), **kwargs)
    run.__name__ = run.__qualname__ = f"attention_{bug}"
    run.__doc__ = doc
    return run


MUTANTS = {
    "no_alpha": _mutant("no_alpha", "Drops the α = e^(m_old − m_new) rescale of ℓ and acc when the running max grows."),
    "no_max": _mutant("no_max", "Never subtracts the running max: exp(s) overflows to inf for large logits."),
    "tile_floor": _mutant("tile_floor", "Counts key tiles as Nk // BLOCK_N (floor): the ragged last tile is skipped."),
    "unguarded_inf": _mutant("unguarded_inf", "Leaves (−inf) − (−inf) unguarded: rows whose first tiles are fully masked turn NaN."),
    "gqa_map": _mutant("gqa_map", "Maps query head h to kv head h % Hkv instead of h // (Hq // Hkv)."),
}
assert set(MUTANTS) == BUGS, "every bug switch has exactly one mutant"

globals().update({f.__name__: f for f in MUTANTS.values()})
__all__ = ["MUTANTS", *(f.__name__ for f in MUTANTS.values())]
