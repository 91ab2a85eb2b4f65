"""What the Gluon kernels share: the import guard (``AVAILABLE``), ``jit`` (a no-op decorator when Gluon
is missing, so the modules still import on an older Triton), the torch -> Gluon element types, and
the TMA descriptor over a tensor's row view (``layout.py``).

Gluon is Triton's lower-level dialect (explicit layouts, asynchronous MMA, mbarriers and warp
specialisation). It has no interpreter: on CPU the kernels are only compiled for sm_90
(tests/kernels/test_kernel_compile.py); the dispatcher (``dispatch.py``) routes a call here only on an sm_90 GPU.
"""
from __future__ import annotations

import torch

from .layout import coords, row_view

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,  # noqa: F401
                                                                  warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: F401
    from triton.experimental.gluon.language._core import builtin as _builtin
    from triton._C.libtriton import ir as _ir
    AVAILABLE = True
except ImportError:  # an older Triton: the dispatcher never routes to Gluon
    AVAILABLE = False

jit = gluon.jit if AVAILABLE else (lambda fn: fn)


def _tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    """``tensor_desc``'s box at ``coord`` += the shared-memory tile ``src`` (fp32 add in global memory),
    asynchronously: a TMA bulk tensor reduce-add (``cp.reduce.async.bulk.tensor.Nd.global.shared::cta
    .add``), committed as one bulk group per issuing thread, so ``tma.store_wait`` waits for it like a
    TMA store. Gluon 3.6's Python ``tma`` module has loads and stores only; the op itself
    (``ttng.async_tma_reduce``) and its lowering are Triton's, reached through the Gluon builder (the
    same call ``tma.async_copy_shared_to_global`` makes for a store). Like a store, ``src`` must be
    written before a ``fence_async_shared``."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(_ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


tma_reduce_add = _builtin(_tma_reduce_add) if AVAILABLE else _tma_reduce_add


def gl_dtype(dtype):
    """Gluon's element type of a torch fp16/bf16 dtype."""
    return {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[dtype]


#: (box shape, element type) -> its shared-memory layout: built once (``shared_layout``)
_LAYOUTS: dict = {}


def shared_layout(shape, gdt):
    """The default NVMMA shared-memory layout of a TMA box ``shape`` of element type ``gdt``, built on first
    use and kept (layouts are immutable). Built per call (commit 52f03a8) they made a fwd + bwd step's host
    time 0.3–11 % longer (medians of 6 interleaved rounds; H200 host, BENCHMARKS.md, 2026-12-03 09:15 UTC)."""
    key = (tuple(shape), gdt)
    lay = _LAYOUTS.get(key)
    if lay is None:
        lay = _LAYOUTS[key] = gl.NVMMASharedLayout.get_default_for(list(shape), gdt)
    return lay


def desc_layouts(gdt, D, q_rows: int, kv_rows: int):
    """The shared-memory layouts (Q-side tile, K/V tile) of (q_rows, D) and (kv_rows, D) boxes of element
    type ``gdt``: the forward's Q/O and K/V tiles, the backward's Q/dO and K/V tiles (and
    tests/support/kernel_compile.py's signatures of both)."""
    return shared_layout((q_rows, D), gdt), shared_layout((kv_rows, D), gdt)


def row_descriptor(t, block_rows: int, smem_layout):
    """(TMA descriptor, Coords) of a (B, H, N, D) tensor ``t`` read in place through its row view
    (``layout.row_view``), in boxes of (block_rows, D); raises naming the strides when none fits (the
    router's ``gluon_rule`` keeps such calls away)."""
    view = row_view(t.shape, t.stride(), t.element_size())
    if view is None or t.data_ptr() % 16:
        raise ValueError(f"the Gluon kernels read (B, H, N, D) tensors through a (B*H*N, D) or (B*N, H*D) row view "
                         f"(last dim contiguous, 16-byte aligned rows and base); got shape {tuple(t.shape)}, strides "
                         f"{t.stride()}, base address % 16 = {t.data_ptr() % 16}")
    B, H, N, D = t.shape
    desc = TensorDescriptor(t, [view.rows, view.cols], [view.row_stride, 1], [block_rows, D], smem_layout)
    return desc, coords(view.kind, H, N, D)

