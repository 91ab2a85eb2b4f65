"""The torch backend: the tiled algorithm of the Triton kernel in plain torch (CPU or GPU), organised
for a CPU: one tile-row of ``BLOCK_M`` queries at a time, against all of its live keys at once.

Tiles are ``BLOCK_M`` queries × ``BLOCK_N`` keys. For each tile-row the keys it may read are found
first — the window (causal) bounds them to one range, a dense mask or block-sparse tiles drop every
key tile with no allowed pair — and only those tiles are computed: a causal call does about half the
work of a dense one. The live keys are taken ``KEY_CHUNK`` at a time (whole tiles, the tiles the window
cuts — the causal diagonal — in chunks of their own, so that only those pay for a predicate) with
batched matmuls, and the chunks merge by the online softmax: with running state (m, ℓ, acc) per row and a
chunk's scores s,

    m' = max(m, max_j s_j)           ref = m' if m' > −inf else 0      (the ⊥ guard)
    α  = e^(m − ref)                 p_j = e^(s_j − ref)  (0 on masked pairs)
    ℓ' = α ℓ + Σ_j p_j               acc' = α acc + p V

and at the end out = acc / ℓ (0 when ℓ = 0), lse = m + log ℓ (−inf when ℓ = 0). The merge is
associative, so a chunk of several tiles is the same function as one tile per step; a mutant (``bugs``)
runs one tile per step, so that a bug in the per-tile rescale acts at every tile boundary as it does in
the Triton kernel. The backward recomputes p = e^(s − lse) per chunk and uses δ = rowsum(dO ∘ O) − dlse.

GQA runs without copying K/V per query head: q is viewed as (B, Hkv, G, N, D) and the G query heads
of a kv head are stacked as rows of one matmul. ``bias`` (an additive float mask, broadcastable to
(B, Hq, Nq, Nk)) is added to the scaled scores; its −inf entries are masked pairs like a False in
``mask`` (so NaN/inf planted where they point cannot leak either).

Dropout (``prob.dropout``): each chunk's keep bits z are regenerated from the seed and the pairs'
positions (``dropout.keep_bits``, the Triton kernels' Philox bits); the forward accumulates (p ∘ z) V and
scales out by 1/(1 − p_r) (p_r the realised drop probability, ``dropout.realised_p``; ℓ, lse undropped);
the backward uses the same z: dV += (r ∘ p)ᵀ dO and dP = r ∘ (dO Vᵀ) with r = z/(1 − p_r), and
δ = rowsum(dO ∘ O) with the dropped-out O.

Arithmetic is float32 (float64 for float64 inputs). Keys or queries read only by masked pairs are
zeroed before any product, so NaN/inf planted there cannot leak through 0 · NaN.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from .dropout import keep_bits

BLOCK_M = 128    # queries per tile-row
BLOCK_N = 64     # keys per tile: the unit in which fully masked keys are skipped
KEY_CHUNK = 1024  # keys per online-softmax step (whole tiles; bounds the score block to BLOCK_M·G × 1024)


class _Segment(NamedTuple):
    """One sequence (the whole call unless varlen): its rows ``qs`` and keys ``ks``; ``allowed``: bool
    (B|1, Hkv|1, G|1, n, m) or None (every pair inside the window is allowed); ``bias``: float
    (B|1, Hkv|1, G|1, n, m) in the compute dtype, or None."""

    qs: slice
    ks: slice
    allowed: Optional[torch.Tensor]
    bias: Optional[torch.Tensor]


def forward(q, k, v, prob, route=None):
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv) in q's
    dtype, lse (B, Hq, Nq) float32 (float64 for float64 inputs). ``route``: the plan (unused here)."""
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    B, Hq, Nq, _ = q.shape
    Hkv, G, Dv = k.shape[1], prob.groups, v.shape[3]
    bug = "gqa_map" in prob.bugs
    qg = _group(q, Hkv, bug)  # (B, Hkv, G, Nq, D)
    out = torch.zeros(B, Hkv, G, Nq, Dv, dtype=cdt, device=q.device)
    lse = torch.full((B, Hkv, G, Nq), float("-inf"), dtype=cdt, device=q.device)
    for seg in _segments(q, k, prob):
        n = seg.qs.stop - seg.qs.start
        ks, vs = k[:, :, seg.ks].to(cdt), v[:, :, seg.ks].to(cdt)
        for i0 in range(0, n, BLOCK_M):
            i1 = min(i0 + BLOCK_M, n)
            qb = qg[:, :, :, seg.qs][:, :, :, i0:i1].to(cdt)  # (B, Hkv, G, bm, D)
            o, l = _forward_rows(qb, ks, vs, seg, i0, i1, prob, _kept(q, k, seg, i0, i1, prob))
            out[:, :, :, seg.qs.start + i0:seg.qs.start + i1] = o
            lse[:, :, :, seg.qs.start + i0:seg.qs.start + i1] = l
    return _ungroup(out, bug).to(q.dtype), _ungroup(lse, bug)


def backward(q, k, v, out, lse, dout, dlse, prob, route=None, ds=None):
    """Gradients (dq, dk, dv) shaped like (q, k, v), in their dtype. ``ds``: None, or a zero
    (B, Hq, Nq, Nk) tensor in the compute dtype that receives dS = P ∘ (dP − δ), the gradient of the
    scaled scores (a bias's gradient before its broadcast dims are summed; 0 on masked pairs)."""
    cdt = lse.dtype
    B, Hq, Nq, D = q.shape
    Hkv = k.shape[1]
    bug = "gqa_map" in prob.bugs
    finite = lse > float("-inf")
    delta = (dout.to(cdt) * out.to(cdt)).sum(-1)  # δ = rowsum(dO ∘ O), (B, Hq, Nq)
    if dlse is not None:
        delta = delta - torch.where(finite, dlse.to(cdt), 0)
    lse_ref = torch.where(finite, lse, 0)
    qg, dog = _group(q, Hkv, bug), _group(dout, Hkv, bug)  # (B, Hkv, G, Nq, ·)
    lg, dg = _group(lse_ref, Hkv, bug), _group(delta, Hkv, bug)  # (B, Hkv, G, Nq)
    dq = torch.zeros(qg.shape, dtype=cdt, device=q.device)
    dk = torch.zeros(k.shape, dtype=cdt, device=q.device)
    dv = torch.zeros(v.shape, dtype=cdt, device=q.device)
    dsg = None if ds is None else _group(ds, Hkv, bug)  # (B, Hkv, G, Nq, Nk), a view: written in place
    for seg in _segments(q, k, prob):
        n = seg.qs.stop - seg.qs.start
        ks, vs = k[:, :, seg.ks].to(cdt), v[:, :, seg.ks].to(cdt)
        dks, dvs = dk[:, :, seg.ks], dv[:, :, seg.ks]  # views: the chunks add into them
        for i0 in range(0, n, BLOCK_M):
            i1 = min(i0 + BLOCK_M, n)
            rows = slice(seg.qs.start + i0, seg.qs.start + i1)
            dq[:, :, :, rows] = _backward_rows(qg[:, :, :, rows].to(cdt), ks, vs,
                                               dog[:, :, :, rows].to(cdt), lg[:, :, :, rows], dg[:, :, :, rows],
                                               dks, dvs, seg, i0, i1, prob, _kept(q, k, seg, i0, i1, prob),
                                               None if dsg is None else dsg[:, :, :, rows, seg.ks])
    return _ungroup(dq, bug).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


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
        finite = bias != float("-inf")
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


def _chunks(seg, n, m, i0, i1, prob, device):
    """The live keys of tile-row [i0, i1) of a segment of n queries and m keys, as a list of key
    chunks: (keys, allowed) with keys a slice or an index tensor (whole tiles, at most KEY_CHUNK keys)
    and allowed bool (B|1, Hkv|1, G|1, i1 − i0, len(keys)) or None (every pair allowed)."""
    left, right = prob.window
    off = m - n  # bottom-right alignment: query i sits at key position i + off
    n_tiles = m // BLOCK_N if "tile_floor" in prob.bugs else -(-m // BLOCK_N)
    lo = 0 if left is None else max(0, i0 + off - left)
    hi = min(m, n_tiles * BLOCK_N) if right is None else min(m, n_tiles * BLOCK_N, i1 - 1 + off + right + 1)
    if lo >= hi:
        return []
    t0, t1 = lo // BLOCK_N, -(-hi // BLOCK_N)
    k0, k1 = t0 * BLOCK_N, min(t1 * BLOCK_N, m)
    dense = None if seg.allowed is None else seg.allowed[..., i0:i1, k0:k1]
    if dense is not None:  # drop the key tiles with no allowed pair in this tile-row
        col = dense.flatten(0, -2).any(0)  # (k1 − k0,)
        col = torch.nn.functional.pad(col, (0, (t1 - t0) * BLOCK_N - col.numel()))
        live = (t0 + torch.nonzero(col.view(-1, BLOCK_N).any(1)).flatten()).tolist()
    else:
        live = list(range(t0, t1))
    per = 1 if prob.bugs else KEY_CHUNK // BLOCK_N
    out = []
    for tiles in _groups(live, per, lambda t: _cut(t, m, i0, i1, off, left, right)):
        if tiles[-1] - tiles[0] == len(tiles) - 1:  # contiguous: a slice
            keys = slice(tiles[0] * BLOCK_N, min((tiles[-1] + 1) * BLOCK_N, m))
            j = torch.arange(keys.start, keys.stop, device=device)
        else:
            keys = j = torch.cat([torch.arange(t * BLOCK_N, min((t + 1) * BLOCK_N, m)) for t in tiles]).to(device)
        a = None
        if left is not None or right is not None:
            pos = torch.arange(i0, i1, device=device)[:, None] + off  # (bm, 1)
            w = torch.ones(i1 - i0, j.numel(), dtype=torch.bool, device=device)
            if left is not None:
                w &= j[None] >= pos - left
            if right is not None:
                w &= j[None] <= pos + right
            if not w.all():  # the window cuts this chunk (the causal diagonal)
                a = w[None, None, None]  # (1, 1, 1, bm, c)
        if seg.allowed is not None:
            d = seg.allowed[..., i0:i1, :][..., keys]
            a = d if a is None else a & d
        out.append((keys, a))
    return out


def _kept(q, k, seg, i0, i1, prob):
    """None without dropout, else kept(keys) -> bool (B, Hkv, G, i1 − i0, len(keys)): the keep bits of
    tile-row [i0, i1) of the segment against its keys ``keys`` (a slice or an index tensor, relative
    to the segment): rows at their positions in q, key columns counted from the segment's start
    (``dropout.keep_bits``)."""
    if prob.dropout is None:
        return None
    B, Hq, Nq = q.shape[:3]
    Nk, dev = k.shape[2], q.device
    ar = lambda a, b: torch.arange(a, b, dtype=torch.int64, device=dev)  # noqa: E731
    b = ar(0, B)[:, None, None, None, None]
    h = _group(ar(0, Hq)[None, :, None, None], k.shape[1], "gqa_map" in prob.bugs)  # (1, Hkv, G, 1, 1)
    i = ar(seg.qs.start + i0, seg.qs.start + i1)[None, None, None, :, None]

    def kept(keys):
        j = ar(keys.start, keys.stop) if isinstance(keys, slice) else keys.to(torch.int64)
        return keep_bits(prob.dropout, Hq, Nq, Nk, b, h, i, j[None, None, None, None, :])  # j: sequence-local
    return kept


def _cut(t, m, i0, i1, off, left, right) -> bool:
    """Whether the window cuts key tile t for some query of tile-row [i0, i1) (the causal diagonal):
    only such tiles need the window's predicate."""
    j0, j1 = t * BLOCK_N, min((t + 1) * BLOCK_N, m)
    return ((left is not None and j0 < i1 - 1 + off - left) or (right is not None and j1 - 1 > i0 + off + right))


def _groups(tiles, per, kind):
    """``tiles`` split into runs of at most ``per`` tiles of one ``kind`` (cut by the window or not), so
    that the tiles no predicate touches are computed without one."""
    runs = []
    for t in tiles:
        if runs and len(runs[-1]) < per and kind(runs[-1][-1]) == kind(t):
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs


def _zero_unread(x, a, dim):
    """x with the rows that no allowed pair of ``a`` reads set to 0: keys (dim=-2 of a, x (B, Hkv, c, ·))
    or query rows (dim=-1, x (B, Hkv, G, bm, ·))."""
    if a is None:
        return x
    live = a.any(dim)  # (B|1, Hkv|1, G|1, c) or (…, bm)
    if dim == -2:
        live = live.any(2)  # a key is read if any query head of its group reads it
    return torch.where(live[..., None], x, 0)


def _forward_rows(qb, k, v, seg, i0, i1, prob, kept=None):
    """One tile-row. qb (B, Hkv, G, bm, D) queries, k (B, Hkv, m, D), v (B, Hkv, m, Dv) ->
    out (B, Hkv, G, bm, Dv), lse (B, Hkv, G, bm)."""
    B, Hkv, G, bm, _ = qb.shape
    bugs = prob.bugs
    n = seg.qs.stop - seg.qs.start
    m_i = torch.full((B, Hkv, G, bm), float("-inf"), dtype=qb.dtype, device=qb.device)
    l_i = torch.zeros_like(m_i)
    acc = torch.zeros(B, Hkv, G, bm, v.shape[3], dtype=qb.dtype, device=qb.device)
    qr = qb.flatten(2, 3)  # (B, Hkv, G·bm, D): the group's query heads as rows of one matmul
    for keys, a in _chunks(seg, n, k.shape[2], i0, i1, prob, qb.device):
        kb, vb = _zero_unread(k[:, :, keys], a, -2), _zero_unread(v[:, :, keys], a, -2)
        s = (qr @ kb.transpose(-1, -2)).mul_(prob.scale).view(B, Hkv, G, bm, -1)  # (B, Hkv, G, bm, c)
        if seg.bias is not None:
            s += seg.bias[..., i0:i1, :][..., keys]
        if a is not None:
            s.masked_fill_(~a, float("-inf"))
        m_new = torch.zeros_like(m_i) if "no_max" in bugs else torch.maximum(m_i, s.amax(-1))
        ref = m_new if "unguarded_inf" in bugs else torch.where(m_new > float("-inf"), m_new, 0)
        p = s.sub_(ref[..., None]).exp_()  # e^(−inf − ref) = 0 on masked pairs
        rowsum = p.sum(-1)  # ℓ counts every allowed pair, dropped or not
        if kept is not None:
            p.masked_fill_(~kept(keys), 0)  # dropped pairs leave only the value sum
        pv = (p.flatten(2, 3) @ vb).view(acc.shape)
        if "no_alpha" in bugs:
            l_i, acc = l_i + rowsum, acc + pv
        else:
            alpha = torch.exp(m_i - ref)
            l_i, acc = alpha * l_i + rowsum, alpha[..., None] * acc + pv
        m_i = m_new
    empty = l_i == 0
    out = acc / torch.where(empty, 1, l_i)[..., None]
    if kept is not None:
        out = out * prob.dropout.scale
    lse = torch.where(empty, float("-inf"), m_i + torch.log(torch.where(empty, 1, l_i)))
    return out, lse


def _backward_rows(qb, k, v, do, lse, delta, dk, dv, seg, i0, i1, prob, kept=None, ds_rows=None):
    """One tile-row; qb (B, Hkv, G, bm, D) queries, do (B, Hkv, G, bm, Dv), lse (−inf replaced
    by 0) and delta (B, Hkv, G, bm). Adds into dk (B, Hkv, m, D) and dv (B, Hkv, m, Dv) (the segment's
    views) and returns dq (B, Hkv, G, bm, D). ds_rows: None, or the (B, Hkv, G, bm, m) view of ``ds``
    (``backward``) that receives this tile-row's dS."""
    B, Hkv, G, bm, D = qb.shape
    n = seg.qs.stop - seg.qs.start
    dq = torch.zeros(qb.shape, dtype=qb.dtype, device=qb.device)  # contiguous: baddbmm_ adds into its view
    for keys, a in _chunks(seg, n, k.shape[2], i0, i1, prob, qb.device):
        kb, vb = _zero_unread(k[:, :, keys], a, -2), _zero_unread(v[:, :, keys], a, -2)
        qa, doa = _zero_unread(qb, a, -1), _zero_unread(do, a, -1)
        qr, dor = qa.flatten(2, 3), doa.flatten(2, 3)  # (B, Hkv, G·bm, ·)
        s = (qr @ kb.transpose(-1, -2)).mul_(prob.scale).view(B, Hkv, G, bm, -1)  # (B, Hkv, G, bm, c)
        if seg.bias is not None:
            s += seg.bias[..., i0:i1, :][..., keys]
        if a is not None:
            s.masked_fill_(~a, float("-inf"))
        p = s.sub_(lse[..., None]).exp_()  # (B, Hkv, G, bm, c); 0 on masked pairs
        z = None if kept is None else kept(keys)  # r = z/(1 − p): dV += (r ∘ p)ᵀ dO, dP = r ∘ (dO Vᵀ)
        pz = p if z is None else torch.where(z, p * prob.dropout.scale, 0)
        # dV and dK per query head, then summed over the group: one matmul over the G·bm stacked rows
        # would accumulate G·bm products in one fp32 sum, ~√G less accurate than a plain per-head
        # implementation (docs/fuzz.md, "Findings of long campaigns")
        dvb = (pz.transpose(-1, -2) @ doa).sum(2)  # (B, Hkv, c, Dv)
        dp = (dor @ vb.transpose(-1, -2)).view(p.shape)
        if z is not None:
            dp = torch.where(z, dp * prob.dropout.scale, 0)
        ds = p.mul_(dp.sub_(delta[..., None]))  # p ∘ (dP − δ); 0 on masked pairs
        if ds_rows is not None:
            ds_rows[..., keys] = ds
        dsr = ds.flatten(2, 3)
        dq.view(B * Hkv, G * bm, D).baddbmm_(dsr.flatten(0, 1), kb.flatten(0, 1), alpha=prob.scale)
        dkb = (ds.transpose(-1, -2) @ qa).sum(2).mul_(prob.scale)  # (B, Hkv, c, D)
        if isinstance(keys, slice):
            dk[:, :, keys] += dkb
            dv[:, :, keys] += dvb
        else:
            dk.index_add_(2, keys, dkb)
            dv.index_add_(2, keys, dvb)
    return dq
