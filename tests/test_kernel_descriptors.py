"""The forward's two load paths (TMA tensor descriptors and predicated pointer loads) under
TRITON_INTERPRET=1: which inputs take the descriptor path, and that both give the same result on
the same inputs (the feature cases' oracle checks then cover both)."""
from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels import attention, attention_triton as at  # noqa: E402
from test_kernel_cases import CASES, build, check_case, ids  # noqa: E402

if at.TensorDescriptor is None:
    pytest.skip("this Triton has no tensor descriptors", allow_module_level=True)

PICK = [c for c in CASES if c.id in {"plain", "causal_nq_gt_nk", "window_both", "gqa_4_odd_dims", "head_dim_256",
                                     "block_sparse_window", "dense_mask", "scale_large"}]


def _forward(case, monkeypatch, descriptors: bool):
    monkeypatch.setattr(at, "USE_DESCRIPTORS", descriptors)
    taken = []
    real = at._descriptors
    monkeypatch.setattr(at, "_descriptors", lambda *a: taken.append(real(*a)) or taken[-1])
    q, k, v, kw, _ = build(case, torch.float32, "cpu")
    with torch.no_grad():
        res = attention(q, k, v, return_lse=True, backend="triton", **kw)
    return res, bool(taken) and taken[-1] is not None


@pytest.mark.parametrize("case", PICK, ids=ids(PICK))
def test_descriptor_and_pointer_paths_agree(case, monkeypatch):
    with_desc, used = _forward(case, monkeypatch, True)
    assert used, f"{case.id}: contiguous, 16-byte aligned inputs should take the descriptor path"
    without, used_off = _forward(case, monkeypatch, False)
    assert not used_off
    # same values loaded (TMA zero-fills past Nk and D where the pointer path masks), same arithmetic
    assert torch.equal(with_desc.out, without.out) and torch.equal(with_desc.lse, without.lse), case.id


POINTER = [c for c in CASES if c.id in {"causal_square", "block_sparse_causal"}]


@pytest.mark.parametrize("case", POINTER, ids=ids(POINTER))
def test_pointer_path_matches_dense(case, monkeypatch):
    monkeypatch.setattr(at, "USE_DESCRIPTORS", False)
    check_case(case, torch.float32, "triton")


def test_which_layouts_take_descriptors():
    P = type("P", (), {"seqlens": None})  # only .seqlens is read
    q = torch.randn(1, 2, 5, 16)
    assert at._descriptors(P, q, q, q) is not None
    assert at._descriptors(P, q[..., :15], q[..., :15], q[..., :15]) is not None  # a view: rows stay 64 bytes apart
    odd = torch.randn(1, 2, 5, 15)
    assert at._descriptors(P, odd, odd, odd) is None  # rows 60 bytes apart
    assert at._descriptors(P, q.transpose(-1, -2), q, q) is None  # last dim not contiguous
    assert at._descriptors(P, q[..., 1:], q[..., 1:], q[..., 1:]) is None  # base 4 bytes past alignment
    assert at._descriptors(P, q[:, :, :0], q, q) is None  # empty
    V = type("V", (), {"seqlens": (None,)})
    assert at._descriptors(V, q, q, q) is None  # varlen: rows of batch 0 (offsets the descriptor cannot express)
    assert at._descriptors(P, q, q.expand(1, 2, 5, 16)) is not None  # expand to its own shape: no stride 0
    assert at._descriptors(P, q, torch.randn(1, 1, 5, 16).expand(1, 2, 5, 16)) is None  # broadcast head: stride 0


BWD_PICK = [c for c in CASES if c.id in {"plain", "causal_nq_gt_nk", "window_both", "gqa_4_odd_dims",
                                         "block_sparse_window", "dense_mask"}]


def _backward(case, monkeypatch, descriptors: bool, dtype):
    monkeypatch.setattr(at, "BWD_DESCRIPTORS", descriptors)
    taken = []
    real = at._descriptors
    monkeypatch.setattr(at, "_descriptors", lambda *a: taken.append(real(*a)) or taken[-1])
    q, k, v, kw, _ = build(case, dtype, "cpu")
    out = attention(q, k, v, backend="triton", deterministic=True, **kw)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(7)).to(dtype)  # a dense dO: TMA-able
    grads = torch.autograd.grad(out, (q, k, v), dout)
    return grads, len([t for t in taken if t is not None])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("case", BWD_PICK, ids=ids(BWD_PICK))
def test_backward_descriptor_and_pointer_paths_agree(case, dtype, monkeypatch):
    """The dK/dV kernel streams Q and dO, the dQ kernel K and V, through TMA; same values loaded
    (zero fill where the pointer path masks), same arithmetic, so bitwise the same gradients."""
    with_desc, n_desc = _backward(case, monkeypatch, True, dtype)
    without, n_off = _backward(case, monkeypatch, False, dtype)
    assert n_desc == 3 and n_off == 1, (n_desc, n_off)  # forward + two backward launches / forward only
    for name, a, b in zip(("dq", "dk", "dv"), with_desc, without):
        assert torch.equal(a, b), f"{case.id}: {name} differs between the descriptor and pointer paths"
