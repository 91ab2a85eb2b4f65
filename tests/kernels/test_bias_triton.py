"""The additive float bias (SDPA's float ``attn_mask``) in the Triton kernels, under TRITON_INTERPRET=1
on CPU at small sizes (and compiled on CUDA with ``-m gpu``): forward and gradients meet the oracle's
dense formula with the bias (``support.bias_cases``: the one tolerance rule; the formula itself is
checked against SDPA's math path in float64 by the oracle-agreement rule), for a full bias, biases
broadcast over batch or heads (stride 0), a 2-D bias, an expanded key-padding bias, −inf entries,
query rows that are −inf throughout (out 0, lse −inf, dq 0), with a boolean mask, GQA, a window and
varlen. A bias that requires grad gets dbias (dS summed over its broadcast dims), from the torch and the
Triton backward, judged by the same rule. Negative controls: the same judgement refutes the call run
without its bias and with the bias transposed over the batch. The router sends a general float mask to Triton on CUDA, never to Gluon."""
from __future__ import annotations

import pytest
import torch
from support.bias_cases import BIAS_CASES, failures, make_bias, run, verdicts

from flashproof.kernels.attention.api import validate
from flashproof.kernels.attention.dispatch import BackendUnavailable, Device, plan
from flashproof.kernels.interpreter import interpreting

H200 = Device("cuda", (9, 0), False, True, True)
interp = pytest.mark.skipif(not interpreting(), reason="the Triton kernels on CPU need TRITON_INTERPRET=1")


@interp
@pytest.mark.parametrize("bc", BIAS_CASES, ids=[c.id for c in BIAS_CASES])
def test_triton_bias_meets_the_oracle(bc):
    pytest.importorskip("triton")
    prob, b4, got = run(bc, torch.float32, "triton")
    bad = [x for x in verdicts(prob, b4, torch.float32, got) if not x.ok]
    assert not bad, failures(f"{bc.id} triton f32", bad)


@interp
def test_triton_bias_f16():
    pytest.importorskip("triton")
    bc = BIAS_CASES[2]
    prob, b4, got = run(bc, torch.float16, "triton")
    bad = [x for x in verdicts(prob, b4, torch.float16, got) if not x.ok]
    assert not bad, failures(f"{bc.id} triton f16", bad)


@interp
@pytest.mark.parametrize("control", ["no_bias", "batch_flipped"])
def test_the_judgement_refutes_a_wrong_bias(control):
    """Negative controls: the kernel given a zero bias (the bias ignored) or the bias with its batch
    entries swapped fails the judgement that the right call passes."""
    pytest.importorskip("triton")
    bc = BIAS_CASES[2]  # "batch": (B, 1, Nq, Nk) with B = 2, Hq = 2, Nq = 33, Nk = 30
    bias = make_bias(bc, 2, 2, 33, 30, torch.float32)
    masked = torch.isinf(bias)  # the −inf entries stay: only the finite values are wrong
    wrong = {"no_bias": torch.where(masked, bias, torch.zeros_like(bias)),
             "batch_flipped": torch.where(masked, bias, bias.flip(0).nan_to_num(neginf=0.0))}[control]
    prob, b4, got = run(bc, torch.float32, "triton", bias_override=wrong)
    assert any(not x.ok for x in verdicts(prob, b4, torch.float32, got)), control


GRAD_CASES = [c for c in BIAS_CASES if c.id in ("full_gqa", "batch_window_dead_rows", "2d_neg_inf_dead_rows",
                                                 "key_padding_expanded", "dead_key_tile", "varlen_causal")]


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=interp)])
@pytest.mark.parametrize("bc", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_bias_gradient_meets_the_oracle(bc, backend):
    if backend == "triton":
        pytest.importorskip("triton")
    prob, bias, got = run(bc, torch.float32, backend, bias_grad=True)
    bad = [x for x in verdicts(prob, bias, torch.float32, got) if not x.ok]
    assert not bad, failures(f"{bc.id} {backend} f32 with dbias", bad)


def test_bias_gradient_in_float64_is_exact():
    """Finite differences in float64 through the op's registered backward (torch kernels), the bias
    among the inputs (an exactness check at high precision, not a tolerance)."""
    from flashproof.kernels import attention
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, n, 3, generator=g, dtype=torch.float64).requires_grad_() for n in (4, 5, 5))
    bias = torch.randn(1, 1, 4, 5, generator=g, dtype=torch.float64)
    bias[0, 0, 1, 2] = float("-inf")
    bias.requires_grad_()
    assert torch.autograd.gradcheck(lambda *a: attention(*a[:3], bias=a[3], causal=True), (q, k, v, bias))


def test_a_zero_or_neg_inf_bias_with_a_gradient_stays_a_bias():
    """A bias of 0 / −inf entries is a boolean mask only when no gradient is asked of it: its 0 entries
    have a gradient."""
    bias = torch.zeros(1, 1, 128, 128, dtype=torch.bfloat16)
    bias[..., 100:] = float("-inf")
    q = torch.zeros(1, 2, 128, 128, dtype=torch.bfloat16)
    assert validate(q, q, q, bias=bias).bias is None
    prob = validate(q, q, q, bias=bias.requires_grad_())
    assert prob.bias is not None and prob.bias_grad and prob.requires_grad


@pytest.mark.parametrize("bc", [c for c in BIAS_CASES if c.id in ("full_gqa", "key_padding_expanded", "dead_key_tile")],
                         ids=lambda c: c.id)
def test_the_bias_oracle_agrees_with_sdpa_math_in_float64(bc):
    """The oracle's dense formula with a bias (the verified reference has none) against an independent
    float64 evaluation, torch's SDPA math path with the bias as attn_mask, by the oracle-agreement rule
    (``tolerance.agree``), out and the gradients. Cases without all −inf rows (SDPA's answer there
    is not the convention and differs by torch version), with −inf entries and a dead key tile."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flashproof.fuzz.oracle import read_inputs
    from flashproof.fuzz.tolerance import agree, magnitudes
    from support.bias_cases import _dense, problem_of

    prob, _ = problem_of(bc.case, torch.float64)
    B, Hq, Nq, Nk = prob.allowed.shape
    bias = make_bias(bc, B, Hq, Nq, Nk, torch.float64, grad=True)
    b4 = bias.detach().reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
    prob = prob._replace(allowed=prob.allowed & (b4 != float("-inf")))
    clean = read_inputs(prob)
    ours = _dense(clean, bias, prob, torch.float64)
    xs = [t.clone().requires_grad_() for t in clean]
    leaf = (bias._base if bias._base is not None else bias).detach().clone().requires_grad_()
    mask = leaf.expand(bias.shape) if bias._base is not None else leaf
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(*xs, attn_mask=mask, scale=prob.scale, enable_gqa=True)
    theirs = (out.detach(), *torch.autograd.grad(out, (*xs, leaf), prob.dout))
    assert prob.allowed.any(-1).all()
    mags = magnitudes(*clean, prob.dout, ours[1], prob.scale)
    for name, a, b in zip(("out", "dq", "dk", "dv", "dbias"), (ours[0], *ours[2:]), theirs):
        v = agree(name, a, b, mags)
        assert v.ok, v


def _prob(bias, backend="auto"):
    q = torch.zeros(1, 2, 128, 128, dtype=torch.bfloat16)
    return validate(q, q, q, bias=bias, backend=backend)


def test_a_general_float_bias_routes_to_triton_and_never_to_gluon():
    bias = torch.randn(128, 128).to(torch.bfloat16)
    route = plan(_prob(bias), H200)
    assert (route.forward, route.backward) == ("triton", "triton"), route
    assert "bias" in route.reasons[0]
    with pytest.raises(BackendUnavailable, match="bias"):
        plan(_prob(bias, "gluon"), H200)
    assert plan(_prob(None), H200).forward == "gluon"  # the same call without the bias


@pytest.mark.parametrize("bc", [c for c in BIAS_CASES if c.id in ("full_gqa", "batch_window_dead_rows",
                                                                   "key_padding_expanded", "varlen_causal")],
                         ids=lambda c: c.id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bias_meets_the_oracle(bc, dtype, backend):
    prob, b4, got = run(bc, dtype, backend, device="cuda")
    bad = [x for x in verdicts(prob, b4, dtype, got) if not x.ok]
    assert not bad, failures(f"{bc.id} {backend} {dtype} cuda", bad)


@pytest.mark.parametrize("bc", [c for c in GRAD_CASES if c.id in ("batch_window_dead_rows", "key_padding_expanded")],
                         ids=lambda c: c.id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bias_gradient_meets_the_oracle(bc, dtype, backend):
    prob, bias, got = run(bc, dtype, backend, device="cuda", bias_grad=True)
    bad = [x for x in verdicts(prob, bias, dtype, got) if not x.ok]
    assert not bad, failures(f"{bc.id} {backend} {dtype} cuda with dbias", bad)
