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
    res = attention(q, k, v, return_lse=True, backend="triton", **kw)
    return res, taken[-1] is not None


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
    assert at._descriptors(q, q, q, P) is not None
    assert at._descriptors(q[..., :15], q[..., :15], q[..., :15], P) is not None  # a view: rows stay 64 bytes apart
    odd = torch.randn(1, 2, 5, 15)
    assert at._descriptors(odd, odd, odd, P) is None  # rows 60 bytes apart
    assert at._descriptors(q.transpose(-1, -2), q, q, P) is None  # last dim not contiguous
    assert at._descriptors(q[..., 1:], q[..., 1:], q[..., 1:], P) is None  # base 4 bytes past alignment
    assert at._descriptors(q[:, :, :0], q, q, P) is None  # empty
    V = type("V", (), {"seqlens": (None,)})
    assert at._descriptors(q, q, q, V) is None  # varlen: rows of batch 0 (offsets the descriptor cannot express)
