"""KER-BOUNDS for the Gluon kernels: each obligation proved and each control refuted with a counterexample
(in-process, with the obligation's own bounds), each control at the access its bug touches; the Gluon
shim's own rules (the semaphores' ld.acquire / red.release address operands, an asm address it cannot
read and a packed asm refused, a branch inside a Gluon loop, an access it has no claim
for); the host's 2-D view checked; the symbolic host run launches the kernel with every partition (the
dQ writer, deterministic or not, included), at D = 64 too, on each outcome of the backward's head split,
whose S is shown to divide G before the claims use it; the records' head dims are the kernel modules', a
D = 64 mutant is refuted at D = 64 and missed by the D = 128 run, a control must be refuted at each head dim,
and a claim split by view kind needs both kinds; block-sparse: the host runs launch the sparse partitions, which
read the walk lists the fake tile_lists gives, the records check those calls where their bounds say
(A-KER-PLAN-LISTS among their assumptions), a list read one slot past the counts is refuted through the
unspecified entry it returns, a masked gl.load holds ``other`` where masked. The obligation module is imported
inside the tests, so that collecting this file registers nothing (tests/proofs/test_kernel_index_obligations.py
counts the KER- obligations it imports)."""
from __future__ import annotations

import importlib

import pytest
import z3

from flashproof.proofs.engine import core

GLUON_OBS = ("KER-BOUNDS-GLUON-VIEW", "KER-BOUNDS-GLUON-FWD", "KER-BOUNDS-GLUON-BWD")


def _module():
    importlib.import_module("flashproof.proofs.obligations.kernels.gluon_view")
    return importlib.import_module("flashproof.proofs.obligations.kernels.gluon_bounds")


def _ids():
    _module()
    return sorted(o for o in core.OBLIGATIONS if o.split("/")[0] in GLUON_OBS)


def test_every_gluon_obligation_has_controls():
    ids = _ids()
    bases = [i for i in ids if core.OBLIGATIONS[i].of is None]
    assert sorted(bases) == sorted(GLUON_OBS)
    for b in bases:
        assert any(core.OBLIGATIONS[i].of == b for i in ids), b


@pytest.mark.parametrize("oid", [
    "KER-BOUNDS-GLUON-VIEW", "KER-BOUNDS-GLUON-VIEW/bnhd-no-column-offset",
    "KER-BOUNDS-GLUON-FWD", "KER-BOUNDS-GLUON-FWD/lse-no-wg-offset", "KER-BOUNDS-GLUON-FWD/k-box-one-block-past",
    "KER-BOUNDS-GLUON-FWD/ring-slot-mod-stages-plus-one", "KER-BOUNDS-GLUON-FWD/k-view-of-q",
    pytest.param("KER-BOUNDS-GLUON-BWD", marks=pytest.mark.slow),
    "KER-BOUNDS-GLUON-BWD/dk-store-dv-row-stride", "KER-BOUNDS-GLUON-BWD/dq-stage-no-wg-columns",
    "KER-BOUNDS-GLUON-BWD/dq-reduce-one-block-past", "KER-BOUNDS-GLUON-BWD/sem-one-qblock-past",
    "KER-BOUNDS-GLUON-BWD/q-ring-slot-mod-stages-plus-one", "KER-BOUNDS-GLUON-BWD/k-box-one-block-past",
    "KER-BOUNDS-GLUON-BWD/h0-without-gs", "KER-BOUNDS-GLUON-BWD/partitions-whole-group",
    "KER-BOUNDS-GLUON-BWD/partials-hkv-heads", "KER-BOUNDS-GLUON-BWD/epilogue-whole-group",
    "KER-BOUNDS-GLUON-BWD/d64-dq-half-of-d128", "KER-BOUNDS-GLUON-BWD/d64-dk-view-of-d128"])
def test_obligation_outcome(oid):
    _module()
    ob = core.resolve_control(core.OBLIGATIONS[oid])
    out = ob.fn(core.Context(ob.bounds, 60_000, False, False))
    assert out.status == ob.expected, (oid, out.detail)
    if ob.expected == "refuted":
        assert out.counterexample


def test_controls_are_caught_where_planted():
    """Each control is refuted at the access its bug touches (stable facts: the access kind and tensor)."""
    _module()
    where = {"KER-BOUNDS-GLUON-FWD/lse-no-wg-offset": "store LSE", "KER-BOUNDS-GLUON-FWD/k-box-one-block-past":
             "tma_load K", "KER-BOUNDS-GLUON-BWD/dk-store-dv-row-stride": "store DK",
             "KER-BOUNDS-GLUON-BWD/dq-stage-no-wg-columns": "smem dq_smem[].slice1 at _bwd_wg1",
             "KER-BOUNDS-GLUON-BWD/dq-reduce-one-block-past": "tma_reduce DQ_ACC",
             "KER-BOUNDS-GLUON-BWD/sem-one-qblock-past": "deterministic=True ld SEM",
             "KER-BOUNDS-GLUON-BWD/d64-dq-half-of-d128": "D=64 causal=False deterministic=True smem dq_smem[].slice1",
             "KER-BOUNDS-GLUON-BWD/d64-dk-view-of-d128": "D=64 causal=False deterministic=True store DK",
             # the head split: h0 is wrong only with two heads per CTA (not deterministic); the partials at S > 1
             "KER-BOUNDS-GLUON-BWD/h0-without-gs": "deterministic=False tma_load Q",
             "KER-BOUNDS-GLUON-BWD/partials-hkv-heads": "store DKP",
             "KER-BOUNDS-GLUON-BWD/epilogue-whole-group": "store DKP",
             # block-sparse: each list read outside the program's row is refuted at the read itself (a list read's
             # claim is asked before the side conditions its value feeds); a bad box at the box
             "KER-BOUNDS-GLUON-FWD/sparse-kv-list-row-next-head": "sparse=True load KV_NUM at _attn_consumer_wg0_sparse",
             "KER-BOUNDS-GLUON-FWD/sparse-kv-list-one-past-count": "sparse=True load KV_IDX at _attn_load_sparse",
             # the persistent forward's schedule: a read outside the CTA's row or past its count, at the read; an
             # item's query block taken from another field, at the rows it then addresses
             "KER-BOUNDS-GLUON-FWD/sched-next-cta-row": "load SCHED_B at _attn_consumer_wg0_full>_work",
             "KER-BOUNDS-GLUON-FWD/sched-one-past-count": "load SCHED_B at _attn_load_full>_work",
             "KER-BOUNDS-GLUON-FWD/sched-m-from-h": "store LSE at _attn_consumer_wg0_full",
             "KER-BOUNDS-GLUON-FWD/ring-slot-mod-stages-plus-one": "smem k_empty.index at _attn_load_full",
             "KER-BOUNDS-GLUON-BWD/sparse-q-block-t-not-mod-2": "sparse=True tma_load Q at _bwd_load_partition_sparse",
             "KER-BOUNDS-GLUON-BWD/sparse-dq-writer-list-slot-t": "sparse=True load Q_IDX at _bwd_dq_writer_sparse",
             "KER-BOUNDS-GLUON-BWD/sparse-q-list-row-of-kv-head": "sparse=True load Q_NUM at >_attn_bwd_ws"}
    for oid, at in where.items():
        ob = core.resolve_control(core.OBLIGATIONS[oid])
        out = ob.fn(core.Context(ob.bounds, 60_000, False, False))
        assert out.status == "refuted" and at in out.counterexample["access"], (oid, out.counterexample.get("access"))


@pytest.mark.parametrize("kernel, D, det, sparse, parts, kinds", [
    ("fwd", 128, False, False, {"_attn_consumer_wg0_full", "_attn_consumer_wg1_full", "_attn_load_full"},
     {"tma_load", "tma_store", "smem", "store", "load"}),
    ("fwd", 128, False, True, {"_attn_consumer_wg0_sparse", "_attn_consumer_wg1_sparse", "_attn_load_sparse"},
     {"tma_load", "tma_store", "smem", "store", "load"}),
    ("bwd", 128, False, False, {"_bwd_wg0_full", "_bwd_wg1_full", "_bwd_load_partition", "_bwd_dq_writer_dense"},
     {"tma_load", "tma_reduce", "smem", "store"}),
    ("bwd", 64, False, False, {"_bwd_wg0_full", "_bwd_wg1_full", "_bwd_load_partition", "_bwd_dq_writer_dense"},
     {"tma_load", "tma_reduce", "smem", "store"}),
    ("bwd", 128, True, False, {"_bwd_wg0_full", "_bwd_wg1_full", "_bwd_load_partition", "_bwd_dq_writer_det_full"},
     {"tma_load", "tma_reduce", "smem", "store", "ld", "red"}),
    ("bwd", 128, False, True, {"_bwd_wg0_sparse", "_bwd_wg1_sparse", "_bwd_load_partition_sparse",
                               "_bwd_dq_writer_sparse"}, {"tma_load", "tma_reduce", "smem", "store", "load"})],
    ids=["fwd", "fwd-sparse", "bwd", "bwd-d64", "bwd-deterministic", "bwd-sparse"])
def test_the_host_run_launches_every_partition(kernel, D, det, sparse, parts, kinds):
    """Every partition runs and records its accesses, on every launch of the host call (the backward's: one for
    S = 1, dK and dV stored into empty_like's tensors, one for S > 1, into the fp32 partials; head_splits'
    parity is arithmetic, no branch; block-sparse, S = G: G = 1 or not); the deterministic backward's writer
    reads (ld.acquire) and writes (red.release) the semaphore tensor, the other writer never touches it; the
    block-sparse calls read the walk lists the host's tile_lists gave (the forward's KV lists: each consumer
    warpgroup branches on its item's empty list, so four paths; the backward's Q lists), by the forward's
    partitions (the backward's kernel top, loader and dQ writer); the forward reads its schedule."""
    gb = _module()
    p, paths = gb._run(kernel, False, deterministic=det, D=D, sparse=sparse)
    launched = [x for x in paths if not isinstance(x.result, gb.kx.Rejected)]
    # the block-sparse forward: each consumer warpgroup branches on its item's empty list (2 × 2 paths)
    assert len(launched) == (1 if kernel == "fwd" and not sparse else 4 if kernel == "fwd" else 2)
    lists = {"fwd": {"KV_NUM", "KV_IDX"}, "bwd": {"Q_NUM", "Q_IDX"}}[kernel] if sparse else set()
    assert set(p.lists) == lists
    # the persistent forward reads its schedule: the CTA's count (kernel top) and each entry's four fields
    sched = {"COUNT", "SCHED_B", "SCHED_H", "SCHED_M", "SCHED_BASE"} if kernel == "fwd" else set()
    for x in launched:
        seen = {a.where.split(">")[0] for a in x.accesses}
        assert parts <= seen, (kernel, seen)
        assert {a.kind for a in x.accesses} == kinds
        assert ({a.tensor for a in x.accesses if a.kind in ("ld", "red")} == {"SEM"}) == det
        assert {a.tensor for a in x.accesses if a.kind == "load"} == lists | sched
        if sparse:  # the entries: the forward's consumers (their first tile, col0) and loader; the backward's two
            readers = {a.where.split(">")[0] for a in x.accesses if a.kind == "load" and a.tensor.endswith("_IDX")}
            assert readers == ({"_attn_consumer_wg0_sparse", "_attn_consumer_wg1_sparse", "_attn_load_sparse"}
                               if kernel == "fwd" else
                               {"_bwd_load_partition_sparse", "_bwd_dq_writer_sparse"}), readers
    if kernel == "bwd":
        stores = [{a.tensor for a in x.accesses if a.kind == "store"} for x in launched]
        assert sorted(map(sorted, stores)) == [["DK", "DV"]] * (len(launched) // 2) + [["DKP", "DVP"]] * (
            len(launched) // 2)


def test_the_split_is_shown_to_divide_the_group():
    """G = S·GS is a fact only once each launch shows the S it passes is ≥ 1 and divides G: a head_splits
    that gives two heads per CTA whatever G's parity (S = G // 2 for an odd G ≥ 5 leaves a remainder) is
    refuted there, before any claim rests on the split."""
    gb = _module()
    over = {"head_splits": gb.kx.mutate(gb.gbwd.head_splits, "1 if deterministic else 2 - G % 2",
                                        "1 if deterministic else 2")}
    out = gb.check(core.Context({}, 60_000, False, False), "bwd", over, causal=(False,), deterministic=(False,),
                   head_dims=(64,))
    assert out.status == "refuted" and "SPLITS ≥ 1 divides G" in out.counterexample["access"], out


def test_the_semaphore_asm_addresses_its_pointer_operand():
    """semaphore.acquire_wait's ``ld.acquire … $0, [$1]`` and complete_release's ``red.release … [$1], 1``:
    each recorded at the pointer passed (operand 1 after the one output), one int32 wide."""
    from flashproof.kernels.attention.gluon import semaphore
    from flashproof.proofs.support import gluon_sym as gs, kernel_exec as kx, triton_sym as ts

    i = ts.arg("i")
    for fn, args, kind in ((semaphore.acquire_wait, dict(value=3), "ld"), (semaphore.complete_release, {}, "red")):
        (path,) = kx.execute(fn, dict(ptr=ts.Ptr("S") + i, **args), bind=gs.BIND)
        (a,) = path.accesses
        assert (a.kind, a.tensor, a.off[1]) == (kind, "S", 1)
        s = z3.Solver()
        s.add(z3.Not(a.off[0].e == i.e))
        assert s.check() == z3.unsat


def test_an_asm_address_operand_the_shim_cannot_read_is_refused():
    from flashproof.proofs.support import gluon_sym as gs, kernel_exec as kx, triton_sym as ts

    with pytest.raises(kx.Unsupported, match="address operand not modelled"):
        kx.execute(lambda P: gs.GL.inline_asm_elementwise("cp.async.bulk.prefetch.L2 [$1], 16;", "=r,l", [P], None,
                                                          False, 1), dict(P=ts.Ptr("S")))


def test_a_host_view_whose_rows_do_not_cover_the_tensor_fails_its_side_condition():
    """The host's ``dq_acc.view(B·Hq·N, D)`` is checked (rows · cols = numel): a view of half the rows fails."""
    gb = _module()
    from unittest import mock

    view = gb.gh.FakeTensor.view

    def half(self, *shape):
        return view(self, shape[0] // 2, shape[1]) if len(shape) == 2 else view(self, *shape)

    with mock.patch.object(gb.gh.FakeTensor, "view", half):
        out = gb.check(core.Context({}, 60_000, False, False), "bwd", causal=(False,))
    assert out.status == "refuted" and "DQ_ACC.view" in out.counterexample["access"], out


def test_a_packed_inline_asm_is_refused():
    """pack > 1 (which register of a pack an operand is depends on the layout) is not modelled: refused."""
    from flashproof.proofs.support import gluon_sym as gs, kernel_exec as kx, triton_sym as ts

    with pytest.raises(kx.Unsupported, match="pack = 4"):
        kx.execute(lambda P: gs.GL.inline_asm_elementwise("red.relaxed.gpu.global.add.v4.f32 [$4], {$8, $9, $10, $11};",
                                                          "=r,=r,=r,=r,l,l,l,l,r,r,r,r", [P, gs.GData()], None,
                                                          False, 4), dict(P=ts.Ptr("P")))


def test_a_branch_inside_a_gluon_loop_forks_and_ends_with_the_loop():
    from flashproof.proofs.support import gluon_sym as gs, kernel_exec as kx, triton_sym as ts

    def body(n, P):
        for i in range(n):
            if i < 3:
                gs.GL.store(P + i, gs.GData())
        gs.GL.store(P + n, gs.GData())

    n = ts.arg("n")
    paths = kx.execute(body, dict(n=n, P=ts.Ptr("P")), hyps=[n.e >= 1, n.e < 10], bind={"range": gs.BIND["range"]})
    assert len(paths) == 2
    inside = [p for p in paths if len(p.accesses) == 2]
    assert len(inside) == 1
    last = inside[0].accesses[-1]
    assert len(last.path) == 0  # the loop's and the branch's conditions end with the loop


def test_a_loop_over_a_product_range_is_split_into_quotient_and_remainder():
    """range(A * B) runs it = q·B + r over q in [0, A), r in [0, B) (with the side claim B > 0 that makes the
    change of variables exact); the kernel's it // B and it % B are then rewritten to q and r after their lemma,
    so a claim on them is decided without a nonlinear division (and a wrong one is still refuted)."""
    from flashproof.proofs.support import gluon_sym as gs, kernel_exec as kx, triton_sym as ts
    from flashproof.proofs.support.gluon_rewrite import Rewrite
    from flashproof.proofs.obligations.kernels.bounds import _Prover

    def body(A, B, P):
        for it in range(A * B):
            g = it // B
            t = it - g * B
            gs.GL.store(P + g * B + t, gs.GData())  # inside [0, A·B)
            gs.GL.store(P + g * (B + 1) + t, gs.GData())  # past A·B at g = A − 1, t = B − 1 once A ≥ 2
    gs.LOOP_FACTS.clear(), gs.SPLITS.clear()
    A, B = ts.arg("A"), ts.arg("B")
    hyps = [A.e >= 1, B.e >= 1, A.e < 100, B.e < 100]
    paths = kx.execute(body, dict(A=A, B=B, P=ts.Ptr("P")), hyps=hyps, bind={"range": gs.BIND["range"]})
    assert len(paths) == 1 and len(gs.SPLITS) == 1
    (x, y, q, r), = gs.SPLITS
    assert {q.decl().name(), r.decl().name()} <= set(gs.LOOP_FACTS)
    path = paths[0]
    assert any("has B > 0" in what for what, _, _ in path.side)
    ctx = core.Context(bounds={}, timeout_ms=10000, deep=False, record_text=False)
    pr = _Prover(ctx)
    rw = Rewrite(list(path.base), list(gs.SPLITS), pr)
    assert rw.lemmas(pr) is None
    for what, cond, at in path.side:
        assert pr.prove(rw(cond), z3.BoolVal(True), [rw(f) for f in path.base], [rw(f) for f in at], what) is None
    inside, past = path.accesses
    offs = [rw(a.off.e) for a in (inside, past)]
    assert not any(z3.is_app_of(t, op) for e in offs for t in kx.subterms(e) for op in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD))
    base, at = [rw(f) for f in path.base], [rw(f) for f in inside.path]
    ok = z3.And(offs[0] >= 0, offs[0] < A.e * B.e)
    assert pr.prove(ok, z3.BoolVal(True), base, at, "inside") is None
    bad = pr.prove(offs[1] < A.e * B.e, z3.BoolVal(True), base, [rw(f) for f in past.path], "past")
    assert bad is not None and bad.status == "refuted"


def test_an_access_without_a_claim_is_refuted_not_passed():
    gb = _module()
    from flashproof.proofs.support import kernel_exec as kx, triton_sym as ts

    p = gb.Problem("fwd", D=128)
    acc = kx.Access("store", "SOMETHING_ELSE", ts.Sym.lift(0), None, (), "x>y:1")
    assert z3.is_false(gb._claims("fwd", p, acc))


def test_without_the_device_memory_bound_the_forward_int32_indices_wrap():
    """A-GLUON-DEVICE-MEMORY is load-bearing: with B·H·N unbounded, the forward's int32 indices wrap — the
    first one asked, the K/V ring position base + j of key tile j (j < N / 128, base < 2^30), and the lse offset
    (b·H + h)·N + row after it (gluon_rule refuses such a call; no device can hold its q)."""
    gb = _module()
    from unittest import mock

    orig = gb.Problem.__init__

    def init(self, *a, **kw):
        orig(self, *a, **kw)
        self.hyps = [h for h in self.hyps if str(gb.GLUON_MAX_ROWS) not in h.sexpr()]

    with mock.patch.object(gb.Problem, "__init__", init):
        out = gb.check(core.Context({}, 60_000, False, False), "fwd", causal=(False,))
    assert out.status == "refuted" and "smem k_smem.index" in out.counterexample["access"], out.counterexample
    # with the ring position bounded, the lse offset is what wraps
    def init2(self, *a, **kw):
        init(self, *a, **kw)
        self.hyps.append(self.NB.e <= 2 ** 23)
    with mock.patch.object(gb.Problem, "__init__", init2):
        out = gb.check(core.Context({}, 60_000, False, False), "fwd", causal=(False,))
    assert out.status == "refuted" and "store LSE" in out.counterexample["access"], out.counterexample


def test_the_records_head_dims_are_the_kernels():
    """Under --deep the backward record runs at every head dim gluon.bwd takes (read from the module, not a
    copy), the quick run at d = 128; the forward at every head dim gluon.fwd takes in both; the audit's bounds
    say so."""
    gb = _module()
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.gluon import bwd, fwd

    assert gb.HEAD_DIMS == {"fwd": tuple(fwd.HEAD_DIMS), "bwd": tuple(bwd.HEAD_DIMS)}
    assert set(fwd.HEAD_DIMS) == set(bwd.HEAD_DIMS) == set(dispatch.GLUON_HEAD_DIMS) == {64, 128}
    assert gb.GLUON_MAX_ROWS == dispatch.GLUON_MAX_ROWS  # the hypothesis is the router's row bound
    assert gb.TILE == dispatch.GLUON_BLOCK  # the block-sparse tiles the router admits
    for oid, kernel in (("KER-BOUNDS-GLUON-FWD", "fwd"), ("KER-BOUNDS-GLUON-BWD", "bwd")):
        assert core.OBLIGATIONS[oid].deep_bounds["D = Dv"] == list(gb.HEAD_DIMS[kernel]), oid
    assert core.OBLIGATIONS["KER-BOUNDS-GLUON-FWD"].bounds["D = Dv"] == list(fwd.HEAD_DIMS)
    assert core.OBLIGATIONS["KER-BOUNDS-GLUON-BWD"].bounds["D = Dv"] == [128]
    with pytest.raises(ValueError, match="takes D in"):
        gb.check(core.Context({}, 60_000, False, False), "fwd", head_dims=(96,))


def test_a_d64_mutant_is_refuted_at_d64_and_missed_at_d128():
    """The D = 64 run is load-bearing: the control whose dQ column half is 64 wide is the kernel itself at
    D = 128 (proved there: one configuration) and refuted at D = 64, where the staging slice of warpgroup 0
    covers both halves."""
    gb = _module()
    over = {"_bwd_consumer": gb.kx.mutate(gb.gbwd._bwd_consumer, "DQW: gl.constexpr = D // 2",
                                          "DQW: gl.constexpr = 64")}
    ctx = core.Context({}, 60_000, False, False)
    one = dict(causal=(False,), deterministic=(False,))
    assert gb.check(ctx, "bwd", over, head_dims=(128,), **one).status == "proved"
    out = gb.check(ctx, "bwd", over, head_dims=(64,), **one)
    assert out.status == "refuted" and "D=64" in out.counterexample["access"], out.detail


def test_a_control_is_refuted_at_every_head_dim_or_fails():
    """A control of the backward is checked at each D of its run's bounds: its detail names both refutations
    under --deep, and a mutant caught
    at one D only (run at both) is reported as that D's outcome, not as refuted."""
    gb = _module()
    ob = core.resolve_control(core.OBLIGATIONS["KER-BOUNDS-GLUON-BWD/dk-store-dv-row-stride"])
    out = ob.fn(core.Context(ob.deep_bounds, 60_000, True, False))  # --deep: both head dims
    assert out.status == "refuted" and out.detail.startswith("D = 64: ") and "; D = 128: " in out.detail

    def checker(ctx, overrides=None, head_dims=None):  # refutes at D = 64 only
        (D,) = head_dims
        return core.Outcome("refuted", counterexample={"D": D}) if D == 64 else core.Outcome("proved", detail="ok")
    out = gb._per_d(None, checker, None, {}, (64, 128))
    assert out.status == "proved" and out.detail == "D = 128: proved, not refuted: ok", out.detail
    out = gb._per_d(None, checker, None, {}, (64,))
    assert out.status == "refuted" and out.counterexample == {"D": 64}


def test_a_claim_split_by_view_kind_needs_both_kinds():
    """``_by_kind`` proves a row-view access's claim once per kind: a claim that fails for the (B·N, H·D) kind
    only is refuted there, named by the kind; one that holds for both is proved."""
    gb = _module()
    flag, x = z3.Bool("T_bhnd"), z3.Int("x")
    claim = z3.If(flag, x >= 0, x >= 1)
    pr = gb._Prover(core.Context({}, 10_000, False, False))
    out = gb._by_kind(pr, claim, [x >= 0], [], "T", flag)
    assert out.status == "refuted" and out.counterexample["access"].startswith("T [T_bhnd = False]"), out
    assert gb._by_kind(pr, claim, [x >= 1], [], "T", flag) is None


def test_the_split_controls_run_at_both_head_dims():
    """The head split's four controls exist and are checked at D = 64 and D = 128 (each mutant differs from the
    kernel at both); h0 without GS only where a CTA has two heads (not deterministic: deterministic, GS = 1)."""
    gb = _module()
    split = {"h0-without-gs", "partitions-whole-group", "partials-hkv-heads", "epilogue-whole-group"}
    assert split <= {c for _, _, _, ctls in gb.SUITE for c, _, _ in ctls}
    assert all("head_dims" not in gb.ONLY.get(c, {}) for c in split)
    assert gb.ONLY["h0-without-gs"] == dict(deterministic=(False,))


def test_the_block_sparse_calls_run_where_the_bounds_say():
    """The block-sparse calls: the quick run at D = 128, the backward's non-causal only; --deep at every head dim,
    causal and not; A-KER-PLAN-LISTS among both records' assumptions."""
    gb = _module()
    for oid, kernel in (("KER-BOUNDS-GLUON-FWD", "fwd"), ("KER-BOUNDS-GLUON-BWD", "bwd")):
        ob = core.OBLIGATIONS[oid]
        assert ob.bounds[gb.SPARSE_KEY] == [128] and ob.deep_bounds[gb.SPARSE_KEY] == list(gb.HEAD_DIMS[kernel])
        assert ob.bounds[gb.SPARSE_CAUSAL_KEY] == ([False, True] if kernel == "fwd" else [False])
        assert ob.deep_bounds[gb.SPARSE_CAUSAL_KEY] == [False, True]
        assert "A-KER-PLAN-LISTS" in ob.assumptions
    with pytest.raises(ValueError, match="no deterministic block-sparse"):
        gb._run("bwd", False, deterministic=True, D=128, sparse=True)


def test_a_list_entry_past_the_counts_is_unspecified():
    """A-KER-PLAN-LISTS bounds the entries below the row's counts only: with the counts below the row's width (so
    that slot n_partial + n_full is still in the row), the producer reading one slot past its count is refuted at
    the K box the unspecified entry places, not at the read; the kernel itself is proved under the same facts."""
    gb = _module()
    from unittest import mock

    orig = gb.Problem.tile_lists

    def short(self, *a, **kw):
        out = orig(self, *a, **kw)
        gb.kx._RUN.base += [L.n_part + L.n_full < L.C for L in self.lists.values()]
        return out

    over = {"_attn_load": gb.kx.mutate(gb.gfwd._attn_load, "kv = gl.load(kv_list + j)",
                                       "kv = gl.load(kv_list + j + 1)")}
    one = dict(causal=(False,), head_dims=(128,), sparse_dims=(128,), dense=False)
    ctx = core.Context({}, 60_000, False, False)
    with mock.patch.object(gb.Problem, "tile_lists", short):
        out = gb.check(ctx, "fwd", over, **one)
        assert out.status == "refuted" and "sparse=True tma_load K at _attn_load" in out.counterexample["access"], out
        assert gb.check(ctx, "fwd", None, **one).status == "proved"


def test_a_masked_gluon_load_holds_other_where_masked():
    """gl.load(ptr, mask=m, other=o) of a modelled tensor is If(m, value, o) (the forward's first listed tile,
    read only for a non-empty list); a masked integer load without ``other`` is refused."""
    from flashproof.proofs.support import gluon_sym as gs, kernel_exec as kx, triton_sym as ts

    n = ts.arg("n")
    loads = {"L": lambda off, run: ts.Sym(z3.Int("v"), False)}

    def body(L, n):
        return gs.GL.load(L + 3, mask=n > 0, other=0)

    (path,) = kx.execute(body, dict(L=ts.Ptr("L"), n=n), loads=loads)
    (a,) = path.accesses
    assert (a.kind, a.tensor) == ("load", "L") and a.mask is not None
    s = z3.Solver()
    s.add(z3.Not(path.result.e == z3.If(n.e > 0, z3.Int("v"), 0)))
    assert s.check() == z3.unsat
    with pytest.raises(kx.Unsupported, match="masked integer load"):
        kx.execute(lambda L, n: gs.GL.load(L, mask=n > 0), dict(L=ts.Ptr("L"), n=n), loads=loads)
