"""attention()'s public surface: bad input is a TypeError/ValueError that names the problem (table-
driven, readable ids); the named result; no test machinery in the signature; the bench command's
argument handling."""
from __future__ import annotations

import argparse
import inspect

import pytest
import torch

from flashproof.kernels import AttnOut, BlockSparseMask, attention
from flashproof.kernels.attention.api import _attention
from flashproof.kernels.attention.dispatch import BackendUnavailable


def _qkv(B=1, Hq=2, Hkv=2, Nq=8, Nk=8, D=16, Dv=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, Hq, Nq, D, generator=g).to(dtype), torch.randn(B, Hkv, Nk, D, generator=g).to(dtype),
            torch.randn(B, Hkv, Nk, Dv, generator=g).to(dtype))


def _cu(*v):
    return torch.tensor(v, dtype=torch.int32)


q, k, v = _qkv()
BAD = [
    ("q_3d", (q[0], k, v), {}, ValueError, "4-D"),
    ("not_tensor", (q.tolist(), k, v), {}, TypeError, "torch.Tensor"),
    ("dtype_mix", (q, k.double(), v), {}, TypeError, "share one dtype"),
    ("dtype_int", (q.int(), k.int(), v.int()), {}, TypeError, "not supported"),
    ("batch", (torch.randn(2, 2, 8, 16), k, v), {}, ValueError, "batch mismatch"),
    ("head_dim", (torch.randn(1, 2, 8, 12), k, v), {}, ValueError, "head dim mismatch"),
    ("head_dim_too_big", _qkv(D=300), {}, ValueError, "<= 256"),
    ("gqa_ratio", _qkv(Hq=3, Hkv=2), {}, ValueError, "Hq % Hkv"),
    ("v_len", (q, k, torch.randn(1, 2, 9, 16)), {}, ValueError, "match k"),
    ("scale_nan", (q, k, v), {"scale": float("nan")}, ValueError, "scale"),
    ("window_neg", (q, k, v), {"window": (-1, 2)}, ValueError, "window left"),
    ("window_shape", (q, k, v), {"window": 3}, ValueError, "(left, right)"),
    ("causal_not_bool", (q, k, v), {"causal": 1}, TypeError, "causal"),
    ("mask_float", (q, k, v), {"mask": torch.zeros(8, 8)}, TypeError, "boolean"),
    ("mask_shape", (q, k, v), {"mask": torch.ones(8, 7, dtype=torch.bool)}, ValueError, "broadcast"),
    ("tiles_block", (q, k, v), {"mask": BlockSparseMask(torch.ones(1, 1, 1, 1, dtype=torch.bool), 12, 16)},
     ValueError, "power of two"),
    ("tiles_shape", (q, k, v), {"mask": BlockSparseMask(torch.ones(1, 1, 2, 1, dtype=torch.bool), 16, 16)},
     ValueError, "expected"),
    ("cu_one_side", (q, k, v), {"cu_seqlens_q": _cu(0, 8)}, ValueError, "together"),
    ("cu_end", (q, k, v), {"cu_seqlens_q": _cu(0, 7), "cu_seqlens_k": _cu(0, 8)}, ValueError, "end at 8"),
    ("cu_decreasing", (q, k, v), {"cu_seqlens_q": _cu(0, 5, 3, 8), "cu_seqlens_k": _cu(0, 2, 4, 8)},
     ValueError, "non-decreasing"),
    ("cu_float", (q, k, v), {"cu_seqlens_q": torch.tensor([0., 8.]), "cu_seqlens_k": _cu(0, 8)},
     TypeError, "int32"),
    ("cu_count", (q, k, v), {"cu_seqlens_q": _cu(0, 8), "cu_seqlens_k": _cu(0, 4, 8)}, ValueError, "differ in length"),
    ("cu_batch", _qkv(B=2), {"cu_seqlens_q": _cu(0, 8), "cu_seqlens_k": _cu(0, 8)}, ValueError, "batch dim must be 1"),
    ("backend_name", (q, k, v), {"backend": "cuda"}, ValueError, "backend must be one of"),
    ("backend_none", (q, k, v), {"backend": None}, ValueError, "backend must be one of"),
    ("tuning_name", (q, k, v), {"tuning": "fast"}, ValueError, "tuning must be one of"),
    ("f64_on_triton", tuple(t.double() for t in (q, k, v)), {"backend": "triton"}, BackendUnavailable,
     "not supported by the Triton kernels"),
    ("gluon_on_cpu", (q, k, v), {"backend": "gluon"}, BackendUnavailable, "sm_90"),
]


@pytest.mark.parametrize("args,kw,exc,words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_raises_named_error(args, kw, exc, words):
    with pytest.raises(exc, match=words.replace("(", r"\(").replace(")", r"\)")):
        attention(*args, **kw)


def test_unknown_bug_is_refused_by_the_internal_entry():
    with pytest.raises(ValueError, match="unknown bug"):
        _attention(q, k, v, bugs=frozenset({"typo"}))


def test_signature_has_no_test_machinery():
    params = inspect.signature(attention).parameters
    assert not [p for p in params if p.startswith("_")] and "bugs" not in params
    assert params["backend"].default == "auto" and params["tuning"].default == "autotune"


def test_output_dtype_and_named_result():
    qb, kb, vb = _qkv(Nq=5, Nk=5, D=8, Dv=8, dtype=torch.bfloat16)
    out = attention(qb, kb, vb)
    res = attention(qb, kb, vb, return_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 2, 5, 8)
    assert isinstance(res, AttnOut) and res._fields == ("out", "lse")
    assert res.lse.dtype == torch.float32 and res.lse.shape == (1, 2, 5)
    assert torch.equal(res.out, out)


def test_bench_parses_shapes_and_refuses_without_gpu():
    from flashproof.bench import attention as bench
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--shapes", "64:1024:1,128:2048:0,128:8192:1:64/8,128:8192:0:bnhd",
                         "--out", "/tmp/flashproof-bench-test"])
    assert bench._shapes(args.shapes) == [(64, 1024, True, None, "bhnd"), (128, 2048, False, None, "bhnd"),
                                          (128, 8192, True, (64, 8), "bhnd"), (128, 8192, False, None, "bnhd")]
    for bad in ("128:8192:1:64/6", "128:8192:1:wide"):
        with pytest.raises(ValueError, match="shape"):
            bench._shapes(bad)
    if not torch.cuda.is_available():
        assert bench.run(args) == 2


def test_bench_rounds_rotate_the_providers_order():
    """``interleaved``: every provider timed once per round, round r starting at the r-th provider, so
    none is always first; ``--rounds`` defaults to 3 and must be >= 1."""
    from flashproof.bench import attention as bench
    order = []

    def clock(unit):
        order.append(unit)
        return len(order)
    got = bench.interleaved({"a": "a", "b": "b", "c": "c"}, 4, clock)
    assert order == list("abc" "bca" "cab" "abc")
    assert got == {"a": [1, 6, 8, 10], "b": [2, 4, 9, 11], "c": [3, 5, 7, 12]}
    assert bench.interleaved({}, 2, clock) == {}
    with pytest.raises(ValueError, match="rounds"):
        bench.interleaved({"a": "a"}, 0, clock)
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    assert p.parse_args([]).rounds == 3


def test_the_bench_verb_loads():
    from flashproof import cli
    assert cli._load("bench").__name__ == "flashproof.bench.attention"
