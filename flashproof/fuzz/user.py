"""Anyone's attention function as a fuzzing target: capabilities read from its signature,
conventions declared (never guessed), loaded by ``MODULE:FUNCTION`` or ``PATH.py:FUNCTION``.

The contract: ``fn(q, k, v, **kw)`` returns ``out`` or ``(out, lse)`` (any 2-sequence; an
``AttnOut``-like NamedTuple works). The keyword parameters ``fn`` declares say what it supports,
and the campaign draws only problems it can take:

====================================  =====================================================
parameter (any one spelling)          what the fuzzer passes / draws
====================================  =====================================================
``causal``, ``is_causal``             causal problems (Nq ≠ Nk both ways; see alignment)
``scale``, ``softmax_scale``,         the softmax scale; without it only 1/√D is drawn
``sm_scale``                          (no huge-logit problems)
``mask``, ``attn_mask``               a bool mask (B, Hq, Nq, Nk), True = take part; windows,
                                      varlen block diagonals and rectangular causal masks the
                                      kernel cannot take natively arrive through it
``window``, ``window_size``           ``(left, right)`` keys around the aligned diagonal, ints ≥ 0
``cu_seqlens_q`` + ``cu_seqlens_k``   packed varlen problems (B = 1), int32 offsets (S + 1,)
``return_lse``                        True (unless ``lse="none"``): the function returns (out, lse)
``enable_gqa``                        True when Hq > Hkv: GQA/MQA problems are drawn
``deterministic``                     True in the determinism check: runs must be bitwise equal
====================================  =====================================================

A required parameter outside this table is a usage error (the fuzzer cannot supply it). A
function without ``enable_gqa`` gets Hq = Hkv only, unless ``kernel(gqa=True)`` declares that it
maps heads implicitly (as SDPA's shapes do: query head h reads kv head h // (Hq / Hkv)).

Conventions (``Conventions``; CLI ``--layout``, ``--causal-alignment``, ``--lse``, ``--empty-rows``;
in Python the keyword arguments of the ``kernel(...)`` decorator, of ``fuzz_kernel`` and of
``user_target``, which override the decorator's). Defaults are the project's:

* ``layout``: ``"bhnd"`` — q (B, Hq, Nq, D), out (B, Hq, Nq, Dv) — or ``"bnhd"`` — q (B, Nq, Hq, D),
  out (B, Nq, Hq, Dv). The LSE is (B, Hq, Nq) in both (as flash-attn and SDPA return it).
* ``causal_alignment``: ``"bottom-right"`` (query i sees keys j ≤ i + Nk − Nq; windows centred on
  the same diagonal) or ``"top-left"`` (j ≤ i; SDPA's ``is_causal``): a top-left kernel gets its
  causal flag on square problems only, rectangular ones as the bottom-right mask (or not at all).
* ``lse``: ``"natural"``, ``"log2"`` (multiplied by ln 2 before comparing) or ``"none"`` (ignored).
* ``empty_rows``: ``"zero"`` (a row with no allowed key gives out 0, LSE −inf) or ``"nan"`` (the
  kernel's NaN/any value there is replaced by 0 / −inf before comparing; gradients stay checked).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
from typing import Callable, NamedTuple

import torch

from .errors import UsageError
from .targets import Case, KernelOut, Target, Unsupported, adapter_step

__all__ = ["Conventions", "Capabilities", "kernel", "capabilities", "user_target", "load", "CHOICES", "PARAMS"]

CHOICES = {"layout": ("bhnd", "bnhd"), "causal_alignment": ("bottom-right", "top-left"),
           "lse": ("natural", "log2", "none"), "empty_rows": ("zero", "nan")}

#: capability -> the parameter spellings that declare it
PARAMS = {"causal": ("causal", "is_causal"), "scale": ("scale", "softmax_scale", "sm_scale"),
          "mask": ("mask", "attn_mask"), "window": ("window", "window_size"),
          "cu_seqlens_q": ("cu_seqlens_q",), "cu_seqlens_k": ("cu_seqlens_k",), "return_lse": ("return_lse",),
          "gqa": ("enable_gqa",), "deterministic": ("deterministic",)}

_ATTR = "__flashproof_kernel__"
_LN2 = math.log(2.0)


class Conventions(NamedTuple):
    """The conventions a kernel is held to (module docstring)."""

    layout: str = "bhnd"
    causal_alignment: str = "bottom-right"
    lse: str = "natural"
    empty_rows: str = "zero"


def make_conventions(**kw) -> Conventions:
    """``Conventions`` from keyword arguments (None = default); ``UsageError`` naming a bad one."""
    out = {}
    for key, val in kw.items():
        if key not in CHOICES:
            raise UsageError(f"unknown convention {key!r}: expected one of {sorted(CHOICES)}")
        if val is None:
            continue
        if val not in CHOICES[key]:
            raise UsageError(f"{key.replace('_', '-')} must be one of {list(CHOICES[key])}, received {val!r}")
        out[key] = val
    return Conventions(**out)


class Declared(NamedTuple):
    """What ``kernel(...)`` attached to a function."""

    conventions: dict
    gqa: bool | None
    deterministic: bool | None
    dtypes: tuple | None
    tile_sizes: tuple | None


def kernel(fn: Callable | None = None, *, layout: str | None = None, causal_alignment: str | None = None,
           lse: str | None = None, empty_rows: str | None = None, gqa: bool | None = None,
           deterministic: bool | None = None, dtypes: tuple | None = None, tile_sizes: tuple | None = None):
    """Decorator declaring a kernel's conventions (module docstring) and what its signature cannot
    say: ``gqa=True`` (heads mapped implicitly, no ``enable_gqa``), ``deterministic=True`` (bitwise
    equal runs promised without a ``deterministic`` parameter), ``dtypes`` (those it takes, e.g.
    ``("fp16", "bf16")``; default all four), ``tile_sizes`` (key-tile sizes the mask families aim
    at). Use as ``@kernel`` or ``@kernel(layout="bnhd")``; returns the function unchanged apart
    from the attached declaration."""
    given = {k: v for k, v in dict(layout=layout, causal_alignment=causal_alignment, lse=lse,
                                   empty_rows=empty_rows).items() if v is not None}
    make_conventions(**given)  # validates
    from .checks import DTYPES

    if dtypes is not None:
        bad = [d for d in dtypes if d not in DTYPES]
        if bad or not dtypes:
            raise UsageError(f"dtypes must be a non-empty subset of {sorted(DTYPES)}, received {dtypes!r}")
    decl = Declared(given, gqa, deterministic, None if dtypes is None else tuple(dtypes),
                    None if tile_sizes is None else tuple(tile_sizes))

    def attach(f):
        if not callable(f):
            raise UsageError(f"@kernel decorates a callable, received {type(f).__name__}")
        setattr(f, _ATTR, decl)
        return f
    return attach(fn) if fn is not None else attach


class Capabilities(NamedTuple):
    """For each capability the parameter name that declares it, or None."""

    causal: str | None
    scale: str | None
    mask: str | None
    window: str | None
    cu_seqlens_q: str | None
    cu_seqlens_k: str | None
    return_lse: str | None
    gqa: str | None
    deterministic: str | None


def capabilities(fn: Callable) -> Capabilities:
    """Read ``fn``'s signature: three positional q, k, v, then the keyword parameters of the
    module docstring's table. ``UsageError`` when it takes fewer than three positional arguments or
    requires one the fuzzer cannot supply."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise UsageError(f"cannot read the signature of {fn!r}: {e}") from None
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 3 and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise UsageError(f"{_label(fn)} must take q, k, v positionally; its signature is {sig}")
    rest = {p.name: p for p in params[3:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} if len(positional) >= 3 \
        else {p.name: p for p in params if p.kind == p.KEYWORD_ONLY}
    found = {cap: next((n for n in names if n in rest), None) for cap, names in PARAMS.items()}
    known = {n for names in PARAMS.values() for n in names}
    required = [n for n, p in rest.items() if p.default is p.empty and n not in known]
    if required:
        raise UsageError(f"{_label(fn)} requires {required}, which the fuzzer cannot supply (it passes q, k, v and "
                         f"the keywords {sorted(known)}); give them defaults")
    if (found["cu_seqlens_q"] is None) != (found["cu_seqlens_k"] is None):
        found["cu_seqlens_q"] = found["cu_seqlens_k"] = None  # varlen needs both
    return Capabilities(**found)


def _label(fn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def user_target(fn: Callable, name: str | None = None, **conventions) -> Target:
    """A ``targets.Target`` that calls ``fn`` under its capabilities and conventions (declared by
    ``kernel(...)`` on ``fn``; keyword ``conventions`` given here override them)."""
    if not callable(fn):
        raise UsageError(f"a kernel must be callable, received {type(fn).__name__}")
    decl: Declared = getattr(fn, _ATTR, None) or Declared({}, None, None, None, None)
    conv = make_conventions(**{**decl.conventions, **{k: v for k, v in conventions.items() if v is not None}})
    caps = capabilities(fn)
    gqa = caps.gqa is not None or bool(decl.gqa)
    lacks = {"block_sparse"}  # the adapter hands a mask over as the dense boolean ``allowed`` only
    if caps.mask is None:
        lacks.add("mask")
        if caps.window is None:
            lacks.add("window")
        if caps.cu_seqlens_q is None:
            lacks.add("varlen")
        if caps.causal is None:
            lacks.add("causal")
        elif conv.causal_alignment == "top-left":
            lacks.add("causal_rect")
    if caps.scale is None:
        lacks.add("scale")
    if not gqa:
        lacks.add("gqa")
    if conv.lse == "none":
        lacks.add("lse")
    if decl.dtypes is not None:
        from .checks import DTYPES
        lacks |= set(DTYPES) - set(decl.dtypes)
    det = "fwd+bwd" if caps.deterministic is not None or decl.deterministic else ""
    label = name or ref_of(fn)
    doc = f"user kernel {getattr(fn, '__qualname__', label)}"
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    version = str(getattr(module, "__version__", "user kernel"))
    frozen = frozenset(lacks)
    return Target(label, doc, _adapter(fn, caps, conv, gqa), lambda device: None, lambda device: frozen, det,
                  decl.tile_sizes or (16, 64), lambda: version, conv)


def _adapter(fn, caps: Capabilities, conv: Conventions, gqa: bool):
    """``Target.run`` of ``fn``: the call's arguments built and its results converted to our
    conventions by the harness (``targets.adapter_step``: a failure there is a ``HarnessError``);
    what ``fn`` raises, and a result that breaks the contract (``_returned``), are the kernel's."""
    def run(c: Case, deterministic: bool) -> KernelOut:
        q, k, v, kw = adapter_step("user kernel", _arguments, caps, conv, gqa, c, deterministic)
        r = fn(q, k, v, **kw)
        out, lse = _returned(r, conv, c)
        return adapter_step("user kernel", _converted, out, lse, conv, c)
    return run


def _arguments(caps: Capabilities, conv: Conventions, gqa: bool, c: Case, deterministic: bool):
    """(q, k, v, keywords) of the kernel's call for ``c`` in its declared layout; ``Unsupported``
    when it cannot take the case."""
    B, Hq, nq, d = c.q.shape
    Hkv, nk = c.k.shape[1], c.k.shape[2]
    kw, need_mask = {}, not c.structured
    aligned = conv.causal_alignment == "bottom-right" or _square(c)
    if c.causal:
        if caps.causal is not None and aligned:
            kw[caps.causal] = True
        else:
            need_mask = True
    if c.window is not None:
        if caps.window is not None and aligned:
            kw[caps.window] = tuple(c.window)
        else:
            need_mask = True
    if c.cu_seqlens_q is not None:
        if caps.cu_seqlens_q is not None:
            kw[caps.cu_seqlens_q], kw[caps.cu_seqlens_k] = c.cu_seqlens_q, c.cu_seqlens_k
        else:
            need_mask = True
    if need_mask:
        if caps.mask is None:
            raise Unsupported("the problem needs a mask and the kernel declares no mask/attn_mask parameter")
        kw = {caps.mask: c.allowed}  # the mask is the whole rule: causal, window and sequences included
    if caps.scale is not None:
        kw[caps.scale] = c.scale
    elif c.scale != 1.0 / math.sqrt(d):  # exactly the expression problem.build sets (no tolerance needed)
        raise Unsupported("the kernel declares no scale parameter (only 1/sqrt(D) can be fuzzed)")
    if Hq != Hkv:
        if not gqa:
            raise Unsupported("Hq != Hkv and the kernel declares no enable_gqa (nor kernel(gqa=True))")
        if caps.gqa is not None:
            kw[caps.gqa] = True
    if caps.return_lse is not None:
        kw[caps.return_lse] = conv.lse != "none"
    if caps.deterministic is not None:
        kw[caps.deterministic] = bool(deterministic)
    q, k, v = (_to_layout(t, conv.layout) for t in (c.q, c.k, c.v))
    return q, k, v, kw


def _returned(r, conv: Conventions, c: Case):
    """(out, lse) of the kernel's result ``r``, checked against the contract before the harness
    converts it (a wrong type or shape is the kernel's error, not a crash of the conversion)."""
    out, lse = (r[0], r[1] if len(r) > 1 else None) if isinstance(r, (tuple, list)) else (r, None)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the kernel returned {type(out).__name__}, expected a tensor out (or (out, lse))")
    B, Hq, nq = c.q.shape[:3]
    want = (B, nq, Hq, c.v.shape[3]) if conv.layout == "bnhd" else (B, Hq, nq, c.v.shape[3])
    if tuple(out.shape) != want:
        dims = "(B, Nq, Hq, Dv)" if conv.layout == "bnhd" else "(B, Hq, Nq, Dv)"
        raise ValueError(f"the kernel returned out of shape {tuple(out.shape)}, expected {dims} = {want}")
    lse = None if conv.lse == "none" else lse
    if lse is not None and not (isinstance(lse, torch.Tensor) and lse.is_floating_point()):
        raise TypeError(f"the kernel returned lse of type {type(lse).__name__}"
                        f"{'' if not isinstance(lse, torch.Tensor) else f' ({lse.dtype})'}, expected a floating "
                        "tensor (B, Hq, Nq)")
    return out, lse


def _converted(out: torch.Tensor, lse, conv: Conventions, c: Case) -> KernelOut:
    """The kernel's (out, lse) in our conventions: (B, Hq, Nq, Dv) layout, natural-log LSE, and
    with ``empty_rows="nan"`` rows without an allowed key set to out 0, LSE −inf."""
    if conv.layout == "bnhd":
        out = out.transpose(1, 2)
    if lse is not None and conv.lse == "log2":
        lse = lse * _LN2
    if conv.empty_rows == "nan":
        empty = ~c.allowed.any(-1)  # (B, Hq, Nq)
        out = torch.where(empty[..., None], torch.zeros((), dtype=out.dtype, device=out.device), out)
        if lse is not None and lse.numel() == empty.numel():
            lse = torch.where(empty.reshape(lse.shape), torch.full((), float("-inf"), dtype=lse.dtype,
                                                                  device=lse.device), lse)
    return KernelOut(out, lse)


def _square(c: Case) -> bool:
    """Whether top-left and bottom-right alignment agree on the case (every sequence square)."""
    if c.cu_seqlens_q is None:
        return c.q.shape[2] == c.k.shape[2]
    return torch.equal(c.cu_seqlens_q.cpu(), c.cu_seqlens_k.cpu())


def _to_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """(B, H, N, D) → the kernel's layout. bnhd: a contiguous (B, N, H, D) tensor, or, for the
    fuzzer's strided views (non-contiguous family, poisoned head-dim padding), the same strides
    transposed (autograd flows back to the (B, H, N, D) leaf either way)."""
    if layout == "bhnd":
        return x
    y = x.transpose(1, 2)
    return y.contiguous() if x.is_contiguous() else y


# ----------------------------------------------------------------------------------- loading

def load(ref: str) -> Callable:
    """The callable named by ``MODULE:FUNCTION``, ``PATH.py:FUNCTION`` or ``PATH.py`` (a file whose
    only ``@kernel``-decorated function is taken). ``UsageError`` says what was wrong."""
    where, _, attr = ref.rpartition(":") if ":" in ref else (ref, "", "")
    if not where:
        raise UsageError(f"kernel {ref!r}: expected MODULE:FUNCTION, PATH.py:FUNCTION or PATH.py")
    module = _import_path(where) if where.endswith(".py") or os.sep in where else _import_module(where)
    if not attr:
        marked = [n for n, f in vars(module).items() if callable(f) and hasattr(f, _ATTR)]
        if len(marked) != 1:
            raise UsageError(f"kernel {ref!r}: name the function (PATH.py:FUNCTION); the file has "
                             f"{len(marked)} @flashproof.fuzz.kernel functions {marked}")
        attr = marked[0]
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n, f in vars(module).items() if callable(f) and not n.startswith("_"))
            raise UsageError(f"kernel {ref!r}: {module.__name__} has no {attr!r}; its callables: {names}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"kernel {ref!r}: {attr} is a {type(obj).__name__}, not a callable")
    return obj


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise UsageError(f"cannot import module {name!r}: {e}") from None
    except Exception as e:  # the user's module raised while importing
        raise UsageError(f"importing {name!r} raised {type(e).__name__}: {e}") from None


def _import_path(path: str):
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise UsageError(f"no such kernel file: {path}")
    name = f"flashproof_user_{os.path.splitext(os.path.basename(full))[0]}_{hashlib.sha1(full.encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, full)
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file can import its neighbours
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise UsageError(f"loading {path} raised {type(e).__name__}: {e}") from None
    return module


def is_reference(name: str) -> bool:
    """Whether a ``--kernel`` value names a user kernel (``X:Y`` or ``*.py``) rather than a built-in."""
    return ":" in name and not name.startswith("mutant:") or name.endswith(".py")


def ref_of(fn: Callable) -> str:
    """A ``--kernel`` reference that loads ``fn`` again in a fresh process: ``MODULE:QUALNAME``
    for an importable module, else ``/absolute/path.py:QUALNAME``."""
    mod = getattr(fn, "__module__", None) or ""
    qual = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
    if mod and mod != "__main__" and not mod.startswith("flashproof_user_"):
        return f"{mod}:{qual}"
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    return f"{os.path.abspath(path)}:{qual}" if path else f"{mod}:{qual}"


def absolute_ref(ref: str) -> str:
    """``ref`` with a relative ``PATH.py`` made absolute (module references unchanged)."""
    where, sep, attr = ref.rpartition(":") if ":" in ref else (ref, "", "")
    if where.endswith(".py") or os.sep in where:
        return os.path.abspath(where) + sep + attr
    return ref


def resolve(name: str, **conventions) -> Target:
    """A ``--kernel`` value as a target: a registered name (``targets.get``), else a user kernel
    reference (``load``) wrapped by ``user_target`` with ``conventions``. UsageError otherwise.
    Conventions apply to user kernels only: the built-in targets normalise their own."""
    from . import targets

    try:
        return targets.get(name)
    except ValueError as e:
        if not is_reference(name):
            raise UsageError(f"{e}; or a user kernel as MODULE:FUNCTION or PATH.py:FUNCTION") from None
    return user_target(load(name), name=name, **conventions)
