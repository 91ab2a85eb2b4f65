"""Every speculative obligation is proved and every one of its controls refuted with a
counterexample, run in-process with the obligation's own bounds."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine import core
from flashproof.proofs.obligations.speculative import economics, sampler  # noqa: F401 (register the obligations)

SPEC_OBS = sorted(o for o in core.OBLIGATIONS if o.startswith("SPEC-"))


@pytest.mark.parametrize("oid", SPEC_OBS)
def test_obligation_outcome(oid):
    """Every speculative obligation is proved and every control refuted with a counterexample."""
    ob = core.resolve_control(core.OBLIGATIONS[oid])
    out = ob.fn(core.Context(ob.bounds, 60_000, False))
    assert out.status == ob.expected, (oid, out)
    if ob.expected == "refuted":
        assert out.counterexample is not None


def test_every_speculative_obligation_has_a_control():
    bases = {i for i in SPEC_OBS if core.OBLIGATIONS[i].of is None}
    assert bases and bases <= {core.OBLIGATIONS[i].of for i in SPEC_OBS}
