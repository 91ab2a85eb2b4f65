"""Batched speculative rejection sampler: ``rejection_sample()``, its input checks and its backend choice
(the torch path in ``torch.py``, CPU and GPU; the Triton path in ``triton.py``).

The rule (spec SPEC-STEP / SPEC-CYCLE, proved in flashproof.proofs.speculative; the reference is
``flashproof.verified.speculative.verify``, which this code matches bit for bit):
    accept draft x at position i  iff  u_i · p_draft(x) < p_target(x)    (float64, no division)
    on the first rejection emit a draw from norm(max(0, p_target − p_draft)) (empty: from p_target)
    on full acceptance emit a bonus token drawn from p_bonus.

Draws are inverse-CDF in fixed point: W_y = ⌊w_y·2^40⌋ (int64), U = ⌊u·2^31⌋, token = the number
of y with C_y ≤ ⌊U·T/2^31⌋ where C = cumsum(W) and T = C[-1]. Integer sums are exact, so the token
does not depend on the summation order of the device (GPU == CPU == reference).

Layout: B requests, K = the padded draft length, V the vocabulary. Request b has
``num_draft_tokens[b] ∈ [0, K]`` drafts; entries beyond it are never read (they may hold anything).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ..interpreter import interpreting

__all__ = ["SpecSample", "SamplerUniforms", "rejection_sample", "draw_uniforms", "MAX_VOCAB", "row_sum_tol",
           "WEIGHT_BITS", "UNIFORM_BITS"]

WEIGHT_BITS = 40  # W = ⌊w·2^40⌋ ≤ 2^40(1 + tol); a row of ≤ MAX_VOCAB of them sums below 2^63
UNIFORM_BITS = 31  # U = ⌊u·2^31⌋ < 2^31, so U·(T >> 31) < 2^62: the threshold never overflows int64
MAX_VOCAB = 1 << 22
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def row_sum_tol(dtype: torch.dtype) -> float:
    """|Σ row − 1| allowed: 1e-4 for fp32/fp64 (the reference's ROW_SUM_TOL), 1e-2 for fp16/bf16
    (each entry is rounded to 8–11 bits, so a correct row can be ~2^-9 off)."""
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


class SpecSample(NamedTuple):
    """tokens: (B, K+1) int64, the accepted drafts then the replacement/bonus token, padded with −1;
    num_accepted: (B,) int64 in [0, num_draft_tokens[b]]."""

    tokens: torch.Tensor
    num_accepted: torch.Tensor


class SamplerUniforms(NamedTuple):
    """accept: (B, K) one uniform per draft position; residual: (B,) for the draw at the first
    rejection; bonus: (B,) for the bonus draw. float64 (float32 is converted exactly), in [0, 1)."""

    accept: torch.Tensor
    residual: torch.Tensor
    bonus: torch.Tensor


def draw_uniforms(B: int, K: int, *, device=None, generator: torch.Generator | None = None) -> SamplerUniforms:
    """Fresh float64 uniforms in [0, 1) from ``generator`` (one (B, K) block, then residual, then bonus)."""
    kw = dict(device=device, dtype=torch.float64, generator=generator)
    return SamplerUniforms(torch.rand((B, K), **kw), torch.rand((B,), **kw), torch.rand((B,), **kw))


def _fail(msg: str):
    raise ValueError(msg)


class _Deferred:
    """Data checks on the device, read back with ONE host sync (``raise_first``) instead of one each.
    ``add(bad, report)``: ``bad`` a bool tensor, ``report()`` raises the detailed error (error path only)."""

    def __init__(self):
        self.items = []

    def add(self, bad: torch.Tensor, report) -> None:
        self.items.append((bad.any(), report))

    def raise_first(self) -> None:
        if not self.items:
            return
        flags = torch.stack([b for b, _ in self.items]).tolist()  # the one sync
        for flag, (_, report) in zip(flags, self.items):
            if flag:
                report()


def _check_structure(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens):
    """Shapes, dtypes, devices (no device work, no sync) -> B, K, V, num_draft_tokens on the device or None."""
    for name, t in (("draft_token_ids", draft_token_ids), ("p_target", p_target), ("p_bonus", p_bonus)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, received {type(t).__name__}")
    if p_target.dim() != 3:
        _fail(f"p_target must be (B, K, V), received shape {tuple(p_target.shape)}")
    B, K, V = p_target.shape
    if V < 1 or V > MAX_VOCAB:
        _fail(f"vocabulary size V = {V} must be in [1, {MAX_VOCAB}] (fixed-point sums must fit int64)")
    if tuple(draft_token_ids.shape) != (B, K):
        _fail(f"draft_token_ids must be (B, K) = {(B, K)} to match p_target, received {tuple(draft_token_ids.shape)}")
    if draft_token_ids.dtype.is_floating_point or draft_token_ids.dtype in (torch.bool, torch.complex64):
        raise TypeError(f"draft_token_ids must be an integer tensor, received {draft_token_ids.dtype}")
    if tuple(p_bonus.shape) != (B, V):
        _fail(f"p_bonus must be (B, V) = {(B, V)}, received {tuple(p_bonus.shape)}")
    probs = [("p_target", p_target), ("p_bonus", p_bonus)]
    if p_draft is not None:
        if not isinstance(p_draft, torch.Tensor):
            raise TypeError(f"p_draft must be a torch.Tensor or None, received {type(p_draft).__name__}")
        if tuple(p_draft.shape) != (B, K, V):
            _fail(f"p_draft must be (B, K, V) = {(B, K, V)} like p_target, received {tuple(p_draft.shape)}")
        probs.append(("p_draft", p_draft))
    for name, t in probs:
        if t.dtype not in _FLOATS:
            raise TypeError(f"{name} must be a floating tensor (fp16/bf16/fp32/fp64), received {t.dtype}")
        if t.dtype != p_target.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but p_target has {p_target.dtype}; pass one dtype")
    for name, t in probs + [("draft_token_ids", draft_token_ids)]:
        if t.device != p_target.device:
            _fail(f"{name} is on {t.device} but p_target is on {p_target.device}")
    if num_draft_tokens is None:
        return B, K, V, None
    k = torch.as_tensor(num_draft_tokens, device=p_target.device)
    if k.dtype.is_floating_point or k.dtype == torch.bool or tuple(k.shape) != (B,):
        _fail(f"num_draft_tokens must be (B,) = ({B},) integers, received {tuple(k.shape)} {k.dtype}")
    return B, K, V, k


def _check_inputs(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens, defer: _Deferred):
    B, K, V, k = _check_structure(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens)
    if k is None:
        return B, K, V, torch.full((B,), K, dtype=torch.int64, device=p_target.device)
    k = k.long()
    bad = (k < 0) | (k > K)

    def report():
        b = int(bad.nonzero()[0, 0])
        _fail(f"num_draft_tokens[{b}] = {int(k[b])} is outside [0, K = {K}]")
    defer.add(bad, report)
    return B, K, V, k.clamp(0, K)


def _uniform_structure(u: SamplerUniforms, B: int, K: int, device) -> SamplerUniforms:
    """Shapes and dtypes of injected uniforms (no device work beyond a move) -> tensors on ``device``."""
    if not isinstance(u, SamplerUniforms):
        raise TypeError(f"uniforms must be a SamplerUniforms, received {type(u).__name__}")
    out = []
    for name, t, shape in (("accept", u.accept, (B, K)), ("residual", u.residual, (B,)), ("bonus", u.bonus, (B,))):
        t = t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
        if tuple(t.shape) != shape:
            _fail(f"uniforms.{name} must have shape {shape}, received {tuple(t.shape)}")
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"uniforms.{name} must be float32/float64, received {t.dtype}")
        out.append(t if t.device == device else t.to(device=device))
    return SamplerUniforms(*out)


def _check_uniforms(u: SamplerUniforms, B: int, K: int, device, defer: _Deferred) -> SamplerUniforms:
    out = []
    for name, t in zip(SamplerUniforms._fields, _uniform_structure(u, B, K, device)):
        t = t.to(dtype=torch.float64)
        bad = ~((t >= 0) & (t < 1))  # NaN fails both

        def report(name=name, t=t, bad=bad):
            idx = tuple(int(i) for i in bad.nonzero()[0])
            _fail(f"uniforms.{name}{list(idx)} = {float(t[idx])!r} is not in [0, 1)")
        defer.add(bad, report)
        out.append(torch.where(bad, 0.0, t))
    return SamplerUniforms(*out)


def _row_report(name: str, rows: torch.Tensor, which: torch.Tensor, tol: float, labels, defer: _Deferred) -> None:
    """Defer: raise for the first row (among ``which``) that holds NaN/negatives or does not sum to 1."""
    s = rows.sum(-1, dtype=torch.float64)
    mn = rows.amin(-1).double()  # NaN propagates through amin and sum
    bad = which & ~((mn >= 0) & ((s - 1).abs() <= tol))
    defer.add(bad, lambda: _row_fail(name, rows, bad, s, tol, labels))


def _row_fail(name, rows, bad, s, tol, labels):
    idx = tuple(int(i) for i in bad.nonzero()[0])
    row = rows[idx]
    where = labels(idx)
    if bool(row.isnan().any()):
        _fail(f"{name}{where} contains NaN (policy: NaN probabilities are an error, never a token)")
    if bool((row < 0).any()):
        _fail(f"{name}{where} has a negative probability {float(row.min())!r}")
    _fail(f"{name}{where} sums to {float(s[idx])!r}, not 1 within {tol}")


def _check_rows(p_draft, p_target, p_bonus, valid, B, defer) -> None:
    tol = row_sum_tol(p_target.dtype)
    lab = lambda idx: f"[{', '.join(map(str, idx))}]"  # noqa: E731
    _row_report("p_target", p_target, valid, tol, lab, defer)
    if p_draft is not None:
        _row_report("p_draft", p_draft, valid, tol, lab, defer)
    _row_report("p_bonus", p_bonus, torch.ones(B, dtype=torch.bool, device=p_bonus.device), tol, lab, defer)


def _resolve_backend(backend: str, p_target) -> str:
    if backend not in ("auto", "torch", "triton"):
        _fail(f"backend must be 'auto', 'torch' or 'triton', received {backend!r}")
    from . import triton as sampler_triton
    on_cuda = isinstance(p_target, torch.Tensor) and p_target.device.type == "cuda"
    if backend == "auto":
        return "triton" if on_cuda and sampler_triton.available() else "torch"
    if backend == "triton":
        if not sampler_triton.available():
            raise RuntimeError("backend='triton' needs the triton package")
        if not on_cuda and not interpreting():
            dev = p_target.device if isinstance(p_target, torch.Tensor) else type(p_target).__name__
            raise RuntimeError(f"backend='triton' runs on CUDA tensors (or the CPU with TRITON_INTERPRET=1); "
                               f"p_target is on {dev}")
    return backend


def rejection_sample(draft_token_ids: torch.Tensor, p_draft: torch.Tensor | None, p_target: torch.Tensor,
                     p_bonus: torch.Tensor, *, num_draft_tokens=None, uniforms: SamplerUniforms | None = None,
                     generator: torch.Generator | None = None, greedy=False, check: str = "full",
                     backend: str = "auto", triton_config=None) -> SpecSample:
    """Speculative verification of a batch.

    draft_token_ids: (B, K) ints; p_draft: (B, K, V) or None (one-hot drafts); p_target: (B, K, V),
    row i computed after the first i drafts; p_bonus: (B, V), the target's row after all drafts;
    num_draft_tokens: (B,) in [0, K] (None: K for every request); uniforms: ``SamplerUniforms`` to
    inject randomness (else drawn from ``generator``); greedy: bool or (B,) bools, temperature 0
    (accept iff the draft is the first argmax; emit the first argmax), consuming no uniform;
    check: "full" validates every row that could be read (NaN, negatives, Σ ≠ 1, ids), "read"
    only the entries and rows this call actually reads (cheaper; same errors for those);
    backend: "auto" (the default: "triton" for CUDA tensors when triton is installed, else "torch"),
    "torch", or "triton" (``kernels/sampler/triton.py``, two launches: CUDA, or the CPU under
    TRITON_INTERPRET=1; asking for it where it cannot run raises, it never falls back);
    triton_config: a ``kernels/sampler/triton.TritonConfig`` (tuning only; None = its DEFAULT_CONFIG).

    Returns ``SpecSample(tokens (B, K+1) padded with −1, num_accepted (B,))``."""
    if check not in ("full", "read"):
        _fail(f"check must be 'full' or 'read', received {check!r}")
    backend = _resolve_backend(backend, p_target)
    if backend == "triton":
        return _rejection_sample_triton(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens, uniforms,
                                        generator, greedy, check, triton_config)
    from .torch import sample
    return sample(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens, uniforms, generator, greedy, check)


def _rejection_sample_triton(ids, p_draft, p_target, p_bonus, num_draft_tokens, uniforms, generator, greedy, check,
                             config) -> SpecSample:
    """backend='triton': shapes checked here, everything else in two launches; the kernels' check flags are
    read back with one host sync. A flag re-runs the torch path on the same inputs for its exact error."""
    from . import triton as sampler_triton
    B, K, V, k = _check_structure(ids, p_draft, p_target, p_bonus, num_draft_tokens)
    dev = p_target.device
    u = (draw_uniforms(B, K, device=dev, generator=generator) if uniforms is None
         else _uniform_structure(uniforms, B, K, dev))
    if not isinstance(greedy, bool):
        g = torch.as_tensor(greedy, device=dev)
        if g.dtype != torch.bool or g.shape not in ((), (B,)):
            _fail(f"greedy must be a bool or a (B,) = ({B},) bool tensor, received {g.dtype} {tuple(g.shape)}")
        greedy = g.expand(B)
    res = sampler_triton.sample(ids, p_draft, p_target, p_bonus, k, u.accept, u.residual, u.bonus, greedy,
                                full=check == "full", tol=row_sum_tol(p_target.dtype), config=config)
    flags = res.flags.cpu()  # the one sync
    if bool(flags.any()):
        rejection_sample(ids, p_draft, p_target, p_bonus, num_draft_tokens=k, uniforms=u, greedy=greedy, check=check,
                         backend="torch")  # raises the detailed error for the same inputs
        b = int(flags.nonzero()[0, 0])  # the torch re-check passed: a row sum within rounding of the tolerance
        what = [n for bit, n in sampler_triton.FLAG_NAMES.items() if int(flags[b]) & bit]
        _fail(f"request {b} fails the sampler's input checks ({', '.join(what)}; rows: NaN, negative entries or "
              f"a sum off 1 by more than {row_sum_tol(p_target.dtype)})")
    return SpecSample(res.tokens, res.num_accepted)
