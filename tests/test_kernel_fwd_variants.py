"""The forward's interior-loop variants (``attention_triton.FWD_FMA``, ``FWD_LAZY``, ``FWD_POLY``)
under TRITON_INTERPRET=1: when the host turns the FMA form on, that every variant meets the float64
formula on the half-precision feature cases and on inputs built to take both branches of the lazy
rescale (a row max that creeps up by less than 8 per block, then jumps), and the polynomial 2^x
(``exp2_mixed``) on its own: error bound, NaN, underflow, and the share of columns it takes."""
from __future__ import annotations

import os

import pytest
import torch
import triton
import triton.language as tl

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


@pytest.mark.parametrize("fma,lazy,poly", [(False, False, 0), (True, True, 0), (True, False, 2), (True, False, 8)],
                         ids=["no_fma", "lazy", "poly2", "poly8"])
@pytest.mark.parametrize("case", VARIANT_CASES, ids=ids(VARIANT_CASES))
def test_variants_match_dense(case, fma, lazy, poly, monkeypatch):
    monkeypatch.setattr(at, "FWD_FMA", fma)
    monkeypatch.setattr(at, "FWD_LAZY", lazy)
    monkeypatch.setattr(at, "FWD_POLY", poly)
    monkeypatch.setattr(at, "BWD_POLY", poly)  # check_case runs the backward as well
    check_case(case, torch.float16, "triton")


@triton.jit
def _exp2_tile(X, Y, BM: tl.constexpr, BN: tl.constexpr, POLY: tl.constexpr):
    from flashproof.kernels.attention_triton_fwd import exp2_mixed
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(Y + offs, exp2_mixed(tl.load(X + offs), POLY))


def _exp2_mixed(x, poly):
    y = torch.empty_like(x)
    _exp2_tile[(1,)](x, y, x.shape[0], x.shape[1], poly)
    return y


@pytest.mark.parametrize("poly", [0, 2, 4, 8])
def test_exp2_mixed_bound_nan_underflow_and_share(poly):
    """Relative error <= 7.5e-5 (the minimax bound, plus fp32 rounding) wherever 2^x is a normal
    number; NaN stays NaN; below -125 at most 2^-124; and exactly 1/poly of the columns go
    through the polynomial (the other entries are exp2 itself, bitwise)."""
    g = torch.Generator().manual_seed(0)
    x = -torch.rand(16, 64, generator=g, dtype=torch.float64).pow(3).mul(130).float()  # most mass near 0
    x[0, :] = torch.linspace(-3, 0, 64)
    x[1, 3], x[2, 40], x[3, 7] = float("nan"), -126.5, -1000.0
    y = _exp2_mixed(x, poly)
    exact = torch.exp2(x.double())
    normal = x > -125
    rel = ((y.double() - exact) / exact)[normal].abs().max().item()
    assert rel <= 7.6e-5
    assert torch.isnan(y[1, 3])
    tiny = ~normal & ~torch.isnan(x)
    assert (y[tiny] >= 0).all() and (y[tiny] <= 2.0 ** -124).all()
    differs = (y != _exp2_mixed(x, 0)) & normal  # against tl.math.exp2 as this backend computes it
    share = differs.any(dim=0).float().mean().item()
    assert share == (1 / poly if poly else 0.0)


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
