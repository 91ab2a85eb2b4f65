"""What the Gluon kernels share: the import guard (``AVAILABLE``), ``jit`` (a no-op decorator when Gluon
is missing, so the modules still import on an older Triton), and the torch -> Gluon element types.

Gluon is Triton's lower-level dialect (explicit layouts, asynchronous MMA, mbarriers and warp
specialisation). It has no interpreter: on CPU the kernels are only compiled for sm_90
(tests/kernels/test_kernel_compile.py); the dispatcher (``dispatch.py``) routes a call here only on an sm_90 GPU.
"""
from __future__ import annotations

import torch

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,  # noqa: F401
                                                                  warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: F401
    AVAILABLE = True
except ImportError:  # an older Triton: the dispatcher never routes to Gluon
    AVAILABLE = False

jit = gluon.jit if AVAILABLE else (lambda fn: fn)


def gl_dtype(dtype):
    """Gluon's element type of a torch fp16/bf16 dtype."""
    return {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[dtype]
