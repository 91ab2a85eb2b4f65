"""The default call and the forced-config call of ``bench/kvcache.py`` do the same host work (issue 18's
two-level effect: on the H200 the default row of B = 8, 64/8, 128k read ~15 % slower than the forced
rows of the configuration it runs).

The production shapes run on ``meta`` tensors (no memory, no compute) with the two Triton kernels
replaced by recorders and the SM count set to the H200's 132, so the whole host path (validation, the
split count, the launch plan, the buffers, the tickets, the launches) runs as on the GPU. Per shape:
the default call after its warm-up (the autotuner's choice kept, as in every timed row) and the
forced call of that choice (validated once, as the bench's ``ours-C*`` rows) issue the same launches
(kernel, grid, arguments, compile-time constants and config; the default's extra ``num_ctas=1`` is
Triton's default) and the same ATen operations (allocations: no copy, no extra buffer), and the
autotuner runs once, on the warm-up, never again. What this cannot see (the GPU state around a row:
clocks, a fresh cache, memory the driver is still freeing) is what ``bench/kvcache_order.py`` measures.
"""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

pytest.importorskip("triton")

from flashproof.kernels.kvcache import api, attention_with_kvcache  # noqa: E402
from flashproof.kernels.kvcache import triton as kv_triton  # noqa: E402
from flashproof.kernels.kvcache.config import KernelConfig  # noqa: E402

H200_SMS = 132
#: (B, Hq, Hkv, Nq, Nk) of the bench, and the split count the rule gives each on 132 SMs
SHAPES = [((8, 64, 8, 1, 131072), 4), ((8, 64, 8, 5, 131072), 4), ((64, 32, 8, 1, 32768), 1),
          ((1, 32, 8, 1, 16384), 16)]
#: what the fake autotuner "chooses": the default row's config at B = 8, 128k in the 17:45 run
CHOICE = KernelConfig(128, 8, 2)


class Recorder:
    """Stands in for a ``@triton.jit`` kernel: ``kernel[grid](*args, **kwargs)`` records the launch."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.log.append((self.name, tuple(grid), args, kwargs))


class FakeTuner:
    """Stands in for ``triton.autotune(...)(kvcache_fwd)``: records a tuning launch and reports ``CHOICE``."""

    def __init__(self, log):
        self.log, self.runs = log, 0

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.runs += 1
            self.log.append(("tune", tuple(grid), args, kwargs))
        return run

    @property
    def best_config(self):
        class Best:
            @staticmethod
            def all_kwargs():
                return {"BLOCK_N": CHOICE.block_n, "num_warps": CHOICE.num_warps, "num_ctas": 1,
                        "num_stages": CHOICE.num_stages}
        return Best()


class Ops(TorchDispatchMode):
    """The ATen operations a call runs (allocations and any copy)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def gpu_host(monkeypatch):
    """The Triton path's host code on meta tensors, as on a 132-SM device; returns the launch log and the tuner."""
    log = []
    tuner = FakeTuner(log)
    monkeypatch.setattr(api, "_sm_count", lambda device: H200_SMS)
    monkeypatch.setattr(kv_triton, "kvcache_fwd", Recorder("fwd", log))
    monkeypatch.setattr(kv_triton, "kvcache_merge", Recorder("merge", log))
    monkeypatch.setattr(kv_triton, "_tuner", lambda load, configs: tuner)
    monkeypatch.setattr(kv_triton, "_CHOSEN", {})
    monkeypatch.setattr(kv_triton, "_TICKETS", {})
    return log, tuner


def _inputs(B, Hq, Hkv, Nq, Nk):
    meta = dict(device="meta", dtype=torch.bfloat16)
    return (torch.empty(B, Hq, Nq, 128, **meta), torch.empty(B, Hkv, Nk, 128, **meta),
            torch.empty(B, Hkv, Nk, 128, **meta), torch.full((B,), Nk, dtype=torch.int32, device="meta"))


def _shape_of(x):
    """A launch argument as compared: a tensor by (shape, stride, dtype, and identity for the inputs), else itself."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.stride(), x.dtype)
    return x


def _traced(fn, log):
    start = len(log)
    with Ops() as ops:
        fn()
    return log[start:], ops.ops


def _differences(log, tuner, shape, splits) -> list:
    """Every way the default row's host work (after its warm-up) differs from the forced row's: [] when none."""
    q, k, v, lens = _inputs(*shape)

    def default():
        attention_with_kvcache(q, k, v, cache_seqlens=lens, backend="triton")
    call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                        num_splits=None, backend="triton")

    def forced():
        kv_triton.forward(q, k, v, call, tuning="autotune", config=CHOICE)

    out = []
    if call.num_splits != splits:
        out.append(f"split count {call.num_splits}, expected {splits}")
    names = ["fwd"] + (["merge"] if splits > 4 else [])   # fused merge up to 4 splits, the merge kernel above
    warm, _ = _traced(default, log)                       # the warm-up: the autotuner runs here, once
    if [n for n, *_ in warm] != ["tune"] + names[1:]:
        out.append(f"warm-up launches {[n for n, *_ in warm]}")
    d_launch, d_ops = _traced(default, log)
    f_launch, f_ops = _traced(forced, log)
    d_again, _ = _traced(default, log)
    if tuner.runs != 1:
        out.append(f"the autotuner ran {tuner.runs} times (again after the warm-up: inside a timed row)")
    for what, got in (("default", d_launch), ("forced", f_launch), ("default again", d_again)):
        if [n for n, *_ in got] != names:
            out.append(f"{what} launches {[n for n, *_ in got]}, expected {names}")
    for (name, dg, da, dk), (_, fg, fa, fk) in zip(d_launch, f_launch):
        dk = dict(dk)
        if dg != fg:
            out.append(f"{name}: grid {dg} vs {fg}")
        if [_shape_of(x) for x in da] != [_shape_of(x) for x in fa]:
            out.append(f"{name}: arguments differ")
        if name == "fwd" and not all(x is y for x, y in zip(da[:3], fa[:3])):
            out.append("fwd: not the same q, K, V")
        if dk.pop("num_ctas", 1) != 1:                     # Triton's default: the same binary options
            out.append("fwd: num_ctas != 1")
        if dk != fk:
            out.append(f"{name}: keywords {dk} vs {fk}")
    if d_launch and d_launch[0][1] != (shape[0] * shape[2], splits):
        out.append(f"grid {d_launch[0][1]}")
    # the same ATen work: out, lse (and with splits the one partial buffer and its lse view), nothing copied
    if d_ops != f_ops:
        out.append(f"ATen operations {d_ops} vs {f_ops}")
    if any(op in ("copy_", "clone", "_to_copy") for op in d_ops):
        out.append(f"a copy on the default path: {d_ops}")
    if d_ops.count("empty") != (3 if splits > 1 else 2):
        out.append(f"allocations {d_ops}")
    return out


@pytest.mark.parametrize("shape,splits", SHAPES, ids=[f"B{s[0]}-{s[1]}/{s[2]}-Nq{s[3]}-Nk{s[4]}" for s, _ in SHAPES])
def test_default_and_forced_rows_issue_the_same_launches_and_allocations(gpu_host, shape, splits):
    log, tuner = gpu_host
    assert _differences(log, tuner, shape, splits) == []


def test_control_an_extra_copy_on_the_default_path_is_seen(gpu_host, monkeypatch):
    """The comparison can fail: a default path that copies its output (the forced path untouched) is caught."""
    log, tuner = gpu_host
    real = kv_triton.forward

    def copying(q, k, v, call, *, tuning, config=None, fused_merge=None):
        out, lse = real(q, k, v, call, tuning=tuning, config=config, fused_merge=fused_merge)
        return (out.clone(), lse) if config is None else (out, lse)
    monkeypatch.setattr(kv_triton, "forward", copying)
    got = _differences(log, tuner, SHAPES[0][0], SHAPES[0][1])
    assert any("ATen operations" in d for d in got) and any("a copy" in d for d in got), got


def test_control_a_second_tuning_is_seen(gpu_host, monkeypatch):
    """The comparison can fail: a default path that forgets the autotuner's choice (tunes on every call) is caught."""
    log, tuner = gpu_host
    monkeypatch.setattr(kv_triton, "_CHOSEN", type("Forgetful", (dict,), {"__setitem__": lambda self, k, v: None})())
    got = _differences(log, tuner, SHAPES[0][0], SHAPES[0][1])
    assert any("autotuner ran" in d for d in got), got


def test_the_forced_sweep_rows_differ_from_the_default_only_in_the_config(gpu_host):
    """A forced config other than the choice changes BLOCK_N / warps / stages and nothing else."""
    log, _ = gpu_host
    q, k, v, lens = _inputs(8, 64, 8, 1, 131072)
    call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                        num_splits=None, backend="triton")
    kv_triton.forward(q, k, v, call, tuning="autotune", config=KernelConfig(64, 4, 3))
    kv_triton.forward(q, k, v, call, tuning="autotune", config=CHOICE)
    (_, g1, a1, k1), (_, g2, a2, k2) = log
    assert g1 == g2 and [_shape_of(x) for x in a1] == [_shape_of(x) for x in a2]
    diff = {n for n in k1 if k1[n] != k2[n]}
    assert diff == {"BLOCK_N", "num_warps", "num_stages"}


def test_the_forced_rows_at_b8_128k_run_the_fused_merge_as_the_default_does(gpu_host):
    """At B = 8, 64/8, 128k (S = 4) the bench's forced-config rows (``ours-C*``) and forced-split row
    (``ours-S4``) launch the fused merge, as the default call does; only ``ours-other-merge`` runs the
    merge kernel. (So their 0.939 ms on the H200 at 19:58, beside the default row's 1.085, is the fused
    merge's speed: the default row's slowness is not the merge form.)"""
    log, _ = gpu_host
    q, k, v, lens = _inputs(8, 64, 8, 1, 131072)
    call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                        num_splits=None, backend="triton")
    forced4 = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                           num_splits=4, backend="triton")
    kv_triton.forward(q, k, v, call, tuning="autotune", config=CHOICE)                     # ours-C3
    kv_triton.forward(q, k, v, forced4, tuning="first")                                   # ours-S4 (config aside)
    kv_triton.forward(q, k, v, call, tuning="autotune", config=CHOICE, fused_merge=False)  # ours-other-merge
    attention_with_kvcache(q, k, v, cache_seqlens=lens, backend="triton")                  # the default (tunes)
    fused = [(name, kw.get("FUSED")) for name, _, _, kw in log]
    assert fused == [("fwd", True), ("fwd", True), ("fwd", False), ("merge", None), ("tune", True)]
