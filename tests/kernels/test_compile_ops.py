"""torch.compile, torch.export and torch.library.opcheck of the ``flashproof::attention`` custom ops.

``fullgraph=True`` makes any graph break an error, so each compile test is also the no-break check;
compiled and eager runs call the same op bodies, so their results (out, lse and the gradients) must be
bitwise equal. The calls cover what must travel through the op schema: a BlockSparseMask, varlen
``cu_seqlens`` (whose values the op body reads), a window, GQA, and the SDPA front with a key-padding
mask and a float additive mask. Most compile with ``aot_eager`` (Dynamo plus AOT autograd: the fake
implementations and the registered backward are traced, no C++ compiler runs); one compiles with
inductor. Dropout with ``dropout_seed=None`` compiles with fullgraph too (the seed is a traced
``torch.randint``), with aot_eager (bitwise equal to eager after the same ``torch.manual_seed``) and
with inductor (a fresh seed per call)."""
from __future__ import annotations

import pytest
import torch

from flashproof.kernels import BlockSparseMask, attention, scaled_dot_product_attention
from flashproof.kernels.attention.op import attention_backward_op, attention_op


def _qkv(B=1, Hq=2, Hkv=2, Nq=40, Nk=40, D=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, Hq, Nq, D, generator=g, dtype=dtype), torch.randn(B, Hkv, Nk, D, generator=g, dtype=dtype),
            torch.randn(B, Hkv, Nk, D, generator=g, dtype=dtype))


def _cu(*v, device="cpu"):
    return torch.tensor(v, dtype=torch.int32, device=device)


_TILES = torch.tensor([[True, False, True], [True, True, False], [False, True, True]])[None, None]

#: name -> (fn(q, k, v, tuning) -> (out, lse), _qkv's shape arguments). tuning: "first" on CUDA (one
#: configuration per launch key: the autotuner would compile every configuration of every call here)
CALLS = {
    "causal": (lambda q, k, v, t="autotune": attention(q, k, v, causal=True, return_lse=True, tuning=t), {}),
    "window_gqa": (lambda q, k, v, t="autotune": attention(q, k, v, window=(7, 3), return_lse=True, tuning=t),
                   {"Hq": 4, "Hkv": 2, "Nk": 50}),
    "block_sparse": (lambda q, k, v, t="autotune": attention(q, k, v, mask=BlockSparseMask(_TILES.to(q.device), 16, 16),
                                                             return_lse=True, tuning=t), {}),
    "varlen": (lambda q, k, v, t="autotune": attention(q, k, v, causal=True,
                                                       cu_seqlens_q=_cu(0, 9, 9, 40, device=q.device),
                                                       cu_seqlens_k=_cu(0, 12, 20, 40, device=q.device),
                                                       return_lse=True, tuning=t), {}),
    "sdpa_key_padding": (lambda q, k, v, t="autotune": scaled_dot_product_attention(
        q, k, v, attn_mask=(torch.arange(40, device=q.device) < 29)[None, None, None], enable_gqa=True,
        return_lse=True, tuning=t), {"Hq": 4, "Hkv": 1}),
    "sdpa_float_mask": (lambda q, k, v, t="autotune": scaled_dot_product_attention(
        q, k, v, attn_mask=torch.linspace(-2, 1, 40 * 50, device=q.device).view(40, 50), return_lse=True,
        tuning=t), {"Nk": 50}),
    "sdpa_top_left_causal": (lambda q, k, v, t="autotune": scaled_dot_product_attention(
        q, k, v, is_causal=True, return_lse=True, tuning=t), {"Nq": 20, "Nk": 45}),
}


def _run(fn, shape, seed=0, device="cpu"):
    q, k, v = (t.to(device).requires_grad_() for t in _qkv(**shape, seed=seed))
    out, lse = fn(q, k, v)
    g = torch.Generator().manual_seed(seed + 1)
    dout, dlse = (torch.randn(t.shape, generator=g).to(device) for t in (out, lse))
    dlse = torch.where(torch.isfinite(lse), dlse, 0)
    grads = torch.autograd.grad((out, lse), (q, k, v), (dout, dlse))
    return (out.detach(), lse.detach(), *grads)


def _assert_equal(got, want):
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        assert torch.equal(a, b), f"{name} differs from eager (max |diff| {(a - b).abs().max().item():.3g})"


@pytest.mark.parametrize("name", CALLS)
def test_compile_fullgraph_matches_eager(name):
    fn, shape = CALLS[name]
    torch._dynamo.reset()
    _assert_equal(_run(torch.compile(fn, fullgraph=True, backend="aot_eager"), shape), _run(fn, shape))


def test_compile_inductor_fullgraph_with_dynamic_lengths():
    """Inductor, and a second length through the same compiled function (dynamic shapes: the fake
    implementation's shapes follow the inputs')."""
    fn, shape = CALLS["causal"]
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, dynamic=True)
    for n in (40, 23):
        s = dict(shape, Nq=n, Nk=n)
        _assert_equal(_run(compiled, s), _run(fn, s))


def test_compile_fullgraph_with_a_bias_gradient_matches_eager():
    """A float mask that requires grad (the SDPA front, a (Nq, 1) bias broadcast over keys): the compiled
    call's dbias equals eager's bitwise, with the q, k, v gradients."""
    def grads(fn):
        q, k, v = (t.requires_grad_() for t in _qkv(Nk=50))
        bias = torch.linspace(-2, 1, 40, dtype=torch.float32).view(40, 1).requires_grad_()
        out = fn(q, k, v, bias)
        return (out.detach(), *torch.autograd.grad(out, (q, k, v, bias), torch.ones_like(out)))

    fn = lambda q, k, v, b: scaled_dot_product_attention(q, k, v, attn_mask=b.expand(40, 50))  # noqa: E731
    torch._dynamo.reset()
    got, want = grads(torch.compile(fn, fullgraph=True, backend="aot_eager")), grads(fn)
    for name, a, b in zip(("out", "dq", "dk", "dv", "dbias"), got, want):
        assert torch.equal(a, b), name
    assert want[-1].shape == (40, 1) and want[-1].abs().sum() > 0


DROPOUT_CALLS = {
    "attention_seed_none": (lambda q, k, v: attention(q, k, v, causal=True, dropout_p=0.3, return_lse=True), {}),
    "sdpa_dropout": (lambda q, k, v: scaled_dot_product_attention(q, k, v, dropout_p=0.25, enable_gqa=True,
                                                                  return_lse=True), {"Hq": 4, "Hkv": 2, "Nk": 33}),
}


@pytest.mark.parametrize("name", DROPOUT_CALLS)
def test_compile_fullgraph_with_dropout_and_no_seed_matches_eager(name):
    """dropout_seed=None: the seed is a tensor drawn in front of the op (``dropout.seed_tensor``), so
    fullgraph traces it; under aot_eager the draw runs as in eager, so after the same
    ``torch.manual_seed`` the compiled call drops the same pairs (out, lse and gradients bitwise)."""
    fn, shape = DROPOUT_CALLS[name]
    torch._dynamo.reset()
    q, k, v = _qkv(**shape)
    # fullgraph alone is not the check everywhere: torch 2.13 traces a Tensor.item() under fullgraph
    # (an unbacked int), where the default mode breaks the graph there; explain counts the breaks
    assert torch._dynamo.explain(fn)(q, k, v).graph_break_count == 0
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    torch.manual_seed(11)
    got = _run(compiled, shape)
    torch.manual_seed(11)
    want = _run(fn, shape)
    _assert_equal(got, want)
    torch.manual_seed(12)
    assert not torch.equal(_run(fn, shape)[0], want[0])  # another seed drops other pairs


def test_compile_inductor_fullgraph_with_dropout_draws_a_fresh_seed_per_call():
    """Inductor, fullgraph, dropout_seed=None: no graph break, and each call draws its own seed (two
    calls differ; both differ from p = 0); a given seed matches eager bitwise."""
    torch._dynamo.reset()
    q, k, v = _qkv()
    fresh = torch.compile(lambda q, k, v: attention(q, k, v, dropout_p=0.3), fullgraph=True)
    a, b = fresh(q, k, v), fresh(q, k, v)
    assert not torch.equal(a, b)
    assert not torch.equal(a, attention(q, k, v))
    fixed = torch.compile(lambda q, k, v: attention(q, k, v, dropout_p=0.3, dropout_seed=5), fullgraph=True)
    assert torch.equal(fixed(q, k, v), attention(q, k, v, dropout_p=0.3, dropout_seed=5))


def test_the_compiled_graph_holds_one_op_per_direction():
    """The kernels' hosts are not traced: the forward graph is the custom op (no aten attention ops)."""
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    torch._dynamo.reset()
    q, k, v = _qkv()
    torch.compile(lambda q, k, v: attention(q, k, v, causal=True), fullgraph=True, backend=backend)(q, k, v)
    assert any("flashproof.attention" in t for t in seen), seen
    assert not any("matmul" in t or "softmax" in t for t in seen), seen


class _Block(torch.nn.Module):
    def __init__(self, tuning="autotune"):
        super().__init__()
        self.tuning = tuning

    def forward(self, q, k, v, cu_q, cu_k):
        return attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, tuning=self.tuning)


def test_export_runs_and_matches_eager():
    q, k, v = _qkv()
    cu_q, cu_k = _cu(0, 9, 9, 40), _cu(0, 12, 20, 40)
    ep = torch.export.export(_Block(), (q, k, v, cu_q, cu_k))
    assert any("flashproof.attention" in str(n.target) for n in ep.graph.nodes)
    assert torch.equal(ep.module()(q, k, v, cu_q, cu_k), _Block()(q, k, v, cu_q, cu_k))
    cu_q2 = _cu(0, 20, 30, 40)  # other values, same shapes: read by the op body at run time
    assert torch.equal(ep.module()(q, k, v, cu_q2, cu_k), _Block()(q, k, v, cu_q2, cu_k))


def _op_args(q, k, v, mask=None, bias=None, tiles=None, block=(0, 0), cu=(None, None), scale=None, window=(None, None),
             causal=False, tuning="autotune", bias_grad=False):
    return (q, k, v, mask, bias, tiles, *block, *cu, scale, *window, causal, False, True, "auto", tuning, "", 0.0,
            None, bias_grad)


def _opcheck_cases():
    q, k, v = (t.requires_grad_() for t in _qkv(Nq=24, Nk=33))
    qg, kg, vg = (t.requires_grad_() for t in _qkv(Hq=4, Hkv=2, Nq=17, Nk=17))
    qs, ks, vs = (t.requires_grad_() for t in _qkv(Nq=48, Nk=48))
    qv, kv, vv = (t.requires_grad_() for t in _qkv(Nq=30, Nk=36))
    g = torch.Generator().manual_seed(7)
    return {
        "plain": _op_args(q, k, v),
        "causal_gqa": _op_args(qg, kg, vg, causal=True),
        "window_scale": _op_args(q, k, v, window=(5, 2), scale=0.3),
        "bool_mask": _op_args(q, k, v, mask=torch.rand(1, 2, 24, 33, generator=g) < 0.5),
        "bias": _op_args(q, k, v, bias=torch.randn(1, 1, 24, 33, generator=g)),
        "bias_grad": _op_args(q, k, v, bias=torch.randn(1, 2, 24, 1, generator=g).expand(1, 2, 24, 33).requires_grad_(),
                              bias_grad=True),
        "block_sparse": _op_args(qs, ks, vs, tiles=_TILES, block=(16, 16)),
        "varlen": _op_args(qv, kv, vv, cu=(_cu(0, 10, 30), _cu(0, 6, 36)), causal=True),
    }


@pytest.mark.parametrize("name", list(_opcheck_cases()))
def test_opcheck_forward(name):
    torch.library.opcheck(attention_op, _opcheck_cases()[name])


def test_opcheck_backward():
    q, k, v = _qkv(Nq=24, Nk=33)
    out, lse = attention_op(*_op_args(q, k, v, causal=True))
    g = torch.Generator().manual_seed(3)
    dout, dlse = torch.randn(out.shape, generator=g), torch.randn(lse.shape, generator=g)
    rest = _op_args(q, k, v, causal=True)[3:]
    torch.library.opcheck(attention_backward_op, (q, k, v, out, lse, dout, dlse, *rest))


def test_opcheck_backward_with_the_bias_gradient():
    q, k, v = _qkv(Nq=24, Nk=33)
    bias = torch.randn(2, 24, 33, generator=torch.Generator().manual_seed(4))
    args = _op_args(q, k, v, bias=bias, bias_grad=True)
    out, lse = attention_op(*args)
    g = torch.Generator().manual_seed(3)
    dout, dlse = torch.randn(out.shape, generator=g), torch.randn(lse.shape, generator=g)
    dq, dk, dv, dbias = attention_backward_op(q, k, v, out, lse, dout, dlse, *args[3:])
    assert dbias.shape == bias.shape and dbias.abs().sum() > 0
    torch.library.opcheck(attention_backward_op, (q, k, v, out, lse, dout, dlse, *args[3:]))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["causal", "window_gqa", "block_sparse", "varlen", "sdpa_key_padding"])
def test_cuda_compile_fullgraph_matches_eager(name):
    """The same calls on CUDA tensors (the Triton kernels through the op), inductor, fullgraph."""
    fn, shape = CALLS[name]
    first = lambda q, k, v: fn(q, k, v, "first")  # noqa: E731
    torch._dynamo.reset()
    _assert_equal(_run(torch.compile(first, fullgraph=True), shape, device="cuda"), _run(first, shape, device="cuda"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_compile_fullgraph_with_a_float_mask_and_its_gradient():
    """A float mask (the Triton kernels' bias) given as an input (made inside the graph, inductor's own
    linspace could round it differently from eager's), requiring grad: inductor, fullgraph, bitwise eager."""
    def grads(fn):
        q, k, v = (t.cuda().requires_grad_() for t in _qkv(Nk=50))
        bias = torch.linspace(-2, 1, 40 * 50, device="cuda").view(40, 50).requires_grad_()
        out, lse = fn(q, k, v, bias)
        return (out.detach(), lse.detach(), *torch.autograd.grad(out, (q, k, v, bias), torch.ones_like(out)))

    fn = lambda q, k, v, b: scaled_dot_product_attention(q, k, v, attn_mask=b, return_lse=True,  # noqa: E731
                                                         tuning="first")
    torch._dynamo.reset()
    got, want = grads(torch.compile(fn, fullgraph=True)), grads(fn)
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv", "dbias"), got, want):
        assert torch.equal(a, b), name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_compile_fullgraph_with_dropout_and_no_seed():
    """CUDA tensors, inductor, fullgraph, dropout_seed=None: no graph break, a fresh seed per call, and
    with a given seed the compiled call equals eager bitwise."""
    torch._dynamo.reset()
    q, k, v = (t.cuda() for t in _qkv())
    fresh = torch.compile(lambda q, k, v: attention(q, k, v, dropout_p=0.3, tuning="first"), fullgraph=True)
    assert not torch.equal(fresh(q, k, v), fresh(q, k, v))
    fixed = lambda q, k, v: attention(q, k, v, dropout_p=0.3, dropout_seed=5, tuning="first")  # noqa: E731
    assert torch.equal(torch.compile(fixed, fullgraph=True)(q, k, v), fixed(q, k, v))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_export_runs_and_matches_eager():
    """torch.export of a module calling attention() on CUDA tensors (varlen: the op body reads cu_seqlens
    at run time), and the exported program equal to eager."""
    q, k, v = (t.cuda() for t in _qkv())
    cu_q, cu_k = _cu(0, 9, 9, 40, device="cuda"), _cu(0, 12, 20, 40, device="cuda")
    block = _Block("first")
    ep = torch.export.export(block, (q, k, v, cu_q, cu_k))
    assert torch.equal(ep.module()(q, k, v, cu_q, cu_k), block(q, k, v, cu_q, cu_k))
    cu_q2 = _cu(0, 20, 30, 40, device="cuda")
    assert torch.equal(ep.module()(q, k, v, cu_q2, cu_k), block(q, k, v, cu_q2, cu_k))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_opcheck():
    for name, args in _opcheck_cases().items():
        cuda = tuple(a.detach().cuda().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                     for a in args)
        cuda = cuda[:17] + ("first",) + cuda[18:]  # tuning: one configuration per launch key
        torch.library.opcheck(attention_op, cuda)
