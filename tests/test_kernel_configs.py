"""Every autotuned configuration on its own, under TRITON_INTERPRET=1: each (BLOCK_M, BLOCK_N) shape
of ``attention_triton.TUNED`` replaces that kernel's autotuner (the other kernels keep theirs) and
must meet the float64 formula — forward, lse and the three gradients — on a ragged causal GQA case,
a windowed case and a block-sparse case with 128-wide tiles, so that autotuning can only choose among
configurations that compute the same function within the tolerance rule. (Issue 7 asks this of
every tuned configuration; the GPU adds layouts the interpreter does not model, which gpu_check and
the fuzz campaign cover for the default configuration.)"""
from __future__ import annotations

import functools
import os

import pytest
import torch

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

import test_kernel_cases  # noqa: E402
from flashproof.kernels import BlockSparseMask, attention  # noqa: E402
from flashproof.kernels.attention.triton import host as at  # noqa: E402
from test_kernel_cases import Case, check_case  # noqa: E402

_TILES = torch.tensor([[True, False], [True, True]])[None, None]
CONFIG_CASES = [
    # every kernel block size divides these tiles (128), and D <= 128, so no configuration is pruned
    Case("causal_gqa_ragged", (1, 2, 1, 150, 170, 48, 32), {"causal": True}),
    Case("window_ragged", (1, 1, 1, 140, 130, 32, 16), {"window": (40, 20)}),
    Case("block_sparse_128_causal", (1, 1, 1, 200, 180, 32, 32), {"mask": BlockSparseMask(_TILES, 128, 128),
                                                                   "causal": True}),
]
_ATTR = {"fwd": "_FWD", "dkdv": "_DKDV", "dq": "_DQ", "dkdv_dq": "_DKDV_DQ"}
PARAMS = [(name, shape) for name, (_, shapes, _, _) in at.TUNED.items() for shape in shapes]


@pytest.mark.parametrize("name,shape", PARAMS, ids=[f"{n}-{'x'.join(map(str, s))}" for n, s in PARAMS])
def test_each_tuned_configuration_meets_the_oracle(name, shape, monkeypatch):
    for other, attr in _ATTR.items():  # the other kernels on one mid-size configuration (the interpreter's
        monkeypatch.setattr(at, attr, at.autotuned(other, [(64, 64, 4, 1)]))  # 16x16 default is slow here)
    tuner = at.autotuned(name, [shape])
    monkeypatch.setattr(at, _ATTR[name], tuner)
    if name == "dkdv_dq":
        monkeypatch.setattr(at, "ATOMIC_DQ", True)
    det = name != "dkdv_dq"
    monkeypatch.setattr(test_kernel_cases, "attention", functools.partial(attention, deterministic=det))
    for case in CONFIG_CASES:
        check_case(case, torch.float16, "triton")
    assert tuner.best_config.kwargs["BLOCK_M"] == shape[0] and tuner.best_config.kwargs["BLOCK_N"] == shape[1], \
        "the configuration under test was pruned away"


def test_known_keys_launch_directly_with_the_chosen_configuration(monkeypatch):
    """``attention_triton._launch``: the first call of a key goes through the autotuner; later calls
    of that key launch the chosen configuration directly — its pre-hook included (a 32-row
    configuration needs the descriptors' block shapes set to 32 rows; the interpreter's 16-row
    default would hide a skipped hook) — and give bitwise the same result; a new key (causal) goes
    through the autotuner again."""
    tuner = at.autotuned("fwd", [(32, 32, 4, 1)])
    monkeypatch.setattr(at, "_FWD", tuner)
    runs = []
    real_run = tuner.run
    monkeypatch.setattr(tuner, "run", lambda *a, **kw: runs.append(1) or real_run(*a, **kw))
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 70, 32, generator=g) for _ in range(3))
    with torch.no_grad():
        first = attention(q, k, v, backend="triton")
        second = attention(q, k, v, backend="triton")
        assert len(runs) == 1, "the second call of a known key should not enter the autotuner"
        assert torch.equal(first, second)
        attention(q, k, v, causal=True, backend="triton")
        assert len(runs) == 2, "a new key goes through the autotuner"
