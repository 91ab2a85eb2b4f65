"""The differential checks: one small ``check_*`` function per property, all run by ``examine``.

``examine(target, spec, dtype, device)`` builds the problem, rounds it to ``dtype``, asks the
oracle, runs the kernel and returns an ``Examination``: every tensor comparison (``Verdict``,
kept for the campaign's error/bound margins) and the ``Deviation`` list, each with a reproducer.

Checks (``CHECKS``):

* ``forward``    — out and LSE against the oracle under the tolerance rule (``tolerance.py``);
* ``gradients``  — dQ, dK, dV of Σ dO·out + Σ dLSE·lse for a random dO (distinct per head) and,
  when the kernel's LSE carries a gradient, a random LSE cotangent (what split-KV and ring merges
  differentiate; a backward that takes it with the wrong sign is caught), 3× rule; also on
  poisoned problems: a planted NaN/inf that reaches a gradient (a backward that multiplies a zero
  probability by the planted entry: 0 · NaN = NaN) is a deviation like any other leak;
* ``split``      — split the keys into three partitions, run the kernel on each with its part of
  the mask, merge the partial (out, lse) pairs in float64 and compare with the oracle;
* ``determinism``— ``determinism_runs`` (≥ 2; fewer: not run, and the summary says so) runs with
  ``deterministic=True`` are bitwise equal (forward, and backward where the target promises it).

Who failed: every call into the kernel (its forward, its backward through autograd, the split and
determinism calls) goes through ``_call``, which also waits for the device (``faults.py``); an
exception there — a device fault included — is a finding about the kernel (reason ``error``),
reported once per example however many checks met it. After a device fault no further check
runs. ``Target.run`` is taken whole for the kernel, except the steps its adapter runs through
``targets.adapter_step`` (building the call's arguments, converting layouts and results): those
raise ``HarnessError``, which ``_call`` lets through. Any other exception — the oracle, the
baseline, the comparison — is the harness's, propagates, and ends the campaign as a harness error
(exit 4), never as a deviation. The oracles must agree before any verdict (``oracle.oracles``).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

import re

from .errors import HarnessError
from .faults import FAULT_NOTE, is_device_fault, synchronize
from .oracle import Expected, oracles, read_inputs as oracle_inputs, vjp
from .problem import Problem, ProblemSpec, build, lse_cotangent, sparse_route
from .targets import Case, KernelOut, Target, Unsupported
from .tolerance import Verdict, judge, naive

__all__ = ["CHECKS", "DTYPES", "Deviation", "Examination", "examine", "merge_partials", "error_signature"]

CHECKS = ("forward", "gradients", "split", "determinism")
DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class Deviation(NamedTuple):
    """One finding: which kernel, check and tensor, the first offending element and how to rebuild it."""

    kernel: str
    check: str
    tensor: str
    reason: str            # nan / non-finite / convention / tolerance / bitwise / error
    dtype: str
    device: str
    spec: ProblemSpec
    index: tuple | None
    got: float | None
    expected: float | None
    error: float
    bound: float
    note: str = ""
    diagnosis: str = ""    # a convention the kernel matches instead (diagnose.py), or ""
    device_fault: bool = False  # the kernel faulted on the device (faults.py): the context is unusable after it

    def reproducer(self) -> str:
        at = "" if self.index is None else f" at {list(self.index)}: got {self.got!r}, expected {self.expected!r}"
        lim = "" if self.reason in ("error", "bitwise") else f" (max error {self.error:.3g}, bound {self.bound:.3g})"
        s = self.spec
        shapes = (f"q {(s.batch, s.heads_q, s.n_q, s.d)}, k {(s.batch, s.heads_kv, s.n_k, s.d)}, "
                  f"v {(s.batch, s.heads_kv, s.n_k, s.dv)}")
        return (f"[{self.kernel}] {self.check}/{self.tensor}: {self.reason}{at}{lim}; {self.dtype} on {self.device}; "
                f"{shapes}; rebuild: flashproof.fuzz.problem.build({s.describe()})"
                + (f"; {self.note}" if self.note else "") + (f"; {self.diagnosis}" if self.diagnosis else ""))

    def as_dict(self) -> dict:
        d = self._asdict()
        d["spec"] = s = self.spec._asdict()
        s["window"] = list(s["window"]) if s["window"] else None
        s["seqlens"] = [list(p) for p in s["seqlens"]] if s["seqlens"] else None
        d["index"] = list(self.index) if self.index is not None else None
        d["reproducer"] = self.reproducer()
        return d


class Examination(NamedTuple):
    spec: ProblemSpec
    source: str                  # which oracle answered
    verdicts: list               # (check, Verdict)
    deviations: list             # Deviation
    notes: frozenset = frozenset()  # what was not checked on this example, and why
    agreement: str = ""          # how the two oracles were compared ("full", "rows:<n>")


class _Ctx(NamedTuple):
    target: Target
    problem: Problem
    expected: Expected
    gold: Expected               # the independent dense float64 evaluation (the baseline's error is against it)
    dtype: torch.dtype
    dtype_name: str
    device: str
    baseline: tuple              # (out, lse, (dq, dk, dv) or None) of the naive same-dtype run
    mags: dict                   # tolerance.magnitudes of the problem
    grad: bool                   # whether the leaves require grad
    lse_grad: bool               # whether the LSE cotangent is fed back
    tolerance: str = "empirical"  # the rule for out and lse (tolerance.RULES)
    tuning: str = "first"        # Case.tuning of every call


#: head-dim padding of poisoned problems' inputs (keeps 16-byte row alignment for fp16/bf16)
PAD = 8


def _leaf(x: torch.Tensor, ctx: _Ctx, noncontig: bool) -> torch.Tensor:
    """x (B, H, N, D) float64 → a leaf in the kernel dtype on the device; with ``noncontig`` it is a
    (B, N, H, D)-strided transposed view, as a packed QKV projection hands it over. A poisoned
    problem's leaf is a view of a buffer (…, D + PAD) whose last PAD columns hold the poison: a
    kernel that reads past D (head-dim padding) picks it up."""
    y = x.to(ctx.device, ctx.dtype)
    if noncontig:
        y = y.transpose(1, 2).contiguous().transpose(1, 2)
    poison = ctx.problem.spec.poison
    if poison is not None:
        # filled in float64 and converted like the rows above: 1e30 becomes inf in fp16 (torch.full
        # in fp16 refuses the overflow instead of rounding it)
        buf = torch.full((*y.shape[:-1], y.shape[-1] + PAD), float(poison), dtype=torch.float64,
                         device=y.device).to(y.dtype)
        if noncontig:
            buf = buf.transpose(1, 2).contiguous().transpose(1, 2)
        buf[..., :y.shape[-1]] = y
        y = buf[..., :y.shape[-1]]
    return y.requires_grad_(ctx.grad)


def _case(ctx: _Ctx, q, k, v, keys: slice | None = None) -> Case:
    p, s = ctx.problem, ctx.problem.spec
    allowed = p.allowed.to(ctx.device)
    if keys is not None:  # one key partition: its piece of the mask, given explicitly
        return Case(q, k[:, :, keys], v[:, :, keys], allowed[..., keys].contiguous(), p.scale, False, None,
                    None, None, False, ctx.tuning)
    structured = s.mask_kind == "none" and not s.empty_rows
    cu_q = None if p.cu_seqlens_q is None else p.cu_seqlens_q.to(ctx.device)
    cu_k = None if p.cu_seqlens_k is None else p.cu_seqlens_k.to(ctx.device)
    # the block-sparse route (problem.sparse_route): the key partitions above stay dense-mask calls
    return Case(q, k, v, allowed, p.scale, s.causal, s.window, cu_q, cu_k, structured, ctx.tuning,
                s.block if sparse_route(s) else 0)


def _inputs(ctx: _Ctx):
    p = ctx.problem
    return tuple(_leaf(t, ctx, p.spec.noncontig) for t in (p.q, p.k, p.v))


class _KernelRaised(Exception):
    """A call into the kernel raised (``label``: the check that made the call; ``fault``: a device
    fault, after which nothing more runs in this process)."""

    def __init__(self, label: str, exc: BaseException):
        super().__init__(label, exc)
        self.label, self.exc = label, exc
        self.fault = is_device_fault(exc)


def _call(label: str, device: str, fn, *args):
    """Call into the kernel and wait for the device (``faults.synchronize``: a device fault of the
    kernel's work surfaces here, not in a later harness op): its exceptions become
    ``_KernelRaised`` (findings), ``Unsupported`` passes through (the example is skipped), and so
    does ``HarnessError`` (an adapter's own code failed: ``targets.adapter_step``)."""
    try:
        r = fn(*args)
        synchronize(device)
        return r
    except (Unsupported, HarnessError):
        raise
    except Exception as exc:
        raise _KernelRaised(label, exc) from exc


def error_signature(note: str) -> str:
    """What identifies one kind of kernel error across problems: the exception type and the
    first line of its message with the numbers (shapes, indices) blanked."""
    return re.sub(r"\d+", "#", note.splitlines()[0] if note else "")


def _run(ctx: _Ctx, case: Case, deterministic: bool, label: str) -> KernelOut:
    """One kernel call, its result checked for the shapes of our conventions (a wrong shape is
    the kernel's error, reported as such)."""
    r = _call(label, ctx.device, ctx.target.run, case, deterministic)
    B, Hq, Nq = case.q.shape[:3]
    want = (B, Hq, Nq, case.v.shape[3])
    if not isinstance(r, KernelOut) or not isinstance(r.out, torch.Tensor) or tuple(r.out.shape) != want:
        got = tuple(r.out.shape) if isinstance(r, KernelOut) and isinstance(r.out, torch.Tensor) else type(r).__name__
        raise _KernelRaised(label, ValueError(f"the kernel returned out of shape {got}, expected (B, Hq, Nq, Dv) = {want}"))
    if r.lse is not None and r.lse.numel() != B * Hq * Nq:
        raise _KernelRaised(label, ValueError(
            f"the kernel returned lse of shape {tuple(r.lse.shape)}, expected (B, Hq, Nq) = {(B, Hq, Nq)}"))
    return r


def _grads(ctx: _Ctx, run: KernelOut, leaves, label: str) -> tuple:
    """The kernel's backward (through autograd) for the problem's cotangents."""
    dout = ctx.problem.dout.to(ctx.device, ctx.dtype)
    dlse = ctx.problem.dlse.to(ctx.device) if ctx.lse_grad else None
    return _call(label, ctx.device, vjp, run.out, run.lse if ctx.lse_grad else None, leaves, dout, dlse)


def _dev(ctx: _Ctx, check: str, v: Verdict) -> "Deviation":
    return Deviation(ctx.target.name, check, v.name, v.reason, ctx.dtype_name, ctx.device, ctx.problem.spec,
                     v.first, v.got, v.expected, v.error, v.bound)


def _judge_all(ctx: _Ctx, check: str, pairs) -> tuple[list, list]:
    verdicts, devs = [], []
    for v in pairs:
        verdicts.append((check, v))
        if not v.ok:
            devs.append(_dev(ctx, check, v))
    return verdicts, devs


# ----------------------------------------------------------------------------------- checks

def _pairs_out_lse(ctx: _Ctx, out, lse, rule: str):
    e, g, (b_out, b_lse, _) = ctx.expected, ctx.gold, ctx.baseline
    empty = ctx.problem.empty_rows
    pairs = [judge("out", out, e.out, b_out, ctx.dtype, ctx.mags, exact_zero=empty[..., None], gold=g.out,
                   rule=rule)]
    if lse is not None:
        pairs.append(judge("lse", lse.reshape(e.lse.shape), e.lse, b_lse, ctx.dtype, ctx.mags, gold=g.lse,
                           rule=rule))
    return pairs


def check_forward(ctx: _Ctx, run: KernelOut):
    return _judge_all(ctx, "forward", _pairs_out_lse(ctx, run.out, run.lse, ctx.tolerance))


def check_gradients(ctx: _Ctx, run: KernelOut, leaves):
    e, g, grads = ctx.expected, ctx.gold, ctx.baseline[2]
    got = _grads(ctx, run, leaves, "gradients")
    empty = ctx.problem.empty_rows
    pairs = [judge("dq", got[0], e.dq, grads[0], ctx.dtype, ctx.mags, exact_zero=empty[..., None], gold=g.dq),
             judge("dk", got[1], e.dk, grads[1], ctx.dtype, ctx.mags, gold=g.dk),
             judge("dv", got[2], e.dv, grads[2], ctx.dtype, ctx.mags, gold=g.dv)]
    return _judge_all(ctx, "gradients", pairs)


def merge_partials(outs: list, lses: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge partial results over disjoint key sets, in float64: lse = log Σ e^{lse_p},
    out = Σ e^{lse_p − lse} out_p. A part (or row) with lse = −inf has weight 0; a row empty in
    every part gets out 0, lse −inf. outs (B, H, Nq, Dv), lses (B, H, Nq) each."""
    lse_stack = torch.stack([x.detach().to("cpu", torch.float64) for x in lses])          # (P, B, H, Nq)
    out_stack = torch.stack([x.detach().to("cpu", torch.float64) for x in outs])          # (P, B, H, Nq, Dv)
    lse = torch.logsumexp(lse_stack, dim=0)                                                # −inf if all −inf
    ref = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    w = torch.where(torch.isneginf(lse_stack), torch.zeros_like(lse_stack), torch.exp(lse_stack - ref))
    out = (w.unsqueeze(-1) * torch.where(w.unsqueeze(-1) > 0, out_stack, torch.zeros_like(out_stack))).sum(0)
    return out, lse


#: the note of an example whose split check could not merge (``check_split``)
SPLIT_NO_LSE = "split not checked: the kernel returned no LSE for a key partition (partial results cannot be merged)"


def check_split(ctx: _Ctx, leaves, notes: set):
    """The kernel on three key partitions, merged by their LSEs, against the oracle. A partition
    returned without an LSE cannot be merged: nothing is judged and ``notes`` gets
    ``SPLIT_NO_LSE``, so the summary says the check did not run."""
    n_k = ctx.problem.spec.n_k
    cuts = sorted({0, n_k // 3, (2 * n_k) // 3, n_k})
    parts = [slice(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    runs = []
    with torch.no_grad():
        for keys in parts:
            r = _run(ctx, _case(ctx, *leaves, keys=keys), False, "split")
            if r.lse is None:
                notes.add(SPLIT_NO_LSE)
                return [], []
            runs.append(r)
    out, lse = merge_partials([r.out for r in runs], [r.lse.reshape(r.out.shape[:3]) for r in runs])
    return _judge_all(ctx, "split", _pairs_out_lse(ctx, out, lse, "empirical"))  # the merge is not in the proved bound


def _bits(t: torch.Tensor) -> torch.Tensor:
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16}
    return t.detach().contiguous().view(ints[t.element_size()])


def check_determinism(ctx: _Ctx, with_grads: bool, runs: int = 2):
    """``runs`` (≥ 2) fresh runs with ``deterministic=True``: out, lse (and dq, dk, dv) bitwise
    equal to the first run's."""
    if runs < 2:
        raise ValueError(f"the determinism check compares >= 2 runs, received runs={runs}")
    results = []
    for _ in range(runs):
        leaves = _inputs(ctx)
        r = _run(ctx, _case(ctx, *leaves), True, "determinism")
        ts = {"out": r.out, "lse": r.lse}
        if with_grads:
            g = _grads(ctx, r, leaves, "determinism")
            ts.update(dq=g[0], dk=g[1], dv=g[2])
        results.append({n: t for n, t in ts.items() if t is not None})
    devs = []
    for name, a in results[0].items():
        for r, later in enumerate(results[1:], start=2):
            b = later[name]
            if not torch.equal(_bits(a), _bits(b)):
                idx = tuple(int(i) for i in torch.nonzero(_bits(a) != _bits(b))[0])
                devs.append(Deviation(ctx.target.name, "determinism", name, "bitwise", ctx.dtype_name, ctx.device,
                                      ctx.problem.spec, idx, a[idx].item(), b[idx].item(), 0.0, 0.0,
                                      f"run {r} of {runs} differs from run 1"))
                break
    return [], devs


# ----------------------------------------------------------------------------------- driver

def _error(target: Target, spec, dtype: str, device: str, raised: _KernelRaised, checks: list) -> Deviation:
    exc = raised.exc
    text = f"{type(exc).__name__}: {exc}"[:300]
    if raised.fault:
        text = f"{text.splitlines()[0]}; {FAULT_NOTE}"
    return Deviation(target.name, "+".join(checks), "-", "error", dtype, device, spec, None, None, None, 0.0, 0.0,
                     text, device_fault=raised.fault)


def examine(target: Target, spec: ProblemSpec, dtype: str, device: str, *, checks=CHECKS,
            max_work: int | None = None, determinism_runs: int = 2, reference_fn=None,
            dense_fn=None, tolerance: str = "empirical", tuning: str = "first") -> Examination:
    """Run ``checks`` of ``target`` on ``spec`` in ``dtype`` ("fp64", "fp32", "fp16", "bf16").
    Raises ``Unsupported`` when the target cannot take the problem, ``HarnessError`` when the two
    oracles disagree; any other exception outside a kernel call is the harness's and propagates.
    ``reference_fn``/``dense_fn``: replacements of the two oracles (tests plant a wrong one);
    ``tolerance``: the rule for out and lse, "empirical" or "proved" (``tolerance.py``); ``tuning``:
    ``Case.tuning`` of every call ("first" or "autotune")."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, received {dtype!r}")
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}: expected a subset of {CHECKS}")
    tdtype = DTYPES[dtype]
    problem = build(spec).rounded(tdtype)
    lacks = target.lacks(device)
    notes = set()
    want_grads = "gradients" in checks and "grad" not in lacks
    stub = _Ctx(target, problem, None, None, tdtype, dtype, device, None, None, want_grads, False, tuning=tuning)
    leaves = _inputs(stub)
    try:
        run = _run(stub, _case(stub, *leaves), target.deterministic == "fwd+bwd", "forward")
    except _KernelRaised as raised:
        return Examination(spec, "", [], [_error(target, spec, dtype, device, raised, ["forward"])], frozenset(notes))
    if want_grads and not run.out.requires_grad:
        want_grads = False
        notes.add("gradients not checked: the kernel's output carries no gradient")
    lse_grad = want_grads and run.lse is not None and run.lse.requires_grad
    if want_grads and run.lse is not None and not lse_grad:
        notes.add("LSE cotangent not fed back: the kernel's LSE carries no gradient")
    if lse_grad:
        problem = problem._replace(dlse=lse_cotangent(spec))
    kw = {} if max_work is None else {"max_work": max_work}
    orc = oracles(problem, device=device, reference_fn=reference_fn, dense_fn=dense_fn, **kw)
    dev_t = lambda t: t.to(device, tdtype)  # noqa: E731
    clean = oracle_inputs(problem)  # the baseline measures rounding error: it gets the poison-free inputs
    baseline = naive(dev_t(clean[0]), dev_t(clean[1]), dev_t(clean[2]), problem.allowed.to(device), problem.scale,
                     dev_t(problem.dout) if want_grads else None, problem.dlse.to(device) if lse_grad else None)
    ctx = _Ctx(target, problem, orc.expected, orc.gold, tdtype, dtype, device, baseline, orc.mags, want_grads, lse_grad,
               tolerance, tuning)
    verdicts, devs, raised_by = [], [], {}

    def collect(fn, *args, label):
        if any(r.fault for r, _ in raised_by.values()):
            return  # a device fault: the context is unusable, no further check can run
        try:
            v, d = fn(ctx, *args)
        except _KernelRaised as raised:  # the kernel raised: one finding per kind of error
            sig = error_signature(f"{type(raised.exc).__name__}: {raised.exc}")
            raised_by.setdefault(sig, (raised, []))[1].append(label)
            return
        verdicts.extend(v)
        devs.extend(d)

    if "forward" in checks:
        collect(check_forward, run, label="forward")
    if want_grads:
        collect(check_gradients, run, leaves, label="gradients")
    if "split" in checks and "mask" not in lacks and "lse" not in lacks:
        collect(check_split, leaves, notes, label="split")
    if "determinism" in checks and target.deterministic:
        if determinism_runs >= 2:
            collect(check_determinism, target.deterministic == "fwd+bwd" and want_grads, determinism_runs,
                    label="determinism")
        else:
            notes.add(f"determinism not checked: {determinism_runs} run(s) requested, >= 2 are compared")
    devs.extend(_error(target, spec, dtype, device, r, labels) for r, labels in raised_by.values())
    return Examination(spec, orc.expected.source, verdicts, devs, frozenset(notes), orc.agreement)


def kernel_forward(target: Target, spec: ProblemSpec, dtype: str, device: str,
                   tuning: str = "first") -> tuple[Problem, KernelOut]:
    """The problem of ``spec`` rounded to ``dtype`` and the kernel's forward on it (no oracle; for
    ``diagnose``). Exceptions of the kernel propagate."""
    tdtype = DTYPES[dtype]
    problem = build(spec).rounded(tdtype)
    ctx = _Ctx(target, problem, None, None, tdtype, dtype, device, None, None, False, False, tuning=tuning)
    with torch.no_grad():
        return problem, _run(ctx, _case(ctx, *_inputs(ctx)), False, "forward")
