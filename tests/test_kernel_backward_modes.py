"""The two Triton backward launch structures (``kernels/attention_triton_bwd.py``):

* ``deterministic=False`` (default): dK/dV kernel that also adds dQ with atomics (5 products);
* ``deterministic=True``: dK/dV kernel + dQ kernel, no atomics (7 products, bitwise reproducible).

Both run every shared feature case and the poison case against the float64 formula (the shared
helpers of ``test_kernel_cases`` with the mode as a parameter), each test checks which kernels
``backward`` launched, and a dQ corruption planted in the atomic launch only is caught. Interpreter
on CPU (``TRITON_INTERPRET=1``, set by conftest); the determinism test also runs compiled on CUDA.
"""
from __future__ import annotations

import functools
import math
import os
import sys

import pytest
import torch

pytest.importorskip("triton")
_INTERP = os.environ.get("TRITON_INTERPRET") == "1"
if __name__ != "__main__" and not (_INTERP or torch.cuda.is_available()):
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest without CUDA) or a CUDA device", allow_module_level=True)

import test_kernel_cases  # noqa: E402
from flashproof.kernels import BlockSparseMask, attention  # noqa: E402
from flashproof.kernels.attention.triton import host as at  # noqa: E402
from flashproof.fuzz.kernel_mutants import MUTANTS  # noqa: E402
from test_kernel_cases import CASES, Case, check_case, ids, poison_case  # noqa: E402
from test_kernel_reference import allowed_matrix, dense_reference, grads, rand_qkv  # noqa: E402

cpu_only = pytest.mark.skipif(not _INTERP, reason="interpreter (CPU) test; the GPU runs gpu_check")

MODES = {"atomic": False, "two_kernel": True}  # name -> deterministic
#: the kernels ``backward`` must launch in each mode (launch counts per backward call)
LAUNCHES = {"atomic": {"delta": 1, "dkdv_dq": 1, "dkdv": 0, "dq": 0},
            "two_kernel": {"delta": 1, "dkdv_dq": 0, "dkdv": 1, "dq": 1}}

# Block-sparse cases whose mask tiles hold several kernel blocks on BOTH sides (the interpreter runs
# 16×16 kernel blocks; block_q = 32 gives the dK/dV kernel two query sub-blocks per tile, block_k = 32
# the dQ kernel two key sub-blocks), with a causal diagonal / window cutting through tiles, so the flat
# (tile, sub-block) loop visits sub-blocks that lie wholly outside the allowed range.
def _some_tiles(Nq, Nk, bq, bk, seed, p=0.6):
    t = torch.rand(1, 1, -(-Nq // bq), -(-Nk // bk), generator=torch.Generator().manual_seed(seed)) < p
    return BlockSparseMask(t, bq, bk)


EXTRA = [
    Case("block_sparse_q32_k32_causal", (1, 2, 1, 70, 90, 16, 16), {"mask": _some_tiles(70, 90, 32, 32, 11),
                                                                     "causal": True}),
    Case("block_sparse_q32_k16_window", (1, 2, 2, 75, 60, 16, 16), {"mask": _some_tiles(75, 60, 32, 16, 12, 0.8),
                                                                    "window": (20, 2)}),
]


@pytest.fixture(params=sorted(MODES))
def mode(request, monkeypatch):
    """Runs the shared case helpers with ``deterministic`` set for the mode; afterwards checks that
    every backward took the launch structure of that mode (and that there was a backward)."""
    name = request.param
    monkeypatch.setattr(at, "ATOMIC_DQ", True)  # on here whatever the default; routed by the flag
    monkeypatch.setattr(test_kernel_cases, "attention", functools.partial(attention, deterministic=MODES[name]))
    before = dict(at.BACKWARD_LAUNCHES)
    yield name
    calls = at.BACKWARD_LAUNCHES["delta"] - before["delta"]
    assert calls >= 1, "no Triton backward ran"
    got = {k: at.BACKWARD_LAUNCHES[k] - before[k] for k in before}
    assert got == {k: n * calls for k, n in LAUNCHES[name].items()}, (name, got)


@cpu_only
@pytest.mark.parametrize("case", CASES + EXTRA, ids=ids(CASES + EXTRA))
def test_both_backward_modes_match_dense_f32(case, mode):
    check_case(case, torch.float32, "triton")


HALF = [c for c in CASES + EXTRA if c.id in {"gqa_4_odd_dims", "varlen", "block_sparse_q32_k32_causal"}]


@cpu_only
@pytest.mark.parametrize("case", HALF, ids=ids(HALF))
def test_both_backward_modes_match_dense_f16(case, mode):
    check_case(case, torch.float16, "triton")


@cpu_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
def test_both_backward_modes_keep_poison_out(dtype, mode):
    poison_case(dtype, "triton")


@cpu_only
def test_ragged_key_block_with_very_negative_lse(mode):
    """Every logit ≈ −144 (lse < −88): a key past Nk in the last, ragged key block has k = 0, s = 0,
    so P = 2^(0 − lse₂) = inf there. The atomic path must not multiply that by k = 0 (it did:
    dQ was NaN until a ragged key block was routed through the masked steps only)."""
    q, k, v = rand_qkv(1, 1, 1, 20, 20, 16, 16, grad=False, seed=3)
    q, k = (q * 0.1 - 3).requires_grad_(), (k * 0.1 + 3).requires_grad_()
    v.requires_grad_()
    res = test_kernel_cases.attention(q, k, v, scale=1.0, return_lse=True, backend="triton")
    assert res.lse.max() < -88
    want = dense_reference(q, k, v, allowed_matrix(1, 1, 20, 20), 1.0)
    for name, got, ref in zip(("dq", "dk", "dv"), grads(res.out, res.lse, q, k, v), grads(*want, q, k, v)):
        assert not got.isnan().any(), f"NaN in {name}"
        assert (got.double() - ref).abs().max() <= 2e-4 * max(1.0, ref.abs().max().item()), name


@cpu_only
@pytest.mark.parametrize("n, seed", [(16, 0), (64, 2)])
def test_fp32_huge_logits_both_modes(monkeypatch, mode, n, seed):
    """gpu_check's huge_logits case (|s| ~ 900, fp32) under its naive-error rule, in each mode
    (the atomic dQ accumulates in another order than the dQ kernel)."""
    from flashproof.kernels import gpu_check

    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    monkeypatch.setattr(gpu_check, "attention", test_kernel_cases.attention)
    (cid, shape, opt), = [c for c in gpu_check.CASES if c[0] == "huge_logits"]
    r = gpu_check.check_case(cid, (shape[0], shape[1], shape[2], n, n, shape[5], shape[6]), opt, "fp32", seed=seed)
    assert r["passed"], r


@cpu_only
def test_gqa_map_mutant_is_honoured_by_both_backward_modes(mode):
    """The one mutant switch the backward kernels read (the others live in the forward only and reach
    the gradients through out/lse): with ``gqa_map`` head h reads kv head h % Hkv in the forward, so a
    consistent backward gives exactly the gradients of that (correct) attention with remapped heads."""
    Hq, Hkv = 4, 2
    q, k, v = rand_qkv(1, Hq, Hkv, 21, 27, 16, 16)
    res = MUTANTS["gqa_map"](q, k, v, causal=True, return_lse=True, backend="triton",
                             deterministic=MODES[mode])
    heads = [h % Hkv for h in range(Hq)]
    want = dense_reference(q, k[:, heads], v[:, heads], allowed_matrix(1, Hq, 21, 27, causal=True))
    right = dense_reference(q, k, v, allowed_matrix(1, Hq, 21, 27, causal=True))
    assert (res.out.double() - right[0]).abs().max() > 1e-2, "the switch changed nothing here"
    for name, got, ref in zip(("dq", "dk", "dv"), grads(res.out, res.lse, q, k, v), grads(*want, q, k, v)):
        assert (got.double() - ref).abs().max() <= 2e-4 * max(1.0, ref.abs().max().item()), name


class _CorruptAtomicDQ:
    """Wraps the atomic dK/dV/dQ launcher: after the real launch, adds 1e-2 to every entry of the
    fp32 dQ buffer of one query head (positional argument 8) — a bug of the atomic path alone."""

    def __init__(self, real):
        self.real = real

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.real[grid](*args, **kwargs)
            args[8][:, -1] += 1e-2
        return launch


@cpu_only
@pytest.mark.parametrize("case", [c for c in CASES if c.id in ("causal_nq_lt_nk", "varlen")], ids=lambda c: c.id)
def test_a_bug_in_the_atomic_dq_path_alone_is_caught(case, monkeypatch):
    monkeypatch.setattr(at, "ATOMIC_DQ", True)
    monkeypatch.setattr(at, "_DKDV_DQ", _CorruptAtomicDQ(at._DKDV_DQ))
    with pytest.raises(AssertionError, match="dq max error"):
        check_case(case._replace(kw={**case.kw, "deterministic": False}), torch.float32, "triton")
    check_case(case._replace(kw={**case.kw, "deterministic": True}), torch.float32, "triton")  # untouched path


def test_deterministic_gradients_are_bitwise_repeatable():
    """deterministic=True: gradients bitwise equal over runs (compiled on CUDA when present: the
    promise that matters there; the interpreter runs programs in order, so on CPU it checks the
    path runs and is stable). deterministic=False must agree to rounding."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    n = 300 if dev == "cuda" else 40
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    cu = torch.tensor([0, n // 3, n], dtype=torch.int32, device=dev)
    q, k, v = rand_qkv(1, 4, 2, n, n, 32, 32, dtype=dt, device=dev)
    runs = {}
    for det in (True, True, True, False):
        out = attention(q, k, v, causal=True, window=(n // 4, None), cu_seqlens_q=cu, cu_seqlens_k=cu,
                        backend="triton", deterministic=det)
        runs.setdefault(det, []).append(torch.autograd.grad(out.float().square().sum(), (q, k, v)))
    first, *later = runs[True]
    for other in later:
        for name, a, b in zip(("dq", "dk", "dv"), first, other):
            assert torch.equal(a, b), f"deterministic=True: {name} differs between runs"
    tol = 1e-4 if dt == torch.float32 else 3e-2
    for name, a, b in zip(("dq", "dk", "dv"), first, runs[False][0]):
        assert (a.float() - b.float()).abs().max() <= tol * max(1.0, a.float().abs().max().item()), name


def test_empty_problem_gradients_are_zero_in_both_modes():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for det in MODES.values():
        q, k, v = rand_qkv(1, 2, 1, 0, 5, 8, 8, device=dev)
        out = attention(q, k, v, backend="triton", deterministic=det)
        gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v), allow_unused=True)
        assert gq.shape == q.shape and (gk == 0).all() and (gv == 0).all()


# ------------------------------------------------------------------ sm_90 compile of the new kernel

def _compile_atomic_kernel(compiled: list) -> list:
    """Compile attn_bwd_dkdv_dq (the kernel ``tests/test_kernel_compile.py`` does not list) for
    sm_90 in fp32/bf16/fp16 × that test's two feature variants; returns the failures."""
    from flashproof.kernels.attention_triton_bwd import attn_bwd_dkdv_dq
    from test_kernel_compile import BASE, VARIANTS, _signature, compile_sm90

    failures = []
    for dt, prec in (("fp32", "ieee"), ("bf16", "tf32"), ("fp16", "tf32")):
        for variant, opts in VARIANTS.items():
            if opts.get("LAZY") and prec == "ieee":
                continue  # as in test_kernel_compile
            # the host launches it with pointers only (USE_DESC=False): see attn_bwd_dkdv_dq
            sig, consts = _signature(attn_bwd_dkdv_dq, dt, {**BASE, **opts, "DOT_PREC": prec, "USE_DESC": False})
            sig.update(DQ_ACC="*fp32", DV=f"*{dt}")
            compile_sm90(attn_bwd_dkdv_dq, sig, consts, f"attn_bwd_dkdv_dq/{dt}/{variant}", compiled, failures,
                         ptx_needs="atom.global.gpu.relaxed.add.f32")
    return failures


@pytest.mark.slow
def test_atomic_kernel_compiles_to_sm90_cubins():
    from test_kernel_compile import run_compile_script
    run_compile_script(__file__, 11)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    names = []
    bad = _compile_atomic_kernel(names)
    for name, err in bad:
        print("FAILED", name, err)
    print(f"compiled {len(names) - len(bad)} of {len(names)}")
    raise SystemExit(1 if bad else 0)


@cpu_only
def test_default_routing_takes_the_two_kernel_path():
    """ATOMIC_DQ is off (the atomic kernel measured slower on the H200), so deterministic=False also
    launches the dK/dV and dQ kernels."""
    assert at.ATOMIC_DQ is False
    q, k, v = rand_qkv(1, 2, 1, 20, 33, 16, 16, dtype=torch.float32, device="cpu", grad=True)
    before = dict(at.BACKWARD_LAUNCHES)
    attention(q, k, v, causal=True, backend="triton").sum().backward()
    got = {n: at.BACKWARD_LAUNCHES[n] - before[n] for n in before}
    assert got == LAUNCHES["two_kernel"], got
