"""The mutant corpus states its bugs: every attention mutant has a one-line docstring naming the
bug, and every speculative mutant replaces exactly one field of the reference's ``Rules``, a
replaced function carrying a one-line docstring."""
from __future__ import annotations

import inspect

import pytest

from flashproof.proofs.mutants import attention as att_mutants, speculative as spec_mutants
from flashproof.verified import speculative as sp

ATTENTION = [name for name, fn in inspect.getmembers(att_mutants, inspect.isfunction)
             if fn.__module__ == att_mutants.__name__ and not name.startswith("_")]


def _one_line(doc: str | None) -> bool:
    return bool(doc) and "\n" not in doc.strip()


def test_the_corpus_is_not_empty():
    assert len(ATTENTION) >= 10 and len(spec_mutants.MUTANTS) >= 5


@pytest.mark.parametrize("name", ATTENTION)
def test_attention_mutant_names_its_bug_in_one_line(name):
    assert _one_line(getattr(att_mutants, name).__doc__), f"{name}: expected a one-line docstring naming the bug"


@pytest.mark.parametrize("name", sorted(spec_mutants.MUTANTS))
def test_speculative_mutant_replaces_one_field(name):
    rules = spec_mutants.MUTANTS[name]
    changed = [f for f in sp.Rules._fields if getattr(rules, f) is not getattr(sp.RULES, f)]
    assert len(changed) == 1, f"{name}: expected one replaced field of Rules, received {changed}"
    value = getattr(rules, changed[0])
    if callable(value):
        assert _one_line(value.__doc__), f"{name}: the replacing function needs a one-line docstring"
