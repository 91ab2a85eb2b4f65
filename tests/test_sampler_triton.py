"""The Triton backend (``kernels/sampler_triton.py``) gives the reference's tokens bit for bit and raises the
same errors: coupled tests under TRITON_INTERPRET=1 on the CPU (small vocabularies and a small chunk so
that the two-level scan crosses many chunks; the interpreter is slow), on CUDA when present. The
compile for sm_90 without a GPU is in test_sampler_aot.py."""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings, strategies as st

from test_sampler_coupled import Problem, build, check_coupled, sampler_problems, smallest_residual_problem
from test_sampler_validation import CASES, good

from flashproof.kernels import sampler_triton
from flashproof.kernels.sampler import SamplerUniforms, rejection_sample

pytestmark = pytest.mark.skipif(not sampler_triton.available(), reason="needs triton")
INTERP = os.environ.get("TRITON_INTERPRET") == "1"
needs_interp = pytest.mark.skipif(not INTERP, reason="CPU run needs TRITON_INTERPRET=1")
SMALL = sampler_triton.TritonConfig(chunk=256, block=64, num_warps=4)  # V = 1030 spans 5 chunks, 2049 9
TINY = sampler_triton.TritonConfig(chunk=4, block=2, num_warps=1, num_stages=1)  # V = 17 spans 5 chunks
FAMILIES = ["u_edges", "draft_zero", "equal", "disjoint", "sentinel", "one_hot", "greedy"]


@needs_interp
@settings(max_examples=20)
@given(sampler_problems(vocab=st.sampled_from([1, 2, 3, 17, 256, 257, 2049])), st.sampled_from(["full", "read"]))
def test_triton_coupled_interpreter(pr, check):
    check_coupled(pr, backend="triton", check=check, triton_config=SMALL)


@needs_interp
@pytest.mark.parametrize("check", ["full", "read"])
@pytest.mark.parametrize("family", FAMILIES)
def test_triton_families_interpreter(family, check):
    check_coupled(build(len(family), 4, 3, 1030, zeros=0.3, **{family: True}), backend="triton", check=check,
                  triton_config=SMALL)


@needs_interp
@pytest.mark.parametrize("family", FAMILIES)
def test_triton_many_chunks_interpreter(family):
    """Chunks of 4 entries: the crossing chunk, empty chunks (zeros = 0.8) and the ragged last chunk."""
    for seed in range(2):
        pr = build(seed * 31 + len(family), 3, 3, 17, zeros=0.8, **{family: True})
        check_coupled(pr, backend="triton", check="read" if seed % 2 else "full", triton_config=TINY)


@needs_interp
@pytest.mark.parametrize("u", [0.0, 0.5, 0.5 - 2.0 ** -31, 0.75])
def test_triton_threshold_on_a_chunk_boundary(u):
    """Mass 1/8 on tokens 0-3 and 8-11 of V = 16 (chunks of 4): chunk 1 is all zeros. At u = 0.5 the
    threshold equals the running total at the end of chunk 0, so chunk 1 counts too and the draw is
    token 8; at u = 0 the zero chunks before the first mass are skipped. Bonus draws (K = 0) and
    residual draws (the same row as the residual of a rejected one-hot draft) are both checked."""
    V = 16
    row = torch.zeros(V, dtype=torch.float32)
    row[0:4] = row[8:12] = 1 / 8
    shifted = torch.roll(row, 4)  # zeros in chunk 0: the first mass is in chunk 1
    for pb in (row, shifted):
        u_ = SamplerUniforms(torch.zeros(1, 0, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                             torch.tensor([u], dtype=torch.float64))
        pr = Problem(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(1, 0, V), torch.zeros(1, 0, V), pb[None],
                     torch.zeros(1, dtype=torch.int64), u_, torch.zeros(1, dtype=torch.bool))
        for check in ("full", "read"):
            check_coupled(pr, backend="triton", check=check, triton_config=TINY)


@needs_interp
def test_triton_empty_residual_draws_from_target():
    """p_draft = p_target and the drafted token has probability 0 under both: it is rejected and the
    residual is empty, so the draw comes from p_target (stated policy), summed over many chunks."""
    V = 19
    g = torch.Generator().manual_seed(4)
    pt = torch.rand(4, 2, V, generator=g, dtype=torch.float64)
    pt[..., :6] = 0  # tokens 0-5 impossible; chunks of 4: chunk 0 empty, chunk 1 half empty
    pt = (pt / pt.sum(-1, keepdim=True)).float()
    ids = torch.tensor([[0, 1], [5, 2], [3, 3], [4, 0]])  # position 0: a p = q = 0 token, always rejected
    for seed in range(3):
        u = SamplerUniforms(torch.rand(4, 2, generator=g, dtype=torch.float64),
                            torch.rand(4, generator=g, dtype=torch.float64),
                            torch.rand(4, generator=g, dtype=torch.float64))
        pr = Problem(ids, pt.clone(), pt, torch.softmax(torch.randn(4, V, generator=g), -1), torch.full((4,), 2), u,
                     torch.zeros(4, dtype=torch.bool))
        check_coupled(pr, backend="triton", check="read" if seed % 2 else "full", triton_config=TINY)
        out = rejection_sample(*pr[:4], uniforms=u, backend="triton", triton_config=TINY)
        assert (out.num_accepted == 0).all() and (out.tokens[:, 0] >= 6).all()


@needs_interp
def test_triton_default_config_interpreter():
    check_coupled(build(7, 2, 2, 5000, zeros=0.3), backend="triton")


ERROR_CASES = [c for c in CASES if c[0] != "check-mode"]


@needs_interp
@pytest.mark.parametrize("check", ["full", "read"])
@pytest.mark.parametrize("name,mutate,kw,exc,fragment", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_triton_bad_input_is_an_error(name, mutate, kw, exc, fragment, check):
    """The validation table through the Triton backend. In read mode a bad entry in a row that is not
    read is not an error: then the tokens must still equal the torch backend's."""
    args = mutate(good())
    call = lambda be: rejection_sample(args["draft_token_ids"], args["p_draft"], args["p_target"],  # noqa: E731
                                       args["p_bonus"], check=check, backend=be,
                                       **{"generator": torch.Generator().manual_seed(3), **kw})
    try:
        torch_out = call("torch")
    except (ValueError, TypeError) as e:
        with pytest.raises(type(e)) as got:
            call("triton")
        assert fragment in str(got.value) or check == "read", str(got.value)
        assert str(got.value) == str(e)
        return
    assert check == "read", "full mode must reject every table case"
    out = call("triton")
    assert torch.equal(out.tokens, torch_out.tokens) and torch.equal(out.num_accepted, torch_out.num_accepted)


@needs_interp
@pytest.mark.parametrize("check", ["full", "read"])
def test_triton_unread_positions_may_hold_anything(check):
    a = good()
    a["p_target"][0, 1] = float("nan")
    a["p_draft"][0, 1] = -1.0
    a["draft_token_ids"][0, 1] = 10 ** 6
    kw = dict(num_draft_tokens=torch.tensor([1, 2, 2]), uniforms=SamplerUniforms(
        torch.rand(3, 2, dtype=torch.float64), torch.rand(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64)))
    out = rejection_sample(a["draft_token_ids"], a["p_draft"], a["p_target"], a["p_bonus"], check=check,
                           backend="triton", **kw)
    ref = rejection_sample(a["draft_token_ids"], a["p_draft"], a["p_target"], a["p_bonus"], check=check,
                           backend="torch", **kw)
    assert torch.equal(out.tokens, ref.tokens) and int(out.tokens[0, 2]) == -1


@needs_interp
def test_triton_read_mode_skips_unread_rows_full_mode_does_not():
    """A NaN in the bonus row of a request that rejects: read mode never reads it, full mode raises."""
    a = good()
    u = SamplerUniforms(torch.full((3, 2), 0.999), torch.zeros(3), torch.zeros(3))
    a["p_target"] = a["p_target"].clone()
    a["p_target"][:, :, :] = 1.0 / 6
    a["p_draft"] = torch.zeros_like(a["p_draft"])
    a["p_draft"][..., 0] = 1.0  # p_draft(x) = 1 at x = 0 vs p_target = 1/6: reject at position 0 (u = .999)
    a["draft_token_ids"] = torch.zeros_like(a["draft_token_ids"])
    a["p_bonus"] = a["p_bonus"].clone()
    a["p_bonus"][1, 3] = float("nan")
    args = (a["draft_token_ids"], a["p_draft"], a["p_target"], a["p_bonus"])
    for be in ("torch", "triton"):
        out = rejection_sample(*args, uniforms=u, check="read", backend=be)
        assert (out.num_accepted == 0).all() and (out.tokens[:, 0] > 0).all()
        with pytest.raises(ValueError, match="NaN"):
            rejection_sample(*args, uniforms=u, check="full", backend=be)


def test_triton_backend_refuses_to_run_where_it_cannot():
    pr = build(0, 2, 2, 8)
    if INTERP or torch.cuda.is_available():
        pytest.skip("triton can run here")
    with pytest.raises(RuntimeError, match="triton"):
        check_coupled(pr, backend="triton")


def test_auto_backend_is_torch_on_cpu_tensors():
    from flashproof.kernels.sampler import _resolve_backend
    assert _resolve_backend("auto", torch.zeros(1, 1, 1)) == "torch"
    with pytest.raises(ValueError, match="backend"):
        _resolve_backend("cuda", torch.zeros(1, 1, 1))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@settings(max_examples=10)
@given(sampler_problems(max_batch=8), st.sampled_from(["full", "read"]))
def test_triton_coupled_cuda(pr, check):
    """CUDA tensors through whatever TRITON_INTERPRET says (conftest defaults it to 1: the interpreter);
    the compiled kernels on CUDA are test_sampler_aot.py::test_compiled_kernels_on_cuda_match_reference."""
    check_coupled(pr, "cuda", backend="triton", check=check)


@needs_interp
def test_triton_api_variants_match_torch():
    """Arguments the coupled problems do not vary: greedy as a plain bool, uniforms from a generator,
    float32 uniforms, num_draft_tokens omitted, rows with a padded row stride, rows stored transposed
    (stride along V ≠ 1: copied), fp64 and bf16 rows."""
    g = torch.Generator().manual_seed(8)
    B, K, V = 3, 3, 40
    big = torch.softmax(torch.randn(B, K, V + 8, generator=g), -1)[..., :V]
    pt = big / big.sum(-1, keepdim=True)  # row stride V + 8
    pd = torch.softmax(torch.randn(B, K, V, generator=g), -1)
    pd_t = pd.transpose(1, 2).contiguous().transpose(1, 2)  # same values, stride along V = K
    pb = torch.softmax(torch.randn(B, V, generator=g), -1)
    ids = torch.randint(0, V, (B, K), generator=g)
    u32 = SamplerUniforms(torch.rand(B, K, generator=g), torch.rand(B, generator=g), torch.rand(B, generator=g))
    calls = [dict(greedy=True), dict(generator=7), dict(uniforms=u32), dict(uniforms=u32, greedy=torch.tensor(
        [True, False, True])), dict(uniforms=u32, num_draft_tokens=torch.tensor([3, 0, 1], dtype=torch.int32))]
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        args = (ids, pd_t.to(dtype), pt.to(dtype), pb.to(dtype))
        for kw in calls:
            outs = []
            for be in ("torch", "triton"):
                kw2 = dict(kw, generator=torch.Generator().manual_seed(kw["generator"])) if "generator" in kw else kw
                outs.append(rejection_sample(*args, backend=be, triton_config=SMALL if be == "triton" else None,
                                             **kw2))
            assert torch.equal(outs[0].tokens, outs[1].tokens), (dtype, kw)
            assert torch.equal(outs[0].num_accepted, outs[1].num_accepted), (dtype, kw)


@needs_interp
@pytest.mark.parametrize("eps,u_res", [(2.0 ** -40, 0.0), (2.0 ** -41, 0.5)], ids=["2^-40", "2^-41"])
def test_triton_residual_weight_boundary(eps, u_res):
    """The empty-residual boundary (see test_sampler_coupled): max residual 2^-40 is one unit of W,
    2^-41 is empty and falls back to p_target; the Triton backend must agree with the reference."""
    check_coupled(smallest_residual_problem(torch.float32, eps, u_res), backend="triton", triton_config=TINY)
