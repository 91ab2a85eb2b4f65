"""``FPNum`` that remembers what each exp/log value was applied to, for dependence checks.

``FPNum`` models exp and log as fresh constants constrained by side facts about their argument; a
term that uses such a constant therefore depends on that argument too. ``depends_on(term, names)``
returns the names among ``names`` that a term reaches: its free constants, and, through every
exp/log constant it uses, the free constants of that constant's argument (transitively). A term
that reaches none of them is a function of the other inputs alone.
"""
from __future__ import annotations

import z3

from .fpnum import FPNum

__all__ = ["FPTraceNum"]


class FPTraceNum(FPNum):
    """FPNum with ``applied``: exp/log constant name → the argument term it stands for."""

    def __init__(self, fmt: str):
        super().__init__(fmt)
        self.applied: dict[str, z3.ExprRef] = {}

    def exp(self, s):
        e = super().exp(s)
        self.applied[e.decl().name()] = s
        return e

    def log(self, x):
        r = super().log(x)
        self.applied[r.decl().name()] = x
        return r

    def depends_on(self, term, names: set[str]) -> set[str]:
        """The names in ``names`` that ``term`` reaches (directly or through exp/log arguments)."""
        if not isinstance(term, z3.ExprRef):
            return set()
        seen: set[int] = set()
        found: set[str] = set()
        stack = [term]
        while stack:
            t = stack.pop()
            if t.get_id() in seen:
                continue
            seen.add(t.get_id())
            if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                name = t.decl().name()
                if name in names:
                    found.add(name)
                if name in self.applied:
                    stack.append(self.applied[name])
                continue
            stack.extend(t.children())
        return found
