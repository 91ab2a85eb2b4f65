"""``flashproof.kernels.scaled_dot_product_attention`` against torch's SDPA.

Parity is judged by the one tolerance rule (``flashproof.fuzz.tolerance.judge``): ours runs in
float32; the oracle is torch's SDPA math path in float64 on the same float32-rounded inputs; the
naive baseline is the same math path in float32. lse is judged against the fuzz oracle's dense
formula (``flashproof.fuzz.oracle.masked_attention``) where the mask is boolean. Gradients in float64
are checked exactly against finite differences (``torch.autograd.gradcheck``). Rows with no allowed
key have their own test: ours returns 0, lse −inf, zero gradients (SDPA's answer there varies by
version and backend). Errors are
compared with SDPA's (the same exception type for the same bad call). The router's choice for an
additive float mask (Triton on CUDA, torch on CPU, never Gluon) is asserted on its Plan."""
from __future__ import annotations

import re
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashproof.fuzz.oracle import masked_attention
from flashproof.fuzz.tolerance import judge, magnitudes
from flashproof.kernels import AttnOut, scaled_dot_product_attention as sdpa
from flashproof.kernels.attention.api import validate
from flashproof.kernels.attention.dispatch import Device, plan

H200 = Device("cuda", (9, 0), False, True, True)


class Case(NamedTuple):
    id: str
    shape: tuple  # (B, Hq, Hkv, Nq, Nk, D, Dv); Hq = Hkv = 0 for 3-D inputs (one head)
    kw: dict      # is_causal, enable_gqa, scale
    mask: str     # "", "bool_2d", "key_padding", "bool_4d", "float", "float_inf", "zero_inf"


CASES = [
    Case("plain", (2, 2, 2, 37, 37, 16, 16), {}, ""),
    Case("causal_square", (1, 2, 2, 70, 70, 16, 16), {"is_causal": True}, ""),
    Case("causal_nq_lt_nk", (1, 2, 2, 20, 75, 16, 24), {"is_causal": True}, ""),
    Case("causal_nq_gt_nk", (1, 2, 2, 75, 20, 16, 16), {"is_causal": True}, ""),
    Case("causal_decode_1_query", (2, 2, 2, 1, 40, 16, 16), {"is_causal": True}, ""),
    Case("gqa_4_causal", (1, 8, 2, 33, 41, 16, 8), {"is_causal": True, "enable_gqa": True}, ""),
    Case("gqa_key_padding", (2, 4, 1, 9, 140, 16, 16), {"enable_gqa": True}, "key_padding"),
    Case("bool_2d", (2, 2, 2, 30, 45, 16, 16), {}, "bool_2d"),
    Case("key_padding_b11n", (3, 2, 2, 12, 150, 16, 16), {}, "key_padding"),
    Case("bool_4d_per_head", (1, 2, 2, 24, 24, 16, 16), {}, "bool_4d"),
    Case("float_additive", (2, 2, 2, 30, 45, 16, 16), {}, "float"),
    Case("float_with_neg_inf", (1, 4, 2, 40, 70, 16, 16), {"enable_gqa": True}, "float_inf"),
    Case("float_zero_or_neg_inf", (2, 2, 2, 20, 33, 16, 16), {}, "zero_inf"),
    Case("scale", (1, 2, 2, 21, 29, 16, 16), {"scale": 0.3}, ""),
    Case("scale_negative_causal", (1, 2, 2, 29, 21, 16, 16), {"scale": -0.2, "is_causal": True}, ""),
    Case("three_dim_one_head", (2, 0, 0, 17, 23, 8, 8), {"is_causal": True}, ""),
]


def _inputs(case: Case, dtype=torch.float32, seed=0):
    B, Hq, Hkv, Nq, Nk, D, Dv = case.shape
    g = torch.Generator().manual_seed(seed)
    heads_q, heads_kv = ((Hq,), (Hkv,)) if Hq else ((), ())
    q = torch.randn(B, *heads_q, Nq, D, generator=g)
    k = torch.randn(B, *heads_kv, Nk, D, generator=g)
    v = torch.randn(B, *heads_kv, Nk, Dv, generator=g)
    dout = torch.randn(B, *heads_q, Nq, Dv, generator=g)
    H = max(Hq, 1)
    mask = None
    if case.mask == "bool_2d":
        mask = torch.rand(Nq, Nk, generator=g) < 0.6
        mask[:, 0] = True  # every row keeps a key: SDPA's NaN rows are tested on their own
    elif case.mask == "key_padding":
        lens = torch.randint(1, Nk + 1, (B,), generator=g)
        mask = (torch.arange(Nk)[None] < lens[:, None])[:, None, None]  # (B, 1, 1, Nk)
    elif case.mask == "bool_4d":
        mask = torch.rand(B, H, Nq, Nk, generator=g) < 0.5
        mask[..., -1] = True
    elif case.mask == "float":
        mask = torch.randn(B, 1, Nq, Nk, generator=g)
    elif case.mask == "float_inf":
        mask = torch.randn(Nq, Nk, generator=g).masked_fill(torch.rand(Nq, Nk, generator=g) < 0.5, float("-inf"))
        mask[:, 3] = 0.5
    elif case.mask == "zero_inf":
        mask = torch.zeros(B, 1, Nq, Nk).masked_fill(torch.rand(B, 1, Nq, Nk, generator=g) < 0.4, float("-inf"))
        mask[..., 0] = 0.0
    return tuple(t.to(dtype) for t in (q, k, v, dout)) + (None if mask is None else
                                                           mask if mask.dtype == torch.bool else mask.to(dtype),)


def _math_sdpa(q, k, v, mask, dout, kw):
    """torch's SDPA math path: out and (dq, dk, dv), in the dtype of q, k, v."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    return out.detach(), torch.autograd.grad(out, (q, k, v), dout)


def _allowed(case, mask, Nq, Nk, B, H):
    """bool (B, H, Nq, Nk) of the pairs SDPA lets take part (for the lse oracle), or None for a
    general float mask."""
    a = torch.ones(B, H, Nq, Nk, dtype=torch.bool)
    if case.kw.get("is_causal"):
        a &= torch.ones(Nq, Nk, dtype=torch.bool).tril()
    if mask is None:
        return a
    if mask.dtype == torch.bool:
        return a & mask
    if case.mask == "zero_inf":
        return a & (mask == 0)
    return None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_sdpa_matches_torch_sdpa_within_the_rule(case):
    q, k, v, dout, mask = _inputs(case)
    kw = case.kw
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    res = sdpa(*leaves, attn_mask=mask, return_lse=True, **kw)
    assert isinstance(res, AttnOut)
    grads = torch.autograd.grad(res.out, leaves, dout)
    wide = [t.double() for t in (q, k, v, dout)]
    ref_out, ref_grads = _math_sdpa(*wide[:3], None if mask is None else mask if mask.dtype == torch.bool
                                    else mask.double(), wide[3], kw)
    base_out, base_grads = _math_sdpa(q, k, v, mask, dout, kw)
    four = (lambda t: t) if q.dim() == 4 else (lambda t: t.unsqueeze(1))
    D, Nq, Nk = q.shape[-1], q.shape[-2], k.shape[-2]
    scale = kw.get("scale", D ** -0.5)
    B, H = q.shape[0], (q.shape[1] if q.dim() == 4 else 1)
    allowed = _allowed(case, mask if mask is None or q.dim() == 4 else mask[:, None] if mask.dim() == 3 else mask,
                       Nq, Nk, B, H)
    lse_ref = None
    if allowed is not None:
        _, lse_ref = masked_attention(four(wide[0]), four(wide[1]), four(wide[2]), allowed, scale)
    mags = magnitudes(four(wide[0]), four(wide[1]), four(wide[2]), four(wide[3]),
                      lse_ref if lse_ref is not None else torch.zeros(0), scale)
    verdicts = [judge("out", res.out, ref_out, base_out, torch.float32, mags)]
    verdicts += [judge(n, g, r, b, torch.float32, mags) for n, g, r, b in zip(("dq", "dk", "dv"), grads, ref_grads,
                                                                            base_grads)]
    if lse_ref is not None:
        _, lse_base = masked_attention(*(four(t) for t in (q, k, v)), allowed, scale)
        verdicts.append(judge("lse", four(res.lse), lse_ref, lse_base, torch.float32, mags))
    bad = [v for v in verdicts if not v.ok]
    assert not bad, bad


GRAD_CASES = [
    Case("causal_nq_lt_nk", (1, 2, 2, 4, 7, 3, 2), {"is_causal": True}, ""),
    Case("causal_nq_gt_nk", (1, 2, 2, 7, 4, 3, 3), {"is_causal": True}, ""),
    Case("gqa_float_mask", (1, 4, 2, 5, 6, 3, 2), {"enable_gqa": True}, "float"),
    Case("key_padding_scale", (2, 2, 2, 5, 6, 3, 3), {"scale": 0.7}, "key_padding"),
    Case("float_with_neg_inf", (1, 2, 1, 5, 6, 3, 2), {"enable_gqa": True}, "float_inf"),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.id)
def test_float64_gradients_are_exact(case):
    """Finite differences in float64 (an exactness check at high precision, not a tolerance): the
    registered backward op is the derivative of the forward op."""
    q, k, v, _, mask = _inputs(case, torch.float64, seed=1)
    leaves = tuple(t.clone().requires_grad_() for t in (q, k, v))
    assert torch.autograd.gradcheck(lambda *a: sdpa(*a, attn_mask=mask, **case.kw), leaves)


def test_a_row_with_no_allowed_key_is_zero_with_lse_neg_inf():
    """SDPA's answer for such a row depends on its version and backend (NaN from the math path of
    older torch, 0 from torch 2.13's CPU paths, non-zero from cuDNN); ours is the convention: out 0,
    lse −inf, dq 0, for a boolean and for a float mask."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=g, dtype=torch.float64).requires_grad_() for _ in range(3))
    mask = torch.ones(6, 6, dtype=torch.bool)
    mask[2] = False  # query 2 may read nothing
    bias = torch.zeros(6, 6, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    bias[0, 1] = 0.25  # a general float mask (not 0 / -inf only): the bias path
    for m in (mask, bias):
        out, lse = sdpa(q, k, v, attn_mask=m, return_lse=True)
        assert (out[:, :, 2] == 0).all() and torch.isneginf(lse[:, :, 2]).all()
        assert torch.isfinite(lse[:, :, [0, 1, 3, 4, 5]]).all()
        dq, = torch.autograd.grad(out, q, torch.randn(out.shape, generator=g, dtype=out.dtype))
        assert (dq[:, :, 2] == 0).all() and torch.isfinite(dq).all()


def _qkv(Hq=2, Hkv=2, Nq=5, Nk=5):
    return torch.randn(1, Hq, Nq, 8), torch.randn(1, Hkv, Nk, 8), torch.randn(1, Hkv, Nk, 8)


# (id, args, kwargs, the exception SDPA raises, a fragment of our message that names the problem)
BAD = [
    ("gqa_without_enable_gqa", _qkv(Hq=4, Hkv=2), {}, RuntimeError, "pass enable_gqa=True"),
    ("mask_and_is_causal", _qkv(), {"attn_mask": torch.ones(5, 5, dtype=torch.bool), "is_causal": True},
     RuntimeError, "attn_mask should not be set when is_causal=True"),
    ("float_mask_other_dtype", _qkv(), {"attn_mask": torch.zeros(5, 5, dtype=torch.float64)}, RuntimeError,
     "attn_mask dtype to be bool or float or to match query dtype"),
    ("mask_does_not_broadcast", _qkv(), {"attn_mask": torch.ones(5, 4, dtype=torch.bool)}, RuntimeError,
     "attn_mask of shape (5, 4) does not broadcast to the scores (1, 2, 5, 5)"),
]


@pytest.mark.parametrize("args,kw,exc,words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_calls_raise_what_sdpa_raises(args, kw, exc, words):
    """As SDPA's math path (its reference semantics, and what its documentation states: torch 2.13's
    CPU flash path accepts attn_mask with is_causal=True, the math path raises): the same exception
    type, and a message that says what is wrong."""
    with pytest.raises(exc) as theirs, sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(*args, **kw)
    with pytest.raises(exc, match=re.escape(words)) as ours:
        sdpa(*args, **kw)
    assert type(ours.value) is type(theirs.value)


def test_dropout_p_reaches_attention():
    """dropout_p is attention()'s dropout: the same seed from torch's generator gives the same result,
    p > 0 differs from p = 0, and a bad p is refused."""
    q, k, v = _qkv()
    torch.manual_seed(5)
    a = sdpa(q, k, v, dropout_p=0.3)
    torch.manual_seed(5)
    assert torch.equal(a, sdpa(q, k, v, dropout_p=0.3))
    assert not torch.equal(a, sdpa(q, k, v))
    with pytest.raises(ValueError, match="dropout_p"):
        sdpa(q, k, v, dropout_p=1.5)


def _prob(bias, backend="auto"):
    q = torch.zeros(1, 2, 128, 64, dtype=torch.bfloat16)
    return validate(q, q, q, bias=bias, backend=backend)


def test_a_general_float_mask_routes_to_triton_on_cuda_and_torch_on_cpu():
    bias = torch.randn(128, 128).to(torch.bfloat16)
    route = plan(_prob(bias), H200)
    assert (route.forward, route.backward) == ("triton", "triton"), route
    cpu = plan(_prob(bias), Device("cpu", None, False, True, False))
    assert (cpu.forward, cpu.backward) == ("torch", "torch"), cpu


def test_a_zero_or_neg_inf_float_mask_is_a_boolean_mask_on_every_backend():
    bias = torch.zeros(128, 128, dtype=torch.bfloat16)
    bias[:, 100:] = float("-inf")
    prob = _prob(bias)
    assert prob.bias is None and prob.mask is not None and bool((prob.mask[..., :100]).all())
    assert not bool(prob.mask[..., 100:].any())
    assert plan(prob, H200).forward == "triton"


def test_the_rule_refutes_bottom_right_causal_where_sdpa_is_top_left():
    """Negative control: attention(causal=True) (bottom-right) in place of SDPA's top-left is_causal,
    with Nq < Nk, fails the same judgement the front passes."""
    case = next(c for c in CASES if c.id == "causal_nq_lt_nk")
    q, k, v, dout, _ = _inputs(case)
    from flashproof.kernels import attention

    got = attention(q, k, v, causal=True)
    ref, _ = _math_sdpa(q.double(), k.double(), v.double(), None, dout.double(), case.kw)
    base, _ = _math_sdpa(q, k, v, None, dout, case.kw)
    mags = magnitudes(q.double(), k.double(), v.double(), dout.double(), torch.zeros(0), q.shape[-1] ** -0.5)
    assert not judge("out", got, ref, base, torch.float32, mags).ok


GPU_CASES = [c for c in CASES if c.id in ("causal_nq_lt_nk", "causal_nq_gt_nk", "gqa_4_causal", "gqa_key_padding",
                                          "key_padding_b11n", "float_additive", "float_zero_or_neg_inf")]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.id)
def test_cuda_sdpa_matches_torch_sdpa_within_the_rule(case):
    """On the GPU in bf16 (the Triton/Gluon route, the general float mask included): out and the
    gradients against SDPA's math path in float64, the baseline that path in bf16."""
    q, k, v, dout, mask = (None if t is None else t.cuda() for t in _inputs(case))
    q, k, v, dout = (t.to(torch.bfloat16) for t in (q, k, v, dout))
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.to(torch.bfloat16)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = sdpa(*leaves, attn_mask=mask, tuning="first", **case.kw)  # one configuration per launch key
    grads = torch.autograd.grad(out, leaves, dout)
    wide = [t.double() for t in (q, k, v, dout)]
    ref_out, ref_grads = _math_sdpa(*wide[:3], mask if mask is None or mask.dtype == torch.bool else mask.double(),
                                    wide[3], case.kw)
    base_out, base_grads = _math_sdpa(q, k, v, mask, dout, case.kw)
    mags = magnitudes(*wide, torch.zeros(0), case.kw.get("scale", q.shape[-1] ** -0.5))
    verdicts = [judge("out", out, ref_out.cpu().double(), base_out, torch.bfloat16, mags)]
    verdicts += [judge(n, g, r.cpu(), b, torch.bfloat16, mags)
                 for n, g, r, b in zip(("dq", "dk", "dv"), grads, ref_grads, base_grads)]
    bad = [v for v in verdicts if not v.ok]
    assert not bad, bad
