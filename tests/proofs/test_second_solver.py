"""The second solver: z3's SMT-LIB export read by cvc5 / Bitwuzla, agreement and disagreement in the
records, and the vacuity check of unsat queries (with planted contradictory hypotheses)."""
from __future__ import annotations

import sys
import types

import pytest
import z3

from flashproof.proofs.engine import core, runner, second, trail
from flashproof.proofs.engine.core import Context, Obligation, Outcome, z3_prove, z3_witness

CTX = Context({}, 20_000, False)


def _smt2(*formulas, logic=None) -> str:
    s = z3.SolverFor(logic) if logic else z3.Solver()
    s.add(*formulas)
    return s.to_smt2()


# ------------------------------------------------------------------ the one rewrite of z3's export

def test_one_argument_operators_become_their_argument():
    x, y = z3.Reals("x y")
    text = second._one_arg(_smt2(z3.Sum([x * y]) > 0, z3.And(z3.Or(x > 1)), z3.Product([x]) < 3, -x < 5))
    assert "(+ " not in text and "(* x )" not in text and "(or " not in text
    assert "( - x )" in text  # unary minus is SMT-LIB and stays
    assert "( * x y )" in text  # a product of two stays


def test_empty_conjunction_and_disjunction_become_true_and_false():
    """z3 exports And() / Or() of no arguments as the bare symbols ``and`` / ``or`` (KER-TILES-PLAN
    builds them); they are read as z3's values, true and false, and the query decides as z3 does."""
    x = z3.Bool("x")
    text = second._one_arg(_smt2(z3.And(x, z3.And([]), z3.Not(z3.Or([])))))
    assert "( and x true ( not false ) )" in text
    assert second.decide(_smt2(z3.And(x, z3.And([]))), 10_000).status == "sat"
    assert second.decide(_smt2(z3.And(x, z3.Or([]))), 10_000).status == "unsat"
    # a constant that z3 names "and" is exported unquoted (not SMT-LIB): an error, never a verdict
    assert second.decide(_smt2(z3.Bool("and") == x), 10_000).status == "error"


def test_rewrite_keeps_quoted_symbols():
    a = z3.Real("a(b) c")
    text = second._one_arg(_smt2(z3.Sum([a]) > 0))
    assert "|a(b) c|" in text and "(+" not in text


# ------------------------------------------------------------------ decisions on small queries

def test_cvc5_decides_nonlinear_real_queries():
    x, y = z3.Reals("x y")
    unsat = second.decide(_smt2(x * x + y * y < 0), 10_000)
    sat = second.decide(_smt2(x * y > 2, x < 0), 10_000)
    assert (unsat.name, unsat.status) == ("cvc5", "unsat")
    assert (sat.name, sat.status) == ("cvc5", "sat")
    assert unsat.version and unsat.seconds >= 0


def test_cvc5_decides_integer_division():
    n, b = z3.Ints("n b")
    v = second.decide(_smt2(n >= 1, b >= 1, (n + b - 1) / b * b < n), 10_000)
    assert v.status == "unsat"


def test_bitwuzla_decides_fp16_and_cvc5_fp_exp_decides_bf16():
    x = z3.FP("x", z3.Float16())
    rm = z3.RNE()
    nan = second.decide(_smt2(z3.fpIsNaN(z3.fpSub(rm, x, x)), z3.fpIsInf(x), logic="QF_FP"), 10_000)
    never = second.decide(_smt2(z3.fpLT(x, x), logic="QF_FP"), 10_000)
    assert (nan.name, nan.status) == ("bitwuzla", "sat")
    assert (never.name, never.status) == ("bitwuzla", "unsat")
    y, w = z3.FPs("y w", z3.FPSort(8, 8))
    bf = second.decide(_smt2(z3.fpEQ(z3.fpAdd(rm, y, w), y), z3.Not(z3.fpIsZero(w)), logic="QF_FP"), 10_000)
    assert (bf.name, bf.status) == ("cvc5", "sat") and "fp-exp" in bf.detail  # Bitwuzla's PyPI build refuses FP(8, 8)


# ------------------------------------------------------------------ records: agreement, disagreement, tiers

def _q(answer, purpose="goal"):
    return ("(assert true)", answer, 0.01, purpose)


def test_entries_agree_one_solver_and_disagree():
    out = Outcome("proved", solver="z3")
    agree = second.Verdict("cvc5", "1", "unsat", 0.1)
    sv, trust, dis, _ = runner.solver_entries(out, [_q("unsat")], [agree])
    assert trust == "two solvers" and not dis and sv[1]["status"] == "proved" and sv[1]["agreed"] == 1
    gave_up = second.Verdict("cvc5", "1", "unknown", 1, "timeout")
    sv, trust, dis, _ = runner.solver_entries(out, [_q("unsat"), _q("unsat")], [agree, gave_up])
    assert trust == "one solver" and sv[1]["status"] == "unknown" and not dis
    sv, trust, dis, _ = runner.solver_entries(out, [_q("unsat")], [None])
    assert trust == "one solver" and sv[1]["status"] == "timeout"
    sv, trust, dis, _ = runner.solver_entries(out, [_q("unsat")], [second.Verdict("cvc5", "1", "sat", 0.1)])
    assert trust == "one solver"
    assert dis == [{"query": 0, "purpose": "goal", "z3": "unsat", "solver": "cvc5", "answer": "sat"}]
    assert sv[1]["status"] == "disagrees"
    sv, trust, dis, _ = runner.solver_entries(out, [_q("unsat")], None)
    assert trust == "one solver" and sv[1]["status"] == "not run"
    assert runner.solver_entries(out, [], None)[1] == "no SMT"


def test_a_control_is_refuted_by_both_when_a_second_solver_finds_one_of_z3s_counterexamples():
    """A control (a mutant) is caught by a counterexample: a goal query z3 answered sat. It counts as
    refuted by both solvers when a second solver agreed on every query, or answers sat on such a goal
    too even if it leaves a query the mutant does not break (an unsat one) unknown; not when it gives up
    on every sat goal, when the sat it agrees on is a hypotheses (vacuity) query, or when it contradicts
    z3 anywhere."""
    ob = _ob("L/ctl", _lemma_control, "m", "refuted", of="L")
    out = Outcome("refuted", solver="z3")
    sat, unsat = second.Verdict("cvc5", "1", "sat", 0.1), second.Verdict("cvc5", "1", "unsat", 0.1)
    gave_up = second.Verdict("cvc5", "1", "unknown", 1, "timeout")

    def rec(queries, verdicts, o=out, of=ob):
        return runner.make_record(of, o, seconds=0.1, bounds={}, deep=False, key="k", queries=queries,
                                  verdicts=verdicts)

    caught = rec([_q("unsat"), _q("sat")], [gave_up, sat])
    assert caught["refutation_confirmed"] and caught["trust"] == "one solver"  # the strict tier is unchanged
    assert not rec([_q("unsat"), _q("sat")], [unsat, gave_up])["refutation_confirmed"]
    assert not rec([_q("sat", "hypotheses"), _q("sat")], [sat, gave_up])["refutation_confirmed"]
    assert not rec([_q("unsat"), _q("sat")], [sat, sat])["refutation_confirmed"]  # a disagreement
    assert not rec([_q("sat")], None)["refutation_confirmed"]  # no cross-check
    assert not rec([_q("sat")], [sat], of=_ob("L", _lemma, "m"))["refutation_confirmed"]  # not a control
    # a witness-style control is refuted by an unsat goal (no witness exists): confirmed when every
    # query agreed, not when the second solver left that goal open
    assert rec([_q("unsat")], [unsat])["refutation_confirmed"]
    assert not rec([_q("unsat")], [gave_up])["refutation_confirmed"]
    assert trail.solver_summary([caught, rec([_q("sat")], [gave_up])])["controls_refuted_by_both"] == 1


def test_the_second_solver_is_asked_z3s_counterexamples_first():
    """A control's sat goal queries go first (then every other distinct text in z3's order), so a
    cross-check job cut off by its budget still reaches them."""
    qs = [("A", "unsat", 0.1, "goal"), ("B", "sat", 0.1, "hypotheses"), ("C", "sat", 0.1, "goal"),
          ("A", "unsat", 0.1, "goal"), ("D", "unknown", 0.1, "goal")]
    assert runner.cross_texts(qs) == ["C", "A", "B", "D"]
    assert runner.cross_texts([("A", "unsat", 0.1, "goal")]) == ["A"]


def _module(tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text("X = 1\n")
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    return name


def _ob(id, fn, module, expected="proved", of=None):
    return Obligation(id, fn, ("I",), {}, {}, (), "z3", expected, of, "bug" if of else None, module, id)


def _lemma(ctx):
    x, y = z3.Reals("x y")
    return z3_prove(x * x + y * y >= 2 * x * y, ctx, hypotheses=[x > 0])


def _lemma_control(ctx):
    x, y = z3.Reals("x y")
    return z3_prove(x * x + y * y >= 3 * x * y, ctx, hypotheses=[x > 0])


def _contradictory(ctx):
    """Planted: hypotheses x > 1 and x < 0 'prove' the false claim x = 7."""
    x = z3.Real("x")
    return z3_prove(x == 7, ctx, hypotheses=[x > 1, x < 0])


def _vacuous_antecedent(ctx):
    """Planted: a claim whose antecedent contradicts the hypotheses holds for nothing."""
    x = z3.Real("x")
    return z3_prove(z3.Implies(x < -1, x == 7), ctx, hypotheses=[x > 0])


def _witness(ctx):
    x = z3.FP("x", z3.Float16())
    return z3_witness(z3.fpIsNaN(z3.fpSub(z3.RNE(), x, x)), ctx)


def _run(obs, **kw):
    recs = runner.execute(obs, all_obs={o.id: o for o in obs}, jobs=2, timeout=60, cache_dir=None, **kw)
    return {r["obligation"]: r for r in recs}


def test_cross_checked_run_two_solvers_and_controls_refuted_by_both(tmp_path):
    m = _module(tmp_path, "fp_second_a")
    obs = [_ob("L", _lemma, m), _ob("L/ctl", _lemma_control, m, "refuted", of="L"), _ob("W", _witness, m)]
    recs = _run(obs, cross_check=True)
    assert all(r["ok"] for r in recs.values()), recs
    assert {k: r["trust"] for k, r in recs.items()} == {"L": "two solvers", "L/ctl": "two solvers", "W": "two solvers"}
    assert [e["name"] for e in recs["L"]["solvers"]] == ["z3", "cvc5"]
    assert recs["L"]["queries"] == {"goal": 1, "hypotheses": 1}  # the vacuity query went to cvc5 as well
    assert recs["L/ctl"]["solvers"][1]["status"] == "refuted"
    assert [e["name"] for e in recs["W"]["solvers"]] == ["z3", "bitwuzla"]
    summary = trail.solver_summary(list(recs.values()))
    assert summary["agreement_rate"] == 1.0 and summary["controls_refuted_by_both"] == 1


def test_quick_run_says_one_solver_not_run(tmp_path):
    m = _module(tmp_path, "fp_second_b")
    rec = _run([_ob("L", _lemma, m)])["L"]
    assert rec["ok"] and rec["trust"] == "one solver" and not rec["cross_check"]
    assert rec["solvers"][1]["status"] == "not run"


def test_a_disagreeing_second_solver_fails_the_record(tmp_path, monkeypatch):
    """Negative control of the cross-check: a planted second solver that flips every answer."""
    m = _module(tmp_path, "fp_second_c")
    flip = {"sat": "unsat", "unsat": "sat"}
    real = second.decide

    def liar(text, timeout_ms, hint=None):
        v = real(text, timeout_ms, hint=hint)
        return v._replace(name="liar", status=flip.get(v.status, v.status))

    monkeypatch.setattr(second, "decide", liar)  # the forked cross-check job inherits the patch
    rec = _run([_ob("L", _lemma, m)], cross_check=True)["L"]
    assert rec["status"] == "proved" and not rec["ok"]
    assert rec["disagreements"] and rec["solvers"][1]["status"] == "disagrees"
    assert "SOLVERS DISAGREE" in rec["detail"]


def test_a_hanging_second_solver_is_killed_and_reported_as_timeout(tmp_path, monkeypatch):
    """The second solver's job has CROSS_CPU_FACTOR × ``timeout`` seconds of its own CPU time; one that
    hangs without using CPU is killed after CROSS_WALL_FACTOR × that of wall time, its verdicts read
    'timeout', the record is "one solver" and z3's result stands."""
    import time

    m = _module(tmp_path, "fp_second_h")
    monkeypatch.setattr(second, "decide", lambda text, ms, hint=None: time.sleep(300))
    t0 = time.perf_counter()
    recs = runner.execute([_ob("L", _lemma, m)], all_obs={}, jobs=1, timeout=1.0, cache_dir=None, cross_check=True)
    assert time.perf_counter() - t0 < 60  # killed, not waited for
    rec = recs[0]
    assert rec["status"] == "proved" and rec["ok"] and rec["trust"] == "one solver"
    assert rec["solvers"][1]["status"] == "timeout"


def test_z3s_model_is_checked_by_the_second_solver_on_the_whole_query():
    """A sat query's recorded z3 model (``core.Query.hint``) is checked by cvc5 on the whole query
    with its values as equations: sat there is sat for the query (detail says so); a model that does
    not satisfy the query gives unknown, never unsat; a query cvc5 decides itself keeps its own verdict."""
    n, b, k = z3.Ints("n b k")
    q = [n >= 1, b >= 2, k == n * b + 1, k % b == 1]
    s = core.fresh_solver(q, Context({}, 20_000, False))
    assert s.check() == z3.sat
    hint = core.QUERY_LOG[-1].hint
    assert hint and hint.count("(assert ") == 3
    text = _smt2(*q)
    good = second._check_hint(text, hint, 10_000)
    assert good.status == "sat" and good.detail.startswith(second.REWRITTEN) and second.MODEL_CHECKED in good.detail
    bad = second._check_hint(text, "(assert (= n 0))", 10_000)
    assert bad.status == "unknown" and "unsat" in bad.detail
    own = second.decide(text, 10_000, hint=hint)
    assert own.status == "sat" and second.MODEL_CHECKED not in own.detail
    quiet = core.fresh_solver(q, Context({}, 20_000, False, record_text=False))
    assert quiet.check() == z3.sat and core.QUERY_LOG[-1].hint is None  # recorded only for a cross-check


def test_integer_queries_go_through_the_portfolio():
    """An integer query is decided by the first cvc5 configuration that answers; the detail names
    it and the logic; the logic of a query is read off its sorts."""
    n, b = z3.Ints("n b")
    v = second.decide(_smt2(n >= 1, b >= 1, n * b < n), 10_000)
    assert v.status == "unsat" and v.detail == "default (ALL)"
    x = z3.Real("x")
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    assert [second.logic_of(second._one_arg(_smt2(*q))) for q in
            ([n * b > 1], [x * x > 1], [f(n) > 1], [n > 1, x > 1], [z3.ForAll([n], n * b >= 0)])] == \
        ["QF_NIA", "QF_NRA", "QF_UFNIA", "QF_NIRA", "ALL"]


def test_contradictory_hypotheses_are_vacuous_and_fail(tmp_path):
    """The vacuity control: planted contradictory hypotheses, and a contradictory antecedent, are
    reported as vacuous (not proved) by the runner, and the second solver agrees they are unsat."""
    m = _module(tmp_path, "fp_second_d")
    recs = _run([_ob("V", _contradictory, m), _ob("A", _vacuous_antecedent, m)], cross_check=True)
    for r in recs.values():
        assert r["status"] == "vacuous" and not r["ok"], r
        assert "unsatisfiable" in r["detail"]
        assert r["queries"]["hypotheses"] == 1 and r["trust"] == "two solvers"
    assert "antecedent" in recs["A"]["detail"]


def test_vacuity_raised_in_process_and_satisfiable_hypotheses_pass():
    with pytest.raises(core.VacuousHypotheses):
        _contradictory(CTX)
    core.QUERY_LOG.clear()
    assert _lemma(CTX).status == "proved"
    assert [q.purpose for q in core.QUERY_LOG] == ["goal", "hypotheses"]
    assert core.QUERY_LOG[1].z3 == "sat"


def test_export_is_z3s_own_text():
    """``smt.smt2_text`` (the fast export every recorded query uses) gives z3's ``to_smt2`` text,
    with pushed formulas, for an empty solver and for one formula."""
    from flashproof.proofs.engine.smt import smt2_text

    x, y = z3.Reals("x y")
    n = z3.Int("n")
    s = z3.Solver()
    for k in range(4):
        s.add(x + k > y * z3.ToReal(n))
    s.push()
    s.add(z3.Or(x == 1, y == 2))
    one = z3.Solver()
    one.add(x > 1)
    for solver in (s, z3.Solver(), one):
        assert smt2_text(solver) == solver.to_smt2()


def test_vacuity_checked_once_per_solver_and_still_caught():
    """A solver asked several goals between push and pop (the kernel obligations' pattern) checks
    its fixed hypotheses once: one 'hypotheses' query beside every goal; contradictory fixed
    hypotheses are still caught on the first unsat goal."""
    x = z3.Real("x")
    core.QUERY_LOG.clear()
    s = core.fresh_solver([x > 0, x < 5], CTX)
    for bound in (6, 7, 8):
        s.push()
        s.add(z3.Not(x < bound).translate(s.ctx))
        assert s.check() == z3.unsat
        s.pop()
    assert [q.purpose for q in core.QUERY_LOG] == ["goal", "hypotheses", "goal", "goal"]
    bad = core.fresh_solver([x > 1, x < 0, x < 5], CTX)
    bad.push()
    bad.add(z3.Not(x == 7).translate(bad.ctx))
    with pytest.raises(core.VacuousHypotheses):
        bad.check()


def test_real_obligation_agrees(tmp_path):
    """One real obligation and its control through the full path (cvc5 on the reference's merge)."""
    from flashproof.proofs.engine.discover import collect

    obs, _ = collect()
    mine = [core.resolve_control(obs[i]) for i in ("ATT-MERGE-COMM", "ATT-MERGE-COMM/max-from-second")]
    recs = runner.execute(mine, all_obs=obs, jobs=2, timeout=60, cache_dir=None, cross_check=True)
    assert all(r["ok"] and r["trust"] == "two solvers" for r in recs), recs
