"""Hypothesis strategies for attention problems, adversarial families behind shrinkable switches.

``attention_problems(...)`` draws a ``ProblemSpec``. Every adversarial family of DESIGN.md is a
``st.booleans()`` draw (which shrinks to False), and every size is an integer that shrinks toward 1,
so a failure shrinks toward the smallest problem with the fewest families switched on:

=================  ========================================================================
family             what it plants
=================  ========================================================================
causal             bottom-right causal mask (Nq ≠ Nk both ways, since n_q and n_k are independent)
window             a (left, right) local window around the aligned diagonal; 3/4 of the left and
                   1/2 of the right edges are put, for some query tile, at a key-tile boundary or
                   one key to either side of it (where a kernel splits masked edge tiles from the
                   unmasked interior)
varlen             packed sequences (B = 1) with zero-length and length-1 sequences
mask               one of: random holes; a single allowed key at a tile edge (0, b−1, b, last);
                   allowed keys only after fully masked tiles ((−inf)−(−inf) class);
                   block-sparse tile holes (a profile's ``densities``: the fraction of tiles kept)
sparse             a tile-family mask (block-sparse, late keys; no empty rows, no varlen) handed to
                   kernels with a block-sparse API as ``BlockSparseMask(tiles, block, block)`` instead
                   of the dense mask (``problem.sparse_route``): off, the same masks go dense
empty_rows         fully masked query rows (out 0, LSE −inf, gradients 0)
huge_logits        scale ≫ 1/√d with max |score| of 1e2 … 6e4
ties               a dominant key copied into another tile: exact ties of the row max
zero_q             q = 0 rows (flat softmax rows)
late_max           the last key scaled ×4: the row max grows in the last tile (the α rescale fires)
poison             NaN / ±inf / 1e30 in K rows nobody reads and Q rows that read nothing
noncontig          the kernel gets non-contiguous (B, N, H, D)-strided views
gqa                Hq = group · Hkv with group 2 … 8, distinct dO per head
special_lengths    sequence lengths from 1, 2, 63, 64, 65, 127, 129, 1025 (those ≤ the cap)
dv                 a value head dim Dv ≠ D
batch              B > 1
=================  ========================================================================
"""
from __future__ import annotations

from hypothesis import strategies as st

from .problem import DENSITY, MASK_KINDS, POISONS, TILE_KINDS, ProblemSpec

__all__ = ["FAMILIES", "SPECIAL_LENGTHS", "HUGE_LOGITS", "attention_problems"]

FAMILIES = ("causal", "window", "varlen", "mask", "empty_rows", "huge_logits", "ties", "zero_q", "late_max", "poison",
            "noncontig", "gqa", "special_lengths", "dv", "batch", "sparse")
SPECIAL_LENGTHS = (1, 2, 63, 64, 65, 127, 129, 1025)
HUGE_LOGITS = (1e2, 1e3, 3e4, 6e4)


def attention_problems(*, max_nq: int = 16, max_nk: int = 16, max_d: int = 8, max_heads_kv: int = 2,
                       max_group: int = 8, max_batch: int = 2, families=FAMILIES, blocks=(16,),
                       square_causal: bool = False, lengths: tuple | None = None,
                       dims: tuple | None = None, square: bool = False,
                       max_work: int | None = None, densities: tuple | None = None) -> st.SearchStrategy[ProblemSpec]:
    """Problems with Nq ≤ max_nq, Nk ≤ max_nk, D, Dv ≤ max_d, Hkv ≤ max_heads_kv, Hq/Hkv ≤
    max_group, B ≤ max_batch. ``families`` lists the switches that may turn on (others stay off);
    ``blocks`` are the tile sizes the mask families aim at; ``square_causal`` forces Nk = Nq when
    causal (for kernels whose causal flag is top-left and who take no mask); ``square`` forces Nk = Nq
    always (kernels, or fast paths, that need it: ours on Hopper at d = 128).

    ``lengths`` / ``dims``: when given, sequence lengths (also each varlen sequence's, or 0) and
    head dims are drawn from these small sets (those under the caps) instead of every integer, so
    that compiled kernels (Triton, torch.compile, cuDNN graphs) are reused across examples.

    ``max_work``: when given, B·Hq·Nq·Nk·(D+Dv) stays at most this (or at one head of the drawn
    lengths with D = Dv = 1 if even that exceeds it): head dims, heads and batch are drawn under
    the room the lengths leave, so long rows come with few heads (the pure-Python oracle's cost).

    ``densities``: when given, the fraction of tiles a "block_sparse" mask keeps is drawn from them
    (the first is the shrink target); otherwise it is ``problem.DENSITY``.

    Shrinks toward ProblemSpec(n_q=1, n_k=1, d=1, seed=0) with every family off (toward the
    smallest entries of ``lengths`` / ``dims`` when given)."""
    for name, val in (("max_nq", max_nq), ("max_nk", max_nk), ("max_d", max_d), ("max_heads_kv", max_heads_kv),
                      ("max_group", max_group), ("max_batch", max_batch)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be an int >= 1, received {val!r}")
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown families {sorted(unknown)}: expected a subset of {FAMILIES}")
    if not blocks or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in blocks):
        raise ValueError(f"blocks must be a non-empty tuple of tile sizes >= 1, received {blocks!r}")
    for name, vals in (("lengths", lengths), ("dims", dims)):
        if vals is not None and (not vals or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in vals)):
            raise ValueError(f"{name} must be None or a non-empty tuple of ints >= 1, received {vals!r}")
    if max_work is not None and (isinstance(max_work, bool) or not isinstance(max_work, int) or max_work < 1):
        raise ValueError(f"max_work must be None or an int >= 1, received {max_work!r}")
    check_densities(densities)
    return _problems(max_nq, max_nk, max_d, max_heads_kv, max_group, max_batch, frozenset(families),
                     tuple(blocks), square_causal or square, None if lengths is None else tuple(sorted(set(lengths))),
                     None if dims is None else tuple(sorted(set(dims))), square, max_work,
                     None if densities is None else tuple(densities))


def check_densities(densities) -> None:
    """ValueError unless ``densities`` is None or a non-empty tuple of numbers in [0, 1]."""
    if densities is not None and (not isinstance(densities, tuple) or not densities or any(
            isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1 for x in densities)):
        raise ValueError(f"densities must be None or a non-empty tuple of numbers in [0, 1], received {densities!r}")


def draw_density(draw, mask_kind: str, densities) -> float:
    """The tile density of a "block_sparse" mask: drawn from ``densities`` when given (shrinking to
    the first), else ``problem.DENSITY`` (no draw: profiles without densities draw as before)."""
    if mask_kind != "block_sparse" or not densities:
        return DENSITY
    return float(draw(st.sampled_from(densities)))


def _under(vals: tuple, cap: int) -> list:
    """The entries of ``vals`` that are at most ``cap`` (``[cap]`` if none is)."""
    return [x for x in vals if x <= cap] or [cap]


def window_edges(n_q: int, n_k: int, blocks: tuple, cap: int) -> tuple[dict, dict]:
    """(lefts, rights): {b: {e: widths in [0, cap]}} that put the left (right) window edge of the
    last (first) row of some query tile of ``b`` rows at key j = t·b + e of a tiling into ``b``-key
    tiles (e = 0: on a tile boundary; ±1 one key past or before it), for b in ``blocks``: where a
    kernel's unmasked interior starts (ends). Empty classes are left out."""
    diag = n_k - n_q
    lefts: dict = {}
    rights: dict = {}
    for b in blocks:
        for r in range(-(-n_q // b)):
            p_hi = min((r + 1) * b, n_q) - 1 + diag  # the key aligned with the tile's last row
            p_lo = r * b + diag                       # ... with its first row
            for t in range(-(-n_k // b) + 1):
                for e in (-1, 0, 1):
                    lefts.setdefault(b, {}).setdefault(e, set()).add(p_hi - (t * b + e))   # first key read: t·b + e
                    rights.setdefault(b, {}).setdefault(e, set()).add(t * b + e - 1 - p_lo)  # last key: t·b + e − 1
    def keep(d):
        out = {b: {e: sorted(x for x in xs if 0 <= x <= cap) for e, xs in es.items()} for b, es in d.items()}
        out = {b: {e: xs for e, xs in es.items() if xs} for b, es in out.items()}
        return {b: es for b, es in out.items() if es}
    return keep(lefts), keep(rights)


def _edge(draw, edges: dict, cap: int) -> int:
    """A window side: any width in [0, cap], or (3/4 of the time) one of ``edges`` — drawn as
    (tile size, offset −1/0/+1) first, so every class of off-by-one is as likely as the others
    however many tiles produce it. Shrinks toward the free width 0."""
    if edges and draw(st.integers(0, 3)) > 0:
        b = draw(st.sampled_from(sorted(edges)))
        e = draw(st.sampled_from(sorted(edges[b])))
        return draw(st.sampled_from(edges[b][e]))
    return draw(st.integers(0, cap))


@st.composite
def _problems(draw, max_nq, max_nk, max_d, max_heads_kv, max_group, max_batch, families, blocks, square_causal,
              lengths, dims, square=False, max_work=None, densities=None):
    def on(family: str) -> bool:
        return family in families and draw(st.booleans())

    special = on("special_lengths")

    def length(cap: int) -> int:
        picks = [n for n in (lengths or SPECIAL_LENGTHS) if n <= cap]  # never outside a campaign's length set
        if special and picks:
            return draw(st.sampled_from(picks))
        if lengths is not None:
            return draw(st.sampled_from(_under(lengths, cap)))
        # half the draws from the upper half: hypothesis favours small integers, and a problem
        # needs keys past the first tile for the multi-tile paths (rescale, ragged end) to run
        return draw(st.integers(1, cap) | st.integers((cap + 1) // 2, cap))

    def seq_length(cap: int) -> int:  # one varlen sequence: zero allowed
        if lengths is not None:
            return draw(st.sampled_from([0] + [n for n in lengths if n <= cap]))
        return draw(st.integers(0, cap))

    def dim(cap: int) -> int:
        return draw(st.sampled_from(_under(dims, cap))) if dims is not None else draw(st.integers(1, cap))

    causal = on("causal")
    seqlens = None
    if on("varlen"):
        n_seq = draw(st.integers(1, 4))
        cap_q, cap_k = max(1, max_nq // n_seq), max(1, max_nk // n_seq)
        pairs = [[seq_length(cap_q), seq_length(cap_k)] for _ in range(n_seq)]
        if square_causal and (causal or square):
            for pr in pairs:
                pr[1] = pr[0]
        if sum(a for a, _ in pairs) == 0:
            pairs[0][0] = 1
        if sum(b for _, b in pairs) == 0:
            pairs[-1][1] = 1
        seqlens = tuple((a, b) for a, b in pairs)
        n_q, n_k = sum(a for a, _ in seqlens), sum(b for _, b in seqlens)
    else:
        n_q = length(max_nq)
        n_k = n_q if (square_causal and (causal or square)) else length(max_nk)
    window = None
    if on("window"):
        lefts, rights = window_edges(n_q, n_k, blocks, max_nk)
        window = (_edge(draw, lefts, max_nk), _edge(draw, rights, max_nk))
    mask_kind = draw(st.sampled_from(MASK_KINDS[1:])) if on("mask") else "none"
    block = draw(st.sampled_from(blocks))
    empty_rows = on("empty_rows")
    huge = draw(st.sampled_from(HUGE_LOGITS)) if on("huge_logits") else 0.0
    ties, zero_q, late_max = on("ties"), on("zero_q"), on("late_max")
    poison = draw(st.sampled_from(POISONS[1:])) if on("poison") else None
    noncontig = on("noncontig")
    # the work room the lengths leave: B·Hq·(D + Dv) ≤ room
    room = max(2, max_work // max(1, n_q * n_k)) if max_work is not None else None
    d_cap = max_d if room is None else max(1, min(max_d, room // 2))
    wants_gqa = on("gqa")
    d = dim(d_cap)
    dv = dim(d_cap if room is None else max(1, min(max_d, room - d))) if on("dv") else d
    heads = None if room is None else max(1, room // (d + dv))
    g_cap = max_group if heads is None else min(max_group, heads)
    group = draw(st.integers(2, g_cap)) if g_cap >= 2 and wants_gqa else 1
    kv_cap = max_heads_kv if heads is None else max(1, min(max_heads_kv, heads // group))
    heads_kv = draw(st.integers(1, kv_cap))
    b_cap = max_batch if heads is None else max(1, min(max_batch, heads // (group * heads_kv)))
    batch = draw(st.integers(2, b_cap)) if b_cap >= 2 and seqlens is None and on("batch") else 1
    seed = draw(st.integers(0, 2**32 - 1))
    # drawn last, so that the draws above are those of a strategy without these switches
    sparse = mask_kind in TILE_KINDS and not empty_rows and seqlens is None and on("sparse")
    density = draw_density(draw, mask_kind, densities)
    return ProblemSpec(batch=batch, heads_q=heads_kv * group, heads_kv=heads_kv, n_q=n_q, n_k=n_k, d=d, dv=dv,
                       causal=causal, window=window, seqlens=seqlens, mask_kind=mask_kind, block=block,
                       empty_rows=empty_rows, huge_logits=huge, ties=ties, zero_q=zero_q, late_max=late_max, poison=poison,
                       noncontig=noncontig, seed=seed, sparse=sparse, density=density)
