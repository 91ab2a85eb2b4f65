"""Compile-aware campaigns: each draws its problems from a small, fixed set of launch
specialisations, so that every compiled kernel variant is built once, before the timed part
(``warm.py``), instead of once per drawn example.

A compiled kernel is specialised on its call: Triton builds a new binary for every new set of
constexpr flags (causal, window sides, mask, varlen, padded head dims, dtype) and for every new
*integer class* of its integer arguments (an int equal to 1 becomes a constant, one divisible by
16 is marked aligned). Those integers are lengths, head counts, head dims, window sides and the
strides made of them. A ``Launch`` is everything about a problem that can change that call
signature:

* the head dims d, dv, the heads Hq, Hkv and the batch B, exactly;
* the structure: causal, a window (each side's ``side_class``, as the kernel receives the side:
  clamped to max(Nq, Nk)), an explicit mask (a mask family, or planted empty rows), varlen (the
  sequences themselves; each example permutes them), non-contiguous or poison-padded inputs
  (other strides), Nk = Nq forced (``square``);
* the block-sparse route (``problem.sparse_route``; ``sparse``): the tile size (a constexpr of the
  Triton kernels, Gluon's 128) and the ``tile_class`` of the tile counts ceil(Nq / b), ceil(Nk / b)
  (int arguments of the Triton and Gluon attention kernels: 1, divisible by 16, or neither); its
  examples draw only tile-family masks. The walk-list plan kernel also takes the tile grid's strides
  (products of the counts): ``specimens`` warms each of their classes the launch's lengths reach;
* Nq and Nk by ``length_class``: the class of the length and of each of the three key partitions
  the split check calls the kernel on (``checks.check_split``). A class records whether the
  number is 1, the power of 2 dividing it (up to 16: a product of such numbers is divisible by 16
  exactly when the powers add up to 4), and whether it is above 8 (its next power of 2, a bucket
  argument, reaches 16).

Inside a launch the examples still vary in everything adversarial that leaves the signature
alone: the lengths within their class (1025 shares one with 65, 129 with 63), window sides at tile
edges within their class, the mask family, empty rows, huge logits, ties, zero rows, the late
maximum, the poison value, the tile size the families aim at (outside the block-sparse route), the
tile density of block-sparse masks (a profile's ``densities``) and the data seed.

``choose(seed, count, ...)`` picks a campaign's launches; every launch-level family the target
takes is on in at least one of them, and which launch carries which family, which lengths and
head dims each has, rotates with the seed. ``problems(launches, ...)`` is the hypothesis strategy
(it draws a launch, then a problem in it; it shrinks toward the first launch and, inside it,
toward the smallest lengths with the families off); ``specimen(launch, ...)`` is a launch's
smallest problem, the one the warm phase runs.
"""
from __future__ import annotations

import random
from typing import NamedTuple

from hypothesis import strategies as st

from .problem import MASK_KINDS, POISONS, TILE_KINDS, ProblemSpec, sparse_route
from .strategies import HUGE_LOGITS, check_densities, draw_density, window_edges

__all__ = ["Launch", "LAUNCH_FAMILIES", "int_class", "side_class", "length_class", "tile_class", "launch_of", "choose",
           "problems", "specimen", "stride_specimens", "extreme", "describe"]

#: Families that change a launch (the others vary inside one).
LAUNCH_FAMILIES = ("causal", "window", "varlen", "mask", "empty_rows", "poison", "noncontig", "gqa", "dv", "batch",
                   "sparse")


class Launch(NamedTuple):
    """One launch specialisation (module docstring). ``window``: (left, right) side classes or
    None; ``seqlens``: the varlen sequences, sorted, or None; ``n_q`` / ``n_k``: length classes;
    ``sparse``: None (masks go dense), or (tile size b, ``tile_class`` of Nq, of Nk) of the
    block-sparse route (``mask`` is then True)."""

    d: int
    dv: int
    heads_q: int
    heads_kv: int
    batch: int
    causal: bool
    window: tuple | None
    mask: bool
    seqlens: tuple | None
    noncontig: bool
    poison: bool
    square: bool
    n_q: tuple
    n_k: tuple
    sparse: tuple | None = None


def int_class(x: int) -> tuple:
    """(x == 1, the power of 2 dividing x capped at 4 (0 counts as 4), x > 8)."""
    v = 4
    if x:
        v = 0
        while v < 4 and x % (2 << v) == 0:
            v += 1
    return (x == 1, v, x > 8)


def side_class(x: int) -> str:
    """A window side as Triton specialises an int argument: "one", "div16" (0 included) or "other"."""
    return "one" if x == 1 else "div16" if x % 16 == 0 else "other"


def _parts(n: int) -> list:
    """The key partitions of ``checks.check_split`` for Nk = n: lengths of the non-empty thirds."""
    cuts = sorted({0, n // 3, (2 * n) // 3, n})
    return [b - a for a, b in zip(cuts, cuts[1:]) if b > a]


def length_class(n: int) -> tuple:
    """The class of a length and of its split partitions (module docstring)."""
    return (int_class(n), tuple(int_class(p) for p in _parts(n)))


def tile_class(n: int, block: int) -> tuple:
    """The class Triton specialises the number of ``block``-row tiles of a length n (ceil(n / block))
    on, as an int argument of the attention kernels: (equal to 1, divisible by 16)."""
    t = -(-n // block)
    return (t == 1, t % 16 == 0)


def launch_of(spec: ProblemSpec, square: bool = False) -> Launch:
    """The launch of ``spec`` (``square``: the campaign forces Nk = Nq)."""
    cap = max(spec.n_q, spec.n_k)
    window = None if spec.window is None else tuple(side_class(min(w, cap)) for w in spec.window)
    b = spec.block
    sparse = (b, tile_class(spec.n_q, b), tile_class(spec.n_k, b)) if sparse_route(spec) else None
    return Launch(spec.d, spec.dv, spec.heads_q, spec.heads_kv, spec.batch, spec.causal, window,
                  spec.mask_kind != "none" or spec.empty_rows,
                  None if spec.seqlens is None else tuple(sorted(spec.seqlens)), spec.noncontig,
                  spec.poison is not None, square, length_class(spec.n_q), length_class(spec.n_k), sparse)


def _by_class(lengths, cap: int) -> dict:
    """{length class: the lengths of ``lengths`` in it, ascending}, for lengths up to ``cap``."""
    out: dict = {}
    for n in sorted(set(lengths)):
        if n <= cap:
            out.setdefault(length_class(n), []).append(n)
    return out


def _sides(cap_lo: int) -> list:
    """Side classes that some width realises whatever the lengths of the launch (max(Nq, Nk) ≥ cap_lo)."""
    return ["div16", "one"] + (["other"] if cap_lo >= 2 else [])


def choose(seed: int, count: int, *, lengths, dims, families, max_nq: int, max_nk: int, max_heads_kv: int,
           max_group: int, max_batch: int, square: bool = False, square_causal: bool = False,
           sparse_blocks: tuple = (16,), always: tuple = ()) -> tuple:
    """``count`` launches for the campaign of ``seed``: every family of ``LAUNCH_FAMILIES`` that is
    in ``families`` is on in at least one (each launch also turns others on at random; those of
    ``always`` that are in ``families`` in every launch that can take them), and the length classes
    and head dims rotate over the launches. Deterministic in its arguments.

    The block-sparse route ("sparse") is laid over the launches chosen as without it, from its own
    random stream (so a profile's launches for a seed are those of before it existed, some of them
    now block-sparse): one launch without varlen, preferably none that is sure to carry the dense
    mask families, empty rows or varlen, takes it for sure, the others at random (never those), each
    with a tile size of ``sparse_blocks`` and the tile-count classes of one of its lengths."""
    if count < 1:
        raise ValueError(f"a campaign needs >= 1 launch specialisation, received count={count}")
    rng = random.Random(seed)
    level = [f for f in LAUNCH_FAMILIES if f in families and f != "sparse"]
    order = level[:]
    rng.shuffle(order)
    home = {f: j % count for j, f in enumerate(order)}  # the launch that is sure to carry each family
    if count > 1 and "batch" in home and home["batch"] == home.get("varlen"):
        home["batch"] = (home["batch"] + 1) % count  # a varlen launch is packed (B = 1)
    always = {f for f in always if f in families}
    cq, ck = _by_class(lengths, max_nq), _by_class(lengths, max_nk)
    if not cq or not ck:
        raise ValueError(f"no length of {tuple(lengths)} fits the caps Nq <= {max_nq}, Nk <= {max_nk}")
    classes_q, classes_k = sorted(cq, key=lambda c: cq[c][0]), sorted(ck, key=lambda c: ck[c][0])
    dims = sorted(set(dims))
    off_q, off_k, off_d = rng.randrange(len(classes_q)), rng.randrange(len(classes_k)), rng.randrange(len(dims))
    out = []
    for i in range(count):
        forced = {f for f, j in home.items() if j == i}
        on = {f for f in level if rng.random() < 0.25} | forced | (always & set(level))
        if "batch" in forced and "varlen" not in forced:
            on.discard("varlen")
        causal = "causal" in on
        tie = square or (square_causal and causal)
        d = dims[(i + off_d) % len(dims)]
        dv = rng.choice([x for x in dims if x != d]) if "dv" in on and len(dims) > 1 else d
        group = rng.randint(2, max_group) if "gqa" in on and max_group >= 2 else 1
        heads_kv = rng.randint(1, max_heads_kv)
        seqlens = _seqlens(rng, lengths, max_nq, max_nk, tie) if "varlen" in on else None
        if seqlens is not None:
            n_q, n_k = length_class(sum(a for a, _ in seqlens)), length_class(sum(b for _, b in seqlens))
            cap_lo = max(sum(a for a, _ in seqlens), sum(b for _, b in seqlens))
        elif tie:  # Nk = Nq: a class both caps admit
            common = [c for c in classes_q if c in ck]
            n_q = n_k = common[(i + off_q) % len(common)]
            cap_lo = cq[n_q][0]
        else:
            n_q, n_k = classes_q[(i + off_q) % len(classes_q)], classes_k[(3 * i + off_k) % len(classes_k)]
            cap_lo = max(cq[n_q][0], ck[n_k][0])
        window = (rng.choice(_sides(cap_lo)), rng.choice(_sides(cap_lo))) if "window" in on else None
        batch = rng.randint(2, max_batch) if "batch" in on and seqlens is None and max_batch >= 2 else 1
        out.append(Launch(d, dv, heads_kv * group, heads_kv, batch, causal, window, bool(on & {"mask", "empty_rows"}),
                          seqlens, "noncontig" in on, "poison" in on, tie, n_q, n_k))
    if "sparse" not in families:
        return tuple(out)
    srng = random.Random(f"{seed}:sparse")
    dense = {home[f] for f in ("varlen", "mask", "empty_rows") if f in home}
    free = [i for i, l in enumerate(out) if l.seqlens is None]
    sure = srng.choice([i for i in free if i not in dense] or free) if free else None
    for i in free:
        if not ("sparse" in always or i == sure or (i not in dense and srng.random() < 0.25)):
            continue
        l = out[i]
        b = srng.choice(sorted(set(sparse_blocks)))
        tq = tile_class(srng.choice(cq[l.n_q]), b)  # tile counts of one length of each class (the others follow)
        tk = tq if l.square else tile_class(srng.choice(ck[l.n_k]), b)
        out[i] = l._replace(mask=True, sparse=(b, tq, tk))
    return tuple(out)


def _seqlens(rng: random.Random, lengths, max_nq: int, max_nk: int, tie: bool) -> tuple:
    """Varlen sequences (sorted (len_q, len_k) pairs, zero lengths allowed, totals within the caps)."""
    n_seq = rng.randint(1, 4)
    pick = lambda cap: rng.choice([0] + [n for n in lengths if n <= cap])  # noqa: E731
    pairs = [[pick(max(1, max_nq // n_seq)), pick(max(1, max_nk // n_seq))] for _ in range(n_seq)]
    if tie:
        for p in pairs:
            p[1] = p[0]
    if sum(a for a, _ in pairs) == 0:
        pairs[0][0] = 1
        if tie:
            pairs[0][1] = 1
    if sum(b for _, b in pairs) == 0:
        pairs[-1][1] = 1
        if tie:
            pairs[-1][0] = 1
    return tuple(sorted((a, b) for a, b in pairs))


def _widths(cls: str, cap: int, edges: dict) -> tuple[list, list]:
    """(edge widths, all widths) in [0, cap] whose side as the kernel takes it, min(w, cap), is of
    class ``cls``; ``edges`` as ``strategies.window_edges`` returns them."""
    fits = lambda w: side_class(min(w, cap)) == cls  # noqa: E731
    at_edges = sorted({w for es in edges.values() for ws in es.values() for w in ws if fits(w)})
    return at_edges, [w for w in range(cap + 1) if fits(w)]


def _tiled(lengths: list, launch: Launch, side: int) -> list:
    """The ``lengths`` whose tile count is of ``launch``'s class (all of them off the sparse route)."""
    if launch.sparse is None:
        return lengths
    b = launch.sparse[0]
    return [n for n in lengths if tile_class(n, b) == launch.sparse[side]]


@st.composite
def _in_launch(draw, launch: Launch, lengths_q: list, lengths_k: list, families: frozenset, blocks: tuple,
               max_nk: int, densities: tuple | None = None) -> ProblemSpec:
    def on(family: str) -> bool:
        return family in families and draw(st.booleans())

    lengths_q, lengths_k = _tiled(lengths_q, launch, 1), _tiled(lengths_k, launch, 2)
    if launch.seqlens is not None:
        seqlens = tuple(draw(st.permutations(launch.seqlens)))
        n_q, n_k = sum(a for a, _ in seqlens), sum(b for _, b in seqlens)
    else:
        seqlens = None
        n_q = draw(st.sampled_from(lengths_q))
        n_k = n_q if launch.square else draw(st.sampled_from(lengths_k))
    window = None
    if launch.window is not None:
        cap = max(n_q, n_k)
        sides = []
        # the edges of the block-sparse tiles too (where the walk splits partial from full tiles)
        edge_blocks = blocks if launch.sparse is None else tuple(sorted(set(blocks) | {launch.sparse[0]}))
        for cls, edges in zip(launch.window, window_edges(n_q, n_k, edge_blocks, max_nk)):
            at_edges, anywhere = _widths(cls, cap, edges)
            # 3/4 of the sides at a tile edge (± 1) of their class, as strategies._edge does
            use_edge = bool(at_edges) and draw(st.integers(0, 3)) > 0
            sides.append(draw(st.sampled_from(at_edges if use_edge else anywhere)))
        window = tuple(sides)
    mask_kind, empty_rows = "none", False
    if launch.sparse is not None:  # masks that are whole tiles: every example takes the block-sparse route
        mask_kind = draw(st.sampled_from(TILE_KINDS))
    elif launch.mask:
        kinds = list(MASK_KINDS[1:]) if "mask" in families else []
        empty_rows = "empty_rows" in families and (not kinds or draw(st.booleans()))
        if empty_rows:
            kinds = ["none", *kinds]
        mask_kind = draw(st.sampled_from(kinds))
    huge = draw(st.sampled_from(HUGE_LOGITS)) if on("huge_logits") else 0.0
    ties, zero_q, late_max = on("ties"), on("zero_q"), on("late_max")
    poison = draw(st.sampled_from(POISONS[1:])) if launch.poison else None
    block = draw(st.sampled_from(blocks)) if launch.sparse is None else launch.sparse[0]
    seed = draw(st.integers(0, 2**32 - 1))
    spec = ProblemSpec(batch=launch.batch, heads_q=launch.heads_q, heads_kv=launch.heads_kv, n_q=n_q, n_k=n_k,
                       d=launch.d, dv=launch.dv, causal=launch.causal, window=window, seqlens=seqlens,
                       mask_kind=mask_kind, block=block, empty_rows=empty_rows, huge_logits=huge, ties=ties,
                       zero_q=zero_q, late_max=late_max, poison=poison, noncontig=launch.noncontig,
                       seed=seed, sparse=launch.sparse is not None,
                       density=draw_density(draw, mask_kind, densities))
    got = launch_of(spec, launch.square)
    assert got == launch, f"a problem drawn for {launch} has launch {got}"  # the construction above is wrong
    return spec


def problems(launches: tuple, *, lengths, families, blocks, max_nq: int, max_nk: int,
             densities: tuple | None = None) -> st.SearchStrategy:
    """Problems of ``launches`` only: a launch (shrinking toward the first), then a problem in it
    whose lengths come from ``lengths`` (module docstring); ``densities``: the tile densities of
    block-sparse masks (``strategies.attention_problems``)."""
    check_densities(densities)
    cq, ck = _by_class(lengths, max_nq), _by_class(lengths, max_nk)
    fams = frozenset(families)
    blocks = tuple(sorted(set(blocks)))
    return st.one_of(*[_in_launch(l, cq.get(l.n_q, [1]), ck.get(l.n_k, [1]), fams, blocks, max_nk, densities)
                       for l in launches])


def specimen(launch: Launch, *, lengths, max_nq: int, max_nk: int) -> ProblemSpec:
    """The smallest problem of ``launch``: the shortest lengths of its classes, the narrowest
    window sides, a random mask (or empty rows; on the block-sparse route a block-sparse mask of
    its tile size), NaN poison, no value family, seed 0."""
    if launch.seqlens is not None:
        seqlens = launch.seqlens
        n_q, n_k = sum(a for a, _ in seqlens), sum(b for _, b in seqlens)
    else:
        seqlens = None
        n_q = _tiled(_by_class(lengths, max_nq)[launch.n_q], launch, 1)[0]
        n_k = n_q if launch.square else _tiled(_by_class(lengths, max_nk)[launch.n_k], launch, 2)[0]
    window = None
    if launch.window is not None:
        cap = max(n_q, n_k)
        window = tuple(_widths(cls, cap, {})[1][0] for cls in launch.window)
    if launch.sparse is not None:
        return ProblemSpec(batch=launch.batch, heads_q=launch.heads_q, heads_kv=launch.heads_kv, n_q=n_q, n_k=n_k,
                           d=launch.d, dv=launch.dv, causal=launch.causal, window=window, mask_kind="block_sparse",
                           block=launch.sparse[0], poison="nan" if launch.poison else None, noncontig=launch.noncontig,
                           sparse=True)
    return ProblemSpec(batch=launch.batch, heads_q=launch.heads_q, heads_kv=launch.heads_kv, n_q=n_q, n_k=n_k,
                       d=launch.d, dv=launch.dv, causal=launch.causal, window=window, seqlens=seqlens,
                       mask_kind="random" if launch.mask else "none", poison="nan" if launch.poison else None,
                       noncontig=launch.noncontig)


def stride_specimens(launch: Launch, *, lengths, max_nq: int, max_nk: int) -> list:
    """For a block-sparse launch, its specimen at the smallest lengths of each further ``int_class``
    of the tile counts (Tq, Tk) its lengths reach (the classes of the tile grid's strides, which the
    walk-list plan kernel is specialised on); [] for any other launch."""
    if launch.sparse is None or launch.seqlens is not None:
        return []
    b = launch.sparse[0]
    first = specimen(launch, lengths=lengths, max_nq=max_nq, max_nk=max_nk)
    seen = {(int_class(-(-first.n_q // b)), int_class(-(-first.n_k // b)))}
    out = []
    qs = _tiled(_by_class(lengths, max_nq)[launch.n_q], launch, 1)
    ks = _tiled(_by_class(lengths, max_nk)[launch.n_k], launch, 2)
    for n_q, n_k in sorted(((q, q) for q in qs) if launch.square else ((q, k) for q in qs for k in ks),
                           key=lambda qk: (qk[0] * qk[1], qk)):
        cls = (int_class(-(-n_q // b)), int_class(-(-n_k // b)))
        if cls not in seen:
            seen.add(cls)
            out.append(first._replace(n_q=n_q, n_k=n_k))
    return out


def describe(launch: Launch, lengths) -> str:
    """One line: e.g. "d64 dv8 Hq3/Hkv1 B1 causal window(one,other) mask noncontig poison Nq{65,1025} Nk{1}"."""
    def members(cls, keep=lambda n: True):
        return "{" + ",".join(str(n) for n in sorted(set(lengths)) if length_class(n) == cls and keep(n)) + "}"
    parts = [f"d{launch.d}", f"dv{launch.dv}", f"Hq{launch.heads_q}/Hkv{launch.heads_kv}", f"B{launch.batch}"]
    parts += [name for name, on in (("causal", launch.causal), ("mask", launch.mask), ("noncontig", launch.noncontig),
                                    ("poison", launch.poison), ("square", launch.square)) if on]
    if launch.sparse is not None:
        parts.append(f"block-sparse{launch.sparse[0]}")
    if launch.window is not None:
        parts.append(f"window({launch.window[0]},{launch.window[1]})")
    if launch.seqlens is not None:
        parts.append(f"varlen{list(launch.seqlens)}")
    elif launch.sparse is not None:
        b = launch.sparse[0]
        parts += [f"Nq{members(launch.n_q, lambda n: tile_class(n, b) == launch.sparse[1])}",
                  f"Nk{members(launch.n_k, lambda n: tile_class(n, b) == launch.sparse[2])}"]
    else:
        parts += [f"Nq{members(launch.n_q)}", f"Nk{members(launch.n_k)}"]
    return " ".join(parts)


def extreme(launch: Launch, *, lengths, max_nq: int, max_nk: int) -> ProblemSpec:
    """``launch``'s problem at the longest lengths of its classes (each launch's explicit example
    at the front of a compile-aware campaign): the widest window sides of their classes, a random
    mask with empty rows (or empty rows alone; on the block-sparse route its block-sparse mask), NaN
    poison, huge logits off, seed 0."""
    s = specimen(launch, lengths=lengths, max_nq=max_nq, max_nk=max_nk)
    if launch.seqlens is None:
        n_q = _tiled(_by_class(lengths, max_nq)[launch.n_q], launch, 1)[-1]
        n_k = n_q if launch.square else _tiled(_by_class(lengths, max_nk)[launch.n_k], launch, 2)[-1]
        s = s._replace(n_q=n_q, n_k=n_k)
    if launch.window is not None:
        cap = max(s.n_q, s.n_k)
        s = s._replace(window=tuple(_widths(cls, cap, {})[1][-1] for cls in launch.window))
    if launch.mask and launch.sparse is None:
        s = s._replace(empty_rows=True)
    return s
