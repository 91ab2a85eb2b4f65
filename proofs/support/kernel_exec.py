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
  of the body each must hold data, never an integer, predicate or pointer) and refuses otherwise,
  unless the caller gives that loop a ``Loop`` (see below);
* a loop that carries integers (``loops[(function, source line of the for)] = Loop(invariant, count)``)
  is run by induction: the invariant I(v, state) must hold at entry (v = lo: a side condition), the body
  runs once on FRESH values of the carried names with I(v, ·) assumed, and I(v + step, ·) of the values
  at its end is a side condition (also tried at once: an invariant z3 shows not inductive is refused);
  after the loop the carried names hold fresh values with I(v_exit, ·), v_exit = lo + step·T the first
  value of the walk not below hi. ``count`` gives the loop a ghost count G (a z3 function Int -> Int):
  ``tl.cumsum(f, 0)`` / ``tl.sum(f, 0)`` of a 0/1 tile f = pred.to(int) over the lane of
  ``tl.arange(0, step)`` (lo = 0) are G(v + L + 1) − G(v) and G(v + step) − G(v), with G(0) = 0 and
  G(p + 1) − G(p) = f at p = v + L: G(x) is the number of positions p < x of the walk (iteration
  p // step, lane p % step) whose flag is on, so these are the prefix and total sums Triton computes.
  The flag as a function of the position (``Path.counts``) may use only values from outside the loop
  (else refused), so that G is one function for the whole walk;
* ``tl.load``/``tl.store`` and descriptor loads are recorded with their pointer, mask and path; a
  load from a tensor named in ``loads`` returns what that model gives (the varlen offsets, the
  block-sparse lists), any other load returns data.

Every path's record (``Path``) carries the hypotheses it ran under (path conditions, lane domains,
compile-time asserts) and the side conditions it met (each branch and loop bound computed without
wrap-around); the obligations turn these into z3 queries.
"""
from __future__ import annotations

import ast
import ctypes
import inspect
import linecache
import itertools
import sys
import textwrap
import types
from typing import Any, Callable, NamedTuple

import z3

from . import triton_sym as ts

__all__ = ["Access", "Path", "Rejected", "Loop", "Count", "execute", "decide", "record_access", "record_desc", "mutate",
           "Unsupported", "launch"]


class Unsupported(Exception):
    """The kernel does something the executor does not model (never read as proved)."""


class Access(NamedTuple):
    kind: str  # load | store | desc
    tensor: str
    off: Any  # Sym (element offset) or list of Sym (descriptor coordinates)
    mask: Any  # triton_sym.Bool or None
    path: tuple  # z3 Bools in force
    where: str  # function:line in the kernel source
    value: Any = None  # what a store writes (Sym, or Data)


class Path(NamedTuple):
    hyps: tuple  # base facts, lane domains and the final path conditions (z3 Bools)
    base: tuple  # base facts (arguments, program ids, loaded tables, compile-time asserts) and lane domains
    accesses: tuple
    side: tuple  # (what, z3 Bool condition that must hold under hyps)
    result: Any
    counts: tuple = ()  # Count per ghost count the run bound (loops with a ``Loop.count``)
    launched: tuple = ()  # the path conditions in force when the host launched the kernel (``launch``)


class Loop(NamedTuple):
    """What the caller says about a loop that carries integers (see the module docstring).
    invariant(v, state, env) -> z3 Bool: v the loop variable's value (z3 Int), state {carried name: value},
    env the kernel frame's locals at the loop (constexprs, values from before the loop); count(env) -> a
    z3 Function Int -> Int (fresh per walk) or None."""

    invariant: Callable
    count: Callable | None = None


class Count(NamedTuple):
    """A ghost count bound by a run: G(x) = #{0 <= p < x : flag(p)}; ``flag`` is a z3 Bool in ``pos``."""

    G: Any
    pos: Any
    flag: Any
    where: str


class Rejected(NamedTuple):
    """The result of a path on which the host function raised one of ``rejects``."""

    reason: str


class _Run:
    def __init__(self, prefix, base, grid, loads, loops=None, rebind=None):
        self.prefix, self.base, self.grid, self.loads = list(prefix), list(base), grid, loads
        self.rebind = rebind  # (overrides, bind, memo) of ``execute``: what ``launch`` shims a kernel with
        self.taken, self.path, self.scopes = [], [], []
        self.accesses, self.side, self.forks = [], [], []
        self.pids = {}
        self.loops = loops or {}
        self.walks = []  # per open symbolic loop: its _Walk (None for a loop without a count)
        self.counts = []
        self.launched = ()

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


def record_access(kind, ptr, mask, value=None):
    run = _RUN
    if not isinstance(ptr, ts.Ptr):
        raise Unsupported(f"{kind} through a non-pointer {ptr!r}")
    if mask is not None and not isinstance(mask, ts.Bool):
        mask = ts.Bool(z3.BoolVal(True), False)  # a data mask: any lane may be on
    run.accesses.append(Access(kind, ptr.name, ptr.off, mask, tuple(run.path), _where(), value))
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


def _is_int_state(val):
    vals = val if isinstance(val, tuple) else (val,)
    return any(isinstance(x, (ts.Sym, ts.Bool, ts.Ptr)) for x in vals)


def _loop(lo, hi, step, frame):
    run = _RUN
    carried = _carried(frame.f_code, frame.f_lineno)
    spec = run.loops.get((frame.f_code.co_name, linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()))
    t = z3.Int(f"iter{next(_loop_ids)}")
    v = ts.Sym(lo.e + step.e * t, ts._or(ts._or(lo.wide, hi.wide), step.wide), ts._and(lo.safe, hi.safe, step.safe))
    run.side.append((f"loop bounds at {_where_frame(frame)} computed without wrap-around",
                     ts._and(lo.safe, hi.safe, step.safe), tuple(run.path)))
    if not z3.is_int_value(step.e):
        run.base.append(step.e > 0)
    state = {n: frame.f_locals.get(n) for n in carried if _is_int_state(frame.f_locals.get(n))}
    if state and spec is None:
        name = sorted(state)[0]
        raise Unsupported(f"the loop at {_where_frame(frame)} carries integer state {name!r} between "
                          "iterations: the one-iteration model does not cover it (no invariant given)")
    scope = [t >= 0, v.e < hi.e]
    walk = None
    if spec is not None:
        walk = _Walk(spec, state, lo, step, t, v, frame, run)
        scope += walk.enter()
    run.path += scope
    run.scopes.append(scope)
    run.walks.append(walk)
    yield v
    for name in carried:
        if name not in (walk.state if walk else ()) and _is_int_state(frame.f_locals.get(name)):
            raise Unsupported(f"the loop at {_where_frame(frame)} carries integer state {name!r} between "
                              "iterations: the one-iteration model does not cover it")
    if walk is not None:
        walk.step()
    run.walks.pop()
    run.scopes.pop()
    del run.path[-len(scope):]
    if walk is not None:
        walk.leave(hi)


def _set_locals(frame, values):
    """Rebind names in a running frame (CPython < 3.13: write f_locals back to the fast locals)."""
    frame.f_locals.update(values)
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def _fresh_like(name, val):
    if not isinstance(val, ts.Sym) or val.axes:
        raise Unsupported(f"loop-carried {name!r} is not an integer scalar (only those take an invariant)")
    return ts.Sym(z3.FreshInt(name), val.wide)


def subterms(e, seen=None):
    """Every distinct subterm of the z3 term ``e`` (itself included), each once; with ``seen`` (a set of
    term ids, updated), only those not in it (and not below one in it: a walk that put a term there
    also yielded everything under it), so walks of several terms sharing one set yield each subterm
    of all of them once."""
    todo, seen = [e], set() if seen is None else seen
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        yield x
        todo += x.children()


def _consts(e, out, functions=False):
    """Add to ``out`` the names of the uninterpreted constants in ``e`` (and of the uninterpreted
    functions applied in it, with ``functions``); return ``out``."""
    for x in subterms(e):
        if (z3.is_app(x) if functions else z3.is_const(x)) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x.decl().name())
    return out


class _Walk:
    """One run of a loop with a ``Loop``: the induction on its carried integers and its ghost count."""

    def __init__(self, spec, state, lo, step, t, v, frame, run):
        self.spec, self.state, self.lo, self.stepv, self.t, self.v = spec, state, lo, step, t, v
        self.frame, self.run, self.where = frame, run, _where_frame(frame)
        self.env = dict(frame.f_locals)
        self.G = spec.count(self.env) if spec.count else None
        if self.G is not None:
            if any(c.G.eq(self.G) for c in run.counts) or any(w is not None and w.G is not None and w.G.eq(self.G)
                                                              for w in run.walks):
                raise Unsupported(f"the ghost count {self.G} is bound to two walks (the loop at {self.where})")
            run.base.append(self.G(0) == 0)  # a count starts at 0
        self.flag = None
        self.outer = set()
        for h in run.hyps():
            _consts(h, self.outer)
        for val in self.env.values():
            if isinstance(val, (ts.Sym, ts.Bool)):
                _consts(val.e, self.outer)

    def inv(self, v, state):
        return self.spec.invariant(v, state, self.env)

    def enter(self):
        run = self.run
        run.side.append((f"loop invariant holds at entry of the loop at {self.where}", self.inv(self.lo.e, self.state),
                         tuple(run.path)))
        self.fresh = {n: _fresh_like(n, val) for n, val in self.state.items()}
        _set_locals(self.frame, self.fresh)
        return [self.inv(self.v.e, self.fresh)]

    def step(self):
        run = self.run
        end = {n: self.frame.f_locals.get(n) for n in self.state}
        for n, val in end.items():
            if not isinstance(val, ts.Sym):
                raise Unsupported(f"loop-carried {n!r} is not an integer at the end of the body at {self.where}")
        cond = self.inv(self.v.e + self.stepv.e, end)
        s = z3.Solver()
        s.set("timeout", 20000)
        s.add(*run.hyps(), z3.Not(cond))
        if s.check() == z3.sat:
            raise Unsupported(f"the invariant of the loop at {self.where} is not inductive: the body's end "
                              f"breaks it (e.g. {_short_model(s.model())})")
        run.side.append((f"loop invariant re-established by the body of the loop at {self.where}", cond,
                         tuple(run.path)))
        run.side.append((f"loop-carried values of the loop at {self.where} computed without wrap-around",
                         ts._and(*[val.safe for val in end.values()]), tuple(run.path)))

    def leave(self, hi):
        """After the loop: fresh values with the invariant at the first value of the walk not below hi."""
        T = z3.FreshInt("trips")
        lo, st = self.lo.e, self.stepv.e
        v_exit = lo + st * T
        out = {n: _fresh_like(n, val) for n, val in self.state.items()}
        self.run.base += [T >= 0, z3.Or(z3.And(T == 0, lo >= hi.e), z3.And(T >= 1, v_exit - st < hi.e, v_exit >= hi.e)),
                          self.inv(v_exit, out)]
        _set_locals(self.frame, out)

    def count(self, x, total):
        """tl.cumsum(x, 0) (total False) or tl.sum(x, 0) of a 0/1 lane tile x, through the ghost count."""
        if self.G is None:
            raise Unsupported(f"tl.cumsum/tl.sum of an integer tile in the loop at {self.where}, which has no count")
        e = x.e
        if not (z3.is_app_of(e, z3.Z3_OP_ITE) and z3.is_int_value(e.arg(1)) and e.arg(1).as_long() == 1
                and z3.is_int_value(e.arg(2)) and e.arg(2).as_long() == 0):
            raise Unsupported("tl.cumsum/tl.sum of an integer tile that is not a 0/1 flag (pred.to(int))")
        if len(x.axes) != 1 or next(iter(x.axes))[1] != 0:
            raise Unsupported("tl.cumsum/tl.sum of a flag over other than one lane on axis 0")
        var, size = ts.LANES[next(iter(x.axes))]
        n = size.e if isinstance(size, ts.Sym) else size
        if not (isinstance(n, int) and z3.is_int_value(self.stepv.e) and self.stepv.e.as_long() == n
                and z3.is_int_value(self.lo.e) and self.lo.e.as_long() == 0):
            raise Unsupported(f"a count in the loop at {self.where} needs range(0, hi, N) over tl.arange(0, N)")
        if self.flag is None:
            stray = _consts(e, set()) - self.outer - {self.t.decl().name(), var.decl().name()}
            if stray:
                raise Unsupported(f"the counted flag in the loop at {self.where} depends on values made inside "
                                  f"the loop ({sorted(stray)}): its count is not one function of the position")
            self.flag = (e.get_id(), var)
            p = z3.FreshInt("pos")
            flag = z3.substitute(e.arg(0), (self.t, p / n), (var, p % n))
            self.run.counts.append(Count(self.G, p, flag, self.where))
            self.run.scopes[-1].append(self.G(self.v.e + var + 1) - self.G(self.v.e + var) == e)
            self.run.path.append(self.run.scopes[-1][-1])
        elif self.flag[0] != e.get_id():
            raise Unsupported(f"two different flags counted in the loop at {self.where}")
        v = self.v.e
        val = self.G(v + n) - self.G(v) if total else self.G(v + var + 1) - self.G(v)
        return ts.Sym(val, False, True, "own", frozenset() if total else x.axes)


def _short_model(m):
    return ", ".join(f"{d.name()}={m[d]}" for d in list(m.decls())[:8] if d.arity() == 0)


def count(x, total):
    """tl.cumsum / tl.sum of an integer tile: through the innermost open loop's ghost count."""
    run = _RUN
    walk = run.walks[-1] if run.walks else None
    if walk is None:
        raise Unsupported("tl.cumsum/tl.sum of an integer tile outside a loop that declares a count")
    return walk.count(x, total)


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
    _RUN.launched = tuple(_RUN.path)
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
            max_paths=64, loops=None, bind=None) -> list[Path]:
    """Every feasible path of ``fn(**args)`` (see the module docstring). ``hyps``: z3 Bools the
    arguments satisfy (what the host admits); ``grid``: z3 Int terms, the launch grid;
    ``loads``: tensor name -> model(offset, run) of what a load returns; ``overrides``: helper name
    -> replacement function (a mutant); ``rejects``: exception types by which a host function refuses
    an input (that path's result is a ``Rejected``); ``loops``: (function name, source line of the
    ``for``, stripped) -> ``Loop``, for loops that carry integers; ``bind``: global name -> value, set in
    ``fn`` and every helper shimmed (the Gluon shim's modules, a host's stand-ins)."""
    global _RUN
    overrides = overrides or {}
    name = (fn.fn if _is_jit(fn) else fn).__name__
    memo: dict = {}
    target = _shim(overrides.get(name, fn), overrides, memo, bind)
    paths, todo = [], [[]]
    while todo:
        prefix = todo.pop()
        ts.LANES.clear()
        run = _Run(prefix, hyps, grid, loads or {}, loops, (overrides, bind, memo))
        _RUN = run
        try:
            result = target(**args)
        except rejects as e:  # the host refuses this input: no kernel runs on this path
            result = Rejected(str(e))
        finally:
            _RUN = None
        base = tuple(run.base + ts.lane_domain())
        paths.append(Path(base + tuple(run.path), base, tuple(run.accesses), tuple(run.side), result,
                          tuple(run.counts), run.launched))
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
