"""Named kernels the fuzzer can drive, each behind one adapter that normalises its conventions.

Every target answers a ``Case`` with ``KernelOut(out, lse)`` in our conventions: out
(B, Hq, Nq, Dv) differentiable in the case's q, k, v; lse (B, Hq, Nq) natural log, or None when
the kernel does not expose it. Normalisations (see ``docs/fuzz.md``):

* causal alignment: ours and flash-attn ≥ 2.1 are bottom-right. SDPA's ``is_causal`` is top-left,
  so it is used only when Nq = Nk (where the two agree); otherwise the adapter passes the explicit
  bottom-right boolean mask;
* masks, windows and varlen block diagonals go to kernels without those features as the explicit
  boolean ``allowed`` mask (True = take part);
* block-sparse masks: a case with ``Case.block_sparse = b`` (the problem's ``sparse`` route,
  ``problem.sparse_route``) whose ``allowed`` is exactly b × b tiles together with its causal /
  window structure (``block_tiles``) goes to ours as ``mask=BlockSparseMask(tiles, b, b)`` (with its
  causal / window flags), so the dispatcher routes it to the Gluon or Triton block-sparse kernels;
  every other mask, and every case of the other targets, as the dense ``allowed``;
* LSE: SDPA's public API returns none; its adapters read it from the backend's aten op (natural
  log, padded rows sliced off). FlexAttention and flash-attn return natural-log LSE.

A target that cannot take a problem raises ``Unsupported`` (the campaign skips that example); a
target that is not installed, or needs a device that is absent, reports why via ``unavailable``.
Who failed: the checks take whatever ``Target.run`` raises for the kernel's (a test's own wrapper
is all kernel); an adapter runs its own code — building the call's arguments, converting layouts
and results — through ``adapter_step``, which raises ``HarnessError`` instead, so a bug of ours is
never reported as a deviation of the kernel.
Names: ``torch``, ``triton`` (ours; ``triton-atomic``: the same with deterministic=False), ``sdpa-math``, ``sdpa-efficient``, ``sdpa-flash``,
``sdpa-cudnn``, ``flex``, ``flash-attn``, and ``mutant:<bug>`` for ``flashproof.fuzz.kernel_mutants``.
"""
from __future__ import annotations

import importlib.util
import os
import traceback
import warnings
from typing import Callable, NamedTuple

import torch

from .errors import HarnessError
from .problem import expand_tiles, structure

__all__ = ["Case", "KernelOut", "Target", "Unsupported", "get", "names", "FEATURES", "block_tiles", "adapter_step"]

#: Problem features a target may lack (the campaign does not draw them for it; a dtype it lacks is
#: skipped). "causal": no causal flag and no mask; "scale": no softmax scale (only 1/√D is drawn);
#: "block_sparse": no block-sparse mask API (``Case.block_sparse`` would be ignored: the campaign
#: does not draw the "sparse" family, whose problems would only repeat dense-mask ones).
FEATURES = frozenset({"mask", "window", "varlen", "gqa", "dv", "causal", "causal_rect", "scale", "lse", "grad",
                      "block_sparse", "fp64", "fp32", "fp16", "bf16"})


class Unsupported(Exception):
    """This target cannot take this problem (not a deviation)."""


def adapter_step(what: str, fn: Callable, *args):
    """``fn(*args)``, a step of an adapter's own code around the kernel call (``what`` names the
    adapter). ``Target.run`` is otherwise taken whole for the kernel (``checks._call``), so an
    exception here would be reported as the kernel's: it becomes ``HarnessError`` (the innermost
    frame named), never a finding. ``Unsupported`` and ``HarnessError`` pass through."""
    try:
        return fn(*args)
    except (Unsupported, HarnessError):
        raise
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        raise HarnessError(f"the {what} adapter raised {type(exc).__name__}: {exc} (in {frame.name}, "
                           f"{os.path.basename(frame.filename)}:{frame.lineno})") from exc


class Case(NamedTuple):
    """One call, on the target's device. q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) in
    the kernel dtype (possibly non-contiguous views); allowed (B, Hq, Nq, Nk) bool. ``structured``
    is True when causal/window/varlen alone give ``allowed`` (no extra mask is needed). ``tuning``:
    the campaign's choice for kernels that autotune (ours: ``attention(..., tuning=...)``), "first"
    (one configuration per launch key: a campaign would otherwise time every configuration of
    every new key) or "autotune"; other targets ignore it. ``block_sparse``: 0, or the tile size b
    of the problem's block-sparse route (``problem.sparse_route``): a kernel with a block-sparse
    API (ours) gets ``allowed`` as ``BlockSparseMask(tiles, b, b)`` when it is exactly that
    (``block_tiles``); the others ignore it."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    allowed: torch.Tensor
    scale: float
    causal: bool
    window: tuple | None
    cu_seqlens_q: torch.Tensor | None
    cu_seqlens_k: torch.Tensor | None
    structured: bool
    tuning: str = "first"
    block_sparse: int = 0


class KernelOut(NamedTuple):
    out: torch.Tensor
    lse: torch.Tensor | None


class Target(NamedTuple):
    name: str
    doc: str
    run: Callable[[Case, bool], KernelOut]     # run(case, deterministic)
    unavailable: Callable[[str], str | None]   # unavailable(device) -> reason, or None
    lacks: Callable[[str], frozenset]          # lacks(device) -> FEATURES it does not support
    deterministic: str                         # "fwd+bwd", "fwd" or "" (what is promised bitwise)
    tile_sizes: tuple = ()                     # key-tile sizes worth aiming mask families at
    version: Callable[[], str] = lambda: torch.__version__
    conventions: object = None                 # a user kernel's declared conventions (user.Conventions), or None


# ----------------------------------------------------------------------------------- ours

#: the values of ``Case.tuning``
TUNINGS = ("first", "autotune")


def _ours(backend: str | None, fn=None) -> Callable:
    """backend None: Triton for CUDA tensors, torch otherwise (the mutants' default device rule).
    "triton" on CUDA tensors asks for backend="auto": the default GPU call, which runs the Gluon kernels
    on sm_90 for the dense d = 128 shapes and the Triton kernels for the rest (the GPU fuzz profiles,
    "gluon" included, aim at both); on CPU tensors it asks for the Triton kernels (interpreter)."""
    def run(c: Case, deterministic: bool) -> KernelOut:
        from flashproof import kernels

        call = fn or kernels.attention
        chosen = backend or ("triton" if c.q.is_cuda else "torch")
        if chosen == "triton" and c.q.is_cuda and fn is None:
            chosen = "auto"
        mask = adapter_step("ours", mask_arg, c)
        r = call(c.q, c.k, c.v, causal=c.causal, window=c.window, mask=mask,
                 scale=c.scale, cu_seqlens_q=c.cu_seqlens_q, cu_seqlens_k=c.cu_seqlens_k, return_lse=True,
                 deterministic=deterministic, backend=chosen, tuning=c.tuning)
        return KernelOut(r.out, r.lse)
    return run


def block_tiles(allowed: torch.Tensor, block_q: int, block_k: int, causal: bool = False,
                window: tuple | None = None) -> torch.Tensor | None:
    """The tiles of ``allowed`` if it is exactly a block-sparse mask, else None.

    ``allowed`` (B, Hq, Nq, Nk) bool. Returns ``tiles`` (B, Hq, ceil(Nq / block_q), ceil(Nk / block_k))
    bool, tile (r, c) True iff some pair of it is allowed, when ``allowed`` equals ``tiles``
    expanded to block_q × block_k blocks and cut to Nq × Nk (edge tiles partial), AND-ed with the
    causal / window structure as ``attention()`` defines it, bottom-right aligned: key j is allowed
    for query i iff i + Nk − Nq − left ≤ j ≤ i + Nk − Nq + right, ``window`` = (left, right) with
    None unbounded, ``causal`` capping right at 0. Then ``attention(q, k, v, causal=causal,
    window=window, mask=BlockSparseMask(tiles, block_q, block_k))`` computes the same pairs as
    ``mask=allowed``. Tiles that the structure excludes entirely come back False (empty tiles are
    fine: a query tile row or key tile column all False is recognised). Pure; runs on
    ``allowed``'s device."""
    B, H, nq, nk = allowed.shape
    tq, tk = -(-nq // block_q), -(-nk // block_k)
    padded = allowed.new_zeros(B, H, tq * block_q, tk * block_k)
    padded[..., :nq, :nk] = allowed
    tiles = padded.view(B, H, tq, block_q, tk, block_k).any(dim=5).any(dim=3)
    ok = structure(nq, nk, causal, window, allowed.device)
    expanded = expand_tiles(tiles, block_q, block_k, nq, nk)
    return tiles if torch.equal(expanded & ok, allowed) else None


def mask_arg(c: Case):
    """The ``mask`` argument ours gets for ``c``: None (causal / window / varlen structure alone), a
    ``BlockSparseMask`` (``c.block_sparse`` set, no varlen, and ``allowed`` exactly tiles of that size
    with the case's structure: ``block_tiles``), else the dense ``allowed``."""
    if c.structured:
        return None
    b = c.block_sparse
    if b and c.cu_seqlens_q is None:
        tiles = block_tiles(c.allowed, b, b, c.causal, c.window)
        if tiles is not None:
            from flashproof.kernels import BlockSparseMask
            return BlockSparseMask(tiles, b, b)
    return c.allowed


def _atomic(c: Case) -> KernelOut:
    """Ours with deterministic=False (the default call): on sm_90 the Gluon backward for the shapes it
    takes (dQ by fp32 TMA bulk reduce-adds), else the Triton two-kernel backward."""
    return _ours("triton")(c, False)


def _ours_unavailable(backend: str) -> Callable:
    def why(device: str) -> str | None:
        try:
            from flashproof import kernels  # noqa: F401
        except ImportError as e:
            return f"flashproof.kernels does not import: {e}"
        if backend == "triton":
            if importlib.util.find_spec("triton") is None:
                return "triton is not installed"
            from flashproof.kernels.interpreter import interpreting
            if device == "cpu" and not interpreting():
                return "triton on CPU needs TRITON_INTERPRET=1"
            if importlib.util.find_spec("flashproof.kernels.attention.triton.host") is None:
                return "flashproof.kernels.attention.triton.host is not built yet"
        return _device_missing(device)
    return why


def _ours_tiles() -> tuple:
    try:
        from flashproof.kernels.attention.torch import BLOCK_N
        return (BLOCK_N,)
    except (ImportError, AttributeError):
        return (64,)


def _device_missing(device: str) -> str | None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        return "no CUDA device"
    return None


# ----------------------------------------------------------------------------------- SDPA

_SDPA = {"sdpa-math": "MATH", "sdpa-efficient": "EFFICIENT_ATTENTION", "sdpa-flash": "FLASH_ATTENTION",
         "sdpa-cudnn": "CUDNN_ATTENTION"}


def _sdpa_mask(c: Case) -> dict:
    """SDPA keyword arguments for the case's mask, bottom-right causal made explicit."""
    nq, nk = c.q.shape[2], c.k.shape[2]
    if c.structured and c.window is None and c.cu_seqlens_q is None:
        if not c.causal:
            return {}
        if nq == nk:
            return {"is_causal": True}  # top-left and bottom-right agree on a square
    return {"attn_mask": c.allowed}


def _sdpa(name: str) -> Callable:
    def run(c: Case, deterministic: bool) -> KernelOut:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        kw = adapter_step(name, _sdpa_mask, c)
        gqa = c.q.shape[1] != c.k.shape[1]
        try:
            with sdpa_kernel([getattr(SDPBackend, _SDPA[name])]), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = torch.nn.functional.scaled_dot_product_attention(c.q, c.k, c.v, scale=c.scale,
                                                                       enable_gqa=gqa, **kw)
        except RuntimeError as e:
            if "No available kernel" in str(e) or "No viable backend" in str(e):
                raise Unsupported(f"{name}: SDPA has no kernel for this case") from None
            raise
        return KernelOut(out, _sdpa_lse(name, c, kw))
    return run


def _sdpa_lse(name: str, c: Case, kw: dict):
    """LSE (B, Hq, Nq) from the backend's aten op (the public API does not return it), or None."""
    group = c.q.shape[1] // c.k.shape[1]
    q, k, v = c.q.detach(), c.k.detach().repeat_interleave(group, 1), c.v.detach().repeat_interleave(group, 1)
    causal = kw.get("is_causal", False)
    mask = kw.get("attn_mask")
    bias = None if mask is None else torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
    aten = torch.ops.aten
    nq = q.shape[2]
    try:
        if name == "sdpa-flash" and q.device.type == "cpu":
            lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=bias, scale=c.scale)[1]
        elif name == "sdpa-flash":
            if bias is not None:
                return None
            lse = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=c.scale)[1]
        elif name == "sdpa-efficient":
            lse = aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, causal, scale=c.scale)[1]
        elif name == "sdpa-cudnn":
            lse = aten._scaled_dot_product_cudnn_attention(q, k, v, bias, True, 0.0, causal, False, scale=c.scale)[1]
        else:
            return None  # the math backend exposes no LSE
    except (RuntimeError, TypeError):
        return None
    lse = lse.reshape(lse.shape[0], lse.shape[1], -1) if lse.dim() == 4 else lse
    return lse[..., :nq]


def _sdpa_lacks(name: str) -> Callable:
    def lacks(device: str) -> frozenset:
        gone = {"block_sparse", "fp64"} if name != "sdpa-math" else {"block_sparse"}
        if name == "sdpa-math":
            gone.add("lse")
        if name == "sdpa-flash" and device != "cpu":
            gone |= {"mask", "window", "varlen", "dv", "causal_rect"}
        if name == "sdpa-flash" and device == "cpu":
            gone |= {"dv"}
        return frozenset(gone)
    return lacks


def _sdpa_unavailable(name: str) -> Callable:
    def why(device: str) -> str | None:
        if (m := _device_missing(device)):
            return m
        if device == "cpu" and name in ("sdpa-efficient", "sdpa-cudnn"):
            return f"{name} has no CPU kernel in torch {torch.__version__}"
        return None
    return why


# ----------------------------------------------------------------------------------- FlexAttention

_COMPILED = {}
#: Messages of documented limits of compiled FlexAttention (torch/_inductor/kernel/flex): an example
#: that hits one is unsupported by the kernel, not a deviation.
FLEX_LIMITS = ("NYI: embedding dimension of the query, key, and value must be at least 16",
               "Number of shared query heads sharing the same KV head must be power of 2")


def flex_unsupported(d: int, dv: int, device_type: str) -> str | None:
    """Why compiled FlexAttention cannot take head dims (d, dv) on ``device_type``, or None. Its
    CUDA (Triton) path needs both head dims >= 16 (``tl.dot`` tiles); the eager CPU path has no limit."""
    if device_type == "cuda" and min(d, dv) < 16:
        return f"compiled FlexAttention needs head dims >= 16 (NYI in inductor), got d={d}, dv={dv}"
    return None


def flex_limit(exc: BaseException) -> str | None:
    """The documented limit an exception of compiled FlexAttention reports (through dynamo's
    wrapping), or None for any other error (which stays a finding)."""
    text = str(exc)
    return next((m for m in FLEX_LIMITS if m in text), None)


def _flex(c: Case, deterministic: bool) -> KernelOut:
    B, Hq, nq, _ = c.q.shape
    nk = c.k.shape[2]
    dev = c.q.device
    why = flex_unsupported(c.q.shape[3], c.v.shape[3], dev.type)
    if why is not None:
        raise Unsupported(why)
    try:
        return _flex_call(c, B, Hq, nq, nk, dev)
    except Exception as e:
        limit = flex_limit(e)
        if limit is None:
            raise
        raise Unsupported(f"compiled FlexAttention: {limit}") from None


def _flex_call(c: Case, B: int, Hq: int, nq: int, nk: int, dev) -> KernelOut:
    from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

    if dev.type == "cuda":
        if "flex" not in _COMPILED:
            # Every new shape recompiles; past dynamo's recompile limit it would silently run eager,
            # which is not the kernel under test. Raise the limit (names differ across versions).
            import torch._dynamo.config as dyn
            for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
                if hasattr(dyn, knob):
                    setattr(dyn, knob, max(getattr(dyn, knob), 100_000))
            _COMPILED["flex"] = torch.compile(flex_attention, dynamic=False)
        fn = _COMPILED["flex"]
    else:
        fn = flex_attention  # eager: the dense math path (no fused kernel on CPU)
    block_mask = None
    if not (c.structured and not c.causal and c.window is None and c.cu_seqlens_q is None):
        allowed = c.allowed
        block_mask = create_block_mask(lambda b, h, i, j: allowed[b, h, i, j], B, Hq, nq, nk, device=dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, aux = fn(c.q, c.k, c.v, block_mask=block_mask, scale=c.scale, enable_gqa=Hq != c.k.shape[1],
                      return_aux=AuxRequest(lse=True))
    return KernelOut(out, aux.lse)


def _flex_unavailable(device: str) -> str | None:
    if importlib.util.find_spec("torch.nn.attention.flex_attention") is None:
        return f"FlexAttention is not in torch {torch.__version__}"
    return _device_missing(device)


# ----------------------------------------------------------------------------------- flash-attn

def _flash_attn(c: Case, deterministic: bool) -> KernelOut:
    from flash_attn import flash_attn_func

    if not c.structured or c.cu_seqlens_q is not None:
        raise Unsupported("flash-attn (dense API) takes no boolean mask")
    left, right = c.window if c.window is not None else (None, None)
    window = (-1 if left is None else left, -1 if right is None else right)
    t = lambda x: x.transpose(1, 2)  # noqa: E731  (B, H, N, D) -> (B, N, H, D)
    out, lse, _ = flash_attn_func(t(c.q), t(c.k), t(c.v), softmax_scale=c.scale, causal=c.causal,
                                  window_size=window, deterministic=deterministic, return_attn_probs=True)
    return KernelOut(t(out), lse)


def _flash_attn_unavailable(device: str) -> str | None:
    if importlib.util.find_spec("flash_attn") is None:
        return "flash-attn is not installed"
    if not device.startswith("cuda"):
        return "flash-attn runs on CUDA only"
    return _device_missing(device)


def _flash_attn_version() -> str:
    import flash_attn
    return getattr(flash_attn, "__version__", "?")


# ----------------------------------------------------------------------------------- registry

def _none(device: str) -> frozenset:
    return frozenset()


def _ours_lacks(device: str) -> frozenset:
    return frozenset()


_TARGETS = {
    "torch": Target("torch", "ours, torch path", _ours("torch"), _ours_unavailable("torch"), _ours_lacks,
                    "fwd+bwd", _ours_tiles()),
    "triton": Target("triton", "ours, Triton kernel", _ours("triton"), _ours_unavailable("triton"),
                     lambda d: frozenset({"fp64"}), "fwd+bwd", _ours_tiles()),
    # the default call, deterministic=False: the backward adds dQ with atomics (order varies run to
    # run), so only the forward is promised bitwise; "triton" above fuzzes the deterministic backward
    "triton-atomic": Target("triton-atomic", "ours, deterministic=False: the Gluon backward (dQ by fp32 reductions) on sm_90 for the shapes it takes, else the Triton backward",
                            lambda c, det: _atomic(c), _ours_unavailable("triton"),
                            lambda d: frozenset({"fp64"}), "fwd", _ours_tiles()),
    "flex": Target("flex", "torch FlexAttention (compiled on CUDA, eager math path on CPU)", _flex,
                   _flex_unavailable, lambda d: frozenset({"fp64", "grad", "block_sparse"} if d == "cpu" else {"fp64", "block_sparse"}), "",
                   (128,)),
    "flash-attn": Target("flash-attn", "Dao-AILab flash-attn (flash_attn_func)", _flash_attn,
                         _flash_attn_unavailable, lambda d: frozenset({"mask", "varlen", "dv", "fp64", "block_sparse"}),
                         "fwd", (64, 128), _flash_attn_version),
}
for _n in _SDPA:
    _TARGETS[_n] = Target(_n, f"torch SDPA, {_SDPA[_n]} backend", _sdpa(_n), _sdpa_unavailable(_n),
                          _sdpa_lacks(_n), "fwd" if _n == "sdpa-math" else "", (64, 128))


def _mutant(bug: str) -> Target:
    from . import kernel_mutants as mutants

    fn = mutants.MUTANTS[bug]
    return Target(f"mutant:{bug}", (fn.__doc__ or "").strip(), _ours(None, fn), _ours_unavailable("torch"),
                  _ours_lacks, "", _ours_tiles())


def mutant_names() -> list[str]:
    """``mutant:<bug>`` for every variant in ``flashproof.fuzz.kernel_mutants`` (empty before it lands)."""
    try:
        from . import kernel_mutants as mutants
    except ImportError:
        return []
    return [f"mutant:{b}" for b in sorted(mutants.MUTANTS)]


def names() -> list[str]:
    """Every target name, ours first."""
    return list(_TARGETS) + mutant_names()


def get(name: str) -> Target:
    """The target called ``name``; ValueError naming the known ones otherwise."""
    if name in _TARGETS:
        return _TARGETS[name]
    if name.startswith("mutant:") and name in mutant_names():
        return _mutant(name.split(":", 1)[1])
    raise ValueError(f"unknown kernel {name!r}: expected one of {names()}")


def register(target: Target) -> None:
    """Add a target (tests use it for their own broken wrappers)."""
    _TARGETS[target.name] = target

from . import kvcache as _kvcache  # noqa: E402,F401  (registers the kvcache-torch and kvcache-triton targets)
