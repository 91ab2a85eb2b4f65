"""The second solvers: decide a z3 query again, from its SMT-LIB text, with cvc5 or Bitwuzla.

``decide(smt2, timeout_ms) -> Verdict`` reads the benchmark z3 exported (``Solver.to_smt2()``) —
the same formula, not a re-derivation — and answers ``sat``, ``unsat``, ``unknown`` or
``unsupported`` (the solver cannot read the query: a floating-point format its build lacks), with
the solver's name and version. Which solver decides is a function of the query alone:

* a query over floating point goes to **Bitwuzla** (bit-precise FP, fast on these queries); a
  format the PyPI build of Bitwuzla refuses (bf16 = FP(8, 8), "experimental" there) goes to cvc5
  with ``fp-exp`` — cvc5's solver for formats other than Float32/Float64, which its authors call
  experimental; the verdict's detail says so;
* every other query (reals, integers, uninterpreted functions) goes to **cvc5**. Over the reals:
  first its cylindrical-algebraic-coverings procedure alone (complete in principle; this build's
  McCallum projection answers ``incomplete`` where a polynomial vanishes on a cell, as purified
  divisions do), then, for a query with division that is still ``unknown``, the same query split
  into ite cases with its denominators cleared (``engine.normalize``: every step an equivalence,
  its side conditions — each divisor non-zero, each pruned case empty — decided by cvc5 too; the
  verdict's detail starts with ``REWRITTEN``), then its default strategy with the rest of the time.
  With integers (coverings ignores its time limit there): a short portfolio of cvc5 configurations
  (``_INT_STRATEGIES``) in ALL and in the query's own quantifier-free logic (``logic_of``), the
  first definite answer counting (the detail names it); if none answers, a portfolio led by
  interval constraint propagation (``_SLICE_STRATEGIES``) on growing subsets of the query's
  assertions (``engine.slicing``), whose unsat answer is the query's (the verdict's detail starts
  with ``REWRITTEN`` and gives the number kept); a sat subset is no answer, but cvc5's model of it,
  added to the whole query as equations, may be extended to a model of the query, whose sat answer
  is the query's (``_extend``; the detail starts with ``REWRITTEN`` too).
* a query z3 found sat comes with z3's model (``decide``'s ``hint``); if the route above gives no
  definite answer in its share of the time, the whole query plus z3's values as equations is given to
  the same solver: sat there is sat for the query (the solver evaluated every assertion under that
  assignment; the detail starts with ``REWRITTEN`` and names ``MODEL_CHECKED``), anything else leaves
  the verdict unknown.

z3's export is valid SMT-LIB except that it writes ``+``, ``*``, ``and``, ``or`` with a single
argument where SMT-LIB wants two or more, and an empty conjunction or disjunction as the bare
symbol ``and`` / ``or``; ``_one_arg`` rewrites ``(op x)`` to ``x`` (the same value), a bare ``and``
to ``true`` and a bare ``or`` to ``false`` (z3's values of the empty ones), and nothing else.
Options, the rewrite and the slices change only completeness, never soundness.
"""
from __future__ import annotations

import re
import time
from typing import NamedTuple

__all__ = ["Verdict", "decide", "versions", "is_fp", "REWRITTEN", "MODEL_CHECKED"]

_VARIADIC = {"+", "*", "and", "or"}
_EMPTY = {"and": "true", "or": "false"}
#: tokens of a query that lies outside quantifier-free (non)linear arithmetic with functions
_OTHER_THEORIES = {"forall", "exists", "Array", "BitVec", "String", "Seq", "Set", "declare-datatype",
                   "declare-datatypes", "FloatingPoint", "RoundingMode", "to_real", "to_int", "is_int"}
#: cvc5 configurations tried in turn on a query over integers while each answers unknown, with
#: their share of the query's time: the default strategy in ALL (decides all but ~3 of the 1520
#: queries of KER-BOUNDS-FWD within 1 s each); the default in the query's own quantifier-free
#: logic (24 undecided there, but a different set); the same with learned rewrites (bounds cvc5
#: derives, e.g. program id ≥ 0 and heads ≥ 1, simplify the sign cases of the kernels' truncated
#: divisions); interval constraint propagation in ALL.
_INT_STRATEGIES = (("ALL", {}, 0.25, "default"), ("logic", {}, 0.25, "default"),
                   ("logic", {"learned-rewrite": "true"}, 0.25, "learned-rewrite"),
                   ("ALL", {"nl-icp": "true"}, 0.25, "icp"))
#: the configurations tried on a subset of an integer query's assertions (``engine.slicing``), with
#: their shares of the subset's time: interval constraint propagation gets the largest share there.
#: Measured on the slices (58–66 of 120–128 assertions) of the dK/dV kernel's grouped-query head
#: offsets, (b·Hq + hk·GROUPS + g)·Nq + row < B·Hq·Nq: icp decides most in 1.4–3 s where the default
#: in ALL takes 1.6–6.7 s or more than 6 s, but two (KER-BOUNDS-DKDV) the default in 4.5 s and icp
#: in 8.7 s; the logic's own strategies not in 8 s; on the forward's head offsets (38 of 103) the
#: default in ALL takes 0.7 s, icp 3 s, learned-rewrite 0.2 s. So the default and icp share the time:
#: icp first with a third (it answers the most in the least time), the quick learned-rewrite next,
#: then the default in ALL with the rest (the queries icp leaves need the default ≈ 4.5 s of CPU,
#: ≈ 9 s of wall time at load 4: more than the 40 % it had when it ran first), the logic's default last
_SLICE_STRATEGIES = (("ALL", {"nl-icp": "true"}, 0.33, "icp"),
                     ("logic", {"learned-rewrite": "true"}, 0.04, "learned-rewrite"),
                     ("ALL", {}, 0.55, "default"), ("logic", {}, 0.08, "default"))
#: the portfolio for an integer query with nothing to slice, after ``_INT_STRATEGIES`` had their
#: share on it: icp with the rest of the time (KV-SPLIT-PLAN's goal: icp decides it in ≈ 27 s at load 4)
_UNSLICED_STRATEGIES = (("ALL", {"nl-icp": "true"}, 1.0, "icp"),)
#: the share of a subset's time for extending its model to the whole query (``_extend``), when the
#: subset is sat: the model is found again (0.1–0.2 s here) and the query with its values is nearly
#: ground (decided in 0.01–0.03 s)
_EXTEND_SHARE = 0.2
#: the share of an integer query's time the portfolio gets on the query itself; the rest goes to the
#: same portfolio on subsets of its assertions (``engine.slicing``)
_INT_DIRECT_SHARE = 0.2
_TOKEN = re.compile(r'\|[^|]*\||"(?:[^"]|"")*"|;[^\n]*|[()]|[^\s()|";]+')
#: the cvc5 coverings pass gets this share of a query's time limit before the default strategy
_COVERINGS_MS = 3000
#: the field-normalised route (``engine.normalize``) gets this share of the time left after coverings,
#: each of its queries at most ``_REWRITE_QUERY_MS``
_REWRITE_SHARE = 0.9
_REWRITE_QUERY_MS = 5000
#: the share of a sat query's time kept for checking z3's model (``decide``'s ``hint``) when the
#: second solver's own route gives no answer; a query with the values fixed is nearly ground
#: (decided in 0.01–0.1 s)
_HINT_SHARE = 0.15
#: the first word of the detail of a verdict reached on a rewritten form of the query
REWRITTEN = "rewritten"
#: in the detail of a sat verdict reached by checking z3's model (``decide``'s ``hint``)
MODEL_CHECKED = "z3's model checked"


class Verdict(NamedTuple):
    """One second-solver answer: ``status`` in sat/unsat/unknown/unsupported/error; ``detail``
    one line (the reason for unknown, the configuration that answered)."""

    name: str
    version: str
    status: str
    seconds: float
    detail: str = ""


def versions() -> dict:
    """{"cvc5": version or None, "bitwuzla": version or None}."""
    out = {}
    try:
        import cvc5

        out["cvc5"] = getattr(cvc5, "__version__", None) or _cvc5_version()
    except ImportError:
        out["cvc5"] = None
    try:
        import bitwuzla

        out["bitwuzla"] = bitwuzla.version()
    except ImportError:
        out["bitwuzla"] = None
    return out


def _cvc5_version() -> str:
    import cvc5

    return cvc5.Solver(cvc5.TermManager()).getVersion()


def is_fp(smt2: str) -> bool:
    return "FloatingPoint" in smt2 or "RoundingMode" in smt2


def _one_arg(smt2: str) -> str:
    """Drop ``(check-sat)``, rewrite ``(op x)`` to ``x`` for op in + * and or (z3 writes them for
    one-element sums, products and conjunctions) and a bare ``and``/``or`` (z3's empty
    conjunction/disjunction) to ``true``/``false``."""
    out: list = []          # output tokens
    stack: list = []        # per open paren: index of "(" in out
    for tok in _TOKEN.findall(smt2):
        if tok.startswith(";"):
            continue
        if tok == "(":
            stack.append(len(out))
            out.append(tok)
        elif tok == ")":
            start = stack.pop()
            inner = out[start + 1:]
            if inner and inner[0] in _VARIADIC and _one_expr(inner[1:]):
                out[start:] = inner[1:]
            else:
                out.append(tok)
        elif tok in _EMPTY and not (out and out[-1] == "("):
            out.append(_EMPTY[tok])  # z3 prints And() / Or() of no arguments as the bare operator
        else:
            out.append(tok)
    text = " ".join(out)
    return text.replace("( check-sat )", "")


def _one_expr(toks: list) -> bool:
    """Whether ``toks`` is exactly one s-expression."""
    if len(toks) == 1:
        return toks[0] not in ("(", ")")
    if not toks or toks[0] != "(":
        return False
    depth = 0
    for i, t in enumerate(toks):
        depth += (t == "(") - (t == ")")
        if depth == 0:
            return i == len(toks) - 1
    return False


def logic_of(text: str) -> str:
    """The smallest cvc5 logic that covers a query over arithmetic (and uninterpreted functions):
    ``QF_`` + ``UF`` when a function with arguments is declared + ``N`` + ``I``/``R``/``IR`` + ``A``
    by the sorts it uses; ``ALL`` for a quantified query or one with any other theory. cvc5 tunes
    its nonlinear procedures by the logic: some kernel index queries that time out in ``ALL`` are
    decided at once in ``QF_NIA`` (and the other way round). A logic never changes an answer, only
    whether one is found."""
    toks = set(_TOKEN.findall(text))
    if toks & _OTHER_THEORIES:
        return "ALL"
    ints, reals = "Int" in toks, "Real" in toks
    if not (ints or reals):
        return "ALL"
    uf = re.search(r"\( declare-fun \S+ \( [^)]", text) is not None
    return "QF_" + ("UF" if uf else "") + "N" + ("I" if ints else "") + ("R" if reals else "") + "A"


def _cvc5_run(text: str, ms: int, options: dict, logic: str, models: bool = False):
    """(solver, symbol manager, result) of one cvc5 run on ``text``."""
    import cvc5

    tm = cvc5.TermManager()
    s = cvc5.Solver(tm)
    s.setOption("tlimit-per", str(max(1, int(ms))))
    if models:
        s.setOption("produce-models", "true")
    for k, v in options.items():
        s.setOption(k, v)
    s.setLogic(logic)
    sm = cvc5.SymbolManager(tm)
    p = cvc5.InputParser(s, sm)
    p.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "query")
    while True:
        cmd = p.nextCommand()
        if cmd.isNull():
            break
        cmd.invoke(s, sm)
    return s, sm, s.checkSat()


def _cvc5(text: str, ms: int, options: dict, logic: str = "ALL") -> tuple[str, str]:
    _, _, r = _cvc5_run(text, ms, options, logic)
    if r.isSat():
        return "sat", ""
    if r.isUnsat():
        return "unsat", ""
    return "unknown", str(r.getUnknownExplanation()).split(".")[-1].lower()


def _cvc5_model(text: str, ms: int, options: dict, logic: str) -> list | None:
    """cvc5's model of ``text`` as SMT-LIB assertions ``(assert (= x v))``, one per declared
    constant, or None (not sat in time, or a declared function with arguments: no finite model text)."""
    s, sm, r = _cvc5_run(text, ms, options, logic, models=True)
    if not r.isSat():
        return None
    terms = sm.getDeclaredTerms()
    if any(t.getSort().isFunction() for t in terms):
        return None
    return [f"(assert (= {t} {s.getValue(t)}))" for t in terms]


def _bitwuzla(text: str, ms: int) -> tuple[str, str]:
    import bitwuzla

    tm = bitwuzla.TermManager()
    opts = bitwuzla.Options()
    opts.set(bitwuzla.Option.TIME_LIMIT_PER, max(1, int(ms)))
    p = bitwuzla.Parser(tm, opts)
    p.parse("(set-logic ALL)\n" + text, True, False)
    r = p.bitwuzla().check_sat()
    s = str(r)
    return (s, "") if s in ("sat", "unsat") else ("unknown", "time limit or incomplete")


def _unsupported(err: Exception) -> bool:
    msg = str(err)
    return ("not supported" in msg or "Unsupported" in msg or "unsupported" in msg)


def decide(smt2: str, timeout_ms: int, hint: str | None = None) -> Verdict:
    """Decide one exported z3 query with the second solver that fits it (see the module docstring).
    ``hint``: z3's model of a query z3 found sat (``smt.model_text``); if the second solver's own
    route gives no definite answer, it is given the query with those values added as equations, in
    the last ``_HINT_SHARE`` of the time (``_check_hint``)."""
    if not hint:
        return _decide(smt2, timeout_ms)
    t0 = time.perf_counter()
    own = _decide(smt2, int(timeout_ms * (1 - _HINT_SHARE)))
    if own.status in ("sat", "unsat"):
        return own
    left = int(timeout_ms - 1000 * (time.perf_counter() - t0))
    checked = _check_hint(smt2, hint, left) if left > 0 else None
    if checked is None:
        return own._replace(seconds=time.perf_counter() - t0)
    return checked._replace(seconds=time.perf_counter() - t0,
                            detail=f"{checked.detail}; its own route: {own.status} ({own.detail})"[:240])


def _check_hint(smt2: str, hint: str, ms: int) -> Verdict | None:
    """A sat verdict when the second solver, given the whole query plus z3's values as equations,
    answers sat: it evaluates every assertion of the query under that assignment (choosing any
    function left out), so a model of the query exists — an independent check of z3's sat answer,
    not a search of the second solver's own. None otherwise (an unsat answer there would say that
    z3's values do not satisfy the query as the second solver reads it: reported in the detail of
    an unknown verdict, never as unsat, since another model may exist)."""
    text = _one_arg(smt2) + " " + hint
    vers = versions()
    n = hint.count("(assert ")
    name = "bitwuzla" if is_fp(text) else "cvc5"
    try:
        st, _ = _bitwuzla(text, ms) if name == "bitwuzla" else _cvc5(text, ms, {})
    except Exception as e:  # noqa: BLE001 — the check could not run: no verdict from it
        return Verdict(name, vers[name], "unknown", 0.0, f"z3's model not checked: {str(e).splitlines()[0][:80]}")
    if st == "sat":
        return Verdict(name, vers[name], "sat", 0.0,
                       f"{REWRITTEN} ({MODEL_CHECKED}: its {n} values added to the query as equations, sat)")
    if st == "unsat":
        return Verdict(name, vers[name], "unknown", 0.0, f"z3's model ({n} values) with the query: unsat for {name}")
    return None


def _decide(smt2: str, timeout_ms: int) -> Verdict:
    text = _one_arg(smt2)
    vers = versions()
    t0 = time.perf_counter()

    def left() -> int:
        return int(timeout_ms - 1000 * (time.perf_counter() - t0))

    if is_fp(text):
        try:
            st, why = _bitwuzla(text, left())
            return Verdict("bitwuzla", vers["bitwuzla"], st, time.perf_counter() - t0, why)
        except Exception as e:  # noqa: BLE001 — an unreadable format falls through to cvc5
            if not _unsupported(e):
                return Verdict("bitwuzla", vers["bitwuzla"], "error", time.perf_counter() - t0, str(e)[:160])
            bzla_why = str(e).splitlines()[0][:100]
        try:
            st, why = _cvc5(text, left(), {"fp-exp": "true"})
            return Verdict("cvc5", vers["cvc5"], st, time.perf_counter() - t0,
                           "fp-exp (cvc5's experimental FP formats)" + (f": {why}" if why else ""))
        except Exception as e:  # noqa: BLE001
            status = "unsupported" if _unsupported(e) else "error"
            return Verdict("cvc5", vers["cvc5"], status, time.perf_counter() - t0,
                           f"bitwuzla: {bzla_why}; cvc5: {str(e).splitlines()[0][:100]}")
    if "Int" in set(_TOKEN.findall(text)):
        return _int_portfolio(text, timeout_ms, logic_of(text), vers, t0)
    try:
        detail = ""
        st, why = _cvc5(text, min(_COVERINGS_MS, left()), {"nl-cov": "true", "nl-ext": "none"})
        if st != "unknown":
            return Verdict("cvc5", vers["cvc5"], st, time.perf_counter() - t0, "coverings")
        detail = f"coverings: {why}; "
        if "/" in set(_TOKEN.findall(text)):
            st, why = _by_rewrite(smt2, int(_REWRITE_SHARE * left()))
            if st in ("sat", "unsat"):
                return Verdict("cvc5", vers["cvc5"], st, time.perf_counter() - t0, f"{REWRITTEN} (field normalisation): {why}")
            detail += f"field normalisation: {why}; "
        st, why = _cvc5(text, left(), {})
        detail += f"default: {why}" if why else "default"
        return Verdict("cvc5", vers["cvc5"], st, time.perf_counter() - t0, detail)
    except Exception as e:  # noqa: BLE001
        status = "unsupported" if _unsupported(e) else "error"
        return Verdict("cvc5", vers["cvc5"], status, time.perf_counter() - t0, str(e).splitlines()[0][:160])


def _real(text: str, ms: int) -> str:
    """cvc5 on one query over the reals: coverings (up to ``_COVERINGS_MS``), then the default strategy."""
    t0 = time.perf_counter()
    st, _ = _cvc5(text, min(_COVERINGS_MS, ms), {"nl-cov": "true", "nl-ext": "none"})
    left = int(ms - 1000 * (time.perf_counter() - t0))
    if st == "unknown" and left > 0:
        st, _ = _cvc5(text, left, {})
    return st


def _by_rewrite(smt2: str, ms: int) -> tuple[str, str]:
    """(status, detail) of cvc5 on the field-normalised cases of the query (``engine.normalize``):
    unsat when every side query and every case is unsat; sat when a case is sat with its side
    queries unsat (a model of that case is one of the query); else unknown."""
    from . import normalize

    t0 = time.perf_counter()

    def left() -> int:
        return int(ms - 1000 * (time.perf_counter() - t0))

    memo: dict = {}

    def refute(q: str) -> bool:
        if q not in memo:
            if left() <= 0:
                raise TimeoutError
            memo[q] = _real(_one_arg(q), min(left(), _REWRITE_QUERY_MS)) == "unsat"
        return memo[q]

    # Only the ites inside divisors first (fewer cases); if a case stays undecided, every real ite (no
    # ite is left: each case a polynomial formula, at the price of more cases and more pruning).
    st, why = "unknown", "outside the rewrite (too many ite cases, or not field arithmetic)"
    for split_all in (False, True):
        try:
            rw = normalize.cases(smt2, refute, split_all=split_all)
        except TimeoutError:
            return "unknown", why + "; out of time while splitting ite cases"
        if rw is not None:
            st, why = _decide_cases(rw, refute, left)
            if st in ("sat", "unsat"):
                return st, why
    return st, why


def _decide_cases(rw, refute, left) -> tuple[str, str]:
    """(status, detail) of cvc5 on the cases of one ``normalize.Rewrite``."""
    what = (f"{len(rw.cases)} ite case(s), {rw.pruned} side(s) refuted, "
            f"{sum(len(c.side) for c in rw.cases)} divisor(s) refuted zero")
    for k, case in enumerate(rw.cases):
        try:
            if not all(refute(common) or refute(own) for common, own in case.side):
                return "unknown", f"{what}: a divisor of case {k} not refuted zero"
        except TimeoutError:
            return "unknown", f"{what}: out of time at case {k}"
        if left() <= 0:
            return "unknown", f"{what}: out of time at case {k}"
        st = _real(_one_arg(case.text), min(left(), _REWRITE_QUERY_MS))
        if st == "sat":
            return "sat", f"{what}: case {k} sat"
        if st != "unsat":
            return "unknown", f"{what}: case {k} {st}"
    return "unsat", what + ", every case unsat"


def _int_portfolio(text: str, timeout_ms: int, logic: str, vers: dict, t0: float, slices: bool = True,
                   strategies: tuple = _INT_STRATEGIES) -> Verdict:
    """``_INT_STRATEGIES`` in turn (coverings is not among them: with integers it ignores its time
    limit) with ``_INT_DIRECT_SHARE`` of the time; the first sat/unsat answers, and the detail names
    the configuration. Each strategy is a complete cvc5 run on the same text, so any answer is cvc5's.
    Then (``slices``) the same portfolio on the growing subsets of ``engine.slicing`` with the rest of
    the time: an unsat subset makes the query unsat (the detail starts with ``REWRITTEN`` and says how
    many assertions were kept); a sat subset is ignored. Unknown only if all give up; an error only if
    every strategy failed to run (their messages in the detail)."""
    notes, errors = [], 0
    direct_ms = int(timeout_ms * (_INT_DIRECT_SHARE if slices else 1.0))
    for k, (lg, options, share, name) in enumerate(strategies):
        last = k == len(strategies) - 1
        left = int(direct_ms - 1000 * (time.perf_counter() - t0))
        ms = left if last else min(left, int(share * direct_ms))
        if ms <= 0:
            break
        lg = logic if lg == "logic" else lg
        try:
            st, why = _cvc5(text, ms, options, lg)
        except Exception as e:  # noqa: BLE001 — this configuration cannot run the query; the next may
            errors += 1
            notes.append(f"{name} ({lg}): {'unsupported' if _unsupported(e) else 'error'}: "
                         f"{str(e).splitlines()[0][:80]}")
            continue
        if st in ("sat", "unsat"):
            return Verdict("cvc5", vers["cvc5"], st, time.perf_counter() - t0, f"{name} ({lg})")
        notes.append(f"{name} ({lg}): {why}")
    status = "error" if errors and errors == len(notes) else "unknown"
    if slices and status == "unknown":
        from . import slicing

        subsets = slicing.levels(text)
        if not subsets:  # nothing to slice: the portfolio gets the rest of the time on the query itself
            left = int(timeout_ms - 1000 * (time.perf_counter() - t0))
            if left > 0:
                v = _int_portfolio(text, left, logic, vers, time.perf_counter(), slices=False,
                                   strategies=_UNSLICED_STRATEGIES)
                if v.status != "unknown":
                    return v._replace(seconds=time.perf_counter() - t0)
        for j, (kept, total, sub) in enumerate(subsets):
            left = int(timeout_ms - 1000 * (time.perf_counter() - t0))
            if left <= 0:
                break
            t1 = time.perf_counter()
            v = _int_portfolio(_one_arg(sub), left // (len(subsets) - j), logic_of(sub), vers, t1, slices=False,
                               strategies=_SLICE_STRATEGIES)
            if v.status == "unsat":
                return Verdict("cvc5", vers["cvc5"], "unsat", time.perf_counter() - t0,
                               f"{REWRITTEN} (hypotheses sliced: {kept} of {total} assertions kept): {v.detail}")
            notes.append(f"slice {kept}/{total}: {v.status}")
            if v.status == "sat":
                x = _extend(text, kept, total, sub, int(_EXTEND_SHARE * left), logic, vers)
                if x is not None:
                    return x._replace(seconds=time.perf_counter() - t0)
    return Verdict("cvc5", vers["cvc5"], status, time.perf_counter() - t0, "; ".join(notes)[:240])


def _extend(text: str, kept: int, total: int, sub: str, ms: int, logic: str, vers: dict) -> Verdict | None:
    """A sat verdict for the query from a model of a subset of its assertions, or None. cvc5's model
    of the subset fixes the values of the subset's variables; if the query with those values added
    as equations is sat, so is the query (a model of the strengthened query is one of the query).
    An unsat answer there says nothing (another model of the subset might extend) and is discarded.
    ``ms``: the time for both steps."""
    t0 = time.perf_counter()
    sub = _one_arg(sub)
    model = None
    for lg, options, share, _ in _SLICE_STRATEGIES:
        left = int(ms - 1000 * (time.perf_counter() - t0))
        if left <= 0:
            return None
        try:
            model = _cvc5_model(sub, int(share * ms) if share * ms < left else left, options,
                                logic_of(sub) if lg == "logic" else lg)
        except Exception:  # noqa: BLE001 — this configuration cannot run the subset; the next may
            model = None
        if model is not None:
            break
    left = int(ms - 1000 * (time.perf_counter() - t0))
    if model is None or left <= 0:
        return None
    v = _int_portfolio(text + " " + " ".join(model), left, logic, vers, time.perf_counter(), slices=False)
    if v.status != "sat":
        return None
    return Verdict("cvc5", vers["cvc5"], "sat", time.perf_counter() - t0,
                   f"{REWRITTEN} (a model of {kept} of {total} assertions, its {len(model)} values added "
                   f"to the query: sat): {v.detail}")
