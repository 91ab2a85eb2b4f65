"""The Triton backend (``kernels/sampler/triton.py``) gives the reference's tokens bit for bit and raises the
same errors: coupled tests under TRITON_INTERPRET=1 on the CPU (small vocabularies and small programs and
cells, so that every request spans several launch-1 programs and the two-level scan crosses many cells; the
interpreter is slow), on CUDA when present. The compile for sm_90 without a GPU is in tests/sampler/test_sampler_aot.py.
Terms: a program of launch 1 covers `chunk` entries of each row it reads, in steps of `block` entries; the
integer totals are kept per cell (128 fp32 entries, one warp's share of a step; a smaller block is one cell),
and the finish kernel re-reads one cell."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from support.sampler_cases import BAD_INPUTS, SamplerCase, build, check_coupled, good, sampler_problems, \
    smallest_residual_problem

from flashproof.kernels.sampler import triton as sampler_triton
from flashproof.kernels.interpreter import interpreting
from flashproof.kernels.sampler.api import SamplerUniforms, draw_uniforms, rejection_sample

pytestmark = pytest.mark.skipif(not sampler_triton.available(), reason="needs triton")
INTERP = interpreting()
needs_interp = pytest.mark.skipif(not INTERP, reason="CPU run needs TRITON_INTERPRET=1")
SMALL = sampler_triton.TritonConfig(chunk=256, block=64, num_warps=4)  # V = 1030: 5 programs, 17 cells of 64
TINY = sampler_triton.TritonConfig(chunk=4, block=2, num_warps=1, num_stages=1)  # V = 17: 5 programs, 9 cells of 2
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
    """Programs of 4 entries, cells of 2: the crossing cell, empty cells (zeros = 0.8), the ragged last cell."""
    for seed in range(2):
        pr = build(seed * 31 + len(family), 3, 3, 17, zeros=0.8, **{family: True})
        check_coupled(pr, backend="triton", check="read" if seed % 2 else "full", triton_config=TINY)


@needs_interp
@pytest.mark.parametrize("u", [0.0, 0.5, 0.5 - 2.0 ** -31, 0.75])
def test_triton_threshold_on_a_chunk_boundary(u):
    """Mass 1/8 on tokens 0-3 and 8-11 of V = 16 (cells of 2): cells 2 and 3 are all zeros. At u = 0.5
    the threshold equals the running total at the end of cell 1, so cells 2-3 count too and the draw is
    token 8; at u = 0 the zero cells before the first mass are skipped. Bonus draws (K = 0) and
    residual draws (the same row as the residual of a rejected one-hot draft) are both checked."""
    V = 16
    row = torch.zeros(V, dtype=torch.float32)
    row[0:4] = row[8:12] = 1 / 8
    shifted = torch.roll(row, 4)  # zeros in cells 0-1 (the first program): the first mass is in cell 2
    for pb in (row, shifted):
        u_ = SamplerUniforms(torch.zeros(1, 0, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                             torch.tensor([u], dtype=torch.float64))
        pr = SamplerCase(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(1, 0, V), torch.zeros(1, 0, V), pb[None],
                     torch.zeros(1, dtype=torch.int64), u_, torch.zeros(1, dtype=torch.bool))
        for check in ("full", "read"):
            check_coupled(pr, backend="triton", check=check, triton_config=TINY)


@needs_interp
def test_triton_empty_residual_draws_from_target():
    """p_draft = p_target and the drafted token has probability 0 under both: it is rejected and the
    residual is empty, so the draw comes from p_target (stated policy): the finish kernel's fallback pass."""
    V = 19
    g = torch.Generator().manual_seed(4)
    pt = torch.rand(4, 2, V, generator=g, dtype=torch.float64)
    pt[..., :6] = 0  # tokens 0-5 impossible: cells 0-2 empty
    pt = (pt / pt.sum(-1, keepdim=True)).float()
    ids = torch.tensor([[0, 1], [5, 2], [3, 3], [4, 0]])  # position 0: a p = q = 0 token, always rejected
    for seed in range(3):
        u = SamplerUniforms(torch.rand(4, 2, generator=g, dtype=torch.float64),
                            torch.rand(4, generator=g, dtype=torch.float64),
                            torch.rand(4, generator=g, dtype=torch.float64))
        pr = SamplerCase(ids, pt.clone(), pt, torch.softmax(torch.randn(4, V, generator=g), -1), torch.full((4,), 2), u,
                     torch.zeros(4, dtype=torch.bool))
        check_coupled(pr, backend="triton", check="read" if seed % 2 else "full", triton_config=TINY)
        out = rejection_sample(*pr[:4], uniforms=u, backend="triton", triton_config=TINY)
        assert (out.num_accepted == 0).all() and (out.tokens[:, 0] >= 6).all()


@needs_interp
def test_triton_cell_search_over_several_steps():
    """V = 131200 in cells of 128 (fp32): 1025 cell totals, more than the finish kernel's 1024 per search
    step, so for u near 1 the crossing cell is found in the second step (carry and count across steps);
    3 programs per request, 32 cells per block."""
    cfg = sampler_triton.TritonConfig(chunk=65536, block=4096, num_warps=4, num_stages=1)
    for seed, u_draw in ((0, 0.9999), (1, 0.3)):
        pr = build(seed, 2, 1, 131200, ragged=False)
        u = SamplerUniforms(pr.uniforms.accept, torch.full((2,), u_draw, dtype=torch.float64),
                            torch.full((2,), u_draw, dtype=torch.float64))
        check_coupled(pr._replace(uniforms=u), backend="triton", check="full", triton_config=cfg)
        out = rejection_sample(*pr[:4], uniforms=u, backend="triton", triton_config=cfg)
        drawn = out.tokens[torch.arange(2), out.num_accepted]
        assert u_draw < 0.9 or (drawn >= 1024 * 128).all(), drawn  # in the second search step


@needs_interp
@pytest.mark.parametrize("u", [0.5, 0.5 - 2.0 ** -31, 0.75])
def test_triton_threshold_on_a_cell_boundary_in_the_second_search_step(u):
    """Bonus draw over V = 131456 in cells of 128 (1027 cells: the finish kernel's second search step holds
    cells 1024-1026): mass 1/2 on token 0 and 1/2 on token 131400 (cell 1026). At u = 0.5 the threshold
    equals the running total at the end of cells 0 … 1025, so the empty cells 1024 and 1025 (second step)
    count too and the draw is token 131400; just below 0.5 it is token 0."""
    V = 131456
    row = torch.zeros(1, V)
    row[0, 0] = row[0, 131400] = 0.5
    cfg = sampler_triton.TritonConfig(chunk=65536, block=4096, num_warps=4, num_stages=1)
    u_ = SamplerUniforms(torch.zeros(1, 0, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                         torch.tensor([u], dtype=torch.float64))
    pr = SamplerCase(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(1, 0, V), torch.zeros(1, 0, V), row,
                 torch.zeros(1, dtype=torch.int64), u_, torch.zeros(1, dtype=torch.bool))
    for check in ("full", "read"):
        check_coupled(pr, backend="triton", check=check, triton_config=cfg)
        out = rejection_sample(*pr[:4], uniforms=u_, backend="triton", check=check, triton_config=cfg)
        assert out.tokens.tolist() == [[0 if u < 0.5 else 131400]]


@needs_interp
def test_triton_empty_residual_fallback_spans_several_steps():
    """The empty-residual fallback of the finish kernel reads its row in steps of FALLBACK_BLOCK entries:
    V = 5000 takes three, and u near 1 puts the crossing in the last one (u = 0 stops in the first)."""
    V = 5000
    g = torch.Generator().manual_seed(6)
    pt = torch.softmax(torch.randn(3, 1, V, generator=g, dtype=torch.float64) * 2, -1)
    pt[..., 0] = 0  # token 0: p_target = p_draft = 0, so its draft is rejected and the residual is empty
    pt = (pt / pt.sum(-1, keepdim=True)).float()
    for u_draw in (0.0, 0.5, 1 - 2.0 ** -24):
        u = SamplerUniforms(torch.full((3, 1), 0.5, dtype=torch.float64), torch.full((3,), u_draw, dtype=torch.float64),
                            torch.zeros(3, dtype=torch.float64))
        pr = SamplerCase(torch.zeros(3, 1, dtype=torch.int64), pt.clone(), pt, pt[:, 0].clone(),
                     torch.ones(3, dtype=torch.int64), u, torch.zeros(3, dtype=torch.bool))
        check_coupled(pr, backend="triton", check="full")
        out = rejection_sample(*pr[:4], uniforms=u, backend="triton")
        assert (out.num_accepted == 0).all() and (out.tokens[:, 0] > 0).all()
        assert u_draw < 0.9 or (out.tokens[:, 0] >= 2 * sampler_triton.FALLBACK_BLOCK).all(), out.tokens


@needs_interp
@pytest.mark.parametrize("check", ["full", "read"])
def test_triton_negative_entry_in_the_drawn_draft_row(check):
    """The drawn p_draft row holds −0.125 and still sums to 1, and the gathered entries p(x), q(x) are fine:
    only the per-entry sign check can see it, in both modes (the row is read in both), on both backends."""
    a = good()
    a["p_target"] = torch.full_like(a["p_target"], 1 / 6)
    a["p_draft"] = a["p_draft"].clone()
    a["p_draft"][:, 0] = torch.tensor([0.625, 0.5, -0.125, 0.0, 0.0, 0.0])
    a["draft_token_ids"] = torch.zeros_like(a["draft_token_ids"])  # p_draft(x) = 0.625 > p_target(x): u = .999 rejects
    u = SamplerUniforms(torch.full((3, 2), 0.999, dtype=torch.float64), torch.zeros(3, dtype=torch.float64),
                        torch.zeros(3, dtype=torch.float64))
    for be in ("torch", "triton"):
        with pytest.raises(ValueError, match="negative"):
            rejection_sample(a["draft_token_ids"], a["p_draft"], a["p_target"], a["p_bonus"], uniforms=u,
                             check=check, backend=be, triton_config=TINY if be == "triton" else None)


@needs_interp
@pytest.mark.parametrize("check", ["full", "read"])
def test_triton_one_hot_draft_rejected_with_large_mass(check):
    """One-hot drafts (p_draft None) of a token holding 0.6 of p_target, rejected (u = 0.9 ≥ 0.6): the residual
    drops that token's whole mass, so a cell total that kept it (or dropped a neighbour) moves the threshold."""
    V = 40
    pt = torch.full((4, 1, V), 0.4 / (V - 1), dtype=torch.float64)
    x = torch.tensor([7, 0, 39, 20])
    pt[torch.arange(4), 0, x] = 0.6
    pt = pt.float()
    for u_draw in (0.1, 0.45, 0.7, 0.95):
        u = SamplerUniforms(torch.full((4, 1), 0.9, dtype=torch.float64), torch.full((4,), u_draw, dtype=torch.float64),
                            torch.zeros(4, dtype=torch.float64))
        pr = SamplerCase(x[:, None], None, pt, pt[:, 0].clone(), torch.ones(4, dtype=torch.int64), u,
                     torch.zeros(4, dtype=torch.bool))
        check_coupled(pr, backend="triton", check=check, triton_config=TINY)


@needs_interp
def test_triton_default_config_interpreter():
    check_coupled(build(7, 2, 2, 5000, zeros=0.3), backend="triton")


ERROR_CASES = [c for c in BAD_INPUTS if c[0] != "check-mode"]


def bad_input_case(mutate, kw, fragment, check, device="cpu", config=None) -> None:
    """One row of the validation table through the Triton backend on ``device``: the same error as the torch
    backend (same type and message), or in read mode, when the bad entry is in a row that is not read, the
    torch backend's tokens. Uniforms not given by the case are drawn on the CPU (seed 3) for both backends."""
    args = mutate(good())
    mv = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    if "uniforms" not in kw:
        kw = dict(kw, uniforms=draw_uniforms(3, 2, generator=torch.Generator().manual_seed(3)))
    kw = {k: SamplerUniforms(*map(mv, v)) if isinstance(v, SamplerUniforms) else mv(v) for k, v in kw.items()}
    rows = [mv(args[n]) for n in ("draft_token_ids", "p_draft", "p_target", "p_bonus")]
    call = lambda be: rejection_sample(*rows, check=check, backend=be,  # noqa: E731
                                       triton_config=config if be == "triton" else None, **kw)
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
@pytest.mark.parametrize("name,mutate,kw,exc,fragment", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_triton_bad_input_is_an_error(name, mutate, kw, exc, fragment, check):
    """The validation table through the Triton backend (interpreter). In read mode a bad entry in a row that
    is not read is not an error: then the tokens must still equal the torch backend's."""
    bad_input_case(mutate, kw, fragment, check)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("config", [None, SMALL], ids=["default", "small"])
@pytest.mark.parametrize("check", ["full", "read"])
@pytest.mark.parametrize("name,mutate,kw,exc,fragment", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_triton_bad_input_is_an_error_cuda(name, mutate, kw, exc, fragment, check, config):
    """The same table through the COMPILED kernels on CUDA (conftest leaves TRITON_INTERPRET unset there)."""
    bad_input_case(mutate, kw, fragment, check, "cuda", config)


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


def test_triton_backend_refuses_to_run_where_it_cannot(monkeypatch):
    """CPU tensors without TRITON_INTERPRET=1 (the api module's ``interpreting`` made to say so, whatever
    this machine's environment) are refused with the reason and the tensors' device."""
    from flashproof.kernels.sampler import api
    monkeypatch.setattr(api, "interpreting", lambda: False)
    pr = build(0, 2, 2, 8)
    assert pr.draft_token_ids.device.type == "cpu"
    with pytest.raises(RuntimeError, match=r"backend='triton' runs on CUDA tensors \(or the CPU with "
                                           r"TRITON_INTERPRET=1\); p_target is on cpu"):
        rejection_sample(*pr[:4], uniforms=pr.uniforms, backend="triton")


def test_auto_backend_is_torch_on_cpu_tensors():
    from flashproof.kernels.sampler.api import _resolve_backend
    assert _resolve_backend("auto", torch.zeros(1, 1, 1)) == "torch"
    with pytest.raises(ValueError, match="backend"):
        _resolve_backend("cuda", torch.zeros(1, 1, 1))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@settings(max_examples=10)
@given(sampler_problems(max_batch=8), st.sampled_from(["full", "read"]))
def test_triton_coupled_cuda(pr, check):
    """CUDA tensors through the compiled kernels (conftest sets TRITON_INTERPRET only on a machine without
    CUDA); tests/sampler/test_sampler_aot.py::test_compiled_kernels_on_cuda_match_reference runs them in a subprocess
    without TRITON_INTERPRET whatever the environment says, at vocabularies up to 151936."""
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


@needs_interp
def test_bench_smoke_interpreter(tmp_path, monkeypatch):
    """sampler_bench end to end on a tiny problem (times mean nothing here): every row checked for identical
    tokens, the swept candidate recorded, the choice among identical check='full' rows; and a baseline that
    disagrees makes every row 'not identical', no choice, and exit status 1."""
    import json

    from flashproof.bench import sampler as sampler_bench
    argv = ["--device", "cpu", "--batch", "2", "--k", "2", "--vocab", "300", "--reps", "1", "--warmup", "0",
            "--configs", "256/64/4/1"]
    assert sampler_bench.main(argv + ["--out", str(tmp_path / "a.json")]) == 0
    res = json.loads((tmp_path / "a.json").read_text())
    names = [r["impl"] for r in res["rows"]]
    assert res["tokens_identical"] and all(r["identical"] for r in res["rows"])
    assert {"multi-pass torch", "ours triton check=full 256/64/w4/s1",
            "ours triton check=read 256/64/w4/s1"} <= set(names)
    full = [r for r in res["rows"] if r["config"] is not None and r["check"] == "full"]
    assert len(full) == 2 and res["choice"]["full"]["config"] == min(full, key=lambda r: r["ms"])["config"]

    real = sampler_bench.multipass_sample

    def off_by_one(*a):
        tokens, n = real(*a)
        return tokens + 1, n
    monkeypatch.setattr(sampler_bench, "multipass_sample", off_by_one)
    assert sampler_bench.main(argv + ["--no-sweep", "--out", str(tmp_path / "b.json")]) == 1
    res = json.loads((tmp_path / "b.json").read_text())
    assert not res["tokens_identical"] and res["choice"] == {}
    assert not any(r["identical"] for r in res["rows"] if r["impl"].startswith("ours"))


@needs_interp
@pytest.mark.parametrize("cfg,exc", [(sampler_triton.TritonConfig(512.0, 128), ValueError),
                                     (sampler_triton.TritonConfig(100, 4), ValueError),
                                     (sampler_triton.TritonConfig(4, 8), ValueError),
                                     (sampler_triton.TritonConfig(16, 4, 3, 1), ValueError),
                                     (sampler_triton.TritonConfig(16, 4, 4, 0), ValueError),
                                     ((16, 4, 4, 1), TypeError)], ids=str)
def test_triton_config_is_checked(cfg, exc):
    pr = build(0, 2, 2, 16)
    with pytest.raises(exc, match="TritonConfig"):
        rejection_sample(*pr[:4], uniforms=pr.uniforms, backend="triton", triton_config=cfg)


@pytest.mark.parametrize("bad", [sampler_triton.TritonConfig(1024, 256, 8, 3.0),
                                 sampler_triton.TritonConfig(1024, 256, 8.0, 3),
                                 sampler_triton.TritonConfig(1024, 256, 8, True)], ids=str)
def test_triton_config_check_does_not_depend_on_history(bad):
    """A float (or bool) where an int is required is refused even right after the equal int config
    passed the check (a check cached by equality would accept it then, and refuse it on a fresh cache)."""
    good = sampler_triton.TritonConfig(*(int(v) for v in bad))
    assert good == bad and hash(good) == hash(bad)  # what an equality-keyed cache would confuse
    sampler_triton._checked(good)
    with pytest.raises(ValueError, match="TritonConfig needs"):
        sampler_triton._checked(bad)
    sampler_triton._checked(good)
    with pytest.raises(ValueError, match="TritonConfig needs"):
        sampler_triton._checked(bad)
