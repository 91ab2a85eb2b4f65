"""Bad calls of attention_with_kvcache raise a clear error naming what was expected and what was
received (table-driven; ids say which mistake). Validation runs before either backend; these calls
take the torch path (CPU tensors), which reads the lengths to the host and so always checks their
values (the Triton path does with ``check=True``; without it, test_kvcache_triton's NaN-row test)."""
from __future__ import annotations

import pytest
import torch

from flashproof.kernels.kvcache import attention_with_kvcache

B, HQ, HKV, NQ, D, NMAX, PAGE = 2, 4, 2, 1, 16, 40, 16


def base(paged=False):
    """A valid call's arguments (contiguous, or paged with 3 pages per request)."""
    q = torch.randn(B, HQ, NQ, D)
    if paged:
        k = torch.randn(6, PAGE, HKV, D)
        table = torch.arange(6, dtype=torch.int32).reshape(B, 3)
    else:
        k = torch.randn(B, HKV, NMAX, D)
        table = None
    return dict(q=q, k_cache=k, v_cache=k.clone(), cache_seqlens=torch.tensor([3, 40], dtype=torch.int32),
                block_table=table)


def with_(paged=False, **changes):
    args = base(paged)
    for key, fn in changes.items():
        args[key] = fn(args[key]) if callable(fn) else fn
    return args


CASES = [
    ("q-not-4d", with_(q=lambda t: t[0]), ValueError, "q must be 4-D"),
    ("q-not-a-tensor", with_(q=[1.0]), TypeError, "q must be a torch.Tensor"),
    ("dtype-mismatch", with_(k_cache=lambda t: t.double()), TypeError, "share one dtype"),
    ("int-dtype", with_(q=lambda t: t.int(), k_cache=lambda t: t.int(), v_cache=lambda t: t.int()), TypeError,
     "not supported"),
    ("gqa-not-divisible", with_(q=lambda t: torch.randn(B, 3, NQ, D)), ValueError, "Hq % Hkv"),
    ("head-dim-mismatch", with_(q=lambda t: torch.randn(B, HQ, NQ, 8)), ValueError, "head dim mismatch"),
    ("batch-mismatch-contiguous", with_(cache_seqlens=torch.tensor([1, 2, 3], dtype=torch.int32),
                                        q=lambda t: torch.randn(3, HQ, NQ, D)), ValueError, "batch mismatch"),
    ("device-mismatch-cache", with_(k_cache=lambda t: t.to("meta"), v_cache=lambda t: t.to("meta")), ValueError,
     "must be on one device"),
    ("device-mismatch-seqlens", with_(cache_seqlens=lambda t: t.to("meta")), ValueError,
     "cache_seqlens is on meta, q on cpu"),
    ("device-mismatch-table", with_(True, block_table=lambda t: t.to("meta")), ValueError,
     "block_table is on meta, q on cpu"),
    ("v-shape-mismatch", with_(v_cache=lambda t: t[:, :, :10]), ValueError, "must match k_cache"),
    ("seqlens-int64", with_(cache_seqlens=lambda t: t.long()), TypeError, "cache_seqlens must be int32"),
    ("seqlens-wrong-shape", with_(cache_seqlens=torch.tensor([3], dtype=torch.int32)), ValueError,
     "cache_seqlens must have shape (2,)"),
    ("seqlens-not-tensor", with_(cache_seqlens=[3, 4]), TypeError, "cache_seqlens must be an int32 torch.Tensor"),
    ("length-beyond-cache", with_(cache_seqlens=torch.tensor([3, 41], dtype=torch.int32)), ValueError,
     "cache_seqlens[1] = 41 is outside 0..40"),
    ("negative-length", with_(cache_seqlens=torch.tensor([-1, 4], dtype=torch.int32)), ValueError,
     "cache_seqlens[0] = -1"),
    ("length-beyond-pages", with_(True, cache_seqlens=torch.tensor([3, 49], dtype=torch.int32)), ValueError,
     "outside 0..48 (the cache holds max_pages · page_size = 3 · 16"),
    ("table-entry-negative", with_(True, block_table=torch.tensor([[0, -1, 2], [3, 4, 5]], dtype=torch.int32),
                                   cache_seqlens=torch.tensor([20, 3], dtype=torch.int32)), ValueError,
     "block_table[0, 1] = -1 is not a page index in 0..5"),
    ("table-entry-past-pages", with_(True, block_table=torch.tensor([[0, 1, 2], [3, 9, 5]], dtype=torch.int32)),
     ValueError, "block_table[1, 1] = 9 is not a page index"),
    ("table-int64", with_(True, block_table=lambda t: t.long()), TypeError, "block_table must be int32"),
    ("table-wrong-batch", with_(True, block_table=lambda t: t[:1]), ValueError, "block_table must be a (B, max_pages)"),
    ("page-size-not-pow2", with_(True, k_cache=torch.randn(6, 24, HKV, D), v_cache=torch.randn(6, 24, HKV, D)),
     ValueError, "page_size (k_cache.shape[1]) must be a power of two >= 16, got 24"),
    ("page-size-8", with_(True, k_cache=torch.randn(6, 8, HKV, D), v_cache=torch.randn(6, 8, HKV, D)),
     ValueError, "power of two >= 16, got 8"),
    ("window-negative", with_(window=(-1, None)), ValueError, "window left must be None"),
    ("window-not-pair", with_(window=3), ValueError, "window must be None or (left, right)"),
    ("causal-not-bool", with_(causal=1), TypeError, "causal must be a bool"),
    ("scale-nan", with_(scale=float("nan")), ValueError, "scale must be a finite real number"),
    ("num-splits-zero", with_(num_splits=0), ValueError, "num_splits must be None or an int in 1..64"),
    ("num-splits-too-many", with_(num_splits=65), ValueError, "num_splits must be None or an int in 1..64"),
    ("return-lse-not-bool", with_(return_lse="yes"), TypeError, "return_lse must be a bool"),
    ("check-not-bool", with_(check=1), TypeError, "check must be a bool"),
    ("tuning-unknown", with_(tuning="fast"), ValueError, "tuning must be one of ('autotune', 'first')"),
    ("unknown-backend", with_(backend="cuda"), ValueError, "backend must be 'torch' or 'triton'"),
    ("kv-layout-unknown", with_(True, kv_layout="BHND"), ValueError, "kv_layout must be None or one of ('NHD', 'HND')"),
    ("kv-layout-contiguous", with_(kv_layout="HND"), ValueError, "kv_layout='HND' is for a paged cache"),
    ("kv-layout-hnd-page-size", with_(True, kv_layout="HND", k_cache=torch.randn(6, HKV, 24, D),
                                      v_cache=torch.randn(6, HKV, 24, D)), ValueError,
     "got 24 (kv_layout='HND': shapes above are of the caches' (num_pages, page_size, Hkv, ·) transposes)"),
]


@pytest.mark.parametrize("args,error,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_call_raises_clear_error(args, error, message):
    args = dict(args)
    q, k, v = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    with pytest.raises(error) as e:
        attention_with_kvcache(q, k, v, **args)
    assert message in str(e.value), str(e.value)


def test_table_entries_past_a_request_are_never_checked_or_read():
    """Entries past ⌈L / page_size⌉ may hold anything (here −1 and 10⁶): not an error."""
    args = base(True)
    args["block_table"] = torch.tensor([[0, -1, 10**6], [3, 4, 5]], dtype=torch.int32)
    args["cache_seqlens"] = torch.tensor([16, 48], dtype=torch.int32)
    q, k, v = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    out = attention_with_kvcache(q, k, v, **args)
    assert torch.isfinite(out).all()


def test_triton_on_cpu_without_interpreter_raises(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    args = base()
    q, k, v = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        attention_with_kvcache(q, k, v, backend="triton", **args)


def test_float64_is_refused_by_triton():
    args = with_(q=lambda t: t.double(), k_cache=lambda t: t.double(), v_cache=lambda t: t.double())
    q, k, v = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    with pytest.raises(TypeError, match="not supported by backend 'triton'"):
        attention_with_kvcache(q, k, v, backend="triton", **args)
