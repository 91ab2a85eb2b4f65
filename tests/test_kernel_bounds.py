"""Out-of-bounds review of the Triton kernels under the interpreter: every input is a view into a
buffer whose surrounding entries (other batches/heads/rows, head-dim padding) hold NaN, and every
tensor the host code allocates (out, lse, δ, dq, dk, dv) sits between guard regions filled with a
sentinel. A read past a mask pulls NaN into the results; a write past one changes a sentinel.
Shapes: varlen with zero-length sequences on both sides, Nq ≠ Nk both ways, head dims that are not
powers of two (and < 16), GQA, non-contiguous strides, dense and block-sparse masks, Nk = 1."""
from __future__ import annotations

import os
import types

import pytest
import torch

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels import BlockSparseMask, attention  # noqa: E402
from flashproof.kernels.attention.triton import host as attention_triton  # noqa: E402

G = 64  # guard entries on each side
SENTINEL = {torch.float32: -7.25, torch.float16: -7.25, torch.bfloat16: -7.25, torch.int32: -7777}


class _Guarded:
    """Stands in for ``torch`` inside attention_triton: empty / empty_like return tensors with the
    strides the real call gives, placed between two guard regions of SENTINEL."""

    def __init__(self):
        self.buffers = []

    def __getattr__(self, name):
        return getattr(torch, name)

    def _place(self, shape, stride, dtype, device):
        extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
        buf = torch.full((extent + 2 * G,), SENTINEL[dtype], dtype=dtype, device=device)
        self.buffers.append((buf, extent))
        return buf.as_strided(shape, stride, G)

    def empty(self, *shape, dtype=None, device=None):
        t = torch.empty(*shape, dtype=dtype, device=device)
        return self._place(t.shape, t.stride(), t.dtype, t.device)

    def empty_like(self, x, **kw):
        t = torch.empty_like(x, **kw)
        return self._place(t.shape, t.stride(), t.dtype, t.device)

    def guards_intact(self):
        return all((b[:G] == SENTINEL[b.dtype]).all() and (b[G + n:] == SENTINEL[b.dtype]).all()
                   for b, n in self.buffers)


def _inside_nan(x: torch.Tensor, layout: str) -> torch.Tensor:
    """x (B, H, N, D) as a view of a NaN buffer with a margin in every dim; layout "bhnd" or "bnhd"."""
    B, H, N, D = x.shape
    if layout == "bhnd":
        buf = torch.full((B + 2, H + 2, N + 6, D + 5), float("nan"), dtype=x.dtype)
        view = buf[1:B + 1, 1:H + 1, 3:N + 3, 2:D + 2]
    else:
        buf = torch.full((B + 2, N + 6, H + 2, D + 5), float("nan"), dtype=x.dtype)
        view = buf[1:B + 1, 3:N + 3, 1:H + 1, 2:D + 2].transpose(1, 2)
    view.copy_(x)
    return view


CASES = {  # id: (B, Hq, Hkv, Nq, Nk, D, Dv, kwargs, layout)
    "varlen_zero_lengths_gqa": (1, 6, 2, 9, 12, 5, 3,
                                dict(causal=True, lens=([0, 4, 0, 5, 0], [3, 0, 0, 9, 0])), "bnhd"),
    "nq_gt_nk_window_mask_d17": (2, 2, 1, 37, 5, 17, 1, dict(window=(2, 1), mask="random"), "bhnd"),
    "nq_lt_nk_causal_d33": (1, 3, 3, 3, 70, 33, 20, dict(causal=True), "bnhd"),
    "block_sparse_ragged": (1, 2, 1, 40, 50, 8, 24, dict(tiles=(16, 16)), "bhnd"),
    "single_key_single_row": (2, 4, 2, 1, 1, 3, 2, dict(), "bnhd"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("cid", sorted(CASES))
def test_no_read_or_write_outside_the_tensors(monkeypatch, cid, dtype):
    B, Hq, Hkv, Nq, Nk, D, Dv, kw, layout = CASES[cid]
    kw = dict(kw)
    g = torch.Generator().manual_seed(len(cid))
    if "lens" in kw:
        lq, lk = kw.pop("lens")
        kw["cu_seqlens_q"] = torch.tensor([0, *lq], dtype=torch.int32).cumsum(0).to(torch.int32)
        kw["cu_seqlens_k"] = torch.tensor([0, *lk], dtype=torch.int32).cumsum(0).to(torch.int32)
    if kw.get("mask") == "random":
        kw["mask"] = torch.rand(B, 1, Nq, Nk, generator=g) < 0.6
    if "tiles" in kw:
        bq, bk = kw.pop("tiles")
        kw["mask"] = BlockSparseMask(torch.rand(1, Hq, -(-Nq // bq), -(-Nk // bk), generator=g) < 0.6, bq, bk)
    rnd = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    clean = [rnd(B, Hq, Nq, D), rnd(B, Hkv, Nk, D), rnd(B, Hkv, Nk, Dv)]
    dout = rnd(B, Hq, Nq, Dv)
    results = {}
    guarded = _Guarded()
    for name in ("torch", "triton"):
        if name == "triton":
            monkeypatch.setattr(attention_triton, "torch", guarded)
        leaves = [(_inside_nan(x, layout) if name == "triton" else x.clone()).requires_grad_() for x in clean]
        r = attention(*leaves, return_lse=True, backend=name, **kw)
        grads = torch.autograd.grad(r.out, leaves, _inside_nan(dout, layout) if name == "triton" else dout)
        results[name] = (r.out, r.lse, *grads)
    assert guarded.buffers and guarded.guards_intact(), "a kernel wrote outside a tensor it was given"
    tol = 2e-3 if dtype == torch.float32 else 2e-2
    for tname, a, b in zip(("out", "lse", "dq", "dk", "dv"), results["triton"], results["torch"]):
        assert not a.isnan().any(), f"{tname}: NaN from outside the tensors"
        fin = b.isfinite()
        assert torch.equal(a.isfinite(), fin), tname
        assert (a[fin].double() - b[fin].double()).abs().max().item() <= tol * (1 + b[fin].abs().max().item()), tname
