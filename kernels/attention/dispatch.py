"""The one router of ``attention()``: ``plan(problem, device) -> Plan``, a pure function.

It is the only place that chooses among the torch, Triton and Gluon kernels and their variants. Its
inputs are the validated call (``api.Problem``: shapes, dtype, masks, flags, the ``backend`` and
``tuning`` the caller asked for) and a description of the device (``Device``); nothing else — no
module-level switch, no environment variable (the interpreter flag arrives inside ``Device``).

Rules (each choice is recorded in ``Plan.reasons``):

* ``backend="torch"``: the torch kernels, forward and backward (every dtype, CPU or GPU).
* ``backend="triton"``: the Triton kernels, forward and backward. Needs triton, and CUDA tensors or
  the interpreter for CPU tensors; not float64. It never runs Gluon.
* Dropout (``dropout_p > 0``) runs on the torch and Triton kernels only: the Gluon kernels have no
  dropout in their score loop (``gluon_rule``), so ``auto`` sends such a call to Triton.
* ``backend="gluon"``: the warp-specialised sm_90 forward (``gluon_rule`` says which calls it takes)
  and the Gluon backward (GQA included: one CTA per KV head's key block loops over the group's query
  heads; ``deterministic=True`` orders its dQ adds by semaphores, bitwise repeatable). A call it
  cannot take raises with the rule that failed: it never runs another kernel in its place.
* ``backend="auto"`` (the default): Gluon forward and backward where ``gluon_rule`` accepts the call
  (both kernels take the same calls: d = 64 and 128, dense, causal, or block-sparse with 128 × 128
  tiles and no dense mask, not deterministic); else Triton for CUDA tensors, else torch (CPU
  tensors, float64, triton not installed).
* An additive float bias (a float ``attn_mask`` with values other than 0 and −inf; one of 0 / −inf
  entries arrives here as a boolean mask) runs on the torch and Triton kernels (the Triton kernels
  load a bias tile per score tile, broadcast dims by stride 0), never on Gluon (``gluon_rule``). Both
  backwards also give the bias's gradient when it requires one (so no rule routes on it).
* The Triton forward folds the softmax scale into one FMA per interior score (``Plan.fma``) when the
  scale is positive and the inputs are fp16/bf16 (fp32 keeps the exact-order ``ieee`` products).
* Grid limits: a call with more than ``MAX_GRID_Y`` (65535, CUDA's limit on a grid's second dim)
  (sequence, head) pairs runs on neither the Triton nor the Gluon kernels (both launch one program per
  pair along that dim), nor one with more than 65535 query blocks of 128 on Gluon; ``auto`` sends it
  to torch (or Triton), an explicit backend raises naming the limit.
* ``tuning``: ``"autotune"`` (the default) lets Triton's autotuner time every configuration of a new
  key; ``"first"`` runs the first configuration that fits in shared memory (correctness runs).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["Device", "Plan", "BackendUnavailable", "plan", "device_of", "gluon_rule", "BACKENDS", "TUNINGS"]

BACKENDS = ("auto", "gluon", "triton", "torch")
TUNINGS = ("autotune", "first")
TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
GLUON_DTYPES = (torch.float16, torch.bfloat16)
#: the head dims the Gluon forward and backward take (D = Dv): gluon.fwd.HEAD_DIMS, gluon.bwd.HEAD_DIMS
GLUON_HEAD_DIMS = (64, 128)
#: Gluon's query/key block: Nq = Nk must be a multiple of it
GLUON_BLOCK = 128
#: the most rows B·Hq·N of q the Gluon kernels take: they form row indices (b·Hq + h)·N + n in int32,
#: which the Gluon bounds proofs (KER-BOUNDS-GLUON-*) show in range under this bound
#: (assumption A-GLUON-DEVICE-MEMORY: B·Hq·N·128·2 bytes ≤ 2^38)
GLUON_MAX_ROWS = 2 ** 30
#: CUDA's limit on a grid's second dim: the Triton kernels launch one program per (sequence, head) and
#: the Gluon backward one per (batch, KV head, head split) along it, the Gluon forward one per query
#: block of 128
MAX_GRID_Y = 65535


class BackendUnavailable(ValueError):
    """The backend asked for cannot take this call (the message says which rule failed)."""


class Device(NamedTuple):
    """What the router needs to know about where the tensors live.

    kind: "cuda" or "cpu" (any non-CUDA device); capability: (major, minor) of a CUDA device, else
    None; interpreter: Triton kernels run in the interpreter (CPU); triton / gluon: importable."""

    kind: str
    capability: tuple | None
    interpreter: bool
    triton: bool
    gluon: bool


class Plan(NamedTuple):
    """forward, backward: "torch" | "triton" | "gluon" (every backend the router picks has a backward for
    the calls it takes); fma: the Triton forward's one-FMA interior;
    tuning: "autotune" | "first"; reasons: one line per choice, for errors, tests and logs."""

    forward: str
    backward: str
    fma: bool
    tuning: str
    reasons: tuple


def device_of(t: torch.Tensor) -> Device:
    """The ``Device`` of tensor ``t`` (queries CUDA once per device index, reads the interpreter flag)."""
    from ..interpreter import interpreting

    triton_ok, gluon_ok = _importable()
    if t.is_cuda:
        return Device("cuda", _capability(t.device.index), interpreting(), triton_ok, gluon_ok)
    return Device("cpu", None, interpreting(), triton_ok, gluon_ok)


_CAPS: dict = {}


def _capability(index):
    if index not in _CAPS:
        _CAPS[index] = tuple(torch.cuda.get_device_capability(index))
    return _CAPS[index]


_IMPORTABLE: list = []


def _importable() -> tuple:
    if not _IMPORTABLE:
        try:
            import triton  # noqa: F401
            triton_ok = True
        except ImportError:
            triton_ok = False
        gluon_ok = False
        if triton_ok:
            from .gluon.common import AVAILABLE as gluon_ok
        _IMPORTABLE.append((triton_ok, gluon_ok))
    return _IMPORTABLE[0]


def triton_rule(p, d: Device) -> str | None:
    """None if the Triton kernels can run this call on ``d``, else why not."""
    if not d.triton:
        return "triton is not installed"
    if d.kind != "cuda" and not d.interpreter:
        return f"the Triton kernels need CUDA tensors (or TRITON_INTERPRET=1 for CPU tensors); got {d.kind} tensors"
    if p.dtype not in TRITON_DTYPES:
        return (f"dtype {p.dtype} is not supported by the Triton kernels "
                f"(supported: {', '.join(str(t) for t in TRITON_DTYPES)})")
    n_seq = p.B if p.seqlens is None else p.seqlens[0].numel() - 1
    if n_seq * p.Hq > MAX_GRID_Y:
        return (f"{n_seq} sequences x Hq={p.Hq} heads = {n_seq * p.Hq} programs along the grid's second dim: "
                f"the Triton kernels launch at most {MAX_GRID_Y} there")
    return None


def gluon_rule(p, d: Device) -> str | None:
    """None if the Gluon forward and backward compute this call on ``d``, else the first rule it breaks."""
    if not d.gluon:
        return "Gluon is not available (triton >= 3.6 with triton.experimental.gluon)"
    if d.interpreter or d.kind != "cuda" or d.capability != (9, 0):
        return "the Gluon kernels run on an sm_90 GPU only (no interpreter)"
    if p.dtype not in GLUON_DTYPES:
        return f"dtype {p.dtype}: the Gluon kernels take fp16/bf16"
    if p.D != p.Dv or p.D not in GLUON_HEAD_DIMS:
        dims = " or ".join(map(str, GLUON_HEAD_DIMS))
        return f"head dim D={p.D}, Dv={p.Dv}: the Gluon kernels take D = Dv = {dims}"
    if p.Nq != p.Nk or p.Nq == 0 or p.Nq % GLUON_BLOCK:
        return f"lengths Nq={p.Nq}, Nk={p.Nk}: the Gluon kernels need Nq = Nk, a multiple of {GLUON_BLOCK}"
    if p.B * p.Hq > MAX_GRID_Y or p.Nq // GLUON_BLOCK > MAX_GRID_Y:
        return (f"B*Hq = {p.B * p.Hq}, Nq / {GLUON_BLOCK} = {p.Nq // GLUON_BLOCK}: the Gluon kernels launch "
                f"at most {MAX_GRID_Y} programs along the grid's second dim (B*Hq and N / {GLUON_BLOCK} "
                "each at most that)")
    if p.B * p.Hq * p.Nq > GLUON_MAX_ROWS:
        return (f"B*Hq*N = {p.B}*{p.Hq}*{p.Nq} = {p.B * p.Hq * p.Nq} rows: the Gluon kernels index rows in int32 "
                f"and take at most {GLUON_MAX_ROWS} (2^30) rows of q")
    if p.mask is not None or p.seqlens is not None or p.bias is not None:
        return "mask / bias / varlen: the Gluon kernels take dense, causal or block-sparse (tiles only) calls"
    if p.tiles is not None:
        t = p.tiles
        if (t.block_q, t.block_k) != (GLUON_BLOCK, GLUON_BLOCK):
            return (f"block-sparse tiles of {t.block_q} x {t.block_k}: the Gluon kernels walk "
                    f"{GLUON_BLOCK} x {GLUON_BLOCK} tiles")
        if p.deterministic:
            return "block-sparse with deterministic=True: the Gluon backward orders its dQ adds for dense calls only"
    if p.window not in ((None, None), (None, 0)):
        return f"window {p.window}: the Gluon kernels take no window (causal only)"
    if p.bugs:
        return "bug injection runs on the torch and Triton kernels only"
    if p.dropout is not None:
        return "dropout: the Gluon kernels generate no dropout bits (torch and Triton do)"
    if p.scale <= 0:
        return f"scale {p.scale} <= 0: the Gluon kernels need a positive scale"
    bad = [name for name, kind in zip("qkv", p.layouts) if kind is None]
    if bad:
        return (f"layout of {', '.join(bad)}: the Gluon kernels read q, k, v (B, H, N, D) in place through the rows "
                "of a (B*H*N, D) or a (B*N, H*D) matrix (last dim contiguous, 16-byte aligned rows and base)")
    return None


def plan(problem, device: Device) -> Plan:
    """The kernels that compute ``problem`` (an ``api.Problem``) on ``device``; raises
    ``BackendUnavailable`` naming the rule when the backend asked for cannot take the call."""
    p, d = problem, device
    asked = p.backend
    fma = p.scale > 0 and p.dtype in (torch.float16, torch.bfloat16)
    if asked == "torch":
        return Plan("torch", "torch", False, p.tuning, ("backend='torch' asked for",))
    if asked == "triton":
        why = triton_rule(p, d)
        if why:
            raise BackendUnavailable(f"backend='triton' cannot take this call: {why}")
        return Plan("triton", "triton", fma, p.tuning, ("backend='triton' asked for",))
    if asked == "gluon":
        why = gluon_rule(p, d) or triton_rule(p, d)  # the Gluon path also runs Triton's δ kernel
        if why:
            raise BackendUnavailable(f"backend='gluon' cannot take this call: {why}")
        return Plan("gluon", "gluon", False, p.tuning, ("backend='gluon' asked for",))
    if asked != "auto":
        raise ValueError(f"backend must be one of {BACKENDS}, got {asked!r}")
    why_triton = triton_rule(p, d)
    if why_triton or d.kind != "cuda":
        why = why_triton or "CPU tensors"
        return Plan("torch", "torch", False, p.tuning, (f"auto: torch ({why})",))
    why_gluon = gluon_rule(p, d)
    if why_gluon:
        return Plan("triton", "triton", fma, p.tuning, (f"auto: Triton forward and backward (not Gluon: {why_gluon})",))
    kind = "block-sparse" if p.tiles is not None else "causal" if p.window == (None, 0) else "dense"
    return Plan("gluon", "gluon", False, p.tuning, (f"auto: Gluon forward and backward ({kind}, d = {p.D} on sm_90)",))
