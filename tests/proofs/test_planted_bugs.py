"""Each planted bug of issue 15 is refuted, with a counterexample, by the obligation named for it.

The mutant is patched in at the place its docstring names and the *obligation's own* function is
run (not the control wrapper), so the test states which checker catches which bug; a second test
checks that ``make prove`` registers that pairing as a control. Slow checkers are marked slow."""
from __future__ import annotations

from unittest.mock import patch

import pytest

from flashproof.proofs.engine.core import Context
from flashproof.proofs.engine.discover import collect
from flashproof.proofs.mutants import attention as mutants
from flashproof.verified import attention as att
from flashproof.verified.numbers import FloatNum, IntervalNum

OBS, _ERRS = collect()

#: (mutant, where it is planted, attribute, obligation that must refute it, slow?)
CAUGHT = [
    ("pair_terms_delta_from_values", att, "_pair_terms", "ATT-GRAD-SOFTMAX", False),
    ("pair_terms_dv_unnormalized", att, "_pair_terms", "ATT-GRAD-CHAIN", False),
    ("pair_update_dk_unscaled", att, "_pair_update", "ATT-GRAD-CHAIN", False),
    ("accumulate_ignores_mask", att, "_accumulate", "ATT-GRAD-SCHEDULE", False),
    ("gradient_buffers_dk_nq_rows", att, "_gradient_buffers", "ATT-GRAD-SCHEDULE", False),
    ("schedule_keys_up_to_nq", att, "_schedule", "ATT-GRAD-SCHEDULE", False),
    ("pair_visit_dk_row_i", att, "_pair_visit", "ATT-GRAD-SCHEDULE", False),
    ("gradient_buffers_dk_nq_rows", att, "_gradient_buffers", "ATT-GRAD", True),
    ("schedule_keys_up_to_nq", att, "_schedule", "ATT-GRAD", True),
    ("gradient_buffers_dk_nq_rows", att, "_gradient_buffers", "ATT-MEMORY-BWD", True),
    ("schedule_keys_up_to_nq", att, "_schedule", "ATT-MEMORY-BWD", True),
    ("dense_den_sums_masked", att, "_dense", "ATT-ORACLE-DENSE", False),
    ("float_log_base2", FloatNum, "log", "ATT-ORACLE-FLOAT", False),
    ("interval_const_via_float", IntervalNum, "const", "ATT-ORACLE-INTERVAL", False),
    ("summarize_z_unguarded", att, "summarize", "ATT-FP-POISON-fp16", True),
    ("pair_update_dq_unguarded", att, "_pair_update", "ATT-FP-POISON-fp16", True),
    ("summarize_exp_unguarded", att, "summarize", "ATT-FP-POISON-fp16", True),
]


def _params():
    return [pytest.param(*row[:4], id=f"{row[0]}->{row[3]}", marks=[pytest.mark.slow] if row[4] else [])
            for row in CAUGHT]


def _run(ob_id):
    ob = OBS[ob_id]
    return ob.fn(Context(dict(ob.bounds), 60_000, False))


@pytest.mark.parametrize("mutant, owner, attr, ob_id", _params())
def test_planted_bug_is_refuted_by_its_obligation(mutant, owner, attr, ob_id):
    with patch.object(owner, attr, getattr(mutants, mutant)):
        out = _run(ob_id)
    assert out.status == "refuted", (mutant, ob_id, out.status, out.detail)
    assert out.counterexample, (mutant, ob_id)


def test_without_the_bug_the_same_obligations_prove():
    for ob_id in sorted({row[3] for row in CAUGHT if not row[4]}):
        out = _run(ob_id)
        assert out.status == "proved", (ob_id, out.status, out.detail)


@pytest.mark.parametrize("mutant, owner, attr, ob_id", _params())
def test_make_prove_registers_the_pairing_as_a_control(mutant, owner, attr, ob_id):
    controls = [c for c in OBS.values() if c.of == ob_id]
    assert controls, f"{ob_id} has no control"
    sources = [c.fn.__code__.co_names for c in controls]
    assert any(mutant in names for names in sources), f"no control of {ob_id} plants {mutant}"


#: speculative planted bugs: (the control that plants it, the obligation it mutates)
SPECULATIVE = [("SPEC-ONE-HOT-CYCLE/first-draft-row", "SPEC-ONE-HOT-CYCLE"),
               ("SPEC-GREEDY-TIES/last-argmax", "SPEC-GREEDY-TIES"),
               ("SPEC-QUANTISED-DRAW/weights-rounded", "SPEC-QUANTISED-DRAW"),
               ("SPEC-QUANTISED-DRAW/uniform-rounded", "SPEC-QUANTISED-DRAW")]


@pytest.mark.parametrize("control_id, ob_id", SPECULATIVE)
def test_speculative_planted_bug_is_refuted_and_the_obligation_proves(control_id, ob_id):
    assert OBS[control_id].of == ob_id
    out = _run_control(control_id)
    assert out.status == "refuted" and out.counterexample, (control_id, out.status, out.detail)
    assert _run(ob_id).status == "proved", ob_id


def _run_control(control_id):
    base = OBS[OBS[control_id].of]
    return OBS[control_id].fn(Context(dict(base.bounds), 60_000, False))
