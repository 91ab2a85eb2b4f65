"""``attention_with_kvcache``: validation and routing (the kernels live in ``torch.py`` and ``triton.py``).

Shapes::

    q            (B, Hq, Nq, D)          the new tokens' queries (Nq = 1 decodes; k + 1 verifies k drafts)
    contiguous:  k_cache (B, Hkv, Nmax, D),  v_cache (B, Hkv, Nmax, Dv)
    paged:       k_cache (num_pages, page_size, Hkv, D),  v_cache (num_pages, page_size, Hkv, Dv),
                 block_table (B, max_pages) int32: position j of request b lives in page
                 block_table[b, j // page_size], slot j % page_size; with kv_layout="HND" the
                 caches are (num_pages, Hkv, page_size, D) and (num_pages, Hkv, page_size, Dv) instead
    cache_seqlens (B,) int32             valid positions per request, the new tokens included
    -> out (B, Hq, Nq, Dv) in q's dtype, and with return_lse lse (B, Hq, Nq) float32 (float64 for
       float64 inputs), natural log

Query i of request b (length L = cache_seqlens[b]) sits at position L − Nq + i and may read cache
position j when 0 ≤ j < L and: ``causal`` — j ≤ L − Nq + i; ``window=(left, right)`` — L − Nq + i −
left ≤ j ≤ L − Nq + i + right (None = unbounded on that side), exactly ``attention()``'s bottom-right
rules with Nk = L. A row with no readable key (L = 0, or L < Nq under causal) gets out 0, lse −inf.
Positions ≥ L (and pages past ⌈L / page_size⌉) are never read, so whatever they hold cannot leak.
GQA as ``attention()``: query head h reads kv head h // (Hq // Hkv).

Lengths and page-table entries (the only arguments whose values, not shapes, can be wrong) are
checked without a device-to-host read on the Triton path: the kernel clamps what it reads into the
cache and writes NaN to every out and lse row of a request whose length is outside 0..capacity or
that needs a table entry outside 0..num_pages − 1 (never a plausible wrong answer). ``check=True``
reads them to the host first (one sync) and raises ``ValueError`` naming the entry. The torch path
reads the lengths to the host anyway and always raises.

Backend: ``"triton"`` for CUDA tensors, ``"torch"`` otherwise; ``backend="triton"`` on CPU tensors
needs ``TRITON_INTERPRET=1`` (the CI mode) and raises otherwise. There is no fallback.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional

import torch

from ..interpreter import interpreting
from . import plan

__all__ = ["KVCacheOut", "KVCall", "attention_with_kvcache", "resolve_backend", "MAX_HEAD_DIM", "TUNINGS"]

MAX_HEAD_DIM = 256
#: the ``tuning`` values, those of ``attention()``
TUNINGS = ("autotune", "first")
_DTYPES = {"torch": (torch.float16, torch.bfloat16, torch.float32, torch.float64),
           "triton": (torch.float16, torch.bfloat16, torch.float32)}


class KVCacheOut(NamedTuple):
    """out (B, Hq, Nq, Dv) in q's dtype; lse (B, Hq, Nq) float32 (float64 for float64 inputs), −inf
    for a row with no readable key."""

    out: torch.Tensor
    lse: torch.Tensor


class KVCall(NamedTuple):
    """The validated call, as both backends read it.

    left, right: the window around each query's position (None = unbounded; causal folded into
    right = 0); groups: Hq // Hkv; page_size: 0 for a contiguous cache; lengths: cache_seqlens as a
    Python list when it was read to the host (the torch path, or ``check=True``), else None;
    capacity: positions the cache holds per request (Nmax, or max_pages · page_size); num_pages:
    pages in a paged cache (0 contiguous); num_splits: the split count every request is cut into
    (``plan``); num_sms: the device's SM count (1 off CUDA), which the
    launch's load class is judged against (``config.load_class``)."""

    scale: float
    left: Optional[int]
    right: Optional[int]
    groups: int
    page_size: int
    cache_seqlens: torch.Tensor
    block_table: Optional[torch.Tensor]
    lengths: Optional[list]
    capacity: int
    num_pages: int
    num_splits: int
    num_sms: int


#: the paged caches' layouts: page slots before heads (vLLM's and flash-attn's), or heads before slots
KV_LAYOUTS = ("NHD", "HND")


def attention_with_kvcache(q, k_cache, v_cache, *, cache_seqlens, block_table=None, causal=True, window=None,
                           scale=None, return_lse=False, num_splits=None, backend=None, check=False,
                           tuning="autotune", kv_layout=None):
    """Attention of Nq new queries per request over a (contiguous or paged) KV cache; forward only.

    Shapes and masking rules in the module docstring. ``num_splits``: how many pieces each
    request's keys are cut into (``plan.split_range``); ``None`` lets ``plan.choose_num_splits``
    pick from the shape and the SM count. The partial (out, lse) pairs are merged by the summary
    merge rule in float32. ``check=True`` validates the lengths and the page table on the host (one
    device-to-host read; the Triton path otherwise flags them on the device: NaN rows, module
    docstring). ``tuning``, as ``attention()``'s: ``"autotune"`` times every Triton config of a new
    launch key, ``"first"`` runs the first (the interpreter, tests, correctness runs). ``kv_layout``, for
    a paged cache: ``"NHD"`` (the default) — (num_pages, page_size, Hkv, D) — or ``"HND"`` —
    (num_pages, Hkv, page_size, D); both kernels read either in place, through its strides. Returns
    ``out`` or, with ``return_lse``, ``KVCacheOut(out, lse)``.
    """
    backend = resolve_backend(backend, q)
    if tuning not in TUNINGS:
        raise ValueError(f"tuning must be one of {TUNINGS}, got {tuning!r}")
    for name, flag in (("return_lse", return_lse), ("check", check)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    k_cache, v_cache = _paged_view(k_cache, v_cache, kv_layout, block_table)
    try:
        call = validate(q, k_cache, v_cache, cache_seqlens=cache_seqlens, block_table=block_table, causal=causal,
                        window=window, scale=scale, num_splits=num_splits, backend=backend,
                        check=check or backend == "torch")
    except ValueError as e:
        if kv_layout != "HND":
            raise
        raise ValueError(f"{e} (kv_layout='HND': shapes above are of the caches' (num_pages, page_size, Hkv, ·) "
                         "transposes)") from e
    if backend == "torch":
        from .torch import forward
        out, lse = forward(q, k_cache, v_cache, call)
    else:
        from .triton import forward
        out, lse = forward(q, k_cache, v_cache, call, tuning=tuning)
    return KVCacheOut(out, lse) if return_lse else out


def _paged_view(k_cache, v_cache, kv_layout, block_table):
    """The caches as (num_pages, page_size, Hkv, ·) views: as given for ``kv_layout`` None or "NHD", the
    (num_pages, Hkv, page_size, ·) tensors transposed (no copy) for "HND"; ``kv_layout`` only with a paged
    cache (a contiguous one is (B, Hkv, Nmax, ·) whatever it is called)."""
    if kv_layout is None:
        return k_cache, v_cache
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be None or one of {KV_LAYOUTS}, got {kv_layout!r}")
    if block_table is None:
        raise ValueError(f"kv_layout={kv_layout!r} is for a paged cache (with block_table); a contiguous cache is "
                         "(B, Hkv, Nmax, D), leave kv_layout None")
    if kv_layout == "NHD":
        return k_cache, v_cache
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        _tensor4(name, t)
    return k_cache.transpose(1, 2), v_cache.transpose(1, 2)


def resolve_backend(backend, q) -> str:
    """``backend`` as asked, or the default for q's device; raises where the asked one cannot run."""
    if backend is None:
        backend = "triton" if isinstance(q, torch.Tensor) and q.is_cuda else "torch"
    if backend not in ("torch", "triton"):
        raise ValueError(f"backend must be 'torch' or 'triton', got {backend!r}")
    if backend == "triton":
        try:
            import triton  # noqa: F401
        except ImportError as e:
            raise RuntimeError("backend='triton' was asked for but triton is not installed") from e
        if isinstance(q, torch.Tensor) and not q.is_cuda and not interpreting():
            raise ValueError("backend='triton' needs CUDA tensors (or TRITON_INTERPRET=1 for CPU tensors); "
                             f"got q on {q.device}")
    return backend


def _tensor4(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D, got shape {tuple(t.shape)}")


def _int_vector(name, t, device, shape):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be an int32 torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.int32:
        raise TypeError(f"{name} must be int32, got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}, q on {device}")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")


def _window(window, causal):
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    left = right = None
    if window is not None:
        if not isinstance(window, (tuple, list)) or len(window) != 2:
            raise ValueError(f"window must be None or (left, right), got {window!r}")
        for side, w in zip(("left", "right"), window):
            if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
                raise ValueError(f"window {side} must be None (unbounded) or an int >= 0, got {w!r}")
        left, right = window
    if causal:
        right = 0 if right is None else min(right, 0)
    return left, right


def validate(q, k_cache, v_cache, *, cache_seqlens, block_table, causal, window, scale, num_splits,
             backend, check=False) -> KVCall:
    """Check every argument from its shape, dtype and device (no device-to-host read) and return the
    ``KVCall``; with ``check`` also the values of the lengths and the page table (one host read)."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        _tensor4(name, t)
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        raise TypeError(f"q, k_cache, v_cache must share one dtype, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if q.dtype not in _DTYPES[backend]:
        raise TypeError(f"dtype {q.dtype} is not supported by backend {backend!r} "
                        f"(supported: {', '.join(str(d) for d in _DTYPES[backend])})")
    if not (q.device == k_cache.device == v_cache.device):
        raise ValueError(f"q, k_cache, v_cache must be on one device, got {q.device}, {k_cache.device}, "
                         f"{v_cache.device}")
    B, Hq, Nq, D = q.shape
    if Nq < 1 or B < 1:
        raise ValueError(f"q must have B >= 1 and Nq >= 1, got shape {tuple(q.shape)}")
    paged = block_table is not None
    if paged:
        num_pages, page_size, Hkv, Dk = k_cache.shape
        if v_cache.shape[:3] != k_cache.shape[:3]:
            raise ValueError("paged v_cache (num_pages, page_size, Hkv, Dv) must match k_cache in its first three "
                             f"dims: k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}")
        if page_size < 16 or page_size & (page_size - 1):
            raise ValueError(f"page_size (k_cache.shape[1]) must be a power of two >= 16, got {page_size}")
        if not isinstance(block_table, torch.Tensor) or block_table.dim() != 2 or block_table.shape[0] != B:
            raise ValueError(f"block_table must be a (B, max_pages) = ({B}, ·) tensor, got "
                             f"{tuple(block_table.shape) if isinstance(block_table, torch.Tensor) else type(block_table).__name__}")
        _int_vector("block_table", block_table, q.device, tuple(block_table.shape))
        capacity = block_table.shape[1] * page_size
        where = f"max_pages · page_size = {block_table.shape[1]} · {page_size}"
    else:
        Bk, Hkv, n_max, Dk = k_cache.shape
        if v_cache.shape[:3] != k_cache.shape[:3]:
            raise ValueError("v_cache (B, Hkv, Nmax, Dv) must match k_cache in its first three dims: "
                             f"k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}")
        if Bk != B:
            raise ValueError(f"batch mismatch: q has B={B}, k_cache has B={Bk} (a paged cache needs block_table)")
        page_size, capacity, where = 0, n_max, f"Nmax = k_cache.shape[2] = {n_max}"
    Dv = v_cache.shape[3]
    if Dk != D:
        raise ValueError(f"head dim mismatch: q has D={D}, k_cache has D={Dk}")
    for name, d in (("D", D), ("Dv", Dv)):
        if not 1 <= d <= MAX_HEAD_DIM:
            raise ValueError(f"head dim {name}={d} unsupported: need 1 <= {name} <= {MAX_HEAD_DIM}")
    if Hkv < 1 or Hq % Hkv:
        raise ValueError(f"GQA needs Hq % Hkv == 0, got Hq={Hq}, Hkv={Hkv}")
    left, right = _window(window, causal)
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite real number, got {scale!r}")
    _int_vector("cache_seqlens", cache_seqlens, q.device, (B,))
    num_pages = k_cache.shape[0] if paged else 0
    num_sms = _sm_count(q.device)
    lengths = _check_lengths(cache_seqlens, block_table, capacity, where, page_size, num_pages) if check else None
    if num_splits is None:
        # the most keys any request's queries may read, bounded from the shapes alone (no host read):
        # the capacity, or Nq + left with a window (L − lo = min(L, Nq + left))
        longest = capacity if left is None else min(capacity, Nq + left)
        num_splits = plan.choose_num_splits(B, Hkv, longest, num_sms).num_splits
    elif isinstance(num_splits, bool) or not isinstance(num_splits, int) or not 1 <= num_splits <= plan.MAX_SPLITS:
        raise ValueError(f"num_splits must be None or an int in 1..{plan.MAX_SPLITS}, got {num_splits!r}")
    return KVCall(float(scale), left, right, Hq // Hkv, page_size, cache_seqlens, block_table, lengths, capacity,
                  num_pages, num_splits, num_sms)


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device (1 elsewhere), read once per device."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


def _lo(L: int, Nq: int, left) -> int:
    """The first position any query of a request of length L may read (the window's left edge)."""
    return 0 if left is None else max(0, L - Nq - left)


def _check_lengths(seqlens, table, capacity, where, page_size, num_pages) -> list:
    """One host read (a single device sync) of cache_seqlens and, paged, of whether any table entry
    that the lengths need lies outside 0..num_pages−1; every length must be in 0..capacity.
    Returns the lengths as a Python list."""
    if table is None:
        lengths = seqlens.tolist()
        any_wrong = 0
    else:
        need = (seqlens.clamp(min=0) + page_size - 1) // page_size                         # (B,) pages needed
        used = torch.arange(table.shape[1], device=table.device)[None, :] < need[:, None]   # (B, max_pages)
        wrong = used & ((table < 0) | (table >= num_pages))
        *lengths, any_wrong = torch.cat([seqlens, wrong.any().reshape(1).to(torch.int32)]).tolist()
    if not 0 <= min(lengths) <= max(lengths) <= capacity:
        b, L = next((b, L) for b, L in enumerate(lengths) if not 0 <= L <= capacity)
        raise ValueError(f"cache_seqlens[{b}] = {L} is outside 0..{capacity} (the cache holds {where} positions "
                         "per request)")
    if any_wrong:
        b, p = (int(x) for x in torch.nonzero(wrong)[0].tolist())
        raise ValueError(f"block_table[{b}, {p}] = {int(table[b, p])} is not a page index in 0..{num_pages - 1} "
                         f"(request {b} has length {lengths[b]}, so it needs its first {-(-lengths[b] // page_size)} "
                         "table entries)")
    return lengths
