"""The router (``kernels/attention/dispatch.py``): ``plan(problem, device)`` for a table of calls and
devices, asserted on the Plan it returns (no launch counters). Problems are built by ``api.validate``
from small zero tensors; devices are written out (an H200 is ``Device("cuda", (9, 0), ...)``), so the
GPU routes are checked on this CPU machine."""
from __future__ import annotations

from typing import NamedTuple

import pytest
import torch

from flashproof.kernels import BlockSparseMask
from flashproof.kernels.attention import dispatch
from flashproof.kernels.attention.api import validate
from flashproof.kernels.attention.dispatch import BackendUnavailable, Device, plan

H200 = Device("cuda", (9, 0), False, True, True)
A100 = Device("cuda", (8, 0), False, True, True)
H200_NO_TRITON = Device("cuda", (9, 0), False, False, False)
CPU = Device("cpu", None, False, True, True)
CPU_INTERPRETER = Device("cpu", None, True, True, True)


def _qkv(B=1, Hq=2, Hkv=2, N=256, Nk=None, D=128, dtype=torch.bfloat16, grad=True):
    Nk = N if Nk is None else Nk
    mk = lambda *s: torch.zeros(*s, dtype=dtype).requires_grad_(grad)  # noqa: E731
    return mk(B, Hq, N, D), mk(B, Hkv, Nk, D), mk(B, Hkv, Nk, D)


class Row(NamedTuple):
    id: str
    device: Device
    qkv: dict   # _qkv arguments
    call: dict  # validate() keywords
    want: tuple  # (forward, backward, fma) or the exception's words


ROWS = [
    # backend="auto"
    Row("auto_cpu_torch", CPU, {}, {}, ("torch", "torch", False)),
    Row("auto_cpu_interpreter_still_torch", CPU_INTERPRETER, {}, {}, ("torch", "torch", False)),
    Row("auto_h200_dense_d128_gluon", H200, {}, {}, ("gluon", "gluon", False)),
    Row("auto_h200_causal_gluon", H200, {}, {"causal": True}, ("gluon", "gluon", False)),
    Row("auto_h200_fp16_gluon", H200, {"dtype": torch.float16}, {}, ("gluon", "gluon", False)),
    Row("auto_h200_deterministic_triton_backward", H200, {}, {"deterministic": True}, ("gluon", "triton", False)),
    Row("auto_h200_gqa_triton_backward", H200, {"Hq": 4, "Hkv": 2}, {"causal": True}, ("gluon", "triton", False)),
    Row("auto_h200_fp32_triton", H200, {"dtype": torch.float32}, {}, ("triton", "triton", False)),
    Row("auto_h200_fp64_torch", H200, {"dtype": torch.float64}, {}, ("torch", "torch", False)),
    Row("auto_h200_d64_triton", H200, {"D": 64}, {}, ("triton", "triton", True)),
    Row("auto_h200_ragged_length_triton", H200, {"N": 200}, {}, ("triton", "triton", True)),
    Row("auto_h200_nq_ne_nk_triton", H200, {"Nk": 384}, {}, ("triton", "triton", True)),
    Row("auto_h200_window_triton", H200, {}, {"window": (16, 0)}, ("triton", "triton", True)),
    Row("auto_h200_mask_triton", H200, {}, {"mask": torch.ones(256, 256, dtype=torch.bool)}, ("triton", "triton", True)),
    Row("auto_h200_block_sparse_triton", H200, {},
        {"mask": BlockSparseMask(torch.ones(1, 1, 2, 2, dtype=torch.bool), 128, 128)}, ("triton", "triton", True)),
    Row("auto_h200_negative_scale_triton_no_fma", H200, {}, {"scale": -0.1}, ("triton", "triton", False)),
    Row("auto_h200_bugs_triton", H200, {}, {"bugs": frozenset({"no_alpha"})}, ("triton", "triton", True)),
    Row("auto_a100_triton", A100, {}, {}, ("triton", "triton", True)),
    Row("auto_cuda_without_triton_torch", H200_NO_TRITON, {}, {}, ("torch", "torch", False)),
    # backend="triton": the Triton kernels, never Gluon
    Row("triton_h200_dense_d128_stays_triton", H200, {}, {"backend": "triton"}, ("triton", "triton", True)),
    Row("triton_cpu_interpreter", CPU_INTERPRETER, {"dtype": torch.float32}, {"backend": "triton"},
        ("triton", "triton", False)),
    Row("triton_cpu_interpreter_fp16_fma", CPU_INTERPRETER, {"dtype": torch.float16}, {"backend": "triton"},
        ("triton", "triton", True)),
    Row("triton_cpu_without_interpreter_raises", CPU, {}, {"backend": "triton"}, "need CUDA tensors"),
    Row("triton_fp64_raises", H200, {"dtype": torch.float64}, {"backend": "triton"}, "not supported by the Triton"),
    Row("triton_not_installed_raises", H200_NO_TRITON, {}, {"backend": "triton"}, "triton is not installed"),
    # backend="gluon": the Gluon kernels or an error naming the rule
    Row("gluon_h200", H200, {}, {"backend": "gluon"}, ("gluon", "gluon", False)),
    Row("gluon_h200_deterministic_with_grad_raises", H200, {}, {"backend": "gluon", "deterministic": True},
        "cannot give the gradients"),
    Row("gluon_h200_deterministic_without_grad", H200, {"grad": False}, {"backend": "gluon", "deterministic": True},
        ("gluon", "none", False)),
    Row("gluon_h200_d64_raises", H200, {"D": 64}, {"backend": "gluon"}, "D = Dv = 128"),
    Row("gluon_a100_raises", A100, {}, {"backend": "gluon"}, "sm_90"),
    Row("gluon_interpreter_raises", CPU_INTERPRETER, {}, {"backend": "gluon"}, "sm_90"),
    Row("gluon_window_raises", H200, {}, {"backend": "gluon", "window": (3, 0)}, "window"),
    # backend="torch" anywhere
    Row("torch_h200", H200, {}, {"backend": "torch"}, ("torch", "torch", False)),
    Row("torch_cpu", CPU, {"dtype": torch.float64}, {"backend": "torch"}, ("torch", "torch", False)),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_plan(row):
    call = validate(*_qkv(**row.qkv), **row.call)
    if isinstance(row.want, str):
        with pytest.raises(BackendUnavailable, match=row.want):
            plan(call, row.device)
        return
    got = plan(call, row.device)
    assert (got.forward, got.backward, got.fma) == row.want, got.reasons
    assert got.reasons and all(isinstance(r, str) and r for r in got.reasons)


def test_plan_is_pure_and_carries_the_tuning():
    call = validate(*_qkv(), tuning="first")
    assert plan(call, H200) == plan(call, H200) and plan(call, H200).tuning == "first"


def test_noncontiguous_inputs_keep_gluon_out():
    q, k, v = _qkv()
    q = q.detach().transpose(2, 3).contiguous().transpose(2, 3)
    got = plan(validate(q, k, v), H200)
    assert got.forward == "triton" and "layout" in got.reasons[0]


@pytest.mark.parametrize("kw,causal", [({}, False), ({"causal": True}, True), ({"window": (None, 0)}, True),
                                       ({"causal": True, "window": (5, None)}, False),
                                       ({"causal": True, "mask": torch.ones(256, 256, dtype=torch.bool)}, False)],
                         ids=["dense", "causal", "window_none_0", "causal_with_left_window", "causal_with_mask"])
def test_the_causal_flag_gluon_reads(kw, causal):
    """The Gluon kernels take CAUSAL from the validated call, not from the window tuple."""
    assert validate(*_qkv(), **kw).causal is causal


def test_the_rules_constants_match_the_gluon_kernels():
    pytest.importorskip("triton")
    from flashproof.kernels.attention.gluon import bwd, fwd
    assert dispatch.GLUON_HEAD_DIM == fwd.HEAD_DIM == bwd.HEAD_DIM
    assert dispatch.GLUON_BLOCK == fwd.BLOCK_M == fwd.BLOCK_N == bwd.BLOCK_N


def test_this_machine_routes_to_torch_or_triton():
    """On a machine without an sm_90 GPU no route reaches Gluon."""
    q, k, v = _qkv()
    got = plan(validate(q, k, v), dispatch.device_of(q))
    assert got.forward != "gluon" or torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("d", [16, 64, 128, 256])
def test_first_configuration_fits_shared_memory(dtype, d):
    """tuning="first" cannot lean on the autotuner skipping a configuration that runs out of shared
    memory: its choice must fit (fp32 at d = 128 asked for 257 KiB on the H200 with the bf16-sized
    first configuration), and bf16 keeps the fast first one. The candidates are written out here
    (under the interpreter the kernels' own list is one tiny tile)."""
    triton = pytest.importorskip("triton")
    from flashproof.kernels.attention.triton import host
    shapes = [(128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (32, 128, 4, 3), (64, 32, 4, 2), (32, 32, 4, 2)]
    configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in shapes]
    for extra in ({}, {"DK": 1}):  # streamed K/V (forward, dQ) or streamed Q/dO (dK/dV)
        args = dict(Q=torch.empty(1, dtype=dtype), BLOCK_D=d, BLOCK_DV=d, TILE_Q=0, TILE_K=0, **extra)
        (c,) = host._prune_first(configs, args)
        assert host._smem_estimate(c, args) <= host.SMEM_BUDGET, (extra, c)
        if dtype != torch.float32 and d <= 64:
            assert c is configs[0]
    fp32 = dict(Q=torch.empty(1, dtype=torch.float32), BLOCK_D=128, BLOCK_DV=128, TILE_Q=0, TILE_K=0)
    assert host._prune_first(configs, fp32)[0] is not configs[0]  # 4 · 256 · (128 + 3 · 64) bytes do not fit
    assert len(host._prune(configs, fp32)) == len(configs)  # autotuning keeps every candidate
