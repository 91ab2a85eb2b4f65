"""KER-BOUNDS for the Gluon kernels (the default route on an H200): every global access of the
warp-specialised forward and backward addresses an element of its own tensor — the one of the
program's (batch, head) — for every shape and stride the host admits, and every shared-memory index
stays inside its allocation.

Executed symbolically (``kernel_exec`` with ``gluon_sym`` bound for Gluon's modules): the host
functions ``gluon.fwd.forward`` and ``gluon.bwd.backward`` themselves (``_descs``, ``row_descriptor``,
the dQ accumulator's 2-D view, the semaphore allocation, the launch line with its argument order and
grid) and, launched from there, ``_attn_fwd_ws`` / ``_attn_bwd_ws`` whole: every partition they pass to
``gl.warp_specialize`` (both consumer warpgroups, the producer warp, the backward's dQ writer — the
two deterministic ones, writer w = 0 and 1, when ``prob.deterministic``; the block-sparse wrappers
``*_sparse[_causal]`` when ``prob.tiles`` is set) and every ``@gluon.jit`` helper (``_attn_load``,
``_attn_rows``, ``_attn_store``, ``_attn_iter``, ``_apply_causal_mask``, ``_bwd_load``, ``_bwd_consumer``,
``_bwd_iter``, ``_dq_stage``, ``_bwd_dq_writer``, ``_bwd_dq_writer_det``, ``semaphore.acquire_wait`` /
``complete_release``), one arbitrary iteration per loop. Modelled (``gluon_host``): torch's allocations
(out, dK, dV as ``empty_like`` lays them out, compact (B, H, N, D) or (B, N, H, D): A-GLUON-EMPTY-LIKE; lse,
dQ's fp32 accumulator, δ and the int32 semaphores contiguous; the backward's fp32 dK/dV partials as the
contiguous tensor of the shape the host asks ``torch.empty`` for, row view "bhnd"; the partials' ``view`` and
their sum into ``empty_like``'s dK, dV (``triton.partials.sum_partials``) by shape only: that kernel's accesses are
KER-BOUNDS-PSUM's), the row view's kind as a z3 Bool with
``layout.coords`` executed for each kind (the real ``row_view``'s accepting paths are exactly those two:
KER-BOUNDS-GLUON-VIEW, which runs it), ``triton.host.delta``; ``common.tma_reduce_add`` is a TMA write of
its box (A-GLUON-TMA).

Symbolic: B, Hkv, GROUPS (Hq = GROUPS·Hkv), N = 128·NB (``dispatch.gluon_rule``: Nq =
Nk a multiple of 128, B·Hq·N ≤ 2^30), every row stride, each tensor's view kind, program ids, loop
iterations, the block-sparse walk lists' counts and entries; causal and not; the backward deterministic and
not; dense and block-sparse (below). The backward's head split: the host runs
``head_splits`` itself (its parity test is arithmetic, 2 − G mod 2, so no branch), and the host's S = 1 test
makes two launches per host call (dK, dV from ``empty_like``, or the (B, Hkv·S, N, D) partials), S = SPLITS
staying a variable, every value of it the host can choose. On each launch ``_splits_divide`` proves S ≥ 1 divides G
and the grid's second dim is at most B·Hkv·S (from the host's facts alone); then G = S·GS and program id pid1 = (b·Hkv + hk)·S + s, 0 ≤ s < S, are
facts (``Problem.split``: GS*, bk*, s* exist for every program), and ``_defs`` gives the rewrite the
kernel's divisions by S, GS and Hq / GS with their values. Not symbolic: the head dim D = Dv, which
fixes the kernels' tile shapes (constexprs): the host runs once per head dim of the run's bounds, every
claim below at each (each query's location names its D) — the forward at D = 64 and 128
(``gluon.fwd.HEAD_DIMS``) always; the backward at D = 128 in the quick run (``QUICK_HEAD_DIMS``) and under
``--deep`` at every head dim it takes, D = 64 and 128 (``gluon.bwd.HEAD_DIMS``, read from the kernel
module). A control is refuted at each head dim of its run that its mutant changes (``_per_d``);
the two D = 64-only controls run at D = 64 in both.
Claims per access (see ``_claims``): TMA coordinates
computed without wrap-around and inside int32, each box (loads, stores, the dQ reduce-add) inside its
descriptor's global shape AND inside the rows (and columns) of its own (batch, head) — of the program's
query block and warpgroup for Q, O and lse; for the backward's Q, dO, lse, δ boxes and its dQ reduce-add
(64 whole rows) one of the CTA's own query heads h0 … h0 + GS − 1, h0 = hk·G + s·GS, of batch b (not
merely of the group: a wrong h0 inside the group is refuted); pointer stores (lse, dK, dV) inside their
tensor, in the program's (batch, head) rows and in the warpgroup's rows — at S = 1 dK, dV of (b, hk), at
S > 1 the partials' rows of (b, hk·S + s) in a (B, Hkv·S, N, D) buffer, inside the rows and columns the host
allocated (its row stride the allocated width); the semaphores' ``ld.acquire`` / ``red.release`` one int32
of the CTA's (head, query block)s, inside the count the host allocated; every ``.index``/``.slice`` of shared memory
inside its allocation (the K tile's dQ column slice, D / 2 wide, among them), the dQ staging slice in
the warpgroup's D / 2 columns (64 at D = 128, 32 at D = 64). Not claimed: the mbarrier
protocol, the semaphores' ordering and forward progress (schedule properties, not bounds).

Block-sparse calls (the kernels' SPARSE constexpr: 128 × 128 tiles, no dense mask, window (None, None) or
(None, 0), never deterministic: what ``dispatch.gluon_rule`` admits): the same host functions run with a fake
``prob`` whose ``tiles`` is set, ``triton.host.tile_lists`` bound to ``Problem.tile_lists`` — int32 contiguous
walk lists of the shapes ``plan.build_lists`` gives for the sizes the host passes: KV_NUM (B, H, N/128, 2) and
KV_IDX (B, H, N/128, N/128) for the forward, Q_NUM, Q_IDX likewise per key tile for the backward, whose host
then takes S = G (one query head per CTA). The kernels' scalar ``gl.load``s of the lists (``gluon_sym``: the
value a model gives, If(mask, value, other) when masked) return what A-KER-PLAN-LISTS guarantees and nothing
more (``Problem.list_loads``): the program's own row R* (forward: (b·H + h)·N/128 + m, the query block; backward:
(b·Hq + h0)·N/128 + j, the key block) has counts n_part*, n_full* ≥ 0 with n_part* + n_full* ≤ C (the row's
width, N/128); a count read inside the tensor is in 0 … C; an entry read at slot s of row R* is a tile in 0 … C − 1
when s < n_part* + n_full*; every other value (an entry past the counts — torch.empty's —, another row's entry,
anything outside the tensor) is any int32. Claims, added to those above (which the block-sparse calls meet as
the dense ones do: the K/V boxes at the listed tile, the Q, dO, lse, δ boxes and the dQ reduce-add at the 64-row
block 2·entry + t mod 2, the forward's store of an empty list's rows (out 0, lse −∞)): every list read, where
its mask is on, addresses an element of its list tensor and of the program's own row (the two counts 2R*, 2R*
+ 1; the entries R*·C … R*·C + C − 1) with an offset computed without wrap-around, and its mask without. The
list reads are asked before the path's side conditions (a read outside its row is named as such, not by the
wrap-around of the garbage it returns). Lane domains of aranges made in a kernel branch (the empty list's
store) are asked with the accesses that use those lanes. The quick run checks the block-sparse calls at
D = 128 (``QUICK_SPARSE_DIMS``; the backward non-causal only, ``QUICK_SPARSE_CAUSAL``: causal adds only the
diagonal mask's branch, no address), ``--deep`` at every head dim, causal and not.
"""
from __future__ import annotations

import types
from typing import NamedTuple
from unittest import mock

import torch
import z3

from flashproof.kernels.attention.gluon import bwd as gbwd, common as gcommon, fwd as gfwd, layout as glayout
from flashproof.kernels.attention.gluon import schedule as gsched
from flashproof.kernels.attention.triton import host as thost, partials as tpartials

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.support import gluon_host as gh, gluon_sym as gs, kernel_exec as kx, triton_sym as ts
from flashproof.proofs.support.gluon_rewrite import Rewrite
from flashproof.proofs.obligations.kernels.bounds import _Prover as _PartsProver
# the whole claim of an access first, capped at 1 s, its conjuncts after only when it is not unsat; the
# solver's base-facts check keeps the full timeout (``bounds._WholeFirst``)
from flashproof.proofs.obligations.kernels.bounds import _WholeFirst as _Prover

ASSUME = ["A-TRITON-INT", "A-TRITON-DIV", "A-TRITON-LAUNCH", "A-TRITON-CODEGEN", "A-GLUON-SEMANTICS", "A-GLUON-TMA",
          "A-GLUON-EMPTY-LIKE", "A-GLUON-DEVICE-MEMORY", "A-KER-PLAN-LISTS", "A-KER-SCHED", "A-SOLVER-TRUST"]
#: the head dims each record is checked at, read from the kernel modules (one host run per D): every D in
#: each kernel's HEAD_DIMS (64 and 128: dispatch.GLUON_HEAD_DIMS)
HEAD_DIMS = {"fwd": tuple(gfwd.HEAD_DIMS), "bwd": tuple(gbwd.HEAD_DIMS)}
I32_MAX = 2 ** 31 - 1
#: the router's row bound B·Hq·N ≤ 2^30, both Gluon rules (dispatch.GLUON_MAX_ROWS, A-GLUON-DEVICE-MEMORY; proofs/
#: does not import the router: tests/proofs/test_gluon_bounds.py pins the two equal)
GLUON_MAX_ROWS = 2 ** 30
#: the block-sparse tiles the router admits for the Gluon kernels (dispatch.GLUON_BLOCK; pinned equal by the tests)
TILE = 128


def _host(name):
    return ts.Sym(z3.Int(name), True)


class _List(NamedTuple):
    """A block-sparse walk list as the fake ``tile_lists`` made it (z3 terms): the tensor, the program's row R*
    (``row``), the grid's rows per head R and width C, the row's two counts, the tensor's element count, and the
    program's own elements of it: ``width`` from ``first`` (2R* … 2R* + 1 of the counts, R*·C … R*·C + C − 1 of
    the entries)."""

    tensor: object
    row: object
    R: object
    C: object
    n_part: object
    n_full: object
    size: object
    first: object
    width: object


class Problem:
    """The symbolic call: sizes, the program's (batch, head) as the grid defines it, and the tensors."""

    def __init__(self, kernel, causal=False, deterministic=False, *, D, sparse=False):
        I = z3.Int
        self.D = D  # D = Dv: a constant of the host run (the kernels' tile shapes are constexprs of it)
        self.kernel, self.sparse = kernel, sparse
        self.lists = {}  # list tensor name -> _List (block-sparse: what the fake tile_lists made)
        self._loads = (None, 0)  # (the run, list values loaded on it so far): their names, per path
        self.B, self.Hkv, self.G, self.NB = _host("B"), _host("Hkv"), _host("GROUPS"), _host("NB")
        self.H = self.G * self.Hkv
        self.N = self.NB * 128
        self.b, self.h, self.hk, self.g = I("b*"), I("h*"), I("hk*"), I("g*")
        B, H, N = self.B.e, self.H.e, self.N.e
        # (b*, h*) / (b*, hk*): the program's batch and head, the decomposition of its program id (one
        # exists for every id of the grid, so these facts exclude no program)
        self.signs = [B >= 1, self.Hkv.e >= 1, self.G.e >= 1, self.NB.e >= 1, self.b >= 0, self.b < B,
                      self.hk >= 0, self.hk < self.Hkv.e, self.g >= 0, self.g < self.G.e, self.h >= 0]
        # the router's row bound (GLUON_MAX_ROWS; at D = 128 also what a device's memory allows)
        self.hyps = self.signs + [B * H * N <= GLUON_MAX_ROWS,
                                  self.h == self.hk * self.G.e + self.g]
        if kernel == "fwd":  # persistent, grid (P,): CTA pid0 runs the items of its row of the schedule
            # (b*, h*, m*, base*): the item of the loop iteration's entry (A-KER-SCHED: every entry below the
            # CTA's count is an item of the call, base in [0, 2^30)); n_items*: the CTA's count, at most W
            self.m, self.base, self.n_items = I("m*"), I("base*"), I("n_items*")
            self.P, self.W = _host("P"), _host("W")
            # (P, W: at least one CTA, at most one per item, each with at most every item; P·W addressable)
            T = B * H * self.NB.e  # the call's items
            self.hyps += [self.m >= 0, self.m < self.NB.e, self.base >= 0, self.base <= gsched.BASE_PERIOD - 1,
                          self.n_items >= 0, self.n_items <= self.W.e, self.P.e >= 1, self.P.e <= T, self.W.e >= 1, self.W.e <= T,
                          self.P.e * self.W.e <= I32_MAX]
        else:  # grid (N / 128, B·Hkv·S): program 0 the key block, program 1 (b, kv head, split), the split fastest
            S = I("SPLITS")  # the kernel's argument: head_splits' choice on the host's path
            self.S, self.GS, self.s, self.bk = S, I("GS*"), I("s*"), I("bk*")
            # the CTA's GS = G / S query heads, from h0* (the split s* of the (b*, hk*) group)
            self.h0 = self.hk * self.G.e + self.s * self.GS
            # G = S·GS and the program's (bk*, s*): facts ``check`` adds once every launch of the host call is
            # shown to pass an S ≥ 1 that divides G (then GS*, bk*, s* exist for every program of the grid)
            self.split = [S >= 1, self.GS >= 1, self.s >= 0, self.s < S, self.bk >= 0, self.G.e == S * self.GS,
                          self.bk == self.b * self.Hkv.e + self.hk, I("pid1") == self.bk * S + self.s]
            # the CTA's key block: deterministic and causal, the grid runs the key blocks last to first
            self.j = self.NB.e - 1 - I("pid0") if deterministic and causal else I("pid0")
            self.nqb = self.NB.e * 2  # 64-row query blocks: one dQ semaphore per (b, h, query block)
        self.tensors = {}

    def view_tensor(self, name, heads, compact=False):
        """A (B, heads, N, D) bf16 tensor read through a row view of symbolic kind; ``compact``: laid out
        as torch.empty_like lays it out (row stride D or heads·D: A-GLUON-EMPTY-LIKE)."""
        D = self.D
        flag = z3.Bool(f"{name}_bhnd")
        rs = _host(f"{name}_rs")
        width = z3.If(flag, D, heads.e * D)
        rows = z3.If(flag, self.B.e * heads.e * self.N.e, self.B.e * self.N.e)
        self.hyps += [rs.e == width] if compact else [rs.e >= width, (rs.e * 2) % 16 == 0]
        self.hyps.append((rows - 1) * rs.e + width - 1 <= ts.SPAN_MAX)
        t = gh.FakeTensor(name, (self.B, heads, self.N, D), (None, None, rs, 1), bhnd=flag, rows=rows)
        self.tensors[name] = (t, heads)
        return t

    def partials(self, name):
        """What ``torch.empty(B, H, N, D, dtype=float32)`` gives (``FakeTorch.empty`` calls it with the shape
        the host asked for): a contiguous fp32 tensor of that shape, whose row view is "bhnd" (``row_view``'s
        first case: H·N·D, N·D, D, 1 are its strides, 4·D a multiple of 16 bytes at D = 64, 128)."""
        def make(shape, dtype):
            B, H, N, D = shape
            rs = (H * N * D, N * D, D, 1)
            t = gh.FakeTensor(name, shape, rs, dtype, bhnd=z3.BoolVal(True), rows=(B * H * N).e)
            self.tensors[name] = (t, H)
            return t
        return make

    def flat(self, name, heads, dims=3):
        shape = (self.B, heads, self.N) + ((self.D,) if dims == 4 else ())
        t = gh.FakeTensor(name, shape, (None,) * dims, dtype=torch.float32)
        self.tensors[name] = (t, heads)
        return t

    def tile_lists(self, prob, B, Hq, Nq, Nk, names=("KV", "Q"), **_):
        """``triton.host.tile_lists`` for the host run: for each list name asked, ``{name}_NUM`` (B, Hq, R, 2) and
        ``{name}_IDX`` (B, Hq, R, C) int32 contiguous, R × C the tile grid (KV: query tiles × key tiles, Q: key
        tiles × query tiles, tiles of prob.tiles' block sizes) of the sizes the host passes (``plan.build_lists``'
        shapes), with the program's row R* of them and its two counts n_part*, n_full* (≥ 0, summing to at most
        C: A-KER-PLAN-LISTS), facts of the run."""
        run, t = kx._RUN, prob.tiles
        out = {}
        for name in names:
            q, k = (Nq, t.block_q), (Nk, t.block_k)
            (nr, br), (nc, bc) = (q, k) if name == "KV" else (k, q)
            R, C = ts.Sym.lift(nr) // br, ts.Sym.lift(nc) // bc
            num = gh.FakeTensor(f"{name}_NUM", (B, Hq, R, 2), (None,) * 4, dtype=torch.int32)
            idx = gh.FakeTensor(f"{name}_IDX", (B, Hq, R, C), (None,) * 4, dtype=torch.int32)
            # the program's row: (b, h, query tile m) of the KV lists (fwd); (b, h0, key tile j) of the Q lists (bwd)
            head, tile = (self.h, self.m) if self.kernel == "fwd" else (self.h0, self.j)
            row = (self.b * ts.Sym.lift(Hq).e + head) * R.e + tile
            n_part, n_full = z3.Int(f"{name}_NUM[R*, 0]"), z3.Int(f"{name}_NUM[R*, 1]")
            run.base += [n_part >= 0, n_full >= 0, n_part + n_full <= C.e]
            cells = (ts.Sym.lift(B) * Hq * R).e
            self.lists[num.name] = _List(num, row, R.e, C.e, n_part, n_full, cells * 2, 2 * row, 2)
            self.lists[idx.name] = _List(idx, row, R.e, C.e, n_part, n_full, cells * C.e, row * C.e, C.e)
            out.update({num.name: num, idx.name: idx})
        return out

    def schedule(self):
        """``gluon.schedule`` for the host run: ``dense`` and ``sparse`` return the same ``Schedule`` of four
        (P, W) int32 contiguous tensors and the (P,) counts, P and W symbolic (what A-KER-SCHED says of them:
        P·W ≤ 2^31 − 1, the schedule's own check)."""
        P, W = self.P, self.W
        fields = [gh.FakeTensor(f"SCHED_{n}", (P, W), (W, 1), dtype=torch.int32) for n in ("B", "H", "M", "BASE")]
        sched = gsched.Schedule(*fields, gh.FakeTensor("COUNT", (P,), (1,), dtype=torch.int32))
        return types.SimpleNamespace(dense=lambda *a, **kw: sched, sparse=lambda *a, **kw: sched)

    def schedule_loads(self):
        """What a load of the schedule returns (``kernel_exec``'s ``loads``): the CTA's count n_items*, and for
        an entry the item's b*, h*, m*, base* (A-KER-SCHED). The values are not conditioned on the offset:
        each read's own claim is that it addresses the CTA's row below its count (``_claims``), so under the
        proved claims every read is one the assumption speaks of."""
        vals = {"COUNT": self.n_items, "SCHED_B": self.b, "SCHED_H": self.h, "SCHED_M": self.m,
                "SCHED_BASE": self.base}
        return {name: (lambda off, run, v=v: ts.Sym(v, False)) for name, v in vals.items()}

    def _value(self, name, run):
        """A fresh name for the next list value loaded on this path (the same on every path: the loads come
        in one order)."""
        if self._loads[0] is not run:
            self._loads = (run, 0)
        k = self._loads[1]
        self._loads = (run, k + 1)
        return z3.Int(f"{name}@{k}")

    def list_loads(self):
        """What a load of a walk list returns (``kernel_exec``'s ``loads``): A-KER-PLAN-LISTS at the program's
        row R*, the rest unspecified — a count read at 2R* or 2R* + 1 is n_part* or n_full*, any other count
        read inside the tensor one in 0 … C (another row's); an entry read at slot s of row R* is a tile index
        in 0 … C − 1 when s < n_part* + n_full* (a fact of the path from the read on); any other read (an entry
        of another row or past the counts — torch.empty's —, anything outside the tensor) is any int32."""
        def known(name):
            if name not in self.lists:
                raise kx.Unsupported(f"a load of {name}, which the host's tile_lists did not make on this path")
            return self.lists[name]

        def num(name):
            def load(off, run):
                L, v = known(name), self._value(name, run)
                run.base += [z3.Implies(off.e == 2 * L.row, v == L.n_part),
                             z3.Implies(off.e == 2 * L.row + 1, v == L.n_full),
                             z3.Implies(z3.And(off.e >= 0, off.e < L.size), z3.And(v >= 0, v <= L.C)),
                             v >= -(2 ** 31), v <= I32_MAX]
                return ts.Sym(v, False)
            return load

        def idx(name):
            def load(off, run):
                L, v = known(name), self._value(name, run)
                lo = L.row * L.C
                run.base += [v >= -(2 ** 31), v <= I32_MAX]
                run.path.append(z3.Implies(z3.And(off.e >= lo, off.e < lo + L.n_part + L.n_full),
                                           z3.And(v >= 0, v < L.C)))
                return ts.Sym(v, False)
            return load
        return {f"{n}_NUM": num(f"{n}_NUM") for n in ("KV", "Q")} | {f"{n}_IDX": idx(f"{n}_IDX") for n in ("KV", "Q")}

    def coords(self, name):
        """(per_batch, per_head, col_per_head) of tensor ``name``'s view, as ``layout.coords`` gives them."""
        t, heads = self.tensors[name]
        a, b = glayout.coords("bhnd", heads, self.N, self.D), glayout.coords("bnhd", heads, self.N, self.D)
        return tuple(z3.If(t.bhnd, ts.Sym.lift(x).e, ts.Sym.lift(y).e) for x, y in zip(a, b))


def _bind(prob, made, launcher_name, launcher, overrides):
    lay = gh.merged_layout()
    row_descriptor = gh.rebind(gcommon.row_descriptor, row_view=lay.row_view, coords=lay.coords,
                               TensorDescriptor=gh.SymDesc)
    fake = gh.FakeTorch(made)
    return dict(gs.BIND, torch=fake, row_descriptor=row_descriptor, layout=lay, TensorDescriptor=gh.SymDesc,
                _descs=gh.rebind((overrides or {}).get("_descs", gfwd._descs), row_descriptor=row_descriptor),
                **{launcher_name: launcher})


def _run(kernel, causal, overrides=None, deterministic=False, *, D, sparse=False):
    """(problem, paths) of one symbolic host call at head dim ``D``; ``sparse``: a block-sparse call (128 × 128
    tiles, the window (None, 0) when causal, else (None, None): what ``dispatch.gluon_rule`` admits)."""
    ts.STRIDES.clear(), gh.DESCS.clear()
    # the shim's lane numbering starts afresh for each host call: a query's terms (and so z3's search)
    # depend on the call alone, not on what this process ran before
    gs._SITES.clear(), gs.LANE_DIM.clear(), gs.LOOP_FACTS.clear(), gs.SPLITS.clear()
    if sparse and deterministic:
        raise ValueError("the router sends no deterministic block-sparse call (dispatch.gluon_rule)")
    p = Problem(kernel, causal, deterministic, D=D, sparse=sparse)
    # the mask's tiles themselves are never read by the Gluon kernels (only the walk lists built from them)
    tiles = types.SimpleNamespace(block_q=TILE, block_k=TILE) if sparse else None
    call = types.SimpleNamespace(scale=1.0, groups=p.G, causal=causal, deterministic=deterministic, tiles=tiles,
                                 window=(None, 0) if causal else (None, None))
    if kernel == "fwd":
        q, k, v = p.view_tensor("Q", p.H), p.view_tensor("K", p.Hkv), p.view_tensor("V", p.Hkv)
        made = {"empty_like": [p.view_tensor("O", p.H, compact=True)], "empty": [p.flat("LSE", p.H)]}
        bind = dict(_bind(p, made, "_attn_fwd_ws", gh.Launcher(gfwd._attn_fwd_ws), overrides), schedule=p.schedule())
        fn, args = gfwd.forward, dict(q=q, k=k, v=v, prob=call)
    else:
        q, k, v = p.view_tensor("Q", p.H), p.view_tensor("K", p.Hkv), p.view_tensor("V", p.Hkv)
        out, dout = p.view_tensor("Out", p.H), p.view_tensor("DO", p.H)
        lse = p.flat("LSE", p.H)
        dk, dv = p.view_tensor("DK", p.Hkv, compact=True), p.view_tensor("DV", p.Hkv, compact=True)
        strides = {"dk_rs": "dk_ptr", "dv_rs": "dv_ptr"}
        # the semaphores: (B, Hq, N / 64) int32 in deterministic mode, else one unused int32
        n_sem = p.B * p.H * (p.NB * 2) if deterministic else ts.Sym.lift(1)
        sem = gh.FakeTensor("SEM", (n_sem,), (1,), dtype=torch.int32)
        p.tensors["SEM"] = (sem, p.H)
        # S = 1: dK, dV as empty_like gives them; S > 1: the fp32 partials (empty), then empty_like's dK, dV
        # (the partials summed in by triton.partials.sum_partials: its accesses are KER-BOUNDS-PSUM's) and dQ
        made = {"empty_like": [dk, dv, gh.FakeTensor("DQ", q.shape, (None,) * 4)],
                "empty": [p.partials("DKP"), p.partials("DVP")], "zeros": [p.flat("DQ_ACC", p.H, 4), sem]}
        bind = _bind(p, made, "_attn_bwd_ws", gh.Launcher(gbwd._attn_bwd_ws, strides), overrides)
        fn, args = gbwd.backward, dict(q=q, k=k, v=v, out=out, lse=lse, dout=dout, dlse=None, prob=call)
    delta = p.flat("DELTA", p.H)
    with mock.patch.object(thost, "delta", lambda *a, **kw: delta), \
            mock.patch.object(thost, "tile_lists", p.tile_lists), \
            mock.patch.object(tpartials, "sum_partials", lambda parts, out: out):
        paths = kx.execute(fn, args, hyps=p.hyps, bind=bind, overrides=overrides, rejects=(ValueError,),
                           loads=p.list_loads() | (p.schedule_loads() if kernel == "fwd" else {}))
    return p, paths


def _fits32(c):
    return z3.And(c.safe if not isinstance(c.safe, bool) else z3.BoolVal(c.safe), c.e >= -(2 ** 31), c.e <= I32_MAX)


def _wg(where):
    part = where.split(">")[0]
    return 1 if "wg1" in part else 0


def _claims(kernel, p: Problem, acc):
    """z3 Bool: what access ``acc`` must satisfy (see the module docstring); its premise is true."""
    N, G, Hkv, D = p.N.e, p.G.e, p.Hkv.e, p.D
    H = G * Hkv
    if acc.kind == "smem":
        lo, hi, size = acc.off
        inside = z3.And(_fits32(lo), _fits32(hi), lo.e >= 0, hi.e < ts.Sym.lift(size).e)
        if acc.tensor == "dq_smem[].slice1":  # the dQ staging tile (D columns): this warpgroup's D / 2 columns
            w, half = _wg(acc.where), D // 2
            return z3.And(inside, lo.e >= w * half, hi.e < w * half + half)
        return inside
    if acc.kind in ("tma_load", "tma_store", "tma_reduce"):
        desc = gh.DESCS[acc.tensor]
        cs = acc.off
        parts = [_fits32(c) for c in cs]
        for c, n, blk in zip(cs, desc.shape, desc.block_shape):
            parts += [c.e >= 0, c.e + blk <= ts.Sym.lift(n).e]  # inside the global shape
        return z3.And(*parts, _own_box(kernel, p, acc, cs, desc))
    if acc.kind == "store" and acc.tensor == "LSE":  # flat (B, H, N): this warpgroup's 64 rows of (b, h)
        off = acc.off
        if off.lin is None or set(off.lin) - {None}:
            return z3.BoolVal(False)
        first = (p.b * H + p.h) * N + p.m * 128 + _wg(acc.where) * 64
        return z3.And(_fits32(off), off.e >= first, off.e < first + 64)
    if acc.kind == "store" and acc.tensor in ("DK", "DV"):  # row view: this warpgroup's 64 keys of (b, hk)
        off, rs = acc.off, acc.tensor.lower() + "_rs"
        if off.lin is None or set(off.lin) - {None, rs}:
            return z3.BoolVal(False)
        pb, ph, ch = p.coords(acc.tensor)
        row, col = off.lin.get(rs, z3.IntVal(0)), off.lin.get(None, z3.IntVal(0))
        first = p.b * pb + p.hk * ph + p.j * 128 + _wg(acc.where) * 64
        safe = off.safe if not isinstance(off.safe, bool) else z3.BoolVal(off.safe)
        return z3.And(safe, row >= first, row < first + 64, col >= p.hk * ch, col < p.hk * ch + D)
    if acc.kind == "store" and acc.tensor in ("DKP", "DVP"):  # S > 1: the partials, rows of head hk·S + s
        off, rs = acc.off, ("dk_rs" if acc.tensor == "DKP" else "dv_rs")
        if off.lin is None or set(off.lin) - {None, rs}:
            return z3.BoolVal(False)
        nb, heads, n, cols = (ts.Sym.lift(x).e for x in p.tensors[acc.tensor][0].shape)  # what the host allocated
        row, col = off.lin.get(rs, z3.IntVal(0)), off.lin.get(None, z3.IntVal(0))
        # this warpgroup's 64 keys of key block j in the (b, hk·S + s) rows of a (B, Hkv·S, N, D) buffer; inside
        # the allocation's rows and columns, its row stride the allocated width
        first = (p.b * Hkv * p.S + p.hk * p.S + p.s) * N + p.j * 128 + _wg(acc.where) * 64
        safe = off.safe if not isinstance(off.safe, bool) else z3.BoolVal(off.safe)
        return z3.And(safe, row >= first, row < first + 64, col >= 0, col < D, row < nb * heads * n, col < cols,
                      z3.Int(rs) == cols)
    if acc.kind == "load" and acc.tensor in p.lists:  # a walk list's read: in the tensor and the program's row
        L, off = p.lists[acc.tensor], acc.off
        if off.lin is None or set(off.lin) - {None}:
            return z3.BoolVal(False)
        safe = off.safe if not isinstance(off.safe, bool) else z3.BoolVal(off.safe)
        on, mask_safe = (acc.mask.e, acc.mask.safe) if acc.mask is not None else (z3.BoolVal(True), True)
        mask_safe = mask_safe if not isinstance(mask_safe, bool) else z3.BoolVal(mask_safe)
        return z3.And(mask_safe, z3.Implies(on, z3.And(safe, off.e >= 0, off.e < L.size, off.e >= L.first,
                                                           off.e < L.first + L.width)))
    if acc.kind == "load" and acc.tensor in ("COUNT", "SCHED_B", "SCHED_H", "SCHED_M", "SCHED_BASE"):
        # the forward's schedule: the CTA's count, and entries of its own row below that count
        off, pid0 = acc.off, z3.Int("pid0")
        if off.lin is None or set(off.lin) - {None} or acc.mask is not None:
            return z3.BoolVal(False)
        P, W = p.P.e, p.W.e
        if acc.tensor == "COUNT":
            return z3.And(_fits32(off), off.e == pid0, off.e >= 0, off.e < P)
        return z3.And(_fits32(off), off.e >= pid0 * W, off.e < pid0 * W + p.n_items, off.e >= 0, off.e < P * W)
    if acc.kind in ("ld", "red") and acc.tensor == "SEM":  # one int32 of the CTA's (head, query block)s
        off, width = acc.off
        safe = off.safe if not isinstance(off.safe, bool) else z3.BoolVal(off.safe)
        lo = (p.b * H + p.h0) * p.nqb
        n = ts.Sym.lift(p.tensors["SEM"][0].requested).e  # what the host allocated
        return z3.And(safe, width == 1, off.e >= 0, off.e < n, off.e >= lo, off.e < lo + p.GS * p.nqb)
    return z3.BoolVal(False)  # an access this obligation has no claim for: refuted, never passed


def _own_box(kernel, p, acc, cs, desc):
    """The box lies in the rows (and columns) of its own (batch, head)."""
    name, N, G, D = acc.tensor, p.N.e, p.G.e, p.D
    H = G * p.Hkv.e
    if len(cs) == 1:  # lse / δ (B, Hq, N) flat, bwd: the 64 rows of one of the CTA's heads, aligned
        r, blk = cs[0].e, desc.block_shape[0]
        lo = (p.b * H + p.h0) * N
        return z3.And(r >= lo, r + blk <= lo + p.GS * N, (r - lo) % blk == 0)
    (r, c), (blk, cols) = [x.e for x in cs], desc.block_shape
    if name == "DQ_ACC":  # bwd's dQ reduce-add, (B·Hq·N, D): 64 whole rows of one of the CTA's heads
        lo = (p.b * H + p.h0) * N
        return z3.And(r >= lo, r + blk <= lo + p.GS * N, (r - lo) % blk == 0, c == 0, cols == D)
    pb, ph, ch = p.coords(name)
    t = p.tensors[name][0]
    if kernel == "fwd":
        head = p.h if name in ("Q", "O") else p.hk
        seg = p.b * pb + head * ph
        if name in ("K", "V"):
            return z3.And(r >= seg, r + blk <= seg + N, c == head * ch)
        if name == "Q":  # the program's query block
            return z3.And(r >= seg + p.m * 128, r + blk <= seg + p.m * 128 + 128, c == head * ch)
        return z3.And(r == seg + p.m * 128 + _wg(acc.where) * 64, c == head * ch)  # O: this warpgroup's rows
    if name in ("K", "V"):  # bwd: the program's key block of (b, hk)
        return z3.And(r == p.b * pb + p.hk * ph + p.j * 128, c == p.hk * ch)
    # Q, dO: one of the CTA's heads: bhnd rows of heads h0 … h0 + GS − 1 (a 64-aligned box never
    # straddles two heads, N being a multiple of 128); bnhd rows of batch b, those heads' columns
    lo = p.b * pb + p.h0 * ph
    bhnd = z3.And(r >= lo, r + blk <= lo + p.GS * N, (r - lo) % blk == 0, c == 0)
    bnhd = z3.And(r >= p.b * pb, r + blk <= p.b * pb + N, c >= p.h0 * D, c + cols <= (p.h0 + p.GS) * D,
                  c % D == 0)
    return z3.If(t.bhnd, bhnd, bnhd)


def _term_key(x):
    """The z3 term ids of an access's offset (Sym, or a list / tuple of them and ints): equal keys, equal
    claims."""
    if isinstance(x, (list, tuple)):
        return tuple(_term_key(y) for y in x)
    if isinstance(x, ts.Sym):
        lin = None if x.lin is None else tuple(sorted((str(k), v.get_id()) for k, v in x.lin.items()))
        return x.e.get_id(), x.safe if isinstance(x.safe, bool) else x.safe.get_id(), lin
    return x


def _lanes(acc):
    """The names of the lane variables an access's offset and mask run over (``triton_sym``'s lane{k}_{axis})."""
    out, todo = set(), [acc.off, acc.mask]
    while todo:
        x = todo.pop()
        if isinstance(x, (list, tuple)):
            todo += list(x)
        elif isinstance(x, (ts.Sym, ts.Bool)):
            out |= {f"lane{k}_{a}" for k, a in x.axes}
    return sorted(out)


def _by_kind(pr, claim, base, path, where, flag):
    """``pr.prove`` of ``claim`` once per view kind of the accessed tensor (``flag``: its z3 Bool, True for
    "bhnd"): the claim simplified with the kind, under the path and the kind's literal. The two cases
    cover every kind, so both proved is the claim proved. (Measured 2026-12-02: the backward's Q and dO
    boxes, whose claim chooses between the two kinds' conditions, took z3 0.4–1 s whole or were left
    undecided in the 1 s allowed, and 4 s by conjuncts for both head dims; by kind, 0.8 s. Split for
    every row-view access, the backward record takes 6.5 s rather than 10.3 s, the forward's 0.7 s
    rather than 0.9 s.)"""
    for kind in (True, False):
        bad = pr.prove(z3.simplify(z3.substitute(claim, (flag, z3.BoolVal(kind)))), z3.BoolVal(True), base,
                       path + [flag == kind], f"{where} [{flag} = {kind}]")
        if bad:
            return bad
    return None


def _kind_flag(p, acc):
    """The view-kind flag of the tensor ``acc`` touches through a row view (Q, K, V, O, dO, dK, dV), else
    None (lse, δ, the dQ accumulator, the semaphores: flat; shared memory)."""
    if acc.kind == "smem" or acc.tensor not in p.tensors:
        return None
    flag = p.tensors[acc.tensor][0].bhnd
    return None if flag is None or z3.is_true(flag) else flag  # the partials: "bhnd" always


def _params(kernel):
    """The kernel arguments the rewrite replaces by what the host passed: all but SPLITS, which stays a
    variable (the divisions by it are ``_defs``', whatever head_splits chose; its value is a fact of the
    launch)."""
    fn = (gfwd._attn_fwd_ws if kernel == "fwd" else gbwd._attn_bwd_ws).fn
    return tuple(a for a in fn.__code__.co_varnames[:fn.__code__.co_argcount] if a != "SPLITS")


def _defs(kernel, p):
    """The divisions of program ids the kernel computes, with their values (see ``gluon_rewrite.Rewrite``)."""
    I = z3.Int
    if kernel == "fwd":  # hk = h // GROUPS (b, h: the schedule's entry, no division)
        return [(p.h, I("GROUPS"), p.hk, p.g)] + gs.SPLITS
    # bk = bs // SPLITS (and s = bs − bk·SPLITS), Hkv = Hq // G, b = bk // Hkv, hk = bk % Hkv, GS = G // SPLITS;
    # the epilogue: Hq // GS = Hkv·S, b = bs // (Hq // GS), hk·S + s = bs % (Hq // GS); the loops over
    # GS·n_iter: (head, query block) = (it // n_iter, it % n_iter)
    S, Hkv, zero = p.S, p.Hkv.e, z3.IntVal(0)
    return [(I("pid1"), S, p.bk, p.s), (p.bk, Hkv, p.b, p.hk), (I("Hq"), I("G"), Hkv, zero), (I("G"), S, p.GS, zero),
            (I("Hq"), p.GS, Hkv * S, zero), (I("pid1"), Hkv * S, p.b, p.hk * S + p.s)] + gs.SPLITS


#: the tensors whose claims rest on the facts of one launch (the host's choice between dK, dV and their partials)
_LAUNCH_OWN = ("DK", "DV", "DKP", "DVP")


def _splits_divide(pr, p, paths, dec, facts, run):
    """On each launch of the host call (bwd): the SPLITS it passes is ≥ 1 and divides G, and the grid's second
    dim is at most B·Hkv·SPLITS, asked under the problem's sign facts, the launch's SPLITS argument and grid
    and its host branches alone (not ``p.split``, which this discharges: given it, GS* = G / SPLITS and the
    program's bk*, s* with b* < B, hk* < Hkv exist for every program id of the grid)."""
    if not getattr(p, "split", None):
        return None
    rw0 = Rewrite(list(facts), [], dec, (), facts)
    pid1 = z3.Int("pid1")
    for path in {tuple(f.get_id() for f in x.launched): x for x in paths}.values():
        (value,) = [f.arg(1) for f in path.base if z3.is_eq(f) and f.arg(0).eq(p.S)]
        (grid,) = [f.arg(1) for f in path.base if z3.is_lt(f) and f.arg(0).eq(pid1)]
        claim = rw0(z3.And(value >= 1, p.G.e % value == 0, grid <= p.B.e * p.Hkv.e * value))
        bad = pr.prove(claim, z3.BoolVal(True), facts, [rw0(f) for f in path.launched],
                       f"{run} head_splits: SPLITS ≥ 1 divides G, grid ≤ B·Hkv·SPLITS")
        if bad:
            return bad
    return None


def check(ctx, kernel, overrides=None, causal=(False, True), deterministic=(False,), head_dims=None, sparse_dims=(),
          dense=True, sparse_causal=(False, True)):
    """The record's claims on every host call of ``kernel`` at each head dim of ``head_dims`` (default: every
    one the kernel takes, ``HEAD_DIMS``), causal and deterministic as given (``dense``: the dense calls; False:
    the block-sparse ones alone), and the block-sparse calls (not deterministic: the router sends none; causal
    as ``sparse_causal`` gives, among ``causal``) at the head dims of ``sparse_dims`` among them; the first
    failure, else proved with the paths and queries asked at each D."""
    head_dims = HEAD_DIMS[kernel] if head_dims is None else tuple(head_dims)
    if not head_dims or set(head_dims) - set(HEAD_DIMS[kernel]):
        raise ValueError(f"head dims {head_dims}: the Gluon {kernel} takes D in {HEAD_DIMS[kernel]}")
    pr = _Prover(ctx)
    true = z3.BoolVal(True)
    alive = []  # every formula asked stays referenced: _Prover memoises by z3 term id
    configs = [(D, c, d, False) for D in head_dims for d in deterministic for c in causal if dense] + \
              [(D, c, False, True) for D in head_dims if D in sparse_dims for c in causal if c in sparse_causal]
    kinds = sorted({(D, sp) for D, _, _, sp in configs})
    launched, queries = dict.fromkeys(kinds, 0), dict.fromkeys(kinds, 0)  # per (D, block-sparse)
    for D, cz, det, sp in configs:
        n0 = pr.n
        p, paths = _run(kernel, cz, overrides, det, D=D, sparse=sp)
        # the launches with the dK, dV partials (S > 1) first: at S = 1 a mutant of the split is the kernel
        # itself, and its divisions left unrewritten there are only slow to prove
        paths = sorted((x for x in paths if not isinstance(x.result, kx.Rejected)),
                       key=lambda x: not any(a.tensor in ("DKP", "DVP") for a in x.accesses))
        if not paths:
            continue
        # names the head dim each query is asked at (and the block-sparse calls)
        run = f"{kernel} D={D} causal={cz} deterministic={det}" + (" sparse=True" if sp else "")
        # the facts every path has (the paths of one host call differ by the host's branches before the
        # launch — head_splits' — with the facts of that launch (its SPLITS, dK/dV and grid), and by the lane
        # domains of aranges inside a branch, which no access uses): asking each path's claims under these
        # alone (fewer hypotheses: sound) lets the paths share the queries of the accesses they share
        common = set.intersection(*[{f.get_id() for f in x.base} for x in paths])
        split = getattr(p, "split", [])
        facts = p.signs + [z3.Int(f"pid{a}") >= 0 for a in ((0,) if kernel == "fwd" else (0, 1))]  # the grid's dims
        dec = _PartsProver(ctx._replace(timeout_ms=min(ctx.timeout_ms, 2000)))
        bad = _splits_divide(pr, p, paths, dec, facts, run)
        if bad:
            return bad
        rw = Rewrite([f for f in paths[0].base if f.get_id() in common] + split, _defs(kernel, p), dec,
                     _params(kernel), facts + split[:5])
        base = [rw(f) for f in rw.base]
        alive.append(base)
        bad = rw.lemmas(pr)
        if bad:
            return bad
        claims = {}  # (kind, tensor, where, offset's terms) -> (the rewritten claim, the offset: kept alive)
        launches = {}  # the host's branches before the launch -> the facts every path of that launch has
        for x in paths:
            ids = {f.get_id() for f in x.base}
            key = tuple(f.get_id() for f in x.launched)
            launches[key] = launches[key] & ids if key in launches else ids
        for path in paths:
            launched[D, sp] += 1
            host = {f.get_id() for f in path.launched}
            # the launch's own facts (its SPLITS, dK/dV, grid), asked only with the dK, dV stores, which
            # depend on them
            mine = launches[tuple(f.get_id() for f in path.launched)] - common
            own = [rw(f) for f in path.base if f.get_id() in mine] + [rw(f) for f in path.launched]
            alive.append(own)
            # the domains of the lanes of aranges made on this path only (inside a kernel branch: the block-sparse
            # forward's store of an empty list's rows), asked with the accesses that use those lanes
            lanes = {}
            for f in path.base:
                if f.get_id() not in common and f.num_args() == 2 and z3.is_const(f.arg(0)) \
                        and f.arg(0).decl().name().startswith("lane"):  # ts.lane_domain's lane ≥ 0, lane < n
                    lanes.setdefault(f.arg(0).decl().name(), []).append(rw(f))
            # the walk lists' reads first: the values they return feed the path's branches and loop bounds (a
            # read outside its row is named as such, not by the wrap-around of the garbage it returns); then
            # the side conditions; then every other access
            reads = [a for a in path.accesses if a.kind == "load" and a.tensor in p.lists]
            todo = [("access", a) for a in reads] + [("side", x) for x in path.side] + \
                [("access", a) for a in path.accesses if not (a.kind == "load" and a.tensor in p.lists)]
            for item, acc in todo:
                if item == "side":
                    what, cond, at = acc
                    asked = (rw(cond), [rw(f) for f in at if f.get_id() not in host])
                    alive.append(asked)
                    bad = pr.prove(asked[0], true, base, asked[1], f"{run} {what}")
                    if bad:
                        return bad
                    continue
                where = f"{run} {acc.kind} {acc.tensor} at {acc.where}"
                at = own + [rw(f) for f in acc.path] if acc.tensor in _LAUNCH_OWN else \
                    [rw(f) for f in acc.path if f.get_id() not in host]
                key = (acc.kind, acc.tensor, acc.where, _term_key(acc.off),
                       None if acc.mask is None else _term_key(ts.Sym(acc.mask.e, False, acc.mask.safe)))
                if key not in claims:  # an access the paths share: one claim term (its rewrite and queries memoised)
                    claims[key] = (rw(_claims(kernel, p, acc)), acc.off, _lanes(acc))
                at = at + [f for n in claims[key][2] for f in lanes.get(n, ())]
                asked = (claims[key][0], at)
                alive.append(asked)
                flag = _kind_flag(p, acc)
                bad = pr.prove(asked[0], true, base, asked[1], where) if flag is None else \
                    _by_kind(pr, asked[0], base, asked[1], where, flag)
                if bad:
                    return bad
        queries[D, sp] += pr.n - n0  # the queries first asked at this D (a memoised one counts once)
    name = lambda D, sp: f"D = {D}" + (" block-sparse" if sp else "")  # noqa: E731
    missing = [name(*k) for k in kinds if not launched[k] or not queries[k]]
    if missing:
        return Outcome("error", detail=f"no query was asked for the Gluon {kernel} at {missing} (no launch on any "
                                       "path)")
    return Outcome("proved", solver="z3", detail="; ".join(f"{name(*k)}: {launched[k]} launched paths, {queries[k]} "
                                                           "queries" for k in kinds) + ", all unsat")


# ------------------------------------------------------------------------------------ registration

_MODULES = {"_descs": gfwd, "_attn_fwd_ws": gfwd, "forward": gfwd, "_attn_load": gfwd, "_attn_store": gfwd,
            "_work": gfwd, "_attn_consumer": gfwd, "_bwd_load": gbwd, "_attn_bwd_ws": gbwd,
            "_bwd_load_partition": gbwd,
            "_bwd_consumer": gbwd, "_bwd_iter": gbwd, "_dq_stage": gbwd, "_bwd_dq_writer": gbwd,
            "_bwd_dq_writer_det": gbwd, "backward": gbwd}

#: (obligation id, kernel, the checker's configurations, ((control name, (function, old, new), bug), ...))
SUITE = (
    ("KER-BOUNDS-GLUON-FWD", "fwd", {}, (
        ("lse-no-wg-offset", ("_attn_store", "gl.store(lse_ptr + lse_row + WG * BM + offs, lse)",
                              "gl.store(lse_ptr + lse_row + offs, lse)"),
         "forward: the lse store without the warpgroup's WG·BM row offset (warpgroup 1 overwrites warpgroup 0's rows)"),
        ("k-box-one-block-past", ("_attn_load", "[k_row + kv * BLOCK_N, k_col]",
                                  "[k_row + (kv + 1) * BLOCK_N, k_col]"),
         "forward: the K box of key block j taken one block further on, past the head's last key at j = n_kv − 1"),
        ("ring-slot-mod-stages-plus-one", ("_attn_load", "slot = it % NUM_STAGES",
                                           "slot = it % (NUM_STAGES + 1)"),
         "forward: the producer's K/V ring slot it mod (NUM_STAGES + 1), one past the rings' NUM_STAGES slots"),
        ("k-view-of-q", ("_descs", "return (qd, kd, vd, od), (*qc, *kc, *vc, *oc)",
                         "return (qd, kd, vd, od), (*qc, *qc, *vc, *oc)"),
         "forward host: K's row-view coordinates passed as Q's (wrong when their layouts or head counts differ)"),
        # the persistent schedule: the CTA's row of (b, h, m, base) entries, count[c] of them
        ("sched-next-cta-row", ("_work", "e = gl.program_id(0) * W + i", "e = (gl.program_id(0) + 1) * W + i"),
         "forward: the CTA reads its entries from the next CTA's row of the schedule (another CTA's items, and past "
         "the schedule for the last CTA)"),
        ("sched-one-past-count", ("_attn_load", "for i in range(n_items):", "for i in range(n_items + 1):"),
         "forward: the producer walks one entry more than the CTA's count, reading the slot past its items (an "
         "unspecified entry, past the row when the row is full)"),
        ("sched-m-from-h", ("_work", "m = gl.load(s_m + e)", "m = gl.load(s_h + e)"),
         "forward: the item's query block read from the head field: with more heads than query blocks the Q box "
         "runs past the sequence"),
        # block-sparse (SPARSE): the walk lists KV_NUM, KV_IDX
        ("sparse-kv-list-row-next-head", ("_work", "lrow = (b * H + h) * NM + m", "lrow = (b * H + h + 1) * NM + m"),
         "forward, block-sparse: the query block's walk-list row taken one head further on ((b·H + h + 1)·N/128 + m): "
         "another head's counts and tiles, and past both lists for the last (batch, head)"),
        ("sparse-kv-list-one-past-count", ("_attn_load", "kv = gl.load(kv_list + j)", "kv = gl.load(kv_list + j + 1)"),
         "forward, block-sparse: the producer reads list slot j + 1 for key tile j, so its last read is the slot "
         "n_partial + n_full, past the counts: an unspecified entry (torch.empty's) as the K/V boxes' tile, and past "
         "the row when the list is full"))),
    ("KER-BOUNDS-GLUON-BWD", "bwd", dict(deterministic=(True, False)), (
        ("dk-store-dv-row-stride", ("_bwd_consumer", "gl.store(dk_blk + gl.expand_dims(r * dk_rs, 1)",
                                    "gl.store(dk_blk + gl.expand_dims(r * dv_rs, 1)"),
         "backward: the dK epilogue store steps its rows by dV's row stride"),
        ("dq-stage-no-wg-columns", ("_dq_stage", "dq_smem.index(buf).slice(WG * DQW, DQW, dim=1)",
                                    "dq_smem.index(buf).slice(0, DQW, dim=1)"),
         "backward: dQ's staging without the warpgroup's column half (both warpgroups write columns 0 … D/2 − 1 of "
         "the tile)"),
        ("dq-reduce-one-block-past", ("_bwd_dq_writer", "[vec_row0 + g * N_CTX + qb * BM, 0]",
                                      "[vec_row0 + g * N_CTX + (qb + 1) * BM, 0]"),
         "backward: the dQ reduce-add box one query block further on, past the head's rows at the last query block"),
        ("sem-one-qblock-past", ("_bwd_dq_writer_det", "sem = sem_grp + g * n_qblk + qb",
                                 "sem = sem_grp + g * n_qblk + qb + 1"),
         "backward, deterministic: the dQ semaphore of the next query block, past the tensor at the last (b, h, qb)"),
        ("q-ring-slot-mod-stages-plus-one", ("_bwd_load", "slot = it % NUM_STAGES",
                                             "slot = it % (NUM_STAGES + 1)"),
         "backward: the producer's Q/dO ring slot it mod (NUM_STAGES + 1), one past the rings' NUM_STAGES slots"),
        ("q-box-next-head", ("_bwd_load", "[q_row0 + g * q_ph + qrow, q_col0 + g * q_ch]",
                             "[q_row0 + (g + 1) * q_ph + qrow, q_col0 + (g + 1) * q_ch]"),
         "backward: the producer's Q box of the next query head, past the group's heads at its last head "
         "(the loop over G·n_iter iterations, split into (head, query block), reaches head G − 1)"),
        ("q-box-next-qblock", ("_bwd_load", "qrow = ((i0 + t) % n_qblk) * BM",
                               "qrow = ((i0 + t) % n_qblk + 1) * BM"),
         "backward: the producer's Q box one query block further on, past the head's rows at the last block "
         "(the split loop's query block reaches n_iter − 1)"),
        ("k-box-one-block-past", ("_attn_bwd_ws", "layout.head_rc(b, hk, seq_row0, k_pb, k_ph, k_ch)",
                                  "layout.head_rc(b, hk, seq_row0 + BN, k_pb, k_ph, k_ch)"),
         "backward: the CTA's K box one key block further on, past the head's keys for the last block"),
        # the head split (S = head_splits(G, deterministic) CTAs per (batch, KV head), GS = G / S heads each)
        ("h0-without-gs", ("_attn_bwd_ws", "h0 = hk * G + (bs - bk * SPLITS) * GS",
                           "h0 = hk * G + (bs - bk * SPLITS)"),
         "backward: the CTA's first query head hk·G + s, without the factor GS: with two heads per CTA (not "
         "deterministic, G even) split s walks heads hk·G + s, hk·G + s + 1, the next split's first head among them "
         "(inside the group: refuted by the claims on the CTA's own heads)"),
        ("partitions-whole-group", ("_attn_bwd_ws", "n_iter, n_qblk, GS, N_CTX", "n_iter, n_qblk, G, N_CTX"),
         "backward: the partitions given the group's G instead of the CTA's GS, so each CTA walks G heads from its "
         "h0 (past the group for s ≥ 1) and the epilogue decomposes its program id with Hq / G"),
        ("partials-hkv-heads", ("backward", "torch.empty(B, Hkv * S, N, D,", "torch.empty(B, Hkv, N, D,"),
         "backward host: the dK/dV partials allocated with Hkv heads instead of Hkv·S: the CTAs of splits s ≥ 1 "
         "(and of KV heads past Hkv / S) store past the buffer's rows"),
        ("epilogue-whole-group", ("_attn_bwd_ws", "            Hq, dk_ptr, dk_pb", "            Hq // SPLITS, dk_ptr, dk_pb"),
         "backward: the epilogue's head decomposition with the group's G instead of GS (the partitions keep GS): "
         "its Hq argument, which only the epilogue reads, given as Hq / SPLITS, so it computes Hkv = Hq / SPLITS / GS "
         "= Hq / G and stores the dK/dV partials of program (b, hk, s) at the rows of program id b·Hkv + hk·S + s "
         "read as (batch, KV head) with Hkv heads"),
        # D = 64 only: at D = 128 each mutant is the kernel itself (64 = D / 2, 128 = D)
        ("d64-dq-half-of-d128", ("_bwd_consumer", "DQW: gl.constexpr = D // 2", "DQW: gl.constexpr = 64"),
         "backward at D = 64: each warpgroup's dQ columns taken 64 wide (D = 128's half): warpgroup 0 stages its "
         "dQ into both halves of the staging tile, warpgroup 1 slices columns 64–127 of the 64-column K and staging "
         "tiles"),
        ("d64-dk-view-of-d128", ("backward", "layout.coords(layout.tma_kind(t), t.shape[1], N, D)",
                                 "layout.coords(layout.tma_kind(t), t.shape[1], N, 128)"),
         "backward host at D = 64: dK's and dV's row-view coordinates computed for head dim 128, so in a "
         "(B·N, H·D) view KV head hk ≥ 1 stores into columns hk·128…, another head's (or past the row)"),
        # block-sparse (SPARSE, S = G: one query head per CTA): the walk lists Q_NUM, Q_IDX
        ("sparse-q-block-t-not-mod-2", ("_bwd_load", "qrow = (2 * gl.load(q_list + t // 2) + t % 2) * BM",
                                        "qrow = (2 * gl.load(q_list + t // 2) + t) * BM"),
         "backward, block-sparse: the producer's 64-row block 2·entry + t instead of 2·entry + t mod 2, so the Q, dO, "
         "lse and δ boxes of the later list slots run past the head's rows (t reaches 2·(n_partial + n_full) − 1)"),
        ("sparse-dq-writer-list-slot-t", ("_bwd_dq_writer", "qb = 2 * gl.load(q_list + t // 2) + t % 2",
                                          "qb = 2 * gl.load(q_list + t) + t % 2"),
         "backward, block-sparse: the dQ writer reads list slot t instead of t // 2 (two 64-row blocks per listed "
         "tile), past the counts for t ≥ n_partial + n_full: an unspecified entry as the reduce-add's tile, and past "
         "the row"),
        ("sparse-q-list-row-of-kv-head", ("_attn_bwd_ws", "lrow = (b * Hq + h0) * gl.num_programs(0) + j",
                                          "lrow = (b * Hq + hk) * gl.num_programs(0) + j"),
         "backward, block-sparse: the key tile's walk-list row of query head hk (the KV head's index) instead of the "
         "CTA's own h0 = hk·G + s: another head's list, inside the tensor (refuted by the claim that each list read "
         "is in the program's own row, as a wrong h0 is by the claims on the CTA's own heads)"))),
)

#: control -> the configurations it is checked on: those that run the function it mutates (a writer
#: runs in one mode only; checking the other mode first would only repeat the obligation's queries), and
#: the head dims where the mutant differs from the kernel (the d64- controls: D = 64 only). Every other
#: control is checked at each D of its record's ``HEAD_DIMS`` and must be refuted at each.
ONLY = {**{c: dict(dense=False)  # mutants of the SPARSE branch: the block-sparse calls only
           for c in ("sparse-kv-list-row-next-head", "sparse-kv-list-one-past-count", "sparse-q-block-t-not-mod-2",
                     "sparse-dq-writer-list-slot-t", "sparse-q-list-row-of-kv-head")},
        "dq-reduce-one-block-past": dict(deterministic=(False,)), "sem-one-qblock-past": dict(deterministic=(True,)),
        "h0-without-gs": dict(deterministic=(False,)),  # deterministic, GS = 1: the mutant is the kernel
        "d64-dq-half-of-d128": dict(head_dims=(64,)), "d64-dk-view-of-d128": dict(head_dims=(64,))}

#: the head dims the quick run checks each record at: the forward at both (its record and controls take ~3 s of
#: CPU a head dim), the backward at d = 128; ``--deep`` checks every one the kernel takes (``HEAD_DIMS``), so the
#: backward at d = 64 too (measured 2026-12-02: the backward's record and controls at both head dims make prove's
#: Gluon share ~32 s of CPU, over its 60 s limit on 2 cores)
QUICK_HEAD_DIMS = {"fwd": HEAD_DIMS["fwd"], "bwd": (128,)}
#: the head dims of the block-sparse calls (SPARSE: 128 × 128 tiles, no dense mask, causal or not, not deterministic)
#: in the quick run: D = 128 for both records (the forward's sparse runs take ~1.5 s a head dim, the backward's ~6 s);
#: ``--deep``: every head dim of the record's (``HEAD_DIMS``)
QUICK_SPARSE_DIMS = {"fwd": (128,), "bwd": (128,)}
#: the block-sparse calls' causal flags in the quick run: the backward's causal ones under ``--deep`` only (their
#: addresses are the non-causal ones'; causal adds the diagonal mask's branch, which forks each consumer: 8 paths,
#: ~12 s of CPU at D = 128, against ~5 s non-causal)
QUICK_SPARSE_CAUSAL = {"fwd": (False, True), "bwd": (False,)}
#: the bounds keys naming the head dims and the causal flags of the block-sparse calls
SPARSE_KEY = "block-sparse (128 × 128 tiles, walk lists), at D"
SPARSE_CAUSAL_KEY = "block-sparse, causal"


def _bounds(kernel, dims, sparse_dims, sparse_causal=(False, True)):
    return {"D = Dv": list(dims), "N": "128·NB, NB symbolic", "B, Hkv, GROUPS, row strides, view kinds": "symbolic",
            "causal": [False, True], **({"deterministic": [False, True]} if kernel == "bwd" else {}),
            SPARSE_KEY: list(sparse_dims), SPARSE_CAUSAL_KEY: list(sparse_causal),
            "walk lists": "(B, Hq, NB, 2) counts and (B, Hq, NB, NB) entries, int32 contiguous; the program's row's "
                          "counts and entries symbolic (A-KER-PLAN-LISTS), every other value any int32"
                          + ("; not deterministic, S = G" if kernel == "bwd" else "")}


#: per record: the quick run's bounds and --deep's (``HEAD_DIMS``: the head dims read from the kernel modules)
BOUNDS = {kernel: _bounds(kernel, QUICK_HEAD_DIMS[kernel], QUICK_SPARSE_DIMS[kernel], QUICK_SPARSE_CAUSAL[kernel])
          for kernel in HEAD_DIMS}
DEEP_BOUNDS = {kernel: _bounds(kernel, HEAD_DIMS[kernel], HEAD_DIMS[kernel]) for kernel in HEAD_DIMS}
WHY = {"fwd": "every size and stride gluon_rule admits is symbolic; the head dim is not: the record runs the host "
              f"once per head dim, every claim at each: D = Dv = {' and '.join(map(str, HEAD_DIMS['fwd']))} "
              "(gluon.fwd.HEAD_DIMS), every one the forward takes",
       "bwd": "every size and stride gluon_rule admits is symbolic; the head dim is not: the record runs the host "
              f"once per head dim, every claim at each: D = Dv = {QUICK_HEAD_DIMS['bwd'][0]} in the quick run, every "
              f"one the backward takes (gluon.bwd.HEAD_DIMS = {HEAD_DIMS['bwd']}) under --deep"}


def _per_d(ctx, checker, over, only, dims):
    """A mutant checked at each head dim of ``dims`` in turn: refuted only when refuted at every one (the
    counterexample of the first; the detail names each D); else the first outcome that is not a refutation,
    named by its D (so a control the D = 64 run fails to catch fails, though D = 128 catches it)."""
    outs = []
    for D in dims:
        out = checker(ctx, overrides=over, head_dims=(D,), **only)
        if out.status != "refuted":
            return out._replace(detail=f"D = {D}: {out.status}, not refuted: {out.detail}")
        outs.append((D, out))
    return outs[0][1]._replace(detail="; ".join(f"D = {D}: {o.detail}" for D, o in outs))


def _register(ob_id, kernel, config, controls):
    def checker(ctx, overrides=None, **kw):
        return check(ctx, kernel, overrides, **{**config, **kw})

    def run(ctx):
        return checker(ctx, head_dims=tuple(ctx.bounds["D = Dv"]), sparse_dims=tuple(ctx.bounds[SPARSE_KEY]),
                       sparse_causal=tuple(ctx.bounds[SPARSE_CAUSAL_KEY]))
    run.__name__ = run.__qualname__ = "bounds_" + ob_id.lower().replace("-", "_")
    run.__doc__ = {"KER-BOUNDS-GLUON-FWD": "Gluon forward (host + every partition): every access in its own (b, h).",
                   "KER-BOUNDS-GLUON-BWD": "Gluon backward (host + every partition, each head dim of the run's "
                                           "bounds): every access in its own (b, h)."}[ob_id]
    obligation(ob_id, checks=["KER-BOUNDS"], bounds=BOUNDS[kernel], deep_bounds=DEEP_BOUNDS[kernel], assumptions=ASSUME,
               scope="unbounded",
               why_unbounded=WHY[kernel])(run)
    for ctl, (fn_name, old, new), bug in controls:
        def mutant(ctx, fn_name=fn_name, old=old, new=new, only=ONLY.get(ctl, {})):
            over = {fn_name: kx.mutate(getattr(_MODULES[fn_name], fn_name), old, new)}
            # a control of the SPARSE branch (dense=False) at each head dim of the block-sparse calls; any other at
            # each of the record's, with the block-sparse calls where the record has them (after the dense ones)
            only = dict(only, sparse_dims=tuple(ctx.bounds[SPARSE_KEY]),
                        sparse_causal=tuple(ctx.bounds[SPARSE_CAUSAL_KEY]))
            dims = only["sparse_dims"] if only.get("dense", True) is False else tuple(ctx.bounds["D = Dv"])
            return _per_d(ctx, checker, over, only, only.pop("head_dims", dims))
        mutant.__name__ = mutant.__qualname__ = f"control_{run.__name__}_{ctl.replace('-', '_')}"
        control(f"{ob_id}/{ctl}", of=ob_id, bug=bug)(mutant)


for _row in SUITE:
    _register(*_row)
