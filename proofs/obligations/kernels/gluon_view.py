"""KER-BOUNDS-GLUON-VIEW: ``gluon/layout.row_view``, the function through which every Gluon TMA descriptor
reads (or writes) a (B, H, N, D) tensor in place, maps each element of a tensor it accepts to its own
cell of the row view — executed on symbolic shapes and strides; the Gluon kernel obligations
(``gluon_bounds``) take the view's kind as a symbolic choice between the two results proved here."""
from __future__ import annotations

import z3

from flashproof.kernels.attention.gluon import layout as glayout

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.obligations.kernels.gluon_bounds import ASSUME, _Prover, _host
from flashproof.proofs.support import kernel_exec as kx, triton_sym as ts

def _sym_min(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = ts.TL.minimum(out, x)
    return out


def check_view(ctx, overrides=None):
    """``layout.row_view`` run on a symbolic (B, H, N, D) shape and four symbolic non-negative strides
    (itemsize 2: fp16/bf16): on every path where it returns a view, that view is the "bhnd" or "bnhd"
    one ``gluon_host.merged_layout`` models (rows, cols, row stride), its row stride holds a row
    (cols ≤ row stride, 16-byte multiple), and with ``layout.coords`` of its kind every element
    (b, h, n, d) of the tensor is the view cell (b·per_batch + h·per_head + n, h·col_per_head + d),
    inside the view, at the same address: row·row_stride + col = b·sb + h·sh + n·sn + d·sd."""
    B, H, N, Dm = (_host(n) for n in ("B", "H", "N", "D"))
    st = [_host(n) for n in ("sb", "sh", "sn", "sd")]
    hyps = [x.e >= 0 for x in (B, H, N, Dm, *st)]
    overrides = overrides or {}
    fn = overrides.get("row_view", glayout.row_view)
    coords = overrides.get("coords", glayout.coords)
    paths = kx.execute(fn, dict(shape=(B, H, N, Dm), strides=tuple(st), itemsize=2), hyps=hyps,
                       bind={"int": lambda x: x, "min": _sym_min})
    pr, true = _Prover(ctx), z3.BoolVal(True)
    b, h, n, d = z3.Ints("b h n d")
    idx = [b >= 0, b < B.e, h >= 0, h < H.e, n >= 0, n < N.e, d >= 0, d < Dm.e]
    views = 0
    for path in paths:
        v = path.result
        if v is None:
            continue
        views += 1
        if v.kind not in glayout.KINDS:
            return Outcome("refuted", counterexample={"kind": v.kind}, solver="z3", detail=f"row_view kind {v.kind!r}")
        pb, ph, ch = (ts.Sym.lift(x).e for x in coords(v.kind, H, N, Dm))
        rows, cols, rs = (ts.Sym.lift(x).e for x in (v.rows, v.cols, v.row_stride))
        bhnd = v.kind == "bhnd"
        model = z3.And(rows == (B.e * H.e * N.e if bhnd else B.e * N.e), cols == (Dm.e if bhnd else H.e * Dm.e),
                       rs == st[2].e, cols <= rs, (rs * 2) % 16 == 0)
        r, c = b * pb + h * ph + n, h * ch + d
        cell = z3.And(r >= 0, r < rows, c >= 0, c < cols,
                      r * rs + c == b * st[0].e + h * st[1].e + n * st[2].e + d * st[3].e)
        bad = (pr.prove(model, true, list(path.base), list(path.hyps[len(path.base):]), f"row_view {v.kind}: model")
               or pr.prove(cell, z3.And(*idx), list(path.base), list(path.hyps[len(path.base):]),
                           f"row_view {v.kind}: element (b, h, n, d) is its view cell"))
        if bad:
            return bad
    if views == 0:
        return Outcome("error", detail="row_view accepted no layout on any path")
    return Outcome("proved", solver="z3", detail=f"{len(paths)} paths, {views} accepting, {pr.n} queries, all unsat")


VIEW_BOUNDS = {"B, H, N, D, strides": "symbolic", "itemsize": 2}
VIEW_WHY = ("B, H, N, D and the four strides are symbolic; fp16/bf16 (itemsize 2) are the only dtypes gluon_rule "
            "takes")


@obligation("KER-BOUNDS-GLUON-VIEW", checks=["KER-BOUNDS"], bounds=VIEW_BOUNDS, assumptions=ASSUME, scope="unbounded",
            why_unbounded=VIEW_WHY)
def bounds_ker_bounds_gluon_view(ctx):
    """layout.row_view: every accepted tensor's elements are its row view's cells."""
    return check_view(ctx)


@control("KER-BOUNDS-GLUON-VIEW/bnhd-no-column-offset", of="KER-BOUNDS-GLUON-VIEW",
         bug="row view (B·N, H·D): every head's columns start at 0, so heads h ≥ 1 read head 0's elements")
def control_bounds_ker_bounds_gluon_view_bnhd_no_column_offset(ctx):
    return check_view(ctx, {"coords": kx.mutate(glayout.coords, "Coords(N, 0, D)", "Coords(N, 0, 0)")})
