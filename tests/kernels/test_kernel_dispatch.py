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


def _tiles(block=128, N=256, dense=None):
    """A block-sparse mask over N × N of block × block tiles, every other tile present."""
    t = N // block
    tiles = (torch.arange(t)[:, None] + torch.arange(t)[None, :]) % 2 == 0
    return BlockSparseMask(tiles[None, None], block, block, dense)


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
    Row("auto_h200_deterministic_gluon", H200, {}, {"deterministic": True}, ("gluon", "gluon", False)),
    Row("auto_h200_gqa2_causal_gluon", H200, {"Hq": 4, "Hkv": 2}, {"causal": True}, ("gluon", "gluon", False)),
    Row("auto_h200_gqa4_gluon", H200, {"Hq": 8, "Hkv": 2}, {}, ("gluon", "gluon", False)),
    Row("auto_h200_gqa8_causal_gluon", H200, {"Hq": 8, "Hkv": 1}, {"causal": True}, ("gluon", "gluon", False)),
    Row("auto_h200_gqa8_deterministic_gluon", H200, {"Hq": 8, "Hkv": 1}, {"deterministic": True},
        ("gluon", "gluon", False)),
    Row("auto_h200_fp32_triton", H200, {"dtype": torch.float32}, {}, ("triton", "triton", False)),
    Row("auto_h200_fp64_torch", H200, {"dtype": torch.float64}, {}, ("torch", "torch", False)),
    Row("auto_h200_d64_gluon", H200, {"D": 64}, {}, ("gluon", "gluon", False)),
    Row("auto_h200_d64_causal_gqa_gluon", H200, {"D": 64, "Hq": 8, "Hkv": 1}, {"causal": True},
        ("gluon", "gluon", False)),
    Row("auto_h200_d64_deterministic_gluon", H200, {"D": 64}, {"deterministic": True}, ("gluon", "gluon", False)),
    Row("auto_h200_d64_fp32_triton", H200, {"D": 64, "dtype": torch.float32}, {}, ("triton", "triton", False)),
    Row("auto_h200_d64_ragged_triton", H200, {"D": 64, "N": 200}, {}, ("triton", "triton", True)),
    Row("auto_h200_d96_triton", H200, {"D": 96}, {}, ("triton", "triton", True)),
    Row("auto_a100_d64_triton", A100, {"D": 64}, {}, ("triton", "triton", True)),
    Row("auto_h200_ragged_length_triton", H200, {"N": 200}, {}, ("triton", "triton", True)),
    Row("auto_h200_nq_ne_nk_triton", H200, {"Nk": 384}, {}, ("triton", "triton", True)),
    Row("auto_h200_window_triton", H200, {}, {"window": (16, 0)}, ("triton", "triton", True)),
    Row("auto_h200_mask_triton", H200, {}, {"mask": torch.ones(256, 256, dtype=torch.bool)}, ("triton", "triton", True)),
    Row("auto_h200_block_sparse_gluon", H200, {}, {"mask": _tiles()}, ("gluon", "gluon", False)),
    Row("auto_h200_block_sparse_causal_gqa_d64_gluon", H200, {"D": 64, "Hq": 4, "Hkv": 2},
        {"mask": _tiles(), "causal": True}, ("gluon", "gluon", False)),
    Row("auto_h200_block_sparse_64_tiles_triton", H200, {}, {"mask": _tiles(64)}, ("triton", "triton", True)),
    Row("auto_h200_block_sparse_dense_mask_triton", H200, {},
        {"mask": _tiles(dense=torch.ones(256, 256, dtype=torch.bool))}, ("triton", "triton", True)),
    Row("auto_h200_block_sparse_deterministic_triton", H200, {}, {"mask": _tiles(), "deterministic": True},
        ("triton", "triton", True)),
    Row("auto_h200_block_sparse_window_triton", H200, {}, {"mask": _tiles(), "window": (100, 0)},
        ("triton", "triton", True)),
    Row("auto_h200_block_sparse_ragged_triton", H200, {"N": 200}, {"mask": _tiles()}, ("triton", "triton", True)),
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
    Row("gluon_h200_gqa", H200, {"Hq": 8, "Hkv": 2}, {"backend": "gluon", "causal": True}, ("gluon", "gluon", False)),
    Row("gluon_h200_deterministic", H200, {}, {"backend": "gluon", "deterministic": True}, ("gluon", "gluon", False)),
    Row("gluon_h200_deterministic_without_grad", H200, {"grad": False}, {"backend": "gluon", "deterministic": True},
        ("gluon", "gluon", False)),
    Row("gluon_h200_d64", H200, {"D": 64}, {"backend": "gluon"}, ("gluon", "gluon", False)),
    Row("gluon_h200_d96_raises", H200, {"D": 96}, {"backend": "gluon"}, "the Gluon kernels take D = Dv = 64 or 128"),
    Row("triton_h200_d64_stays_triton", H200, {"D": 64}, {"backend": "triton"}, ("triton", "triton", True)),
    Row("gluon_a100_raises", A100, {}, {"backend": "gluon"}, "sm_90"),
    Row("gluon_interpreter_raises", CPU_INTERPRETER, {}, {"backend": "gluon"}, "sm_90"),
    Row("gluon_window_raises", H200, {}, {"backend": "gluon", "window": (3, 0)}, "window"),
    Row("gluon_block_sparse", H200, {}, {"backend": "gluon", "mask": _tiles(), "causal": True},
        ("gluon", "gluon", False)),
    Row("gluon_block_sparse_64_tiles_raises", H200, {}, {"backend": "gluon", "mask": _tiles(64)}, "128 x 128 tiles"),
    Row("gluon_block_sparse_dense_mask_raises", H200, {},
        {"backend": "gluon", "mask": _tiles(dense=torch.ones(256, 256, dtype=torch.bool))}, "mask / bias / varlen"),
    Row("gluon_block_sparse_deterministic_raises", H200, {}, {"backend": "gluon", "mask": _tiles(),
                                                              "deterministic": True}, "deterministic=True"),
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


def _bnhd(t):
    """(B, H, N, D) -> the same values as a transposed view of a (B, N, H, D) tensor."""
    return t.detach().transpose(1, 2).contiguous().transpose(1, 2)


def _packed(B=2, H=2, N=256, D=128):
    """q, k, v as slices of one packed (B, N, 3, H, D) projection, each a (B, H, N, D) view (row stride 3·H·D)."""
    qkv = torch.zeros(B, N, 3, H, D, dtype=torch.bfloat16)
    return tuple(qkv[:, :, i].transpose(1, 2) for i in range(3))


def _padded_rows(t, pad=8):
    """(B, H, N, D) contiguous except for rows padded to D + pad (row stride D + pad, still 16-byte aligned)."""
    B, H, N, D = t.shape
    return torch.zeros(B, H, N, D + pad, dtype=t.dtype)[..., :D]


class Layout(NamedTuple):
    id: str
    qkv: tuple   # q, k, v
    want: tuple  # the layouts api.validate records; None: not a TMA row view


def _layout_rows():
    q, k, v = _qkv(B=2, Hq=4, Hkv=2)
    q, k, v = q.detach(), k.detach(), v.detach()
    odd = torch.zeros(2 * 4 * 256 * 128 + 4, dtype=torch.bfloat16)[4:].view(2, 4, 256, 128)  # base 8 bytes off
    odd_row = torch.zeros(2, 4, 256, 136, dtype=torch.bfloat16)[..., 4:132]  # base 8 bytes into a padded row
    b_major = torch.zeros(4, 2, 256, 128, dtype=torch.bfloat16).transpose(0, 1)  # (H, B, N, D) transposed: no view
    d_major = torch.zeros(2, 4, 128, 256, dtype=torch.bfloat16).transpose(2, 3)  # last dim not contiguous
    return [
        Layout("contiguous", (q, k, v), ("bhnd",) * 3),
        Layout("bnhd_views", (_bnhd(q), _bnhd(k), _bnhd(v)), ("bnhd",) * 3),
        Layout("mixed", (_bnhd(q), k, _bnhd(v)), ("bnhd", "bhnd", "bnhd")),
        Layout("packed_qkv_slices", _packed(), ("bnhd",) * 3),
        Layout("padded_rows", (_padded_rows(q), k, v), ("bhnd",) * 3),
        Layout("misaligned_base", (odd, k, v), (None, "bhnd", "bhnd")),
        Layout("padded_row_misaligned_base", (odd_row, k, v), (None, "bhnd", "bhnd")),
        Layout("batch_outside_heads", (b_major, k, v), (None, "bhnd", "bhnd")),
        Layout("head_dim_strided", (d_major, k, v), (None, "bhnd", "bhnd")),
    ]


@pytest.mark.parametrize("row", _layout_rows(), ids=[r.id for r in _layout_rows()])
def test_gluon_takes_exactly_the_layouts_its_descriptors_read(row):
    """validate records per tensor which TMA row view reads it ((B·H·N, D) or (B·N, H·D)); the Gluon
    forward and backward take the call iff all three have one, else Triton with the rule naming them."""
    call = validate(*row.qkv, causal=True)
    assert call.layouts == row.want
    got = plan(call, H200)
    if None in row.want:
        bad = ", ".join(n for n, kind in zip("qkv", row.want) if kind is None)
        assert (got.forward, got.backward) == ("triton", "triton") and f"layout of {bad}:" in got.reasons[0]
    else:
        assert (got.forward, got.backward) == ("gluon", "gluon"), got.reasons


@pytest.mark.parametrize("shape,strides,itemsize,want", [
    ((2, 4, 256, 128), (4 * 256 * 128, 256 * 128, 128, 1), 2, ("bhnd", 2 * 4 * 256, 128, 128)),
    ((2, 4, 256, 128), (256 * 512, 128, 512, 1), 2, ("bnhd", 2 * 256, 512, 512)),
    ((2, 4, 256, 128), (256 * 1536, 128, 1536, 1), 2, ("bnhd", 2 * 256, 512, 1536)),  # packed QKV slice
    ((1, 1, 256, 128), (7, 3, 128, 1), 2, ("bhnd", 256, 128, 128)),  # size-1 dims: any stride
    ((2, 1, 256, 128), (256 * 128, 5, 128, 1), 4, ("bhnd", 512, 128, 128)),
    ((2, 4, 256, 128), (256 * 512, 128, 512, 2), 2, None),  # last dim strided
    ((2, 4, 256, 128), (256 * 516, 128, 516, 1), 2, None),  # row stride 1032 bytes: not a multiple of 16
    ((2, 4, 256, 128), (4 * 256 * 64, 256 * 64, 64, 1), 2, None),  # overlapping rows (stride 64 < D)
    ((2, 4, 256, 128), (256 * 256, 64, 256, 1), 2, None),  # overlapping heads in a (B·N, H·D) row
    ((2, 4, 256, 128), (0, 256 * 128, 128, 1), 2, None),  # broadcast batch
    ((2, 4, 1, 128), (512, 128, 512, 1), 2, None),  # N = 1: no rows to step over
], ids=["bhnd", "bnhd", "bnhd_packed", "size1_dims", "size1_head_fp32", "d_strided", "row_unaligned",
        "rows_overlap", "heads_overlap", "broadcast_batch", "single_row"])
def test_row_view(shape, strides, itemsize, want):
    from flashproof.kernels.attention.gluon.layout import row_view
    got = row_view(shape, strides, itemsize)
    assert (None if got is None else tuple(got)) == want


def test_row_view_coordinates_address_every_element():
    """The row view's (row, col) of (b, h, n, d) — row = b·per_batch + h·per_head + n, col = h·col_per_head
    + d, at row·row_stride + col — is the element's own offset, for both kinds (checked exhaustively on
    small tensors, the packed QKV slice included)."""
    from flashproof.kernels.attention.gluon.layout import coords, row_view
    for t in (torch.zeros(2, 3, 4, 8), _bnhd(torch.zeros(2, 3, 4, 8)), _packed(2, 3, 4, 8)[1]):
        B, H, N, D = t.shape
        view = row_view(t.shape, t.stride(), 16)  # itemsize 16: any row stride is 16-byte aligned
        c = coords(view.kind, H, N, D)
        for b, h, n, d in torch.cartesian_prod(*(torch.arange(x) for x in t.shape)).tolist():
            offset = b * t.stride(0) + h * t.stride(1) + n * t.stride(2) + d * t.stride(3)
            row, col = b * c.per_batch + h * c.per_head + n, h * c.col_per_head + d
            assert row < view.rows and col < view.cols and row * view.row_stride + col == offset, (view, b, h, n, d)


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
    assert dispatch.GLUON_HEAD_DIMS == fwd.HEAD_DIMS == bwd.HEAD_DIMS
    assert dispatch.GLUON_BLOCK == fwd.BLOCK_M == fwd.BLOCK_N == bwd.BLOCK_N


def test_gluon_refuses_more_rows_than_its_int32_row_indices_were_proved_for():
    """B·Hq·N ≤ 2^30 (A-GLUON-DEVICE-MEMORY, the bound KER-BOUNDS-GLUON-* assume): one row more and
    gluon_rule names the rule, auto routes to Triton, backend='gluon' raises; exactly 2^30 is taken.
    The shapes are set on a validated call (no tensor of 2^37 elements is made)."""
    call = validate(*_qkv())
    at = call._replace(B=2 ** 8, Hq=4, Hkv=4, Nq=2 ** 20, Nk=2 ** 20)  # 2^30 rows
    over = at._replace(B=2 ** 8 + 1)
    assert dispatch.GLUON_MAX_ROWS == 2 ** 30
    assert dispatch.gluon_rule(at, H200) is None
    why = dispatch.gluon_rule(over, H200)
    assert why and "2^30" in why and str((2 ** 8 + 1) * 4 * 2 ** 20) in why
    assert plan(over, H200).forward == "triton"
    with pytest.raises(BackendUnavailable, match="int32"):
        plan(over._replace(backend="gluon"), H200)


def test_no_kernel_is_launched_with_more_programs_than_a_grid_dim_takes():
    """CUDA's grid takes at most 65535 programs along its second dim: the Triton kernels' (sequence, head)
    and the Gluon kernels' B·Hq and N / 128 stay within it, else the rule says so; auto then routes to
    the torch kernels (which launch no such grid), and an explicit backend raises."""
    call = validate(*_qkv())
    at = call._replace(B=2 ** 14, Hq=4, Hkv=4, Nq=128, Nk=128)  # 65536 (sequence, head) programs
    assert dispatch.MAX_GRID_Y == 65535
    assert dispatch.triton_rule(at._replace(B=2 ** 14 - 1), H200) is None
    assert dispatch.gluon_rule(at._replace(B=2 ** 14 - 1), H200) is None
    for rule in (dispatch.triton_rule, dispatch.gluon_rule):
        why = rule(at, H200)
        assert why and "65535" in why and "65536" in why
    assert plan(at, H200)[:2] == ("torch", "torch")
    for backend in ("triton", "gluon"):
        with pytest.raises(BackendUnavailable, match="65535"):
            plan(at._replace(backend=backend), H200)
    long = call._replace(B=1, Hq=1, Hkv=1, Nq=128 * 65536, Nk=128 * 65536)  # 65536 query blocks of 128
    why = dispatch.gluon_rule(long, H200)
    assert why and "65535" in why and plan(long, H200)[:2] == ("triton", "triton")
    cu = torch.arange(0, 2 ** 14 + 1, dtype=torch.int32)  # varlen: 2^14 sequences of 4 heads
    packed = call._replace(B=1, Hq=4, seqlens=(cu, cu, 1, 1))
    assert "65536" in dispatch.triton_rule(packed, H200)


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


@pytest.mark.parametrize("call,kind", [({}, "dense"), ({"causal": True}, "causal"),
                                       ({"mask": _tiles(), "causal": True}, "block-sparse")])
def test_the_auto_gluon_reason_names_the_call(call, kind):
    """The reason of an auto route to Gluon says which kind of call it took (it said "dense" for every one)."""
    got = plan(validate(*_qkv(), **call), H200)
    assert (got.forward, got.backward) == ("gluon", "gluon") and f"({kind}, d = " in got.reasons[0], got.reasons
