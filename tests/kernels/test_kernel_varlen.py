"""The packed-varlen problem the GPU fuzzer reported (``flashproof fuzz --kernel triton --dtype bf16
--profile gpu --seed 0`` on an H200: a forward error, then an illegal memory access while shrinking)
and shrunk variants of it, on the Triton kernels under the interpreter: the fuzzer's own forward and
gradient checks against the oracle (flashproof/fuzz/oracle.py, tolerance.py), with every interpreted
load and store bounds-checked (``interpreter_shim.bounds_checked``: an access outside its tensors
raises). Features of the report: a sequence with no queries and 129 keys, sequences of one key read
by 65 queries, dv = 8 < d = 64, GQA 3:1, empty rows (a dense mask with the varlen offsets), inf
poison in the unread entries and head-dim padding, strided views.

The interpreter runs one small configuration by default; ``test_gpu_configurations`` runs the
configurations the GPU's tuning="first" launches at these sizes (the first row of each table)."""
from __future__ import annotations

import pytest

from flashproof.fuzz import targets
from flashproof.fuzz.checks import examine
from flashproof.fuzz.interpreter_shim import bounds_checked
from flashproof.fuzz.problem import ProblemSpec, build
from flashproof.kernels.attention.api import validate
from flashproof.kernels.interpreter import interpreting

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not interpreting(), reason="the Triton kernels on CPU need TRITON_INTERPRET=1")

_COMMON = dict(block=64, empty_rows=True, ties=True, poison="inf", noncontig=True, seed=41294480)
SPECS = {
    # the example that deviated, and the shrink candidate that hit the illegal access
    "reported": ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=8,
                            seqlens=((1, 1), (0, 129), (65, 1), (1, 1)), **_COMMON),
    "shrink-candidate": ProblemSpec(heads_q=3, n_q=66, n_k=132, d=64, dv=8,
                                    seqlens=((0, 1), (0, 129), (65, 1), (1, 1)), **_COMMON),
    # shrunk: the zero-query sequence next to the 65-query one; no GQA; dv = d; zero keys; dv > d
    "zero-queries-then-one-key": ProblemSpec(heads_q=3, n_q=65, n_k=130, d=64, dv=8, seqlens=((0, 129), (65, 1)),
                                             **_COMMON),
    "mha": ProblemSpec(heads_q=1, n_q=66, n_k=131, d=64, dv=8, seqlens=((1, 1), (0, 129), (65, 1)), block=64,
                       seed=2),
    "dv-equals-d": ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=64, seqlens=((1, 1), (0, 129), (65, 1), (1, 1)),
                               block=64, empty_rows=True, seed=3),
    "zero-keys-dv-gt-d": ProblemSpec(heads_q=2, n_q=130, n_k=66, d=8, dv=64, seqlens=((65, 0), (0, 65), (65, 1)),
                                     block=64, causal=True, seed=4),
}
CHECKED = {("forward", "out"), ("forward", "lse"), ("gradients", "dq"), ("gradients", "dk"), ("gradients", "dv")}


def _examine(spec, dtype):
    with bounds_checked():
        ex = examine(targets.get("triton"), spec, dtype, "cpu", checks=("forward", "gradients"), determinism_runs=0)
    assert {(c, v.name) for c, v in ex.verdicts} == CHECKED, ex  # every tensor was judged
    assert not ex.deviations, [d.reproducer() for d in ex.deviations]


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("name", ["reported", "shrink-candidate"])
def test_reported_specs_meet_the_oracle(name, dtype):
    _examine(SPECS[name], dtype)


@pytest.mark.parametrize("name", [n for n in SPECS if n not in ("reported", "shrink-candidate")])
def test_shrunk_variants_meet_the_oracle(name):
    _examine(SPECS[name], "bf16")


def _table(name):
    import triton
    from flashproof.kernels.attention.triton import host
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in host.TUNED[name][1]]


def _launch_args(name):
    """What host._prune sees of the reported launch (bf16, d = 64, dv = 8: V as wide as q/k, see host._pad_dv)."""
    import torch
    return dict(Q=torch.empty(1, dtype=torch.bfloat16), BLOCK_D=64, BLOCK_DV=64, TILE_Q=0, TILE_K=0,
                USE_DESC=False, **({"DK": 1} if name == "dkdv" else {}))


def test_varlen_value_tiles_are_as_wide_as_the_key_tiles():
    """host._pad_dv: a varlen launch with Dv < D pads V to BLOCK_D lanes (the width that passed on the H200,
    where BLOCK_DV < BLOCK_D faulted); a dense launch keeps Dv's own padding; Dv > D is left alone."""
    from flashproof.kernels.attention.triton import host
    assert [host._pad_dv(64, 8, True), host._pad_dv(64, 8, False)] == [64, 16]
    assert [host._pad_dv(128, 32, True), host._pad_dv(8, 64, True), host._pad_dv(16, 8, True)] == [128, 64, 16]
    p = build(SPECS["reported"])
    call = validate(p.q, p.k, p.v, mask=p.allowed, cu_seqlens_q=p.cu_seqlens_q, cu_seqlens_k=p.cu_seqlens_k,
                    backend="triton")
    c = host._common(p.q.float(), p.k.float(), p.v.float(), call)
    assert (c["BLOCK_D"], c["BLOCK_DV"]) == (64, 64)


def test_gpu_configurations(monkeypatch):
    """The reported spec on the configurations an H200 runs with tuning="first" at these sizes (the first
    row of each table that fits shared memory: BLOCK_M = 128 > every sequence's query count in the forward)."""
    from flashproof.kernels.attention.triton import host
    shapes = {}
    for name in host.Tuners._fields:
        (c,) = host._prune_first(_table(name), _launch_args(name))
        shapes[name] = [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)]
    assert shapes["fwd"] == [(128, 64, 8, 3)]
    monkeypatch.setitem(host.TUNERS, "first", host.tuners(shapes, tuning="first"))
    _examine(SPECS["reported"], "bf16")
