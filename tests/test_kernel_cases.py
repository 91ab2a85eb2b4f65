"""Feature cases shared by the torch-backend and Triton-backend kernel tests, and the one checker
both use: out, lse and (dq, dk, dv) against the float64 dense formula."""
from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch

from flashproof.kernels import BlockSparseMask, attention
from test_kernel_reference import allowed_matrix, dense_reference, grads, rand_qkv


class Case(NamedTuple):
    id: str
    shape: tuple  # (B, Hq, Hkv, Nq, Nk, D, Dv)
    kw: dict


def _mask(B, H, Nq, Nk, p, seed):
    return torch.rand(B, H, Nq, Nk, generator=torch.Generator().manual_seed(seed)) < p


def _cu(lens):
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)


def _late_keys(Nq, Nk, first):
    """bool (1, 1, Nq, Nk): only keys >= first allowed (several fully masked tiles first)."""
    m = torch.zeros(1, 1, Nq, Nk, dtype=torch.bool)
    m[..., first:] = True
    return m


def _tiles(B, H, Nq, Nk, bq, bk, seed):
    t = torch.rand(B, H, -(-Nq // bq), -(-Nk // bk), generator=torch.Generator().manual_seed(seed)) < 0.4
    return BlockSparseMask(t, bq, bk)


def _all_but_one(Nq, Nk, bq, bk):
    t = torch.ones(1, 1, -(-Nq // bq), -(-Nk // bk), dtype=torch.bool)
    t[..., 1, 0] = False
    return BlockSparseMask(t, bq, bk)


CASES = [
    Case("plain", (2, 2, 2, 37, 37, 16, 16), {}),
    Case("causal_square", (1, 2, 2, 70, 70, 32, 32), {"causal": True}),
    Case("causal_nq_lt_nk", (1, 2, 1, 20, 75, 16, 24), {"causal": True}),
    Case("causal_nq_gt_nk", (1, 2, 2, 75, 20, 16, 16), {"causal": True}),
    Case("window_both", (1, 2, 2, 66, 66, 16, 16), {"window": (9, 5)}),
    Case("window_left_causal", (1, 1, 1, 80, 80, 24, 8), {"window": (17, None), "causal": True}),
    # 16-key tiles (the interpreter's and the smallest GPU config): the diagonal offsets put a window
    # edge one key past a tile boundary, so a tile classified "unmasked" one key too early is visible
    Case("causal_diag_14_tile_edge", (1, 2, 1, 30, 44, 16, 16), {"causal": True}),
    Case("window_left_diag_2_tile_edge", (1, 2, 2, 40, 60, 16, 16), {"window": (18, None)}),
    Case("gqa_4_odd_dims", (1, 8, 2, 33, 41, 40, 24), {}),
    Case("mqa_head_dim_1", (2, 3, 1, 9, 12, 1, 3), {"causal": True}),
    Case("head_dim_256", (1, 1, 1, 17, 17, 256, 256), {}),
    Case("dense_mask", (2, 2, 1, 30, 45, 16, 16), {"mask": _mask(2, 1, 30, 45, 0.3, 1)}),
    Case("mask_late_keys", (1, 2, 2, 12, 150, 16, 16), {"mask": _late_keys(12, 150, 131)}),
    Case("mask_empty_rows", (1, 2, 2, 20, 20, 16, 16), {"mask": _mask(1, 2, 20, 20, 0.1, 2)}),
    Case("block_sparse", (1, 2, 2, 40, 70, 16, 16), {"mask": _tiles(1, 2, 40, 70, 16, 32, 3)}),
    Case("block_sparse_dense", (1, 2, 1, 40, 70, 16, 16),
         {"mask": BlockSparseMask(_tiles(1, 1, 40, 70, 16, 16, 4).tiles, 16, 16, _mask(1, 2, 40, 70, 0.5, 5))}),
    # block-sparse with a window: tiles the window cuts must take the predicated path (the forward
    # walks the host's "full" tiles without one), here with 16-key kernel blocks inside 32-key tiles
    # (every tile present but one, so the tiles at the window's edges are all there; Nk − Nq and the
    # window are chosen so that a tile one key past a window edge exists: an off-by-one in the host's
    # full-tile test, planted on either side, fails one of these two cases)
    Case("block_sparse_causal", (1, 2, 1, 40, 70, 16, 16), {"mask": _all_but_one(40, 70, 16, 32), "causal": True}),
    Case("block_sparse_window", (1, 2, 2, 70, 40, 16, 16), {"mask": _all_but_one(70, 40, 16, 16), "window": (32, 3)}),
    Case("varlen", (1, 2, 1, 0, 0, 16, 16), {"lens": ([5, 0, 1, 40, 17], [7, 3, 0, 40, 70]), "causal": True}),
    Case("varlen_window_mask", (1, 2, 2, 0, 0, 16, 16),
         {"lens": ([33, 2, 20], [33, 50, 1]), "window": (6, 3), "mask_p": 0.7}),
    Case("seq_len_1", (1, 1, 1, 1, 1, 16, 16), {"causal": True}),
    Case("scale_large", (1, 1, 1, 20, 20, 16, 16), {"scale": 30.0}),
]


def build(case, dtype, device):
    """(q, k, v, kwargs, allowed) for a case; kwargs are ready for ``attention``."""
    B, Hq, Hkv, Nq, Nk, D, Dv = case.shape
    kw = dict(case.kw)
    if "lens" in kw:
        lq, lk = kw.pop("lens")
        kw["cu_seqlens_q"], kw["cu_seqlens_k"] = _cu(lq).to(device), _cu(lk).to(device)
        Nq, Nk = sum(lq), sum(lk)
        if "mask_p" in kw:
            kw["mask"] = _mask(1, 1, Nq, Nk, kw.pop("mask_p"), 6)
    q, k, v = rand_qkv(B, Hq, Hkv, Nq, Nk, D, Dv, dtype=dtype, device=device, seed=sum(case.id.encode()))
    mask = kw.get("mask")
    allowed = allowed_matrix(B, Hq, Nq, Nk, causal=kw.get("causal", False), window=kw.get("window"),
                             mask=None if isinstance(mask, BlockSparseMask) else mask,
                             tiles=mask if isinstance(mask, BlockSparseMask) else None,
                             cu_seqlens_q=kw.get("cu_seqlens_q"), cu_seqlens_k=kw.get("cu_seqlens_k"))
    if mask is not None:
        kw["mask"] = mask._replace(tiles=mask.tiles.to(device), dense=None if mask.dense is None else mask.dense.to(device)) \
            if isinstance(mask, BlockSparseMask) else mask.to(device)
    return q, k, v, kw, allowed


def check_case(case, dtype, backend, device="cpu", tol=None):
    """Run one case forward and backward; compare with the float64 formula (errors relative to
    the reference's scale); check the empty-row convention and that nothing is NaN."""
    q, k, v, kw, allowed = build(case, dtype, device)
    res = attention(q, k, v, return_lse=True, backend=backend, **kw)
    ref = dense_reference(q, k, v, allowed, kw.get("scale"))
    got_g = grads(res.out, res.lse, q, k, v)
    want_g = grads(ref[0], ref[1], q, k, v)
    tol = tol or {torch.float64: 1e-10, torch.float32: 2e-4, torch.float16: 3e-2, torch.bfloat16: 6e-2}[dtype]
    empty = ~allowed.any(-1).to(device)
    assert torch.equal(res.lse.isneginf(), empty), "lse is −inf exactly on rows with no allowed key"
    assert (res.out[empty] == 0).all(), "empty rows give out 0"
    for name, got, want in [("out", res.out, ref[0]), ("lse", torch.where(empty, 0, res.lse), torch.where(empty, 0, ref[1])),
                            *zip(("dq", "dk", "dv"), got_g, want_g)]:
        assert not got.isnan().any(), f"{case.id}: NaN in {name}"
        err = (got.double() - want).abs().max().item() if got.numel() else 0.0
        scale = max(want.abs().max().item() if want.numel() else 0.0, 1.0)
        assert err <= tol * scale, f"{case.id}: {name} max error {err:.3g} > {tol:g} x {scale:.3g}"
    return res


def poison_case(dtype, backend, device="cpu"):
    """NaN / inf / 1e30 planted where only masked pairs read must not leak (q rows of empty query
    rows, k/v rows of keys no query may read, past the window)."""
    B, H, Nq, Nk, D = 1, 2, 24, 100, 16
    q, k, v = rand_qkv(B, H, H, Nq, Nk, D, D, dtype=dtype, device=device, grad=False)
    mask = torch.ones(1, 1, Nq, Nk, dtype=torch.bool)
    mask[..., 3, :] = False  # empty row 3
    mask[..., :, 40:47] = False  # keys 40..46 unread by anyone
    allowed = allowed_matrix(B, H, Nq, Nk, window=(50, 0), mask=mask)
    q[:, :, 3] = math.nan
    k[:, :, 40:47] = math.inf
    v[:, :, 40:47] = math.nan
    v[:, :, 0:20] = 1e30  # keys 0..19 lie outside every row's window (rows see >= 76 − 50 = 26)
    k[:, :, 0:20] = math.nan
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    res = attention(q, k, v, window=(50, 0), mask=mask.to(device), return_lse=True, backend=backend)
    gq, gk, gv = grads(res.out, res.lse, q, k, v)
    for name, t in [("out", res.out), ("lse", res.lse), ("dq", gq), ("dk", gk), ("dv", gv)]:
        assert not (t.isnan().any() or (t.isinf() & (t > 0)).any()), f"poison leaked into {name}"
    assert res.lse.isneginf().sum() == B * H and (res.out[:, :, 3] == 0).all()
    clean = [t.detach().clone() for t in (q, k, v)]
    for t in clean:
        t.nan_to_num_(0.0, 0.0, 0.0)
        t[t.abs() > 1e20] = 0
    ref, _ = dense_reference(*clean, allowed)
    assert (res.out.double() - ref).abs().max() < {torch.float32: 1e-4}.get(dtype, 3e-2)


def ids(cases):
    return [c.id for c in cases]


__all__ = ["CASES", "Case", "build", "check_case", "poison_case", "ids", "pytest"]
