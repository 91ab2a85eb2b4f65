"""``gluon/layout.py``'s ``head_rc``: the one (row, col) formula of the Gluon kernels' row views. Its body
(``_head_rc``, plain Python) is checked against every element's offset; the jitted function is built
lazily, so importing the module (as ``api.py`` does) never imports triton."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from flashproof.kernels.attention.gluon import layout


def _bnhd(t):
    return t.transpose(1, 2).contiguous().transpose(1, 2)


@pytest.mark.parametrize("make", [lambda: torch.zeros(2, 3, 4, 8), lambda: _bnhd(torch.zeros(2, 3, 4, 8)),
                                  lambda: torch.zeros(2, 4, 3, 3, 8).transpose(1, 3)[:, :, 1]],
                         ids=["bhnd", "bnhd", "packed_qkv_slice"])
def test_head_rc_addresses_every_element(make):
    t = make()
    view = layout.row_view(t.shape, t.stride(), 16)  # itemsize 16: every row stride is 16-byte aligned
    c = layout.coords(view.kind, t.shape[1], t.shape[2], t.shape[3])
    for b, h, n, d in torch.cartesian_prod(*(torch.arange(x) for x in t.shape)).tolist():
        row, col = layout._head_rc(b, h, n, *c)
        offset = b * t.stride(0) + h * t.stride(1) + n * t.stride(2) + d * t.stride(3)
        assert row < view.rows and col + d < view.cols and row * view.row_stride + col + d == offset, (b, h, n, d)


def test_importing_layout_does_not_import_triton():
    code = ("import sys\nfrom flashproof.kernels.attention.gluon import layout\n"
            "assert 'triton' not in sys.modules, 'layout imported triton'\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-500:]


def test_head_rc_is_the_jitted_formula():
    pytest.importorskip("triton.experimental.gluon")
    from triton.runtime.jit import JITFunction
    fn = layout.head_rc
    assert isinstance(fn, JITFunction) and fn.fn is layout._head_rc and layout.head_rc is fn
    with pytest.raises(AttributeError, match="no attribute 'head_cr'"):
        layout.head_cr


def test_shared_layouts_are_built_once_and_equal_fresh_ones():
    """``common.shared_layout`` (the descriptors' layouts, kept per box and element type) gives the layout
    Gluon builds afresh, the same object on every call, and a different one for another box or type."""
    from flashproof.kernels.attention.gluon import bwd, common
    if not common.AVAILABLE:
        pytest.skip("this Triton has no Gluon")
    gl = common.gl
    for shape, dt in (((64, 128), gl.bfloat16), ((128, 64), gl.float16), ((64,), gl.float32)):
        lay = common.shared_layout(shape, dt)
        assert lay == gl.NVMMASharedLayout.get_default_for(list(shape), dt)
        assert common.shared_layout(list(shape), dt) is lay
    assert common.shared_layout((64, 128), gl.bfloat16) != common.shared_layout((64, 128), gl.float32)
    q_lay, kv_lay = common.desc_layouts(gl.bfloat16, 128, 64, 128)
    assert q_lay is common.shared_layout((64, 128), gl.bfloat16) and kv_lay is common.shared_layout((128, 128), gl.bfloat16)
    assert bwd.dq_layout(64) == gl.NVMMASharedLayout.get_default_for([bwd.BLOCK_M, 64], gl.float32)
