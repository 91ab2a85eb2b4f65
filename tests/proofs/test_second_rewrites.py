"""The second solver's two rewrites of a query it cannot decide as exported: field normalisation (ite
cases, denominators cleared, each divisor refuted zero by cvc5) and hypothesis slicing (an unsat
subset of the assertions); each is sound only for what it claims, and a record says when one was
used."""
from __future__ import annotations

import z3

from flashproof.proofs.engine import normalize, runner, second, slicing
from flashproof.proofs.engine.core import Outcome


def _smt2(*formulas) -> str:
    s = z3.Solver()
    s.add(*formulas)
    return s.to_smt2()


def _refute(text: str) -> bool:
    return second._real(second._one_arg(text), 5_000) == "unsat"


def _cancellation():
    """(c/a)·(b/c)·z = (b/a)·z with a, c > 0 under a max: true; z3 proves it, cvc5's coverings
    answers incomplete on the export (the purified divisions vanish on cells)."""
    a, b, c, z = z3.Reals("a b c z")
    m = z3.If(a >= c, a, c)
    return [a > 0, c > 0, z3.Not((c / m) * (b / c) * z * (m / a) == (b / a) * z)]


def test_the_rewrite_decides_a_cancellation_identity_as_z3_does():
    fs = _cancellation()
    s = z3.Solver()
    s.add(*fs)
    assert s.check() == z3.unsat
    st, why = second._by_rewrite(_smt2(*fs), 20_000)
    assert st == "unsat", why
    assert "ite case(s)" in why and "divisor(s) refuted zero" in why


def test_the_rewrite_of_a_false_identity_is_sat():
    a, b, z = z3.Reals("a b z")
    st, why = second._by_rewrite(_smt2(a > 0, b > 0, z3.Not((b / a) * z == b * z)), 20_000)
    assert st == "sat", why


def test_a_divisor_that_may_be_zero_blocks_the_rewrite():
    """x / y with nothing saying y ≠ 0: SMT-LIB leaves x / 0 unspecified, so clearing y would change
    the query; the side query y = 0 is sat, and the rewrite claims nothing."""
    x, y = z3.Reals("x y")
    st, why = second._by_rewrite(_smt2(z3.Not((x / y) * y == x)), 20_000)
    assert st == "unknown" and "not refuted zero" in why


def test_each_case_carries_its_side_queries_and_no_division():
    rw = normalize.cases(_smt2(*_cancellation()), _refute)
    assert rw is not None and len(rw.cases) == 2  # a ≥ c and a < c
    for case in rw.cases:
        assert "(/ " not in second._one_arg(case.text) and case.side
        assert all(_refute(common) or _refute(own) for common, own in case.side)


def test_queries_outside_the_rewrite_are_left_alone():
    x, n = z3.Real("x"), z3.Int("n")
    assert normalize.cases(_smt2(x * x < 0), _refute) is None  # no division: nothing to clear
    assert normalize.cases(_smt2(z3.ToReal(n) / 2 > x), _refute) is None  # integers


def _cluttered():
    """p < Hq·B, r < Nq ⇒ p·Nq + r < B·Hq·Nq (KER-BOUNDS' offset bound), after ~40 facts about
    unrelated strides that share B, Hq and Nq."""
    B, Hq, Nq, p, r = z3.Ints("B Hq Nq p r")
    facts = [B >= 1, Hq >= 1, Nq >= 1, p >= 0, p < Hq * B, r >= 0, r < Nq]
    for k in range(10):
        s0, s1, s2 = z3.Ints(f"sa{k} sb{k} sc{k}")
        facts += [s0 >= 0, s1 >= 0, s2 >= 0, s0 * (B - 1) + s1 * (Hq - 1) + s2 * (Nq - 1) <= 2 ** 62]
    return facts + [z3.Not(p * Nq + r < B * Hq * Nq)]


def test_slices_keep_the_goal_and_grow():
    fs = _cluttered()
    subsets = slicing.levels(_smt2(*fs))
    assert subsets and all(kept < total == len(fs) for kept, total, _ in subsets)
    kept = [k for k, _, _ in subsets]
    assert kept == sorted(kept)
    assert "sa0" not in subsets[0][2]  # the unrelated strides are not in the first slice


def test_an_unsat_slice_decides_the_query_and_says_so():
    v = second.decide(_smt2(*_cluttered()), 20_000)
    assert v.status == "unsat", v.detail


def test_a_sat_slice_is_never_an_answer(monkeypatch):
    """The query is unsat only through a chain the slices drop (q ≤ 0 tied to p ≥ 0 by u and w); with
    cvc5 made to give up on the full query, every slice is sat, and the verdict is unknown, not sat."""
    p, q, u, w = z3.Ints("p q u w")
    full = second._one_arg(_smt2(p >= 0, u == p + 1, w == u, q == w, q <= 0, z3.Not(p < 0)))
    real = second._cvc5
    answers = []

    def give_up_on_full(text, ms, options, logic="ALL"):
        if text == full:
            return "unknown", "planted"
        r = real(text, ms, options, logic)
        answers.append(r[0])
        return r

    monkeypatch.setattr(second, "_cvc5", give_up_on_full)
    v = second._int_portfolio(full, 10_000, second.logic_of(full), second.versions(), __import__("time").perf_counter())
    assert v.status == "unknown" and "sat" in answers, (v, answers)


def test_a_sat_slice_whose_model_extends_decides_a_sat_query(monkeypatch):
    """A sat query that cvc5 (planted) gives up on as exported: the first slice (the goal with p ≥ 0)
    is sat, and its model, added to the whole query as equations, is sat — so the query is, and the
    verdict says it was reached on a rewritten form. (That a model which does not extend is never an
    answer: the test above, whose slices are sat and whose verdict stays unknown.)"""
    p, q, u = z3.Ints("p q u")
    full = second._one_arg(_smt2(p >= 0, u == p + 1, q == u, q >= 1, z3.Not(p < 0)))
    real = second._cvc5

    def give_up_on_full(text, ms, options, logic="ALL"):
        return ("unknown", "planted") if text == full else real(text, ms, options, logic)

    monkeypatch.setattr(second, "_cvc5", give_up_on_full)
    v = second._int_portfolio(full, 10_000, second.logic_of(full), second.versions(), __import__("time").perf_counter())
    assert v.status == "sat" and v.detail.startswith(second.REWRITTEN) and "values added" in v.detail, v


def test_a_record_names_the_queries_decided_on_a_rewritten_form():
    query = ("(assert false)", "unsat", 0.01, "goal")
    plain = second.Verdict("cvc5", "1.4", "unsat", 0.1, "coverings")
    rewritten = second.Verdict("cvc5", "1.4", "unsat", 0.1, f"{second.REWRITTEN} (field normalisation): 2 cases")
    rep = runner.solver_entries(Outcome("proved"), [query, query], [plain, rewritten])
    entry = rep.solvers[1]
    assert rep.trust == "two solvers" and entry["rewritten"] == 1
    assert "1 of 2 queries decided on a rewritten form" in entry["detail"]
    rep = runner.solver_entries(Outcome("proved"), [query], [plain])
    assert rep.solvers[1]["rewritten"] == 0 and "detail" not in rep.solvers[1]
