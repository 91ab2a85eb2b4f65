"""Rational distribution tables for the speculative checks: seeded, with the adversarial shapes of
DESIGN.md (zeros in p_draft, p_target = p_draft, disjoint supports, point masses)."""
from __future__ import annotations

import random
from fractions import Fraction

__all__ = ["rational_row", "step_cases", "PrefixTables"]

SHAPES = ("random", "draft-zeros", "equal", "disjoint", "point-mass")


def rational_row(rng: random.Random, V: int, *, zeros: float = 0.0, support=None) -> list:
    """A random distribution over V tokens with small denominators; ``support`` restricts it."""
    allowed = list(range(V)) if support is None else list(support)
    w = [0] * V
    for y in allowed:
        w[y] = 0 if rng.random() < zeros else rng.randint(1, 6)
    if sum(w) == 0:
        w[rng.choice(allowed)] = 1
    t = sum(w)
    return [Fraction(x, t) for x in w]


def step_cases(V: int, n: int, seed: int = 0):
    """n (shape, p_target, p_draft) triples over V tokens, cycling through SHAPES."""
    rng = random.Random(f"step-{V}-{seed}")
    for i in range(n):
        shape = SHAPES[i % len(SHAPES)]
        if shape == "random":
            pt, pd = rational_row(rng, V, zeros=0.2), rational_row(rng, V, zeros=0.2)
        elif shape == "draft-zeros":
            pt, pd = rational_row(rng, V), rational_row(rng, V, zeros=0.6)
        elif shape == "equal":
            pt = rational_row(rng, V, zeros=0.3)
            pd = list(pt)
        elif shape == "disjoint":
            cut = rng.randint(1, V - 1) if V > 1 else 1
            pt = rational_row(rng, V, support=range(cut))
            pd = rational_row(rng, V, support=range(cut, V)) if cut < V else list(pt)
        else:
            hot = rng.randrange(V)
            pt = [Fraction(int(y == hot)) for y in range(V)]
            pd = rational_row(rng, V)
        yield shape, pt, pd


class PrefixTables:
    """Prefix-dependent p_target / p_draft: each prefix gets its own seeded rational row.

    ``position_only=True`` makes a row depend on the prefix length only (the i.i.d.-per-position
    setting of the P(N = n) product formula)."""

    def __init__(self, V: int, seed: int, *, position_only: bool = False, shape: str = "random"):
        self.V, self.seed, self.position_only, self.shape = V, seed, position_only, shape
        self._cache: dict = {}

    def _rows(self, prefix: tuple):
        key = len(prefix) if self.position_only else tuple(prefix)
        if key not in self._cache:
            rng = random.Random(f"tables-{self.seed}-{key}")
            shape = self.shape if self.shape != "mixed" else SHAPES[rng.randrange(len(SHAPES))]
            cases = list(step_cases(self.V, len(SHAPES), seed=rng.randrange(10 ** 9)))
            _, pt, pd = cases[SHAPES.index(shape)]
            self._cache[key] = (pt, pd)
        return self._cache[key]

    def p_target(self, prefix):
        return self._rows(tuple(prefix))[0]

    def p_draft(self, prefix):
        return self._rows(tuple(prefix))[1]

