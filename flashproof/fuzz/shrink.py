"""A greedy pass over a failing ``ProblemSpec`` after hypothesis has shrunk it.

Hypothesis shrinks the choice sequence behind a spec, and on some seeds stops in a local minimum
(a GQA problem with 22 × 114 rows that deviates as well at 1 × 1). ``minimize(spec, fails)``
tries, in order, each simpler variant of the spec — one adversarial family switched off, the
batch, heads, head dims or lengths made smaller, the seed 0 — and keeps the first that still
``fails``; it repeats until no variant fails or ``seconds`` are spent. Every accepted step lowers
(sum of sizes, families on, seed ≠ 0), so the pass ends. Variants that are not valid specs are
skipped.
"""
from __future__ import annotations

import time

from .problem import DENSITY, ProblemSpec, _check

__all__ = ["minimize", "minimize_batched", "variants"]


def _smaller(n: int) -> list:
    return sorted({x for x in (1, 2, n // 2, n - 1) if 1 <= x < n})


def variants(s: ProblemSpec):
    """Simpler specs than ``s``, simplest changes first."""
    if s.seqlens is not None:
        yield s._replace(seqlens=None)
        if len(s.seqlens) > 1:
            for i in range(len(s.seqlens)):
                rest = s.seqlens[:i] + s.seqlens[i + 1:]
                yield s._replace(seqlens=rest, n_q=sum(a for a, _ in rest), n_k=sum(b for _, b in rest))
    for field, off in (("poison", None), ("mask_kind", "none"), ("empty_rows", False), ("window", None),
                       ("causal", False), ("huge_logits", 0.0), ("ties", False), ("zero_q", False),
                       ("late_max", False), ("noncontig", False), ("sparse", False), ("density", DENSITY)):
        if getattr(s, field) != off:
            yield s._replace(**{field: off})
    if s.dv != s.d:
        yield s._replace(dv=s.d)
    if s.batch > 1:
        yield s._replace(batch=1)
    group = s.heads_q // s.heads_kv
    if s.heads_kv > 1:
        yield s._replace(heads_kv=1, heads_q=group)
    if group > 2:
        yield s._replace(heads_q=2 * s.heads_kv)
    if group > 1:
        yield s._replace(heads_q=s.heads_kv)
    if s.seqlens is None:
        for n in _smaller(s.n_q):
            yield s._replace(n_q=n)
        for n in _smaller(s.n_k):
            yield s._replace(n_k=n)
    for n in _smaller(s.d):
        yield s._replace(d=n, dv=n if s.dv == s.d else s.dv)
    for n in _smaller(s.dv):
        yield s._replace(dv=n)
    if s.seed != 0:
        yield s._replace(seed=0)


def _valid(s: ProblemSpec) -> bool:
    try:
        _check(s)
    except ValueError:
        return False
    return True


def minimize(spec: ProblemSpec, fails, *, seconds: float = 30.0) -> ProblemSpec:
    """The simplest spec reachable from ``spec`` by ``variants`` steps on which ``fails(spec)``
    holds (``spec`` itself is assumed to fail)."""
    end = time.monotonic() + seconds
    current = spec
    improved = True
    while improved and time.monotonic() < end:
        improved = False
        for cand in variants(current):
            if time.monotonic() >= end:
                break
            if _valid(cand) and fails(cand):
                current, improved = cand, True
                break
    return current


def minimize_batched(spec: ProblemSpec, fails_many, *, seconds: float, batch: int) -> tuple:
    """``minimize`` for a costly ``fails`` (each candidate in a fresh process):
    ``fails_many(candidates) -> [bool, ...]`` judges up to ``batch`` variants at once, and the first
    failing one in ``variants`` order is kept. Returns (the simplest failing spec found, steps taken)."""
    end = time.monotonic() + seconds
    current, steps = spec, 0
    while time.monotonic() < end:
        cands = [c for c in variants(current) if _valid(c)]
        found = None
        for i in range(0, len(cands), batch):
            if time.monotonic() >= end:
                break
            group = cands[i:i + batch]
            found = next((c for c, bad in zip(group, fails_many(group)) if bad), None)
            if found is not None:
                break
        if found is None:
            break
        current, steps = found, steps + 1
    return current, steps
