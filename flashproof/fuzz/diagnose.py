"""Convention-mismatch diagnosis: when a deviating kernel matches another convention there.

``diagnose(target, deviation, device)`` reruns the kernel's forward on the deviation's problem and
compares it, under the same tolerance rule, with the float64 answer of the same problem under each
alternative convention that matters on that problem:

* causal alignment — causal or windowed with Nq ≠ Nk (or unequal varlen sequences): the other
  alignment's mask (top-left: query i sees j ≤ i; bottom-right: j ≤ i + Nk − Nq);
* LSE base — the LSE divided by ln 2 (a log2 LSE where natural is declared) or the reverse;
* empty rows — NaN exactly on the rows with no allowed key, the other rows right;
* GQA head map — Hq > Hkv: query head h reading kv head h % Hkv instead of h // (Hq / Hkv).

It returns a sentence naming the convention matched and the declaration that selects it (or that
no declaration does), else "". The deviation stays a deviation (exit 1) either way: a convention
counts only when declared.
"""
from __future__ import annotations

import math

import torch

from .oracle import masked_attention, read_inputs
from .problem import Problem, build
from .targets import KernelOut
from .tolerance import judge, magnitudes, naive

__all__ = ["diagnose"]


def diagnose(target, dev, device: str, tuning: str = "first") -> str:
    """A sentence for ``dev`` (a ``checks.Deviation`` of ``target``; the kernel called with
    ``Case.tuning`` = ``tuning``), or ""."""
    if dev.reason in ("bitwise",) or dev.check == "determinism":
        return ""
    from .checks import DTYPES, kernel_forward

    dtype = DTYPES[dev.dtype]
    try:
        problem, run = kernel_forward(target, dev.spec, dev.dtype, device, tuning)
    except Exception:  # the kernel raised (it is reported as an error already) or cannot take it
        return ""
    conv = getattr(target, "conventions", None)
    declared_tl = conv is not None and conv.causal_alignment == "top-left"
    for why, alt in _alternatives(problem, declared_tl, conv):
        kind, payload = alt
        if kind == "problem" and _distinct(problem, payload, dtype, device) and \
                _matches(run, payload, dtype, device, lse=run.lse is not None):
            return why
        if kind == "lse" and run.lse is not None and _lse_matches(run.lse, problem, payload, dtype, device):
            return why
        if kind == "nan_rows" and _nan_rows(run.out, problem, dtype, device):
            return why
    return ""


def _alternatives(p: Problem, declared_tl: bool, conv):
    s = p.spec
    rect = s.n_q != s.n_k if s.seqlens is None else any(a != b for a, b in s.seqlens)
    if (s.causal or s.window is not None) and rect:
        other = "bottom-right" if declared_tl else "top-left"
        yield (f"matches {other} causal alignment; declare `--causal-alignment {other}` "
               f"(kernel(causal_alignment=\"{other}\")) if intended"), ("problem", _aligned(p, not declared_tl))
    if s.heads_q != s.heads_kv:
        yield ("matches the interleaved GQA head map (query head h reads kv head h % Hkv); flashproof, SDPA and "
               "flash-attn read kv head h // (Hq / Hkv) — no declaration selects the interleaved map"), \
            ("problem", _interleaved(p))
    natural = conv is None or conv.lse == "natural"
    if natural:
        yield "matches a log2 LSE; declare `--lse log2` (kernel(lse=\"log2\")) if intended", ("lse", 1 / math.log(2.0))
    elif conv.lse == "log2":
        yield "matches a natural-log LSE; declare `--lse natural` if intended", ("lse", math.log(2.0))
    if p.empty_rows.any() and (conv is None or conv.empty_rows == "zero"):
        yield ("returns NaN on exactly the rows with no allowed key; declare `--empty-rows nan` "
               "(kernel(empty_rows=\"nan\")) if intended"), ("nan_rows", None)


def _aligned(p: Problem, top_left: bool) -> Problem:
    """The problem with causal/window aligned top-left (``top_left``) or bottom-right; the mask
    families, sequences and empty rows as drawn."""
    s = p.spec
    base = build(s._replace(causal=False, window=None)).allowed  # sequences, families, empty rows
    allowed = torch.zeros_like(base)
    segs = [(s.n_q, s.n_k)] if s.seqlens is None else list(s.seqlens)
    oq = ok = 0
    for lq, lk in segs:
        i = torch.arange(lq).unsqueeze(1)
        j = torch.arange(lk).unsqueeze(0)
        diag = i if top_left else i + (lk - lq)
        rule = torch.ones(lq, lk, dtype=torch.bool)
        if s.causal:
            rule &= j <= diag
        if s.window is not None:
            left, right = s.window
            rule &= (j >= diag - left) & (j <= diag + right)
        allowed[..., oq:oq + lq, ok:ok + lk] = base[..., oq:oq + lq, ok:ok + lk] & rule
        oq, ok = oq + lq, ok + lk
    return p._replace(allowed=allowed)


def _interleaved(p: Problem) -> Problem:
    """Hq kv heads: query head h gets kv head h % Hkv (a problem with group 1)."""
    s = p.spec
    idx = torch.arange(s.heads_q) % s.heads_kv
    return p._replace(k=p.k[:, idx], v=p.v[:, idx], spec=s._replace(heads_kv=s.heads_q))


def _distinct(p: Problem, alt: Problem, dtype, device: str) -> bool:
    """Whether the alternative convention's answer differs from the declared one's beyond the
    tolerance rule on this problem (else matching it says nothing: e.g. Hkv = 1 maps every head
    alike)."""
    return not _matches(KernelOut(*_expected(alt, device)), p, dtype, device, lse=True)


def _expected(p: Problem, device: str):
    q, k, v = read_inputs(p)
    out, lse = masked_attention(q.to(device), k.to(device), v.to(device), p.allowed.to(device), p.scale)
    return out.cpu(), lse.cpu()


def _matches(run, alt: Problem, dtype, device: str, lse: bool) -> bool:
    out_e, lse_e = _expected(alt, device)
    if not torch.isfinite(out_e).all():
        return False
    q, k, v = (t.to(device, dtype) for t in read_inputs(alt))
    b_out, b_lse, _ = naive(q, k, v, alt.allowed.to(device), alt.scale)
    mags = magnitudes(*read_inputs(alt), alt.dout, lse_e, alt.scale)
    empty = ~alt.allowed.any(-1)
    ok = judge("out", run.out, out_e, b_out, dtype, mags, exact_zero=empty[..., None]).ok
    if lse:
        ok = ok and judge("lse", run.lse.reshape(lse_e.shape), lse_e, b_lse, dtype, mags).ok
    return ok


def _lse_matches(lse, p: Problem, factor: float, dtype, device: str) -> bool:
    out_e, lse_e = _expected(p, device)
    q, k, v = (t.to(device, dtype) for t in read_inputs(p))
    _, b_lse, _ = naive(q, k, v, p.allowed.to(device), p.scale)
    mags = magnitudes(*read_inputs(p), p.dout, lse_e * factor, p.scale)
    if judge("lse", lse_e, lse_e * factor, b_lse * factor, dtype, mags).ok:
        return False  # the two bases agree here (LSE ≈ 0): nothing to tell apart
    return judge("lse", lse.reshape(lse_e.shape), lse_e * factor, b_lse * factor, dtype, mags).ok


def _nan_rows(out, p: Problem, dtype, device: str) -> bool:
    empty = p.empty_rows
    got = out.detach().cpu()
    if not torch.isnan(got[empty]).all() or torch.isnan(got[~empty]).any():
        return False
    out_e, lse_e = _expected(p, device)
    q, k, v = (t.to(device, dtype) for t in read_inputs(p))
    b_out, _, _ = naive(q, k, v, p.allowed.to(device), p.scale)
    mags = magnitudes(*read_inputs(p), p.dout, lse_e, p.scale)
    fixed = torch.where(empty[..., None], torch.zeros_like(got), got)
    return judge("out", fixed, out_e, b_out, dtype, mags, exact_zero=empty[..., None]).ok
