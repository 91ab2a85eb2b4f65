"""The forward's interior-loop variants (``attention_triton.FWD_FMA``, ``FWD_LAZY``) under
TRITON_INTERPRET=1: when the host turns the FMA form on, and that every variant meets the float64
formula on the half-precision feature cases and on inputs built to take both branches of the lazy
rescale (a row max that creeps up by less than 8 per block, then jumps)."""
from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels import attention, attention_triton as at  # noqa: E402
from test_kernel_cases import CASES, check_case, ids  # noqa: E402
from test_kernel_reference import allowed_matrix, dense_reference  # noqa: E402


def _spy(monkeypatch):
    """Record the constexpr flags of each forward launch."""
    seen = []
    real = at._FWD

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **kw):
                seen.append({n: kw[n] for n in ("FMA", "LAZY")})
                return real[grid](*args, **kw)
            return launch
    monkeypatch.setattr(at, "_FWD", Spy())
    return seen


@pytest.mark.parametrize("dtype,scale,want", [(torch.float16, None, True), (torch.float16, -0.3, False),
                                              (torch.float16, 0.0, False), (torch.float32, None, False)])
def test_fma_form_only_for_half_precision_and_positive_scale(monkeypatch, dtype, scale, want):
    """rowmax(qk)·c = rowmax(qk·c) holds for c > 0 only; fp32 keeps the backward's bitwise S."""
    seen = _spy(monkeypatch)
    q = torch.randn(1, 1, 20, 16).to(dtype)
    attention(q, q, q, scale=scale, backend="triton")
    assert seen == [{"FMA": want, "LAZY": False}]


VARIANT_CASES = [c for c in CASES if c.id in {"plain", "causal_square", "window_both", "gqa_4_odd_dims",
                                              "block_sparse", "scale_large", "causal_nq_lt_nk"}]


@pytest.mark.parametrize("fma,lazy", [(False, False), (True, True)], ids=["no_fma", "lazy"])
@pytest.mark.parametrize("case", VARIANT_CASES, ids=ids(VARIANT_CASES))
def test_variants_match_dense(case, fma, lazy, monkeypatch):
    monkeypatch.setattr(at, "FWD_FMA", fma)
    monkeypatch.setattr(at, "FWD_LAZY", lazy)
    check_case(case, torch.float16, "triton")


def _creeping_then_jump(dtype):
    """q·k grows by ~4 (log2 units, after scaling) per 16-key block over the first blocks, then
    jumps by ~40 at key 80: the lazy form keeps a stale reference through the creep (p up to 2^8)
    and must rescale at the jump; a row's early keys end up with weight ~2^-40."""
    Nq, Nk, D = 16, 128, 16
    q = torch.zeros(1, 1, Nq, D)
    q[..., 0] = 1.0
    k = torch.zeros(1, 1, Nk, D)
    blocks = torch.arange(Nk) // 16
    k[..., 0] = blocks * 2.5 + torch.linspace(0, 1, Nk)
    k[..., 80:, 0] += 28.0
    k[..., 1] = torch.randn(Nk, generator=torch.Generator().manual_seed(0))
    v = torch.randn(1, 1, Nk, D, generator=torch.Generator().manual_seed(1))
    return q.to(dtype), k.to(dtype), v.to(dtype)


@pytest.mark.parametrize("lazy", [False, True])
def test_lazy_rescale_creep_and_jump(monkeypatch, lazy):
    monkeypatch.setattr(at, "FWD_LAZY", lazy)
    q, k, v = _creeping_then_jump(torch.float16)
    res = attention(q, k, v, scale=1.0, return_lse=True, backend="triton")
    allowed = allowed_matrix(1, 1, q.shape[2], k.shape[2])
    out, lse = dense_reference(q, k, v, allowed, 1.0)
    assert (res.out.double() - out).abs().max() < 3e-2 * max(out.abs().max().item(), 1.0)
    assert (res.lse.double() - lse).abs().max() < 3e-2 * max(lse.abs().max().item(), 1.0)
