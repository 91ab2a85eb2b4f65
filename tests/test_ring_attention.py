"""ring_attention on gloo ranks (CPU): forward and gradients judged by the fuzzer's own harness.

One fork per world size (2, 3, 4) runs every case inside: each rank builds the same full problem
(``flashproof.fuzz.problem.build``), the ring target below shards it, runs ``ring_attention`` and
gathers the results, and ``flashproof.fuzz.checks.examine`` judges out, lse, dq, dk, dv against the
float64 oracle under the one tolerance rule (``flashproof/fuzz/tolerance.py``), as it judges the
single-process ``attention()``. The world-4 fork also runs a hypothesis campaign over shapes,
families, dtypes, layouts and world sizes 1–4 (prefix subgroups), derandomised so that every rank
draws the same examples in the same order, and checks gradients through the returned lse.
Rank 0 writes the findings to a file; the tests here read it.
"""
from __future__ import annotations

import os
import socket
import traceback
from datetime import timedelta
from typing import NamedTuple

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from flashproof.fuzz.problem import ProblemSpec

WORLDS = (2, 3, 4)
LAYOUTS = ("contiguous", "zigzag")


class Case(NamedTuple):
    name: str
    spec: ProblemSpec
    dtype: str
    layout: str


def _cases() -> list:
    shapes = {
        "uneven": dict(batch=2, heads_q=3, heads_kv=3, n_q=24, n_k=24, d=8, dv=8),
        "gqa-dv": dict(batch=1, heads_q=4, heads_kv=2, n_q=24, n_k=24, d=8, dv=4),
        "mqa-ties": dict(batch=3, heads_q=3, heads_kv=1, n_q=48, n_k=48, d=4, dv=4, ties=True, late_max=True),
    }
    dtypes = {"uneven": "fp32", "gqa-dv": "fp64", "mqa-ties": "fp16"}
    out = []
    for name, kw in shapes.items():
        for causal in (False, True):
            for layout in LAYOUTS:
                spec = ProblemSpec(**kw, causal=causal, seed=len(out))
                out.append(Case(f"{name}-{'causal' if causal else 'full'}-{layout}-{dtypes[name]}", spec,
                                dtypes[name], layout))
    return out


CASES = _cases()


# ----------------------------------------------------------------------------- in the ranks

class _Scatter(torch.autograd.Function):
    """full (B, H, N, ·), the same on every rank → this rank's shard; backward gathers the shards'
    gradients, so the full leaf gets the whole gradient on every rank."""

    @staticmethod
    def forward(ctx, x, group, layout):
        from flashproof.kernels.distributed import shard

        ctx.group, ctx.layout = group, layout
        return shard(x, world=dist.get_world_size(group), rank=dist.get_rank(group), layout=layout)

    @staticmethod
    def backward(ctx, g):
        from flashproof.kernels.distributed import gather

        return gather(g.contiguous(), group=ctx.group, layout=ctx.layout), None, None


class _Gather(torch.autograd.Function):
    """this rank's shard → the full tensor on every rank; backward keeps this rank's piece."""

    @staticmethod
    def forward(ctx, x, group, layout):
        from flashproof.kernels.distributed import gather

        ctx.group, ctx.layout = group, layout
        return gather(x.contiguous(), group=group, layout=layout)

    @staticmethod
    def backward(ctx, g):
        from flashproof.kernels.distributed import shard

        return shard(g, world=dist.get_world_size(ctx.group), rank=dist.get_rank(ctx.group), layout=ctx.layout), \
            None, None


def ring_target(group, layout):
    """A fuzz ``Target`` whose kernel is ring_attention across ``group`` (inputs and outputs full)."""
    from flashproof.fuzz.targets import KernelOut, Target, Unsupported
    from flashproof.kernels.distributed import ring_attention

    def run(c, deterministic):
        if not c.structured or c.window is not None or c.cu_seqlens_q is not None or c.q.shape[2] != c.k.shape[2]:
            raise Unsupported("ring_attention takes one square sequence, causal or not, without masks")
        q, k, v = (_Scatter.apply(t, group, layout) for t in (c.q, c.k, c.v))
        r = ring_attention(q, k, v, group=group, causal=c.causal, scale=c.scale, layout=layout, return_lse=True)
        return KernelOut(_Gather.apply(r.out, group, layout), _Gather.apply(r.lse, group, layout))

    return Target(f"ring-{layout}", "ring_attention over gloo", run, lambda device: None,
                  lambda device: frozenset({"mask", "window", "varlen", "causal_rect"}), "")


def _examine(case: Case, group) -> list:
    """Reproducers of every deviation the fuzz checks find (empty: within the rule)."""
    from flashproof.fuzz.checks import examine

    ex = examine(ring_target(group, case.layout), case.spec, case.dtype, "cpu", checks=("forward", "gradients"),
                 max_work=0)
    assert {v.name for _, v in ex.verdicts} == {"out", "lse", "dq", "dk", "dv"}, ex.verdicts
    return [d.reproducer() for d in ex.deviations]


def _lse_grads(case: Case, group) -> list:
    """Gradients of Σ dO·out + Σ g·lse (g random per row): the ring against the float64 oracle,
    judged by the same rule (baseline: the dense formula in the case's dtype)."""
    from flashproof.fuzz.checks import DTYPES
    from flashproof.fuzz.oracle import masked_attention, read_inputs
    from flashproof.fuzz.problem import build
    from flashproof.fuzz.tolerance import judge, magnitudes
    from flashproof.kernels.distributed import ring_attention

    dt = DTYPES[case.dtype]
    p = build(case.spec).rounded(dt)
    g = torch.randn(p.dout.shape[:3], generator=torch.Generator().manual_seed(7), dtype=torch.float64).to(dt)

    def dense(dtype):
        leaves = [t.to(dtype).requires_grad_() for t in read_inputs(p)]
        with torch.enable_grad():
            out, lse = masked_attention(*leaves, p.allowed, p.scale)
            return out, lse, torch.autograd.grad((out, lse), leaves, (p.dout.to(dtype), g.to(dtype)))

    o_ref, l_ref, ref = dense(torch.float64)
    _, _, base = dense(dt)
    leaves = [t.to(dt).requires_grad_() for t in (p.q, p.k, p.v)]
    shards = [_Scatter.apply(t, group, case.layout) for t in leaves]
    r = ring_attention(*shards, group=group, causal=case.spec.causal, scale=p.scale, layout=case.layout,
                       return_lse=True)
    out, lse = _Gather.apply(r.out, group, case.layout), _Gather.apply(r.lse, group, case.layout)
    got = torch.autograd.grad((out, lse), leaves, (p.dout.to(dt), g))
    mags = magnitudes(*read_inputs(p), p.dout, l_ref, p.scale)
    verdicts = [judge(n, a, b, c, dt, mags) for n, a, b, c in zip(("dq", "dk", "dv"), got, ref, base)]
    return [f"lse-gradients/{v.name}: {v.reason} (error {v.error:.3g}, bound {v.bound:.3g}) {case.name}"
            for v in verdicts if not v.ok]


def _errors(world, rank) -> dict:
    """Bad calls, each on every rank: which exception and whether its message names the problem."""
    from flashproof.kernels.distributed import ring_attention

    x = torch.zeros(1, 2, 4, 8)
    odd = torch.zeros(1, 2, 3, 8)
    calls = {
        "shard lengths differ across ranks": (lambda: ring_attention(*(torch.zeros(1, 2, 4 + 2 * (rank == 0), 8),) * 3),
                                              ValueError, "different arguments on different ranks"),
        "causal differs across ranks": (lambda: ring_attention(x, x, x, causal=rank == 0), ValueError,
                                        "different arguments on different ranks"),
        "zigzag needs an even shard": (lambda: ring_attention(odd, odd, odd, layout="zigzag"), ValueError,
                                       "positive multiple of 2"),
        "unknown layout": (lambda: ring_attention(x, x, x, layout="zig"), ValueError, "layout must be one of"),
        "gqa ratio": (lambda: ring_attention(torch.zeros(1, 3, 4, 8), x, x), ValueError, "Hq % Hkv"),
        "3-D input": (lambda: ring_attention(x[0], x, x), ValueError, "must be 4-D"),
        "dtype mismatch": (lambda: ring_attention(x, x.double(), x), TypeError, "share one dtype"),
        "q and k/v shard lengths": (lambda: ring_attention(x, torch.zeros(1, 2, 6, 8), torch.zeros(1, 2, 6, 8)),
                                    ValueError, "same shard length"),
        "group type": (lambda: ring_attention(x, x, x, group="world"), TypeError, "ProcessGroup"),
    }
    seen = {}
    for name, (call, exc, words) in calls.items():
        try:
            call()
            seen[name] = "no error"
        except Exception as e:  # noqa: BLE001 — compared below
            seen[name] = "ok" if isinstance(e, exc) and words in str(e) else f"{type(e).__name__}: {e}"
    return seen


def _retention(world, rank) -> list:
    """After a forward that keeps graphs, no block graph holds a key/value shard or a block's out/lse:
    each is a zero-stride shell (what stays is this rank's q). Returns the problems found."""
    from flashproof.kernels.distributed import ring_attention

    q, k, v = (torch.randn(1, 2, 8, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = ring_attention(q, k, v, causal=True, layout="zigzag")
    graphs = [g for step in out.grad_fn.graphs for g in step]
    problems = [] if graphs else ["no block graphs were kept"]
    for g in graphs:
        for name, t in zip(("k", "v", "out", "lse"), (*g.leaves[1:], *g.roots)):
            if t.untyped_storage().nbytes() > t.element_size():
                problems.append(f"a block graph keeps its {name} ({t.untyped_storage().nbytes()} bytes)")
    out.sum().backward()
    if out.grad_fn.graphs is not None:
        problems.append("the graphs outlive the backward")
    return problems


def _context_parallel(world, rank) -> list:
    """PyTorch's context_parallel shards buffers head-tail, which is our zigzag: our op runs on its
    shards, and its unshard gives what our gather gives. Bitwise comparisons (the ring's accuracy is
    judged by the cases above). Returns the problems found (empty: as documented)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import context_parallel_unshard

    from flashproof.kernels.distributed import gather, ring_attention, shard

    mesh = init_device_mesh("cpu", (world,))
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 8 * world, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    full = [t.clone() for t in (q, k, v)]
    problems = []
    with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
        if not all(torch.equal(t, shard(f, world=world, rank=rank, layout="zigzag")) for t, f in zip((q, k, v), full)):
            problems.append("context_parallel's shards are not the zigzag shards")
        out = ring_attention(q, k, v, causal=True, layout="zigzag", group=mesh.get_group())
        (theirs,) = context_parallel_unshard(mesh, [out], [2])
    if not torch.equal(theirs, gather(out, group=mesh.get_group(), layout="zigzag")):
        problems.append("context_parallel_unshard and gather(layout='zigzag') disagree")
    return problems


def _fuzz(world, rank, groups) -> tuple:
    """A derandomised hypothesis campaign, in lockstep on every rank: world size 1..world (prefix
    subgroups), layout, dtype and a problem from the fuzzer's own strategy. Returns (findings, the
    (world size, layout) of every example run)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from flashproof.fuzz.strategies import attention_problems

    problems = attention_problems(max_nq=48, max_nk=48, max_d=8, max_heads_kv=2, max_group=4, max_batch=2,
                                  families=("causal", "gqa", "dv", "batch", "ties", "zero_q", "late_max",
                                            "huge_logits", "noncontig"),
                                  square=True, lengths=(24, 48), dims=(2, 4, 8))
    found, ran = [], []

    @settings(max_examples=int(os.environ.get("RING_FUZZ_EXAMPLES", "10")), derandomize=True, database=None,
              deadline=None, phases=("generate",))
    @given(w=st.integers(1, world), layout=st.sampled_from(LAYOUTS), dtype=st.sampled_from(("fp32", "fp64")),
           spec=problems)
    def campaign(w, layout, dtype, spec):
        mine = []
        if rank < w:
            mine = _examine(Case(f"fuzz-w{w}", spec, dtype, layout), groups[w])
        box = [mine]
        dist.broadcast_object_list(box, src=0)   # rank 0 is in every subgroup: its verdict for all
        ran.append((w, layout))
        if box[0]:
            found.append(f"world {w}, {layout}, {dtype}: " + "; ".join(box[0]))

    campaign()
    return found, ran


def _worker(rank, world, port, path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    results = {}
    try:
        group = dist.group.WORLD
        for case in CASES:
            results[case.name] = _examine(case, group)
        for case in CASES[:4]:
            results["lse:" + case.name] = _lse_grads(case, group)
        results["errors"] = _errors(world, rank)
        results["context_parallel"] = _context_parallel(world, rank)
        results["retention"] = _retention(world, rank)
        if world == max(WORLDS):
            groups = {w: dist.new_group(list(range(w))) for w in range(1, world + 1)}
            results["fuzz"], results["fuzz_ran"] = _fuzz(world, rank, groups)
    except Exception:  # noqa: BLE001 — a harness failure is reported as such, never as a kernel finding
        results["harness"] = traceback.format_exc()
    if rank == 0:
        torch.save(results, path)
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- in pytest

def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_RUNS: dict = {}


def run_world(world: int, tmp_dir) -> dict:
    if world not in _RUNS:
        path = os.path.join(tmp_dir, f"ring-{world}.pt")
        mp.start_processes(_worker, args=(world, _port(), path), nprocs=world, start_method="fork")
        _RUNS[world] = torch.load(path)
        assert "harness" not in _RUNS[world], _RUNS[world]["harness"]
    return _RUNS[world]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("ring")
    return lambda world: run_world(world, d)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_ring_matches_the_oracle(runs, world, case):
    assert runs(world)[case.name] == []


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: c.name)
def test_gradients_through_lse(runs, world, case):
    assert runs(world)["lse:" + case.name] == []


@pytest.mark.parametrize("world", WORLDS)
def test_bad_calls_raise_clear_errors_on_every_rank(runs, world):
    seen = runs(world)["errors"]
    assert seen and all(v == "ok" for v in seen.values()), seen


@pytest.mark.parametrize("world", WORLDS)
def test_context_parallel_shards_are_zigzag(runs, world):
    assert runs(world)["context_parallel"] == []


@pytest.mark.parametrize("world", WORLDS)
def test_block_graphs_keep_no_shard(runs, world):
    assert runs(world)["retention"] == []


def test_fuzz_over_world_sizes_and_shapes(runs):
    r = runs(max(WORLDS))
    assert r["fuzz"] == []
    worlds = {w for w, _ in r["fuzz_ran"]}
    assert len(r["fuzz_ran"]) >= 10 and len(worlds) >= 3, r["fuzz_ran"]  # the campaign ran, across world sizes
