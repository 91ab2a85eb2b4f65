"""The two 2-D row views through which the Gluon kernels' TMA descriptors read (and write) a
(B, H, N, D) tensor in place, without a copy (pure torch: ``api.validate`` reads it to fill
``AttentionProblem.layouts`` without importing triton).

* ``"bhnd"``: the rows of a (B·H·N, D) matrix, row stride R = stride(N) — a contiguous (B, H, N, D)
  tensor (R = D) or one with padded rows. The row of (b, h, n) is (b·H + h)·N + n, column 0.
* ``"bnhd"``: the rows of a (B·N, H·D) matrix, row stride R = stride(N) — a transposed view of a
  (B, N, H, D) tensor, as a fused QKV projection gives (R = H·D, or 3·H·D for a slice of one packed
  (B, N, 3, H, D) buffer). The row of (b, h, n) is b·N + n, its first column h·D.

Either way a descriptor needs the last dim contiguous, R·itemsize a multiple of 16 bytes, the base
16-byte aligned (``tma_kind`` checks it; ``row_view`` sees strides only, so it also runs on fake
tensors), and rows that do not overlap (R ≥ the view's width). A dim of size 1 puts no condition on
its stride. Under both views the row and column of (b, h, n) are

    row = b·per_batch + h·per_head + n,   col = h·col_per_head,

which is all a kernel needs (``coords``); the row stride lives in the descriptor. ``head_rc`` is that
formula as a Gluon function, the one the kernels call (fwd.py, bwd.py); it is made a ``gluon.jit``
function on first use (module ``__getattr__``), so importing this module never imports triton.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

KINDS = ("bhnd", "bnhd")


class RowView(NamedTuple):
    """A (rows, cols) matrix with row stride ``row_stride`` (elements) over a (B, H, N, D) tensor."""

    kind: str
    rows: int
    cols: int
    row_stride: int


class Coords(NamedTuple):
    """(per_batch, per_head, col_per_head): row = b·per_batch + h·per_head + n, col = h·col_per_head."""

    per_batch: int
    per_head: int
    col_per_head: int


def row_view(shape, strides, itemsize: int) -> RowView | None:
    """The view a TMA descriptor reads a tensor of ``shape`` (B, H, N, D) and ``strides`` through
    ("bhnd" first when both fit, e.g. H = 1), or None when neither does."""
    B, H, N, D = (int(s) for s in shape)
    sb, sh, sn, sd = (int(s) for s in strides)
    if min(B, H, N, D) < 1 or N < 2 or (sd != 1 and D > 1) or sn <= 0 or (sn * itemsize) % 16:
        return None
    if (H == 1 or sh == N * sn) and (B == 1 or sb == H * N * sn) and sn >= D:
        return RowView("bhnd", B * H * N, D, sn)
    if (H == 1 or sh == D) and (B == 1 or sb == N * sn) and sn >= H * D:
        return RowView("bnhd", B * N, H * D, sn)
    return None


def coords(kind: str, H: int, N: int, D: int) -> Coords:
    """Where (b, h, n) of a (B, H, N, D) tensor of this kind sits in its row view."""
    if kind not in KINDS:
        raise ValueError(f"layout kind must be one of {KINDS}, got {kind!r}")
    return Coords(H * N, N, 0) if kind == "bhnd" else Coords(N, 0, D)


def tma_kind(t: torch.Tensor) -> str | None:
    """The kind of ``t``'s row view, or None (no view fits, or the base is not 16-byte aligned)."""
    view = row_view(t.shape, t.stride(), t.element_size())
    return view.kind if view is not None and t.data_ptr() % 16 == 0 else None


def _head_rc(b, h, n, per_batch, per_head, col_per_head):
    """(row, col) of (b, h, n) in a row view with these ``Coords`` (the body of ``head_rc``)."""
    return b * per_batch + h * per_head + n, h * col_per_head


def __getattr__(name):
    """``head_rc``: ``_head_rc`` as a ``gluon.jit`` function, built once on first use (it needs triton)."""
    if name != "head_rc":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .common import jit

    globals()["head_rc"] = fn = jit(_head_rc)
    return fn
