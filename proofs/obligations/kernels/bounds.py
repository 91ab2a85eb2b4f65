"""KER-BOUNDS: every load and store of the Triton forward and backward kernels reads or writes an
element of its tensor, for every shape and stride the host admits (> 2^31 elements included), masked
where it would not.

Executed symbolically (``kernel_exec``): the whole bodies of ``fwd.attn_fwd``, ``bwd.attn_bwd_dkdv``,
``bwd.attn_bwd_dq``, ``bwd.attn_bwd_delta`` and ``partials.sum_partials_kernel`` (the Gluon GQA backward's
dK / dV partial sums: symbolic split count S, one arbitrary iteration of its loop over S) with every helper they call (seq_bounds, key_range,
query_range, load_kv, allowed_pairs, the step functions), with symbolic B, heads, lengths, head dims,
strides, window, program ids and loop iterations, for each listed configuration. Each recorded access
gives one query: under the path, the lane domains and the host's facts, an access whose mask (an upper
bound of the real mask) is on has an address Σ index·stride whose every index is inside its dimension
(or the dimension is broadcast, stride 0), every Triton integer operation on the way fits its width
(i32 unless an operand is i64), and the mask itself was computed without wrap-around. TMA descriptor
loads are bounds-checked by the hardware (A-TRITON-TMA); their int32 coordinates are checked to fit.

Additive float bias (group "bias", the -BIAS obligations): HAS_BIAS on, with a BIAS tensor of shape
(B|1, Hq|1, Nq, Nk) and four symbolic non-negative strides, 0 on a broadcast dim (as host._common
passes them), every other feature combination as in "all"; the dK/dV kernel also with WRITE_DS (the
bias requires grad), which stores dS into the contiguous (B, Hq, Nq, Nk) buffer the host allocates.
WRITE_DS only adds that store, so its run also covers the launch with a bias that needs no gradient.
The other groups run with both off (the host's no-bias call: a one-element stand-in, never addressed).

Block-sparse launches (group "sparse", the -SPARSE obligations): HAS_TILES on, never varlen (the API
refuses a BlockSparseMask with cu_seqlens), mask tiles ``sub`` × the kernel's block, the walk lists flat
(B, Hq, R, 2) counts and (B, Hq, R, C) entries with symbolic TQ, TK. z3 answers unknown on their offsets
((b·Hq + h)·R + r)·C + j taken whole (four symbolic factors), so a list offset is checked digit by digit
(``radix``: each digit in its range, the offset equal to its digits' value, and the mixed-radix lemma,
proved once per record); the dK/dV kernel writes a query head as hk·GROUPS + g, so its digits are read with
Hq = Hkv·GROUPS (a substitution the identity claim checks). A refuted digit counts as a refutation only
through the flat claim 0 ≤ offset < size (``_confirm``), so a control's counterexample is a real access
outside the lists. No wrap-around of such an offset is then claimed given that it is inside.

Modelled, not executed, here: what a load of an index table returns — cu_seqlens entries as the host
validates them (A-KER-CU-VALID) and the block-sparse lists as ``plan.tile_plan`` writes them
(A-KER-PLAN-LISTS: the two counts of a row, entries 2r and 2r + 1, sum to at most the width; entries are
below it). ``tile_plan`` itself runs in ``plan_bounds`` (KER-BOUNDS-PLAN), which proves the counts' bound
and the entries' range of what it stores; that every slot a consumer reads was written stays assumed.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import z3

from flashproof.kernels.attention.triton import bwd, fwd, host, partials

from flashproof.proofs.engine.core import Outcome, control, fresh_solver, model_dict, obligation, z3_prove
from flashproof.proofs.support import kernel_exec as kx, radix, triton_sym as ts

ASSUME = ["A-TRITON-INT", "A-TRITON-DIV", "A-TRITON-MASKED-LOAD", "A-TRITON-TMA", "A-TRITON-LAUNCH", "A-TRITON-CODEGEN",
          "A-KER-HOST-LIMITS", "A-KER-CU-VALID", "A-KER-PLAN-LISTS", "A-SOLVER-TRUST"]
I64_MAX = 2 ** 63 - 1


class Tensor(NamedTuple):
    """dims: ((size z3 term, stride argument name or None for a flat, unit-stride tensor), ...);
    radix: for a flat tensor laid out as (X_1, …, X_k) (the walk lists), those sizes: its offsets are
    checked digit by digit (``radix``), else None; subst: the (term, equal term) pairs applied before the
    digits are read (``radix.claims``)."""

    dims: tuple
    radix: tuple | None = None
    subst: tuple = ()


class Shapes:
    """Symbolic shapes, strides and scalar arguments of one launch, with the host's facts about them."""

    def __init__(self, varlen, bd, bdv):
        I = z3.Int
        self.B, self.Hq, self.Hkv, self.G = I("B"), I("Hq"), I("Hkv"), I("GROUPS")
        self.Nq, self.Nk, self.D, self.DV, self.S = I("Nq"), I("Nk"), I("D"), I("DV"), I("n_seq")
        self.max_q, self.max_k, self.TQ, self.TK = I("max_q"), I("max_k"), I("TQ"), I("TK")
        self.Bm, self.Hm = I("B_mask"), I("H_mask")
        self.Bb, self.Hb = I("B_bias"), I("H_bias")
        self.varlen = varlen
        L = host.MAX_LEN
        h = [self.B >= 1, self.Hkv >= 1, self.G >= 1, self.Hq == self.G * self.Hkv, self.Nq >= 1, self.Nq <= L,
             self.Nk >= 0, self.Nk <= L, self.D >= 1, self.D <= bd, self.DV >= 1, self.DV <= bdv,
             self.Bm >= 1, self.Hm >= 1, z3.Or(self.Bm == 1, self.Bm == self.B), z3.Or(self.Hm == 1, self.Hm == self.Hq),
             z3.Or(self.Bb == 1, self.Bb == self.B), z3.Or(self.Hb == 1, self.Hb == self.Hq),
             self.TQ >= 1, self.TK >= 1, self.B * self.Hq <= I64_MAX, self.Hq <= 2 ** 31 - 1]
        if varlen:
            h += [self.B == 1, self.S >= 1, self.S <= L, self.max_q >= 1, self.max_q <= self.Nq, self.max_k >= 0,
                  self.max_k <= self.Nk]
        else:
            h += [self.S == self.B, self.max_q == self.Nq, self.max_k == self.Nk]
        self.hyps = h
        self.args = {}
        self.layout = {}

    def int_arg(self, name, term):
        """An integer kernel argument equal to ``term`` (i32 when it fits: Triton's specialisation)."""
        s = ts.arg(name)
        self.hyps.append(s.e == term)
        self.args[name] = s
        return s

    def tensor(self, name, sizes, strides=None, radix=None, subst=()):
        """A strided (B, H, N, D)-style tensor argument with symbolic, non-negative strides whose
        storage span Σ (size − 1)·stride fits int64; or (strides None) a flat contiguous one, whose
        element count ``sizes[0]`` is, if ``radix`` is given, the product of those sizes."""
        if strides is None:
            self.layout[name] = Tensor(((sizes[0], None),), None if radix is None else tuple(radix), tuple(subst))
            self.hyps.append(sizes[0] <= I64_MAX)
        else:
            st = [ts.arg(s, stride=True) for s in strides]
            for s in st:
                self.args[s.e.decl().name()] = s
                self.hyps.append(s.e >= 0)
            span = z3.Sum(*[(n - 1) * s.e for n, s in zip(sizes, st)])
            self.hyps.append(span <= ts.SPAN_MAX)  # storage span below 2^62 elements
            ts.SPANS[name] = span
            ts.STRIDES.update({s: (name, n) for s, n in zip(strides, sizes)})
            self.layout[name] = Tensor(tuple(zip(sizes, strides)))
        self.args[name] = ts.Ptr(name)


def inside(t: Tensor, off: ts.Sym, stride_zero):
    """z3 Bool: ``off`` (its linear form) addresses an element of t."""
    if off.lin is None:
        return z3.BoolVal(False)
    if t.radix is not None:  # a flat (X_1, …, X_k) layout: digit by digit (with radix.lemma, proved per run)
        if set(off.lin) != {None}:
            return z3.BoolVal(False)
        return z3.And(*radix.claims(off.e, t.radix, t.subst))
    names = {s for _, s in t.dims}
    if any(k not in names and k is not None for k in off.lin):
        return z3.BoolVal(False)
    const = off.lin.get(None, z3.IntVal(0))
    parts = []
    for size, s in t.dims:
        if s is None:
            parts += [const >= 0, const < size]
        else:
            c = off.lin.get(s, z3.IntVal(0))
            parts.append(z3.Or(z3.And(c >= 0, c < size), stride_zero(s)))
    if all(s is not None for _, s in t.dims):
        parts.append(const == 0)
    return z3.And(*parts)


def _table_loads(sh: Shapes):
    """Loads of CU_Q / CU_K (validated cu_seqlens: 0 ≤ cu ≤ total, non-decreasing, consecutive entries
    at most max_q / max_k apart) and of the block-sparse lists (counts summing to ≤ TK, entries < TK)."""
    seen = {"CU_Q": [], "CU_K": [], "KV_NUM": [], "Q_NUM": []}

    def cu(table, total, longest):
        def load(off, run):
            v = z3.Int(f"{table}[{len(seen[table])}]")
            run.base += [v >= 0, v <= total]
            for o, w in seen[table]:
                run.base += [z3.Implies(o <= off.e, w <= v), z3.Implies(off.e <= o, v <= w),
                             z3.Implies(off.e == o + 1, v - w <= longest), z3.Implies(o == off.e + 1, w - v <= longest)]
            seen[table].append((off.e, v))
            return ts.Sym(v, False)
        return load

    def num(table, width):
        def load(off, run):
            v = z3.Int(f"{table}[{len(seen[table])}]")
            run.base += [v >= 0, v <= width]
            for o, w in seen[table]:  # the two counts of one row: entries 2r and 2r + 1
                pair = z3.Or(z3.And(off.e == o + 1, o % 2 == 0), z3.And(o == off.e + 1, off.e % 2 == 0))
                run.base.append(z3.Implies(pair, v + w <= width))
            seen[table].append((off.e, v))
            return ts.Sym(v, False)
        return load

    def idx(width):
        def load(off, run):
            v = z3.FreshInt("tile")
            run.base += [v >= 0, v < width]
            return ts.Sym(v, False)
        return load

    return {"CU_Q": cu("CU_Q", sh.Nq, sh.max_q), "CU_K": cu("CU_K", sh.Nk, sh.max_k),
            "KV_NUM": num("KV_NUM", sh.TK), "Q_NUM": num("Q_NUM", sh.TQ), "KV_IDX": idx(sh.TK), "Q_IDX": idx(sh.TQ)}


#: window sides a configuration compiles (HAS_LEFT, HAS_RIGHT)
WINDOWS = {"none": (False, False), "both": (True, True), "causal": (False, True)}


class Config(NamedTuple):
    bm: int
    bn: int
    bd: int
    bdv: int
    varlen: bool
    left: bool
    right: bool
    mask: bool
    tiles: bool
    desc: bool
    bias: bool = False  # HAS_BIAS (and, in the dK/dV kernel, WRITE_DS)
    sub: int = 2  # block-sparse (tiles): the mask tiles are sub × (BLOCK_M, BLOCK_N) (TILE_Q, TILE_K)

    def __str__(self):
        return " ".join(f"{k}={v}" for k, v in self._asdict().items())


def _configs(kernel, rows, windows=("both",), subs=(2,), sparse_bias=(False,), sparse_desc=(False,),
             sparse_mask=(False,)):
    """The launch configurations checked: the first ``rows`` (BLOCK_M, BLOCK_N) rows of the kernel's
    autotuning table (all of them under --deep) × every feature combination the host can launch (the
    additive bias on and off), with BLOCK_D = BLOCK_DV = 256: BLOCK_D enters only as the lane count of
    the head-dim aranges (offsets beyond D are masked), so the widest padding covers every narrower one.
    Block-sparse ones (tiles; never varlen: the API refuses a BlockSparseMask with cu_seqlens) with mask
    tiles ``sub`` × the kernel's block for each of ``subs`` (TILE_Q % BLOCK_M = TILE_K % BLOCK_N = 0,
    which the host's pruning enforces), the bias, TMA descriptors and a dense mask as in ``sparse_bias``,
    ``sparse_desc``, ``sparse_mask`` at sub = 2, and off at the other subs."""
    if kernel == "delta":  # no window, mask or varlen: host.delta launches BLOCK_M 64 (16 interpreted)
        yield from (Config(bm, 16, 256, 256, False, False, False, False, False, False) for bm in (64, 16)[:rows])
        return
    if kernel == "psum":  # no window, mask or varlen: partials.sum_partials launches 32 rows (16 interpreted)
        yield from (Config(bm, 16, 256, 256, False, False, False, False, False, False) for bm in (32, 16)[:rows])
        return
    table = [(m, n) for m, n, _, _ in host.TUNED[kernel][1]]
    for bm, bn in table[:rows]:
        for bias, varlen, (left, right), mask, desc in itertools.product(
                (False, True), (False, True), [WINDOWS[w] for w in windows], (False, True), (False, True)):
            if varlen and desc:
                continue  # the host takes no descriptors for varlen
            yield Config(bm, bn, 256, 256, varlen, left, right, mask, False, desc, bias)
        for bias, (left, right), mask, desc, sub in itertools.product(
                sparse_bias, [WINDOWS[w] for w in windows], sparse_mask, sparse_desc, subs):
            if sub != 2 and (bias or mask or desc):
                continue  # other tile sizes with the plain pointer path only (SPARSE_OTHER_SUBS)
            yield Config(bm, bn, 256, 256, False, left, right, mask, True, desc, bias, sub)


def reported(kernel) -> Config:
    """The launch in which an H200 hit an illegal memory access (``flashproof fuzz --kernel triton --dtype bf16
    --profile gpu --seed 0``: packed varlen with zero-length segments, GQA, dv = 8 < d = 64, empty rows): the
    tiles of the first row of the kernel's table (what tuning="first" ran there; the 4-warp row the host runs
    now on the pointer path has the same BLOCK_M, BLOCK_N), varlen, no window, a dense mask, head dims
    padded as the host pads d = 64 and dv = 8 (64 and 16 lanes). The quick run's window is "both" and its
    padding 256 lanes, so this launch is checked as launched (group "reported", its own obligation per kernel)
    rather than by the covering argument alone."""
    bm, bn = host.TUNED[kernel][1][0][:2]
    return Config(bm, bn, host._pad(64), host._pad(8), True, False, False, True, False, False)


def _setup(kernel, cfg: Config):
    """(shapes, kernel args, grid) of one launch as host.forward/backward/delta make it."""
    sh = Shapes(cfg.varlen, cfg.bd, cfg.bdv)
    Q, KV, DV = (sh.B, sh.Hq, sh.Nq, sh.D), (sh.B, sh.Hkv, sh.Nk, sh.D), (sh.B, sh.Hkv, sh.Nk, sh.DV)
    O = (sh.B, sh.Hq, sh.Nq, sh.DV)
    strided = lambda p: [f"s{p}{x}" for x in "bhnd"]  # noqa: E731
    if kernel == "delta":
        sh.tensor("O", O, ["sob", "soh", "son", "sod"])
        sh.tensor("DO", O, ["sdb", "sdh", "sdn", "sdd"])
        for n in ("LSE", "DLSE", "DELTA"):
            sh.tensor(n, (sh.B * sh.Hq * sh.Nq,))
        sh.int_arg("Hq", sh.Hq), sh.int_arg("N", sh.Nq), sh.int_arg("DV", sh.DV)
        grid = ((sh.Nq + cfg.bm - 1) / cfg.bm, sh.B * sh.Hq)
        consts = dict(BLOCK_M=cfg.bm, BLOCK_DV=cfg.bdv, HAS_DLSE=True)
        return sh, {**sh.args, **consts}, grid
    if kernel == "psum":  # P (B, Hkv, S, N, D) fp32 partials, OUT (B, Hkv, N, D): both strided (any layout)
        splits = z3.Int("splits")  # S = gluon.bwd.head_splits(G, deterministic): a divisor of the group size G
        sh.hyps += [splits >= 1, splits <= sh.G]
        sh.tensor("P", (sh.B, sh.Hkv, splits, sh.Nq, sh.D), ["spb", "sph", "sps", "spn", "spd"])
        sh.tensor("OUT", (sh.B, sh.Hkv, sh.Nq, sh.D), ["sob", "soh", "son", "sod"])
        sh.int_arg("S", splits), sh.int_arg("N", sh.Nq), sh.int_arg("D", sh.D), sh.int_arg("Hkv", sh.Hkv)
        grid = ((sh.Nq + cfg.bm - 1) / cfg.bm, sh.B * sh.Hkv)
        return sh, {**sh.args, "BLOCK_N": cfg.bm, "BLOCK_D": cfg.bd}, grid
    for name, shape, st in (("Q", Q, strided("q")), ("K", KV, strided("k")), ("V", DV, strided("v"))):
        sh.tensor(name, shape, st)
    sh.tensor("MASK", (sh.Bm, sh.Hm, sh.Nq, sh.Nk), ["smb", "smh", "smi", "smj"])
    sh.hyps += [z3.Implies(sh.Bm == 1, sh.args["smb"].e == 0), z3.Implies(sh.Hm == 1, sh.args["smh"].e == 0)]
    sh.tensor("CU_Q", (sh.S + 1,)), sh.tensor("CU_K", (sh.S + 1,))
    # the walk lists, flat (B, Hq, R, 2) and (B, Hq, R, C) (plan.build_lists); the dK/dV kernel, whose
    # programs own a KV head, writes a query head as hk·GROUPS + g: its digits are read with Hq = Hkv·GROUPS
    heads, subst = ((sh.Hkv, sh.G), ((sh.Hq, sh.Hkv * sh.G),)) if kernel == "dkdv" else ((sh.Hq,), ())
    for n, w in (("KV", sh.TK), ("Q", sh.TQ)):  # sizes written as the digits' product (= B·Hq·R·C)
        rows = sh.TQ if n == "KV" else sh.TK
        for tab, width in ((f"{n}_NUM", z3.IntVal(2)), (f"{n}_IDX", w)):
            digits = (sh.B, *heads, rows, width)
            sh.tensor(tab, (_product(digits),), radix=digits, subst=subst)
    for name, term in (("Hq", sh.Hq), ("Hkv", sh.Hkv), ("GROUPS", sh.G), ("Nq", sh.Nq), ("Nk", sh.Nk), ("TQ", sh.TQ),
                       ("TK", sh.TK), ("D", sh.D)):
        sh.int_arg(name, term)
    left, right = z3.Ints("left right")
    cap = z3.If(sh.Nq >= sh.Nk, sh.Nq, sh.Nk)
    sh.hyps += [left >= 0, left <= cap, right >= 0, right <= cap]
    sh.int_arg("left", left), sh.int_arg("right", right)
    consts = dict(BLOCK_M=cfg.bm, BLOCK_N=cfg.bn, BLOCK_D=cfg.bd, BLOCK_DV=cfg.bdv, IS_VARLEN=cfg.varlen,
                  HAS_LEFT=cfg.left, HAS_RIGHT=cfg.right, HAS_MASK=cfg.mask, HAS_TILES=cfg.tiles,
                  TILE_Q=cfg.bm * cfg.sub if cfg.tiles else 0, TILE_K=cfg.bn * cfg.sub if cfg.tiles else 0, DOT_PREC="ieee",
                  GQA_MAP=False, USE_DESC=cfg.desc, DROPOUT=False,  # dropout adds no memory access (Philox arithmetic)
                  HAS_BIAS=cfg.bias, WRITE_DS=cfg.bias and kernel == "dkdv")
    if cfg.tiles:
        sh.hyps += [sh.TQ * consts["TILE_Q"] >= sh.Nq, (sh.TQ - 1) * consts["TILE_Q"] < sh.Nq,
                    sh.TK * consts["TILE_K"] >= sh.Nk, (sh.TK - 1) * consts["TILE_K"] < sh.Nk]
    if cfg.bias:  # (B|1, Hq|1, Nq, Nk), strides 0 on a broadcast dim (host._common); dS: contiguous (B, Hq, Nq, Nk)
        sh.tensor("BIAS", (sh.Bb, sh.Hb, sh.Nq, sh.Nk), ["sbb", "sbh", "sbi", "sbj"])
        sh.hyps += [z3.Implies(sh.Bb == 1, sh.args["sbb"].e == 0), z3.Implies(sh.Hb == 1, sh.args["sbh"].e == 0)]
        sh.tensor("DS", (sh.B * sh.Hq * sh.Nq * sh.Nk,))
    else:  # the pointers exist in every launch; unaddressed without a bias (the host's one-element stand-in)
        sh.tensor("BIAS", (z3.IntVal(1),)), sh.tensor("DS", (z3.IntVal(1),))
    a = {**sh.args}
    if not cfg.bias:
        a.update(sbb=0, sbh=0, sbi=0, sbj=0)
    a.update(seed=0, drop_t=0, drop_scale=1.0, qk_scale=1.0, Q_BUCKET=1, K_BUCKET=1, smb=sh.args["smb"], smh=sh.args["smh"], smi=sh.args["smi"],
             smj=sh.args["smj"])
    if kernel == "fwd":
        sh.tensor("O", O, ["sob", "soh", "son", "sod"])
        sh.tensor("LSE", (sh.B * sh.Hq * sh.Nq,))
        sh.int_arg("DV", sh.DV)
        consts.update(NO_ALPHA=False, NO_MAX=False, UNGUARDED=False, TILE_FLOOR=False, FMA=True)
        grid = ((sh.max_q + cfg.bm - 1) / cfg.bm, sh.S * sh.Hq)
    else:
        sh.tensor("DO", O, strided("d"))
        sh.tensor("LSE", (sh.B * sh.Hq * sh.Nq,)), sh.tensor("DELTA", (sh.B * sh.Hq * sh.Nq,))
        a.update(sm_scale=1.0)
        if kernel == "dkdv":
            sh.tensor("DK", KV, ["sdkb", "sdkh", "sdkn", "sdkd"]), sh.tensor("DV", DV, ["sdvb", "sdvh", "sdvn", "sdvd"])
            sh.int_arg("DV_DIM", sh.DV)
            grid = ((sh.max_k + cfg.bn - 1) / cfg.bn, sh.S * sh.Hkv)
        else:
            sh.tensor("DQ", Q, ["sdqb", "sdqh", "sdqn", "sdqd"])
            sh.int_arg("DV", sh.DV)
            grid = ((sh.max_q + cfg.bm - 1) / cfg.bm, sh.S * sh.Hq)
    if cfg.desc:  # the tensors each kernel streams through TMA (host.forward / host.backward)
        for name in {"fwd": ("Q", "K", "V"), "dkdv": ("Q", "DO"), "dq": ("K", "V")}[kernel]:
            sh.args[name] = ts.Desc(name)
    a.update(sh.args)
    return sh, {**a, **consts}, grid


KERNELS = {"fwd": fwd.attn_fwd, "dkdv": bwd.attn_bwd_dkdv, "dq": bwd.attn_bwd_dq, "delta": bwd.attn_bwd_delta,
           "psum": partials.sum_partials_kernel}


def _params(fn):
    py = fn.fn
    return py.__code__.co_varnames[:py.__code__.co_argcount]


def _conjuncts(e):
    """The conjuncts of a z3 Bool (nested Ands flattened, duplicates dropped)."""
    out, seen, todo = [], set(), [e]
    while todo:
        x = todo.pop()
        if z3.is_and(x):
            todo += x.children()
        elif not z3.is_true(x) and x.get_id() not in seen:
            seen.add(x.get_id())
            out.append(x)
    return out


class _Prover:
    """One z3 query per conjunct of a claim (small queries instead of one large nonlinear one), each
    asked once, on one incremental solver per run (its base facts asserted once, each query between
    push and pop). Any answer other than unsat is returned as the outcome (sat: refuted with the model)."""

    def __init__(self, ctx):
        self.ctx, self.memo, self.n, self.solvers = ctx, {}, 0, {}
        self.alive = []  # every term a memo key names: z3 reuses the id of a freed term, so keep them

    def _solver(self, base, bkey):
        if bkey not in self.solvers:
            self.solvers = {bkey: fresh_solver(base, self.ctx)}
        return self.solvers[bkey]

    def _ask(self, part, premise, base, path, bkey, pkey):
        """One conjunct ``part`` under ``premise``, the base facts and the path (memoised): the query
        ``prove`` asks for each conjunct, callable alone (the Gluon prover and its rewrite use it)."""
        key = (bkey, part.get_id(), premise.get_id(), pkey)
        if key in self.memo:
            return self.memo[key]
        self.alive.append((part, premise, tuple(base), tuple(path)))
        s = self._solver(base, bkey)
        s.push()
        try:
            for f in path:
                s.add(f.translate(s.ctx))
            return self._query(s, part, premise, key)
        finally:
            s.pop()

    def _query(self, s, part, premise, key):
        """One query: the path is already asserted on ``s`` (one scope for all of a claim's conjuncts);
        the negated conjunct goes in a scope of its own. The solver's assertions, hence the recorded
        query, are the base facts, the path and the goal, as if each query were built alone."""
        self.n += 1
        s.push()
        s.add(z3.Not(z3.Implies(premise, part)).translate(s.ctx))
        r = s.check()
        if r == z3.unsat:
            out = Outcome("proved", solver="z3")
        elif r == z3.sat:
            out = Outcome("refuted", counterexample=model_dict(s.model()), solver="z3", detail="negation sat")
        else:
            out = Outcome("unknown", solver="z3", detail=f"z3: {s.reason_unknown()}")
        s.pop()
        self.memo[key] = out
        return out

    def prove(self, claim, premise, base, path, where):
        bkey, pkey = tuple(h.get_id() for h in base), tuple(h.get_id() for h in path)
        s = None
        try:
            for part in _conjuncts(claim):
                key = (bkey, part.get_id(), premise.get_id(), pkey)
                out = self.memo.get(key)
                if out is None:
                    self.alive.append((part, premise, tuple(base), tuple(path)))
                    if s is None:  # the path's facts once, for every conjunct asked below
                        s = self._solver(base, bkey)
                        s.push()
                        for f in path:
                            s.add(f.translate(s.ctx))
                    out = self._query(s, part, premise, key)
                if out.status != "proved":
                    return _fail(out, f"{where}: {part.sexpr()[:4000]}")
            return None
        finally:
            if s is not None:
                s.pop()


class _Capped(_Prover):
    """A ``_Prover`` whose goal queries stop after ``ms`` milliseconds. Only the goals: the check that
    a solver's base facts are satisfiable (``smt.CheckedSolver``) keeps the obligation's timeout, since
    an undecided one fails the record rather than falling back."""

    def __init__(self, ctx, ms):
        super().__init__(ctx)
        self.ms = ms

    def _solver(self, base, bkey):
        made = bkey not in self.solvers
        s = super()._solver(base, bkey)
        if made:
            s.set("timeout", self.ms)
        return s


class _WholeFirst(_Prover):
    """``_Prover`` asked the whole claim of an access first (one query, at most ``WHOLE_MS``), and only
    when that is not unsat conjunct by conjunct with the full timeout, so that a failure names the
    conjunct that fails (a control's counterexample is a conjunct's, as before). The same claim is
    proved or not either way: a conjunction holds exactly when each conjunct does. Every claim of the
    obligations is proved whole, the whole run of them in about half the time of their conjuncts asked
    one by one (most of a query's time is z3's, whatever its size)."""

    WHOLE_MS = 1000

    def __init__(self, ctx):
        super().__init__(ctx)
        self.whole = _Capped(ctx, min(ctx.timeout_ms, self.WHOLE_MS))

    def prove(self, claim, premise, base, path, where):
        bkey, pkey = tuple(h.get_id() for h in base), tuple(h.get_id() for h in path)
        if self.whole._ask(claim, premise, base, path, bkey, pkey).status == "proved":
            self.n += 1
            return None
        return super().prove(claim, premise, base, path, where)


GROUPS = {"pointer": lambda c: not c.tiles and not c.bias and not c.varlen and not c.desc,
          "varlen": lambda c: not c.tiles and not c.bias and c.varlen,
          "tma": lambda c: not c.tiles and not c.bias and c.desc,
          "all": lambda c: not c.tiles and not c.bias, "bias": lambda c: not c.tiles and c.bias,
          "sparse": lambda c: c.tiles}


def _group_configs(ctx, kernel, group):
    """The configurations of ``group``: those of ``_configs`` it selects, or (group "reported") the one
    launch of ``reported``."""
    if group == "reported":
        return [reported(kernel)]
    b = ctx.bounds
    rows, windows = b.get("table rows", 1), b.get("windows", ("both",))
    subs, sparse_bias = b.get("tile / block", (2,)), b.get("block-sparse with bias", (False,))
    sparse_desc, sparse_mask = b.get("block-sparse with TMA", (False,)), b.get("block-sparse with a dense mask", (False,))
    return [c for c in _configs(kernel, 99 if rows == "all" else rows, windows, subs, sparse_bias, sparse_desc,
                                sparse_mask) if GROUPS[group](c)]


def check_kernel(ctx, kernel, group="all", overrides=None, configs=None, radix_strict=True):
    """Every access of ``kernel`` in the configurations of ``group`` (see ``_configs`` and ``reported``)."""
    fn = KERNELS[kernel]
    pr = _WholeFirst(ctx)
    used_radix = False
    for cfg in configs or _group_configs(ctx, kernel, group):
        sh, a, grid = _setup(kernel, cfg)
        sh.hyps += [grid[0] <= 2 ** 31 - 1, grid[1] <= 65535]  # CUDA's grid limits (A-TRITON-LAUNCH)
        args = {p: a[p] for p in _params(fn)}
        paths = kx.execute(fn, args, hyps=sh.hyps, grid=grid, loads=_table_loads(sh), overrides=overrides)
        zero = lambda s: sh.args[s].e == 0  # noqa: E731
        true = z3.BoolVal(True)
        for path in paths:
            for what, cond, at in path.side:
                bad = pr.prove(cond, true, list(path.base), list(at), f"{kernel} [{cfg}] {what}")
                if bad:
                    return bad
            for acc in path.accesses:
                base, at = list(path.base), list(acc.path)
                where = f"{kernel} [{cfg}] {acc.kind} {acc.tensor} at {acc.where}"
                if acc.kind == "desc":
                    claim = z3.And(*[c.safe for c in acc.off], *[ts._fits(c.e, False) for c in acc.off])
                    bad = pr.prove(claim, true, base, at, where)
                else:
                    used_radix = used_radix or sh.layout[acc.tensor].radix is not None
                    mask_on = acc.mask.e if acc.mask is not None else true
                    t = sh.layout[acc.tensor]
                    bad = pr.prove(acc.mask.safe, true, base, at, where + " (mask)") if acc.mask is not None else None
                    if bad is None and t.radix is not None:  # inside first; then no wrap-around, given inside
                        flat = z3.And(acc.off.e >= 0, acc.off.e < _product(t.radix))
                        bad = pr.prove(inside(t, acc.off, zero), mask_on, base, at, where)
                        if bad is not None and bad.status == "refuted":  # digits out of range: is the offset?
                            bad = _confirm(pr.prove(flat, mask_on, base, at, where + " (the offset itself)"), bad)
                        bad = bad or pr.prove(acc.off.safe, z3.And(mask_on, flat), base, at,
                                              where + " (no wrap-around, given the offset inside)")
                    elif bad is None:
                        bad = pr.prove(z3.And(acc.off.safe, inside(t, acc.off, zero)), mask_on, base, at, where)
                if bad:
                    return bad
    if used_radix:  # the lemma that the digit-by-digit claims rely on, proved in this record too
        bad = pr.prove(radix.lemma(strict=radix_strict), z3.BoolVal(True), [], [], "the mixed-radix lemma")
        if bad:
            return bad
    if pr.n == 0:
        return Outcome("error", detail=f"no query was asked for {kernel} ({group}): no configuration ran")
    return Outcome("proved", solver="z3", detail=f"{pr.n} queries, all unsat")


def _confirm(flat, digit):
    """A refuted digit claim counts as a refutation only through the flat claim 0 ≤ off < Π sizes (the
    code's digits may differ from the canonical ones while the offset stays inside): its outcome if that
    is refuted or unknown, else unknown (the digits the checker read are not the offset's)."""
    if flat is None:
        return digit._replace(status="unknown", counterexample=None,
                              detail="a digit of the offset is out of its range but the offset is inside the "
                                     "tensor (the layout's digits are not the code's): " + digit.detail)
    return flat


def _product(sizes):
    out = sizes[0]
    for x in sizes[1:]:
        out = out * x
    return out


def _fail(out, where):
    return out._replace(counterexample=dict(out.counterexample or {}, access=where), detail=f"{where}: {out.detail}")


#: the varlen control shared by the three kernels that read cu_seqlens_q through seq_bounds
_Q_LEN_NEXT_ENTRY = (("seq_bounds", "q_len = tl.load(CU_Q + b + 1) - q_start", "q_len = tl.load(CU_Q + b + 2) - q_start"),
                     "varlen: a sequence's length is read one entry too far in cu_seqlens_q (past the table for the last one)")

#: the dv != d control of the reported launches: V read with the q/k head dim's mask (lanes up to D, past Dv)
_V_MASKED_BY_D = "dv < d: the V tile is masked with the q/k head dim D instead of Dv, so it reads past each value row"

#: (obligation id, kernel, group, control name, (function, old, new), bug)

SUITE = (
    ("KER-BOUNDS-FWD", "fwd", "pointer", "head-dim-int32",
     ("attn_fwd", "offs_d = tl.arange(0, BLOCK_D).to(tl.int64)", "offs_d = tl.arange(0, BLOCK_D)"),
     "forward: head-dim offsets in int32, so offs_d·stride wraps for a last-dim stride ≥ 2^31 / (D − 1)"),
    ("KER-BOUNDS-FWD-VARLEN", "fwd", "varlen", "q-len-next-entry",
     *_Q_LEN_NEXT_ENTRY),
    ("KER-BOUNDS-FWD-TMA", "fwd", "tma", "out-store-all-rows",
     ("attn_fwd", "mask=rows[:, None] & (offs_dv[None, :] < DV))", "mask=(offs_dv[None, :] < DV))"),
     "forward: the output store writes the block's rows past the sequence end"),
    ("KER-BOUNDS-DQ", "dq", "pointer", "dq-store-all-rows",
     ("attn_bwd_dq", "dq.to(DQ.dtype.element_ty), mask=rows[:, None] & (offs_d[None, :] < D))",
      "dq.to(DQ.dtype.element_ty), mask=(offs_d[None, :] < D))"),
     "dQ: the gradient store writes the block's rows past the sequence end"),
    ("KER-BOUNDS-DQ-VARLEN", "dq", "varlen", "q-len-next-entry",
     *_Q_LEN_NEXT_ENTRY),
    ("KER-BOUNDS-DQ-TMA", "dq", "tma", "head-dim-int32",
     ("attn_bwd_dq", "offs_d = tl.arange(0, BLOCK_D).to(tl.int64)", "offs_d = tl.arange(0, BLOCK_D)"),
     "dQ: head-dim offsets in int32, so offs_d·stride wraps for a last-dim stride ≥ 2^31 / (D − 1)"),
    ("KER-BOUNDS-DKDV", "dkdv", "pointer", "k-load-all-keys",
     ("attn_bwd_dkdv", "mask=in_k[:, None] & (offs_d[None, :] < D), other=0.0)  # (BN, BD)",
      "mask=(offs_d[None, :] < D), other=0.0)  # (BN, BD)"),
     "dK/dV: the K tile load reads the block's keys past the sequence end"),
    ("KER-BOUNDS-DKDV-VARLEN", "dkdv", "varlen", "q-len-next-entry",
     *_Q_LEN_NEXT_ENTRY),
    ("KER-BOUNDS-DKDV-TMA", "dkdv", "tma", "dv-store-all-keys",
     ("attn_bwd_dkdv", "mask=in_k[:, None] & (offs_dv[None, :] < DV_DIM))", "mask=(offs_dv[None, :] < DV_DIM))"),
     "dK/dV: the dV store writes the block's keys past the sequence end"),
    ("KER-BOUNDS-FWD-REPORTED", "fwd", "reported", "v-masked-by-d",
     ("load_kv", "mask=in_k[:, None] & (offs_dv[None, :] < DV), other=0.0)",
      "mask=in_k[:, None] & (offs_dv[None, :] < D), other=0.0)"), _V_MASKED_BY_D),
    ("KER-BOUNDS-DQ-REPORTED", "dq", "reported", "v-masked-by-d",
     ("load_kv", "mask=in_k[:, None] & (offs_dv[None, :] < DV), other=0.0)",
      "mask=in_k[:, None] & (offs_dv[None, :] < D), other=0.0)"), _V_MASKED_BY_D),
    ("KER-BOUNDS-DKDV-REPORTED", "dkdv", "reported", "v-masked-by-d",
     ("attn_bwd_dkdv", "mask=in_k[:, None] & (offs_dv[None, :] < DV_DIM), other=0.0)  # (BN, BDV)",
      "mask=in_k[:, None] & (offs_dv[None, :] < D), other=0.0)  # (BN, BDV)"), _V_MASKED_BY_D),
    ("KER-BOUNDS-FWD-BIAS", "fwd", "bias", "bias-load-unmasked",
     ("add_bias", "mask=ok, other=0.0)", "other=0.0)"),
     "bias: the bias tile is loaded without its mask, so the block's rows and keys past the sequence ends are read"),
    ("KER-BOUNDS-DQ-BIAS", "dq", "bias", "bias-row-stride-ignored",
     ("add_bias", "rows.to(tl.int64) * sbi + ", "rows.to(tl.int64) + "),
     "bias: a pair's row offset taken as contiguous (stride 1) instead of the bias's row stride sbi"),
    ("KER-BOUNDS-DKDV-BIAS", "dkdv", "bias", "ds-store-all-rows",
     ("_dkdv_step", "mask=(offs_m[None, :] < q_len) & (offs_n[:, None] < k_len))", "mask=(offs_n[:, None] < k_len))"),
     "dBias: the dS store writes the block's query rows past the sequence end"),
    ("KER-BOUNDS-FWD-SPARSE", "fwd", "sparse", "list-row-width-tk",
     ("attn_fwd", "t_off = (bb * Hq + h) * TQ + m0 // TILE_Q", "t_off = (bb * Hq + h) * TK + m0 // TILE_Q"),
     "block-sparse: the walk lists' row of a query tile found with TK rows per head instead of TQ (R and C "
     "swapped), past the lists when TK > TQ"),
    ("KER-BOUNDS-DQ-SPARSE", "dq", "sparse", "tile-row-by-kernel-block",
     ("attn_bwd_dq", "t_off = (bb * Hq + h) * TQ + m0 // TILE_Q", "t_off = (bb * Hq + h) * TQ + m0 // BLOCK_M"),
     "block-sparse: a program's mask-tile row computed with the kernel's BLOCK_M instead of TILE_Q (past the "
     "lists for the last head when TILE_Q > BLOCK_M)"),
    ("KER-BOUNDS-DKDV-SPARSE", "dkdv", "sparse", "walk-past-count",
     ("attn_bwd_dkdv", "for it in range(0, n_g * SUBS):", "for it in range(0, n_g * SUBS + SUBS):"),
     "block-sparse: the dK/dV walk reads one list entry past its count (past the lists for the last key tile)"),
    ("KER-BOUNDS-DELTA", "delta", "all", "rows-unmasked",
     ("attn_bwd_delta", "io = (offs_m[:, None] < N) & (offs_dv[None, :] < DV)", "io = (offs_dv[None, :] < DV)"),
     "δ: the O and dO loads read the block's rows past the sequence end"),
    ("KER-BOUNDS-PSUM", "psum", "all", "split-offset-int32",
     ("sum_partials_kernel", "src + (b * 0 + s) * sps", "src + s * sps"),
     "GQA dK/dV partial sums: the split's offset s·sps in int32, which wraps once the partials pass 2^31 elements"),
)

_MODULES = {"attn_fwd": fwd, "seq_bounds": fwd, "load_kv": fwd, "add_bias": fwd, "attn_bwd_dq": bwd,
            "attn_bwd_dkdv": bwd, "_dkdv_step": bwd, "attn_bwd_delta": bwd, "sum_partials_kernel": partials}
BOUNDS_QUICK = {"table rows": 1, "windows": ["both"], "BLOCK_D": 256,
                "B, H, N, D, strides, window sides, cu_seqlens": "symbolic"}
BOUNDS_DEEP = dict(BOUNDS_QUICK, **{"table rows": "all", "windows": ["none", "both", "causal"]})
BOUNDS_SPARSE = dict(BOUNDS_QUICK, **{"tile / block": [2], "block-sparse with bias": [False],
                                      "block-sparse with TMA": [False], "block-sparse with a dense mask": [False],
                                      "TQ, TK, walk-list counts and entries": "symbolic"})
BOUNDS_SPARSE_DEEP = dict(BOUNDS_DEEP, **{"tile / block": [1, 2, 4], "block-sparse with bias": [False, True],
                                          "block-sparse with TMA": [False, True],
                                          "block-sparse with a dense mask": [False, True],
                                          "tile / block 1 and 4": "bias, dense mask and TMA off",
                                          "TQ, TK, walk-list counts and entries": "symbolic"})
BOUNDS_REPORTED = {"launch": "the H200 report's (reported()): first table row, varlen, no window, dense mask",
                   "BLOCK_D, BLOCK_DV": [64, 16], "B, H, N, D, strides, window sides, cu_seqlens": "symbolic"}


def _register(ob_id, kernel, group, ctl, mutation, bug):
    def run(ctx):
        return check_kernel(ctx, kernel, group)
    run.__name__ = run.__qualname__ = "bounds_" + ob_id.lower().replace("-", "_")
    run.__doc__ = f"{KERNELS[kernel].fn.__name__} ({group} configurations): every access inside its tensor, no wrap-around."
    quick, deep = {"reported": (BOUNDS_REPORTED, BOUNDS_REPORTED),
                   "sparse": (BOUNDS_SPARSE, BOUNDS_SPARSE_DEEP)}.get(group, (BOUNDS_QUICK, BOUNDS_DEEP))
    obligation(ob_id, checks=["KER-BOUNDS"], bounds=quick, deep_bounds=deep, assumptions=ASSUME)(run)

    def mutant(ctx):
        fn_name, old, new = mutation
        over = {fn_name: kx.mutate(getattr(_MODULES[fn_name], fn_name), old, new)}
        return check_kernel(ctx, kernel, group, overrides=over)
    mutant.__name__ = mutant.__qualname__ = "control_" + run.__name__ + "_" + ctl.replace("-", "_")
    control(f"{ob_id}/{ctl}", of=ob_id, bug=bug)(mutant)


for _row in SUITE:
    _register(*_row)
