"""Bad input is a ValueError/TypeError that names the problem; backends never fall back silently."""
from __future__ import annotations

import os

import pytest
import torch

from flashproof.kernels import BlockSparseMask, attention


def _qkv(B=1, Hq=2, Hkv=2, Nq=8, Nk=8, D=16, Dv=16, dtype=torch.float32):
    return (torch.randn(B, Hq, Nq, D, dtype=dtype), torch.randn(B, Hkv, Nk, D, dtype=dtype),
            torch.randn(B, Hkv, Nk, Dv, dtype=dtype))


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
    ("backend_name", (q, k, v), {"backend": "cuda"}, ValueError, "backend"),
    ("bug_name", (q, k, v), {"_bugs": {"typo"}}, ValueError, "unknown bug"),
    ("f64_on_triton", tuple(t.double() for t in (q, k, v)), {"backend": "triton"}, TypeError, "not supported"),
]


@pytest.mark.parametrize("args,kw,exc,words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_raises_named_error(args, kw, exc, words):
    with pytest.raises(exc, match=words.replace("(", r"\(").replace(")", r"\)").replace("%", "%")):
        attention(*args, **kw)


def test_triton_on_cpu_without_interpreter_raises(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="CUDA tensors"):
        attention(q, k, v, backend="triton")


def test_default_backend_is_torch_on_cpu(monkeypatch):
    calls = []
    import flashproof.kernels.attention_torch as t
    orig = t.forward
    monkeypatch.setattr(t, "forward", lambda *a: calls.append(1) or orig(*a))
    attention(q, k, v)
    assert calls == [1] and os.environ.get("TRITON_INTERPRET") == "1"
