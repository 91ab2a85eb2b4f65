"""The kernels against the oracle under the tolerance rule (tests/support/kernel_cases.py): every
feature case on the torch kernels (float64, float32) and on the Triton kernels under the interpreter
(float32, a float16 subset); the gradient through lse; fp32 huge logits; every tuned Triton
configuration on its own; descriptor and pointer loads; split keys merged; the kernel mutants."""
from __future__ import annotations

import pytest
import torch
from support.kernel_cases import (CASES, CONFIG_CASES, HALF, Case, check_case, ids, leaves, lse_gradient_verdicts,
                                  mutant_verdicts, problem_of, verdicts)

from flashproof.fuzz.kernel_mutants import MUTANTS
from flashproof.fuzz.oracle import oracle
from flashproof.fuzz.tolerance import agree, magnitudes
from flashproof.kernels import attention
from flashproof.kernels.interpreter import interpreting

needs_interpreter = pytest.mark.skipif(not interpreting(), reason="the Triton kernels on CPU need TRITON_INTERPRET=1")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_torch_kernels_meet_the_oracle(case, dtype):
    check_case(case, dtype, "torch")


@needs_interpreter
@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_triton_kernels_meet_the_oracle_f32(case):
    pytest.importorskip("triton")
    check_case(case, torch.float32, "triton")


@needs_interpreter
@pytest.mark.parametrize("case", HALF, ids=ids(HALF))
def test_triton_kernels_meet_the_oracle_f16(case):
    """fp16 with a positive scale: the router's one-FMA interior (Plan.fma) in the forward."""
    pytest.importorskip("triton")
    check_case(case, torch.float16, "triton")


LSE_CASES = [c for c in CASES if c.id in {"causal_nq_gt_nk", "mask_empty_rows", "varlen"}]


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_interpreter)])
@pytest.mark.parametrize("case", LSE_CASES, ids=ids(LSE_CASES))
def test_gradient_through_lse(case, backend):
    bad = [v for v in lse_gradient_verdicts(case, torch.float32, backend) if not v.ok]
    assert not bad, [(v.name, v.reason, v.error, v.bound) for v in bad]


@needs_interpreter
@pytest.mark.parametrize("n, seed", [(16, 0), (64, 2)])
def test_fp32_huge_logits(n, seed):
    """|s| ~ 1e3 in fp32: the dK/dV kernel must rebuild P from bitwise the forward's S (Q Kᵀ, then
    transposed); K Qᵀ sums in another order and put dV at 3–6× the rule's bound."""
    case = Case(f"huge_logits_{n}_{seed}", (1, 2, 2, n, n, 64, 64), {"scale": 4.0})
    prob, kw = problem_of(case, torch.float32)
    prob = prob._replace(q=prob.q * 8)  # logits up to ~ 4 · 8 · √d · O(1): far beyond e^88
    q, k, v = leaves(prob, torch.float32)
    res = attention(q, k, v, return_lse=True, backend="triton", tuning="first", **kw)
    grads = torch.autograd.grad(res.out, (q, k, v), prob.dout.to(torch.float32))
    bad = [x for x in verdicts(prob, torch.float32, oracle(prob), res.out, res.lse, grads) if not x.ok]
    assert not bad, [(v.name, v.reason, v.error, v.bound) for v in bad]


def _tuned_params():
    from flashproof.kernels.attention.triton import host
    return [(name, shape) for name, (_, shapes, _, _) in host.TUNED.items() for shape in shapes]


@needs_interpreter
@pytest.mark.slow
@pytest.mark.parametrize("name,shape", _tuned_params() if interpreting() else [],
                         ids=[f"{n}-{'x'.join(map(str, s))}" for n, s in (_tuned_params() if interpreting() else [])])
def test_each_tuned_configuration_meets_the_oracle(name, shape):
    """Every configuration of the Triton host's table on its own (the other kernels on one mid-size
    configuration), through the host's forward and backward, so that autotuning can only choose among
    configurations that compute the same function."""
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate
    from flashproof.kernels.attention.triton import host
    shapes = {n: [(64, 64, 4, 1)] for n in host.Tuners._fields}
    shapes[name] = [shape]
    tuned = host.tuners(shapes)
    for case in CONFIG_CASES:
        prob, kw = problem_of(case, torch.float16)
        q, k, v = leaves(prob, torch.float16, grad=False)
        call = validate(q, k, v, backend="triton", **kw)
        route = dispatch.plan(call, dispatch.device_of(q))
        out, lse = host.forward(q, k, v, call, route, tuned=tuned)
        grads = host.backward(q, k, v, out, lse, prob.dout.to(torch.float16), None, call, route, tuned=tuned)
        bad = [x for x in verdicts(prob, torch.float16, oracle(prob), out, lse, grads) if not x.ok]
        assert not bad, (case.id, [(v.name, v.reason, v.error, v.bound) for v in bad])
    chosen = getattr(tuned, name).best_config.kwargs
    assert (chosen["BLOCK_M"], chosen["BLOCK_N"]) == shape[:2], "the configuration under test was pruned away"


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """The same values at a base address 4 bytes past a 16-byte boundary (TMA cannot take it)."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype)
    view = buf[1:].view(t.shape)
    view.copy_(t)
    return view


@needs_interpreter
def test_descriptor_and_pointer_loads_agree_bitwise():
    """Aligned contiguous inputs take the TMA descriptor loads, a copy of the same values at a
    misaligned base address the pointer loads (``host._descriptors`` says which); forward and
    gradients are bitwise equal."""
    from flashproof.kernels.attention.api import validate
    from flashproof.kernels.attention.triton import host
    case = next(c for c in CASES if c.id == "causal_nq_lt_nk")
    prob, kw = problem_of(case, torch.float32)
    runs = []
    for misaligned in (False, True):
        q, k, v = (_misaligned(t.detach()).requires_grad_() if misaligned else t for t in leaves(prob, torch.float32))
        takes_desc = host._descriptors(validate(q, k, v, **kw), q, k, v) is not None
        assert takes_desc == (host.TensorDescriptor is not None and not misaligned)
        res = attention(q, k, v, return_lse=True, backend="triton", tuning="first", **kw)
        runs.append((res.out, res.lse, *torch.autograd.grad(res.out, (q, k, v), prob.dout.to(torch.float32))))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_split_keys_and_merge_partial_results():
    """Two key partitions' (out, lse) merged by the lse rule equal the whole call (float64: two
    evaluations of one function, held to the tolerance module's agreement rule)."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, n, 16, generator=g, dtype=torch.float64) for n in (30, 90, 90))
    whole = attention(q, k, v, return_lse=True)
    a = attention(q, k[:, :, :37], v[:, :, :37], return_lse=True)
    b = attention(q, k[:, :, 37:], v[:, :, 37:], return_lse=True)
    lse = torch.logaddexp(a.lse, b.lse)
    out = a.out * torch.exp(a.lse - lse)[..., None] + b.out * torch.exp(b.lse - lse)[..., None]
    mags = magnitudes(q, k, v, torch.zeros_like(q), whole.lse, 16 ** -0.5)
    for verdict in (agree("out", out, whole.out, mags), agree("lse", lse, whole.lse, mags)):
        assert verdict.ok, verdict


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_interpreter)])
@pytest.mark.parametrize("bug", sorted(MUTANTS))
def test_each_mutant_breaks_the_rule_where_the_kernel_meets_it(bug, backend):
    """The bug switch reaches the kernels: on an input that shows the bug, the run with it fails the
    tolerance rule and the run without it passes (the fuzzer must find such inputs by itself)."""
    assert MUTANTS[bug].__doc__ and MUTANTS[bug].__name__ == f"attention_{bug}"
    assert all(v.ok for v in mutant_verdicts(bug, backend, with_bug=False))
    assert not all(v.ok for v in mutant_verdicts(bug, backend, with_bug=True)), f"mutant {bug} meets the rule here"


@needs_interpreter
def test_known_keys_launch_directly_with_the_chosen_configuration(monkeypatch):
    """``host._launch``: the first call of a key goes through the autotuner; later calls of that key
    launch the chosen configuration directly — its pre-hook included (a 32-row configuration needs the
    descriptors' block shapes set to 32 rows; the interpreter's 16-row default would hide a skipped
    hook) — and give bitwise the same result; a new key (causal) goes through the autotuner again.
    (The spy sits on this test's own autotuner object.)"""
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate
    from flashproof.kernels.attention.triton import host
    tuned = host.tuners({"fwd": [(32, 32, 4, 1)]})
    runs = []
    real_run = tuned.fwd.run
    monkeypatch.setattr(tuned.fwd, "run", lambda *a, **kw: runs.append(1) or real_run(*a, **kw))
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 70, 32, generator=g) for _ in range(3))

    def run(**kw):
        call = validate(q, k, v, backend="triton", **kw)
        return host.forward(q, k, v, call, dispatch.plan(call, dispatch.device_of(q)), tuned=tuned)
    first, second = run(), run()
    assert len(runs) == 1, "the second call of a known key should not enter the autotuner"
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    run(causal=True)
    assert len(runs) == 2, "a new key goes through the autotuner"
