"""Run a Triton kernel's own Python body on ``triton_sym`` values: symbolic execution of the code
that the Triton compiler compiles, with no transcription.

``execute(jitfn, args, ...)`` takes a ``@triton.jit`` function, rebinds its globals so that ``tl``
is ``triton_sym.TL``, ``range`` is the symbolic loop below and every ``@triton.jit`` helper it calls
is itself rebound the same way (``overrides`` swaps a helper by name: the mutants), and calls it
once per feasible path:

* a Python ``if`` on an integer condition (``if m0 >= q_len: return``, ``if c <= b:``) forks the
  run: both sides are explored when z3 finds both feasible under the path so far;
* ``range(lo, hi, step)`` with symbolic bounds runs its body ONCE for an arbitrary iteration
  v = lo + step·t (t ≥ 0, v < hi), the constraint holding only inside the body. That covers every
  iteration exactly when no integer state is carried from one iteration to the next; the executor
  checks that (an AST pass finds the names a loop body reads before it writes them, and at the end
  of the body each must hold data, never an integer, predicate or pointer) and refuses otherwise;
* ``tl.load``/``tl.store`` and descriptor loads are recorded with their pointer, mask and path; a
  load from a tensor named in ``loads`` returns what that model gives (the varlen offsets, the
  block-sparse lists), any other load returns data.

Every path's record (``Path``) carries the hypotheses it ran under (path conditions, lane domains,
compile-time asserts) and the side conditions it met (each branch and loop bound computed without
wrap-around); the obligations turn these into z3 queries.
"""
from __future__ import annotations

import ast
import inspect
import itertools
import sys
import textwrap
import types
from typing import Any, Callable, NamedTuple

import z3

from . import triton_sym as ts

__all__ = ["Access", "Path", "Rejected", "execute", "decide", "record_access", "record_desc", "mutate", "Unsupported",
           "launch"]


class Unsupported(Exception):
    """The kernel does something the executor does not model (never read as proved)."""


class Access(NamedTuple):
    kind: str  # load | store | desc
    tensor: str
    off: Any  # Sym (element offset) or list of Sym (descriptor coordinates)
    mask: Any  # triton_sym.Bool or None
    path: tuple  # z3 Bools in force
    where: str  # function:line in the kernel source


class Path(NamedTuple):
    hyps: tuple  # base facts, lane domains and the final path conditions (z3 Bools)
    base: tuple  # base facts (arguments, program ids, loaded tables, compile-time asserts) and lane domains
    accesses: tuple
    side: tuple  # (what, z3 Bool condition that must hold under hyps)
    result: Any


class Rejected(NamedTuple):
    """The result of a path on which the host function raised one of ``rejects``."""

    reason: str


class _Run:
    def __init__(self, prefix, base, grid, loads, rebind=None):
        self.prefix, self.base, self.grid, self.loads = list(prefix), list(base), grid, loads
        self.rebind = rebind  # (overrides, bind, memo) of ``execute``: what ``launch`` shims a kernel with
        self.taken, self.path, self.scopes = [], [], []
        self.accesses, self.side, self.forks = [], [], []
        self.pids = {}

    def hyps(self):
        return self.base + ts.lane_domain() + self.path

    def feasible(self, cond):
        s = z3.Solver()
        s.set("timeout", 20000)
        s.add(*self.hyps(), cond)
        return s.check() != z3.unsat  # unknown: explore the branch (an infeasible path only adds work)


_RUN: _Run | None = None


def _where():
    f = sys._getframe(2)
    while f is not None and not f.f_code.co_filename.endswith(("fwd.py", "bwd.py", "plan.py")):
        f = f.f_back
    return f"{f.f_code.co_name}:{f.f_lineno}" if f else "?"


def decide(b) -> bool:
    """The executor's answer to a Python branch on an integer condition (see the module docstring)."""
    run = _RUN
    if not isinstance(b, ts.Bool) or not b.exact:
        raise Unsupported("a Python branch on a value that is not an exact integer predicate")
    if b.axes:
        raise Unsupported("a Python branch on a tile (lane-dependent) predicate")
    if run.scopes:
        raise Unsupported("a data-dependent branch inside a symbolic loop")
    run.side.append((f"branch at {_where()} computed without wrap-around", b.safe, tuple(run.path)))
    i = len(run.taken)
    if i < len(run.prefix):
        choice = run.prefix[i]
    else:
        t, f = run.feasible(b.e), run.feasible(z3.Not(b.e))
        if not (t or f):
            raise Unsupported("no branch is feasible (contradictory hypotheses)")
        choice = t
        if t and f:
            run.forks.append(run.taken + [False])
    run.taken.append(choice)
    run.path.append(b.e if choice else z3.Not(b.e))
    return choice


def record_access(kind, ptr, mask):
    run = _RUN
    if not isinstance(ptr, ts.Ptr):
        raise Unsupported(f"{kind} through a non-pointer {ptr!r}")
    if mask is not None and not isinstance(mask, ts.Bool):
        mask = ts.Bool(z3.BoolVal(True), False)  # a data mask: any lane may be on
    run.accesses.append(Access(kind, ptr.name, ptr.off, mask, tuple(run.path), _where()))
    if kind == "load" and ptr.name in run.loads:
        return run.loads[ptr.name](ptr.off, run)
    return ts.Data()


def record_desc(name, coords):
    run = _RUN
    run.accesses.append(Access("desc", name, coords, None, tuple(run.path), _where()))


def static_assert(cond, msg):
    if isinstance(cond, bool):
        if not cond:
            raise Unsupported(f"tl.static_assert fails for this configuration: {msg}")
        return
    _RUN.base.append(cond.e)  # symbolic constexpr: a configuration that compiles satisfies it


def program_id(axis):
    run = _RUN
    if axis not in run.pids:
        v = z3.Int(f"pid{axis}")
        run.base += [v >= 0, v < run.grid[axis]]
        run.pids[axis] = ts.Sym(v)
    return run.pids[axis]


def num_programs(axis):
    return ts.Sym(run_grid(axis))


def run_grid(axis):
    return _RUN.grid[axis]


_loop_ids = itertools.count()


def _sym_range(*a):
    if all(isinstance(x, int) for x in a):
        return range(*a)
    lo, hi, step = (0, a[0], 1) if len(a) == 1 else (a[0], a[1], a[2] if len(a) > 2 else 1)
    return _loop(ts.Sym.lift(lo), ts.Sym.lift(hi), ts.Sym.lift(step), sys._getframe(1))


def _loop(lo, hi, step, frame):
    run = _RUN
    carried = _carried(frame.f_code, frame.f_lineno)
    t = z3.Int(f"iter{next(_loop_ids)}")
    v = ts.Sym(lo.e + step.e * t, ts._or(ts._or(lo.wide, hi.wide), step.wide), ts._and(lo.safe, hi.safe, step.safe))
    run.side.append((f"loop bounds at {_where_frame(frame)} computed without wrap-around",
                     ts._and(lo.safe, hi.safe, step.safe), tuple(run.path)))
    if not z3.is_int_value(step.e):
        run.base.append(step.e > 0)
    scope = [t >= 0, v.e < hi.e]
    run.path += scope
    run.scopes.append(scope)
    yield v
    for name in carried:
        val = frame.f_locals.get(name)
        vals = val if isinstance(val, tuple) else (val,)
        if any(isinstance(x, (ts.Sym, ts.Bool, ts.Ptr)) for x in vals):
            raise Unsupported(f"the loop at {_where_frame(frame)} carries integer state {name!r} between "
                              "iterations: the one-iteration model does not cover it")
    run.scopes.pop()
    del run.path[-len(scope):]


def _where_frame(f):
    return f"{f.f_code.co_name}:{f.f_lineno}"


_CARRIED: dict = {}


def _carried(code, lineno) -> tuple:
    """Names the body of the ``for`` at ``lineno`` reads before it writes them (AST of the source)."""
    key = (code.co_filename, code.co_firstlineno, code.co_name)
    if key not in _CARRIED:
        tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
        loops = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.For):
                loops[node.lineno + code.co_firstlineno - 1] = _read_before_write(node.body)
        _CARRIED[key] = loops
    return tuple(_CARRIED[key].get(lineno, ()))


def _read_before_write(body) -> set:
    assigned = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    written, carried = set(), set()

    def visit(stmts):
        for s in stmts:
            if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
                if s.target.id not in written:
                    carried.add(s.target.id)
            if isinstance(s, (ast.For, ast.If, ast.While)):
                loads = {n.id for n in ast.walk(s.iter if isinstance(s, ast.For) else s.test) if isinstance(n, ast.Name)}
                carried.update((loads & assigned) - written)
                if isinstance(s, ast.For):
                    written.update(n.id for n in ast.walk(s.target) if isinstance(n, ast.Name))
                visit(s.body)
                visit(getattr(s, "orelse", []))
                continue
            loads = {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            carried.update((loads & assigned) - written)
            written.update(n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))

    visit(body)
    return carried


def _is_jit(v) -> bool:
    return (type(v).__name__ in ("JITFunction", "InterpretedFunction", "GluonJITFunction")
            and callable(getattr(v, "fn", None)))


def launch(fn, grid):
    """From a host function run by ``execute``: the kernel ``fn`` rebound as the run's target was, its
    program ids ranging over ``grid`` (z3 Int terms) — what ``fn[grid](...)`` launches."""
    _RUN.grid = tuple(grid)
    overrides, bind, memo = _RUN.rebind
    return _shim(overrides.get((fn.fn if _is_jit(fn) else fn).__name__, fn), overrides, memo, bind)


def _shim(fn, overrides, memo, bind=None):
    """``fn`` (a JITFunction or plain function) with tl, range and its jit helpers rebound (and the
    globals named in ``bind`` replaced: the Gluon modules, ``gluon_sym``)."""
    py = fn.fn if _is_jit(fn) else fn
    if id(py) in memo:
        return memo[id(py)]
    g = dict(py.__globals__)
    out = types.FunctionType(py.__code__, g, py.__name__, py.__defaults__, py.__closure__)
    memo[id(py)] = out
    g["tl"] = ts.TL
    g["range"] = _sym_range
    g.update(bind or {})
    for name, v in list(g.items()):
        if name in (bind or {}):
            continue
        if name in overrides:
            g[name] = _shim(overrides[name], overrides, memo, bind)
        elif _is_jit(v):
            g[name] = _shim(v, overrides, memo, bind)
    return out


def execute(fn, args: dict, *, hyps=(), grid=(1, 1), loads=None, overrides=None, rejects=(),
            max_paths=64, bind=None) -> list[Path]:
    """Every feasible path of ``fn(**args)`` (see the module docstring). ``hyps``: z3 Bools the
    arguments satisfy (what the host admits); ``grid``: z3 Int terms, the launch grid;
    ``loads``: tensor name -> model(offset, run) of what a load returns; ``overrides``: helper name
    -> replacement function (a mutant); ``rejects``: exception types by which a host function refuses
    an input (that path's result is a ``Rejected``); ``bind``: global name -> value, set in ``fn`` and
    every helper shimmed (the Gluon shim's modules, a host's stand-ins)."""
    global _RUN
    overrides = overrides or {}
    name = (fn.fn if _is_jit(fn) else fn).__name__
    memo: dict = {}
    target = _shim(overrides.get(name, fn), overrides, memo, bind)
    paths, todo = [], [[]]
    while todo:
        prefix = todo.pop()
        ts.LANES.clear()
        run = _Run(prefix, hyps, grid, loads or {}, (overrides, bind, memo))
        _RUN = run
        try:
            result = target(**args)
        except rejects as e:  # the host refuses this input: no kernel runs on this path
            result = Rejected(str(e))
        finally:
            _RUN = None
        base = tuple(run.base + ts.lane_domain())
        paths.append(Path(base + tuple(run.path), base, tuple(run.accesses), tuple(run.side), result))
        todo += run.forks  # the other side of every branch first decided on this run
        if len(paths) > max_paths:
            raise Unsupported(f"more than {max_paths} paths")
    return paths


def mutate(fn, old: str, new: str, *, count: int = 1) -> Callable:
    """``fn``'s source with ``old`` replaced by ``new`` (exactly ``count`` times; else ValueError, so a
    mutant whose pattern left the kernel fails loudly), compiled with ``fn``'s globals and line
    numbers."""
    py = fn.fn if _is_jit(fn) else fn
    src = textwrap.dedent(inspect.getsource(py))
    src = "\n".join(line for line in src.splitlines() if not line.startswith("@"))
    found = src.count(old)
    if found != count:
        raise ValueError(f"mutant pattern {old!r} occurs {found} times in {py.__name__}, expected {count}")
    src = src.replace(old, new)
    first = py.__code__.co_firstlineno
    decorators = sum(1 for line in inspect.getsource(py).splitlines() if line.startswith("@"))
    code = compile("\n" * (first - 1 + decorators) + src, py.__code__.co_filename, "exec")
    ns: dict = {}
    exec(code, py.__globals__, ns)
    return ns[py.__name__]
