"""``triton/partials.py``: the GQA backward's dK / dV partial sums, one pass. The sum is exact arithmetic
claimed bitwise: the fp32 partials added in the order s = 0, 1, …, S − 1 and rounded once, so the kernel
must equal that sequence of torch adds exactly (no tolerance: nothing here is approximate). On CPU the
interpreter runs it (every access bounds-checked); its fp32 → bf16 cast truncates where the GPU rounds
to nearest, so bf16 outputs are checked on the GPU (``-m gpu``) and fp32 / fp16 here."""
from __future__ import annotations

import pytest
import torch

from flashproof.fuzz.interpreter_shim import bounds_checked
from flashproof.kernels.interpreter import interpreting

pytest.importorskip("triton")
from flashproof.kernels.attention.triton.partials import sum_partials  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_kernels = pytest.mark.skipif(DEVICE == "cpu" and not interpreting(),
                                   reason="the Triton kernels on CPU need TRITON_INTERPRET=1")


def _in_order(p):
    acc = p[:, :, 0].clone()
    for s in range(1, p.shape[2]):
        acc = acc + p[:, :, s]
    return acc


def _out(B, H, N, D, dtype, layout):
    if layout == "bnhd":  # a (B, N, H, D) buffer seen as (B, H, N, D): what empty_like gives a transposed K
        return torch.empty(B, N, H, D, dtype=dtype, device=DEVICE).transpose(1, 2)
    return torch.empty(B, H, N, D, dtype=dtype, device=DEVICE)


def _check(B, H, S, N, D, dtype, layout):
    g = torch.Generator(device=DEVICE).manual_seed(B * 1000 + S * 100 + N + D)
    p = torch.randn(B, H, S, N, D, generator=g, device=DEVICE) * 3
    out = _out(B, H, N, D, dtype, layout)
    with bounds_checked():
        got = sum_partials(p, out)
    assert got is out
    assert torch.equal(out, _in_order(p).to(dtype)), (B, H, S, N, D, dtype, layout)
    return p, out


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("B, H, S, N, D, layout", [
    (1, 2, 2, 37, 64, "bhnd"),  # N not a multiple of the row block
    (2, 1, 4, 16, 128, "bnhd"),
    (1, 3, 8, 5, 40, "bnhd"),  # D below its power-of-two lane count
    (2, 2, 2, 1, 8, "bhnd"),
])
def test_partials_summed_in_order_and_rounded_once(B, H, S, N, D, dtype, layout):
    p, out = _check(B, H, S, N, D, dtype, layout)
    if S == 2:  # one fp32 add and one rounding: what torch.sum then copy_ gave before
        assert torch.equal(out, torch.empty_like(out).copy_(p.sum(2)))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 rounding as the GPU does it")
@pytest.mark.parametrize("S", [2, 4, 8])
def test_partials_bf16_on_the_gpu(S):
    _check(2, 8, S, 1000, 128, torch.bfloat16, "bnhd")


@needs_kernels
def test_partials_refuse_what_they_cannot_sum():
    p = torch.zeros(1, 2, 2, 4, 8, device=DEVICE)
    with pytest.raises(ValueError, match="fp32 partials"):
        sum_partials(p.half(), torch.empty(1, 2, 4, 8, device=DEVICE))
    with pytest.raises(ValueError, match=r"output \(1, 2, 5, 8\)"):
        sum_partials(p, torch.empty(1, 2, 5, 8, device=DEVICE))
