"""The design's adversarial inputs (DESIGN.md, "Adversarial inputs every attention fuzzer here must
include") as explicit problems, run at the front of every campaign before the random draws.

Random draws reach each of these with some probability; a bug that only one of them shows (a window
edge one key past a tile boundary, say) was caught by the default campaign on some seeds and not on
others. ``explicit(...)`` builds them for the campaign's caps, so every seed runs them all:

* window sides with the first (last) key of some query tile's edge row at a key-tile boundary and
  one key to either side, for each tile size the kernel declares and the interpreter's 16, with
  the other side open — where a kernel splits masked edge tiles from its unmasked interior;
* a single allowed key at tile edges, allowed keys only after fully masked tiles, block-sparse
  holes, random holes (each aimed at every tile size), fully masked rows;
* huge logits (|s| up to 6e4), exact ties of the row max in two tiles, q = 0 rows, a maximum that
  grows in the last tile;
* lengths 1 and 2 and Nq ≠ Nk both ways, causal both ways and square;
* varlen with zero-length and length-1 sequences;
* NaN, ±inf and 1e30 poison in masked and padded positions;
* GQA with the largest group the caps allow and a middle one; non-contiguous inputs; Dv ≠ D; B = 2;
* the tile families (late keys, block-sparse holes) at the largest tile size go to a kernel with a
  block-sparse API on that route (``ProblemSpec.sparse``: as a ``BlockSparseMask``), at the others
  as the dense mask; last (past the default budget of the CPU profile), each by the other route,
  and causal ones on the block-sparse route.

Each is kept only when the target takes its families and it fits the caps (lengths, head dims,
heads, batch, the pure-Python oracle's ``max_work``; for a compile-aware profile, lengths and head
dims from its sets); a template whose first shape does not fit tries smaller ones.
"""
from __future__ import annotations

from .problem import TILE_KINDS, ProblemSpec
from .strategies import SPECIAL_LENGTHS, window_edges

__all__ = ["explicit", "families_of"]


def families_of(s: ProblemSpec) -> set:
    """The strategy families a spec uses (those a target must take)."""
    on = {"causal": s.causal, "window": s.window is not None, "varlen": s.seqlens is not None,
          "mask": s.mask_kind != "none", "empty_rows": s.empty_rows, "huge_logits": s.huge_logits > 0,
          "ties": s.ties, "zero_q": s.zero_q, "late_max": s.late_max, "poison": s.poison is not None,
          "noncontig": s.noncontig, "gqa": s.heads_q > s.heads_kv, "dv": s.dv != s.d, "batch": s.batch > 1,
          "sparse": s.sparse}
    return {f for f, v in on.items() if v}


def explicit(*, families, blocks, max_nq: int, max_nk: int, max_d: int, max_heads_kv: int, max_group: int,
             max_batch: int, max_work: int | None = None, lengths=None, dims=None, square: bool = False,
             square_causal: bool = False, **_ignored) -> list:
    """The adversarial problems (module docstring) that fit the caps (the strategy's arguments;
    others are ignored) and use only ``families``; deterministic, most basic first."""
    fams = set(families)
    pool = sorted({n for n in (lengths or (*SPECIAL_LENGTHS, *(x for b in blocks for x in (b - 1, b + 1, 2 * b + 1))))
                   if n >= 1})
    qs = [n for n in pool if n <= max_nq] or [1]
    ks = [n for n in pool if n <= max_nk] or [1]
    d = max(x for x in (dims or (max_d,)) if x <= max_d) if any(x <= max_d for x in (dims or (max_d,))) else max_d
    dv = next((x for x in sorted(dims or (max(1, d // 2),)) if x != d and x <= max_d), d)
    # shapes from the largest down: the first that fits each template's work is used
    shapes = sorted({(q, k) for q in qs for k in ks}, key=lambda qk: (-qk[0] * qk[1], -qk[1]))
    big_q, big_k = qs[-1], ks[-1]

    def fits(s: ProblemSpec) -> bool:
        if not families_of(s) <= fams or s.n_q > max_nq or s.n_k > max_nk or max(s.d, s.dv) > max_d:
            return False
        if s.heads_kv > max_heads_kv or s.heads_q // s.heads_kv > max_group or s.batch > max_batch:
            return False
        if max_work is not None and s.batch * s.heads_q * s.n_q * s.n_k * (s.d + s.dv) > max_work:
            return False
        if (square or (square_causal and s.causal)) and (
                s.n_q != s.n_k if s.seqlens is None else any(a != b for a, b in s.seqlens)):
            return False
        if lengths is not None:
            ok = set(lengths) | ({0} if s.seqlens is not None else set())
            if not ({s.n_q, s.n_k} <= ok if s.seqlens is None else {x for p in s.seqlens for x in p} <= ok):
                return False
        return dims is None or {s.d, s.dv} <= set(dims)

    out: list = []

    def add(make, prefer=None) -> None:
        """``make(n_q, n_k)``: the template; tried at ``prefer`` first, then from the largest shape down."""
        for nq, nk in ([prefer] if prefer else []) + shapes:
            s = make(nq, nk)
            if s is not None and fits(s) and s not in out:
                out.append(s._replace(seed=len(out)))
                return

    base = dict(d=d, dv=d)
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, **base), (big_q, big_k))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, **base) if q > k else None)               # Nq > Nk
    add(lambda q, k: ProblemSpec(n_q=1, n_k=k, **base))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=1, **base))
    add(lambda q, k: ProblemSpec(n_q=2, n_k=2, **base))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, causal=True, **base) if q < k else None)
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, causal=True, **base) if q > k else None)
    add(lambda q, k: ProblemSpec(n_q=q, n_k=q, causal=True, **base) if q == k else None)
    for b in blocks:  # window edges at key-tile boundaries, and one key to either side
        for e in (-1, 0, 1):
            for side in (0, 1):
                def win(q, k, b=b, e=e, side=side):
                    widths = window_edges(q, k, (b,), max_nk)[side].get(b, {}).get(e, [])
                    if not widths:
                        return None
                    w = next((x for x in widths if x >= b - 2), widths[-1])
                    return ProblemSpec(n_q=q, n_k=k, window=(w, k) if side == 0 else (k, w), **base)
                add(win, (big_q, big_k))
    for b in blocks:  # the tile families at the largest tile as a BlockSparseMask (for a kernel with that API)
        for kind in ("single_key", "late_keys", "block_sparse"):
            sparse = kind in TILE_KINDS and b == max(blocks) and "sparse" in fams
            add(lambda q, k, kind=kind, b=b, sparse=sparse: ProblemSpec(n_q=q, n_k=k, mask_kind=kind, block=b,
                                                                        sparse=sparse, **base) if k > b else None)
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, mask_kind="random", empty_rows=True, **base))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, huge_logits=6e4, **base))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, ties=True, **base) if k > min(blocks) else None)
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, zero_q=True, **base))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, late_max=True, **base) if k > min(blocks) else None)
    add(lambda q, k: _varlen(q, k, lengths, base, tie=square or square_causal))
    add(lambda q, k: _varlen(q, k, lengths, base, tie=True, causal=True))
    for poison, how in (("nan", dict(causal=True)), ("inf", dict(mask_kind="late_keys")),
                        ("-inf", dict(mask_kind="random", empty_rows=True)), ("1e30", dict(causal=True))):
        add(lambda q, k, poison=poison, how=how: ProblemSpec(n_q=q, n_k=k, poison=poison, **how, **base)
            if k > 1 else None)
    for group in sorted({max_group, max(2, max_group // 2)}):
        if group >= 2:
            add(lambda q, k, g=group: ProblemSpec(heads_q=g * max_heads_kv, heads_kv=max_heads_kv, n_q=q, n_k=k,
                                                  causal=True, **base))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, noncontig=True, heads_q=2, heads_kv=2, **base))
    add(lambda q, k: ProblemSpec(n_q=q, n_k=k, d=d, dv=dv))
    add(lambda q, k: ProblemSpec(batch=2, n_q=q, n_k=k, **base))
    for b in blocks if "sparse" in fams else ():  # the tile masks above by the other route; causal ones sparse
        for kind in TILE_KINDS:
            add(lambda q, k, kind=kind, b=b: ProblemSpec(n_q=q, n_k=k, mask_kind=kind, block=b,
                                                         sparse=b != max(blocks), **base) if k > b else None)
            add(lambda q, k, kind=kind, b=b: ProblemSpec(n_q=q, n_k=k, mask_kind=kind, block=b, causal=True,
                                                         sparse=True, **base) if k > b else None)
    return out


def _varlen(q: int, k: int, lengths, base: dict, tie: bool, causal: bool = False):
    """Packed sequences with a zero-length query side, a zero-length key side and a length-1 one."""
    one = 1 if lengths is None or 1 in lengths else None
    if one is None or q < 2 or k < 2:
        return None
    pairs = ((0, 0), (one, one), (q - 1, q - 1)) if tie else ((0, one), (one, one), (q - 1, 0), (1, k - 2))
    pairs = tuple(p for p in pairs if p != (0, 0)) if tie else pairs
    n_q, n_k = sum(a for a, _ in pairs), sum(b for _, b in pairs)
    if lengths is not None and not {x for p in pairs for x in p} <= set(lengths) | {0}:
        return None
    return ProblemSpec(n_q=n_q, n_k=n_k, seqlens=pairs, causal=causal, **base)
