"""The torch backend: the tiled algorithm of the Triton kernel in plain torch (CPU or GPU), organised
for a CPU: a sweep over key chunks, each chunk computed against ALL the query rows that see it at once.

A torch op on the CPU is one OpenMP parallel region, and each region ends in a barrier that waits for
its slowest thread; on a loaded machine that is a thread another process has taken off its core. So a
call issues few, large ops: the segment's live keys are cut into chunks of whole ``BLOCK_N``-key tiles
(``_chunk_tiles``), and one step computes one chunk against the contiguous range of rows whose window
reaches it (for causal, rows [c0 − (Nk − Nq), Nq): one matmul), so that the op count grows with the
number of chunks, not with tile-rows × chunks. Work stays skipped where it was: rows no key of the chunk
reaches are not in its range, keys no row of the step reaches are cut from it, and a dense mask (or
block-sparse tiles, or a bias's −inf entries) trims each step to its live rows and its live key tiles.
A causal call is swept in about ``CUT_STEPS`` chunks, each against the rows at and below it: the score
products done are (S + 1) / 2S of a dense call's with S chunks (62.5 % at S = 4). Memory: a step holds
at most ``SCORE_ELEMS`` scores (the rows of a chunk are taken in batches that fit), O(N · chunk), never
N × N. The online-softmax state of every row is kept for the whole call and each step merges into it;
with running state (m, ℓ, acc) per row and a step's scores s,

    m' = max(m, max_j s_j)           ref = m' if m' > −inf else 0      (the ⊥ guard)
    α  = e^(m − ref)                 p_j = e^(s_j − ref)  (0 on masked pairs)
    ℓ' = α ℓ + Σ_j p_j               acc' = α acc + p V

and at the end out = acc / ℓ (0 when ℓ = 0), lse = m + log ℓ (−inf when ℓ = 0). Each row meets the chunks
in key order. The merge is associative, so a chunk of several tiles is the same function as one tile per
step; a mutant (``bugs``) runs one tile per step, so that a bug in the per-tile rescale acts at every tile
boundary as it does in the Triton kernel. The backward recomputes p = e^(s − lse) per step and uses
δ = rowsum(dO ∘ O) − dlse.

GQA runs without copying K/V per query head: q is viewed as (B·Hkv, G, N, D) and the G query heads
of a kv head are stacked as rows of one bmm. ``bias`` (an additive float mask, broadcastable to
(B, Hq, Nq, Nk)) is added to the scaled scores; its −inf entries are masked pairs like a False in
``mask`` (so NaN/inf planted where they point cannot leak either).

Dropout (``prob.dropout``): each step's keep bits z are regenerated from the seed and the pairs'
positions (``dropout.keep_bits``, the Triton kernels' Philox bits); the forward accumulates (p ∘ z) V and
scales out by 1/(1 − p_r) (p_r the realised drop probability, ``dropout.realised_p``; ℓ, lse undropped);
the backward uses the same z: dV += (r ∘ p)ᵀ dO and dP = r ∘ (dO Vᵀ) with r = z/(1 − p_r), and
δ = rowsum(dO ∘ O) with the dropped-out O.

Arithmetic is float32 (float64 for float64 inputs); q is multiplied by the scale once per call, before
any product (s = (scale · q) kᵀ; exact for power-of-two scales such as 1/8 at D = 64). A step's keys
are all read by some allowed pair of it and its rows all read some key (the window's ranges are exact;
with a mask, keys or rows read only by masked pairs are zeroed before any product), so NaN/inf planted
where only masked pairs read cannot leak through 0 · NaN. (A mutant's steps take whole tile-rows, ``_steps``; rows there that read nothing are
zeroed like a mask's.)

Measured (``flashproof bench-cpu``; docs/kernel.md, "The CPU path's speed"): at B = 1, H = 8, N = 1024,
D = 64, float32, 83 / 99 ATen ops per forward / backward dense and 163 / 189 causal, where the
tile-row layout this replaced issued 463 / 521 and 985 / 1277 (``tests/kernels/test_torch_steps.py``).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from .dropout import keep_bits

BLOCK_N = 64           # keys per tile: the unit in which fully masked keys are skipped
BLOCK_M = 128          # queries per tile-row of a mutant's steps (``_steps``)
KEY_CHUNK = 1024       # keys per step at most (whole tiles)
CUT_STEPS = 4          # a segment that a window or a mask cuts is swept in about this many chunks
SCORE_ELEMS = 1 << 22  # scores per step at most (B · Hq · rows · keys; 16 MiB in float32): a chunk's rows are
#                        batched to fit (a larger block, 32 MiB, measured 1.35× slower: it leaves the caches)
_NEG = float("-inf")


class _Segment(NamedTuple):
    """One sequence (the whole call unless varlen): its rows ``qs`` and keys ``ks``; ``allowed``: bool
    (B|1, Hkv|1, G|1, n, m) or None (every pair inside the window is allowed); ``bias``: float
    (B|1, Hkv|1, G|1, n, m) in the compute dtype, or None."""

    qs: slice
    ks: slice
    allowed: Optional[torch.Tensor]
    bias: Optional[torch.Tensor]


class _Step(NamedTuple):
    """One step of a segment: its rows ``rows`` (a slice) against its keys ``keys`` (a slice, or an
    int64 index tensor where a mask leaves holes), both segment-local; ``allowed``: bool
    (B|1, Hkv|1, G|1, R, c) where a mask is given, else None (the window's predicate alone, ``fills``);
    ``fills``: ((row slice of the step, bool (…, r, c) True on masked pairs), …), the predicate."""

    rows: slice
    keys: object
    allowed: Optional[torch.Tensor]
    fills: tuple


def forward(q, k, v, prob, route=None):
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv) in q's
    dtype, lse (B, Hq, Nq) float32 (float64 for float64 inputs). ``route``: the plan (unused here)."""
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    B, Hq, Nq, _ = q.shape
    Hkv, G, Dv = k.shape[1], prob.groups, v.shape[3]
    bug = "gqa_map" in prob.bugs
    qg = _heads(_group(q, Hkv, bug).to(cdt) * prob.scale)  # (B·Hkv, G, Nq, D), scaled once
    kc, vc = _heads(k.to(cdt)), _heads(v.to(cdt))  # (B·Hkv, Nk, ·)
    m_i = torch.full((B * Hkv, G, Nq), _NEG, dtype=cdt, device=q.device)  # the running state of every row
    l_i = torch.zeros_like(m_i)
    acc = torch.zeros(B * Hkv, G, Nq, Dv, dtype=cdt, device=q.device)
    for seg in _segments(q, k, prob):
        ks, vs, kept = kc[:, seg.ks], vc[:, seg.ks], _kept(q, k, seg, prob)
        for st in _steps(seg, prob, B * Hq, q.device):
            r = _shift(st.rows, seg.qs.start)
            _forward_step(qg[:, :, r], ks, vs, m_i[..., r], l_i[..., r], acc[:, :, r], seg, st, prob, kept, B)
    empty = l_i == 0
    l_safe = torch.where(empty, 1, l_i)
    out = acc.div_(l_safe[..., None])
    if prob.dropout is not None:
        out.mul_(prob.dropout.scale)
    lse = torch.where(empty, _NEG, m_i + torch.log(l_safe))
    return _ungroup(out.unflatten(0, (B, Hkv)), bug).to(q.dtype), _ungroup(lse.unflatten(0, (B, Hkv)), bug)


def backward(q, k, v, out, lse, dout, dlse, prob, route=None, ds=None):
    """Gradients (dq, dk, dv) shaped like (q, k, v), in their dtype. ``ds``: None, or a zero
    (B, Hq, Nq, Nk) tensor in the compute dtype that receives dS = P ∘ (dP − δ), the gradient of the
    scaled scores (a bias's gradient before its broadcast dims are summed; 0 on masked pairs)."""
    cdt = lse.dtype
    B, Hq, Nq, D = q.shape
    Hkv = k.shape[1]
    bug = "gqa_map" in prob.bugs
    finite = lse > _NEG
    delta = (dout.to(cdt) * out.to(cdt)).sum(-1)  # δ = rowsum(dO ∘ O), (B, Hq, Nq)
    if dlse is not None:
        delta = delta - torch.where(finite, dlse.to(cdt), 0)
    neg_lse = torch.where(finite, -lse, 0)
    grouped = lambda x: _heads(_group(x, Hkv, bug))  # noqa: E731  (B, Hq, Nq, ·) -> (B·Hkv, G, Nq, ·)
    qg, dog = grouped(q.to(cdt) * prob.scale), grouped(dout.to(cdt))  # q scaled once
    lg, dg = grouped(neg_lse), grouped(-delta)  # −lse, −δ (B·Hkv, G, Nq)
    kc, vc = _heads(k.to(cdt)), _heads(v.to(cdt))  # (B·Hkv, Nk, ·)
    dq = torch.zeros(qg.shape, dtype=cdt, device=q.device)
    dk = torch.zeros(kc.shape, dtype=cdt, device=q.device)
    dv = torch.zeros(vc.shape, dtype=cdt, device=q.device)
    dsg = None if ds is None else _group(ds, Hkv, bug)  # (B, Hkv, G, Nq, Nk), a view: written in place
    for seg in _segments(q, k, prob):
        ks, vs, kept = kc[:, seg.ks], vc[:, seg.ks], _kept(q, k, seg, prob)
        dks, dvs = dk[:, seg.ks], dv[:, seg.ks]  # views: the steps add into them
        for st in _steps(seg, prob, B * Hq, q.device):
            r = _shift(st.rows, seg.qs.start)
            _backward_step(qg[:, :, r], ks, vs, dog[:, :, r], lg[..., r], dg[..., r], dq[:, :, r], dks, dvs,
                           seg, st, prob, kept, B, None if dsg is None else dsg[:, :, :, r, seg.ks])
    dq = _ungroup(dq.unflatten(0, (B, Hkv)), bug)
    return dq.to(q.dtype), dk.view(k.shape).to(k.dtype), dv.view(v.shape).to(v.dtype)


def _heads(x):
    """(B, Hkv, ...) -> (B·Hkv, ...): the batched dim of the steps' bmms (a view where the layout allows)."""
    return x.reshape(-1, *x.shape[2:])


def _shift(s, by):
    return slice(s.start + by, s.stop + by)


def _group(x, hkv, bug):
    """(B, Hq, ...) -> (B, Hkv, G, ...): the G query heads that read each kv head (head h reads
    h // G; with the ``gqa_map`` bug h % Hkv); a broadcast head dim (1) becomes (1, 1)."""
    if x.shape[1] == 1:
        return x.unsqueeze(2)
    g = x.shape[1] // hkv
    return x.unflatten(1, (g, hkv)).transpose(1, 2) if bug else x.unflatten(1, (hkv, g))


def _ungroup(x, bug):
    """(B, Hkv, G, ...) -> (B, Hq, ...), contiguous; the inverse of ``_group``."""
    return (x.transpose(1, 2) if bug else x).flatten(1, 2).contiguous()


def _segments(q, k, prob):
    """The sequences of the call (``_Segment``), with the dense mask (block-sparse tiles expanded and
    a bias's −inf entries folded in) and the bias grouped as q is."""
    Nq, Nk = q.shape[2], k.shape[2]
    hkv, bug = k.shape[1], "gqa_map" in prob.bugs
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    dense = prob.mask
    if prob.tiles is not None:
        t = prob.tiles
        tiled = t.tiles.repeat_interleave(t.block_q, 2)[:, :, :Nq].repeat_interleave(t.block_k, 3)[..., :Nk]
        dense = tiled if dense is None else dense & tiled
    bias = prob.bias
    if bias is not None:
        finite = bias != _NEG
        dense = finite if dense is None else dense & finite
        bias = _group(bias.to(cdt), hkv, bug)
    dense = None if dense is None else _group(dense, hkv, bug)
    if prob.seqlens is None:
        spans = [(0, Nq, 0, Nk)]
    else:
        cq, ck = prob.seqlens[0].tolist(), prob.seqlens[1].tolist()
        spans = list(zip(cq, cq[1:], ck, ck[1:]))
    for q0, q1, k0, k1 in spans:
        if q1 > q0:
            yield _Segment(slice(q0, q1), slice(k0, k1),
                           None if dense is None else dense[..., q0:q1, k0:k1],
                           None if bias is None else bias[..., q0:q1, k0:k1])


def _chunk_tiles(span, window, masked, bugs) -> int:
    """Key tiles per chunk for a segment whose live keys span ``span`` tiles: one with a mutant
    (``bugs``: one tile per step, as the Triton kernel); the whole span (at most ``KEY_CHUNK`` keys)
    where nothing cuts it (no window bound, no mask); else about a ``CUT_STEPS``-th of the span, or of
    the window's width where both its sides are bounded and it is narrower: the finer the chunks, the
    less of the causal triangle's far side (or the band's outside) a step computes, the more steps."""
    if bugs:
        return 1
    most = KEY_CHUNK // BLOCK_N
    left, right = window
    if left is None and right is None and not masked:
        return min(most, span)
    width = span if left is None or right is None else min(span, -(-(left + right + 1) // BLOCK_N))
    return max(1, min(most, -(-width // CUT_STEPS)))


def _steps(seg, prob, heads, device):
    """The steps of a segment (``_Step``) in key order: each key chunk against the rows whose window
    reaches it, in batches of at most ``SCORE_ELEMS / (heads · chunk)`` rows (``heads`` = B · Hq). A
    mutant's steps take whole tile-rows of ``BLOCK_M`` (as the Triton kernel's tiles: a row meets the
    fully masked tiles of its tile-row, where a guard-less rescale fails)."""
    n, m = seg.qs.stop - seg.qs.start, seg.ks.stop - seg.ks.start
    left, right = prob.window
    off = m - n  # bottom-right alignment: query i sits at key position i + off
    n_tiles = m // BLOCK_N if "tile_floor" in prob.bugs else -(-m // BLOCK_N)
    end = min(m, n_tiles * BLOCK_N)
    lo = 0 if left is None else max(0, off - left)  # the keys some row may read: [lo, hi)
    hi = end if right is None else min(end, n - 1 + off + right + 1)
    if lo >= hi:
        return
    t0, t1 = lo // BLOCK_N, -(-hi // BLOCK_N)
    per = _chunk_tiles(t1 - t0, prob.window, seg.allowed is not None, prob.bugs)
    unit = BLOCK_M if prob.bugs else 1
    for t in range(t0, t1, per):
        c0, c1 = t * BLOCK_N, min((t + per) * BLOCK_N, t1 * BLOCK_N, m)
        r0 = 0 if right is None else max(0, c0 - off - right)  # the rows whose window reaches [c0, c1)
        r1 = n if left is None else min(n, c1 - 1 - off + left + 1)
        if r0 >= r1:
            continue
        a0, a1 = r0 // unit * unit, min(n, -(-r1 // unit) * unit)
        batch = max(unit, SCORE_ELEMS // (heads * (c1 - c0)) // unit * unit)
        for b0 in range(a0, a1, batch):
            b1 = min(b0 + batch, a1)
            if max(b0, r0) < min(b1, r1):
                st = _step(seg, prob, (b0, b1), (max(b0, r0), min(b1, r1)), c0, c1, off, unit, device)
                if st is not None:
                    yield st


def _step(seg, prob, rows, reach, c0, c1, off, unit, device):
    """Rows ``rows`` = [b0, b1) against keys [c0, c1) of a segment as a ``_Step`` (None if no pair is
    allowed), ``reach`` = [e0, e1) the rows among them whose window reaches the chunk: the keys cut to
    those these rows reach, the window's predicate on the rows it cuts, and with a mask the rows and key
    tiles trimmed to those with an allowed pair (rows in whole ``unit``s)."""
    left, right = prob.window
    (b0, b1), (e0, e1) = rows, reach
    k0 = c0 if left is None else max(c0, e0 + off - left)  # the keys some row of [e0, e1) reaches
    k1 = c1 if right is None else min(c1, e1 - 1 + off + right + 1)
    if k0 >= k1:
        return None
    fills = tuple((slice(x0 - b0, x1 - b0), _outside(x0, x1, k0, k1, off, left, right, device))
                  for x0, x1 in _cut_rows(b0, b1, k0, k1, off, left, right))
    if seg.allowed is None and (b0, b1) == (e0, e1):  # every row and key of the step is read
        return _Step(slice(b0, b1), slice(k0, k1), None, fills)
    a = (torch.ones(1, 1, 1, b1 - b0, k1 - k0, dtype=torch.bool, device=device) if seg.allowed is None
         else seg.allowed[..., b0:b1, k0:k1].clone())
    for x, outside in fills:
        a[..., x, :] &= ~outside
    live = torch.nonzero(a.any(-1).flatten(0, -2).any(0)).flatten().tolist()  # rows with an allowed pair
    if not live:
        return None
    x0, x1 = (b0 + live[0]) // unit * unit, min(b1, -(-(b0 + live[-1] + 1) // unit) * unit)
    a = a[..., max(x0, b0) - b0:x1 - b0, :]
    col = a.any(-2).flatten(0, -2).any(0)  # (c,): keys with an allowed pair
    col = torch.nn.functional.pad(col, (0, -(-col.numel() // BLOCK_N) * BLOCK_N - col.numel()))
    tiles = torch.nonzero(col.view(-1, BLOCK_N).any(1)).flatten().tolist()  # live tiles, counted from k0
    if tiles[-1] - tiles[0] == len(tiles) - 1:  # contiguous: a slice
        local = slice(tiles[0] * BLOCK_N, min((tiles[-1] + 1) * BLOCK_N, k1 - k0))
        keys = slice(k0 + local.start, k0 + local.stop)
    else:
        local = torch.cat([torch.arange(t * BLOCK_N, min((t + 1) * BLOCK_N, k1 - k0)) for t in tiles]).to(device)
        keys = k0 + local
    a = a[..., local]
    return _Step(slice(max(x0, b0), x1), keys, a, ((slice(None), ~a),))


def _cut_rows(b0, b1, k0, k1, off, left, right):
    """The rows of [b0, b1) whose window does not hold all of keys [k0, k1), as at most two
    (x0, x1) ranges: the rows whose right bound falls short of k1 − 1 (the causal diagonal), then
    those whose left bound passes k0."""
    ranges = []
    if right is not None:
        ranges.append((b0, min(b1, k1 - 1 - off - right)))
    if left is not None:
        ranges.append((max(b0, k0 - off + left + 1), b1))
    ranges = [(x0, x1) for x0, x1 in ranges if x1 > x0]
    if len(ranges) == 2 and ranges[1][0] <= ranges[0][1]:
        ranges = [(b0, b1)]
    return ranges


def _outside(x0, x1, k0, k1, off, left, right, device):
    """bool (x1 − x0, k1 − k0): True where key j ∈ [k0, k1) lies outside row i ∈ [x0, x1)'s window
    [i + off − left, i + off + right], as triangles of the (row, key) grid (one tril/triu each)."""
    grid = torch.ones(x1 - x0, k1 - k0, dtype=torch.bool, device=device)
    out = None if right is None else grid.triu(x0 + off + right - k0 + 1)  # j − k0 > (i − x0) + x0 + off + right − k0
    if left is not None:
        below = grid.tril(x0 + off - left - k0 - 1)  # j − k0 < (i − x0) + x0 + off − left − k0
        out = below if out is None else out | below
    return out


def _kept(q, k, seg, prob):
    """None without dropout, else kept(rows, keys) -> bool (B, Hkv, G, R, c): the keep bits of a step's
    rows against its keys (slices or an index tensor, segment-local): rows at their positions in q, key
    columns counted from the segment's start (``dropout.keep_bits``)."""
    if prob.dropout is None:
        return None
    B, Hq, Nq = q.shape[:3]
    Nk, dev = k.shape[2], q.device
    ar = lambda a, b: torch.arange(a, b, dtype=torch.int64, device=dev)  # noqa: E731
    b = ar(0, B)[:, None, None, None, None]
    h = _group(ar(0, Hq)[None, :, None, None], k.shape[1], "gqa_map" in prob.bugs)  # (1, Hkv, G, 1, 1)

    def kept(rows, keys):
        i = ar(seg.qs.start + rows.start, seg.qs.start + rows.stop)[None, None, None, :, None]
        j = ar(keys.start, keys.stop) if isinstance(keys, slice) else keys.to(torch.int64)
        return keep_bits(prob.dropout, Hq, Nq, Nk, b, h, i, j[None, None, None, None, :])  # j: sequence-local
    return kept


def _zero_unread(x, a, dim, b):
    """x with the rows that no allowed pair of ``a`` (B|1, Hkv|1, G|1, R, c) reads set to 0: keys (dim=-2,
    x (B·Hkv, c, ·); a key is read if any query head of its group reads it) or query rows (dim=-1,
    x (B·Hkv, G, R, ·)); b = B."""
    if a is None:
        return x
    live = a.any(dim)  # (B|1, Hkv|1, G|1, c) or (…, R)
    if dim == -2:
        live = live.any(2)
    live = live.expand(b, x.shape[0] // b, *x.shape[1:-1]).reshape(*x.shape[:-1], 1)
    return torch.where(live, x, 0)


def _scores(qb, kb, seg, st, b, shift=None):
    """The scaled scores of a step, bias added and masked pairs −inf: qb (B·Hkv, G, R, D) the queries,
    already scaled, kb (B·Hkv, c, D) -> s (B·Hkv, G, R, c); ``shift`` (B·Hkv, G, R) or None: added to
    every score of its row inside the product (one baddbmm: the backward's −lse)."""
    BH, G, R, D = qb.shape
    q2, kt = qb.reshape(BH, G * R, D), kb.transpose(1, 2)
    s = (torch.bmm(q2, kt) if shift is None else torch.baddbmm(shift.reshape(BH, G * R, 1), q2, kt)).view(BH, G, R, -1)
    if seg.bias is not None:
        s.view(b, BH // b, G, R, -1).add_(seg.bias[..., st.rows, :][..., st.keys])
    for rows, masked in st.fills:
        s.view(b, BH // b, G, R, -1)[..., rows, :].masked_fill_(masked, _NEG)
    return s


def _group_sum(x, g):
    """(B·Hkv·G, c, ·) per query head -> (B·Hkv, c, ·): the sum over a kv head's G query heads (x as it
    is for G = 1)."""
    return x if g == 1 else x.unflatten(0, (-1, g)).sum(1)


def _forward_step(qb, k, v, m_i, l_i, acc, seg, st, prob, kept, b):
    """One step. qb (B·Hkv, G, R, D) the step's queries (scaled), k (B·Hkv, m, D), v (B·Hkv, m, Dv) the
    segment's keys; m_i, l_i (B·Hkv, G, R) and acc (B·Hkv, G, R, Dv): views of the rows' running state,
    merged into in place; b = B."""
    BH, G, R, _ = qb.shape
    bugs = prob.bugs
    kb, vb = _zero_unread(k[:, st.keys], st.allowed, -2, b), _zero_unread(v[:, st.keys], st.allowed, -2, b)
    s = _scores(qb, kb, seg, st, b)  # (B·Hkv, G, R, c)
    m_new = torch.zeros_like(m_i) if "no_max" in bugs else torch.maximum(m_i, s.amax(-1))
    ref = m_new if "unguarded_inf" in bugs else torch.where(m_new > _NEG, m_new, 0)
    p = s.sub_(ref[..., None]).exp_()  # e^(−inf − ref) = 0 on masked pairs
    rowsum = p.sum(-1)  # ℓ counts every allowed pair, dropped or not
    if kept is not None:
        p.view(b, BH // b, G, R, -1).masked_fill_(~kept(st.rows, st.keys), 0)  # dropped pairs: no value sum
    pv = torch.bmm(p.view(BH, G * R, -1), vb).view(acc.shape)  # (B·Hkv, G, R, Dv)
    if "no_alpha" in bugs:
        l_i.add_(rowsum)
        acc.add_(pv)
    else:
        alpha = (m_i - ref).exp_()
        l_i.mul_(alpha).add_(rowsum)
        acc.mul_(alpha[..., None]).add_(pv)
    m_i.copy_(m_new)


def _backward_step(qb, k, v, do, neg_lse, neg_delta, dq, dk, dv, seg, st, prob, kept, b, ds_rows=None):
    """One step; qb (B·Hkv, G, R, D) queries (scaled), do (B·Hkv, G, R, Dv), neg_lse (−lse, −inf replaced
    by 0) and neg_delta (−δ) (B·Hkv, G, R); dq (B·Hkv, G, R, D) a view of the rows' gradient, added into; dk (B·Hkv, m, D)
    and dv (B·Hkv, m, Dv) the segment's views, added into; b = B. ds_rows: None, or the
    (B, Hkv, G, R, m) view of ``ds`` (``backward``) that receives this step's dS."""
    BH, G, R, D = qb.shape
    keys, a = st.keys, st.allowed
    kb, vb = _zero_unread(k[:, keys], a, -2, b), _zero_unread(v[:, keys], a, -2, b)
    qa, doa = _zero_unread(qb, a, -1, b), _zero_unread(do, a, -1, b)
    p = _scores(qa, kb, seg, st, b, neg_lse).exp_()  # (B·Hkv, G, R, c) = e^(s − lse); 0 on masked pairs
    z = None if kept is None else kept(st.rows, keys).view(p.shape)  # r = z/(1 − p): dV += (r ∘ p)ᵀ dO, dP = r ∘ (dO Vᵀ)
    pz = p if z is None else torch.where(z, p * prob.dropout.scale, 0)
    # dV and dK per query head, then summed over the group: one matmul over the G·R stacked rows
    # would accumulate G·R products in one fp32 sum, ~√G less accurate than a plain per-head
    # implementation (docs/fuzz.md, "Findings of long campaigns")
    c = p.shape[-1]
    dvb = _group_sum(torch.bmm(pz.view(BH * G, R, c).transpose(1, 2), doa.reshape(BH * G, R, -1)), G)
    do2, vt = doa.reshape(BH, G * R, -1), vb.transpose(1, 2)
    if z is None:  # dP − δ in one baddbmm
        dpd = torch.baddbmm(neg_delta.reshape(BH, G * R, 1), do2, vt).view(p.shape)
    else:
        dpd = torch.where(z, torch.bmm(do2, vt).view(p.shape) * prob.dropout.scale, 0).add_(neg_delta[..., None])
    ds = p.mul_(dpd)  # p ∘ (dP − δ); 0 on masked pairs
    if ds_rows is not None:
        ds_rows[..., keys] = ds.view(*ds_rows.shape[:-1], c)
    dq.add_(torch.bmm(ds.view(BH, G * R, c), kb).view(dq.shape), alpha=prob.scale)
    dkb = _group_sum(torch.bmm(ds.view(BH * G, R, c).transpose(1, 2), qa.reshape(BH * G, R, D)), G)
    if isinstance(keys, slice):  # (B·Hkv, c, D); qa holds scale · q
        dk[:, keys].add_(dkb)
        dv[:, keys].add_(dvb)
    else:
        dk.index_add_(1, keys, dkb)
        dv.index_add_(1, keys, dvb)
