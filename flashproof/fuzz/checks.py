"""The differential checks: one small ``check_*`` function per property, all run by ``examine``.

``examine(target, spec, dtype, device)`` builds the problem, rounds it to ``dtype``, asks the
oracle, runs the kernel and returns an ``Examination``: every tensor comparison (``Verdict``,
kept for the campaign's error/bound margins) and the ``Deviation`` list, each with a reproducer.

Checks (``CHECKS``):

* ``forward``    — out and LSE against the oracle under the tolerance rule (``tolerance.py``);
* ``gradients``  — dQ, dK, dV for a random dO (distinct per head), 3× rule; also on poisoned
  problems: a planted NaN/inf that reaches a gradient (a backward that multiplies a zero
  probability by the planted entry: 0 · NaN = NaN) is a deviation like any other leak;
* ``split``      — split the keys into three partitions, run the kernel on each with its part of
  the mask, merge the partial (out, lse) pairs in float64 and compare with the oracle;
* ``determinism``— two runs with ``deterministic=True`` are bitwise equal (forward, and backward
  where the target promises it).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .oracle import Expected, oracle, read_inputs as oracle_inputs
from .problem import Problem, ProblemSpec, build
from .targets import Case, KernelOut, Target, Unsupported
from .tolerance import Verdict, judge, magnitudes, naive

__all__ = ["CHECKS", "DTYPES", "Deviation", "Examination", "examine", "merge_partials"]

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

    def reproducer(self) -> str:
        at = "" if self.index is None else f" at {list(self.index)}: got {self.got!r}, expected {self.expected!r}"
        lim = "" if self.reason in ("error", "bitwise") else f" (max error {self.error:.3g}, bound {self.bound:.3g})"
        s = self.spec
        shapes = (f"q {(s.batch, s.heads_q, s.n_q, s.d)}, k {(s.batch, s.heads_kv, s.n_k, s.d)}, "
                  f"v {(s.batch, s.heads_kv, s.n_k, s.dv)}")
        return (f"[{self.kernel}] {self.check}/{self.tensor}: {self.reason}{at}{lim}; {self.dtype} on {self.device}; "
                f"{shapes}; rebuild: flashproof.fuzz.problem.build({s.describe()})"
                + (f"; {self.note}" if self.note else ""))

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


class _Ctx(NamedTuple):
    target: Target
    problem: Problem
    expected: Expected
    dtype: torch.dtype
    dtype_name: str
    device: str
    baseline: tuple              # (out, lse, (dq, dk, dv) or None) of the naive same-dtype run
    mags: dict                   # tolerance.magnitudes of the problem
    grad: bool                   # whether the leaves require grad


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
                    None, None, False)
    structured = s.mask_kind == "none" and not s.empty_rows
    cu_q = None if p.cu_seqlens_q is None else p.cu_seqlens_q.to(ctx.device)
    cu_k = None if p.cu_seqlens_k is None else p.cu_seqlens_k.to(ctx.device)
    return Case(q, k, v, allowed, p.scale, s.causal, s.window, cu_q, cu_k, structured)


def _inputs(ctx: _Ctx):
    p = ctx.problem
    return tuple(_leaf(t, ctx, p.spec.noncontig) for t in (p.q, p.k, p.v))


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

def check_forward(ctx: _Ctx, run: KernelOut):
    e, (b_out, b_lse, _) = ctx.expected, ctx.baseline
    empty = ctx.problem.empty_rows
    pairs = [judge("out", run.out, e.out, b_out, ctx.dtype, ctx.mags, exact_zero=empty[..., None])]
    if run.lse is not None:
        pairs.append(judge("lse", run.lse.reshape(e.lse.shape), e.lse, b_lse, ctx.dtype, ctx.mags))
    return _judge_all(ctx, "forward", pairs)


def check_gradients(ctx: _Ctx, run: KernelOut, leaves):
    e, grads = ctx.expected, ctx.baseline[2]
    dout = ctx.problem.dout.to(ctx.device, ctx.dtype)
    got = torch.autograd.grad(run.out, leaves, dout)
    empty = ctx.problem.empty_rows
    pairs = [judge("dq", got[0], e.dq, grads[0], ctx.dtype, ctx.mags, exact_zero=empty[..., None]),
             judge("dk", got[1], e.dk, grads[1], ctx.dtype, ctx.mags),
             judge("dv", got[2], e.dv, grads[2], ctx.dtype, ctx.mags)]
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


def check_split(ctx: _Ctx, leaves):
    n_k = ctx.problem.spec.n_k
    cuts = sorted({0, n_k // 3, (2 * n_k) // 3, n_k})
    parts = [slice(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    runs = []
    with torch.no_grad():
        for keys in parts:
            r = ctx.target.run(_case(ctx, *leaves, keys=keys), False)
            if r.lse is None:
                return [], []
            runs.append(r)
    out, lse = merge_partials([r.out for r in runs], [r.lse.reshape(r.out.shape[:3]) for r in runs])
    e, (b_out, b_lse, _) = ctx.expected, ctx.baseline
    pairs = [judge("out", out, e.out, b_out, ctx.dtype, ctx.mags, exact_zero=ctx.problem.empty_rows[..., None]),
             judge("lse", lse, e.lse, b_lse, ctx.dtype, ctx.mags)]
    return _judge_all(ctx, "split", pairs)


def _bits(t: torch.Tensor) -> torch.Tensor:
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16}
    return t.detach().contiguous().view(ints[t.element_size()])


def check_determinism(ctx: _Ctx, with_grads: bool, runs: int = 2):
    """``runs`` fresh runs with ``deterministic=True``: out, lse (and dq, dk, dv) bitwise equal to
    the first run's."""
    results = []
    for _ in range(runs):
        leaves = _inputs(ctx)
        r = ctx.target.run(_case(ctx, *leaves), True)
        ts = {"out": r.out, "lse": r.lse}
        if with_grads:
            g = torch.autograd.grad(r.out, leaves, ctx.problem.dout.to(ctx.device, ctx.dtype))
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

def examine(target: Target, spec: ProblemSpec, dtype: str, device: str, *, checks=CHECKS,
            max_work: int | None = None, determinism_runs: int = 2) -> Examination:
    """Run ``checks`` of ``target`` on ``spec`` in ``dtype`` ("fp64", "fp32", "fp16", "bf16").
    Raises ``Unsupported`` when the target cannot take the problem."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, received {dtype!r}")
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}: expected a subset of {CHECKS}")
    tdtype = DTYPES[dtype]
    problem = build(spec).rounded(tdtype)
    expected = oracle(problem, device=device) if max_work is None else oracle(problem, max_work=max_work, device=device)
    lacks = target.lacks(device)
    want_grads = "gradients" in checks and "grad" not in lacks
    dev_t = lambda t: t.to(device, tdtype)  # noqa: E731
    clean = oracle_inputs(problem)  # the baseline measures rounding error: it gets the poison-free inputs
    baseline = naive(dev_t(clean[0]), dev_t(clean[1]), dev_t(clean[2]), problem.allowed.to(device), problem.scale,
                     dev_t(problem.dout) if want_grads else None)
    mags = magnitudes(*clean, problem.dout, expected.lse, problem.scale)
    ctx = _Ctx(target, problem, expected, tdtype, dtype, device, baseline, mags, want_grads)
    verdicts, devs = [], []

    def collect(fn, *args, label):
        try:
            v, d = fn(ctx, *args)
        except Unsupported:
            raise
        except Exception as exc:  # a crash on a valid problem is a finding, not a fuzzer error
            d, v = [Deviation(target.name, label, "-", "error", dtype, device, spec, None, None, None, 0.0, 0.0,
                              f"{type(exc).__name__}: {exc}"[:300])], []
        verdicts.extend(v)
        devs.extend(d)

    leaves = _inputs(ctx)
    try:
        run = target.run(_case(ctx, *leaves), target.deterministic == "fwd+bwd")
    except Unsupported:
        raise
    except Exception as exc:
        devs.append(Deviation(target.name, "forward", "-", "error", dtype, device, spec, None, None, None, 0.0, 0.0,
                              f"{type(exc).__name__}: {exc}"[:300]))
        return Examination(spec, expected.source, verdicts, devs)
    if "forward" in checks:
        collect(check_forward, run, label="forward")
    if want_grads:
        collect(check_gradients, run, leaves, label="gradients")
    if "split" in checks and "mask" not in lacks and "lse" not in lacks:
        collect(check_split, leaves, label="split")
    if "determinism" in checks and target.deterministic:
        collect(check_determinism, target.deterministic == "fwd+bwd" and want_grads, determinism_runs,
                label="determinism")
    return Examination(spec, expected.source, verdicts, devs)
