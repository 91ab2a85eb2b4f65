"""``summarize`` of a block of ANY size b returns Σ(J ∩ A_i) (DEF-SUMMARY, ALG-TILED), by induction
over its two key loops, in the exp domain (weights w = e^s > 0, z3 reals):

* loop shape (read from the code object's AST, not retyped): each of ``summarize``'s two ``for``
  loops runs over ``zip`` of whole sequences of the block's length (``scores``/``flags``, then
  ``scores``/``values``/``flags``/``drops``: no slice, so every key is visited once, in order),
  and its body is ONE assignment ``state = step(num, …, state, key…)`` of ``_max_step`` /
  ``_sum_step``: the state after key j is the step applied to the state before key j and key j;
* max step (z3): if m represents the maximum M of the allowed keys seen so far (m = M > 0 when one
  was allowed, m = 0, the weight of −∞, when none), ``_max_step`` with key (w, f) represents the
  maximum of that set plus the key when f holds;
* sum step (z3, any v under A-COORDINATEWISE): for the fixed reference m_ref > 0, if ℓ·m_ref = P
  and z·m_ref = R over the keys seen so far, ``_sum_step`` gives P + [f]w and R + [f]w·v_j
  (without dropout, r = None: the theorem's case; the dropout extension has its own obligations);
* base and tail (z3): the initial m = 0, ℓ = 0, z = 0 represent ∅; ``summarize``'s own tail, run
  with the loops' results replaced by states satisfying those invariants, returns m > 0 with
  m·ℓ = P, m·z = R for a nonempty block and ℓ = 0, z = 0 for an empty one.

That a loop whose body is ``state = step(state, key)`` over keys 0..b−1 preserves an invariant the
step preserves is induction on b (mathematics, not checked). ATT-SUMMARIZE-BLOCK re-runs the real
``summarize`` unrolled on b ≤ 4 symbolic keys as a cross-check.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from unittest.mock import patch

import z3

from flashproof.verified import attention as att

from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove
from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.numbers.symbolic import num, reals

V_BOUNDS = {"v": 16}

#: per loop of summarize, in order: the sequences zip must run over and the step its body applies
LOOPS = ((("scores", "flags"), "_max_step"), (("scores", "values", "flags", "drops"), "_sum_step"))


def _names(node) -> list:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


def _loop_shape() -> dict | None:
    """None when each loop of ``att.summarize`` has the shape LOOPS names, else what differs."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(att.summarize)))
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For)]
    if len(loops) != len(LOOPS):
        return {"loops": len(loops), "expected": len(LOOPS)}
    for k, (loop, (seqs, step)) in enumerate(zip(loops, LOOPS)):
        it = loop.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip"
                and all(isinstance(a, ast.Name) for a in it.args) and [a.id for a in it.args] == list(seqs)):
            return {"loop": k, "iterates": ast.unparse(it), "expected": f"zip({', '.join(seqs)})"}
        keys = _names(loop.target)
        body = loop.body
        if len(body) != 1 or not isinstance(body[0], ast.Assign) or len(body[0].targets) != 1:
            return {"loop": k, "body": ast.unparse(loop)[:120], "expected": f"one assignment state = {step}(…)"}
        state = _names(body[0].targets[0])
        call = body[0].value
        fn = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None) \
            if isinstance(call, ast.Call) else None
        args = [a.id for a in call.args if isinstance(a, ast.Name)] if isinstance(call, ast.Call) else []
        if fn != step or len(args) != len(call.args) or args[-len(keys) - len(state):] != state + keys:
            return {"loop": k, "body": ast.unparse(body[0])[:120],
                    "expected": f"{', '.join(state)} = {step}(…, {', '.join(state + keys)})"}
    return None


def _max_lemma(ctx) -> Outcome:
    N = num()
    m, M, w = z3.Reals("m M w")
    ne, f = z3.Bools("seen_allowed f")
    new = att._max_step(N, m, w, f)
    ne2 = z3.Or(ne, f)
    M2 = z3.If(f, z3.If(ne, z3.If(M >= w, M, w), w), M)
    return z3_prove(z3.And(new == z3.If(ne2, M2, 0), z3.Implies(ne2, M2 > 0)), ctx,
                    hypotheses=[w > 0, m == z3.If(ne, M, 0), z3.Implies(ne, M > 0)])


def _sum_lemma(ctx) -> Outcome:
    v = ctx.bounds["v"]
    N = num()
    m_ref, l, P, w = z3.Reals("m_ref l P w")
    f = z3.Bool("f")
    z, R, vj = reals("z", v), reals("R", v), reals("vj", v)
    l2, z2 = att._sum_step(N, m_ref, l, z, w, vj, f)
    claim = z3.And(l2 * m_ref == P + z3.If(f, w, 0),
                   *[za * m_ref == r + z3.If(f, w * va, 0) for za, r, va in zip(z2, R, vj)])
    return z3_prove(claim, ctx, hypotheses=[w > 0, m_ref > 0, l * m_ref == P, *[za * m_ref == r for za, r in zip(z, R)]])


def _base_and_tail(ctx) -> Outcome:
    """summarize's code around its loops, with the loops' results stubbed by invariant states."""
    v = ctx.bounds["v"]
    N = num()
    flags = list(z3.Bools("f0 f1"))  # the tail reads the flags only through any_ (an or over them)
    ne = z3.Or(*flags)
    M, P = z3.Reals("M P")
    R, L, Z = reals("R", v), z3.Real("L"), reals("Z", v)
    seen: dict = {}

    def max_step(num_, m, s, f):
        seen.setdefault("m0", m)
        return z3.If(ne, M, 0)

    def sum_step(num_, m_ref, l, z, s, vj, f, r=None):
        seen.setdefault("l0", (l, z))
        seen["m_ref"] = m_ref
        return L, Z

    with patch.object(att, "_max_step", max_step), patch.object(att, "_sum_step", sum_step):
        s = att.summarize([z3.Real("w0"), z3.Real("w1")], [reals("v0_", v), reals("v1_", v)], N, allowed=flags)
    if set(seen) != {"m0", "l0", "m_ref"}:
        return Outcome("refuted", counterexample={"steps_called": sorted(seen)}, solver="z3",
                       detail="summarize does not run both steps")
    l0, z0 = seen["l0"]
    m_ref = seen["m_ref"]
    base = z3.And(seen["m0"] == 0, l0 == 0, *[x == 0 for x in z0])
    hyp = [z3.Implies(ne, M > 0), z3.Implies(z3.Not(ne), z3.And(P == 0, *[r == 0 for r in R])),
           z3.Implies(m_ref > 0, z3.And(L * m_ref == P, *[za * m_ref == r for za, r in zip(Z, R)]))]
    claim = z3.And(base, m_ref > 0, s.nonempty == ne,
                   z3.Implies(ne, z3.And(s.m == M, s.m > 0, s.m * s.l == P, *[s.m * za == r for za, r in zip(s.z, R)])),
                   z3.Implies(z3.Not(ne), z3.And(s.l == 0, *[za == 0 for za in s.z])))
    return z3_prove(claim, ctx, hypotheses=hyp)


@obligation("ATT-SUMMARIZE-ANY-B", checks=["DEF-SUMMARY", "ALG-TILED"], bounds=V_BOUNDS,
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST", "A-COORDINATEWISE"], scope="unbounded",
            why_unbounded="b: induction over summarize's key loops; v is a value width (A-COORDINATEWISE)")
def summarize_any_b(ctx):
    """summarize over b keys (any b) returns Σ(I): m = max allowed weight, m·ℓ = Σw, m·z = Σwv; ⊥ for no allowed key."""
    bad = _loop_shape()
    if bad is not None:
        return Outcome("refuted", counterexample=bad, solver="ast", detail="summarize's loops are not folds of its steps over every key")
    for name, step in (("_max_step", _max_lemma), ("_sum_step", _sum_lemma), ("base and tail", _base_and_tail)):
        out = step(ctx)
        if out.status != "proved":
            return out._replace(detail=f"{name}: {out.detail}")
    return Outcome("proved", solver="z3", detail="loop shape (AST); max and sum steps preserve the invariants; base and tail")


@control("ATT-SUMMARIZE-ANY-B/skips-last-key", of="ATT-SUMMARIZE-ANY-B", bug="summarize's sum loop skips the block's last key")
def summarize_any_b_skip_last(ctx):
    with patch.object(att, "summarize", mutants.summarize_skips_last_key):
        return summarize_any_b(ctx)


@control("ATT-SUMMARIZE-ANY-B/max-ignores-mask", of="ATT-SUMMARIZE-ANY-B", bug="the block maximum is taken over masked keys too")
def summarize_any_b_max_mask(ctx):
    with patch.object(att, "_max_step", mutants.max_step_ignores_mask):
        return summarize_any_b(ctx)


@control("ATT-SUMMARIZE-ANY-B/sum-no-weight", of="ATT-SUMMARIZE-ANY-B", bug="the sum step adds v_j to z without the weight p")
def summarize_any_b_sum(ctx):
    with patch.object(att, "_sum_step", mutants.sum_step_unweighted):
        return summarize_any_b(ctx)
