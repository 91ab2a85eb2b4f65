"""Every attention obligation proves and every one of its negative controls is refuted with a
counterexample, run in-process with the obligation's own bounds. The slow ones (fp32, sympy
gradients, enumeration) are marked slow; `make prove` runs them all."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine.core import Context
from flashproof.proofs.engine.discover import collect

OBS, _ERRS = collect()
MINE = sorted(i for i in OBS if i.startswith("ATT-"))
#: proofs (not controls) slower than ~2 s on 2 cores; every control runs by default
SLOW_PROOFS = ("fp32", "ATT-GRAD", "ATT-TILED-MASKS", "ATT-EXP2", "ATT-MEMORY")


def _params(ids):
    return [pytest.param(i, marks=pytest.mark.slow) if OBS[i].of is None and any(s in i for s in SLOW_PROOFS) else i
            for i in ids]


def _ctx(ob):
    return Context(dict(ob.bounds), 60_000, False)


def test_every_attention_obligation_has_a_control():
    bases = {i for i in MINE if OBS[i].of is None}
    with_control = {OBS[i].of for i in MINE if OBS[i].of}
    assert bases and bases <= with_control


@pytest.mark.parametrize("ob_id", _params([i for i in MINE if OBS[i].of is not None]))
def test_control_is_refuted(ob_id):
    ob = OBS[ob_id]
    out = ob.fn(_ctx(ob))
    assert out.status == "refuted", (ob_id, out.status, out.detail)
    assert out.counterexample, ob_id


@pytest.mark.parametrize("ob_id", _params([i for i in MINE if OBS[i].of is None]))
def test_obligation_is_proved(ob_id):
    ob = OBS[ob_id]
    out = ob.fn(_ctx(ob))
    assert out.status == "proved", (ob_id, out.status, out.detail)
